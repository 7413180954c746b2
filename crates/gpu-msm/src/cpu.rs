//! CPU Pippenger (rayon): the fallback backend and the reference for the GPU one.

use bls12_381::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::Field;
use group::{Curve, Group};
use rayon::prelude::*;

use crate::affine::{affine_flush_at, neg_y, AffineBuckets, BaseField, MsmBase, ReprCurve};
use crate::{check_batch, check_shapes, DensityMask, MsmBackend, MsmError};

/// Largest window a [`CpuMsmConfig`] accepts. Buckets per window are `2^(c-1)`.
pub const MAX_WINDOW_BITS: u32 = 24;

/// Scalars are below r < 2^255; windows cover 256 bits so the top signed digit never
/// carries out (see [`signed_digit`]).
const SCALAR_BITS: usize = 256;

/// Scalars classified per parallel task; a multiple of 64 so a task starts on a mask word.
const CLASSIFY_BLOCK: usize = 1 << 12;

/// Default for [`CpuMsmConfig::scalars_in_flight`]: the term list (with coordinates,
/// 128 bytes per G1 term, 224 per G2 term) stays under about 230 MiB.
pub const DEFAULT_SCALARS_IN_FLIGHT: usize = 1 << 20;

/// How buckets accumulate points.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BucketArith {
    /// Whichever has the lower estimated cost for the number of terms (batch-affine
    /// once there are enough buckets to amortise the batch inversion).
    #[default]
    Auto,
    /// Projective buckets, bls12_381's complete mixed addition.
    Projective,
    /// Affine buckets with batched inversions (bls-repr arithmetic).
    BatchAffine,
}

/// Tuning knobs of the CPU backend.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuMsmConfig {
    /// Fixed window size in bits; `None` picks one per MSM from the number of
    /// scalars that are neither 0 nor 1.
    pub window_bits: Option<u32>,
    /// Scalars classified and bucketed at once (`None`: [`DEFAULT_SCALARS_IN_FLIGHT`]);
    /// rounded up to a multiple of 4096. Bounds the transient term list (40 bytes per
    /// scalar other than 0 and 1); each extra slice costs one bucket reduction per window.
    pub scalars_in_flight: Option<usize>,
    /// Bucket arithmetic; results are identical, only speed differs.
    pub buckets: BucketArith,
}

/// The CPU backend: signed-digit Pippenger over the rayon global pool.
#[derive(Clone, Debug, Default)]
pub struct CpuMsm {
    config: CpuMsmConfig,
}

impl CpuMsm {
    /// A backend that chooses its window per MSM.
    pub fn new() -> Self {
        Self::default()
    }

    /// A backend with explicit tuning; rejects a window outside `1..=MAX_WINDOW_BITS`.
    pub fn with_config(config: CpuMsmConfig) -> Result<Self, MsmError> {
        if let Some(c) = config.window_bits {
            if c == 0 || c > MAX_WINDOW_BITS {
                return Err(MsmError::BadWindow {
                    window_bits: c,
                    max_bits: MAX_WINDOW_BITS,
                });
            }
        }
        if config.scalars_in_flight == Some(0) {
            return Err(MsmError::BadSliceLength {
                scalars_in_flight: 0,
            });
        }
        Ok(Self { config })
    }

    /// The configuration in use.
    pub fn config(&self) -> CpuMsmConfig {
        self.config
    }

    /// `Σ scalars[i]·bases[i]` (with a mask: see the crate docs) for any base layout
    /// [`MsmBase`] covers: `bls12_381` affine points, or `bls-repr`'s Montgomery layout
    /// (what `srs-store` loads), read in place with no converted copy. A repr base with an
    /// unreduced coordinate is [`MsmError::BaseNotReduced`].
    pub fn msm<B: MsmBase>(
        &self,
        bases: &[B],
        scalars: &[Scalar],
        density: Option<&DensityMask>,
    ) -> Result<B::Curve, MsmError> {
        self.run::<B>(bases, scalars, density)
    }

