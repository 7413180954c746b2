//! circom's binary formats over the BLS12-381 scalar field (`circom --prime bls12381`):
//! `.r1cs` (iden3 format version 1) and `.wtns` (version 2), and the bellman circuit of a
//! constraint system.

mod circuit;
mod error;
mod r1cs;
mod reader;
mod wtns;

pub use circuit::CircomCircuit;
pub use error::{CircomError, FileKind};
pub use r1cs::{Constraint, R1cs, Term};
pub use wtns::{parse_wtns, wtns_bytes};

#[cfg(test)]
pub(crate) mod tests;
