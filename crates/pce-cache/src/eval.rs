//! Sparse mat-vec: a = A·w, b = B·w, c = C·w, and check mode.

use bls12_381::Scalar;
use ff::Field;
use rayon::prelude::*;

use crate::storage::{Codes, CoeffTable, Matrix, LONG_ROW, ROW_BLOCK};
use crate::{Pce, PceError};

/// Row blocks handed to one rayon task at least: enough work to amortise scheduling.
const MIN_BLOCKS_PER_TASK: usize = 8;

/// Read-only view of one matrix with its codes resolved to a concrete width.
pub(crate) struct View<'a, K> {
    block_ptr: &'a [u64],
    row_len: &'a [u8],
    long_row: &'a [u64],
    long_len: &'a [u64],
    cols: &'a [u32],
    codes: &'a [K],
}

/// Where the evaluator reads witness values from.
pub(crate) trait WitnessRead: Copy + Sync {
    /// Value of column `col` (inputs, then aux).
    fn get(&self, col: u32) -> Scalar;
}

/// The witness split as groth16 keeps it; column `< n_inputs` reads `inputs`.
#[derive(Copy, Clone)]
pub(crate) struct Wit<'a> {
    pub(crate) inputs: &'a [Scalar],
    pub(crate) aux: &'a [Scalar],
}

impl WitnessRead for Wit<'_> {
    #[inline(always)]
    fn get(&self, col: u32) -> Scalar {
        let col = col as usize;
        // Inputs are few and rarely referenced, so this branch predicts well.
        if col < self.inputs.len() {
            self.inputs[col]
        } else {
            self.aux[col - self.inputs.len()]
        }
    }
}

pub(crate) trait Code: Copy + Send + Sync {
    fn idx(self) -> usize;
}
impl Code for u8 {
    #[inline(always)]
    fn idx(self) -> usize {
        self as usize
    }
}
impl Code for u16 {
    #[inline(always)]
    fn idx(self) -> usize {
        self as usize
    }
}
impl Code for u32 {
    #[inline(always)]
    fn idx(self) -> usize {
        self as usize
    }
}

impl<K: Code> View<'_, K> {
    /// Evaluates the rows of block `blk` into `out` (one slot per row of the block).
    #[inline]
    fn eval_block<T, W: WitnessRead>(
        &self,
        blk: usize,
        w: W,
        table: &CoeffTable,
        out: &mut [T],
        convert: &(impl Fn(Scalar) -> T + Sync),
    ) {
        let r0 = blk * ROW_BLOCK;
        let mut p = self.block_ptr[blk] as usize;
        let mut li = self.long_row.partition_point(|&r| r < r0 as u64);
        for (k, slot) in out.iter_mut().enumerate() {
            let mut len = self.row_len[r0 + k] as usize;
            if len == LONG_ROW as usize {
                len = self.long_len[li] as usize;
                li += 1;
            }
            let end = p + len;
            // Most rows of B (and many of A and C) are a single +1 term.
            if len == 1 && self.codes[p].idx() == 0 {
                *slot = convert(w.get(self.cols[p]));
                p = end;
                continue;
            }
            // Terms are grouped by code: sum each group, then apply its coefficient once.
            let mut acc = Scalar::ZERO;
            let mut run = Scalar::ZERO;
            let mut run_code = 0;
            for (&col, &code) in self.cols[p..end].iter().zip(&self.codes[p..end]) {
                let code = code.idx();
                if code != run_code {
                    apply(&mut acc, run, run_code, table);
                    run = Scalar::ZERO;
                    run_code = code;
                }
                run += w.get(col);
            }
            apply(&mut acc, run, run_code, table);
            p = end;
            *slot = convert(acc);
        }
    }
}

/// `acc += coefficient(code) · run`: no multiplication for ±1, doublings for small ±2^k.
#[inline(always)]
fn apply(acc: &mut Scalar, run: Scalar, code: usize, table: &CoeffTable) {
    match code {
        0 => *acc += run,
        1 => *acc -= run,
        i => match table.pow2[i] {
            0 => *acc += run * table.scalars[i],
            k => {
                let mut x = run;
                for _ in 0..k.unsigned_abs() {
                    x = x.double();
                }
                if k > 0 {
                    *acc += x
                } else {
                    *acc -= x
                }
            }
        },
    }
}

/// Output buffers for [`Pce::evaluate_into_with`]; each must hold at least `n_rows` elements.
pub struct AbcMut<'a, T> {
    /// Receives A·w.
    pub a: &'a mut [T],
    /// Receives B·w.
    pub b: &'a mut [T],
    /// Receives C·w.
    pub c: &'a mut [T],
}

