//! Pre-compiled constraint evaluator (PCE): record a circuit's R1CS once, then compute the
//! Groth16 `a`, `b`, `c` vectors of every later proof by witness-only synthesis plus three
//! parallel sparse matrix-vector products.
//!
//! # Example
//! Record a circuit proving knowledge of `x` with `x³ = y` once, then evaluate a, b and c
//! for a witness (x = 3) by witness-only synthesis:
//! ```
//! use bellman::{Circuit, ConstraintSystem, SynthesisError};
//! use bls12_381::Scalar;
//! use pce_cache::Pce;
//!
//! struct Cube(Option<Scalar>);
//!
//! impl Circuit<Scalar> for Cube {
//!     fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
//!         let x = self.0;
//!         let xv = cs.alloc(|| "x", || x.ok_or(SynthesisError::AssignmentMissing))?;
//!         let x2 = x.map(|x| x * x);
//!         let x2v = cs.alloc(|| "x2", || x2.ok_or(SynthesisError::AssignmentMissing))?;
//!         let y = cs.alloc_input(|| "y", || x2.zip(x).map(|(a, b)| a * b).ok_or(SynthesisError::AssignmentMissing))?;
//!         cs.enforce(|| "x*x", |lc| lc + xv, |lc| lc + xv, |lc| lc + x2v);
//!         cs.enforce(|| "x2*x", |lc| lc + x2v, |lc| lc + xv, |lc| lc + y);
//!         Ok(())
//!     }
//! }
//!
//! let pce = Pce::record(Cube(None))?;
//! let n = pce.shape().n_rows as usize; // 2 constraints + 2 input rows (ONE and y)
//! assert_eq!(n, 4);
//! let w = pce.synthesize_witness(Cube(Some(Scalar::from(3))))?;
//! assert_eq!(w.inputs, [Scalar::from(1), Scalar::from(27)]);
//! let (mut a, mut b, mut c) = (vec![Scalar::from(0); n], vec![Scalar::from(0); n], vec![Scalar::from(0); n]);
//! pce.evaluate_into(&w.inputs, &w.aux, &mut a, &mut b, &mut c)?;
//! for i in 0..n {
//!     assert_eq!(a[i] * b[i], c[i], "row {i} is satisfied");
//! }
//! assert_eq!((a[1], b[1], c[1]), (Scalar::from(9), Scalar::from(3), Scalar::from(27)));
//! # Ok::<(), pce_cache::PceError>(())
//! ```
//!
//! # Flow
//! 1. **Record** ([`Recorder`], or [`PceCache::get_or_extract`]): a bellman
//!    `ConstraintSystem<bls12_381::Scalar>` that stores A, B, C instead of evaluating them.
//! 2. **Witness** ([`Pce::synthesize_witness`] / [`WitnessCs`]): a constraint system whose
//!    `enforce` does nothing; it yields `inputs` (ONE first) and `aux` in groth16's order.
//! 3. **Evaluate** ([`Pce::evaluate_into`], [`Pce::evaluate_into_with`]): `a = A·w`,
//!    `b = B·w`, `c = C·w` straight into caller buffers (for example pinned memory), rayon
//!    over blocks of [`ROW_BLOCK`] rows, ±1 coefficients without a multiplication.
//!    [`Pce::synthesize_and_evaluate`] does 2 and 3 at once: the circuit writes aux values in
//!    place while another thread evaluates every row block whose variables already exist
//!    (it gains only when a core is free; results are identical).
//! 4. **Densities** ([`Pce::densities`]): which `a_query`/`b_g1_query`/`b_g2_query` bases the
//!    MSMs use, computed once at recording.
//!
//! # Guarantees
//! - **Bit-identical to groth16 0.2.** The column space is inputs (index 0 is ONE) then aux.
//!   Rows are the circuit's constraints in `enforce` order followed by one row per input,
//!   `input_i · 0 = 0` (A has `+1` at column `i`, B and C are empty), exactly the rows
//!   groth16's `create_proof` appends after synthesis; so `a`, `b`, `c` have
//!   `n_rows = n_constraints + n_inputs` entries and equal groth16's `prover.a/b/c` element
//!   by element. Inside a row, duplicate columns are merged and terms grouped by coefficient
//!   (then column); field addition is exact and commutative, so the value is unchanged.
//!   Densities follow groth16's rule on the terms as written: a variable is dense in A (over
//!   aux) or B (over inputs and aux) when some term for it has a non-zero coefficient, even
//!   if terms cancel.
//! - **Files are never trusted.** A cache file whose magic, version, header checksum, any
//!   section checksum or fingerprint is wrong is rejected with a typed [`PceError`] (and the
//!   cache re-extracts); even [`Pce::load_unchecked`] validates every index, so evaluation of
//!   a loaded file cannot panic or read out of bounds.
//! - **Memory is charged first.** Recording grows its [`memory_budget::Reservation`] before
//!   each buffer growth (the transient peak, charged to `Category::Pce`), then shrinks it to
//!   what stays resident. The cache's entries hold their reservation and are evictable
//!   through the budget's evictor when nobody holds them.
//!
//! # Storage and cost model
//! Per matrix: one `u64` pointer per block of [`ROW_BLOCK`] rows (so more than 2^32
//! non-zeros are fine), one length byte per row (255 = "long row", length in a side list),
//! one `u32` column per non-zero, and one coefficient code per non-zero in the narrowest of
//! u8/u16/u32 that holds the matrix's largest code. Codes index one table of distinct
//! coefficients: 0 is +1, 1 is -1, the rest ordered by frequency. A SHA-256 circuit takes
//! 6.4 bytes per non-zero, row pointers and coefficient table included
//! ([`Pce::bytes_per_nonzero`]; the reference implementation: ~36).
//! `u32` columns limit a circuit to 2^32 - 1 variables (inputs + aux, and aux < 2^31 while
//! recording; beyond, recording fails with [`PceError::TooManyColumns`]); the largest
//! Filecoin circuits have under 2^28.
//! Per-row `u64` pointers were rejected: SHA-256 rows hold under 2 non-zeros per matrix on
//! average, so they alone would cost 4.4 bytes per non-zero (10.3 in all, over the 9-byte
//! target).
//!
//! Evaluation costs one field addition per non-zero plus, per distinct coefficient of a row,
//! nothing (±1), up to four doublings (±2..±16) or one multiplication; it streams the
//! matrices once and reads the witness at random (SHA-256, 2^20 constraints: about 12 ns per
//! non-zero on one core).
//!
//! # Non-goals
//! No GPU work (the prover uploads `a`, `b`, `c`); no witness storage; no protection against
//! a cache file being modified in place while mapped (files are only ever replaced by
//! rename; editing a mapped file by hand is outside the contract).

