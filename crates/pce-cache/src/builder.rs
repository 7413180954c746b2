//! Front-end independent construction of the compact matrices.
//!
//! A front end (today: bellman's `ConstraintSystem`, see `record.rs`) implements nothing but
//! calls to [`RowSink`]; the builder owns coefficient interning, duplicate merging, density
//! tracking, budget charging and the final compaction.

use std::collections::HashMap;
use std::time::Duration;

use bls12_381::Scalar;
use ff::Field;
use memory_budget::Reservation;

use crate::storage::{
    Buf, Codes, CoeffTable, Densities, Density, Matrix, Shape, LONG_ROW, ROW_BLOCK,
};
use crate::{Pce, PceError};

/// A variable as a front end names it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Column {
    Input(usize),
    Aux(usize),
}

/// What a recording front end drives. Kept tiny so another front end (for example bellperson
/// circuits over blstrs) only has to translate variables and coefficients.
pub(crate) trait RowSink {
    /// Allocates the next input; returns its index.
    fn alloc_input(&mut self) -> usize;
    /// Allocates the next aux variable; returns its index.
    fn alloc_aux(&mut self) -> usize;
    /// Records one constraint `<a, w> · <b, w> = <c, w>`.
    fn push_constraint<A, B, C>(&mut self, a: A, b: B, c: C)
    where
        A: IntoIterator<Item = (Column, Scalar)>,
        B: IntoIterator<Item = (Column, Scalar)>,
        C: IntoIterator<Item = (Column, Scalar)>;
}

/// While recording, an aux column is tagged with this bit so that inputs sort first; the
/// final pass maps it to `n_inputs + j` once `n_inputs` is known.
const AUX_TAG: u32 = 1 << 31;

/// Charges growth of the recording buffers to an optional reservation before it happens.
struct Charge {
    reservation: Option<Reservation>,
    charged_bytes: u64,
    failed: Option<PceError>,
}

impl Charge {
    fn grow(&mut self, bytes: u64) -> bool {
        if self.failed.is_some() {
            return false;
        }
        if let Some(r) = self.reservation.as_mut() {
            // Without waiting: a recording that waited while holding its own growing
            // reservation could deadlock with a waiter queued ahead of it. Evictors do run.
            let grown = r.try_grow(bytes).or_else(|_| {
                let extra = r
                    .budget()
                    .request(bytes, r.category())
                    .label("pce extraction")
                    .reserve(Some(Duration::ZERO))?;
                r.merge(extra)
            });
            if let Err(source) = grown {
                self.failed = Some(PceError::Budget {
                    what: "pce extraction buffers",
                    requested_bytes: self.charged_bytes + bytes,
                    source,
                });
                return false;
            }
        }
        self.charged_bytes += bytes;
        true
    }
}

/// Grows `v` in charged steps (doubling, at least 4096 elements), so the budget sees each
/// allocation before it is made.
fn ensure_room<T>(v: &mut Vec<T>, extra: usize, charge: &mut Charge) -> bool {
    let need = v.len() + extra;
    if need <= v.capacity() {
        return true;
    }
    let new_cap = need.max(v.capacity() * 2).max(4096);
    let add = new_cap - v.capacity();
    if !charge.grow((add * std::mem::size_of::<T>()) as u64) {
        return false;
    }
    v.reserve_exact(new_cap - v.len());
    true
}

#[derive(Default)]
struct MatBuilder {
    block_ptr: Vec<u64>,
    row_len: Vec<u8>,
    long_row: Vec<u64>,
    long_len: Vec<u64>,
    cols: Vec<u32>,
    codes: Vec<u32>,
}

#[derive(Default)]
struct BitBuilder {
    words: Vec<u64>,
    n_bits: usize,
}

impl BitBuilder {
    fn push(&mut self, charge: &mut Charge) -> bool {
        if self.n_bits % 64 == 0 {
            if !ensure_room(&mut self.words, 1, charge) {
                return false;
            }
            self.words.push(0);
        }
        self.n_bits += 1;
        true
    }

    fn set(&mut self, i: usize) {
        self.words[i / 64] |= 1 << (i % 64);
    }
}