    /// The most host bytes one [`CpuMsm::msm`] call over `n_scalars` G1 scalars allocates
    /// beside its inputs (classified terms, their coordinates on the batch-affine path,
    /// one set of buckets per busy thread of the rayon pool it runs on), from the same
    /// plan the call makes; an upper bound, since scalars 0 and 1 make no term. What a
    /// caller charges before the call.
    pub fn scratch_bytes_g1(&self, n_scalars: usize) -> u64 {
        self.scratch_bytes::<G1Projective>(n_scalars)
    }

    /// [`CpuMsm::scratch_bytes_g1`] for a G2 MSM.
    pub fn scratch_bytes_g2(&self, n_scalars: usize) -> u64 {
        self.scratch_bytes::<G2Projective>(n_scalars)
    }

    fn scratch_bytes<G: ReprCurve>(&self, n_scalars: usize) -> u64 {
        use std::mem::size_of;
        if n_scalars == 0 {
            return 0;
        }
        let n = n_scalars.min(self.slice_len());
        let threads = rayon::current_num_threads().max(1);
        let Plan { c, affine, .. } = plan(n, &self.config, threads);
        let term = size_of::<Term>();
        // Classification: the per-block lists and the joined list.
        let classify = 2 * term * n;
        // The windows: the joined list, and on the batch-affine path each term again with
        // its base's coordinates (both alive while the second is built).
        let terms = if affine {
            (term + size_of::<AffineTerm<G::F>>()) * n
        } else {
            term * n
        };
        let n_buckets = 1usize << (c - 1);
        let buckets = if affine {
            AffineBuckets::<G>::bytes(n_buckets)
        } else {
            (n_buckets * (size_of::<G>() + 1)) as u64
        };
        classify.max(terms) as u64 + threads as u64 * buckets
    }

    /// Scalars classified and bucketed at once (see [`CpuMsmConfig::scalars_in_flight`]).
    fn slice_len(&self) -> usize {
        self.config
            .scalars_in_flight
            .unwrap_or(DEFAULT_SCALARS_IN_FLIGHT)
            .div_ceil(CLASSIFY_BLOCK)
            .max(1)
            * CLASSIFY_BLOCK
    }

    fn run<B: MsmBase>(
        &self,
        bases: &[B],
        scalars: &[Scalar],
        density: Option<&DensityMask>,
    ) -> Result<B::Curve, MsmError> {
        check_shapes(bases.len(), scalars.len(), density)?;
        // One cheap pass (limb comparisons) so the sums below never meet a base they
        // cannot convert.
        if let Some(index) = bases.par_iter().position_any(|b| !b.is_valid()) {
            return Err(MsmError::BaseNotReduced { index });
        }
        let slice_len = self.slice_len();
        Ok(pippenger::<B>(
            bases,
            scalars,
            density,
            &self.config,
            slice_len,
        ))
    }
}

impl MsmBackend for CpuMsm {
    fn name(&self) -> &'static str {
        "cpu-pippenger"
    }

    fn msm_g1(
        &self,
        bases: &[G1Affine],
        scalars: &[Scalar],
        density: Option<&DensityMask>,
    ) -> Result<G1Projective, MsmError> {
        self.run::<G1Affine>(bases, scalars, density)
    }

    fn msm_g2(
        &self,
        bases: &[G2Affine],
        scalars: &[Scalar],
        density: Option<&DensityMask>,
    ) -> Result<G2Projective, MsmError> {
        self.run::<G2Affine>(bases, scalars, density)
    }

    fn msm_g1_batch(
        &self,
        bases: &[G1Affine],
        scalar_sets: &[&[Scalar]],
        density: Option<&DensityMask>,
    ) -> Result<Vec<G1Projective>, MsmError> {
        check_batch(bases.len(), scalar_sets, density)?;
        // Each MSM is already parallel inside; running them one after another keeps
        // one set of buckets per window alive at a time.
        scalar_sets
            .iter()
            .map(|s| self.run::<G1Affine>(bases, s, density))
            .collect()
    }

    fn msm_g2_batch(
        &self,
        bases: &[G2Affine],
        scalar_sets: &[&[Scalar]],
        density: Option<&DensityMask>,
    ) -> Result<Vec<G2Projective>, MsmError> {
        check_batch(bases.len(), scalar_sets, density)?;
        scalar_sets
            .iter()
            .map(|s| self.run::<G2Affine>(bases, s, density))
            .collect()
    }
}

