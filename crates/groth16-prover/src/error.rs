//! The crate's one error type.

use memory_budget::BudgetError;
use thiserror::Error;

/// Why a proof (or a key, or a backend) was refused. Bad input is reported, never a panic.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ProverError {
    /// The circuit's own synthesis failed (plain synthesis; the PCE path reports
    /// [`ProverError::Pce`]).
    #[error("circuit synthesis failed: {0}")]
    Synthesis(#[source] bellman::SynthesisError),
    /// A constraint used a variable that was not allocated (plain synthesis).
    #[error("constraint {constraint} references {kind} variable {index}, but only {allocated} are allocated")]
    UnallocatedVariable {
        /// Index of the offending constraint.
        constraint: usize,
        /// `"input"` or `"aux"`.
        kind: &'static str,
        /// The variable index used.
        index: usize,
        /// How many variables of that kind existed then.
        allocated: usize,
    },
    /// Recording, witness synthesis or evaluation through the PCE failed.
    #[error("pce: {0}")]
    Pce(#[from] pce_cache::PceError),
    /// Opening or loading a parameter file failed.
    #[error("parameters: {0}")]
    Srs(#[from] srs_store::SrsError),
    /// A point of a loaded parameter set could not be converted.
    #[error("parameter point {query}[{index}] is invalid: {source}")]
    BadPoint {
        /// Which query (`"h_query"`, `"vk.alpha_g1"`, ...).
        query: &'static str,
        /// Index inside it.
        index: usize,
        /// What was wrong.
        #[source]
        source: bls_repr::ReprError,
    },
    /// The budget refused memory.
    #[error("memory budget refused {requested_bytes} bytes for {what}: {source}")]
    Budget {
        /// What the memory was for.
        what: &'static str,
        /// Bytes asked for.
        requested_bytes: u64,
        /// Why.
        #[source]
        source: BudgetError,
    },
    /// The witness does not satisfy the constraints: no proof is produced.
    #[error("witness does not satisfy row {row} (a·b ≠ c); the circuit has {n_constraints} constraints and {n_rows} rows with the input rows")]
    Unsatisfied {
        /// First failing row (circuit constraints come first, in `enforce` order).
        row: usize,
        /// Constraints the circuit enforced.
        n_constraints: usize,
        /// Rows including groth16's `input_i · 0 = 0` rows.
        n_rows: usize,
    },
    /// A query of the parameters is shorter than the circuit needs.
    #[error("{query} has {found} points, the circuit needs {needed}")]
    KeyTooSmall {
        /// Which query.
        query: &'static str,
        /// Points the circuit needs.
        needed: usize,
        /// Points the parameters hold.
        found: usize,
    },
    /// The verifying key has one `ic` point per public input (ONE included).
    #[error(
        "verifying key has {found} ic points, the circuit has {expected} inputs (one included)"
    )]
    InputCountMismatch {
        /// Inputs of the circuit, ONE included.
        expected: usize,
        /// `ic` points in the key.
        found: usize,
    },
    /// A key read from a zkey proves only through its own PCE (`Synthesis::Pce`).
    #[error("a key read from a zkey proves only with the pce built from its coefficients (Synthesis::Pce)")]
    PceRequired,
    /// A witness for a zkey has the wrong length or its first value is not one.
    #[error("witness: {what} is {found}, the zkey needs {expected}")]
    Witness {
        /// What differs.
        what: &'static str,
        /// What the zkey needs.
        expected: String,
        /// What the witness has.
        found: String,
    },
    /// delta is the identity: someone is trying a subversion-CRS attack.
    #[error("delta_g1 or delta_g2 is the point at infinity (subversion-crs attack)")]
    IdentityDelta,
    /// The H polynomial step failed.
    #[error("h polynomial: {0}")]
    Ntt(#[from] gpu_ntt::NttError),
    /// The pinned staging pool could not hand out a buffer (host budget refusal or a
    /// driver failure); nothing was allocated for it.
    #[error("pinned staging for {what}: {source}")]
    Staging {
        /// What was being staged.
        what: &'static str,
        /// The pool's reason.
        #[source]
        source: gpu_device::PoolError,
    },
    /// An MSM was refused.
    #[error("msm {query}: {source}")]
    Msm {
        /// Which query's MSM.
        query: &'static str,
        /// Why.
        #[source]
        source: gpu_msm::MsmError,
    },
    /// The GPU backend was asked for explicitly but no device could be opened (no
    /// driver, no device, or the driver failed).
    #[error("gpu backend unavailable: {source}")]
    GpuUnavailable {
        /// Why the device did not open.
        #[source]
        source: gpu_device::GpuError,
    },
    /// The requested backend cannot run here.
    #[error("{backend} backend unavailable: {reason}")]
    BackendUnavailable {
        /// Backend asked for.
        backend: &'static str,
        /// Why it cannot run.
        reason: &'static str,
    },
    /// A [`crate::KeyHold`] of one key used to read another's bases.
    #[error("the key hold belongs to key {found}, the proof's key is {expected}")]
    HoldMismatch {
        /// The proof's key id.
        expected: u64,
        /// The hold's key id.
        found: u64,
    },
    /// A partition of a batch has another shape than the first.
    #[error("partition {partition}: {what} is {found}, partition 0 has {expected}")]
    ShapeMismatch {
        /// Partition index.
        partition: usize,
        /// Which size differs.
        what: &'static str,
        /// Size of partition 0.
        expected: usize,
        /// Size of this partition.
        found: usize,
    },
    /// A batch needs one randomness pair per circuit.
    #[error("batch of {n_circuits} circuits but {n_randomness} randomness pairs")]
    BatchLength {
        /// Circuits given.
        n_circuits: usize,
        /// (r, s) pairs given.
        n_randomness: usize,
    },
    /// Self-check: the proof did not verify with the verifying key.
    #[error("partition {partition}: proof does not verify with the verifying key ({reason})")]
    SelfCheckFailed {
        /// Partition index (0 for a single proof).
        partition: usize,
        /// The verifier's answer.
        reason: bellman::VerificationError,
    },
    /// Parameter generation: a toxic-waste value would make every proof trivial or
    /// impossible (a drawn generator is the identity, or gamma or delta is zero).
    #[error("parameter generation: {which} is {what}; draw the toxic waste again")]
    DegenerateToxicWaste {
        /// Which value (`"g1"`, `"gamma"`, ...).
        which: &'static str,
        /// What it is.
        what: &'static str,
    },
    /// Parameter generation: an aux variable occurs in no constraint, so its `l_query`
    /// point would be the point at infinity (groth16's generator refuses it too).
    #[error("parameter generation: aux variable {index} of {n_aux} occurs in no constraint")]
    UnconstrainedVariable {
        /// The aux variable's index.
        index: u64,
        /// Aux variables of the circuit.
        n_aux: u64,
    },
    /// Parameter generation: the densities and the QAP at tau disagree about a column
    /// (its coefficients cancel inside a row), so groth16's generator would give a query
    /// the prover's densities do not match.
    #[error("parameter generation: column {column} is {} in the {query} density but its value at tau is {}", if *marked { "used" } else { "unused" }, if *marked { "zero" } else { "non-zero" })]
    DensityMismatch {
        /// `"a_query"` or `"b_query"`.
        query: &'static str,
        /// Column (inputs, then aux).
        column: u64,
        /// Whether the density marks the column used.
        marked: bool,
    },
    /// Parameter generation: writing the parameters failed.
    #[error("parameter generation: writing {section} at byte {offset}: {source}")]
    ParamsWrite {
        /// Section being written (`"vk.ic"`, `"h"`, ...).
        section: &'static str,
        /// Bytes written before the failure.
        offset: u64,
        /// The writer's error.
        #[source]
        source: std::io::Error,
    },
    /// A partition of a batch failed.
    #[error("partition {partition}: {source}")]
    Partition {
        /// Partition index.
        partition: usize,
        /// What went wrong.
        #[source]
        source: Box<ProverError>,
    },
}

impl ProverError {
    /// The error itself, looking through [`ProverError::Partition`].
    pub fn root(&self) -> &ProverError {
        match self {
            ProverError::Partition { source, .. } => source.root(),
            other => other,
        }
    }

    /// The partition named by this error, if any.
    pub fn partition(&self) -> Option<usize> {
        match self {
            ProverError::Partition { partition, .. }
            | ProverError::SelfCheckFailed { partition, .. }
            | ProverError::ShapeMismatch { partition, .. } => Some(*partition),
            _ => None,
        }
    }
}