/// Builds a [`Pce`] from a stream of allocations and constraints.
pub(crate) struct R1csBuilder {
    n_inputs: usize,
    n_aux: usize,
    n_constraints: u64,
    mats: [MatBuilder; 3],
    table: Vec<Scalar>,
    table_index: HashMap<[u8; 32], u32>,
    freq: Vec<u64>,
    // a_input, a_aux, b_input, b_aux
    dens: [BitBuilder; 4],
    charge: Charge,
    error: Option<PceError>,
    scratch: Vec<(u32, Scalar)>,
    coded: Vec<(u32, u32)>,
}

impl R1csBuilder {
    pub(crate) fn new(reservation: Option<Reservation>) -> Self {
        R1csBuilder {
            n_inputs: 0,
            n_aux: 0,
            n_constraints: 0,
            mats: Default::default(),
            table: vec![Scalar::ONE, -Scalar::ONE],
            table_index: HashMap::new(),
            freq: vec![0, 0],
            dens: Default::default(),
            charge: Charge {
                reservation,
                charged_bytes: 0,
                failed: None,
            },
            error: None,
            scratch: Vec::new(),
            coded: Vec::new(),
        }
    }

    fn intern(&mut self, c: &Scalar) -> u32 {
        let code = if *c == Scalar::ONE {
            0
        } else if *c == -Scalar::ONE {
            1
        } else {
            let next = self.table.len() as u32;
            let code = *self.table_index.entry(c.to_bytes()).or_insert(next);
            if code == next {
                self.table.push(*c);
                self.freq.push(0);
            }
            code
        };
        self.freq[code as usize] += 1;
        code
    }

    fn fail(&mut self, e: PceError) {
        if self.error.is_none() {
            self.error = Some(e);
        }
    }

    fn stopped(&self) -> bool {
        self.error.is_some() || self.charge.failed.is_some()
    }

    /// Appends one row to matrix `m`: checks columns, marks densities on the raw terms (as
    /// groth16 does), then sorts and merges duplicates, dropping zero sums.
    fn push_row<I: IntoIterator<Item = (Column, Scalar)>>(
        &mut self,
        m: usize,
        terms: I,
        dens_input: Option<usize>,
        dens_aux: Option<usize>,
    ) {
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        for (col, coeff) in terms {
            let raw = match col {
                Column::Input(i) => {
                    if i >= self.n_inputs {
                        self.fail(PceError::UnallocatedVariable {
                            constraint: self.n_constraints,
                            kind: "input",
                            index: i as u64,
                            allocated: self.n_inputs as u64,
                        });
                        continue;
                    }
                    if !coeff.is_zero_vartime() {
                        if let Some(d) = dens_input {
                            self.dens[d].set(i);
                        }
                    }
                    i as u32
                }
                Column::Aux(j) => {
                    if j >= self.n_aux {
                        self.fail(PceError::UnallocatedVariable {
                            constraint: self.n_constraints,
                            kind: "aux",
                            index: j as u64,
                            allocated: self.n_aux as u64,
                        });
                        continue;
                    }
                    if !coeff.is_zero_vartime() {
                        if let Some(d) = dens_aux {
                            self.dens[d].set(j);
                        }
                    }
                    j as u32 | AUX_TAG
                }
            };
            if !coeff.is_zero_vartime() {
                scratch.push((raw, coeff));
            }
        }
        // Rows are short; sorting keeps each row's witness reads in column order and makes
        // duplicates adjacent.
        scratch.sort_unstable_by_key(|t| t.0);
        let mut merged = 0;
        for k in 0..scratch.len() {
            if merged > 0 && scratch[merged - 1].0 == scratch[k].0 {
                let add = scratch[k].1;
                scratch[merged - 1].1 += add;
            } else {
                scratch[merged] = scratch[k];
                merged += 1;
            }
        }
        scratch.truncate(merged);
        scratch.retain(|t| !t.1.is_zero_vartime());

        let len = scratch.len();
        let row = self.mats[m].row_len.len();
        let charge = &mut self.charge;
        let mat = &mut self.mats[m];
        let ok = ensure_room(&mut mat.row_len, 1, charge)
            && ensure_room(&mut mat.cols, len, charge)
            && ensure_room(&mut mat.codes, len, charge)
            && (row % ROW_BLOCK != 0 || ensure_room(&mut mat.block_ptr, 1, charge))
            && (len < LONG_ROW as usize
                || (ensure_room(&mut mat.long_row, 1, charge)
                    && ensure_room(&mut mat.long_len, 1, charge)));
        if !ok {
            self.scratch = scratch;
            return;
        }
        if row % ROW_BLOCK == 0 {
            let at = self.mats[m].cols.len() as u64;
            self.mats[m].block_ptr.push(at);
        }
        if len >= LONG_ROW as usize {
            let mat = &mut self.mats[m];
            mat.row_len.push(LONG_ROW);
            mat.long_row.push(row as u64);
            mat.long_len.push(len as u64);
        } else {
            self.mats[m].row_len.push(len as u8);
        }
        // Group the row by coefficient (then column): the evaluator sums each group's
        // witness values and multiplies once per distinct coefficient, which turns most
        // multiplications of bit-decomposition rows (2^k shared by several operands) into
        // additions.
        let mut coded = std::mem::take(&mut self.coded);
        coded.clear();
        for &(raw, coeff) in &scratch {
            coded.push((self.intern(&coeff), raw));
        }
        coded.sort_unstable();
        let mat = &mut self.mats[m];
        for &(code, raw) in &coded {
            mat.cols.push(raw);
            mat.codes.push(code);
        }
        self.coded = coded;
        self.scratch = scratch;
    }

