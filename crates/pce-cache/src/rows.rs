//! A front end for constraint systems that arrive as rows rather than as a bellman circuit
//! (snarkjs's `.zkey` coefficient section, for one): the caller names each row's terms by
//! column, and the rows are kept exactly as given (no `input · 0 = 0` rows are appended).

use bls12_381::Scalar;
use memory_budget::Reservation;

use crate::builder::{Column, R1csBuilder, RowSink};
use crate::{Pce, PceError};

/// Builds a [`Pce`] from rows given one by one.
///
/// Columns are numbered as in every PCE: inputs first (column 0 is ONE), then aux. Rows are
/// stored in the order pushed; empty rows are allowed (a domain's padding). Densities
/// follow the recorder's rule on the terms as given (a column is dense in A or B when some
/// term for it has a non-zero coefficient). The shape reports `n_rows` rows and
/// `n_constraints = n_rows − n_inputs`.
///
/// ```
/// use bls12_381::Scalar;
/// use ff::Field;
/// use pce_cache::RowBuilder;
///
/// // One input (ONE) and two aux variables x, y with x·x = y, then one row for the input.
/// let mut rows = RowBuilder::new(1, 2, None)?;
/// rows.push_row([(1, Scalar::ONE)], [(1, Scalar::ONE)], [(2, Scalar::ONE)]);
/// rows.push_row([(0, Scalar::ONE)], [], []);
/// let (pce, _) = rows.finish()?;
/// assert_eq!(pce.shape().n_rows, 2);
/// # Ok::<(), pce_cache::PceError>(())
/// ```
pub struct RowBuilder {
    builder: R1csBuilder,
    n_inputs: u32,
}

impl RowBuilder {
    /// A builder for `n_inputs` inputs (ONE included, so at least 1) and `n_aux` aux
    /// variables; buffer growth is charged to `reservation` when given (as the recorder
    /// charges it: a refusal stops the build and [`RowBuilder::finish`] reports it).
    pub fn new(
        n_inputs: u32,
        n_aux: u32,
        reservation: Option<Reservation>,
    ) -> Result<RowBuilder, PceError> {
        if n_inputs == 0 {
            return Err(PceError::ShapeMismatch {
                what: "inputs (ONE is input 0)",
                expected: 1,
                found: 0,
            });
        }
        if u64::from(n_inputs) + u64::from(n_aux) > u64::from(u32::MAX) {
            return Err(PceError::TooManyColumns {
                n_inputs: u64::from(n_inputs),
                n_aux: u64::from(n_aux),
                max: u64::from(u32::MAX),
            });
        }
        let mut builder = R1csBuilder::new(reservation);
        for _ in 0..n_inputs {
            builder.alloc_input();
        }
        for _ in 0..n_aux {
            builder.alloc_aux();
        }
        Ok(RowBuilder { builder, n_inputs })
    }

    /// Appends one row `⟨a, w⟩ · ⟨b, w⟩ = ⟨c, w⟩`; terms are `(column, coefficient)`, in
    /// any order, duplicates summed. A column past the last variable makes
    /// [`RowBuilder::finish`] fail with [`PceError::UnallocatedVariable`] naming the row.
    pub fn push_row<A, B, C>(&mut self, a: A, b: B, c: C)
    where
        A: IntoIterator<Item = (u32, Scalar)>,
        B: IntoIterator<Item = (u32, Scalar)>,
        C: IntoIterator<Item = (u32, Scalar)>,
    {
        let n_inputs = self.n_inputs;
        // Out-of-range aux columns are reported by the builder as unallocated.
        let col = move |(c, v): (u32, Scalar)| {
            let column = if c < n_inputs {
                Column::Input(c as usize)
            } else {
                Column::Aux((c - n_inputs) as usize)
            };
            (column, v)
        };
        self.builder.push_constraint(
            a.into_iter().map(col),
            b.into_iter().map(col),
            c.into_iter().map(col),
        );
    }

