//! The crate's one error type.

use std::path::PathBuf;

use thiserror::Error;

/// Why a Filecoin proof (or its parameters) was refused. Bad input is reported, never a
/// panic, and never a proof.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum FilecoinError {
    /// The input could not be decoded.
    #[error("{what}: {reason}")]
    Decode {
        /// What was being decoded (`"c1 output json"`, `"vanilla proof 3"`, ...).
        what: String,
        /// The decoder's message.
        reason: String,
    },
    /// A value had the wrong length.
    #[error("{what} is {found} bytes, expected {expected}")]
    Length {
        /// Which value.
        what: &'static str,
        /// Bytes expected.
        expected: usize,
        /// Bytes found.
        found: usize,
    },
    /// The input is for another proof type than the caller asked for.
    #[error("{what}: expected {expected}, found {found}")]
    ProofTypeMismatch {
        /// What carried the proof type.
        what: &'static str,
        /// The proof type expected.
        expected: String,
        /// The proof type found.
        found: String,
    },
    /// Two sector sizes that must agree do not.
    #[error("sector size: {what} says {found} bytes, expected {expected}")]
    SectorSizeMismatch {
        /// Where the disagreeing size came from.
        what: &'static str,
        /// Size expected (bytes).
        expected: u64,
        /// Size found (bytes).
        found: u64,
    },
    /// A count of the input does not match the proof type.
    #[error("{what}: expected {expected}, found {found}")]
    CountMismatch {
        /// What was counted.
        what: &'static str,
        /// Count expected.
        expected: usize,
        /// Count found.
        found: usize,
    },
    /// The proof type is valid but this crate does not prove it.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// filecoin-proofs refused the input (commitments, challenges, vanilla proofs).
    #[error("{what}: {reason}")]
    Filecoin {
        /// The step that failed.
        what: &'static str,
        /// filecoin-proofs' message.
        reason: String,
    },
    /// The vanilla proofs do not verify against the public inputs: no proof is made.
    #[error("vanilla proof of {kind} does not verify against its public inputs")]
    InvalidVanillaProof {
        /// The proof kind.
        kind: &'static str,
    },
    /// The circuit's own synthesis failed.
    #[error("circuit synthesis ({phase}{}): {source}", .partition.map(|k| format!(", partition {k}")).unwrap_or_default())]
    Synthesis {
        /// `"recording"` or `"witness"`.
        phase: &'static str,
        /// The partition, when proving.
        partition: Option<usize>,
        /// bellperson's error.
        #[source]
        source: Box<bellperson::SynthesisError>,
    },
    /// The parameter file is missing.
    #[error("parameters for {circuit} not found: {path}")]
    ParamsMissing {
        /// The circuit.
        circuit: String,
        /// The file looked for.
        path: PathBuf,
    },
    /// The parameter file holds another circuit's parameters.
    #[error("parameters {path} do not fit {circuit}: {source}")]
    ParamsMismatch {
        /// The circuit.
        circuit: String,
        /// The file.
        path: PathBuf,
        /// The section whose size differs (expected and found).
        #[source]
        source: Box<srs_store::SrsError>,
    },
    /// The proof's public inputs differ from those filecoin-proofs computes for it.
    #[error("partition {partition}: the circuit's public inputs differ from filecoin-proofs' at input {index}")]
    PublicInputsMismatch {
        /// The partition.
        partition: usize,
        /// First differing input (ONE excluded); the count when only the lengths differ.
        index: usize,
    },
    /// A proof does not verify with the parameters' verifying key.
    #[error("partition {partition}: proof does not verify with the verifying key")]
    ProofRejected {
        /// The partition.
        partition: usize,
    },
    /// Reading or writing a file failed.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Recording or witness synthesis through the PCE failed.
    #[error("pce: {0}")]
    Pce(#[source] Box<pce_cache::PceError>),
    /// Opening the parameter file failed.
    #[error("parameters: {0}")]
    Srs(#[source] Box<srs_store::SrsError>),
    /// The prover refused (budget, unsatisfied witness, parameters).
    #[error("partition {partition}: {source}")]
    Prover {
        /// The partition.
        partition: usize,
        /// The prover's error.
        #[source]
        source: Box<groth16_prover::ProverError>,
    },
    /// Generating insecure parameters failed.
    #[error("parameter generation for {circuit}: {source}")]
    Setup {
        /// The circuit.
        circuit: String,
        /// The generator's error.
        #[source]
        source: Box<groth16_prover::ProverError>,
    },
}

impl FilecoinError {
    pub(crate) fn filecoin(what: &'static str, e: impl std::fmt::Display) -> Self {
        FilecoinError::Filecoin {
            what,
            reason: format!("{e:#}"),
        }
    }

    pub(crate) fn decode(what: impl Into<String>, e: impl std::fmt::Display) -> Self {
        FilecoinError::Decode {
            what: what.into(),
            reason: e.to_string(),
        }
    }
}

impl From<pce_cache::PceError> for FilecoinError {
    fn from(e: pce_cache::PceError) -> Self {
        FilecoinError::Pce(Box::new(e))
    }
}

impl From<srs_store::SrsError> for FilecoinError {
    fn from(e: srs_store::SrsError) -> Self {
        FilecoinError::Srs(Box::new(e))
    }
}

/// A Filecoin failure inside a proof the engine runs (a partition's witness or public
/// inputs), as the prover reports a synthesis that failed: its message kept, as an I/O
/// error of synthesis (the prover's error has no variant for another crate's error).
impl From<FilecoinError> for groth16_prover::ProverError {
    fn from(e: FilecoinError) -> Self {
        groth16_prover::ProverError::Synthesis(bellman::SynthesisError::IoError(
            std::io::Error::other(e.to_string()),
        ))
    }
}
