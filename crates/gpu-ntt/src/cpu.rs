//! CPU radix-2 NTT (rayon): the fallback backend and the reference for the GPU one.

use std::sync::{Arc, RwLock};

use bls12_381::Scalar;
use ff::Field;
use rayon::prelude::*;

use crate::domain::{bit_reverse, coset_shift, h_domain_size, log2_len, omega};
use crate::{AbcEvaluations, Direction, Domain, NttBackend, NttError, NttSpec, Order};

/// Butterfly spans up to 2^13 elements (256 KiB) finish all their stages inside one
/// block while it is in cache.
const BLOCK_LOG: u32 = 13;

/// Elements per rayon task in whole-array passes.
const PAR_CHUNK: usize = 1 << 10;

/// The CPU backend. Cheap to share (`&CpuNtt` is `Sync`); keeps its twiddle table.
#[derive(Debug, Default)]
pub struct CpuNtt {
    /// `ω_{2h}^j` for stage half-size h (a power of two) and j < h, at index `h − 1 + j`.
    /// The table for n is a prefix of the table for 2n, so one table serves every size.
    twiddles: RwLock<Arc<Vec<Scalar>>>,
}

impl CpuNtt {
    /// A backend with an empty twiddle table (filled on first use).
    pub fn new() -> Self {
        Self::default()
    }

    /// Bytes held by the twiddle table (32 per entry, `n − 1` entries for the largest n).
    pub fn twiddle_bytes(&self) -> usize {
        self.read_table().len() * std::mem::size_of::<Scalar>()
    }

    /// Drops the twiddle table (it is rebuilt on next use); transforms running now keep
    /// their own reference until they finish. For a caller that charges
    /// [`CpuNtt::twiddle_bytes`] to a memory budget and must give it back.
    pub fn clear_twiddles(&self) {
        *self.twiddles.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(Vec::new());
    }

