//! Multi-scalar multiplication (MSM) on BLS12-381 G1 and G2.
//!
//! # Example
//! `Σ scalars[i]·bases[i]` on the CPU backend, and a sparse query (a [`DensityMask`] picks
//! which scalars have a base, as Groth16's A and B queries do); [`GpuMsm`] implements the
//! same [`MsmBackend`] on a CUDA device:
//! ```
//! use bls12_381::{G1Affine, G1Projective, Scalar};
//! use gpu_msm::{reference, CpuMsm, DensityMask, MsmBackend};
//!
//! let g = G1Projective::generator();
//! let bases: Vec<G1Affine> = (1..=4u64).map(|k| G1Affine::from(g * Scalar::from(k))).collect();
//! let scalars: Vec<Scalar> = [5u64, 0, 1, 7].into_iter().map(Scalar::from).collect();
//! let msm = CpuMsm::new();
//! // 5·1 + 0·2 + 1·3 + 7·4 = 36 times the generator.
//! assert_eq!(msm.msm_g1(&bases, &scalars, None)?, g * Scalar::from(36));
//!
//! // Four scalars, the last two with bases (the k-th set bit takes bases[k]):
//! // 1·(1·g) + 7·(2·g).
//! let mask = DensityMask::from_bools([false, false, true, true]);
//! let got = msm.msm_g1(&bases[..2], &scalars, Some(&mask))?;
//! assert_eq!(got, g * Scalar::from(15));
//! assert_eq!(got, reference::naive_msm::<G1Projective>(&bases[..2], &scalars, Some(&mask)));
//! # Ok::<(), gpu_msm::MsmError>(())
//! ```
//!
//! # Contract
//! - [`MsmBackend`] computes `Σ scalars[i]·bases[i]` and returns a projective point.
//!   Scalars are [`bls12_381::Scalar`] field elements; the result depends only on their
//!   values (backends read the canonical integer in `[0, r)`, never the Montgomery form).
//!   Bases are affine points given by the caller: this crate never reads parameter files.
//! - Sparse queries: with a [`DensityMask`] of `n` bits the MSM takes `n` scalars and one
//!   base per set bit, pairing the k-th set bit with `bases[k]`, exactly as bellman's
//!   `multiexp` walks a `DensityTracker` (Groth16's A and B queries). Without a mask,
//!   bases and scalars have equal length. A shorter or longer slice is an error, not a
//!   silent prefix: slice the parameter vector first (e.g. `&a_query[n_inputs..]`).
//! - Batch form: several scalar vectors (the partitions of one proof) over one set of
//!   bases and one mask give one point each, in order.
//! - Bases at infinity, repeated bases and any scalar in `[0, r)` give the exact sum; the
//!   result equals [`reference::naive_msm`] (tests check it). Note that bellman's
//!   `multiexp` instead *fails* on a base at infinity that it has to use; a prover that
//!   wants that check must make it itself.
//! - Bad shapes are a typed [`MsmError`], never a panic. At most `u32::MAX` terms.
//!
//! # Groth16 queries (the recipe `tests/groth16_proof.rs` checks against
//! `groth16::create_proof`, proof for proof)
//! With `n_in` inputs (the constant one included), `aux` the auxiliary assignment and
//! the densities recorded during synthesis (a variable is dense in a query when some
//! constraint's A, resp. B, combination gives it a nonzero coefficient):
//! - H: `msm_g1(&h_query[..h.len()], &h, None)`, h from `gpu_ntt`'s `h_poly`;
//! - L: `msm_g1(&l_query[..aux.len()], &aux, None)`;
//! - A: `msm_g1(&a_query[..n_in], &inputs, None)` plus
//!   `msm_g1(&a_query[n_in..n_in + a_aux.count_ones()], &aux, Some(&a_aux))`;
//! - B (G1 and G2 alike): with `k = b_in.count_ones()`,
//!   `msm_g1(&b_g1_query[..k], &inputs, Some(&b_in))` plus
//!   `msm_g1(&b_g1_query[k..k + b_aux.count_ones()], &aux, Some(&b_aux))`.
//!
//! # Backends
//! - [`CpuMsm`] (now): Pippenger on the rayon pool. Scalars 0 are skipped and 1 are summed
//!   directly (a Groth16 witness is mostly 0s and 1s); the rest go through signed-digit
//!   windows of `c` bits (`⌈256/c⌉` windows, `2^(c-1)` buckets, each digit decoded on its
//!   own from `c + 1` bits of the scalar). Buckets are batch-affine (one shared field
//!   inversion per batch of independent additions, on `bls-repr`'s Montgomery
//!   arithmetic since bls12_381 hides its base field; a point whose bucket is already in
//!   the batch goes to a projective overflow bucket) or projective (bls12_381 mixed
//!   addition); `c` and the bucket kind are picked per MSM from a cost model
//!   ([`BucketArith`], [`CpuMsmConfig`]). Each window is reduced by running sums and the
//!   windows are combined by doubling. Parallel over windows, and over chunks of terms
//!   when there are more threads than windows.
//! - [`GpuMsm`] (CUDA, G1 and G2; see `src/gpu.rs` for its contract): same scalars and
//!   masks, bases uploaded per call, resident on the device ([`DeviceBasesG1`],
//!   [`DeviceBasesG2`]) or streamed in chunks from pinned host memory ([`PinnedBases`]);
//!   fixed G1 bases can also have their windows precomputed on the device
//!   ([`PrecomputedBasesG1`]: one shared set of buckets for every window, W times the
//!   bases' memory), and one sort of the scalars can serve several sets of bases
//!   ([`GpuMsm::msm_resident_prefix_many`], [`GpuMsm::msm_precomputed_many`]). One pipeline, generic over the curve ([`GpuCurve`]: [`G1Curve`],
//!   [`G2Curve`]); `*_g1`/`*_g2` methods are thin aliases. Its own methods return
//!   [`GpuMsmError`] (which wraps [`MsmError`] and device errors). It also implements
//!   [`MsmBackend`], both curves on the GPU (bases uploaded per call); device failures
//!   become [`MsmError::Gpu`].
//!
//! # Cost model (CPU)
//! About `⌈256/c⌉·(m + 2^c)` point additions for `m` scalars other than 0 and 1 (a
//! batch-affine addition ≈ 8 field multiplications, a projective one ≈ 20), plus one
//! mixed addition per scalar equal to 1. Memory: 40 bytes per such scalar (128 for G1 and
//! 224 for G2 with batch-affine buckets, which copy the base's coordinates next to the
//! scalar), at most [`DEFAULT_SCALARS_IN_FLIGHT`] of them at once (configurable), plus
//! `2^(c-1)` buckets per window in flight (one window per busy thread). Nothing
//! proportional to the bases.
//!
//! # Cost model (GPU)
//! The same additions on the device, in XYZZ coordinates (a mixed addition ≈ 8 field
//! multiplications over Fp for G1, over Fp2 for G2, where an Fp2 product is 3 Fp
//! products: G2 costs about 3× G1 in arithmetic and 2× in base traffic, 192 against 96
//! bytes per base). Device memory: the resident bases (96 or 192 bytes each), 32 bytes
//! per scalar, and per call `4·W·n` bytes of sorted entries plus `(W+1)·2^(c-1)` buckets
//! of 192 (G1) or 384 (G2) bytes; `src/gpu.rs` has the details and measurements.
#![warn(missing_docs)]
// Only the CUDA backend's kernel launches (src/gpu.rs) use unsafe.
#![deny(unsafe_code)]

