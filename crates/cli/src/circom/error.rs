//! The library's one error type.

use thiserror::Error;

/// Which circom file a [`CircomError`] is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// A constraint system (`.r1cs`, iden3 format version 1).
    R1cs,
    /// A witness (`.wtns`, version 2).
    Wtns,
}

impl std::fmt::Display for FileKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FileKind::R1cs => "r1cs",
            FileKind::Wtns => "wtns",
        })
    }
}

/// Why a circom file, a witness or a decimal number was refused. Bad input is reported,
/// never a panic; offsets are byte offsets from the start of the file.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum CircomError {
    /// The first four bytes are not the format's magic.
    #[error("{kind} file has magic \"{found}\", expected \"{expected}\"")]
    BadMagic {
        /// File kind.
        kind: FileKind,
        /// Expected magic.
        expected: &'static str,
        /// The first bytes found (at most the magic's length; non-ASCII bytes escaped).
        found: String,
    },
    /// The format version is not the supported one.
    #[error("{kind} file has format version {found}, only version {expected} is supported")]
    UnsupportedVersion {
        /// File kind.
        kind: FileKind,
        /// Supported version.
        expected: u32,
        /// Version found.
        found: u32,
    },
    /// The file ends before something it declares.
    #[error("{kind} file is truncated: {what} needs {needed_bytes} bytes at byte offset {offset}, only {available_bytes} remain")]
    Truncated {
        /// File kind.
        kind: FileKind,
        /// What was being read.
        what: String,
        /// Where it starts.
        offset: u64,
        /// Bytes it needs.
        needed_bytes: u64,
        /// Bytes left in the file (or section).
        available_bytes: u64,
    },
    /// Bytes left over after the last section.
    #[error("{kind} file has {extra_bytes} bytes after its last section (byte offset {offset})")]
    TrailingBytes {
        /// File kind.
        kind: FileKind,
        /// Where they start.
        offset: u64,
        /// How many.
        extra_bytes: u64,
    },
    /// A required section is absent.
    #[error("{kind} file has no {section} section (type {section_type})")]
    MissingSection {
        /// File kind.
        kind: FileKind,
        /// Section name.
        section: &'static str,
        /// Its type number.
        section_type: u32,
    },
    /// A section appears twice.
    #[error("{kind} file has two {section} sections (type {section_type}), the second at byte offset {offset}")]
    DuplicateSection {
        /// File kind.
        kind: FileKind,
        /// Section name.
        section: &'static str,
        /// Its type number.
        section_type: u32,
        /// Offset of the second one.
        offset: u64,
    },
    /// A section's declared size disagrees with its content.
    #[error("{kind} {section} section at byte offset {offset} is {declared_bytes} bytes, its content needs {expected_bytes}")]
    SectionSize {
        /// File kind.
        kind: FileKind,
        /// Section name.
        section: &'static str,
        /// Offset of the section's content.
        offset: u64,
        /// Size in the section header.
        declared_bytes: u64,
        /// Size its content implies.
        expected_bytes: u64,
    },
    /// Plonk custom gates (circom sections 4 and 5) have no Groth16 meaning.
    #[error(
        "r1cs file uses custom gates (section type {section_type}), which groth16 cannot prove"
    )]
    CustomGates {
        /// The section type found.
        section_type: u32,
    },
    /// Field elements are not 32 bytes.
    #[error("{kind} file has {found}-byte field elements (prime {prime}), expected 32 (bls12-381 scalar field, circom --prime bls12381)")]
    FieldSize {
        /// File kind.
        kind: FileKind,
        /// Field element size found.
        found: u32,
        /// The prime in the header, decimal.
        prime: String,
    },
    /// The prime is not the BLS12-381 scalar field's.
    #[error("{kind} file is over the prime {found}, expected the bls12-381 scalar field r = {expected} (compile with circom --prime bls12381)")]
    WrongPrime {
        /// File kind.
        kind: FileKind,
        /// Prime found, decimal.
        found: String,
        /// r, decimal.
        expected: String,
    },
    /// A field element is not below r.
    #[error(
        "{kind} file: {what} at byte offset {offset} is not a canonical field element (not below r)"
    )]
    NonCanonical {
        /// File kind.
        kind: FileKind,
        /// Which value.
        what: String,
        /// Its offset.
        offset: u64,
    },
    /// The header's wire counts do not add up.
    #[error("r1cs header declares {n_wires} wires, fewer than 1 + {n_pub_out} public outputs + {n_pub_in} public inputs + {n_prv_in} private inputs")]
    WireCounts {
        /// Wires declared.
        n_wires: u32,
        /// Public outputs.
        n_pub_out: u32,
        /// Public inputs.
        n_pub_in: u32,
        /// Private inputs.
        n_prv_in: u32,
    },
    /// The header declares fewer labels than wires.
    #[error("r1cs header declares {n_labels} labels, fewer than its {n_wires} wires (each wire is one labelled signal)")]
    LabelCount {
        /// Labels declared.
        n_labels: u64,
        /// Wires declared.
        n_wires: u32,
    },
    /// The wire-to-label map disagrees with the header or with itself.
    #[error("r1cs wire-to-label map: wire {wire} has label {label}, {reason}")]
    WireLabel {
        /// The wire.
        wire: u64,
        /// Its label.
        label: u64,
        /// What is wrong with it.
        reason: String,
    },
    /// A constraint names a wire that does not exist.
    #[error("r1cs constraint {constraint}, {matrix} term {term}: wire {wire} out of range (the circuit has {n_wires} wires)")]
    WireOutOfRange {
        /// Constraint index.
        constraint: u64,
        /// `"a"`, `"b"` or `"c"`.
        matrix: &'static str,
        /// Term index in that linear combination.
        term: u64,
        /// Wire id found.
        wire: u32,
        /// Wires the header declares.
        n_wires: u32,
    },
    /// Witness and constraint system disagree on the number of wires.
    #[error("witness has {found} values, the r1cs has {expected} wires")]
    WitnessLength {
        /// Wires of the r1cs.
        expected: u64,
        /// Values in the witness.
        found: u64,
    },
    /// Wire 0 must hold the constant one.
    #[error("witness value 0 (the constant one) is {found}, expected 1")]
    WitnessOne {
        /// The value found, decimal.
        found: String,
    },
    /// The witness does not satisfy a constraint.
    #[error("witness does not satisfy r1cs constraint {constraint} of {n_constraints} (a·b ≠ c)")]
    Unsatisfied {
        /// First failing constraint, 0-based in file order.
        constraint: u64,
        /// Constraints in the r1cs.
        n_constraints: u64,
    },
    /// A snarkjs JSON file (proof, verification key, public values) is not usable.
    #[error("{what}: {reason}")]
    Json {
        /// Which file and field (`"proof.pi_a[1]"`, `"public value 2"`).
        what: String,
        /// What is wrong.
        reason: String,
    },
    /// A decimal field element could not be parsed.
    #[error("{text:?} is not a field element: {reason}")]
    BadDecimal {
        /// The text (shortened).
        text: String,
        /// Why.
        reason: &'static str,
    },
    /// A proof is not 192 bytes.
    #[error("proof is {found_bytes} bytes, a groth16 bls12-381 proof is 192 (compressed A, B, C)")]
    ProofLength {
        /// Length found.
        found_bytes: u64,
    },
    /// A proof point was refused.
    #[error("proof element {element} at byte offset {offset}: {reason}")]
    BadProofElement {
        /// A, B or C.
        element: crate::statement::ProofElement,
        /// Byte offset of its encoding in the proof.
        offset: u64,
        /// What the decoder refused.
        reason: &'static str,
    },
    /// Public values are not a JSON array.
    #[error("public values: {reason}")]
    PublicJson {
        /// What was found instead.
        reason: String,
    },
    /// One public value was refused.
    #[error("public value {index}: {reason}")]
    PublicValue {
        /// Its index in the array (0 is the first output).
        index: u64,
        /// Why.
        reason: String,
    },
    /// A parameter file's verifying key (or its header walk) was refused by `srs-store`.
    #[error(transparent)]
    Params(#[from] srs_store::SrsError),
    /// A verifying-key point that `srs-store` accepted did not convert (a bug, reported
    /// rather than trusted).
    #[error("verifying key {element}[{index}] does not convert: {source}")]
    KeyPoint {
        /// Which point (`alpha_g1`, ..., `ic`).
        element: &'static str,
        /// Index (0 except in `ic`).
        index: u64,
        /// What the conversion said.
        source: bls_repr::ReprError,
    },
}

/// Text of a file's first bytes for a bad-magic message: ASCII as is, other bytes escaped
/// (`\x89PNG`), so expected and found compare as text.
pub(crate) fn magic_text(bytes: &[u8]) -> String {
    bytes.escape_ascii().to_string()
}
