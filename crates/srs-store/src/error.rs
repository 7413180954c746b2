//! The crate's single error type.

use std::path::PathBuf;

use crate::layout::Section;
use crate::zkey::ZkeySection;

/// Everything that can go wrong reading, checking, loading or caching a parameter file.
///
/// Offsets are byte offsets into the file; indices count points inside a section.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SrsError {
    /// Opening, reading or mapping the file failed.
    #[error("i/o error on {path}: {source}")]
    Io {
        /// File concerned.
        path: PathBuf,
        /// Underlying error.
        source: std::io::Error,
    },
    /// The file ends inside a section's fixed part or its u32 count (shorter than its header).
    #[error("file too short: {section} header at byte offset {offset} needs {needed_bytes} bytes, file has {file_bytes}")]
    HeaderTruncated {
        /// Section whose header is cut.
        section: Section,
        /// Where the header starts.
        offset: u64,
        /// Bytes the header needs from `offset`.
        needed_bytes: u64,
        /// Length of the file.
        file_bytes: u64,
    },
    /// A section's count implies more bytes than the file holds.
    #[error("{section} at byte offset {offset}: count {n_points} needs {needed_bytes} bytes, only {available_bytes} remain")]
    SectionTruncated {
        /// Section concerned.
        section: Section,
        /// Offset of the section's first point.
        offset: u64,
        /// Count read from the file.
        n_points: u32,
        /// Bytes the count implies.
        needed_bytes: u64,
        /// Bytes left in the file from `offset`.
        available_bytes: u64,
    },
    /// Size arithmetic on a count overflowed (only reachable where `usize` is narrower than the data).
    #[error("{section} at byte offset {offset}: count {n_points} overflows the size arithmetic")]
    CountOverflow {
        /// Section concerned.
        section: Section,
        /// Offset of the section's count.
        offset: u64,
        /// Count read from the file.
        n_points: u32,
    },
    /// Bytes remain after the last section: the counts disagree with the length.
    #[error("length mismatch: counts imply {expected_bytes} bytes, file has {file_bytes} (trailing data at byte offset {expected_bytes})")]
    TrailingBytes {
        /// Length implied by the counts.
        expected_bytes: u64,
        /// Actual length.
        file_bytes: u64,
    },
    /// A section's count differs from what the caller expects for its circuit.
    #[error("{section}: expected {expected} points, file has {found}")]
    ExpectedSizeMismatch {
        /// Section concerned.
        section: Section,
        /// Count the caller expected.
        expected: u32,
        /// Count in the file.
        found: u32,
    },
    /// A point's encoding is invalid (flag bits, coordinate not below p).
    #[error("{section}[{index}] at byte offset {offset}: bad encoding: {reason}")]
    BadEncoding {
        /// Section concerned.
        section: Section,
        /// Point index in the section.
        index: u64,
        /// Byte offset of the point.
        offset: u64,
        /// What the decoder rejected.
        reason: String,
    },
    /// The point at infinity, which no section of a valid file contains.
    #[error("{section}[{index}] at byte offset {offset}: point at infinity")]
    PointAtInfinity {
        /// Section concerned.
        section: Section,
        /// Point index in the section.
        index: u64,
        /// Byte offset of the point.
        offset: u64,
    },
    /// The point is not on the curve.
    #[error("{section}[{index}] at byte offset {offset}: point not on curve")]
    NotOnCurve {
        /// Section concerned.
        section: Section,
        /// Point index in the section.
        index: u64,
        /// Byte offset of the point.
        offset: u64,
    },
    /// The point is on the curve but outside the prime-order subgroup.
    #[error("{section}[{index}] at byte offset {offset}: point not in the prime-order subgroup")]
    NotInSubgroup {
        /// Section concerned.
        section: Section,
        /// Point index in the section.
        index: u64,
        /// Byte offset of the point.
        offset: u64,
    },
    /// The budget refused the load's peak charge.
    #[error("budget refused {requested_bytes} bytes for {label}: {source}")]
    Budget {
        /// Bytes the load asked for (destination plus transient).
        requested_bytes: u64,
        /// Reservation label.
        label: String,
        /// What the budget said.
        source: memory_budget::BudgetError,
    },
    /// A caller-supplied reservation does not cover the load's peak.
    #[error("reservation of {reserved_bytes} bytes is smaller than the load's peak of {needed_bytes} bytes")]
    ReservationTooSmall {
        /// Bytes the reservation holds.
        reserved_bytes: u64,
        /// Bytes the load's plan needs at its peak.
        needed_bytes: u64,
    },
    /// Host memory could not be allocated even though the budget admitted it.
    #[error("allocation of {requested_bytes} bytes for {section} failed")]
    Alloc {
        /// Section concerned.
        section: Section,
        /// Bytes requested.
        requested_bytes: u64,
    },
    /// A GPU operation (pinned allocation, device allocation under the VRAM budget, copy)
    /// failed while loading a section.
    #[error("gpu error loading {section}: {source}")]
    Gpu {
        /// Section being loaded.
        section: Section,
        /// What `gpu-device` or the driver said.
        source: gpu_device::GpuError,
    },
    /// Another caller was loading the same circuit and its load failed.
    #[error("concurrent load of circuit {circuit_id} failed: {reason}")]
    ConcurrentLoadFailed {
        /// Circuit id.
        circuit_id: String,
        /// The other load's error, rendered.
        reason: String,
    },
    /// The file is not a snarkjs `.zkey` (its first bytes are not the magic `zkey`).
    #[error("not a zkey file: it starts with {found:?}, a zkey starts with \"zkey\"")]
    ZkeyMagic {
        /// The first bytes (lossy text).
        found: String,
    },
    /// The zkey's container version is not 1.
    #[error("zkey format version {found}, only version 1 is supported")]
    ZkeyVersion {
        /// Version found.
        found: u32,
    },
    /// The zkey ends before something it declares.
    #[error("zkey is truncated: {what} at byte offset {offset} needs {needed_bytes} bytes, only {available_bytes} remain")]
    ZkeyTruncated {
        /// What was being read.
        what: String,
        /// Where it starts.
        offset: u64,
        /// Bytes it needs.
        needed_bytes: u64,
        /// Bytes left.
        available_bytes: u64,
    },
    /// A section the prover needs is absent.
    #[error("zkey has no {section} section (type {})", section.id())]
    ZkeyMissingSection {
        /// The section.
        section: ZkeySection,
    },
    /// A section appears twice.
    #[error("zkey has two {section} sections (type {}), the second at byte offset {offset}", section.id())]
    ZkeyDuplicateSection {
        /// The section.
        section: ZkeySection,
        /// Offset of the second one's content.
        offset: u64,
    },
    /// A section's size disagrees with the header's counts.
    #[error("zkey {section} section at byte offset {offset} is {declared_bytes} bytes, the header's counts need {expected_bytes}")]
    ZkeySectionSize {
        /// The section.
        section: ZkeySection,
        /// Offset of its content.
        offset: u64,
        /// Size in the section table.
        declared_bytes: u64,
        /// Size the counts imply.
        expected_bytes: u64,
    },
    /// The zkey is for another proof system.
    #[error("zkey is for {name} (protocol id {found}), only groth16 (id 1) is supported")]
    ZkeyProtocol {
        /// Protocol id found.
        found: u32,
        /// Its name, when known.
        name: &'static str,
    },
    /// The zkey is over another curve.
    #[error("zkey is over {curve} (base field prime {prime}), expected bls12-381 (snarkjs powersoftau new bls12381, circom --prime bls12381)")]
    ZkeyCurve {
        /// The curve's name, when known.
        curve: &'static str,
        /// The base field prime found, hexadecimal.
        prime: String,
    },
    /// A header value is out of range or inconsistent.
    #[error("zkey header: {field} is {found}, expected {expected}")]
    ZkeyHeader {
        /// Which value.
        field: &'static str,
        /// What the file says.
        found: u64,
        /// What is acceptable.
        expected: String,
    },
    /// A coefficient entry is invalid.
    #[error("zkey coefficient {index} at byte offset {offset}: {reason}")]
    ZkeyCoefficient {
        /// Entry index in the coefficients section.
        index: u64,
        /// Its byte offset.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// A point is invalid (coordinate not below p, not on the curve, not in the subgroup,
    /// or at infinity where it must not be).
    #[error("zkey {section}[{index}] at byte offset {offset}: {reason}")]
    ZkeyPoint {
        /// The section.
        section: ZkeySection,
        /// Point index in the section.
        index: u64,
        /// Its byte offset.
        offset: u64,
        /// What is wrong.
        reason: &'static str,
    },
    /// Building the constraint matrices from the coefficients failed.
    #[error("zkey coefficients: {source}")]
    ZkeyMatrices {
        /// What pce-cache said.
        #[source]
        source: pce_cache::PceError,
    },
    /// An entry made in memory ([`crate::SrsStore::insert_in_memory`]) was asked for
    /// something only a file can give (another tier), or its id is taken.
    #[error("in-memory parameters {circuit_id}: {reason}")]
    InMemory {
        /// Circuit id.
        circuit_id: String,
        /// What was refused.
        reason: String,
    },
    /// The store has no entry for this circuit id.
    #[error("unknown circuit id {circuit_id}")]
    UnknownCircuit {
        /// Circuit id.
        circuit_id: String,
    },
}

/// Result alias.
pub type Result<T, E = SrsError> = std::result::Result<T, E>;
