//! The memory cap of a worker: a counting global allocator that refuses any allocation
//! taking one input's live heap past its cap, and the process's address-space limit.
//!
//! A refused allocation ends the worker the way any out-of-memory does in Rust (the
//! standard `memory allocation of N bytes failed` and an abort); the allocator first
//! writes one line saying it was the heap cap, and the supervisor records the input.
//! Unsafe code lives here only: a `GlobalAlloc` that forwards to the system allocator,
//! and `setrlimit`.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// A global allocator that counts live heap bytes and refuses growth past a limit armed
/// for one input ([`arm`]). Install it with `#[global_allocator]` in the worker binary.
pub struct CountingAlloc;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static LIMIT: AtomicUsize = AtomicUsize::new(usize::MAX);
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// The line the allocator writes before refusing (the supervisor looks for it).
pub const HEAP_CAP_MARKER: &str = "pinion-fuzz: heap cap exceeded";

impl CountingAlloc {
    fn admit(size: usize) -> bool {
        let live = LIVE.fetch_add(size, Ordering::Relaxed).saturating_add(size);
        if live > LIMIT.load(Ordering::Relaxed) {
            LIVE.fetch_sub(size, Ordering::Relaxed);
            report(size, live - size);
            return false;
        }
        true
    }
}

// SAFETY: every method forwards to `System` with the caller's layout and pointer unchanged,
// so `System`'s guarantees hold; the counters are only statistics. A refusal returns null,
// which the `GlobalAlloc` contract allows (for `realloc` the old block stays valid).
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !Self::admit(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded as received (see the impl).
        let p = unsafe { System.alloc(layout) };
        if p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if !Self::admit(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded as received (see the impl).
        let p = unsafe { System.alloc_zeroed(layout) };
        if p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as received (see the impl).
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old = layout.size();
        if new_size > old && !Self::admit(new_size - old) {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded as received (see the impl).
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if p.is_null() {
            if new_size > old {
                LIVE.fetch_sub(new_size - old, Ordering::Relaxed);
            }
        } else if new_size < old {
            LIVE.fetch_sub(old - new_size, Ordering::Relaxed);
        }
        p
    }
}

/// Writes the marker line with the sizes, without allocating (we are inside the allocator).
fn report(asked: usize, live: usize) {
    let mut buf = [0u8; 160];
    let mut n = 0;
    let mut put = |s: &[u8]| {
        let k = s.len().min(buf.len() - n);
        buf[n..n + k].copy_from_slice(&s[..k]);
        n += k;
    };
    put(HEAP_CAP_MARKER.as_bytes());
    put(b": asked for ");
    put(digits(asked as u64).as_slice());
    put(b" bytes with ");
    put(digits(live as u64).as_slice());
    put(b" live\n");
    // SAFETY: writes `n` initialised bytes of `buf` to the standard error descriptor; a
    // failed write is ignored (the abort that follows is the report that matters).
    let _ = unsafe { libc::write(2, buf.as_ptr().cast(), n) };
}

/// Decimal digits of `v` in a fixed buffer, as a small stack vector.
fn digits(mut v: u64) -> Digits {
    let mut d = Digits {
        bytes: [0; 20],
        len: 0,
    };
    let mut tmp = [0u8; 20];
    let mut k = 0;
    loop {
        tmp[k] = b'0' + (v % 10) as u8;
        k += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    for i in 0..k {
        d.bytes[i] = tmp[k - 1 - i];
    }
    d.len = k;
    d
}

struct Digits {
    bytes: [u8; 20],
    len: usize,
}

impl Digits {
    fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// Marks the allocator as installed (the worker binary calls this from `main`; without it
/// the heap cap is not enforced and the worker refuses to start).
pub fn mark_installed() {
    INSTALLED.store(true, Ordering::Relaxed);
}

/// Whether [`mark_installed`] was called.
pub fn installed() -> bool {
    INSTALLED.load(Ordering::Relaxed)
}

/// Live heap bytes now (every thread).
pub fn live_bytes() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// Caps the heap at what is live now plus `cap_bytes`, for the input about to run.
pub fn arm(cap_bytes: usize) {
    LIMIT.store(live_bytes().saturating_add(cap_bytes), Ordering::Relaxed);
}

/// Lifts the cap (between inputs: the worker's own bookkeeping is not the input's).
pub fn disarm() {
    LIMIT.store(usize::MAX, Ordering::Relaxed);
}

/// Lowers this process's soft `RLIMIT_AS` to `bytes` (the hard limit is left as it is, so
/// lowering always succeeds unless the hard limit is already lower).
pub fn limit_address_space(bytes: u64) -> std::io::Result<()> {
    let mut cur = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one `rlimit` into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut cur) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let new = libc::rlimit {
        rlim_cur: bytes.min(cur.rlim_max),
        rlim_max: cur.rlim_max,
    };
    // SAFETY: setrlimit reads one `rlimit` from the struct we own.
    if unsafe { libc::setrlimit(libc::RLIMIT_AS, &new) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_print_like_display() {
        for v in [0u64, 7, 10, 1234567890, u64::MAX] {
            assert_eq!(
                std::str::from_utf8(digits(v).as_slice()).unwrap(),
                v.to_string()
            );
        }
    }
}