    /// Compacts the rows into a [`Pce`]; the reservation comes back still holding the
    /// build's peak (shrink it to [`Pce::resident_bytes`]). Fails when fewer rows than
    /// inputs were pushed, or with the first bad column or budget refusal.
    pub fn finish(self) -> Result<(Pce, Option<Reservation>), PceError> {
        self.builder.finish_rows_as_given()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{first_unsatisfied_row, zeroed};
    use ff::Field;

    /// The rows' mat-vec gives the rows' values, padding rows give zero, and densities
    /// follow the terms.
    #[test]
    fn rows_evaluate_as_given() {
        let seed = crate::file::tests::seed();
        let mut state = seed;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            state >> 11
        };
        let n_inputs = 2u32;
        let n_aux = 5u32;
        let w: Vec<Scalar> = (0..n_inputs + n_aux)
            .map(|i| {
                if i == 0 {
                    Scalar::ONE
                } else {
                    Scalar::from(next())
                }
            })
            .collect();
        let mut rows = RowBuilder::new(n_inputs, n_aux, None).unwrap();
        let mut want = Vec::new();
        for r in 0..16u64 {
            if r % 5 == 3 {
                rows.push_row([], [], []);
                want.push((Scalar::ZERO, Scalar::ZERO, Scalar::ZERO));
                continue;
            }
            let k = (next() % 3 + 1) as usize;
            let terms: Vec<(u32, Scalar)> = (0..k)
                .map(|_| {
                    (
                        (next() % u64::from(n_inputs + n_aux)) as u32,
                        Scalar::from(next()),
                    )
                })
                .collect();
            let eval = |t: &[(u32, Scalar)]| {
                t.iter()
                    .fold(Scalar::ZERO, |acc, (c, v)| acc + w[*c as usize] * v)
            };
            let b = [(2u32, Scalar::ONE)];
            want.push((eval(&terms), eval(&b), Scalar::ZERO));
            rows.push_row(terms.clone(), b, []);
        }
        let (pce, _) = rows.finish().unwrap();
        let shape = pce.shape();
        assert_eq!(shape.n_rows, 16, "seed {seed}");
        assert_eq!(shape.n_constraints, 14);
        let (mut a, mut b, mut c) = (zeroed(16), zeroed(16), zeroed(16));
        pce.evaluate_into(&w[..2], &w[2..], &mut a, &mut b, &mut c)
            .unwrap();
        for (r, (wa, wb, wc)) in want.iter().enumerate() {
            assert_eq!((a[r], b[r], c[r]), (*wa, *wb, *wc), "row {r}, seed {seed}");
        }
        // Only aux 0 (column 2) is in B; nothing is in C, so every row with a B term is
        // unsatisfied unless its a·b is zero.
        assert!(pce.densities().b_aux().iter().eq((0..5).map(|j| j == 0)));
        assert_eq!(
            first_unsatisfied_row(&a[..3], &b[..3], &c[..3]).is_some(),
            a[..3]
                .iter()
                .zip(&b[..3])
                .any(|(x, y)| *x * y != Scalar::ZERO)
        );
    }

