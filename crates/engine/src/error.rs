//! The crate's one error type.

use std::time::Duration;

use thiserror::Error;

use crate::JobId;

/// Why an engine call was refused. A job that fails while it runs is not an error of
/// these calls: its [`crate::JobOutcome`] says why.
#[derive(Debug, Error)]
pub enum EngineError {
    /// The engine has no device to prove on.
    #[error("no devices configured")]
    NoDevices,
    /// A device could not be set up.
    #[error("device {name}: {reason}")]
    Device {
        /// The device.
        name: String,
        /// What failed.
        reason: String,
    },
    /// A job names a circuit that was never registered.
    #[error("unknown circuit {circuit:?}")]
    UnknownCircuit {
        /// The name given.
        circuit: String,
    },
    /// A circuit id is registered twice.
    #[error("circuit {circuit:?} is already registered")]
    DuplicateCircuit {
        /// The id.
        circuit: String,
    },
    /// The host memory a GPU's context took when it was opened does not fit the budget.
    #[error("device {name}: its context's {bytes} bytes of host memory do not fit the memory budget: {source}")]
    ContextMemory {
        /// The device.
        name: String,
        /// Host bytes the context took ([`gpu_device::Gpu::context_host_bytes`]).
        bytes: u64,
        /// The budget's refusal.
        #[source]
        source: memory_budget::BudgetError,
    },
    /// A circuit's parameters could not be opened.
    #[error("parameters of circuit {circuit:?}: {source}")]
    Key {
        /// The circuit.
        circuit: String,
        /// Why.
        #[source]
        source: Box<groth16_prover::ProverError>,
    },
    /// Pinning a circuit's staging buffers ahead of its proofs failed in the driver
    /// (a budget without room is not an error: the prewarm stops there).
    #[error("device {device}: pinning staging for circuit {circuit:?}: {source}")]
    Prewarm {
        /// The circuit.
        circuit: String,
        /// The device.
        device: String,
        /// Why.
        #[source]
        source: Box<groth16_prover::ProverError>,
    },
    /// A job without partitions.
    #[error("a job needs at least one partition")]
    NoPartitions,
    /// Given randomness does not match the partitions.
    #[error("job has {n_partitions} partitions but {n_randomness} (r, s) pairs")]
    RandomnessCount {
        /// Partitions.
        n_partitions: usize,
        /// Pairs given.
        n_randomness: usize,
    },
    /// No such job (never submitted, or forgotten after it finished).
    #[error("unknown job {id}")]
    UnknownJob {
        /// The id asked for.
        id: JobId,
    },
    /// `await` gave up waiting.
    #[error("{id} did not finish within {timeout:?}")]
    Timeout {
        /// The job.
        id: JobId,
        /// How long it waited.
        timeout: Duration,
    },
    /// The OS refused one of the engine's threads at start (the ones already started
    /// were stopped again).
    #[error("starting the engine's thread {thread:?}: {source}")]
    Thread {
        /// The thread's name.
        thread: String,
        /// The OS's refusal.
        #[source]
        source: std::io::Error,
    },
    /// The engine no longer accepts jobs.
    #[error("the engine is shutting down")]
    ShuttingDown,
}