impl Pce {
    /// Checks that a witness has this circuit's numbers of inputs and aux values (what
    /// every evaluation checks first), for a caller that evaluates it elsewhere.
    pub fn check_witness_lengths(&self, inputs: &[Scalar], aux: &[Scalar]) -> Result<(), PceError> {
        self.check_witness(inputs, aux)
    }

    fn check_witness(&self, inputs: &[Scalar], aux: &[Scalar]) -> Result<(), PceError> {
        let s = self.shape();
        if inputs.len() as u64 != s.n_inputs {
            return Err(PceError::ShapeMismatch {
                what: "number of inputs",
                expected: s.n_inputs,
                found: inputs.len() as u64,
            });
        }
        if aux.len() as u64 != s.n_aux {
            return Err(PceError::ShapeMismatch {
                what: "number of aux variables",
                expected: s.n_aux,
                found: aux.len() as u64,
            });
        }
        Ok(())
    }

    pub(crate) fn check_out(&self, what: &'static str, len: usize) -> Result<(), PceError> {
        if (len as u64) < self.shape().n_rows {
            return Err(PceError::ShapeMismatch {
                what,
                expected: self.shape().n_rows,
                found: len as u64,
            });
        }
        Ok(())
    }

    /// Computes a = A·w, b = B·w, c = C·w into caller buffers (for example pinned memory).
    ///
    /// Each buffer must hold at least `n_rows` elements; rows are written in groth16's order
    /// and any slots past `n_rows` are set to zero (the FFT domain's padding). The values are
    /// the same field elements groth16 0.2's prover computes.
    pub fn evaluate_into(
        &self,
        inputs: &[Scalar],
        aux: &[Scalar],
        a: &mut [Scalar],
        b: &mut [Scalar],
        c: &mut [Scalar],
    ) -> Result<(), PceError> {
        self.evaluate_into_with(inputs, aux, AbcMut { a, b, c }, Scalar::ZERO, |s| s)
    }

    /// Like [`Pce::evaluate_into`], converting each value with `convert` (for example to a
    /// GPU Montgomery layout) as it is written; `zero` fills the padding.
    pub fn evaluate_into_with<T: Send + Sync + Copy>(
        &self,
        inputs: &[Scalar],
        aux: &[Scalar],
        out: AbcMut<'_, T>,
        zero: T,
        convert: impl Fn(Scalar) -> T + Sync,
    ) -> Result<(), PceError> {
        self.check_witness(inputs, aux)?;
        self.check_out("a buffer length", out.a.len())?;
        self.check_out("b buffer length", out.b.len())?;
        self.check_out("c buffer length", out.c.len())?;
        let start = std::time::Instant::now();
        let n_rows = self.shape().n_rows as usize;
        let w = Wit { inputs, aux };
        let table = &self.table;
        let [ma, mb, mc] = &self.mats;
        let AbcMut { a, b, c } = out;
        let (a, a_pad) = a.split_at_mut(n_rows);
        let (b, b_pad) = b.split_at_mut(n_rows);
        let (c, c_pad) = c.split_at_mut(n_rows);
        with_view3(ma, mb, mc, |va, vb, vc| {
            // One task evaluates the same row block of all three matrices: their rows touch
            // overlapping witness ranges, so the witness stays in cache.
            a.par_chunks_mut(ROW_BLOCK)
                .zip(b.par_chunks_mut(ROW_BLOCK))
                .zip(c.par_chunks_mut(ROW_BLOCK))
                .enumerate()
                .with_min_len(MIN_BLOCKS_PER_TASK)
                .for_each(|(blk, ((oa, ob), oc))| {
                    va.eval_dyn(blk, w, table, oa, &convert);
                    vb.eval_dyn(blk, w, table, ob, &convert);
                    vc.eval_dyn(blk, w, table, oc, &convert);
                });
        });
        for pad in [a_pad, b_pad, c_pad] {
            pad.par_iter_mut().for_each(|x| *x = zero);
        }
        metrics::counter!("pinion_pce_evaluations_total").increment(1);
        metrics::histogram!("pinion_pce_evaluation_seconds").record(start.elapsed().as_secs_f64());
        Ok(())
    }

    /// Evaluates one matrix into `out` (at least `n_rows` long; padding zeroed).
    pub fn evaluate_matrix_into(
        &self,
        which: crate::MatrixId,
        inputs: &[Scalar],
        aux: &[Scalar],
        out: &mut [Scalar],
    ) -> Result<(), PceError> {
        self.check_witness(inputs, aux)?;
        self.check_out("output buffer length", out.len())?;
        let n_rows = self.shape().n_rows as usize;
        let w = Wit { inputs, aux };
        let table = &self.table;
        let (out, pad) = out.split_at_mut(n_rows);
        let v = any_view(&self.mats[which.index()]);
        out.par_chunks_mut(ROW_BLOCK)
            .enumerate()
            .with_min_len(MIN_BLOCKS_PER_TASK)
            .for_each(|(blk, o)| v.eval_scalars(blk, w, table, o));
        pad.par_iter_mut().for_each(|x| *x = Scalar::ZERO);
        Ok(())
    }