/// A scalar that needs the windowed path: its base index and canonical limbs.
#[derive(Clone, Copy)]
struct Term {
    base: u32,
    limbs: [u64; 4],
}

fn canonical_limbs(s: &Scalar) -> [u64; 4] {
    let bytes = s.to_bytes();
    let mut limbs = [0u64; 4];
    for (limb, chunk) in limbs.iter_mut().zip(bytes.chunks_exact(8)) {
        let mut le = [0u8; 8];
        le.copy_from_slice(chunk);
        *limb = u64::from_le_bytes(le);
    }
    limbs
}

/// Bits `[start, start + width)` of a 256-bit little-endian number (zero past bit 255);
/// `width <= 32`.
fn bits(limbs: &[u64; 4], start: usize, width: usize) -> u64 {
    if start >= SCALAR_BITS {
        return 0;
    }
    let (limb, shift) = (start / 64, start % 64);
    let mut v = limbs[limb] >> shift;
    if shift + width > 64 && limb + 1 < 4 {
        v |= limbs[limb + 1] << (64 - shift);
    }
    v & ((1u64 << width) - 1)
}

/// Signed digit of window `w` (width `c`), in `[-2^(c-1), 2^(c-1)]`.
///
/// Digit = raw window + carry in − 2^c·(top bit of the window), where the carry in is
/// the top bit of the window below. Each digit depends only on `c + 1` bits of the
/// scalar, so windows are decoded independently (no sequential carry pass, nothing
/// stored per window). The sum telescopes to the scalar as long as the top bit of the
/// last window is zero, which `W·c >= 256 > 255 >= bits(r)` guarantees.
pub(crate) fn signed_digit(limbs: &[u64; 4], w: usize, c: usize) -> i64 {
    let start = w * c;
    let raw = bits(limbs, start, c) as i64;
    let carry = if start == 0 {
        0
    } else {
        bits(limbs, start - 1, 1) as i64
    };
    let top = (raw >> (c - 1)) & 1;
    raw + carry - (top << c)
}

/// Number of windows of `c` bits.
fn n_windows(c: usize) -> usize {
    SCALAR_BITS.div_ceil(c)
}

/// Estimated cost of one unit of the windowed part, one window's bucket sums over
/// `chunk_terms` terms, in base-field multiplications (measured on this project's 2-core
/// box: a bls12_381 mixed addition ≈ 20, a projective addition ≈ 22, a batch-affine
/// addition ≈ 8 plus its share of one ≈ 600-multiplication inversion). The running-sum
/// reduction costs two additions per bucket, plus a conversion for affine buckets.
fn unit_cost(chunk_terms: usize, c: usize, affine: bool) -> u128 {
    let m = chunk_terms as u128;
    let n_buckets = 1u128 << (c - 1);
    if affine {
        let add = 8 + 600 / affine_flush_at(1 << (c - 1)) as u128;
        m * add + n_buckets * (10 + 20 + 22)
    } else {
        m * 20 + n_buckets * 44
    }
}

/// How the windowed part runs: window bits, bucket arithmetic, and how many chunks each
/// window's terms are cut into (one unit of work per window and chunk; each chunk costs one
/// more bucket reduction).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    pub(crate) c: usize,
    pub(crate) affine: bool,
    pub(crate) chunks: usize,
}

/// Estimated wall time of a plan on `threads` threads: the units run in rounds of
/// `threads` (all units are the same size), each round as long as one unit.
fn estimated_time(n_terms: usize, p: Plan, threads: usize) -> u128 {
    let units = n_windows(p.c) * p.chunks;
    units.div_ceil(threads.max(1)) as u128 * unit_cost(n_terms.div_ceil(p.chunks), p.c, p.affine)
}