    fn read_table(&self) -> Arc<Vec<Scalar>> {
        // A poisoned lock only means another thread panicked while extending; the table
        // it left is either the old one or a complete new one (swapped in one store).
        self.twiddles
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The twiddle table covering transforms of 2^`log_n` elements.
    fn table(&self, log_n: u32) -> Arc<Vec<Scalar>> {
        let needed = (1usize << log_n) - 1;
        let current = self.read_table();
        if current.len() >= needed {
            return current;
        }
        let mut slot = self.twiddles.write().unwrap_or_else(|e| e.into_inner());
        if slot.len() >= needed {
            return slot.clone();
        }
        let mut table = Vec::with_capacity(needed);
        table.extend_from_slice(&slot);
        table.resize(needed, Scalar::ZERO);
        let mut h = slot.len() + 1; // first missing stage
        while 2 * h - 1 <= needed {
            let w = omega((2 * h).trailing_zeros());
            table[h - 1..2 * h - 1]
                .par_chunks_mut(PAR_CHUNK)
                .enumerate()
                .for_each(|(ci, chunk)| {
                    let mut x = w.pow_vartime(&[(ci * PAR_CHUNK) as u64, 0, 0, 0]);
                    for t in chunk {
                        *t = x;
                        x *= w;
                    }
                });
            h *= 2;
        }
        *slot = Arc::new(table);
        slot.clone()
    }
}

/// Twiddles of stage h (h of them).
fn stage(table: &[Scalar], h: usize) -> &[Scalar] {
    &table[h - 1..2 * h - 1]
}

/// Gentleman–Sande butterflies of one stage on a pair of half-blocks; `j0` is the index
/// of `lo[0]` within its half-block. Inverse twiddles: `ω^-j = −ω^(h−j)`.
fn dif_butterflies(lo: &mut [Scalar], hi: &mut [Scalar], tw: &[Scalar], j0: usize, inverse: bool) {
    let h = tw.len();
    for (i, (a, b)) in lo.iter_mut().zip(hi.iter_mut()).enumerate() {
        let j = j0 + i;
        let (x, y) = (*a, *b);
        *a = x + y;
        *b = if j == 0 {
            x - y
        } else if inverse {
            (y - x) * tw[h - j]
        } else {
            (x - y) * tw[j]
        };
    }
}

/// Cooley–Tukey butterflies of one stage (see [`dif_butterflies`]).
fn dit_butterflies(lo: &mut [Scalar], hi: &mut [Scalar], tw: &[Scalar], j0: usize, inverse: bool) {
    let h = tw.len();
    for (i, (a, b)) in lo.iter_mut().zip(hi.iter_mut()).enumerate() {
        let j = j0 + i;
        let x = *a;
        if j == 0 {
            let y = *b;
            *a = x + y;
            *b = x - y;
        } else if inverse {
            let t = *b * tw[h - j];
            *a = x - t;
            *b = x + t;
        } else {
            let t = *b * tw[j];
            *a = x + t;
            *b = x - t;
        }
    }
}

/// One stage over the whole array, parallel within each butterfly span.
fn global_stage(data: &mut [Scalar], table: &[Scalar], h: usize, inverse: bool, dif: bool) {
    let tw = stage(table, h);
    for span in data.chunks_mut(2 * h) {
        let (lo, hi) = span.split_at_mut(h);
        lo.par_chunks_mut(PAR_CHUNK)
            .zip(hi.par_chunks_mut(PAR_CHUNK))
            .enumerate()
            .for_each(|(ci, (l, r))| {
                if dif {
                    dif_butterflies(l, r, tw, ci * PAR_CHUNK, inverse);
                } else {
                    dit_butterflies(l, r, tw, ci * PAR_CHUNK, inverse);
                }
            });
    }
}

/// Stages with spans up to `block.len()`, all inside one block.
fn local_stages(block: &mut [Scalar], table: &[Scalar], inverse: bool, dif: bool) {
    let n = block.len();
    let mut h = if dif { n / 2 } else { 1 };
    while h >= 1 && h < n {
        let tw = stage(table, h);
        for span in block.chunks_mut(2 * h) {
            let (lo, hi) = span.split_at_mut(h);
            if dif {
                dif_butterflies(lo, hi, tw, 0, inverse);
            } else {
                dit_butterflies(lo, hi, tw, 0, inverse);
            }
        }
        h = if dif { h / 2 } else { h * 2 };
    }
}

/// Natural in, bit-reversed out; no 1/n factor.
fn dif(data: &mut [Scalar], table: &[Scalar], inverse: bool) {
    let n = data.len();
    let block = n.min(1 << BLOCK_LOG);
    let mut h = n / 2;
    while h >= block {
        global_stage(data, table, h, inverse, true);
        h /= 2;
    }
    data.par_chunks_mut(block)
        .for_each(|b| local_stages(b, table, inverse, true));
}

/// Bit-reversed in, natural out; no 1/n factor.
fn dit(data: &mut [Scalar], table: &[Scalar], inverse: bool) {
    let n = data.len();
    let block = n.min(1 << BLOCK_LOG);
    data.par_chunks_mut(block)
        .for_each(|b| local_stages(b, table, inverse, false));
    let mut h = block;
    while h < n {
        global_stage(data, table, h, inverse, false);
        h *= 2;
    }
}

/// In-place bit-reversal permutation (an involution). Serial: swaps of disjoint pairs
/// scattered over the array do not split into safe parallel slices.
fn bit_reverse_permute(data: &mut [Scalar]) {
    let log_n = data.len().trailing_zeros();
    for i in 0..data.len() {
        let r = bit_reverse(i, log_n);
        if i < r {
            data.swap(i, r);
        }
    }
}

/// `data[p] *= factor · base^j` with j the logical index at position p. `base^j` comes
/// from two tables of about √n entries (low and high halves of j's bits).
fn scale_by_powers(data: &mut [Scalar], order: Order, base: Scalar, factor: Scalar) {
    let n = data.len();
    let log_n = n.trailing_zeros();
    if base == Scalar::ONE {
        data.par_chunks_mut(PAR_CHUNK)
            .for_each(|c| c.iter_mut().for_each(|x| *x *= factor));
        return;
    }
    let lo_bits = log_n / 2;
    let lo_mask = (1usize << lo_bits) - 1;
    let powers = |start: Scalar, step: Scalar, len: usize| -> Vec<Scalar> {
        let mut v = Vec::with_capacity(len);
        let mut x = start;
        for _ in 0..len {
            v.push(x);
            x *= step;
        }
        v
    };
    let low = powers(factor, base, 1 << lo_bits);
    let high_step = base.pow_vartime(&[1u64 << lo_bits, 0, 0, 0]);
    let high = powers(Scalar::ONE, high_step, 1 << (log_n - lo_bits));
    data.par_chunks_mut(PAR_CHUNK)
        .enumerate()
        .for_each(|(ci, chunk)| {
            for (k, x) in chunk.iter_mut().enumerate() {
                let p = ci * PAR_CHUNK + k;
                let j = match order {
                    Order::Natural => p,
                    Order::BitReversed => bit_reverse(p, log_n),
                };
                *x *= low[j & lo_mask] * high[j >> lo_bits];
            }
        });
}

fn invert_nonzero(x: Scalar) -> Scalar {
    // Callers pass n (a power of two below 2^29 < r) or g^m − 1 (g generates F_r^*, and
    // r − 1 does not divide m), both nonzero.
    Option::from(x.invert()).unwrap_or(Scalar::ZERO)
}

impl NttBackend for CpuNtt {
    fn name(&self) -> &'static str {
        "cpu-radix2"
    }

