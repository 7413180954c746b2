//! The crate's one error type.

use std::path::PathBuf;

use thiserror::Error;

/// What went wrong in a stress run. A proof that fails inside a run is not an error: the
/// run counts it (with its reason) in its report.
#[derive(Debug, Error)]
pub enum StressError {
    /// A kernel or run file could not be read or written.
    #[error("{action} {path}: {source}")]
    Io {
        /// `read`, `write`, `create`, `remove`.
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A kernel file did not hold what its format promises.
    #[error("{path}: {reason}, found {found:?}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What was expected.
        reason: &'static str,
        /// What was there (at most 64 characters).
        found: String,
    },
    /// No memory cgroup this process may create children in.
    #[error("no writable memory cgroup: {reason}")]
    NoCgroup {
        /// Every place looked at and why it did not do.
        reason: String,
    },
    /// A program could not be started.
    #[error("cannot start {program}: {source}")]
    Spawn {
        /// The program.
        program: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Parameters or a PCE for a circuit of the workload could not be made.
    #[error("circuit {circuit}: {reason}")]
    Setup {
        /// The circuit's id.
        circuit: String,
        /// What failed.
        reason: String,
    },
    /// The engine refused a call.
    #[error("engine: {0}")]
    Engine(#[from] engine::EngineError),
    /// The memory budget could not be set up.
    #[error("memory budget: {0}")]
    Budget(#[from] memory_budget::BudgetError),
    /// A run stopped making progress (its report holds the budget's state).
    #[error("stalled: {description}")]
    Stalled {
        /// What waited for what.
        description: String,
    },
    /// A run's report could not be read back.
    #[error("report {path}: {reason}")]
    Report {
        /// The report file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

impl StressError {
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> StressError {
        let path = path.into();
        move |source| StressError::Io {
            action,
            path,
            source,
        }
    }
}

/// Results of this crate.
pub type Result<T, E = StressError> = std::result::Result<T, E>;
