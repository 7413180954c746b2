//! The crate's one error type, and how each kind reaches a gRPC client.

use std::path::PathBuf;

use thiserror::Error;

/// Why the daemon refused a request or could not start.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum DaemonError {
    /// The configuration file could not be read.
    #[error("cannot read config file {path}: {source}")]
    ConfigRead {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A configuration value is wrong (from the file or a flag).
    #[error("config {key}: {reason}")]
    Config {
        /// `section.key` (or the flag).
        key: String,
        /// What is wrong, with the value found.
        reason: String,
    },
    /// A listener could not be opened.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The engine could not start.
    #[error("cannot start the engine: {0}")]
    Start(String),
    /// A request field is missing or malformed.
    #[error("{field}: {reason}")]
    InvalidArgument {
        /// The request field (`submit.proof_kind`, `witness`, ...).
        field: &'static str,
        /// What is wrong, with what was found.
        reason: String,
    },
    /// No such job (never submitted, or forgotten after it finished).
    #[error("unknown job {job:?}")]
    UnknownJob {
        /// The id given.
        job: String,
    },
    /// No such circuit.
    #[error("unknown circuit {circuit:?}")]
    UnknownCircuit {
        /// The id given.
        circuit: String,
    },
    /// The memory budget has no room for a request's bytes now.
    #[error("the memory budget refuses {requested_bytes} bytes for {what}: {reason}")]
    Budget {
        /// What the bytes were for.
        what: String,
        /// Bytes asked for.
        requested_bytes: u64,
        /// The budget's answer.
        reason: String,
    },
    /// A file named in a request could not be read.
    #[error("cannot read {what} {path}: {source}")]
    Read {
        /// Which input.
        what: &'static str,
        /// The path given.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// An input was read but is not usable (a circuit, a witness, parameters).
    #[error("{what} is not usable: {reason}")]
    Unusable {
        /// Which input (`circuit`, `witness`, `parameters /path`).
        what: String,
        /// The parser's or the prover's reason.
        reason: String,
    },
    /// Something the daemon needs for a request is missing or wrong on its side (a
    /// parameter file in `[srs] param_cache`).
    #[error("{what}: {reason}")]
    Unavailable {
        /// What is missing.
        what: String,
        /// Why, with the path.
        reason: String,
    },
    /// The daemon is stopping and takes no new work.
    #[error("the daemon is shutting down")]
    ShuttingDown,
    /// Something that should not fail did (a lost task, a state file that cannot be
    /// written).
    #[error("internal error: {0}")]
    Internal(String),
}

impl DaemonError {
    /// A request field error.
    pub fn invalid(field: &'static str, reason: impl Into<String>) -> DaemonError {
        DaemonError::InvalidArgument {
            field,
            reason: reason.into(),
        }
    }

    /// The gRPC code a client sees for this error.
    pub fn code(&self) -> tonic::Code {
        use tonic::Code;
        match self {
            DaemonError::InvalidArgument { .. } | DaemonError::Unusable { .. } => {
                Code::InvalidArgument
            }
            DaemonError::Read { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                Code::NotFound
            }
            DaemonError::Read { .. } | DaemonError::Unavailable { .. } => Code::FailedPrecondition,
            DaemonError::UnknownJob { .. } | DaemonError::UnknownCircuit { .. } => Code::NotFound,
            DaemonError::Budget { .. } => Code::ResourceExhausted,
            DaemonError::ShuttingDown => Code::Unavailable,
            DaemonError::ConfigRead { .. }
            | DaemonError::Config { .. }
            | DaemonError::Listen { .. }
            | DaemonError::Start(_)
            | DaemonError::Internal(_) => Code::Internal,
        }
    }
}

impl From<DaemonError> for tonic::Status {
    fn from(e: DaemonError) -> tonic::Status {
        tonic::Status::new(e.code(), e.to_string())
    }
}
