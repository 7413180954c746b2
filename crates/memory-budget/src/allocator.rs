//! The process's allocator, made to hand freed memory back to the kernel.
//!
//! glibc's malloc serves blocks below its mmap threshold from its heaps (arenas) and keeps
//! them there when they are freed. The threshold starts at 128 KiB and rises to the size
//! of every mmapped block freed, up to 32 MiB, so after the first proof a process's
//! multi-megabyte working-set buffers come from the heaps, and once freed they stay
//! resident: the kernel (and a cgroup's OOM killer) still counts them while no
//! reservation covers them. Measured under load (`pinion-stress --quick`: 24 proofs of
//! 2^12–2^13-row circuits from 12 submitters on 2 cores, cgroup v1): at most 26.7 MiB more
//! anon + kernel memory than charged with the dynamic threshold, and the runs limited to
//! 80% and 60% of the peak stalled (the drift check counted the kept blocks and admitted
//! nothing more); at most 6.0 MiB with the threshold fixed at 128 KiB, and every run
//! completed.
#![allow(unsafe_code)]

/// Blocks of at least this many bytes get a mapping of their own, returned to the kernel
/// when freed: glibc's own starting value, kept from rising. (The same workload measured
/// from the process's own status: 15.7 MiB under-charged at 1 MiB, 6.3 MiB at 128 KiB,
/// 4.4 MiB at 32 KiB.)
pub const MMAP_THRESHOLD_BYTES: usize = 128 << 10;

/// Fixes glibc's mmap threshold at [`MMAP_THRESHOLD_BYTES`] (which also stops it from
/// rising), so every large block freed is unmapped and the process's anonymous memory
/// follows what the budget charges. A process-wide setting: binaries call it first thing
/// (`pinion`, `pinion-stress`), libraries never do. Returns whether the allocator took
/// it; a no-op returning false on other C libraries, whose allocators do not keep large
/// blocks this way.
pub fn tune_allocator() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let threshold = libc::c_int::try_from(MMAP_THRESHOLD_BYTES).unwrap_or(libc::c_int::MAX);
        // SAFETY: mallopt only sets allocator parameters; M_MMAP_THRESHOLD takes a byte
        // count up to 32 MiB on 64-bit glibc, and 128 KiB is within it. It returns 1 on
        // success, 0 on error, and touches no memory of ours.
        unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, threshold) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn glibc_takes_the_threshold() {
        assert!(super::tune_allocator());
    }
}