/// The plan of least estimated wall time on `threads` threads, within what `config` fixes.
/// Counting rounds matters on many cores: at 2^20 terms on 16 threads, 15-bit windows cut
/// in two chunks make 36 units, three rounds for 2.25 rounds of work, where 16-bit windows
/// make 16 units, one round.
pub(crate) fn plan(n_terms: usize, config: &CpuMsmConfig, threads: usize) -> Plan {
    let modes: &[bool] = match config.buckets {
        BucketArith::Auto => &[false, true],
        BucketArith::Projective => &[false],
        BucketArith::BatchAffine => &[true],
    };
    let windows = match config.window_bits {
        Some(c) => c as usize..=c as usize,
        None => 1..=MAX_WINDOW_BITS as usize,
    };
    let threads = threads.max(1);
    let mut best = Plan {
        c: 1,
        affine: false,
        chunks: 1,
    };
    let mut best_time = u128::MAX;
    for c in windows {
        for &affine in modes {
            // More chunks than threads never shortens a round.
            for chunks in 1..=threads.min(n_terms.max(1)) {
                let p = Plan { c, affine, chunks };
                let t = estimated_time(n_terms, p, threads);
                if t < best_time {
                    best_time = t;
                    best = p;
                }
            }
        }
    }
    best
}

/// Σ scalars[i]·base(i) where base(i) is `bases[i]`, or with a mask the base of the
/// i-th scalar's rank among the set bits. Shapes are checked by the caller.
///
/// Scalars are taken in slices of `slice_len` (a multiple of `CLASSIFY_BLOCK`) so the
/// classified terms (40 bytes each) stay bounded however large n is; each slice costs
/// one extra bucket reduction per window, small next to the slice's bucket additions.
fn pippenger<B: MsmBase>(
    bases: &[B],
    scalars: &[Scalar],
    density: Option<&DensityMask>,
    config: &CpuMsmConfig,
    slice_len: usize,
) -> B::Curve {
    let mut total = B::Curve::identity();
    let mut base_offset = 0;
    for (k, slice) in scalars.chunks(slice_len).enumerate() {
        let scalar_offset = k * slice_len;
        let (ones_sum, terms) = classify::<B>(bases, slice, density, scalar_offset, base_offset);
        total += ones_sum + windowed::<B>(bases, terms, config);
        base_offset += match density {
            None => slice.len(),
            Some(mask) => mask.words()
                [scalar_offset / 64..(scalar_offset + slice.len()).div_ceil(64)]
                .iter()
                .map(|w| w.count_ones() as usize)
                .sum(),
        };
    }
    total
}

/// The windowed part: Σ term·base over terms that are neither 0 nor 1.
fn windowed<B: MsmBase>(bases: &[B], terms: Vec<Term>, config: &CpuMsmConfig) -> B::Curve {
    type F<B> = <<B as MsmBase>::Curve as ReprCurve>::F;
    if terms.is_empty() {
        return B::Curve::identity();
    }
    let Plan { c, affine, chunks } = plan(terms.len(), config, rayon::current_num_threads());
    let n_win = n_windows(c);
    if affine {
        // Each term carries its base's coordinates: window passes then read memory in
        // order. A base at infinity (which adds nothing) keeps its slot with a zero
        // scalar, whose digit is 0 in every window: an indexed map collects straight into
        // one list of the right length (a filtering collect would hold its pieces and the
        // joined list at once, twice the bytes).
        let aff: Vec<AffineTerm<F<B>>> = terms
            .par_iter()
            .map(|t| match bases[t.base as usize].xy() {
                Some((x, y)) => AffineTerm {
                    limbs: t.limbs,
                    base: t.base,
                    x,
                    y,
                },
                None => AffineTerm {
                    limbs: [0; 4],
                    base: t.base,
                    x: <F<B> as BaseField>::ZERO,
                    y: <F<B> as BaseField>::ZERO,
                },
            })
            .collect();
        drop(terms);
        return split_windows::<B::Curve, _>(&aff, c, n_win, chunks, |chunk, w| {
            window_sum_affine::<B>(bases, chunk, w, c)
        });
    }
    split_windows::<B::Curve, _>(&terms, c, n_win, chunks, |chunk, w| {
        window_sum::<B>(bases, chunk, w, c)
    })
}

