//! Witness synthesis overlapped with evaluation.
//!
//! The circuit runs on the calling thread and writes aux values straight into the final
//! witness buffer, handing each filled piece of [`PIECE`] values to an evaluator thread. That
//! thread evaluates row blocks in order as soon as every aux variable they read exists, so
//! most of the mat-vec happens while the circuit is still computing. Blocks that read a public
//! input other than ONE (inputs are usually allocated last) and whatever is left when
//! synthesis ends are evaluated afterwards on all cores.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::OnceLock;

use bellman::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use bls12_381::Scalar;
use ff::Field;
use rayon::prelude::*;

use crate::eval::{any_view, AbcMut, Wit, WitnessRead};
use crate::storage::ROW_BLOCK;
use crate::{Pce, PceError, Witness};

/// Aux values per piece handed to the evaluator (a power of two: the reader splits a column
/// index with a shift and a mask).
const PIECE_SHIFT: u32 = 14;
const PIECE: usize = 1 << PIECE_SHIFT;

/// What a row block reads: aux variables `0..n_aux`, and whether any input other than ONE.
#[derive(Copy, Clone, Debug, Default)]
pub(crate) struct BlockNeed {
    n_aux: u64,
    late_input: bool,
}

/// Per-block needs, computed once per PCE (one pass over the column indices).
pub(crate) struct Needs(OnceLock<Vec<BlockNeed>>);

impl Needs {
    pub(crate) fn new() -> Self {
        Needs(OnceLock::new())
    }
}

impl Pce {
    fn block_needs(&self) -> &[BlockNeed] {
        self.needs.0.get_or_init(|| {
            let n_rows = self.shape.n_rows as usize;
            let n_inputs = self.shape.n_inputs;
            (0..n_rows.div_ceil(ROW_BLOCK))
                .into_par_iter()
                .map(|blk| {
                    let mut need = BlockNeed::default();
                    for m in &self.mats {
                        let bp = m.block_ptr.as_slice();
                        let cols = &m.cols.as_slice()[bp[blk] as usize..bp[blk + 1] as usize];
                        for &c in cols {
                            let c = u64::from(c);
                            if c >= n_inputs {
                                need.n_aux = need.n_aux.max(c - n_inputs + 1);
                            } else if c > 0 {
                                need.late_input = true;
                            }
                        }
                    }
                    need
                })
                .collect()
        })
    }

    /// Runs witness synthesis and computes a, b, c at the same time (see [`Pce::evaluate_into`]
    /// for the buffer contract). Returns the witness. On error the buffers' contents are
    /// unspecified.
    pub fn synthesize_and_evaluate<C: Circuit<Scalar>>(
        &self,
        circuit: C,
        a: &mut [Scalar],
        b: &mut [Scalar],
        c: &mut [Scalar],
    ) -> Result<Witness, PceError> {
        self.synthesize_and_evaluate_with(circuit, AbcMut { a, b, c }, Scalar::ZERO, |s| s)
    }

    /// [`Pce::synthesize_and_evaluate`] with a conversion, like [`Pce::evaluate_into_with`].
    pub fn synthesize_and_evaluate_with<C, T>(
        &self,
        circuit: C,
        out: AbcMut<'_, T>,
        zero: T,
        convert: impl Fn(Scalar) -> T + Sync,
    ) -> Result<Witness, PceError>
    where
        C: Circuit<Scalar>,
        T: Send + Sync + Copy,
    {
        self.synthesize_and_evaluate_timed(circuit, out, zero, convert)
            .map(|(w, _)| w)
    }

