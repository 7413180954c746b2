//! Filecoin's circuits proved by Pinion: PoRep C2, Window and Winning PoSt, SnapDeals.
//!
//! The circuits are filecoin-proofs 19.x's own (`storage-proofs-porep`, `-post`,
//! `-update`, built without their GPU code), unchanged. A bellperson constraint system
//! records each circuit into a PCE ([`bridge::RecordingCs`]) and computes its witness
//! ([`bridge::WitnessCs`]; a PoRep partition's challenges on all cores, in pieces of a
//! layer's label each, straight into their places in the witness, each piece's values
//! computed natively after the gadgets' own on a circuit's first challenge agreed with
//! them), scalars converted to `bls12_381::Scalar` through canonical bytes, so the
//! prover, the parameter store and the GPU path are the ones every other circuit uses.
//!
//! # Flow
//! 1. Inputs as Curio hands them to cuzk become a [`PartitionJob`]: [`porep::parse_c1`] +
//!    [`porep::porep_job`] (C1 JSON, bare or in Go's base64 wrapper). Each job checks the
//!    proof type, commitments and vanilla proofs with filecoin-proofs' own code first.
//! 2. [`job::prove`] records the blank circuit, checks the parameter file
//!    (`v28-<id>.params` in a Filecoin parameter folder) has exactly the sizes it needs,
//!    loads it through srs-store and proves each partition; each proof is verified with
//!    filecoin-proofs' public inputs for its partition. The output is what filecoin-proofs
//!    outputs: the partition proofs concatenated, 192 bytes each.
//! 3. [`params::generate_insecure`] writes parameters for a circuit under the same names
//!    (**insecure: tests and benchmarks only**) with groth16-prover's fast generator.
//!
//! # Example
//! ```
//! use pinion_filecoin::{porep, ProofKind};
//! use filecoin_proofs_api::RegisteredSealProof;
//!
//! let job = porep::blank_job(RegisteredSealProof::StackedDrg2KiBV1_1)?;
//! let id = job.circuit_id();
//! assert_eq!(id.kind, ProofKind::PorepC2);
//! assert!(id.params_file_name().starts_with("v28-stacked-proof-of-replication-"));
//! assert_eq!(job.n_partitions(), 1);
//! # Ok::<(), pinion_filecoin::FilecoinError>(())
//! ```
//!
//! # Non-goals
//! No sealing, no vanilla proving, no proof aggregation (non-interactive PoRep is
//! refused); those stay filecoin-proofs'.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod bridge;
mod error;
pub mod job;
mod native;
pub mod params;
pub mod porep;
pub mod post;
pub mod snap;
#[cfg(feature = "test-support")]
pub mod testing;

pub use error::FilecoinError;
pub use job::{CircuitId, PartitionJob, ProofKind, ProveOptions, PARTITION_PROOF_BYTES};

/// PoRep C2 from a C1 output (bare JSON or Go's base64 wrapper): the partition proofs
/// concatenated, 192 bytes each, as `seal_commit_phase2` outputs them.
pub fn porep_c2(
    c1: &[u8],
    target: &porep::C2Target,
    opts: &ProveOptions,
) -> Result<Vec<u8>, FilecoinError> {
    let job = porep::porep_job(porep::parse_c1(c1)?, target)?;
    job::prove(job.as_ref(), opts)
}

/// Window PoSt from vanilla proofs: every partition, or the one `req.partition` names.
pub fn window_post(req: &post::PostRequest, opts: &ProveOptions) -> Result<Vec<u8>, FilecoinError> {
    let job = post::post_job(ProofKind::WindowPost, req)?;
    job::prove(job.as_ref(), opts)
}

/// Winning PoSt from vanilla proofs (one 192-byte proof).
pub fn winning_post(
    req: &post::PostRequest,
    opts: &ProveOptions,
) -> Result<Vec<u8>, FilecoinError> {
    let job = post::post_job(ProofKind::WinningPost, req)?;
    job::prove(job.as_ref(), opts)
}

/// SnapDeals update proof from its partition proofs and commitments.
pub fn snap_update(req: &snap::SnapRequest, opts: &ProveOptions) -> Result<Vec<u8>, FilecoinError> {
    let job = snap::snap_job(req)?;
    job::prove(job.as_ref(), opts)
}

/// `2KiB`, `32GiB`, ... (bytes when not a whole power of 1024).
pub fn sector_size_name(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut v = bytes;
    let mut unit = 0;
    while unit + 1 < UNITS.len() && v >= 1024 && v % 1024 == 0 {
        v /= 1024;
        unit += 1;
    }
    format!("{v}{}", UNITS[unit])
}
