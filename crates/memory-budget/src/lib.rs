//! One byte budget that matches what the kernel sees.
//!
//! Every large allocation in Pinion is charged here before it is made, at its true peak, and
//! the charge is checked against what the kernel reports. This crate knows nothing about CUDA,
//! parameter files or proofs.
//!
//! # Example: a cache whose entries hold reservations
//! ```
//! use std::sync::{Arc, Mutex};
//! use std::time::Duration;
//! use memory_budget::{Budget, Category, EntryUse, Evictor, Reservation};
//!
//! struct Entry { use_: Arc<EntryUse>, _charge: Reservation }
//! struct Cache { entries: Mutex<Vec<Entry>> }
//!
//! impl Evictor for Cache {
//!     fn name(&self) -> &str { "example-cache" }
//!     fn evict(&self, at_least_bytes: u64) -> u64 {
//!         let mut entries = self.entries.lock().unwrap();
//!         let mut freed = 0;
//!         // Only entries nobody holds and idle long enough; dropping one releases its bytes.
//!         entries.retain(|e| {
//!             if freed >= at_least_bytes || !e.use_.is_evictable() { return true; }
//!             freed += e._charge.bytes();
//!             false
//!         });
//!         freed
//!     }
//! }
//!
//! let budget = Budget::fixed(1 << 20);
//! let cache = Arc::new(Cache { entries: Mutex::new(Vec::new()) });
//! let _registration = budget.register_evictor(cache.clone());
//!
//! // Charge before allocating, then hand the charge to the entry.
//! let charge = budget.try_reserve(768 << 10, Category::Pce, "circuit-a")?;
//! let use_ = EntryUse::with_budget(Duration::ZERO, budget.clone());
//! cache.entries.lock().unwrap().push(Entry { use_, _charge: charge });
//!
//! // A request that does not fit makes the evictor give the entry up.
//! let working_set = budget.reserve(512 << 10, Category::WorkingSet, "proof-1", Some(Duration::from_secs(1)))?;
//! assert_eq!(working_set.bytes(), 512 << 10);
//! assert!(cache.entries.lock().unwrap().is_empty());
//! # Ok::<(), memory_budget::BudgetError>(())
//! ```
//!
//! # Guarantees
//! - **Limits** ([`detect_limits`], [`Budget::detect`]): cgroup v2 `memory.max`/`memory.high`
//!   (walking up from the process's cgroup), cgroup v1 `memory.limit_in_bytes` and
//!   `memory.memsw.limit_in_bytes`, the process's `RLIMIT_AS` and `RLIMIT_DATA` (`getrlimit`;
//!   unlimited ones are listed as skipped), `/proc/meminfo` `MemTotal`/`MemAvailable`; the
//!   smallest finite one wins. Every file is read under a root directory (default `/`); the
//!   rlimits are process state, given as a [`ProcessLimits`] value where a test needs its own.
//!   Every source is reported with why it won or was skipped.
//! - **`RLIMIT_AS` counts address space, not memory**: mapped files (a parameter file is
//!   mapped whole), thread stacks, allocator arenas and the address space CUDA reserves when
//!   it creates a context all count. When it wins, the drift check measures the process's
//!   `VmSize`, so that untracked address space lowers what the budget admits: right for the
//!   limit, conservative for memory. A GPU process under a tight `RLIMIT_AS` may fail to
//!   create a CUDA context at all; prefer a cgroup limit there. Budget = limit − safety margin
//!   ([`default_safety_margin`]: 5% of the limit, clamped to [256 MiB, 8 GiB], at most half),
//!   or an explicit size ("256GiB", "80%").
//! - **Admission**: used bytes never exceed the admission ceiling. A request larger than the
//!   total fails at once with [`BudgetError::TooLarge`] naming both sizes.
//! - **Order**: waiters are admitted by priority, FIFO within one priority. **Head-of-line
//!   policy**: strict. When the first waiter does not fit, nobody behind it is admitted, and a
//!   new request never overtakes a queued one of equal or higher priority (even if it would
//!   fit). So a large request is never starved by a stream of small ones, at the cost of idle
//!   bytes while the head waits. Higher priority requests do go ahead of lower ones.
//! - **No lost wakeups**: bytes are handed to waiters under the lock by whoever releases them
//!   (release, shrink, drop, timeout, cancellation, ceiling change); wakers are called after
//!   the lock is released.
//! - **Eviction**: a request that must wait asks the registered [`Evictor`]s for the queue's
//!   shortfall (cheapest to refill first: [`RefillCost`]), with no budget lock held, one
//!   evicting thread at a time. Evictors only give up entries nobody holds and idle for a
//!   minimum time ([`EntryUse`], default 5 minutes); [`Budget::notify_eligible`] makes
//!   waiters try again when such an entry appears.
//! - **Drift check**: budgets from [`Budget::detect`] read what the kernel charges (cgroup
//!   `memory.current` + `memory.stat`, v1 `usage_in_bytes`, or the host's meminfo) and lower
//!   the ceiling to `limit − margin − untracked`, where `untracked` is `hard − charged` at the
//!   last reading (clean file cache is reclaimable; anonymous, shared, locked and kernel memory
//!   are hard) or, if larger, an earlier reading decayed by half every
//!   [`DriftConfig::untracked_half_life`] (60 s by default): a reservation charged at its peak
//!   before its memory is touched hides untracked memory from a reading (measured on the H200,
//!   2026-12-01: a stress run at 60% of its peak was OOM-killed while 77 MiB of working sets
//!   hid 50 MiB of CUDA context and thread memory). Between readings, new reservations are
//!   counted as they are made. The gap between own
//!   measured hard bytes and charged bytes is exposed ([`BudgetSnapshot::drift_bytes`], metric
//!   `pinion_budget_drift_bytes`).
//! - **Reservations** are RAII ([`Reservation`], `#[must_use]`, `Send + Sync`, `'static`):
//!   partial `release`, `shrink_to`, `try_grow`, `split`, `merge`, re-categorise. A cache hands
//!   one to a long-lived owner by moving it into the entry; dropping the entry releases it.
//! - **Eligibility**: [`EntryUse`] tracks holders and idle time per cache entry; when its last
//!   hold goes it tells the budget when the entry becomes evictable
//!   ([`Budget::notify_eligible_at`]), and blocking waiters wake then to re-run the evictors.
//!
//! # Who runs what
//! Evictors run on the thread of a waiting request (inside `poll` for async waiters), never
//! under the budget lock and never on the thread that calls [`Budget::notify_eligible`] (which
//! may be holding a cache lock). Wakers are called after the budget lock is released.
//!
//! # Non-goals
//! No allocation: the budget only counts. It cannot see memory that a reservation covers but
//! that is not yet touched, nor protect against allocations that skip it, nor memory the C
//! allocator keeps after a free: glibc keeps freed blocks below its (rising) mmap threshold
//! in its heaps, where the kernel still charges them; binaries call [`tune_allocator`] first
//! thing so freed blocks of 128 KiB and more go back to the kernel. The drift check counts
//! what is left as untracked. Async waiting needs
//! no runtime, but this crate owns no timer: async waiters are woken by releases, by
//! [`Budget::notify_eligible`] and by [`Budget::spawn_monitor`] (which also fires eligibility
//! deadlines and drift re-reads for them). Metric handles are taken when a budget is created,
//! so install the `metrics` recorder first.
//!
//! # Cost model
//! An uncontended reserve + drop is two mutex lock/unlock pairs, an `Arc` clone and drop and
//! two gauge updates: about 40 ns with a `&'static str` label through [`Budget::request`], 45
//! ns with a `String` label through [`Budget::try_reserve`] (it allocates), measured by
//! `examples/budget_bench.rs` on a 2-core VM. The kernel is read only on the slow path (a
//! request that does not fit) and, for detected budgets, when at least the refresh interval
//! (100 ms by default) has passed, which small admissions check once per 256 calls and
//! admissions of 1 MiB or more on every call, renewing a stale reading before they are
//! admitted (a large admission on a stale ceiling is how a process crosses its cgroup limit
//! while untracked memory grows). A waiter costs
//! one small allocation and a queue insertion.
#![warn(missing_docs)]
// `getrlimit` (module `rlimit`) and `mallopt` (module `allocator`) are the unsafe calls.
#![deny(unsafe_code)]

mod allocator;
mod budget;
mod detect;
mod error;
mod evict;
pub mod metrics_names;
mod procfs;
mod report;
mod rlimit;
mod size;
mod usage;

pub use allocator::{tune_allocator, MMAP_THRESHOLD_BYTES};
pub use budget::{
    Budget, BudgetConfig, BudgetSnapshot, Category, DriftConfig, MonitorHandle, Priority, Request,
    Reservation, ReserveFuture, DEFAULT_UNTRACKED_HALF_LIFE,
};
pub use detect::{
    default_safety_margin, detect_limits, detect_limits_with, own_cgroups, CgroupDir,
    DetectOptions, Detection, LimitSource, Limits, OwnCgroups, SourceKind, SourceStatus,
};
pub use error::BudgetError;
pub use evict::{EntryHold, EntryUse, Evictor, EvictorRegistration, RefillCost, DEFAULT_MIN_IDLE};
pub use procfs::V1_UNLIMITED;
pub use report::{scope_text, MemoryReport};
pub use rlimit::{ProcessLimits, Rlimit};
pub use size::{format_bytes, parse_bytes, SizeSpec};
pub use usage::{KernelProbe, MeasuredUsage, ProcessUsage, UsageProbe, UsageScope};