/// Runs `window(chunk, w)` for every window and each of `n_chunks` chunks of the terms in
/// parallel and combines the window sums by doubling.
fn split_windows<G, T>(
    terms: &[T],
    c: usize,
    n_win: usize,
    n_chunks: usize,
    window: impl Fn(&[T], usize) -> G + Sync,
) -> G
where
    G: Curve<Scalar = Scalar>,
    T: Sync,
{
    let n_chunks = n_chunks.clamp(1, terms.len().max(1));
    let chunk_len = terms.len().div_ceil(n_chunks);

    let partial: Vec<(usize, G)> = (0..n_win * n_chunks)
        .into_par_iter()
        .map(|unit| {
            let (w, chunk) = (unit / n_chunks, unit % n_chunks);
            let lo = (chunk * chunk_len).min(terms.len());
            let hi = (lo + chunk_len).min(terms.len());
            (w, window(&terms[lo..hi], w))
        })
        .collect();

    let mut window_sums = vec![G::identity(); n_win];
    for (w, s) in partial {
        window_sums[w] += s;
    }
    let mut acc = G::identity();
    for s in window_sums.iter().rev() {
        for _ in 0..c {
            acc = acc.double();
        }
        acc += s;
    }
    acc
}

/// A term with its base's affine coordinates, for the batch-affine path.
#[derive(Clone, Copy)]
struct AffineTerm<F> {
    limbs: [u64; 4],
    base: u32,
    x: F,
    y: F,
}

/// Batch-affine bucket sum of one window: Σ digit·base.
fn window_sum_affine<B: MsmBase>(
    bases: &[B],
    terms: &[AffineTerm<<B::Curve as ReprCurve>::F>],
    w: usize,
    c: usize,
) -> B::Curve {
    let mut buckets = AffineBuckets::<B::Curve>::new(1 << (c - 1));
    for t in terms {
        let d = signed_digit(&t.limbs, w, c);
        if d == 0 {
            continue;
        }
        let slot = (d.unsigned_abs() - 1) as usize;
        let y = if d > 0 { t.y } else { neg_y(&t.y) };
        buckets.add(slot, t.x, y, &bases[t.base as usize], d < 0);
    }
    buckets.reduce()
}

/// Bucket sum of one window over some terms: Σ digit·base.
fn window_sum<B: MsmBase>(bases: &[B], terms: &[Term], w: usize, c: usize) -> B::Curve {
    let n_buckets = 1usize << (c - 1);
    let mut buckets = vec![B::Curve::identity(); n_buckets];
    // An empty bucket takes its first point by copy instead of a full addition.
    let mut filled = vec![false; n_buckets];
    for t in terms {
        let d = signed_digit(&t.limbs, w, c);
        if d == 0 {
            continue;
        }
        let base = &bases[t.base as usize];
        let slot = (d.unsigned_abs() - 1) as usize;
        if filled[slot] {
            if d > 0 {
                base.add_to(&mut buckets[slot]);
            } else {
                base.sub_from(&mut buckets[slot]);
            }
        } else {
            filled[slot] = true;
            buckets[slot] = if d > 0 {
                base.to_curve()
            } else {
                -base.to_curve()
            };
        }
    }
    // Σ (k+1)·bucket[k] by running sums from the top bucket down.
    let mut running = B::Curve::identity();
    let mut running_started = false;
    let mut acc = B::Curve::identity();
    for (b, f) in buckets.iter().zip(&filled).rev() {
        if *f {
            if running_started {
                running += b;
            } else {
                running = *b;
                running_started = true;
            }
        }
        if running_started {
            acc += running;
        }
    }
    acc
}