    /// Appends groth16's `input_i · 0 = 0` rows and compacts everything into a [`Pce`].
    ///
    /// Returns the PCE and the reservation (still charged for the transient peak; the caller
    /// shrinks it to [`Pce::resident_bytes`]).
    pub(crate) fn finish(mut self) -> Result<(Pce, Option<Reservation>), PceError> {
        let n_inputs = self.n_inputs;
        for i in 0..n_inputs {
            self.push_constraint([(Column::Input(i), Scalar::ONE)], [], []);
        }
        self.compact()
    }

    /// Compacts the rows pushed so far, as they are (no rows appended). The shape keeps
    /// `n_rows = n_constraints + n_inputs` (what the file format checks): the last
    /// `n_inputs` rows count as the input rows, whatever they hold.
    pub(crate) fn finish_rows_as_given(self) -> Result<(Pce, Option<Reservation>), PceError> {
        if self.n_constraints < self.n_inputs as u64 {
            return Err(PceError::ShapeMismatch {
                what: "rows given (at least one per input)",
                expected: self.n_inputs as u64,
                found: self.n_constraints,
            });
        }
        self.compact()
    }

    fn compact(mut self) -> Result<(Pce, Option<Reservation>), PceError> {
        let n_inputs = self.n_inputs;
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        if let Some(e) = self.charge.failed.take() {
            return Err(e);
        }
        // Compaction allocates each matrix's narrowed codes (and may copy its columns while
        // shrinking) before the recording buffers go: charge the largest such step.
        let step = self
            .mats
            .iter()
            .map(|m| m.cols.len() as u64 * 8)
            .max()
            .unwrap_or(0);
        if !self.charge.grow(step) {
            if let Some(e) = self.charge.failed.take() {
                return Err(e);
            }
        }
        let n_columns = (self.n_inputs + self.n_aux) as u64;
        if n_columns > u64::from(u32::MAX) || self.n_aux as u64 >= u64::from(AUX_TAG) {
            return Err(PceError::TooManyColumns {
                n_inputs: self.n_inputs as u64,
                n_aux: self.n_aux as u64,
                max: u64::from(u32::MAX),
            });
        }

        // Order the table by frequency (ties by first use) after the fixed ±1 entries, so
        // most matrices fit one-byte codes.
        let n_table = self.table.len();
        let mut order: Vec<u32> = (2..n_table as u32).collect();
        order.sort_by_key(|&c| (std::cmp::Reverse(self.freq[c as usize]), c));
        let mut remap = vec![0u32; n_table];
        remap[1] = 1;
        let mut table = vec![Scalar::ONE, -Scalar::ONE];
        for (new, &old) in order.iter().enumerate() {
            remap[old as usize] = new as u32 + 2;
            table.push(self.table[old as usize]);
        }
        drop(std::mem::take(&mut self.table_index));

        let n_rows = self.mats[0].row_len.len() as u64;
        let n_in = self.n_inputs as u32;
        let mut matrices = Vec::with_capacity(3);
        for mat in std::mem::take(&mut self.mats) {
            let MatBuilder {
                mut block_ptr,
                row_len,
                long_row,
                long_len,
                mut cols,
                codes,
            } = mat;
            for c in cols.iter_mut() {
                if *c & AUX_TAG != 0 {
                    *c = n_in + (*c & !AUX_TAG);
                }
            }
            block_ptr.push(cols.len() as u64);
            let max_code = codes.iter().map(|&c| remap[c as usize]).max().unwrap_or(0);
            let codes = if max_code <= u32::from(u8::MAX) {
                Codes::U8(Buf::Owned(
                    codes.iter().map(|&c| remap[c as usize] as u8).collect(),
                ))
            } else if max_code <= u32::from(u16::MAX) {
                Codes::U16(Buf::Owned(
                    codes.iter().map(|&c| remap[c as usize] as u16).collect(),
                ))
            } else {
                let mut codes = codes;
                for c in codes.iter_mut() {
                    *c = remap[*c as usize];
                }
                Codes::U32(Buf::Owned(codes))
            };
            block_ptr.shrink_to_fit();
            cols.shrink_to_fit();
            matrices.push(Matrix {
                block_ptr: Buf::Owned(block_ptr),
                row_len: Buf::Owned(row_len),
                long_row: Buf::Owned(long_row),
                long_len: Buf::Owned(long_len),
                cols: Buf::Owned(cols),
                codes,
            });
        }
        let [a_input, a_aux, b_input, b_aux] = std::mem::take(&mut self.dens).map(|b| Density {
            words: Buf::Owned(b.words),
            n_bits: b.n_bits,
        });
        let shape = Shape {
            n_inputs: self.n_inputs as u64,
            n_aux: self.n_aux as u64,
            n_constraints: self.n_constraints - n_inputs as u64,
            n_rows,
        };
        let mut it = matrices.into_iter();
        let (a, b, c) = match (it.next(), it.next(), it.next()) {
            (Some(a), Some(b), Some(c)) => (a, b, c),
            _ => unreachable!("three matrices were built"),
        };
        let pce = Pce::from_parts(
            shape,
            CoeffTable::new(table),
            [a, b, c],
            Densities {
                a_input,
                a_aux,
                b_input,
                b_aux,
            },
        );
        Ok((pce, self.charge.reservation.take()))
    }
}

