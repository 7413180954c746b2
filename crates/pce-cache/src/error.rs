//! The crate's one error type.

use std::path::PathBuf;

use crate::Fingerprint;

/// Everything that can go wrong while recording, loading, storing or evaluating a PCE.
#[derive(Debug, thiserror::Error)]
pub enum PceError {
    /// The circuit's own synthesis failed.
    #[error("circuit synthesis failed during {phase}: {source}")]
    Synthesis {
        /// `"recording"` or `"witness synthesis"`.
        phase: &'static str,
        /// What the circuit reported.
        #[source]
        source: bellman::SynthesisError,
    },
    /// A constraint referenced a variable that had not been allocated (yet).
    #[error("constraint {constraint} references {kind} variable {index}, but only {allocated} are allocated")]
    UnallocatedVariable {
        /// Index of the offending constraint.
        constraint: u64,
        /// `"input"` or `"aux"`.
        kind: &'static str,
        /// The variable index used.
        index: u64,
        /// How many variables of that kind existed at that point.
        allocated: u64,
    },
    /// The column space does not fit the u32 column indices of the compact format.
    #[error("too many variables for u32 column indices: {n_inputs} inputs + {n_aux} aux > {max}")]
    TooManyColumns {
        /// Number of inputs (including ONE).
        n_inputs: u64,
        /// Number of aux variables.
        n_aux: u64,
        /// Largest supported column count.
        max: u64,
    },
    /// A witness or output buffer does not match the recorded shape.
    #[error("{what}: expected {expected}, found {found}")]
    ShapeMismatch {
        /// Which quantity differs (`"inputs"`, `"aux"`, `"a buffer length"`, ...).
        what: &'static str,
        /// The recorded value (or minimum).
        expected: u64,
        /// What the caller supplied.
        found: u64,
    },
    /// Check mode: a·b ≠ c on this row.
    #[error("constraint row {row} is not satisfied (a·b ≠ c) out of {n_rows} rows")]
    Unsatisfied {
        /// First failing row (rows ≥ n_constraints are groth16's `input·0 = 0` rows).
        row: u64,
        /// Number of rows checked.
        n_rows: u64,
    },
    /// Reading or writing a cache file failed.
    #[error("i/o error on {path}: {source}")]
    Io {
        /// The file involved.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The file does not start with the PCE magic.
    #[error("{path} is not a pce file: magic \"{}\", expected \"{}\"", .found.escape_ascii(), crate::file::MAGIC.escape_ascii())]
    BadMagic {
        /// The file.
        path: PathBuf,
        /// The first bytes found (shown as text, non-ASCII bytes escaped).
        found: [u8; 8],
    },
    /// The file has another format version.
    #[error("{path}: unsupported pce format version: expected {expected}, found {found}")]
    UnsupportedVersion {
        /// The file.
        path: PathBuf,
        /// Version this build reads.
        expected: u32,
        /// Version in the file.
        found: u32,
    },
    /// The file is shorter than its header says.
    #[error("{path} is truncated: expected at least {expected_bytes} bytes, found {found_bytes}")]
    Truncated {
        /// The file.
        path: PathBuf,
        /// Length required by the header.
        expected_bytes: u64,
        /// Actual length.
        found_bytes: u64,
    },
    /// A section's (or the header's) checksum does not match its bytes.
    #[error("{path}: checksum mismatch in section {section}")]
    ChecksumMismatch {
        /// The file.
        path: PathBuf,
        /// Section name (`"header"` for the header itself).
        section: String,
    },
    /// The matrices are not the ones expected.
    #[error("{path}: fingerprint mismatch: expected {expected}, found {found}")]
    FingerprintMismatch {
        /// The file.
        path: PathBuf,
        /// Fingerprint required.
        expected: Fingerprint,
        /// Fingerprint of the file's matrices.
        found: Fingerprint,
    },
    /// A header field, or a byte outside every section, is invalid.
    #[error("{path}: malformed {part} at byte offset {offset}: {reason}")]
    MalformedAt {
        /// The file.
        path: PathBuf,
        /// `"header"`, `"section table"` or `"padding"`.
        part: &'static str,
        /// Byte offset in the file.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// Structurally invalid section content (bad sizes, out-of-range index, ...).
    #[error("{path}: malformed section {section} at element {index}: {reason}")]
    Malformed {
        /// The file (empty for in-memory data).
        path: PathBuf,
        /// Section name.
        section: String,
        /// Index of the element (of the section's element size) where the problem was found.
        index: u64,
        /// What is wrong.
        reason: String,
    },
    /// The memory budget refused the bytes needed.
    #[error("memory budget refused {requested_bytes} bytes for {what}: {source}")]
    Budget {
        /// What the bytes were for.
        what: &'static str,
        /// Bytes requested.
        requested_bytes: u64,
        /// The budget's reason.
        #[source]
        source: memory_budget::BudgetError,
    },
    /// The circuit id cannot name a cache file.
    #[error("circuit id {id:?} is not a valid cache key: {reason}")]
    BadKey {
        /// The id given.
        id: String,
        /// Why it is refused.
        reason: &'static str,
    },
}

impl PceError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        PceError::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn malformed(
        path: &std::path::Path,
        section: impl Into<String>,
        index: u64,
        reason: impl Into<String>,
    ) -> Self {
        PceError::Malformed {
            path: path.to_path_buf(),
            section: section.into(),
            index,
            reason: reason.into(),
        }
    }

    /// Whether this error means a cache file must be discarded and the PCE re-extracted.
    pub fn is_stale_file(&self) -> bool {
        matches!(
            self,
            PceError::BadMagic { .. }
                | PceError::UnsupportedVersion { .. }
                | PceError::Truncated { .. }
                | PceError::ChecksumMismatch { .. }
                | PceError::FingerprintMismatch { .. }
                | PceError::Malformed { .. }
                | PceError::MalformedAt { .. }
        )
    }
}
