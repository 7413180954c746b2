//! The process's own limits: `RLIMIT_AS` and `RLIMIT_DATA`, read with `getrlimit`.
//!
//! They are process state, not files under the detection root, so detection takes them as
//! a value ([`ProcessLimits`]): [`ProcessLimits::of_this_process`] reads them, tests build
//! one. Only the soft limit (`rlim_cur`) matters: it is the one the kernel enforces, and a
//! process may raise it no further than the hard limit.
#![allow(unsafe_code)]

/// One resource limit as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rlimit {
    /// A finite soft limit, in bytes.
    Limit(u64),
    /// `RLIM_INFINITY`.
    Unlimited,
    /// `getrlimit` failed with this OS error number.
    Unreadable(i32),
}

/// `RLIMIT_AS` and `RLIMIT_DATA` of a process.
///
/// `RLIMIT_AS` bounds the virtual address space: every mapping counts, whether or not it is
/// resident (the heap, thread stacks, allocator arenas, mapped files such as a parameter
/// file `srs-store` maps whole, and the address space CUDA reserves for unified addressing
/// when a context is created). `RLIMIT_DATA` bounds private writable mappings and the heap
/// (Linux 4.7 and later), not file mappings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessLimits {
    /// `RLIMIT_AS`.
    pub address_space: Rlimit,
    /// `RLIMIT_DATA`.
    pub data: Rlimit,
}

/// Reads one soft limit. A macro, not a function: the resource's type differs between C
/// libraries (`__rlimit_resource_t` on glibc, `c_int` on musl).
macro_rules! getrlimit {
    ($resource:expr) => {{
        let mut r = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes one `rlimit` into the struct we own and reads nothing
        // else.
        if unsafe { libc::getrlimit($resource, &mut r) } != 0 {
            Rlimit::Unreadable(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
        } else if r.rlim_cur == libc::RLIM_INFINITY {
            Rlimit::Unlimited
        } else {
            Rlimit::Limit(r.rlim_cur)
        }
    }};
}

impl ProcessLimits {
    /// Neither limit set.
    pub const UNLIMITED: ProcessLimits = ProcessLimits {
        address_space: Rlimit::Unlimited,
        data: Rlimit::Unlimited,
    };

    /// This process's soft limits now.
    pub fn of_this_process() -> ProcessLimits {
        ProcessLimits {
            address_space: getrlimit!(libc::RLIMIT_AS),
            data: getrlimit!(libc::RLIMIT_DATA),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_agrees_with_proc_self_limits() {
        // /proc/self/limits prints the same soft limits ("unlimited" or bytes).
        let Ok(text) = std::fs::read_to_string("/proc/self/limits") else {
            return eprintln!("skipped: no /proc/self/limits");
        };
        let soft = |name: &str| -> Rlimit {
            let line = text
                .lines()
                .find(|l| l.starts_with(name))
                .unwrap_or_else(|| panic!("no {name} line in {text}"));
            let rest = line[name.len()..].split_whitespace().next().unwrap();
            match rest {
                "unlimited" => Rlimit::Unlimited,
                n => Rlimit::Limit(n.parse().unwrap()),
            }
        };
        let mine = ProcessLimits::of_this_process();
        assert_eq!(mine.address_space, soft("Max address space"));
        assert_eq!(mine.data, soft("Max data size"));
    }
}