    /// Check mode: verifies `a·b = c` on every row for this witness and reports the first
    /// failing row as [`PceError::Unsatisfied`].
    pub fn check(&self, inputs: &[Scalar], aux: &[Scalar]) -> Result<(), PceError> {
        self.check_witness(inputs, aux)?;
        let n_rows = self.shape().n_rows as usize;
        let n_blocks = n_rows.div_ceil(ROW_BLOCK);
        let w = Wit { inputs, aux };
        let table = &self.table;
        let [ma, mb, mc] = &self.mats;
        let failing = with_view3(ma, mb, mc, |va, vb, vc| {
            (0..n_blocks).into_par_iter().find_map_first(|blk| {
                let rows = ROW_BLOCK.min(n_rows - blk * ROW_BLOCK);
                let mut a = [Scalar::ZERO; ROW_BLOCK];
                let mut b = [Scalar::ZERO; ROW_BLOCK];
                let mut c = [Scalar::ZERO; ROW_BLOCK];
                va.eval_scalars(blk, w, table, &mut a[..rows]);
                vb.eval_scalars(blk, w, table, &mut b[..rows]);
                vc.eval_scalars(blk, w, table, &mut c[..rows]);
                (0..rows)
                    .find(|&k| a[k] * b[k] != c[k])
                    .map(|k| blk * ROW_BLOCK + k)
            })
        });
        match failing {
            None => Ok(()),
            Some(row) => Err(PceError::Unsatisfied {
                row: row as u64,
                n_rows: n_rows as u64,
            }),
        }
    }
}

impl Pce {
    /// The transposed product of one matrix: `out[col] = Σ_row M[row][col] · v[row]` for every
    /// column (inputs, then aux), `v` holding one value per row (groth16's input rows
    /// included). `out` must hold at least `n_columns` elements; they are overwritten, and
    /// any slots past `n_columns` are left as they are.
    ///
    /// This is the QAP evaluated at a point when `v` holds the Lagrange coefficients there
    /// (parameter generation). Rows are scanned once, serially (the scatter into `out` has
    /// no per-row owner to split on); run the three matrices on three threads.
    pub fn evaluate_transposed_into(
        &self,
        which: crate::MatrixId,
        v: &[Scalar],
        out: &mut [Scalar],
    ) -> Result<(), PceError> {
        let s = self.shape();
        if (v.len() as u64) < s.n_rows {
            return Err(PceError::ShapeMismatch {
                what: "row values for the transposed product",
                expected: s.n_rows,
                found: v.len() as u64,
            });
        }
        if (out.len() as u64) < s.n_columns() {
            return Err(PceError::ShapeMismatch {
                what: "output length of the transposed product",
                expected: s.n_columns(),
                found: out.len() as u64,
            });
        }
        let n_columns = s.n_columns() as usize;
        out[..n_columns].iter_mut().for_each(|x| *x = Scalar::ZERO);
        let v = &v[..s.n_rows as usize];
        match any_view(&self.mats[which.index()]) {
            AnyView::U8(view) => view.scatter(v, &self.table, out),
            AnyView::U16(view) => view.scatter(v, &self.table, out),
            AnyView::U32(view) => view.scatter(v, &self.table, out),
        }
        Ok(())
    }
}

impl Pce {
    /// Calls `f(row, column, coefficient)` for every stored term of one matrix, rows in
    /// order (groth16's input rows included), columns as the circuit wrote them (inputs,
    /// then aux). Exactly [`Pce::n_nonzeros_of`] calls. For writers of other formats
    /// (snarkjs's zkey lists the A and B terms one by one).
    ///
    /// ```
    /// use pce_cache::{MatrixId, Pce};
    /// # use bellman::{Circuit, ConstraintSystem, SynthesisError};
    /// # use bls12_381::Scalar;
    /// # struct Square;
    /// # impl Circuit<Scalar> for Square {
    /// #     fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
    /// #         let x = cs.alloc(|| "x", || Ok(Scalar::from(3)))?;
    /// #         let y = cs.alloc_input(|| "y", || Ok(Scalar::from(9)))?;
    /// #         cs.enforce(|| "x*x=y", |lc| lc + x, |lc| lc + x, |lc| lc + y);
    /// #         Ok(())
    /// #     }
    /// # }
    /// let pce = Pce::record(Square)?;
    /// let mut terms = Vec::new();
    /// pce.for_each_term(MatrixId::A, |row, col, coeff| terms.push((row, col, coeff)));
    /// assert_eq!(terms.len() as u64, pce.n_nonzeros_of(MatrixId::A));
    /// assert_eq!(terms[0], (0, 2, Scalar::ONE)); // row 0: x (column 2: ONE, y, then x)
    /// # use ff::Field;
    /// # Ok::<(), pce_cache::PceError>(())
    /// ```
    pub fn for_each_term(&self, which: crate::MatrixId, mut f: impl FnMut(u64, u32, Scalar)) {
        let n_rows = self.shape().n_rows as usize;
        match any_view(&self.mats[which.index()]) {
            AnyView::U8(view) => view.terms(n_rows, &self.table, &mut f),
            AnyView::U16(view) => view.terms(n_rows, &self.table, &mut f),
            AnyView::U32(view) => view.terms(n_rows, &self.table, &mut f),
        }
    }
}

