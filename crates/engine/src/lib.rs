//! The Pinion proving engine: many proofs through one memory budget, on every device.
//!
//! A caller registers circuits (a parameter file read through an `srs-store` store, and a
//! PCE) and submits jobs (one or more partitions of a registered circuit, each a bellman
//! circuit value with its witness, at a priority). The engine proves them and returns each
//! job's proofs once, byte for byte what `groth16::create_proof` gives for the same
//! parameters, witness and (r, s).
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use engine::{CircuitSpec, DeviceConfig, Engine, EngineConfig, JobSpec, JobStatus, Partition, PceSource};
//! use groth16_prover::testing::MimcChain;
//! use groth16_prover::CpuBackend;
//! use memory_budget::Budget;
//! use rand::SeedableRng;
//!
//! # let dir = std::env::temp_dir().join(format!("pinion-engine-doc-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir)?;
//! let circuit = MimcChain::new(50, 3);
//! let params = groth16::generate_random_parameters::<bls12_381::Bls12, _, _>(
//!     circuit.clone(),
//!     &mut rand::rngs::StdRng::seed_from_u64(1),
//! )?;
//! let path = dir.join("mimc.params");
//! params.write(std::fs::File::create(&path)?)?;
//!
//! let budget = Budget::fixed(1 << 30);
//! let cpu = Arc::new(CpuBackend::new(budget.clone()));
//! let engine = Engine::start(EngineConfig::new(
//!     budget.clone(),
//!     vec![DeviceConfig::Backend { name: "cpu0".into(), backend: cpu }],
//! ))?;
//! let pces = pce_cache::PceCache::new(budget.clone(), pce_cache::CacheConfig::in_memory())?;
//! let pce = pces.get_or_extract(&pce_cache::CircuitKey::new("mimc"), || circuit.clone())?;
//! engine.register(CircuitSpec {
//!     id: "mimc".into(),
//!     params: srs_store::SrsSpec::new("mimc", &path),
//!     pce: PceSource::Held(pce),
//! })?;
//! let id = engine.submit(JobSpec::single("mimc", Partition::circuit(circuit.clone())))?;
//! let outcome = engine.await_job(id, None)?;
//! assert_eq!(outcome.status, JobStatus::Completed);
//! assert_eq!(outcome.proof_bytes().len(), 192);
//! engine.shutdown(engine::Shutdown::Graceful);
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Pipeline
//! ```text
//! submit ─> queue (critical > high > normal > low, FIFO within one)
//!   admission: the partition's key held (loaded through the store if needed, charged and
//!              waiting like any other charge), then its working set reserved from the
//!              circuit's real dimensions through the budget's waiting, priority-ordered
//!              reservation ─> synthesis thread (CPU; as many as the budget admits, under
//!              a ceiling) ─> bounded hand-off ─> device worker (H + MSMs; one per device)
//!   ─> assembly + self-check ─> the job completes when all its partitions have
//! ```
//! The next partitions' synthesis overlaps the current device work; each phase returns
//! its bytes as it ends (the prover's shrink points).
//!
//! # Guarantees
//! - **Memory**: nothing large starts before it is charged; a partition's working set is
//!   reserved before its synthesis, at the size the prover will use, and waits for room
//!   in priority order; a request that can never fit fails the job at once naming both
//!   sizes. A partition holds its key's store entry from admission to assembly, so a key
//!   is never evicted under a proof; idle keys and PCEs are evicted LRU by their stores
//!   when the budget needs room.
//! - **Order**: partitions are admitted by priority, FIFO within one; a partition waiting
//!   for memory steps back when a more urgent one is queued behind it.
//! - **Devices**: a partition goes to a device that proved its circuit last (its key is
//!   likely resident there) unless that device is busier, else to the least loaded one.
//!   A device fault (an MSM, NTT or staging error) retries that partition on the same
//!   device's fallbacks, synthesized again: for a GPU the key streamed from pinned
//!   memory, then the CPU; other jobs are not touched.
//! - **Lifecycle**: every job ends exactly once (completed, failed or cancelled) and every
//!   waiter is woken; a cancelled job's queued partitions leave with nothing charged and
//!   its running ones stop at their next phase boundary, returning every byte.
//!   [`Engine::shutdown`] waits until every partition has let go.
//!
//! # Non-goals
//! No network protocol (the daemon is in the `pinion` binary); no persistence of jobs.
//!
//! # Cost model
//! Per partition: one admission (a budget reservation, a store lookup), one thread for
//! synthesis, one hand-off per stage. Throughput is bounded by
//! `max(synthesis time / concurrent syntheses, device time)` per proof once the pipeline
//! is full.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod engine;
mod error;
mod job;
mod metrics;
mod pipeline;

pub use engine::{
    CircuitSpec, CircuitStatus, DeviceConfig, DeviceStatus, Engine, EngineConfig, EngineStatus,
    JobEndHook, PceSource, Shutdown, StageCounts, KEY_LOAD_WAIT,
};
pub use error::EngineError;
pub use job::{
    JobId, JobOutcome, JobSpec, JobStatus, JobTimings, Partition, PartitionTrace, Priority,
};