    fn transform(&self, data: &mut [Scalar], spec: NttSpec) -> Result<(), NttError> {
        let log_n = log2_len(data.len())?;
        if log_n == 0 {
            return Ok(()); // every transform of one element is the identity
        }
        let table = self.table(log_n);
        let inverse = spec.direction == Direction::Inverse;
        let shift = match spec.domain {
            Domain::Subgroup => Scalar::ONE,
            Domain::Coset => coset_shift(),
        };
        if !inverse && spec.domain == Domain::Coset {
            scale_by_powers(data, spec.input, shift, Scalar::ONE);
        }
        match (spec.input, spec.output) {
            (Order::Natural, Order::BitReversed) => dif(data, &table, inverse),
            (Order::BitReversed, Order::Natural) => dit(data, &table, inverse),
            (Order::Natural, Order::Natural) => {
                bit_reverse_permute(data);
                dit(data, &table, inverse);
            }
            (Order::BitReversed, Order::BitReversed) => {
                bit_reverse_permute(data);
                dif(data, &table, inverse);
            }
        }
        if inverse {
            let n_inv = invert_nonzero(Scalar::from(data.len() as u64));
            scale_by_powers(data, spec.output, invert_nonzero(shift), n_inv);
        }
        Ok(())
    }

    fn h_poly(&self, abc: AbcEvaluations) -> Result<Vec<Scalar>, NttError> {
        let AbcEvaluations {
            mut a,
            mut b,
            mut c,
        } = abc;
        for (name, v) in [("b", &b), ("c", &c)] {
            if v.len() != a.len() {
                return Err(NttError::LengthMismatch {
                    name,
                    expected: a.len(),
                    found: v.len(),
                });
            }
        }
        let m = h_domain_size(a.len())?;
        let table = self.table(m.trailing_zeros());
        let g = coset_shift();
        let m_inv = invert_nonzero(Scalar::from(m as u64));
        for v in [&mut a, &mut b] {
            v.resize(m, Scalar::ZERO);
            // Evaluations → m·coefficients (bit-reversed); × g^j/m; → coset evaluations
            // in natural order. No permutation pass.
            dif(v, &table, true);
            scale_by_powers(v, Order::BitReversed, g, m_inv);
            dit(v, &table, false);
        }
        // h = (icoset(A·B on the coset) − C) / (g^m − 1): C has degree < m, so the inverse
        // coset transform of its coset values is its coefficients, which c's inverse
        // transform gives; its coset transform is skipped. The same field elements as
        // bellman's seven transforms, from six.
        c.resize(m, Scalar::ZERO);
        dif(&mut c, &table, true);
        let z_inv = invert_nonzero(g.pow_vartime(&[m as u64, 0, 0, 0]) - Scalar::ONE);
        let k = z_inv * m_inv;
        a.par_chunks_mut(PAR_CHUNK)
            .zip(b.par_chunks(PAR_CHUNK))
            .for_each(|(a, b)| {
                for (a, b) in a.iter_mut().zip(b) {
                    *a *= b;
                }
            });
        drop(b);
        dif(&mut a, &table, true);
        // Both bit-reversed, unnormalised: h_j = D_j · g^-j·z/m − C'_j · z/m.
        scale_by_powers(&mut a, Order::BitReversed, invert_nonzero(g), k);
        a.par_chunks_mut(PAR_CHUNK)
            .zip(c.par_chunks(PAR_CHUNK))
            .for_each(|(a, c)| {
                for (a, c) in a.iter_mut().zip(c) {
                    *a -= *c * k;
                }
            });
        drop(c);
        bit_reverse_permute(&mut a);
        // The H query has m − 1 bases: h has degree at most m − 2 for a satisfied system.
        a.truncate(m - 1);
        Ok(a)
    }