    /// [`Pce::synthesize_and_evaluate_with`], also returning how long synthesis ran (with
    /// the evaluation overlapped) and how long the evaluation went on after it.
    pub fn synthesize_and_evaluate_timed<C, T>(
        &self,
        circuit: C,
        out: AbcMut<'_, T>,
        zero: T,
        convert: impl Fn(Scalar) -> T + Sync,
    ) -> Result<(Witness, OverlapTimes), PceError>
    where
        C: Circuit<Scalar>,
        T: Send + Sync + Copy,
    {
        self.check_out("a buffer length", out.a.len())?;
        self.check_out("b buffer length", out.b.len())?;
        self.check_out("c buffer length", out.c.len())?;
        let start = std::time::Instant::now();
        let needs = self.block_needs();
        let n_rows = self.shape.n_rows as usize;
        let n_inputs = self.shape.n_inputs as usize;
        let n_aux = self.shape.n_aux as usize;
        let views = [
            any_view(&self.mats[0]),
            any_view(&self.mats[1]),
            any_view(&self.mats[2]),
        ];
        let table = &self.table;
        let AbcMut { a, b, c } = out;
        let (a, a_pad) = a.split_at_mut(n_rows);
        let (b, b_pad) = b.split_at_mut(n_rows);
        let (c, c_pad) = c.split_at_mut(n_rows);
        let mut blocks = a
            .chunks_mut(ROW_BLOCK)
            .zip(b.chunks_mut(ROW_BLOCK))
            .zip(c.chunks_mut(ROW_BLOCK))
            .enumerate()
            .map(|(blk, ((a, b), c))| (blk, a, b, c));

        let mut aux = zeroed(n_aux);
        let done = AtomicBool::new(false);
        let one = [Scalar::ONE];
        let mut synthesized = None;
        let (synthesis, inputs, leftovers) = std::thread::scope(|s| {
            let (tx, rx) = mpsc::channel::<&[Scalar]>();
            let done = &done;
            let views = &views;
            let convert = &convert;
            let blocks = &mut blocks;
            let evaluator = s.spawn(move || {
                let mut pieces: Vec<&[Scalar]> = Vec::new();
                let mut avail = 0u64;
                let mut deferred = Vec::new();
                let mut next = blocks.next();
                'outer: loop {
                    while let Some((blk, oa, ob, oc)) = next.take() {
                        if done.load(Ordering::Relaxed) {
                            next = Some((blk, oa, ob, oc));
                            break 'outer;
                        }
                        let need = needs[blk];
                        if need.late_input {
                            deferred.push((blk, oa, ob, oc));
                        } else if need.n_aux <= avail {
                            let w = Pieces {
                                one: &one,
                                n_inputs,
                                pieces: &pieces,
                            };
                            views[0].eval_dyn(blk, w, table, oa, convert);
                            views[1].eval_dyn(blk, w, table, ob, convert);
                            views[2].eval_dyn(blk, w, table, oc, convert);
                        } else {
                            next = Some((blk, oa, ob, oc));
                            break;
                        }
                        next = blocks.next();
                    }
                    if next.is_none() {
                        break;
                    }
                    match rx.recv() {
                        Ok(piece) => {
                            avail += piece.len() as u64;
                            pieces.push(piece);
                        }
                        Err(_) => break,
                    }
                }
                deferred.extend(next);
                deferred
            });
            let mut cs = StreamingCs {
                inputs: Vec::with_capacity(n_inputs),
                rest: &mut aux[..],
                filled: 0,
                n_aux_allocated: 0,
                tx,
            };
            cs.inputs.push(Scalar::ONE);
            let synthesis = circuit.synthesize(&mut cs);
            let (inputs, n_aux_allocated) = cs.finish();
            done.store(true, Ordering::Relaxed);
            synthesized = Some(std::time::Instant::now());
            let leftovers = evaluator.join();
            (synthesis.map(|()| n_aux_allocated), inputs, leftovers)
        });
        let n_aux_allocated = synthesis.map_err(|source| PceError::Synthesis {
            phase: "witness synthesis",
            source,
        })?;
        let mut leftovers = match leftovers {
            Ok(l) => l,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        if inputs.len() != n_inputs {
            return Err(PceError::ShapeMismatch {
                what: "inputs allocated by witness synthesis",
                expected: n_inputs as u64,
                found: inputs.len() as u64,
            });
        }
        if n_aux_allocated != n_aux {
            return Err(PceError::ShapeMismatch {
                what: "aux allocated by witness synthesis",
                expected: n_aux as u64,
                found: n_aux_allocated as u64,
            });
        }
        // The rest on all cores, with the whole witness.
        leftovers.extend(blocks);
        let w = Wit {
            inputs: &inputs,
            aux: &aux,
        };
        leftovers.into_par_iter().for_each(|(blk, oa, ob, oc)| {
            views[0].eval_dyn(blk, w, table, oa, &convert);
            views[1].eval_dyn(blk, w, table, ob, &convert);
            views[2].eval_dyn(blk, w, table, oc, &convert);
        });
        for pad in [a_pad, b_pad, c_pad] {
            pad.par_iter_mut().for_each(|x| *x = zero);
        }
        metrics::counter!("pinion_pce_evaluations_total").increment(1);
        let end = std::time::Instant::now();
        metrics::histogram!("pinion_pce_synthesize_and_evaluate_seconds")
            .record((end - start).as_secs_f64());
        let synthesized = synthesized.unwrap_or(end);
        let times = OverlapTimes {
            synthesis: synthesized - start,
            evaluation_after: end - synthesized,
        };
        Ok((Witness { inputs, aux }, times))
    }
}