mod affine;
mod cpu;
mod density;
mod error;
#[allow(unsafe_code)]
mod gpu;
pub mod reference;
mod xyzz;

pub use affine::MsmBase;
pub use cpu::{BucketArith, CpuMsm, CpuMsmConfig, DEFAULT_SCALARS_IN_FLIGHT, MAX_WINDOW_BITS};
pub use density::DensityMask;
pub use error::MsmError;
pub use gpu::{
    scalars_from_words, scalars_to_words, select_scalar_words_into, AccumulateKernel, DeviceBases,
    DeviceBasesG1, DeviceBasesG2, DeviceBasesView, DeviceMask, DeviceScalars, G1Curve, G2Curve,
    GpuCurve, GpuMsm, GpuMsmConfig, GpuMsmError, GpuMsmPlan, OnesScatter, PhaseTimes, PinnedBases,
    PrecomputedBases, PrecomputedBasesG1, ReduceKernel, SortKind, TwoLevelParams, AFFINE_FROM,
    G2_AFFINE_FROM, GPU_MAX_TERMS, GPU_MAX_WINDOW_BITS, GPU_MIN_WINDOW_BITS, LARGE_WINDOW_FROM,
    MAX_CHUNK_LEN, MAX_DEFAULT_CHUNK_LEN, MAX_SEGMENTS, MAX_SEGMENTS_CAPPED, MIN_DEFAULT_CHUNK_LEN,
    SCATTER_BUCKETS, SHARED_SCATTER_KEYS, TWO_LEVEL_FROM_BITS, TWO_LEVEL_MAX_BINS,
};

