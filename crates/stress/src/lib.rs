//! Memory truth under load: the Pinion engine proving many jobs inside a memory cgroup,
//! the kernel's figures sampled against what the budget charged.
//!
//! `pinion-stress` (the binary; `cargo xtask stress`, `bundle/run.sh stress`) makes each
//! circuit's parameters once, runs the workload ([`workload`]) unconstrained in a cgroup
//! without a limit to measure its peak, then once per share of that peak inside a cgroup
//! limited to it ([`cgroup`], [`supervise`]). In each run a thread samples the cgroup's
//! memory and the budget's charges every 50 ms ([`sample`]).
//!
//! # Example
//! What one sample compares: measured (`anon + kernel + shmem` of the cgroup, page cache
//! left out) against the budget's charges.
//! ```
//! use memory_budget::{Budget, Category};
//! use pinion_stress::sample::{CgroupMemory, Sample, SampleStats};
//!
//! let memory = CgroupMemory::parse_v2(
//!     "300000000\n",
//!     "anon 209715200\nfile 83886080\nkernel 8388608\nshmem 4194304\n",
//! )
//! .expect("a v2 reading");
//! assert_eq!(memory.measured_bytes(), 212 << 20); // 200 + 8 + 4 MiB
//!
//! let budget = Budget::fixed(1 << 30);
//! let _working_set = budget.try_reserve(200 << 20, Category::WorkingSet, "proof")?;
//! let sample = Sample {
//!     memory,
//!     measured_bytes: memory.measured_bytes(),
//!     charged_bytes: budget.used_bytes(),
//!     ..Sample::default()
//! };
//! let mut stats = SampleStats::default();
//! stats.add(&sample);
//! assert_eq!(stats.max_undercharge_bytes, 12 << 20);
//! assert_eq!(stats.max_overcharge_bytes, 0);
//! # Ok::<(), memory_budget::BudgetError>(())
//! ```
//!
//! # Guarantees
//! - **The workload** ([`workload::run`]): K submitter threads, each submitting a job and
//!   awaiting it, N jobs in all, of three circuits with different keys picked at random,
//!   fresh witnesses, random priorities; one engine over CPU devices and GPU 0 when it
//!   opens; keys in one `srs-store` store whose idle entries may be evicted at once, so
//!   keys are evicted and loaded again whenever the budget is short. Parameters are real
//!   (`groth16_prover::setup::generate`: what groth16's generator makes for the same
//!   seed), the engine's self-check is on, and each proof is verified again against its
//!   public inputs; one that does not verify counts as failed.
//! - **Runs are processes**: each starts inside its cgroup (a shell moves itself in, then
//!   `exec`s the program), so everything it allocates is charged there; its budget is
//!   detected from that cgroup's limit as in production. A run rewrites its report every
//!   second, so one the OOM killer ends leaves what it had done.
//! - **What is reported** per run: OOM kills and events (`memory.events`, v1
//!   `memory.oom_control`), limit hits, proofs completed, failed (with why) and lost,
//!   max(measured − charged) and max(charged − measured) over all samples, the peaks of
//!   measured, charged and `current`, throughput, key loads and evictions; a table and
//!   JSON. A run is *clean* when nothing was killed, failed or lost and `current` stayed
//!   within the limit; *accurate* when the issue's targets hold (under-charge ≤ 64 MiB at
//!   every sample, peak charged ≤ 1.15 × peak measured), judged on the constrained runs
//!   (the unconstrained one measures the peak; its figures are reported).
//!
//! # Non-goals
//! Not a benchmark (throughput is reported, not compared); no cgroup of its own without a
//! writable memory hierarchy (the unconstrained run alone is measured from
//! `/proc/self/status`, and the reason is said); samples are 50 ms apart, so a spike
//! between two is not seen (the kernel's own peak is reported beside them where it keeps
//! one).
//!
//! # Cost model
//! A sample reads three small kernel files and takes the budget's lock once (tens of
//! microseconds). The quick run (three circuits of 2^14 rows, 24 jobs, two CPU devices,
//! four runs) takes about 2 minutes on 2 cores, 7 s of it making parameters the first time.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod cgroup;
pub mod counters;
mod error;
pub mod sample;
pub mod supervise;
pub mod workload;

pub use error::{Result, StressError};