    fn h_coset_evaluations(
        &self,
        abc: AbcEvaluations,
        shift: Scalar,
    ) -> Result<Vec<Scalar>, NttError> {
        let AbcEvaluations {
            mut a,
            mut b,
            mut c,
        } = abc;
        for (name, v) in [("b", &b), ("c", &c)] {
            if v.len() != a.len() {
                return Err(NttError::LengthMismatch {
                    name,
                    expected: a.len(),
                    found: v.len(),
                });
            }
        }
        let m = h_domain_size(a.len())?;
        let table = self.table(m.trailing_zeros());
        let m_inv = invert_nonzero(Scalar::from(m as u64));
        for v in [&mut a, &mut b, &mut c] {
            v.resize(m, Scalar::ZERO);
            // As in h_poly: evaluations → m·coefficients (bit-reversed); × shift^j/m; →
            // evaluations on the coset in natural order.
            dif(v, &table, true);
            scale_by_powers(v, Order::BitReversed, shift, m_inv);
            dit(v, &table, false);
        }
        a.par_chunks_mut(PAR_CHUNK)
            .zip(b.par_chunks(PAR_CHUNK))
            .zip(c.par_chunks(PAR_CHUNK))
            .for_each(|((a, b), c)| {
                for ((a, b), c) in a.iter_mut().zip(b).zip(c) {
                    *a = *a * b - c;
                }
            });
        Ok(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_shared_across_sizes() {
        let ntt = CpuNtt::new();
        let small = ntt.table(3);
        let big = ntt.table(10);
        assert_eq!(&big[..small.len()], &small[..]);
        assert_eq!(big.len(), (1 << 10) - 1);
        for h in [1usize, 2, 4, 512] {
            let w = omega((2 * h).trailing_zeros());
            for j in [0, h / 2, h - 1] {
                assert_eq!(
                    stage(&big, h)[j],
                    w.pow_vartime(&[j as u64, 0, 0, 0]),
                    "h = {h}, j = {j}"
                );
            }
        }
        assert_eq!(ntt.twiddle_bytes(), ((1 << 10) - 1) * 32);
        ntt.clear_twiddles();
        assert_eq!(ntt.twiddle_bytes(), 0);
        assert_eq!(ntt.table(4)[..], big[..15]);
    }
}