    /// What a device kernel reading `Pce::matrix_parts` computes, written as pce.cu does
    /// it (a block's rows by a prefix sum of their lengths, a long row's length by its
    /// rank among the block's long rows after a lower bound over the list, codes read at
    /// their width, +1 / −1 / table): equal to the evaluator's rows, long rows and 2-byte
    /// codes included.
    #[test]
    #[allow(clippy::needless_range_loop)] // rows are walked by index, as the kernel does
    fn matrix_parts_read_as_the_device_kernel_reads_them() {
        use crate::{MatrixId, LONG_ROW, ROW_BLOCK};
        let seed = crate::file::tests::seed();
        let mut state = seed;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            state >> 11
        };
        let (n_inputs, n_aux) = (3u32, 700u32);
        let n_cols = u64::from(n_inputs + n_aux);
        let w: Vec<Scalar> = (0..n_inputs + n_aux)
            .map(|i| {
                if i == 0 {
                    Scalar::ONE
                } else {
                    Scalar::from(next())
                }
            })
            .collect();
        let mut rows = RowBuilder::new(n_inputs, n_aux, None).unwrap();
        let n_rows = 3 * ROW_BLOCK + 77;
        for r in 0..n_rows {
            // Long rows (≥ 255 terms) here and there, 400 distinct coefficients in A
            // (2-byte codes), ±1 mostly elsewhere.
            let len = match r % 97 {
                5 => 255 + (next() % 300) as usize,
                6 => 254,
                _ => (next() % 5) as usize,
            };
            let a: Vec<(u32, Scalar)> = (0..len)
                .map(|_| ((next() % n_cols) as u32, Scalar::from(next() % 400 + 2)))
                .collect();
            let b = [((next() % n_cols) as u32, -Scalar::ONE)];
            let c: Vec<(u32, Scalar)> = (0..(r % 3))
                .map(|_| ((next() % n_cols) as u32, Scalar::ONE))
                .collect();
            rows.push_row(a, b, c);
        }
        let (pce, _) = rows.finish().unwrap();
        assert_eq!(pce.code_bytes_of(MatrixId::A), 2, "seed {seed}");
        let m = n_rows.next_power_of_two();
        let (mut a, mut b, mut c) = (zeroed(m), zeroed(m), zeroed(m));
        pce.evaluate_into(&w[..3], &w[3..], &mut a, &mut b, &mut c)
            .unwrap();
        // The device's witness order: aux, then the inputs.
        let dev_w: Vec<Scalar> = w[3..].iter().chain(&w[..3]).copied().collect();
        let table = pce.coefficients();
        for (id, want) in MatrixId::ALL.into_iter().zip([&a, &b, &c]) {
            let p = pce.matrix_parts(id);
            let mut long_seen = 0;
            for blk in 0..m.div_ceil(ROW_BLOCK) {
                let r0 = blk * ROW_BLOCK;
                let first_long = p.long_row.partition_point(|&r| r < r0 as u64);
                let mut offset = 0u64;
                let mut long_rank = 0;
                for r in r0..r0 + ROW_BLOCK {
                    let got = if r < n_rows {
                        let len = match p.row_len[r] {
                            LONG_ROW => {
                                let li = first_long + long_rank;
                                long_rank += 1;
                                long_seen += 1;
                                assert_eq!(p.long_row[li], r as u64, "seed {seed}");
                                p.long_len[li]
                            }
                            l => u64::from(l),
                        };
                        let start = p.block_ptr[blk] + offset;
                        offset += len;
                        let mut acc = Scalar::ZERO;
                        for j in start as usize..(start + len) as usize {
                            let col = p.cols[j];
                            let k = p.code_bytes as usize;
                            let mut code_le = [0u8; 4];
                            code_le[..k].copy_from_slice(&p.codes[j * k..j * k + k]);
                            let code = u32::from_le_bytes(code_le) as usize;
                            let v = if col < n_inputs {
                                dev_w[(n_aux + col) as usize]
                            } else {
                                dev_w[(col - n_inputs) as usize]
                            };
                            acc += match code {
                                0 => v,
                                1 => -v,
                                c => table[c] * v,
                            };
                        }
                        acc
                    } else {
                        Scalar::ZERO
                    };
                    if r < m {
                        assert_eq!(got, want[r], "{id:?} row {r}, seed {seed}");
                    }
                }
            }
            if id == MatrixId::A {
                assert!(long_seen > 0, "some long rows in A, seed {seed}");
            }
        }
    }

    #[test]
    fn bad_columns_and_too_few_rows_are_typed_errors() {
        let mut rows = RowBuilder::new(1, 1, None).unwrap();
        rows.push_row([(2, Scalar::ONE)], [], []);
        assert!(matches!(
            rows.finish(),
            Err(PceError::UnallocatedVariable { constraint: 0, .. })
        ));
        let rows = RowBuilder::new(2, 0, None).unwrap();
        assert!(matches!(rows.finish(), Err(PceError::ShapeMismatch { .. })));
        assert!(RowBuilder::new(0, 3, None).is_err());
    }
}
