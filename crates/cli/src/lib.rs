//! The library half of the `pinion` command line: circom's `.r1cs`/`.wtns` formats for
//! BLS12-381, snarkjs's JSON files (proof, public values, verification key), decimal
//! field elements, and what `verify` reads ([`statement`]: the verifying key through
//! `srs-store`, 192-byte proofs, public values). The binary (`src/main.rs`) wires these and
//! the workspace crates into subcommands.
//!
//! # Example
//! Parse a circom `.r1cs` and two `.wtns` files (the bytes of `fixtures/circom/`:
//! `x³ + x + k = out`), check the witnesses against the constraints, and see truncated
//! bytes refused:
//! ```
//! use pinion::circom::parse_wtns;
//! use pinion::{fixtures, CircomError, R1cs};
//!
//! let files: std::collections::HashMap<_, _> = fixtures::cubic_files().into_iter().collect();
//! let r1cs = R1cs::parse(&files["cubic.r1cs"])?;
//! assert_eq!((r1cs.n_wires(), r1cs.n_public(), r1cs.constraints().len()), (6, 2, 3));
//! r1cs.check_witness(&parse_wtns(&files["cubic.wtns"])?)?;
//! // out = 36 instead of 35: the last constraint fails, named in the error.
//! assert!(r1cs.check_witness(&parse_wtns(&files["cubic-bad.wtns"])?).is_err());
//! let r1cs_bytes = &files["cubic.r1cs"];
//! assert!(R1cs::parse(&r1cs_bytes[..r1cs_bytes.len() - 1]).is_err());
//! # Ok::<(), CircomError>(())
//! ```
//!
//! # Guarantees
//! - Parsers are pure functions of the file's bytes. Every declared size is checked
//!   against the bytes present before anything proportional to it is allocated; every
//!   field element must be canonical (below r); the prime must be the BLS12-381 scalar
//!   field's. Failures are a typed [`CircomError`] naming the section, index and offset;
//!   bad input never panics.
//! - [`CircomCircuit`] is the bellman circuit of a constraint system (wire 0 is ONE,
//!   public outputs then public inputs are bellman inputs, other wires aux, one `enforce`
//!   per constraint as written), so parameters from `groth16::generate_random_parameters`
//!   for it fit `pinion prove`, and proofs equal `groth16::create_proof`'s.
//!
//! # Non-goals
//! No witness generation (circom's witness calculator does that), no other primes, no
//! Plonk custom gates, no streaming: files are read whole (they are a few times smaller
//! than the proving working set).
//!
//! # Cost model
//! Parsing is one pass over the bytes plus one field-element canonicity check per
//! coefficient and witness value; the witness check is one multiply-add per term.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod circom;
pub mod decimal;
pub mod fixtures;
pub mod snarkjs;
pub mod statement;

pub use circom::{CircomCircuit, CircomError, FileKind, R1cs};