impl<K: Code> View<'_, K> {
    fn terms(&self, n_rows: usize, table: &CoeffTable, f: &mut impl FnMut(u64, u32, Scalar)) {
        let mut p = 0usize;
        let mut li = 0usize;
        for row in 0..n_rows {
            let mut len = self.row_len[row] as usize;
            if len == LONG_ROW as usize {
                len = self.long_len[li] as usize;
                li += 1;
            }
            for k in p..p + len {
                f(row as u64, self.cols[k], table.scalars[self.codes[k].idx()]);
            }
            p += len;
        }
    }
}

impl<K: Code> View<'_, K> {
    /// `out[col] += M[row][col] · v[row]` over all rows, in row order (rows are stored
    /// contiguously, so no block pointer is needed).
    fn scatter(&self, v: &[Scalar], table: &CoeffTable, out: &mut [Scalar]) {
        let mut p = 0usize;
        let mut li = 0usize;
        for (row, &x) in v.iter().enumerate() {
            let mut len = self.row_len[row] as usize;
            if len == LONG_ROW as usize {
                len = self.long_len[li] as usize;
                li += 1;
            }
            let end = p + len;
            // Terms are grouped by code: scale v[row] once per distinct coefficient.
            let mut run_code = usize::MAX;
            let mut scaled = Scalar::ZERO;
            for (&col, &code) in self.cols[p..end].iter().zip(&self.codes[p..end]) {
                let code = code.idx();
                if code != run_code {
                    scaled = Scalar::ZERO;
                    apply(&mut scaled, x, code, table);
                    run_code = code;
                }
                out[col as usize] += scaled;
            }
            p = end;
        }
    }
}

/// Returns the first row where `a·b ≠ c` for already evaluated vectors (`None` if all hold).
pub fn first_unsatisfied_row(a: &[Scalar], b: &[Scalar], c: &[Scalar]) -> Option<usize> {
    let n = a.len().min(b.len()).min(c.len());
    (0..n)
        .into_par_iter()
        .with_min_len(4096)
        .find_first(|&i| a[i] * b[i] != c[i])
}

/// A block evaluator for any output type (dispatches over the three code widths).
pub(crate) enum AnyView<'a> {
    U8(View<'a, u8>),
    U16(View<'a, u16>),
    U32(View<'a, u32>),
}

impl AnyView<'_> {
    #[inline]
    pub(crate) fn eval_dyn<T, W: WitnessRead>(
        &self,
        blk: usize,
        w: W,
        table: &CoeffTable,
        out: &mut [T],
        convert: &(impl Fn(Scalar) -> T + Sync),
    ) {
        match self {
            AnyView::U8(v) => v.eval_block(blk, w, table, out, convert),
            AnyView::U16(v) => v.eval_block(blk, w, table, out, convert),
            AnyView::U32(v) => v.eval_block(blk, w, table, out, convert),
        }
    }

    fn eval_scalars(&self, blk: usize, w: Wit<'_>, table: &CoeffTable, out: &mut [Scalar]) {
        self.eval_dyn(blk, w, table, out, &|s| s)
    }
}

pub(crate) fn any_view(m: &Matrix) -> AnyView<'_> {
    macro_rules! view {
        ($codes:expr) => {
            View {
                block_ptr: m.block_ptr.as_slice(),
                row_len: m.row_len.as_slice(),
                long_row: m.long_row.as_slice(),
                long_len: m.long_len.as_slice(),
                cols: m.cols.as_slice(),
                codes: $codes.as_slice(),
            }
        };
    }
    match &m.codes {
        Codes::U8(c) => AnyView::U8(view!(c)),
        Codes::U16(c) => AnyView::U16(view!(c)),
        Codes::U32(c) => AnyView::U32(view!(c)),
    }
}

fn with_view3<R>(
    a: &Matrix,
    b: &Matrix,
    c: &Matrix,
    f: impl FnOnce(&AnyView<'_>, &AnyView<'_>, &AnyView<'_>) -> R,
) -> R {
    f(&any_view(a), &any_view(b), &any_view(c))
}