/// `n` zeros, written on all cores: the first touch of a large fresh allocation costs a
/// page fault per page, which one thread pays serially (≈ 12 ms for 32 MiB on our VMs).
pub fn zeroed(n: usize) -> Vec<Scalar> {
    (0..n).into_par_iter().map(|_| Scalar::ZERO).collect()
}

/// Where the time of [`Pce::synthesize_and_evaluate_timed`] went.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct OverlapTimes {
    /// From the call to the end of the circuit's synthesis (the evaluator thread ran
    /// alongside).
    pub synthesis: std::time::Duration,
    /// From then to the return: the evaluator catching up, the deferred and remaining row
    /// blocks on all cores, the padding.
    pub evaluation_after: std::time::Duration,
}

/// Witness reader over ONE and the aux pieces received so far.
#[derive(Copy, Clone)]
struct Pieces<'a, 'p> {
    one: &'a [Scalar; 1],
    n_inputs: usize,
    pieces: &'a [&'p [Scalar]],
}

impl WitnessRead for Pieces<'_, '_> {
    #[inline(always)]
    fn get(&self, col: u32) -> Scalar {
        let col = col as usize;
        if col < self.n_inputs {
            // Only ONE: blocks reading other inputs are deferred.
            self.one[col]
        } else {
            let j = col - self.n_inputs;
            self.pieces[j >> PIECE_SHIFT][j & (PIECE - 1)]
        }
    }
}

/// Witness-only constraint system writing aux values in place and streaming full pieces.
struct StreamingCs<'a> {
    inputs: Vec<Scalar>,
    /// Unsent part of the aux buffer; its first `filled` values are written.
    rest: &'a mut [Scalar],
    filled: usize,
    n_aux_allocated: usize,
    tx: mpsc::Sender<&'a [Scalar]>,
}

impl StreamingCs<'_> {
    /// Hands over the last, partial piece and closes the channel; returns the inputs and
    /// the number of aux variables allocated.
    fn finish(self) -> (Vec<Scalar>, usize) {
        let StreamingCs {
            inputs,
            rest,
            filled,
            n_aux_allocated,
            tx,
        } = self;
        let (done, _) = rest.split_at(filled.min(rest.len()));
        if !done.is_empty() {
            let _ = tx.send(done);
        }
        (inputs, n_aux_allocated)
    }
}

impl ConstraintSystem<Scalar> for StreamingCs<'_> {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        let value = f()?;
        let index = self.n_aux_allocated;
        self.n_aux_allocated += 1;
        // Beyond the recorded shape: keep counting (the caller reports the mismatch).
        if self.filled < self.rest.len() {
            self.rest[self.filled] = value;
            self.filled += 1;
            if self.filled == PIECE {
                let rest = std::mem::take(&mut self.rest);
                let (done, tail) = rest.split_at_mut(PIECE);
                self.rest = tail;
                self.filled = 0;
                // A closed channel means the evaluator stopped; synthesis still finishes.
                let _ = self.tx.send(done);
            }
        }
        Ok(Variable::new_unchecked(Index::Aux(index)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.inputs.push(f()?);
        Ok(Variable::new_unchecked(Index::Input(self.inputs.len() - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, _: LA, _: LB, _: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
    }

    fn push_namespace<NR, N>(&mut self, _: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
    }

    fn pop_namespace(&mut self) {}

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }
}