#![warn(missing_docs)]
#![deny(unsafe_code)]

mod builder;
mod cache;
mod error;
mod eval;
mod file;
mod pipeline;
mod record;
pub mod reference;
mod rows;
mod storage;

use std::path::{Path, PathBuf};

use bellman::Circuit;
use bls12_381::Scalar;
use rayon::prelude::*;
use sha2::{Digest, Sha256};

pub use cache::{CacheConfig, CircuitKey, PceCache, PceHandle, PceSource};
pub use error::PceError;
pub use eval::{first_unsatisfied_row, AbcMut};
pub use file::{FORMAT_VERSION, MAGIC};
pub use pipeline::{zeroed, OverlapTimes};
pub use record::{Recorder, Witness, WitnessCs};
pub use rows::RowBuilder;
pub use storage::{Densities, Density, MatrixId, MatrixParts, Shape, LONG_ROW, ROW_BLOCK};

use storage::{CoeffTable, Matrix};

/// Identifies a circuit's matrices: sha256 over the shape and every stored section.
#[derive(Copy, Clone, PartialEq, Eq, Hash)]
pub struct Fingerprint(pub [u8; 32]);

impl std::fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for b in &self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl std::fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Fingerprint({self})")
    }
}

/// A recorded circuit: the compact A, B, C matrices, the coefficient table and densities,
/// either owned (just extracted) or mapped from a cache file.
pub struct Pce {
    shape: Shape,
    table: CoeffTable,
    /// Canonical little-endian bytes of `table`, as stored on disk.
    table_bytes: Vec<u8>,
    mats: [Matrix; 3],
    dens: Densities,
    /// sha256 of each section, in file order.
    checksums: Vec<[u8; 32]>,
    fingerprint: Fingerprint,
    source: Option<PathBuf>,
    needs: pipeline::Needs,
}

impl Pce {
    pub(crate) fn from_parts(
        shape: Shape,
        table: CoeffTable,
        mats: [Matrix; 3],
        dens: Densities,
    ) -> Pce {
        let table_bytes = file::table_bytes(&table.scalars);
        let mut pce = Pce {
            shape,
            table,
            table_bytes,
            mats,
            dens,
            checksums: Vec::new(),
            fingerprint: Fingerprint([0; 32]),
            source: None,
            needs: pipeline::Needs::new(),
        };
        let sections = pce.section_refs();
        let checksums: Vec<[u8; 32]> = sections
            .par_iter()
            .map(|s| Sha256::digest(s.bytes).into())
            .collect();
        let summary: Vec<(u32, u64, [u8; 32])> = sections
            .iter()
            .zip(&checksums)
            .map(|(s, sum)| {
                (
                    s.elem_bytes,
                    (s.bytes.len() / s.elem_bytes as usize) as u64,
                    *sum,
                )
            })
            .collect();
        pce.fingerprint = file::fingerprint_of(&shape, &summary);
        pce.checksums = checksums;
        pce
    }

    /// Records `circuit` without charging any budget (see [`Recorder`] and [`PceCache`] for
    /// charged recording).
    pub fn record<C: Circuit<Scalar>>(circuit: C) -> Result<Pce, PceError> {
        let start = std::time::Instant::now();
        let (pce, _) = Recorder::record(circuit, None)?;
        pce.record_metrics(start.elapsed());
        Ok(pce)
    }