impl RowSink for R1csBuilder {
    fn alloc_input(&mut self) -> usize {
        let i = self.n_inputs;
        self.n_inputs += 1;
        if !self.stopped() {
            let charge = &mut self.charge;
            let [a_in, _, b_in, _] = &mut self.dens;
            let _ = a_in.push(charge) && b_in.push(charge);
        }
        i
    }

    fn alloc_aux(&mut self) -> usize {
        let j = self.n_aux;
        self.n_aux += 1;
        if !self.stopped() {
            let charge = &mut self.charge;
            let [_, a_aux, _, b_aux] = &mut self.dens;
            let _ = a_aux.push(charge) && b_aux.push(charge);
        }
        j
    }

    fn push_constraint<A, B, C>(&mut self, a: A, b: B, c: C)
    where
        A: IntoIterator<Item = (Column, Scalar)>,
        B: IntoIterator<Item = (Column, Scalar)>,
        C: IntoIterator<Item = (Column, Scalar)>,
    {
        if !self.stopped() {
            // groth16 tracks A over aux, B over inputs and aux; A over inputs is marked
            // by the `input·0 = 0` rows, which `finish` pushes through here too.
            self.push_row(0, a, Some(0), Some(1));
            self.push_row(1, b, Some(2), Some(3));
            self.push_row(2, c, None, None);
        }
        self.n_constraints += 1;
    }
}