/// Splits scalars into zeros (dropped), ones (summed here) and the rest (returned with
/// their base index). `scalars` starts at scalar `scalar_offset` (a multiple of 64) and
/// base `base_offset`. Parallel over blocks; a block's first base index is its prefix
/// count of set mask bits.
fn classify<B: MsmBase>(
    bases: &[B],
    scalars: &[Scalar],
    density: Option<&DensityMask>,
    scalar_offset: usize,
    base_offset: usize,
) -> (B::Curve, Vec<Term>) {
    let n_blocks = scalars.len().div_ceil(CLASSIFY_BLOCK);
    let block_base: Vec<usize> = match density {
        None => (0..n_blocks)
            .map(|b| base_offset + b * CLASSIFY_BLOCK)
            .collect(),
        Some(mask) => {
            let words_per_block = CLASSIFY_BLOCK / 64;
            let first_word = scalar_offset / 64;
            let last_word = (scalar_offset + scalars.len()).div_ceil(64);
            let mut starts = Vec::with_capacity(n_blocks);
            let mut count = base_offset;
            for block in mask.words()[first_word..last_word].chunks(words_per_block) {
                starts.push(count);
                count += block.iter().map(|w| w.count_ones() as usize).sum::<usize>();
            }
            starts
        }
    };

    let per_block: Vec<(B::Curve, Vec<Term>)> = scalars
        .par_chunks(CLASSIFY_BLOCK)
        .zip(block_base.par_iter())
        .enumerate()
        .map(|(b, (block, &first_base))| {
            let mut ones = B::Curve::identity();
            let mut terms = Vec::new();
            let mut base = first_base;
            for (j, s) in block.iter().enumerate() {
                if let Some(mask) = density {
                    if !mask.get(scalar_offset + b * CLASSIFY_BLOCK + j) {
                        continue;
                    }
                }
                let this = base;
                base += 1;
                if bool::from(s.is_zero()) {
                    continue;
                }
                if *s == Scalar::ONE {
                    bases[this].add_to(&mut ones);
                    continue;
                }
                terms.push(Term {
                    base: this as u32,
                    limbs: canonical_limbs(s),
                });
            }
            (ones, terms)
        })
        .collect();

    let mut ones_sum = B::Curve::identity();
    let mut terms = Vec::with_capacity(per_block.iter().map(|(_, t)| t.len()).sum());
    for (ones, t) in per_block {
        ones_sum += ones;
        terms.extend_from_slice(&t);
    }
    (ones_sum, terms)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value_from_digits(limbs: &[u64; 4], c: usize) -> Scalar {
        // Σ d_w·2^(wc) evaluated in the field.
        let two_c = Field::pow_vartime(&Scalar::from(2u64), [c as u64]);
        let mut acc = Scalar::ZERO;
        for w in (0..n_windows(c)).rev() {
            acc *= two_c;
            let d = signed_digit(limbs, w, c);
            let half = 1i64 << (c - 1);
            assert!(
                (-half..=half).contains(&d),
                "digit {d} out of range for c = {c}"
            );
            let mag = Scalar::from(d.unsigned_abs());
            acc += if d < 0 { -mag } else { mag };
        }
        acc
    }

    #[test]
    fn signed_digits_recompose() {
        let minus_one = -Scalar::ONE;
        let samples = [
            Scalar::ZERO,
            Scalar::ONE,
            minus_one,
            Scalar::from(u64::MAX),
            Scalar::from(0x8000_0000_0000_0000u64),
            minus_one * Scalar::from(12345u64),
            Field::pow_vartime(&Scalar::from(2u64), [254]),
        ];
        for c in 1..=MAX_WINDOW_BITS as usize {
            for s in &samples {
                assert_eq!(value_from_digits(&canonical_limbs(s), c), *s, "c = {c}");
            }
        }
    }

    #[test]
    fn plan_is_the_cheapest_choice() {
        let auto = CpuMsmConfig::default();
        for threads in [1, 2, 7, 16, 64] {
            for log_n in (0..30).step_by(3) {
                let m = 1usize << log_n;
                let p = plan(m, &auto, threads);
                assert!((1..=MAX_WINDOW_BITS as usize).contains(&p.c));
                assert!((1..=threads).contains(&p.chunks));
                let chosen = estimated_time(m, p, threads);
                for c in 1..=MAX_WINDOW_BITS as usize {
                    for affine in [false, true] {
                        for chunks in 1..=2 * threads {
                            let other = Plan { c, affine, chunks };
                            assert!(
                                chosen <= estimated_time(m, other, threads),
                                "2^{log_n} on {threads} threads: {p:?} vs {other:?}"
                            );
                        }
                    }
                }
                let fixed = CpuMsmConfig {
                    window_bits: Some(7),
                    buckets: BucketArith::Projective,
                    ..Default::default()
                };
                let p = plan(m, &fixed, threads);
                assert_eq!((p.c, p.affine), (7, false));
            }
        }
        // Large MSMs amortise the inversions: batch-affine wins.
        assert!(plan(1 << 16, &auto, 2).affine);
        // 2^20 on 16 threads: one round of 16 units, not three rounds of 36.
        let p = plan(1 << 20, &auto, 16);
        assert_eq!(n_windows(p.c) * p.chunks % 16, 0, "{p:?}");
    }
}