use bls12_381::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};

/// An MSM engine. Every backend (CPU now, CUDA later) gives the same results for the
/// same inputs; see the crate docs for the exact contract.
pub trait MsmBackend: Send + Sync {
    /// Short name for logs and benchmark tables.
    fn name(&self) -> &'static str;

    /// `Σ scalars[i]·base(i)` on G1; `base(i)` is `bases[i]`, or with a mask the base of
    /// the i-th scalar's rank among the set bits (unset bits are skipped).
    fn msm_g1(
        &self,
        bases: &[G1Affine],
        scalars: &[Scalar],
        density: Option<&DensityMask>,
    ) -> Result<G1Projective, MsmError>;

    /// The same on G2.
    fn msm_g2(
        &self,
        bases: &[G2Affine],
        scalars: &[Scalar],
        density: Option<&DensityMask>,
    ) -> Result<G2Projective, MsmError>;

    /// One G1 MSM per scalar vector, all over the same bases and mask. All vectors must
    /// have the same length; nothing is computed when any shape is wrong.
    fn msm_g1_batch(
        &self,
        bases: &[G1Affine],
        scalar_sets: &[&[Scalar]],
        density: Option<&DensityMask>,
    ) -> Result<Vec<G1Projective>, MsmError>;

    /// The same on G2.
    fn msm_g2_batch(
        &self,
        bases: &[G2Affine],
        scalar_sets: &[&[Scalar]],
        density: Option<&DensityMask>,
    ) -> Result<Vec<G2Projective>, MsmError>;
}

/// Checks one MSM's shapes (shared by every backend).
pub(crate) fn check_shapes(
    n_bases: usize,
    n_scalars: usize,
    density: Option<&DensityMask>,
) -> Result<(), MsmError> {
    let max_terms = u32::MAX as usize;
    if n_scalars > max_terms {
        return Err(MsmError::TooManyTerms {
            n_terms: n_scalars,
            max_terms,
        });
    }
    match density {
        None if n_bases != n_scalars => Err(MsmError::LengthMismatch { n_bases, n_scalars }),
        None => Ok(()),
        Some(mask) if mask.len() != n_scalars => Err(MsmError::DensityLengthMismatch {
            mask_len: mask.len(),
            n_scalars,
        }),
        Some(mask) if mask.count_ones() != n_bases => Err(MsmError::DensityBasesMismatch {
            n_selected: mask.count_ones(),
            n_bases,
        }),
        Some(_) => Ok(()),
    }
}

/// Checks a batch up front so that a bad vector late in the batch wastes no work.
pub(crate) fn check_batch(
    n_bases: usize,
    scalar_sets: &[&[Scalar]],
    density: Option<&DensityMask>,
) -> Result<(), MsmError> {
    let Some(first) = scalar_sets.first() else {
        return Ok(());
    };
    for (index, s) in scalar_sets.iter().enumerate() {
        if s.len() != first.len() {
            return Err(MsmError::BatchLengthMismatch {
                index,
                expected: first.len(),
                found: s.len(),
            });
        }
    }
    check_shapes(n_bases, first.len(), density)
}