    pub(crate) fn record_metrics(&self, took: std::time::Duration) {
        metrics::histogram!("pinion_pce_extraction_seconds").record(took.as_secs_f64());
        metrics::gauge!("pinion_pce_last_nonzeros").set(self.n_nonzeros() as f64);
        metrics::gauge!("pinion_pce_last_matrix_bytes").set(self.matrix_bytes() as f64);
    }

    /// Sizes of the circuit.
    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// The circuit's fingerprint.
    pub fn fingerprint(&self) -> Fingerprint {
        self.fingerprint
    }

    /// Query densities (groth16 semantics).
    pub fn densities(&self) -> &Densities {
        &self.dens
    }

    /// Non-zeros of one matrix (after merging duplicate columns within a row).
    pub fn n_nonzeros_of(&self, m: MatrixId) -> u64 {
        self.mats[m.index()].n_nonzeros()
    }

    /// Non-zeros of A, B and C together.
    pub fn n_nonzeros(&self) -> u64 {
        self.mats.iter().map(|m| m.n_nonzeros()).sum()
    }

    /// Non-zeros of one matrix by coefficient kind: `(+1, -1, other)`. Only `other` costs a
    /// multiplication in evaluation.
    pub fn n_nonzeros_by_kind(&self, m: MatrixId) -> (u64, u64, u64) {
        let codes = &self.mats[m.index()].codes;
        let (plus, minus) = (0..codes.len())
            .into_par_iter()
            .with_min_len(1 << 16)
            .map(|i| match codes.get(i) {
                0 => (1u64, 0u64),
                1 => (0, 1),
                _ => (0, 0),
            })
            .reduce(|| (0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
        (plus, minus, codes.len() as u64 - plus - minus)
    }

    /// Distinct coefficients (including +1 and -1).
    pub fn n_coefficients(&self) -> usize {
        self.table.len()
    }

    /// Coefficient code width in bytes (1, 2 or 4) of one matrix.
    pub fn code_bytes_of(&self, m: MatrixId) -> u32 {
        self.mats[m.index()].codes.elem_bytes()
    }

    /// One matrix's sections as stored (see [`MatrixParts`]): for an evaluator outside
    /// this crate, e.g. on a GPU, that reads the compact layout itself.
    pub fn matrix_parts(&self, m: MatrixId) -> MatrixParts<'_> {
        let mat = &self.mats[m.index()];
        MatrixParts {
            block_ptr: mat.block_ptr.as_slice(),
            row_len: mat.row_len.as_slice(),
            long_row: mat.long_row.as_slice(),
            long_len: mat.long_len.as_slice(),
            cols: mat.cols.as_slice(),
            codes: mat.codes.as_bytes(),
            code_bytes: mat.codes.elem_bytes(),
        }
    }

    /// The coefficient table every matrix's codes index (entry 0 is +1, entry 1 is −1).
    pub fn coefficients(&self) -> &[Scalar] {
        &self.table.scalars
    }

    /// Bytes of the three matrices and the coefficient table (the compression figure).
    pub fn matrix_bytes(&self) -> u64 {
        self.mats.iter().map(|m| m.bytes()).sum::<u64>() + self.table_bytes.len() as u64
    }

    /// [`Pce::matrix_bytes`] per non-zero.
    pub fn bytes_per_nonzero(&self) -> f64 {
        self.matrix_bytes() as f64 / self.n_nonzeros().max(1) as f64
    }

    /// Bytes this PCE keeps in memory (owned buffers, or the mapped file's sections, which
    /// occupy page cache once touched): what a cache charges for it.
    pub fn resident_bytes(&self) -> u64 {
        self.matrix_bytes() + self.dens.bytes() + (self.table.len() * 32) as u64
    }

    /// The file this PCE is mapped from, if any.
    pub fn file_path(&self) -> Option<&Path> {
        self.source.as_deref()
    }

    /// Runs the circuit's witness computation only (no linear combinations are recorded or
    /// evaluated) and checks that it allocates the recorded number of inputs and aux.
    pub fn synthesize_witness<C: Circuit<Scalar>>(&self, circuit: C) -> Result<Witness, PceError> {
        let start = std::time::Instant::now();
        let w = WitnessCs::synthesize(
            circuit,
            self.shape.n_inputs as usize,
            self.shape.n_aux as usize,
        )?;
        if w.inputs.len() as u64 != self.shape.n_inputs {
            return Err(PceError::ShapeMismatch {
                what: "inputs allocated by witness synthesis",
                expected: self.shape.n_inputs,
                found: w.inputs.len() as u64,
            });
        }
        if w.aux.len() as u64 != self.shape.n_aux {
            return Err(PceError::ShapeMismatch {
                what: "aux allocated by witness synthesis",
                expected: self.shape.n_aux,
                found: w.aux.len() as u64,
            });
        }
        metrics::histogram!("pinion_pce_witness_seconds").record(start.elapsed().as_secs_f64());
        Ok(w)
    }
}
