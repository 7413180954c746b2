//! The CUDA backend: Pippenger on the GPU for G1 and G2 (`cuda-kernels/msm.cu`, point
//! kernels of G2 in `cuda-kernels/msm_g2.cu`).
//!
//! # Contract
//! - [`GpuMsm::msm`] (aliases [`GpuMsm::msm_g1`], [`GpuMsm::msm_g2`]) gives exactly `Σ scalars[i]·bases[i]` (the same value as
//!   [`crate::reference::naive_msm`] and [`crate::CpuMsm`]) for any scalars, bases at
//!   infinity and repeated bases included; shapes follow the crate's rules
//!   ([`crate::DensityMask`] pairing, equal lengths otherwise).
//! - Bases can be made resident once ([`GpuMsm::upload_bases`], [`DeviceBases`]; from
//!   bls12_381 points or from bls-repr layouts, G1 and G2) and reused by every MSM over them; scalars can be uploaded separately
//!   ([`GpuMsm::upload_scalars`], canonical on the device) so that a caller can overlap
//!   or time the copy.
//! - Scalars: [`Scalar`]s are converted to canonical integers on the host (through
//!   bls-repr, in parallel; 0 and 1 without a Montgomery reduction); [`FrRepr`]
//!   (Montgomery) scalars are uploaded as they are and converted to canonical on the GPU
//!   ([`GpuMsm::upload_scalars_montgomery`]).
//! - Every device allocation (bases, scalars, scratch) is charged to the device's VRAM
//!   budget first; a refusal or a real CUDA out-of-memory is [`GpuMsmError::Gpu`], never a
//!   panic. Scratch lives only for one call.
//! - Bases can also stay in pinned host memory ([`PinnedBases`]) and be streamed to the
//!   device per MSM ([`GpuMsm::msm_streamed`]): chunks copied on a second stream while the
//!   previous chunk is summed, two chunks of device memory whatever `n` (the way to run an
//!   MSM whose bases exceed the VRAM budget). Same result as the resident path (tested).
//! - One pipeline for both curves, generic over [`GpuCurve`] ([`G1Curve`], [`G2Curve`]):
//!   the scalar kernels (Montgomery conversion, counting sort) are curve-independent and
//!   live in the `Msm` module; each curve brings its point kernels (`Msm` for G1, `MsmG2`
//!   for G2, the same CUDA bodies instantiated over Fp and Fp2).
//! - The [`crate::MsmBackend`] impl of [`GpuMsm`] runs both curves on the GPU, bases
//!   uploaded per call. Device errors reach the trait as [`MsmError::Gpu`].
//!
//! # Pipeline (one stream)
//! First one pass counts the scalars equal to 1 and those other than 0 and 1 (`m`), and
//! the host reads the two counts (the call's one synchronization before its result): the
//! window size follows `m` ([`GpuMsmPlan::default_window_bits`]), and the sort's entries
//! are sized exactly. Signed-digit windows of `c` bits (`W = ⌈256/c⌉` windows, `2^(c-1)`
//! buckets each), plus a "ones" window that sums the bases of scalars equal to 1 without
//! weights; scalars equal to 0 produce no work. Bucket assignment is a counting sort by
//! bucket key (count with atomics, prefix sum, scatter in launches of a few windows each,
//! so that the buckets being filled stay within L2: [`SCATTER_BUCKETS`]; or, with
//! [`SortKind::TwoLevel`], by bins of keys per block and then per bin, which
//! [`SortKind::Auto`], the default, takes for windows of [`TWO_LEVEL_FROM_BITS`] bits or
//! more), then the bucket
//! accumulation adds each bucket's bases in XYZZ coordinates, buckets are reduced by
//! running sums over segments of buckets (one thread each) and a tree of sums, and the host
//! makes the `W + 1` window sums affine and combines them by doubling.
//!
//! # Bucket accumulation
//! G1's default ([`AccumulateKernel::ChunkedCapped`]) gives each thread the same number of
//! sorted entries ([`GpuMsmPlan::default_chunk_len`]: 32 to 512 by size) whatever the
//! buckets they fall in, and two small fix-up launches add the partial sums of buckets that
//! cross chunk boundaries (in runs of 64 chunks, then one thread per such bucket). So a
//! bucket that receives many entries (a million equal scalars other than 0 and 1, or a
//! window whose digits take few values) is spread over many threads, and no warp waits
//! for its longest bucket. G2's default is the same without the register cap
//! ([`AccumulateKernel::Chunked`]). The older kernels, one thread per bucket
//! ([`AccumulateKernel::Uncapped`], [`AccumulateKernel::Capped128`]), remain as choices;
//! there a bucket of `m` entries is `m` additions in a row (seconds for 2^20 equal scalars).
//! [`AccumulateKernel::ChunkedAffine`] (G1) adds in affine coordinates, 64 streams a thread
//! sharing one inversion a step: fewer field products, measured a few percent slower so far.
//!
//! # Measured (H200, 2026-12-03, `examples/gpu_msm_bench.rs`, bases resident, uniform scalars)
//! Median ms with the pinned-host copy of the scalars, G1: 2^16 4.59 (c = 13), 2^18 6.98,
//! 2^20 14.61, 2^22 44.78, 2^24 156.47, 2^26 553.81 (c = 20); G2 (2026-12-02): 2^20 45.21,
//! 2^24 503.88.
//! At 2^26 the bucket accumulation is 425 of 513 ms of device time (count 8.9, scatter
//! 48.0, reduction 15.6): the mixed additions bound it. The reference CUDA library in the
//! same run, and the history: docs/benchmarks.md.
//!
//! # Cost model
//! About `W·m` mixed additions for `m` scalars other than 0 and 1, one per scalar equal to
//! 1 (`o` of them), `~2·(W+1)·2^(c-1)` additions to reduce buckets; a G2 addition is about
//! 3 times a G1 one (Fp2 products are 3 Fp products) and reads 192-byte bases instead of
//! 96. Device scratch per call: `4·(W·m + o) + X·(W+1)·2^(c-1) + 12·(W+1)·2^(c-1)` bytes
//! (entries, buckets, sort keys) with X = 192 for G1 and 384 for G2 XYZZ buckets, plus
//! small reduction buffers; the chunked accumulation adds `2·X·⌈(W·m + o)/L⌉` bytes of
//! partial sums (chunks of `L` entries: 624 MiB for G1 at m = 2^26, c = 20, L = 512). At
//! m = 2^26 and c = 20 (W = 13) that is 3.25 GiB of entries and ~1.3 GiB (G1) of buckets,
//! next to 6 GiB of G1 bases and 2 GiB of scalars; a Groth16 witness of 2^27 terms of
//! which 1% take windows needs entries for those 1% and its ones only. Window sizes are
//! shared by both curves (tuned on G1).

use bls12_381::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use bls_repr::{FrRepr, G1AffineRepr, G2AffineRepr, ReprError};
use cudarc::driver::sys::CUfunction_attribute;
use cudarc::driver::{CudaEvent, CudaView, LaunchConfig, PushKernelArg};
use gpu_device::{DeviceBuffer, Entry, Gpu, GpuError, PinnedBuffer};
use rayon::prelude::*;
use std::sync::Arc;

use crate::{check_shapes, DensityMask, MsmError};

/// u32 words of one scalar (canonical, little-endian).
const SCALAR_WORDS: usize = 8;
/// Threads per block: the scalar kernels are light, the point kernels use many registers.
const SCALAR_BLOCK: u32 = 256;
const POINT_BLOCK: u32 = 128;
/// Counts summed per thread in the first level of the prefix sum (at least; see
/// [`scan_chunk`]).
const SCAN_CHUNK: u32 = 256;
/// Most chunks the one-thread second level of the prefix sum walks.
const MAX_SCAN_CHUNKS: u32 = 4096;

/// Counts per thread in the first level of the prefix sum over `n_keys` keys: 256, or more
/// so that the second level (one thread, in order) walks at most [`MAX_SCAN_CHUNKS`]
/// chunk sums (at c = 22 there are 13·2^21 keys: chunks of 256 would make that one thread
/// walk 106,496 of them). Unchanged (256) up to 2^20 keys, so for every c <= 17.
fn scan_chunk(n_keys: u32) -> u32 {
    SCAN_CHUNK.max(n_keys.div_ceil(MAX_SCAN_CHUNKS).next_power_of_two())
}
/// Most segments a window's buckets are split into for the reduction (a power of two) with
/// [`ReduceKernel::Uncapped`].
/// The reduction kernel holds ~250 registers (2 blocks of 128 threads per SM), so 17
/// windows x 1024 segments fit in one wave on the H200; 4096 segments (shorter runs, three
/// waves) measured 5.1 ms against 3.1 ms at c = 16 (docs/benchmarks.md).
pub const MAX_SEGMENTS: u32 = 1024;
/// Most segments per window with [`ReduceKernel::Capped`].
pub const MAX_SEGMENTS_CAPPED: u32 = 2048;
/// Segments per group of an MSM over precomputed windows (two groups: the shared buckets
/// and the ones): 2 × 2^14 threads, about one wave of the reduction on the H200. With the
/// per-window limits (1,024 or 2,048 a group) one thread walked 256 (c = 20) to 1,024
/// (c = 22) buckets: 8.2 and 31.9 ms of a 2^24 MSM (session 26, first device call).
const SHARED_SEGMENTS: u32 = 1 << 14;
/// Points one thread adds at each level of the window-sum tree (a power of two).
const TREE_FANIN: u32 = 4;

/// Fan-in of each tree level that adds `n_segments` (a power of two) points to one.
fn tree_levels(n_segments: u32) -> Vec<u32> {
    let mut levels = Vec::new();
    let mut n = n_segments;
    while n > 1 {
        let f = TREE_FANIN.min(n);
        levels.push(f);
        n /= f;
    }
    levels
}
/// From this many terms taking windows on, the default window is 20 bits (13 windows
/// instead of 16: the accumulation's additions fall by 19%, the 2^19 buckets a window cost
/// ~18 ms to reduce). Session 16 sweep on the H200 (resident scalars, chunks of 512, each
/// with its best scatter split; ms, c = 16 / 20): 2^24 164.0 / 163.5, 2^25 317.5 / 297.7,
/// 2^26 626.7 / 568.2, 2^27 1254.5 / 1103.7. (c = 19 and 22 lost to 20 at 2^24..2^27;
/// c = 18 and 21 leave 3 bits in the top window.)
pub const LARGE_WINDOW_FROM: usize = 1 << 25;
/// From this many terms taking windows on, [`AccumulateKernel::Auto`] runs
/// [`AccumulateKernel::ChunkedAffine`] on G1. H200, session 23, resident scalars, median of
/// 5, same call (ms, affine / XYZZ capped, best chunk each): 2^24 uniform, c = 16, 114.0 /
/// 132.5; 2^26 c = 16 418.5 / 497.0, c = 20 401.5 / 438.0; Groth16-shaped 2^26 (2^24.7
/// windowed terms, c = 16) 189.7 / 212.9; Groth16-shaped 2^24 (2^22.7) 55.6 / 57.1. Below
/// 2^23 the XYZZ kernel stays (fewer entries than the affine chunks need to fill the device;
/// not measured there).
pub const AFFINE_FROM: usize = 1 << 23;
/// [`AFFINE_FROM`] on G2. H200, session 24, resident scalars, c = 16, median of 3, same call
/// (ms, affine with 32 streams / XYZZ, best chunk each): 2^24 uniform 326.3 / 399.6 (chunks of
/// 2048 / 512), 2^20 uniform 30.4 / 32.4 (512 / 512); Groth16-shaped 2^24 (2^22.7 windowed
/// terms) 167.2 affine (XYZZ 241.7 in session 3). Below 2^20 not measured (XYZZ stays).
pub const G2_AFFINE_FROM: usize = 1 << 20;
/// Smallest and largest window sizes.
pub const GPU_MIN_WINDOW_BITS: u32 = 2;
/// Largest window size (keeps bucket keys and scratch bounded: at c = 22, 13·2^21 keys, 5.2
/// GB of G1 buckets).
pub const GPU_MAX_WINDOW_BITS: u32 = 22;
/// Shortest default chunk of the chunked accumulation ([`GpuMsmPlan::default_chunk_len`]).
pub const MIN_DEFAULT_CHUNK_LEN: u32 = 32;
/// Longest default chunk of the chunked accumulation.
pub const MAX_DEFAULT_CHUNK_LEN: u32 = 512;
/// The default chunk aims at about this many chunks (threads) per MSM.
const TARGET_CHUNKS: usize = 1 << 17;
/// Largest [`GpuMsmConfig::chunk_len`].
pub const MAX_CHUNK_LEN: u32 = 1 << 16;
/// Chunks whose partial sums one thread of the first fix-up launch adds (a bucket of `m`
/// entries leaves `m / (L·FIXUP_GROUP)` additions to one thread of the second).
const FIXUP_GROUP: u32 = 64;
/// Buckets one scatter launch writes into at most (by default; at least one window a
/// launch): the entries' partly written 32-byte sectors, one a bucket, then stay in L2
/// while they fill instead of going back and forth to memory for each 4-byte entry. With
/// 2^17: 4 windows a launch at c = 16, 1 at c = 20, all at c <= 13. Session 16 sweep on
/// the H200 (resident scalars, ms, 1 / 2 / 4 / all windows a launch): c = 16 at 2^24
/// 166.2 / 164.5 / **164.0** / 168.2, at 2^27 1271.0 / 1258.3 / **1254.5** / 1291.4;
/// c = 20 at 2^26 **568.2** / 570.5 / 572.6 / 593.8, at 2^27 **1103.7** / 1103.7 / 1109.3 /
/// 1152.7 (its scatter phase 100 ms instead of 148).
pub const SCATTER_BUCKETS: u32 = 1 << 17;
/// Keys one scatter launch over shared buckets (tables of precomputed windows) writes by
/// default ([`GpuMsmConfig::shared_scatter_keys`]): the keys are split, each launch reading
/// every scalar again. Session 35 on an H100, 2^24 uniform, resident scalars (scatter / MSM,
/// ms; all keys in one launch, then 2^19, 2^18, 2^17 keys a launch): c = 20 (2^20 keys)
/// 12.17 / 109.74, 12.73 / 110.50, **9.46 / 107.19**, 9.55 / 107.40; c = 22 (2^22 keys)
/// 14.83 / 112.98, 13.66 / 111.81, **13.31 / 111.31**, 18.47 / 116.65.
pub const SHARED_SCATTER_KEYS: u32 = 1 << 18;
/// Entries a stream of the affine accumulation takes by default
/// ([`GpuMsmPlan::default_affine_chunk_len`] and its cut to whole waves): each stream's sum
/// costs one more mixed addition at the end, so not fewer than 16.
const AFFINE_STREAM_ENTRIES: std::ops::RangeInclusive<u32> = 16..=64;
/// Most terms one GPU MSM takes (entry indices keep a sign bit; the sorted entries must
/// fit u32 offsets).
pub const GPU_MAX_TERMS: usize = 1 << 28;
/// Entries index bases below 2^31 (bit 31 is the digit's sign): the bound on a table of
/// precomputed windows' W·n points.
const SIGN_BIT_INDEX_LIMIT: usize = 1 << 31;

/// Why a GPU MSM failed.
#[derive(Debug, thiserror::Error)]
pub enum GpuMsmError {
    /// The inputs' shapes are wrong (the same checks as every backend).
    #[error(transparent)]
    Shape(#[from] MsmError),
    /// The device refused or failed (VRAM budget, out of memory, driver error).
    #[error("gpu msm: {0}")]
    Gpu(#[from] GpuError),
    /// A chunk length outside `1..=max`.
    #[error("chunk length {chunk_len} is outside 1..={max}")]
    BadChunkLen {
        /// Requested entries per thread.
        chunk_len: u32,
        /// [`MAX_CHUNK_LEN`].
        max: u32,
    },
    /// Zero windows per scatter launch.
    #[error("windows per scatter launch must be at least 1, got 0")]
    BadScatterWindows,
    /// Zero keys per scatter launch over shared buckets.
    #[error("keys per shared-bucket scatter launch must be at least 1, got 0")]
    BadSharedScatterKeys,
    /// Two-level sort sizes out of range.
    #[error(
        "two-level sort sizes {params:?}: chunk_log must be within 8..=24, bin_entries_log \
         at most 31, place_bins within 1..={max_bins}, sort_shared_kib at most {max_kib}",
        max_bins = TWO_LEVEL_MAX_BINS,
        max_kib = MAX_BLOCK_SHARED >> 10
    )]
    BadTwoLevel {
        /// The sizes asked for.
        params: TwoLevelParams,
    },
    /// More terms than the GPU pipeline indexes.
    #[error("{n_terms} terms exceed the gpu backend's maximum of {max_terms}")]
    TooManyTerms {
        /// Terms requested.
        n_terms: usize,
        /// Largest supported count.
        max_terms: usize,
    },
    /// A configured window size is out of range.
    #[error("window of {window_bits} bits is outside {min_bits}..={max_bits}")]
    BadWindow {
        /// Requested size.
        window_bits: u32,
        /// Smallest allowed.
        min_bits: u32,
        /// Largest allowed.
        max_bits: u32,
    },
    /// Scalars and bases on the device disagree in count.
    #[error("{n_bases} resident bases but {n_scalars} resident scalars")]
    LengthMismatch {
        /// Bases on the device.
        n_bases: usize,
        /// Scalars on the device.
        n_scalars: usize,
    },
    /// A scalar range or selection does not fit the device buffers it reads or writes.
    #[error("{what}: needs {needed} scalars, the device buffer holds {found}")]
    ScalarRange {
        /// Which operation and buffer.
        what: &'static str,
        /// Scalars (end of the range) the operation needs.
        needed: usize,
        /// Scalars the buffer holds.
        found: usize,
    },
    /// A pinned host buffer of bases does not hold a whole number of points.
    #[error("{n_words} pinned words are not a whole number of {words_per_point}-word points")]
    BadPinnedBases {
        /// u32 words in the buffer.
        n_words: usize,
        /// u32 words per affine point of the curve.
        words_per_point: usize,
    },
    /// A device buffer is too short for the bases a view was asked to cover.
    #[error("{n_points} bases need {words_per_point} u32 words each, the device buffer holds {n_limbs} u64 limbs")]
    BadDeviceBases {
        /// Bases asked for.
        n_points: usize,
        /// u64 limbs in the buffer.
        n_limbs: usize,
        /// u32 words per affine point of the curve.
        words_per_point: usize,
    },
    /// Tables of precomputed windows summed over one sort
    /// ([`GpuMsm::msm_precomputed_many`]) differ in window bits or bases a row.
    #[error(
        "tables summed over one sort must share window bits and bases a row: {} bits and \
         {} bases against {} bits and {} bases",
        window_bits[0], n_bases[0], window_bits[1], n_bases[1]
    )]
    TablesDiffer {
        /// Window bits of the first table and of the one that differs.
        window_bits: [u32; 2],
        /// Bases a row of the first table and of the one that differs.
        n_bases: [usize; 2],
    },
    /// A streamed MSM was asked for chunks of no bases.
    #[error("streamed msm chunks must hold at least one base, got {chunk_len}")]
    BadChunk {
        /// Requested bases per chunk.
        chunk_len: usize,
    },
    /// A scalar read back from the device is not reduced below r ([`scalars_from_words`]).
    #[error("scalar {index} read back from the gpu is not reduced below r")]
    NotReduced {
        /// Index of the scalar.
        index: usize,
    },
    /// A window sum read back from the device is not a point in XYZZ coordinates (a
    /// kernel bug).
    #[error("window sum {index} read back from the gpu is invalid: {what}")]
    BadResult {
        /// Index of the window sum.
        index: usize,
        /// What is wrong with it.
        what: &'static str,
    },
}

/// Device time of each pipeline phase, in order: (phase, milliseconds).
pub type PhaseTimes = Vec<(&'static str, f32)>;

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::G1Curve {}
    impl Sealed for super::G2Curve {}
}

/// A curve group the GPU pipeline runs on ([`G1Curve`], [`G2Curve`]): its bls12_381 and
/// bls-repr types, its device layouts and its point kernels. The pipeline
/// ([`GpuMsm::msm_resident`] and friends) is written once over this trait; the scalar
/// kernels (sort by bucket) are the same for both curves. Sealed: kernels exist for these
/// two groups only.
pub trait GpuCurve: sealed::Sealed + std::fmt::Debug + Send + Sync + 'static {
    /// Affine point (bls12_381).
    type Affine: Copy + Send + Sync;
    /// Projective point (bls12_381), the result type.
    type Projective: group::Group + From<Self::Affine>;
    /// The device layout of an affine point (bls-repr, Montgomery, infinity all-zero).
    type Repr: bytemuck::Pod + Send + Sync;
    /// Short name for labels ("g1", "g2").
    const NAME: &'static str;
    /// u32 words of one affine point on the device.
    const AFFINE_WORDS: usize;
    /// u32 words of one XYZZ point on the device (4 coordinates).
    const XYZZ_WORDS: usize;
    /// The accumulation kernel [`AccumulateKernel::Auto`] picks on this curve.
    const DEFAULT_ACCUMULATE: AccumulateKernel;
    /// `<g>_accumulate`.
    const ACCUMULATE: Entry;
    /// `<g>_accumulate_capped`.
    const ACCUMULATE_CAPPED: Entry;
    /// `<g>_accumulate_chunks`.
    const ACCUMULATE_CHUNKS: Entry;
    /// `<g>_accumulate_chunks_capped`, where the curve has one.
    const ACCUMULATE_CHUNKS_CAPPED: Option<Entry>;
    /// `<g>_accumulate_chunks_affine`, where the curve has one.
    const ACCUMULATE_CHUNKS_AFFINE: Option<Entry>;
    /// Streams a thread of `<g>_accumulate_chunks_affine` runs side by side (its template
    /// argument; its chunk length is a multiple of it).
    const AFFINE_STREAMS: u32;
    /// Blocks of 128 threads (the point kernels' block) an SM holds of
    /// `<g>_accumulate_chunks_affine` (its registers' cap; `pinion_kernels` checks it
    /// against the kernel's source).
    const AFFINE_BLOCKS_PER_SM: u32;
    /// From this many windowed terms on, [`AccumulateKernel::Auto`] picks the affine
    /// kernel on this curve; `None`: never.
    const AUTO_AFFINE_FROM: Option<usize>;
    /// `<g>_fixup_groups`.
    const FIXUP_GROUPS: Entry;
    /// `<g>_fixup_buckets`.
    const FIXUP_BUCKETS: Entry;
    /// `<g>_reduce_segments`.
    const REDUCE_SEGMENTS: Entry;
    /// `<g>_reduce_segments_capped`, where the curve has one.
    const REDUCE_SEGMENTS_CAPPED: Option<Entry>;
    /// What [`ReduceKernel::Auto`] runs on this curve.
    const DEFAULT_REDUCE: ReduceKernel;
    /// `<g>_sum_groups`.
    const SUM_GROUPS: Entry;
    /// Window sums read back from the device (XYZZ, `XYZZ_WORDS` u32 words each) as curve
    /// points, with one shared field inversion on the host.
    #[doc(hidden)]
    fn sums_from_xyzz(words: &[u32]) -> Result<Vec<Self::Projective>, GpuMsmError>;
    /// Host to device layout.
    fn to_repr(p: &Self::Affine) -> Self::Repr;
    /// Device layout to host, coordinates checked to be canonical (no curve check: the
    /// GPU's sums are trusted to be on the curve, the tests check them).
    fn from_repr(r: &Self::Repr) -> Result<Self::Affine, ReprError>;
}

/// G1 (coordinates in Fp; kernels `g1_*` in `cuda-kernels/msm.cu`).
#[derive(Clone, Copy, Debug)]
pub enum G1Curve {}

/// G2 (coordinates in Fp2; kernels `g2_*` in `cuda-kernels/msm_g2.cu`).
#[derive(Clone, Copy, Debug)]
pub enum G2Curve {}

impl GpuCurve for G1Curve {
    type Affine = G1Affine;
    type Projective = G1Projective;
    type Repr = G1AffineRepr;
    const NAME: &'static str = "g1";
    const AFFINE_WORDS: usize = 24;
    const XYZZ_WORDS: usize = 48;
    const DEFAULT_ACCUMULATE: AccumulateKernel = AccumulateKernel::ChunkedCapped;
    const ACCUMULATE: Entry = Entry::G1Accumulate;
    const ACCUMULATE_CAPPED: Entry = Entry::G1AccumulateCapped;
    const ACCUMULATE_CHUNKS: Entry = Entry::G1AccumulateChunks;
    const ACCUMULATE_CHUNKS_CAPPED: Option<Entry> = Some(Entry::G1AccumulateChunksCapped);
    const ACCUMULATE_CHUNKS_AFFINE: Option<Entry> = Some(Entry::G1AccumulateChunksAffine);
    const AFFINE_STREAMS: u32 = 64;
    const AFFINE_BLOCKS_PER_SM: u32 = pinion_kernels::G1_AFFINE_BLOCKS_PER_SM;
    const AUTO_AFFINE_FROM: Option<usize> = Some(AFFINE_FROM);
    const FIXUP_GROUPS: Entry = Entry::G1FixupGroups;
    const FIXUP_BUCKETS: Entry = Entry::G1FixupBuckets;
    const REDUCE_SEGMENTS: Entry = Entry::G1ReduceSegments;
    const REDUCE_SEGMENTS_CAPPED: Option<Entry> = Some(Entry::G1ReduceSegmentsCapped);
    const DEFAULT_REDUCE: ReduceKernel = ReduceKernel::Capped;
    const SUM_GROUPS: Entry = Entry::G1SumGroups;
    fn sums_from_xyzz(words: &[u32]) -> Result<Vec<G1Projective>, GpuMsmError> {
        crate::xyzz::xyzz_words_to_curve::<G1Projective>(words).map_err(bad_sum)
    }
    fn to_repr(p: &G1Affine) -> G1AffineRepr {
        G1AffineRepr::from_affine(p)
    }
    fn from_repr(r: &G1AffineRepr) -> Result<G1Affine, ReprError> {
        r.to_affine_unchecked()
    }
}

impl GpuCurve for G2Curve {
    type Affine = G2Affine;
    type Projective = G2Projective;
    type Repr = G2AffineRepr;
    const NAME: &'static str = "g2";
    const AFFINE_WORDS: usize = 48;
    const XYZZ_WORDS: usize = 96;
    // No capped chunked kernel on G2: capped at 128 registers, G2's accumulation spills
    // ~4 KiB per thread (ptxas).
    const DEFAULT_ACCUMULATE: AccumulateKernel = AccumulateKernel::Chunked;
    const ACCUMULATE: Entry = Entry::G2Accumulate;
    const ACCUMULATE_CAPPED: Entry = Entry::G2AccumulateCapped;
    const ACCUMULATE_CHUNKS: Entry = Entry::G2AccumulateChunks;
    const ACCUMULATE_CHUNKS_CAPPED: Option<Entry> = None;
    const ACCUMULATE_CHUNKS_AFFINE: Option<Entry> = Some(Entry::G2AccumulateChunksAffine);
    // 32 streams keep the state at G1's ~22 KB a thread; 64 measured 4% faster at 2^24
    // (312.9 vs 326.3 ms, session 24) for twice the local memory (11.6 GiB on an H200).
    const AFFINE_STREAMS: u32 = 32;
    const AFFINE_BLOCKS_PER_SM: u32 = pinion_kernels::G2_AFFINE_BLOCKS_PER_SM;
    const AUTO_AFFINE_FROM: Option<usize> = Some(G2_AFFINE_FROM);
    const FIXUP_GROUPS: Entry = Entry::G2FixupGroups;
    const FIXUP_BUCKETS: Entry = Entry::G2FixupBuckets;
    const REDUCE_SEGMENTS: Entry = Entry::G2ReduceSegments;
    const REDUCE_SEGMENTS_CAPPED: Option<Entry> = None;
    const DEFAULT_REDUCE: ReduceKernel = ReduceKernel::Uncapped;
    const SUM_GROUPS: Entry = Entry::G2SumGroups;
    fn sums_from_xyzz(words: &[u32]) -> Result<Vec<G2Projective>, GpuMsmError> {
        crate::xyzz::xyzz_words_to_curve::<G2Projective>(words).map_err(bad_sum)
    }
    fn to_repr(p: &G2Affine) -> G2AffineRepr {
        G2AffineRepr::from_affine(p)
    }
    fn from_repr(r: &G2AffineRepr) -> Result<G2Affine, ReprError> {
        r.to_affine_unchecked()
    }
}

fn bad_sum(e: crate::xyzz::XyzzError) -> GpuMsmError {
    use crate::xyzz::XyzzError;
    match e {
        XyzzError::NotReduced { index } => GpuMsmError::BadResult {
            index,
            what: "a coordinate is not a reduced field element",
        },
        XyzzError::ZeroDenominator { index } => GpuMsmError::BadResult {
            index,
            what: "ZZ is not zero but ZZZ is",
        },
    }
}

/// Bases of curve `C` resident on the device (affine, Montgomery, infinity all-zero),
/// charged to the VRAM budget while they live.
#[derive(Debug)]
pub struct DeviceBases<C: GpuCurve> {
    words: DeviceBuffer<u32>,
    n: usize,
    curve: std::marker::PhantomData<C>,
}

/// G1 bases resident on the device.
pub type DeviceBasesG1 = DeviceBases<G1Curve>;
/// G2 bases resident on the device.
pub type DeviceBasesG2 = DeviceBases<G2Curve>;

impl<C: GpuCurve> DeviceBases<C> {
    /// Number of bases.
    pub fn len(&self) -> usize {
        self.n
    }
    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
}

impl<C: GpuCurve> DeviceBases<C> {
    /// A borrowed view of all the bases (what the prefix MSMs read).
    pub fn view(&self) -> DeviceBasesView<'_, C> {
        DeviceBasesView {
            words: self.words.slice().slice(..),
            n: self.n,
            curve: std::marker::PhantomData,
        }
    }
}

/// Bases of curve `C` on the device, borrowed: from [`DeviceBases::view`], or from a
/// buffer another crate owns in bls-repr's layout (`srs-store`'s device tier holds its
/// queries as `DeviceBuffer<u64>`: [`DeviceBasesView::from_limbs`]). MSMs over a view
/// read its first `n` bases, so one resident query serves every circuit that uses a
/// prefix of it.
#[derive(Debug)]
pub struct DeviceBasesView<'a, C: GpuCurve> {
    words: CudaView<'a, u32>,
    n: usize,
    curve: std::marker::PhantomData<C>,
}

impl<'a, C: GpuCurve> DeviceBasesView<'a, C> {
    /// `n_points` bases of `C` held in `buffer` as 64-bit limbs (bls-repr's layout, the
    /// same bytes as `C::AFFINE_WORDS` u32 words per point); the buffer must hold at
    /// least that many.
    pub fn from_limbs(
        buffer: &'a DeviceBuffer<u64>,
        n_points: usize,
    ) -> Result<DeviceBasesView<'a, C>, GpuMsmError> {
        let words = n_points
            .checked_mul(C::AFFINE_WORDS)
            .filter(|w| w.div_ceil(2) <= buffer.len())
            .ok_or(GpuMsmError::BadDeviceBases {
                n_points,
                n_limbs: buffer.len(),
                words_per_point: C::AFFINE_WORDS,
            })?;
        // SAFETY: u64 and u32 are plain integers and the device buffer is at least 8-byte
        // aligned, so the first `words` u32 words of the buffer's bytes are valid u32s;
        // `words <= 2 * buffer.len()` was checked above, so the view stays inside it.
        let view = unsafe { buffer.slice().transmute::<u32>(words) }.ok_or(
            GpuMsmError::BadDeviceBases {
                n_points,
                n_limbs: buffer.len(),
                words_per_point: C::AFFINE_WORDS,
            },
        )?;
        Ok(DeviceBasesView {
            words: view,
            n: n_points,
            curve: std::marker::PhantomData,
        })
    }

    /// Number of bases.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The bases from index `first` on (a query's aux part after its inputs), or `None`
    /// when the view holds fewer than `first`.
    pub fn skip(&self, first: usize) -> Option<DeviceBasesView<'a, C>> {
        let n = self.n.checked_sub(first)?;
        Some(DeviceBasesView {
            words: self.words.slice(first * C::AFFINE_WORDS..),
            n,
            curve: std::marker::PhantomData,
        })
    }
}

/// Fixed G1 bases with their windows precomputed on the device
/// ([`GpuMsm::precompute_windows_g1`]): row w holds 2^(c·w)·P_i for every base, W =
/// ⌈256 / c⌉ rows, so that an MSM over them ([`GpuMsm::msm_g1_precomputed`]) puts every
/// window's digits into one shared set of buckets. W times the bases' memory (charged to
/// the VRAM budget while this lives), in exchange for one bucket reduction instead of W
/// and no doublings between windows, which makes wider windows (fewer of them: fewer
/// additions) pay.
#[derive(Debug)]
pub struct PrecomputedBases<C: GpuCurve> {
    table: DeviceBuffer<u32>,
    n: usize,
    window_bits: u32,
    n_windows: u32,
    curve: std::marker::PhantomData<C>,
}

/// G1 bases with precomputed windows.
pub type PrecomputedBasesG1 = PrecomputedBases<G1Curve>;

impl<C: GpuCurve> PrecomputedBases<C> {
    /// Number of bases (scalars an MSM over them may take at most).
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Window bits c.
    pub fn window_bits(&self) -> u32 {
        self.window_bits
    }

    /// Rows of the table (W, one per window).
    pub fn n_windows(&self) -> u32 {
        self.n_windows
    }

    /// Device bytes the table holds (W times the bases).
    pub fn device_bytes(&self) -> u64 {
        (self.table.len() * 4) as u64
    }
}

/// An MSM over a table of precomputed windows: window bits, bases per row.
#[derive(Clone, Copy, Debug)]
struct SharedWindows {
    window_bits: u32,
    stride: u32,
}

/// Bases of curve `C` in pinned (page-locked) host memory, in bls-repr's layout, for
/// [`GpuMsm::msm_streamed`]: the host keeps them and each MSM streams them to the device
/// in chunks. The buffer's reservation charges the host budget for them.
#[derive(Debug)]
pub struct PinnedBases<C: GpuCurve> {
    words: PinnedBuffer<u32>,
    n: usize,
    curve: std::marker::PhantomData<C>,
}

impl<C: GpuCurve> PinnedBases<C> {
    /// Takes a pinned buffer (from [`Gpu::alloc_pinned`]) of `n · C::AFFINE_WORDS` words;
    /// fill it through [`PinnedBases::reprs_mut`].
    pub fn from_words(words: PinnedBuffer<u32>) -> Result<PinnedBases<C>, GpuMsmError> {
        if words.len() % C::AFFINE_WORDS != 0 {
            return Err(GpuMsmError::BadPinnedBases {
                n_words: words.len(),
                words_per_point: C::AFFINE_WORDS,
            });
        }
        let n = words.len() / C::AFFINE_WORDS;
        Ok(PinnedBases {
            words,
            n,
            curve: std::marker::PhantomData,
        })
    }

    /// The bases, writable (after any copy queued from them has finished).
    pub fn reprs_mut(&mut self) -> Result<&mut [C::Repr], GpuMsmError> {
        let words = self.words.as_mut_slice()?;
        // Pinned allocations are page-aligned, so the cast only fails on a bug.
        bytemuck::try_cast_slice_mut(words).map_err(|_| GpuMsmError::BadPinnedBases {
            n_words: self.n * C::AFFINE_WORDS,
            words_per_point: C::AFFINE_WORDS,
        })
    }

    /// Number of bases.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
}

/// Scalars resident on the device, canonical little-endian (8 u32 words each).
#[derive(Debug)]
pub struct DeviceScalars {
    words: DeviceBuffer<u32>,
    n: usize,
}

impl DeviceScalars {
    /// Number of scalars.
    pub fn len(&self) -> usize {
        self.n
    }
    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
    /// The device words (8 per scalar), e.g. as the destination of a pinned-host copy of
    /// canonical scalar words made by [`scalars_to_words`].
    pub fn words_mut(&mut self) -> &mut DeviceBuffer<u32> {
        &mut self.words
    }
    /// The device words (8 per scalar), e.g. to read them back.
    pub fn words(&self) -> &DeviceBuffer<u32> {
        &self.words
    }
    /// Keeps the first `n` scalars (at most [`DeviceScalars::len`]); the buffer stays, so
    /// a prefix of a longer array can be summed without a copy.
    pub fn truncate(&mut self, n: usize) {
        self.n = self.n.min(n);
    }
}

/// A density mask on the device ([`GpuMsm::upload_mask`]): its bits, and for each 64-bit
/// word the number of set bits in the words before it, so that a kernel knows where each
/// selected scalar goes.
#[derive(Debug)]
pub struct DeviceMask {
    words: DeviceBuffer<u64>,
    offsets: DeviceBuffer<u32>,
    len: usize,
    ones: usize,
}

impl DeviceMask {
    /// Number of bits.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether it has no bits.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Number of set bits.
    pub fn count_ones(&self) -> usize {
        self.ones
    }
}

/// Words of a device mask of the first `len` bits of `mask`: one at least, so that an
/// empty mask is still a valid allocation.
fn mask_words_len(len: usize) -> usize {
    len.div_ceil(64).max(1)
}

/// Writes the words of the first `len` bits of `mask` into `out` (`mask_words_len(len)`
/// of them): the last one cut at `len`, zero past the mask's words.
fn cut_mask_words(mask: &DensityMask, len: usize, out: &mut [u64]) {
    let src = mask.words();
    let full = len / 64;
    out[..full].copy_from_slice(&src[..full]);
    out[full..].fill(0);
    if len % 64 != 0 {
        out[full] = src[full] & ((1u64 << (len % 64)) - 1);
    }
}

/// Writes each word's count of set bits in the words before it (exclusive prefix sums)
/// into `out` (one per word); returns the total.
fn word_offsets_into(words: &[u64], out: &mut [u32]) -> usize {
    let mut total = 0usize;
    for (o, w) in out.iter_mut().zip(words) {
        *o = total as u32;
        total += w.count_ones() as usize;
    }
    total
}

/// Which bucket-accumulation kernel to run (same results; a tuning choice).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AccumulateKernel {
    /// The curve's default ([`GpuCurve::DEFAULT_ACCUMULATE`]): [`Self::ChunkedCapped`] on
    /// G1, [`Self::Chunked`] on G2; from [`GpuCurve::AUTO_AFFINE_FROM`] windowed terms
    /// [`Self::ChunkedAffine`], unless the VRAM budget cannot take its local memory
    /// ([`GpuMsm::accumulate_kernel`]).
    #[default]
    Auto,
    /// Registers as the compiler likes. G1: 142 on sm_90, no spills (3 blocks of 128
    /// threads per SM). G2: 255 and 244 bytes of spills (2 blocks per SM).
    Uncapped,
    /// Registers capped at 128 (4 blocks per SM). G1: 68 bytes of spills, measured 4-5%
    /// faster than uncapped on the H200 at 2^18 and 2^20 (11.31 vs 11.73 ms, 21.19 vs
    /// 22.34 ms, scalars resident, median of 3). G2: about 4 KiB of spills per thread
    /// (ptxas), so not G2's default; not measured on G2 yet.
    Capped128,
    /// One thread per [`GpuMsmConfig::chunk_len`] consecutive sorted entries instead of one
    /// per bucket, then two fix-up launches for the buckets that cross chunk boundaries:
    /// every thread adds the same number of points, so no warp waits for its longest
    /// bucket and a bucket of many equal digits is spread over many threads.
    Chunked,
    /// [`Self::Chunked`] with registers capped at 128 (G1 only; G2 runs [`Self::Chunked`]).
    ChunkedCapped,
    /// [`Self::Chunked`] in affine coordinates: each thread runs
    /// [`GpuCurve::AFFINE_STREAMS`] streams of its chunk side by side (64 on G1, 32 on G2)
    /// and adds their next points with one shared inversion (a binary GCD), about 6 field
    /// products an addition instead of 10. The chunk length is rounded up to a multiple of
    /// the streams; by default [`GpuMsmPlan::default_affine_chunk_len`], cut to fill whole
    /// waves of the device's threads when that launches fewer than three, the last one
    /// badly filled (at 2^24 over 20- or 22-bit tables: one wave). The streams' state
    /// is ~22 KB of local memory a thread on either curve, which the driver reserves for
    /// every thread the device holds (5.4 GiB beyond the initial stack on an H200): charged
    /// to the VRAM budget before its first launch ([`Gpu::reserve_local_memory`]).
    /// [`Self::Auto`]'s pick from [`GpuCurve::AUTO_AFFINE_FROM`] windowed terms. (Session
    /// 19's version read each point twice and ran 3 blocks an SM: 3-6% slower than XYZZ
    /// then.)
    ChunkedAffine,
}

/// [`GpuMsm::accumulate_kernel`]'s rule: `configured` on curve `C`, or for
/// [`AccumulateKernel::Auto`] the affine kernel from [`GpuCurve::AUTO_AFFINE_FROM`]
/// windowed terms on.
fn pick_accumulate<C: GpuCurve>(
    configured: AccumulateKernel,
    n_windowed: usize,
) -> AccumulateKernel {
    match configured {
        AccumulateKernel::Auto
            if C::ACCUMULATE_CHUNKS_AFFINE.is_some()
                && C::AUTO_AFFINE_FROM.is_some_and(|from| n_windowed >= from) =>
        {
            AccumulateKernel::ChunkedAffine
        }
        other => other.resolve::<C>(),
    }
}

impl AccumulateKernel {
    /// Every choice but [`Self::Auto`].
    pub const ALL: [AccumulateKernel; 5] = [
        AccumulateKernel::Uncapped,
        AccumulateKernel::Capped128,
        AccumulateKernel::Chunked,
        AccumulateKernel::ChunkedCapped,
        AccumulateKernel::ChunkedAffine,
    ];

    /// The kernel this choice names on curve `C` (never [`Self::Auto`], which resolves to the
    /// curve's default; the size-dependent pick a run makes is [`GpuMsm::accumulate_kernel`]);
    /// [`Self::ChunkedCapped`] and [`Self::ChunkedAffine`] run [`Self::Chunked`] on a curve
    /// without them.
    pub fn resolve<C: GpuCurve>(self) -> AccumulateKernel {
        match self {
            AccumulateKernel::Auto => C::DEFAULT_ACCUMULATE.resolve::<C>(),
            AccumulateKernel::ChunkedCapped if C::ACCUMULATE_CHUNKS_CAPPED.is_none() => {
                AccumulateKernel::Chunked
            }
            AccumulateKernel::ChunkedAffine if C::ACCUMULATE_CHUNKS_AFFINE.is_none() => {
                AccumulateKernel::Chunked
            }
            other => other,
        }
    }

    /// Whether this choice runs the chunked kernels ([`Self::Chunked`],
    /// [`Self::ChunkedCapped`]; [`Self::Auto`] counts as not chunked: resolve it first).
    pub fn is_chunked(self) -> bool {
        !matches!(
            self,
            AccumulateKernel::Auto | AccumulateKernel::Uncapped | AccumulateKernel::Capped128
        )
    }
}

/// Which bucket-reduction kernel to run, and so how many segments a window's buckets are
/// cut into (same results; a tuning choice).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReduceKernel {
    /// The curve's default ([`GpuCurve::DEFAULT_REDUCE`]).
    #[default]
    Auto,
    /// Registers as the compiler likes (G1: 254, 2 blocks of 128 per SM), at most
    /// [`MAX_SEGMENTS`] segments per window: 17 x 1024 threads fit one wave.
    Uncapped,
    /// G1 only (other curves run [`Self::Uncapped`]): registers capped for 3 blocks per
    /// SM (168, some spills), at most [`MAX_SEGMENTS_CAPPED`] segments per window: twice
    /// the threads, each with half the buckets, still one wave.
    Capped,
}

impl ReduceKernel {
    /// The kernel this choice runs on curve `C` (never [`Self::Auto`]).
    pub fn resolve<C: GpuCurve>(self) -> ReduceKernel {
        match self {
            ReduceKernel::Auto => C::DEFAULT_REDUCE.resolve::<C>(),
            ReduceKernel::Capped if C::REDUCE_SEGMENTS_CAPPED.is_none() => ReduceKernel::Uncapped,
            other => other,
        }
    }

    /// Segments per window for `n_buckets` buckets per window.
    fn segments(self, n_buckets: u32) -> u32 {
        match self {
            ReduceKernel::Capped => n_buckets.min(MAX_SEGMENTS_CAPPED),
            _ => n_buckets.min(MAX_SEGMENTS),
        }
    }
}

/// Configuration of the GPU backend.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GpuMsmConfig {
    /// Window size in bits; `None` picks one from the number of terms.
    pub window_bits: Option<u32>,
    /// Bucket-accumulation kernel.
    pub accumulate: AccumulateKernel,
    /// Bucket-reduction kernel.
    pub reduce: ReduceKernel,
    /// Sorted entries per thread of the chunked accumulations ([`AccumulateKernel::Chunked`]
    /// and its variants, the affine one rounding it up to a multiple of
    /// [`GpuCurve::AFFINE_STREAMS`],
    /// also when [`AccumulateKernel::Auto`] picks it); `None` is
    /// [`GpuMsmPlan::default_chunk_len`], or [`GpuMsmPlan::default_affine_chunk_len`] for the
    /// affine kernel, cut to fill whole waves of the device where it fills them badly
    /// ([`AccumulateKernel::ChunkedAffine`]).
    pub chunk_len: Option<u32>,
    /// Windows whose entries one scatter launch writes (the ones window counts as one);
    /// `None`: as many as keep [`SCATTER_BUCKETS`] buckets or fewer per launch.
    pub scatter_windows: Option<u32>,
    /// Over tables of precomputed windows (one shared set of buckets for every window):
    /// keys one scatter launch writes at most, each launch reading every scalar again;
    /// `None`: [`SHARED_SCATTER_KEYS`] (`Some(u32::MAX)`: all keys in one launch).
    pub shared_scatter_keys: Option<u32>,
    /// Over tables of precomputed windows: which scatter launches write the ones' keys
    /// (the second half of the shared keys); [`OnesScatter::WithLast`] by default.
    pub shared_scatter_ones: OnesScatter,
    /// How the scalars' digits are sorted by bucket (same entries; [`SortKind::Auto`] by
    /// default). Tables of precomputed windows always use the counting sort.
    pub sort: SortKind,
    /// The two-level sort's block and bin sizes (used with [`SortKind::TwoLevel`]).
    pub two_level: TwoLevelParams,
}

/// Which scatter launches write the ones' keys of an MSM over shared buckets (tables of
/// precomputed windows: keys `[0, B)` take every window's digits, `[B, 2B)` the scalars
/// equal to one, key `B + (i mod B)` for term `i`, so that a launch's ones fill a few
/// consecutive keys at a time whatever their number). Each launch reads every scalar
/// again; uniform scalars have almost no ones, Groth16's many.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnesScatter {
    /// All `2B` keys split evenly, [`GpuMsmConfig::shared_scatter_keys`] a launch: half
    /// the launches write only ones (session 35's rule).
    Split,
    /// The digits' keys split, the last of their launches also writing every one (the
    /// default: half the launches of `Split`). Session 36 on an H100, 2^24, 2^18 keys a
    /// launch, scatter phase against `Split` (ms): c = 22 uniform 13.32 -> 9.10,
    /// Groth16-shaped 9.35 -> 5.28; c = 20 9.47 -> 8.35 and 4.75 -> 4.08 (`Alone`
    /// 9.62, 5.62, 8.91, 4.19).
    #[default]
    WithLast,
    /// The digits' keys split, then one launch for all the ones.
    Alone,
}

/// The sizes of the two-level sort ([`SortKind::TwoLevel`]); checked by
/// [`GpuMsm::with_config`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TwoLevelParams {
    /// Scalars one block of the count and place passes takes, log2 (8..=24).
    pub chunk_log: u32,
    /// Entries a bin holds on average, at most, log2 (0..=31; see
    /// [`GpuMsmPlan::two_level_fine_log`]).
    pub bin_entries_log: u32,
    /// Bins one `msm_bin_place` launch fills, at most (1..=[`TWO_LEVEL_MAX_BINS`]): windows
    /// are placed a few a launch, so that the (block, bin) runs being filled stay few.
    pub place_bins: u32,
    /// Whether a place block stages its entries in shared memory in bin order and writes
    /// each run out in one coalesced store (`msm_bin_place_staged`; its blocks take the
    /// largest power-of-two part of `2^chunk_log` scalars whose staging fits, and its
    /// launches as many windows as fit). On an H100 (session 33) this made the two-level
    /// sort faster than the counting sort at 2^26.
    pub staged: bool,
    /// Dynamic shared memory a `msm_bin_sort` block asks for at least, in KiB (0..=227):
    /// 116 makes one block hold an SM (few bins' ranges of `entries` filled at once, which
    /// L2 then holds); less lets two or more share one.
    pub sort_shared_kib: u32,
}

/// The sizes measured fastest of those swept on an H100 (session 33, G1 at 2^24 and 2^26:
/// chunks of 2^12 or 2^13 scalars, bins of 2^16 or 2^18 entries, 2048 or 4096 bins a
/// place launch, staged, 56 or 116 KiB a bin-sort block; the unstaged sizes in session 32).
impl Default for TwoLevelParams {
    fn default() -> Self {
        TwoLevelParams {
            chunk_log: 12,
            bin_entries_log: 16,
            place_bins: 4096,
            staged: true,
            sort_shared_kib: 116,
        }
    }
}

impl TwoLevelParams {
    /// `Ok` when every size is within its documented range, else
    /// [`GpuMsmError::BadTwoLevel`].
    pub fn check(&self) -> Result<(), GpuMsmError> {
        if (8..=24).contains(&self.chunk_log)
            && self.bin_entries_log <= 31
            && (1..=TWO_LEVEL_MAX_BINS).contains(&self.place_bins)
            && u64::from(self.sort_shared_kib) << 10 <= u64::from(MAX_BLOCK_SHARED)
        {
            Ok(())
        } else {
            Err(GpuMsmError::BadTwoLevel { params: *self })
        }
    }
}

/// Most bins of the two-level sort: their counters fill a block's shared memory (192 KB
/// of the 227 KB an sm_90 block may ask for).
pub const TWO_LEVEL_MAX_BINS: u32 = 48 << 10;

/// How the pipeline sorts the scalars' digits by bucket key: the same entries, offsets and
/// counts either way (a tuning choice).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SortKind {
    /// [`Self::TwoLevel`] for windows of [`TWO_LEVEL_FROM_BITS`] bits or more when its extra
    /// scratch (6 bytes an entry) is at most half of what the VRAM budget has free and the
    /// budget grants it, else [`Self::Counting`] (the default).
    /// Measured on an H100 (session 33, staged place, the default [`TwoLevelParams`]): G1 at
    /// 2^26 (c = 20) 404.9 against 434.2 ms with the scalars resident; at c = 16 the two
    /// sorts were within 3% of each other either way (2^24 uniform 115.8 / 119.1 ms, 2^26
    /// Groth16-shaped 206.5 / 201.7 ms), so smaller windows keep the counting sort.
    #[default]
    Auto,
    /// Count, scan, scatter: one global atomic per entry in the count and another in the
    /// scatter, the scatter in launches of a few windows.
    Counting,
    /// Keys in bins of [`GpuMsmPlan::two_level_fine_log`] bits: each block counts and places
    /// its scalars' digits per bin with one global atomic per bin, then one block a bin
    /// sorts the bin in key order (`msm_bin_count`, `msm_bin_place` or
    /// `msm_bin_place_staged`, `msm_bin_sort`). Device scratch: 6 bytes an entry more than
    /// [`Self::Counting`] while it sorts. Built from Nsight Compute's profile of the
    /// counting sort (cuda-kernels/NOTES.md, "A two-level sort").
    TwoLevel,
}

/// Window bits from which [`SortKind::Auto`] sorts with [`SortKind::TwoLevel`] (the
/// default windows reach them from [`LARGE_WINDOW_FROM`] scalars, c = 20).
pub const TWO_LEVEL_FROM_BITS: u32 = 17;

/// The two-level sort's device scratch, allocated before it starts (so that
/// [`SortKind::Auto`] can keep the counting sort when the budget refuses it).
struct TwoLevelScratch {
    fine_log: u32,
    n_bins: u32,
    bin_counts: DeviceBuffer<u32>,
    bin_offsets: DeviceBuffer<u32>,
    bin_cursors: DeviceBuffer<u32>,
    tmp_entries: DeviceBuffer<u32>,
    tmp_low: DeviceBuffer<u16>,
}

/// Threads per block of the two-level sort's passes.
const BIN_THREADS: u32 = 1024;
/// Widest bins of the two-level sort, in bits of keys: a `msm_bin_sort` block's 2^15 key
/// counters and its threads' sums take 132 KB of shared memory (of the 227 KB an sm_90
/// block may ask for).
const MAX_BIN_KEYS_LOG: u32 = 15;
/// Shared memory a `msm_bin_sort` block needs for bins of `2^fine_log` keys: a counter a
/// key and a partial sum a thread.
fn bin_sort_shared_bytes(fine_log: u32) -> u32 {
    4 * ((1u32 << fine_log) + BIN_THREADS)
}
/// Most dynamic shared memory an sm_90 block may ask for.
const MAX_BLOCK_SHARED: u32 = 227 << 10;

/// Dynamic shared memory of a `msm_bin_place_staged` block of `chunk` scalars placing
/// `windows` windows of `bins_per_window` bins: three words a bin (count, local base, run),
/// a word a thread (the scan), two words a staged digit.
fn staged_place_shared_bytes(chunk: u32, bins_per_window: u32, windows: u32) -> u32 {
    let words = 3 * u64::from(bins_per_window) * u64::from(windows)
        + u64::from(BIN_THREADS)
        + 2 * u64::from(chunk) * u64::from(windows);
    u32::try_from(4 * words).unwrap_or(u32::MAX)
}

/// The staged place's (scalars a block, windows a launch): the chunk halved until one
/// window's staging fits a block's shared memory, then as many windows (at most
/// `max_windows`) as fit; `None` when not even one scalar's fits, or when a launch's bins
/// would not fit the staged keys' 16 bits (the caller then places unstaged).
fn staged_place_shape(chunk: u32, bins_per_window: u32, max_windows: u32) -> Option<(u32, u32)> {
    let mut place_chunk = chunk;
    while staged_place_shared_bytes(place_chunk, bins_per_window, 1) > MAX_BLOCK_SHARED {
        if place_chunk == 1 {
            return None;
        }
        place_chunk /= 2;
    }
    let mut windows = 1;
    while windows < max_windows
        && staged_place_shared_bytes(place_chunk, bins_per_window, windows + 1) <= MAX_BLOCK_SHARED
        && u64::from(windows + 1) * u64::from(bins_per_window) <= 1 << 16
    {
        windows += 1;
    }
    (u64::from(bins_per_window) <= 1 << 16).then_some((place_chunk, windows))
}

/// The CUDA MSM engine on one device.
#[derive(Clone, Debug)]
pub struct GpuMsm {
    gpu: Gpu,
    config: GpuMsmConfig,
}

/// Window parameters of one MSM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuMsmPlan {
    /// Window bits c.
    pub window_bits: u32,
    /// Signed-digit windows W (the ones window is extra).
    pub n_windows: u32,
    /// Buckets per window, 2^(c-1).
    pub n_buckets: u32,
    /// Bucket keys, (W + 1)·2^(c-1).
    pub n_keys: u32,
    /// Segments per window in the bucket reduction.
    pub n_segments: u32,
}

impl GpuMsmPlan {
    /// The plan for `n` terms with window size `c`.
    pub fn new(c: u32) -> GpuMsmPlan {
        let n_windows = 256u32.div_ceil(c);
        let n_buckets = 1u32 << (c - 1);
        GpuMsmPlan {
            window_bits: c,
            n_windows,
            n_buckets,
            n_keys: (n_windows + 1) * n_buckets,
            n_segments: n_buckets.min(MAX_SEGMENTS),
        }
    }

    /// The plan of an MSM over precomputed windows of `c` bits ([`PrecomputedBases`]): the
    /// same W digits, but one set of 2^(c-1) buckets for all of them and the ones' set, so
    /// 2·2^(c-1) keys.
    fn shared(c: u32) -> GpuMsmPlan {
        let plan = GpuMsmPlan::new(c);
        GpuMsmPlan {
            n_keys: 2 * plan.n_buckets,
            n_segments: plan.n_buckets.min(SHARED_SEGMENTS),
            ..plan
        }
    }

    /// The default chunk of the chunked accumulation for `n` terms under this plan: about
    /// 2^17 chunks of the at most `W·n` entries (enough threads to fill the GPU, no more),
    /// a power of two in [`MIN_DEFAULT_CHUNK_LEN`]`..=`[`MAX_DEFAULT_CHUNK_LEN`]. Measured
    /// on the H200 (session 9, chunks of 16..1024 entries, best within 2% of this rule's
    /// pick at every size): 2^14 / 2^16 (c = 13) best at 32, 2^18 at 32-64, 2^20 at 64-256,
    /// 2^22 at 128-512, 2^24 and 2^26 at 512 (2^26: 772 / 665 / 634 ms at 128 / 256 / 512).
    pub fn default_chunk_len(&self, n: usize) -> u32 {
        let entries = n.saturating_mul(self.n_windows as usize);
        let len = (entries / TARGET_CHUNKS).max(1).next_power_of_two();
        len.clamp(
            MIN_DEFAULT_CHUNK_LEN as usize,
            MAX_DEFAULT_CHUNK_LEN as usize,
        ) as u32
    }

    /// The default chunk of [`AccumulateKernel::ChunkedAffine`] for `n` terms: four times
    /// [`Self::default_chunk_len`], within 16..=64 entries a stream (each stream's sum costs
    /// one more mixed addition at the end). Measured on the H200 (session 23, window 20, 64
    /// streams, same call): 2^26 at chunks of 512 / 2048 436.4 / 401.6 ms, 2^24 130.4 /
    /// 128.7 ms; session 23's first call (the kernel's products inlined) 2^26 at 2048 / 4096
    /// 513.1 / 528.1 ms.
    pub fn default_affine_chunk_len<C: GpuCurve>(&self, n: usize) -> u32 {
        (4 * self.default_chunk_len(n)).clamp(
            AFFINE_STREAM_ENTRIES.start() * C::AFFINE_STREAMS,
            AFFINE_STREAM_ENTRIES.end() * C::AFFINE_STREAMS,
        )
    }

    /// The two-level sort's bin width in bits (bins of `2^fine_log` consecutive keys) for
    /// `n_entries` entries over this plan's keys: bins of about `2^bin_entries_log`
    /// entries ([`TwoLevelParams`]), at most 15 bits of keys (a sort
    /// block's shared counters; the low bits travel as u16) and at most
    /// [`TWO_LEVEL_MAX_BINS`] bins (a count block's).
    pub fn two_level_fine_log(&self, n_entries: usize, bin_entries_log: u32) -> u32 {
        let per_key = (n_entries as f64 / f64::from(self.n_keys)).max(1.0 / 65536.0);
        let want = ((1u64 << bin_entries_log.min(31)) as f64 / per_key)
            .log2()
            .floor()
            .max(0.0) as u32;
        let mut fine_log = want.min(MAX_BIN_KEYS_LOG);
        while (self.n_keys >> fine_log) > TWO_LEVEL_MAX_BINS && fine_log < MAX_BIN_KEYS_LOG {
            fine_log += 1;
        }
        // No bin spans two windows (the place launches take whole windows).
        fine_log.min(self.window_bits - 1)
    }

    /// The default window size for `n` terms taking windows: 8 up to 2^12 terms, 13 below
    /// 2^17, 16 below [`LARGE_WINDOW_FROM`], else 20 (whose top window holds bits 240..255).
    /// With the chunked accumulation (session 9, H200, best chunk each): 2^16 4.69 ms with
    /// c = 13 against 5.63 with c = 16, 2^18 7.78 against 7.09. (With one thread per bucket
    /// c = 16 had won at 2^16, 6.6 against 8.8 ms: c = 13's 4096 buckets per window hold 16
    /// entries each, and a warp waits for its longest.)
    ///
    /// Only sizes whose top window still spans most of its bits are used (c = 8, 13, 16:
    /// the top window holds scalar bits 248..255, 247..255, 240..255). With c = 14, say,
    /// the top window holds bits 252..254 only, so all n top digits fall into 8 buckets and
    /// the one thread per bucket adds n/8 points in a row: measured on the H200 at 2^16,
    /// c = 14 took 134 ms and c = 13 10.7 ms; at 2^20, c = 15 took 4.4 s and c = 16 21 ms.
    /// The chunked accumulation does not serialise on such buckets, but larger windows
    /// still lost there (session 9, H200, chunked: c = 18 / 20 against 16 at 2^20 22.0 /
    /// 33.9 vs 15.0 ms, at 2^22 54.4 / 59.8 vs 46.5 ms): more buckets to reduce and hold.
    pub fn default_window_bits(n: usize) -> u32 {
        if n <= 1 << 12 {
            8
        } else if n < 1 << 17 {
            13
        } else if n < LARGE_WINDOW_FROM {
            16
        } else {
            20
        }
    }
}

/// Scalars per parallel task of [`select_scalar_words_into`] (64 mask words: tasks split
/// the mask at word boundaries).
const SELECT_BLOCK: usize = 4096;

/// The canonical little-endian u32 words of one scalar (0 and 1, most of a Groth16
/// witness, without a Montgomery reduction: see `FrRepr::to_canonical_limbs`).
#[inline]
fn scalar_words(s: &Scalar) -> [u32; SCALAR_WORDS] {
    let limbs = FrRepr::from_scalar(s).to_canonical_limbs();
    std::array::from_fn(|i| (limbs[i / 2] >> (32 * (i % 2))) as u32)
}

/// Canonical little-endian u32 words of each scalar (8 per scalar), in parallel.
pub fn scalars_to_words(scalars: &[Scalar]) -> Vec<u32> {
    let mut words = vec![0u32; scalars.len() * SCALAR_WORDS];
    select_scalar_words_into(&mut words, scalars, None);
    words
}

/// Scalars from their canonical little-endian words (8 per scalar, the layout of
/// [`DeviceScalars`], e.g. read back with `Gpu::copy_prefix_to_host`), in parallel: the
/// inverse of [`scalars_to_words`]. A value not reduced below r is
/// [`GpuMsmError::NotReduced`] naming the first such index.
pub fn scalars_from_words(words: &[[u32; SCALAR_WORDS]]) -> Result<Vec<Scalar>, GpuMsmError> {
    words
        .par_iter()
        .enumerate()
        .map(|(index, w)| {
            let limbs: [u64; 4] =
                std::array::from_fn(|i| u64::from(w[2 * i]) | (u64::from(w[2 * i + 1]) << 32));
            FrRepr::from_canonical_limbs(limbs)
                .and_then(|r| r.to_scalar())
                .map_err(|_| GpuMsmError::NotReduced { index })
        })
        .collect()
}

/// Writes into the start of `out` the canonical little-endian words (8 per scalar, the
/// layout of [`DeviceScalars`]) of the scalars whose bit is set in `mask` (all of them
/// without a mask), in order, converted and filtered in parallel; returns how many.
/// Scalar `i` is kept when `mask.get(i)`; scalars past the mask's end are dropped and bits
/// past the scalars ignored. `out` must have room for every kept scalar (size it from the
/// mask's count); words past them are left as they were. For example the staging of a
/// Groth16 query straight into a pinned buffer, parts one after another.
///
/// # Panics
/// When `out` is shorter than the kept scalars' words.
pub fn select_scalar_words_into(
    out: &mut [u32],
    scalars: &[Scalar],
    mask: Option<&DensityMask>,
) -> usize {
    let Some(mask) = mask else {
        out[..SCALAR_WORDS * scalars.len()]
            .par_chunks_mut(SCALAR_WORDS * SELECT_BLOCK)
            .zip(scalars.par_chunks(SELECT_BLOCK))
            .for_each(|(o, s)| {
                for (o, s) in o.chunks_exact_mut(SCALAR_WORDS).zip(s) {
                    o.copy_from_slice(&scalar_words(s));
                }
            });
        return scalars.len();
    };
    let n = scalars.len().min(mask.len());
    let mask_words = &mask.words()[..n.div_ceil(64)];
    // Mask word `k` restricted to the first `n` scalars.
    let bits = |k: usize| -> u64 {
        let valid = n - 64 * k;
        if valid >= 64 {
            mask_words[k]
        } else {
            mask_words[k] & ((1u64 << valid) - 1)
        }
    };
    let words_per_block = SELECT_BLOCK / 64;
    let n_blocks = mask_words.len().div_ceil(words_per_block);
    let block_words =
        |b: usize| b * words_per_block..((b + 1) * words_per_block).min(mask_words.len());
    let counts: Vec<usize> = (0..n_blocks)
        .into_par_iter()
        .map(|b| block_words(b).map(|k| bits(k).count_ones() as usize).sum())
        .collect();
    let total: usize = counts.iter().sum();
    // Each block writes its own slice of the output, sized by its count.
    let mut outs = Vec::with_capacity(n_blocks);
    let mut rest = &mut out[..total * SCALAR_WORDS];
    for &count in &counts {
        let (head, tail) = rest.split_at_mut(count * SCALAR_WORDS);
        outs.push(head);
        rest = tail;
    }
    outs.into_par_iter().enumerate().for_each(|(b, dst)| {
        let mut pos = 0;
        for k in block_words(b) {
            let mut w = bits(k);
            while w != 0 {
                let i = 64 * k + w.trailing_zeros() as usize;
                dst[pos..pos + SCALAR_WORDS].copy_from_slice(&scalar_words(&scalars[i]));
                pos += SCALAR_WORDS;
                w &= w - 1;
            }
        }
    });
    total
}

/// Canonical words of the scalars a mask selects (all of them without a mask).
fn selected_words(scalars: &[Scalar], density: Option<&DensityMask>) -> Vec<u32> {
    let most = density.map_or(scalars.len(), |m| m.count_ones().min(scalars.len()));
    let mut words = vec![0u32; most * SCALAR_WORDS];
    let kept = select_scalar_words_into(&mut words, scalars, density);
    words.truncate(kept * SCALAR_WORDS);
    words
}

fn check_terms(n_terms: usize) -> Result<(), GpuMsmError> {
    if n_terms > GPU_MAX_TERMS {
        return Err(GpuMsmError::TooManyTerms {
            n_terms,
            max_terms: GPU_MAX_TERMS,
        });
    }
    Ok(())
}

fn grid(n: u32, block: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (n.div_ceil(block).max(1), 1, 1),
        block_dim: (block, 1, 1),
        shared_mem_bytes: 0,
    }
}

fn driver(call: &'static str) -> impl Fn(cudarc::driver::DriverError) -> GpuMsmError {
    move |code| GpuMsmError::Gpu(GpuError::Driver { call, code })
}

fn launch_err(e: cudarc::driver::DriverError) -> GpuMsmError {
    driver("cuLaunchKernel")(e)
}

impl GpuMsm {
    /// An engine on `gpu` with the default configuration.
    pub fn new(gpu: Gpu) -> GpuMsm {
        GpuMsm {
            gpu,
            config: GpuMsmConfig::default(),
        }
    }

    /// An engine with an explicit configuration (checked).
    pub fn with_config(gpu: Gpu, config: GpuMsmConfig) -> Result<GpuMsm, GpuMsmError> {
        if let Some(c) = config.window_bits {
            if !(GPU_MIN_WINDOW_BITS..=GPU_MAX_WINDOW_BITS).contains(&c) {
                return Err(GpuMsmError::BadWindow {
                    window_bits: c,
                    min_bits: GPU_MIN_WINDOW_BITS,
                    max_bits: GPU_MAX_WINDOW_BITS,
                });
            }
        }
        if let Some(l) = config.chunk_len {
            if !(1..=MAX_CHUNK_LEN).contains(&l) {
                return Err(GpuMsmError::BadChunkLen {
                    chunk_len: l,
                    max: MAX_CHUNK_LEN,
                });
            }
        }
        if config.scatter_windows == Some(0) {
            return Err(GpuMsmError::BadScatterWindows);
        }
        if config.shared_scatter_keys == Some(0) {
            return Err(GpuMsmError::BadSharedScatterKeys);
        }
        config.two_level.check()?;
        Ok(GpuMsm { gpu, config })
    }

    /// The configuration.
    pub fn config(&self) -> GpuMsmConfig {
        self.config
    }

    /// The device.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// The plan for `n` terms that take windows (scalars other than 0 and 1: the pipeline
    /// counts them on the device first and plans for that count).
    pub fn plan(&self, n: usize) -> GpuMsmPlan {
        GpuMsmPlan::new(
            self.config
                .window_bits
                .unwrap_or_else(|| GpuMsmPlan::default_window_bits(n)),
        )
    }

    /// The accumulation kernel a run picks on curve `C` when `n_windowed` of its terms take
    /// windows (scalars other than 0 and 1): the configured one, or for [`AccumulateKernel::Auto`]
    /// [`AccumulateKernel::ChunkedAffine`] from [`GpuCurve::AUTO_AFFINE_FROM`] such terms
    /// ([`AFFINE_FROM`] on G1, [`G2_AFFINE_FROM`] on G2: it measured faster there) and the
    /// curve's default elsewhere. (A run falls back from the
    /// affine kernel to the default when [`AccumulateKernel::Auto`] chose it and the VRAM
    /// budget cannot take its local memory.)
    pub fn accumulate_kernel<C: GpuCurve>(&self, n_windowed: usize) -> AccumulateKernel {
        pick_accumulate::<C>(self.config.accumulate, n_windowed)
    }

    /// [`Self::accumulate_kernel`], with the affine kernel's local memory charged and
    /// reserved before its first launch ([`Gpu::reserve_local_memory`]); an automatic pick
    /// whose charge the budget (or the driver) refuses runs the curve's default kernel
    /// instead.
    fn prepare_accumulate_kernel<C: GpuCurve>(
        &self,
        n_windowed: usize,
    ) -> Result<AccumulateKernel, GpuMsmError> {
        let kernel = self.accumulate_kernel::<C>(n_windowed);
        let (AccumulateKernel::ChunkedAffine, Some(entry)) = (kernel, C::ACCUMULATE_CHUNKS_AFFINE)
        else {
            return Ok(kernel);
        };
        let f = self.gpu.function(entry)?;
        match self
            .gpu
            .reserve_local_memory(&f, "gpu-msm affine accumulation's local memory")
        {
            Ok(()) => Ok(kernel),
            Err(e) if e.is_vram_refusal() && self.config.accumulate == AccumulateKernel::Auto => {
                Ok(C::DEFAULT_ACCUMULATE.resolve::<C>())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Uploads bases once (converted to bls-repr's layout on the host).
    pub fn upload_bases<C: GpuCurve>(
        &self,
        bases: &[C::Affine],
    ) -> Result<DeviceBases<C>, GpuMsmError> {
        let reprs: Vec<C::Repr> = bases.par_iter().map(C::to_repr).collect();
        self.upload_bases_repr::<C>(&reprs)
    }

    /// Uploads bases already in bls-repr's layout (e.g. from the SRS store).
    pub fn upload_bases_repr<C: GpuCurve>(
        &self,
        bases: &[C::Repr],
    ) -> Result<DeviceBases<C>, GpuMsmError> {
        let words: &[u32] = bytemuck::cast_slice(bases);
        let label = format!("gpu-msm {} bases", C::NAME);
        let words = self.gpu.upload(words, &label)?;
        Ok(DeviceBases {
            words,
            n: bases.len(),
            curve: std::marker::PhantomData,
        })
    }

    /// [`GpuMsm::upload_bases`] on G1.
    pub fn upload_bases_g1(&self, bases: &[G1Affine]) -> Result<DeviceBasesG1, GpuMsmError> {
        self.upload_bases::<G1Curve>(bases)
    }

    /// [`GpuMsm::upload_bases_repr`] on G1.
    pub fn upload_bases_g1_repr(
        &self,
        bases: &[G1AffineRepr],
    ) -> Result<DeviceBasesG1, GpuMsmError> {
        self.upload_bases_repr::<G1Curve>(bases)
    }

    /// [`GpuMsm::upload_bases`] on G2.
    pub fn upload_bases_g2(&self, bases: &[G2Affine]) -> Result<DeviceBasesG2, GpuMsmError> {
        self.upload_bases::<G2Curve>(bases)
    }

    /// [`GpuMsm::upload_bases_repr`] on G2.
    pub fn upload_bases_g2_repr(
        &self,
        bases: &[G2AffineRepr],
    ) -> Result<DeviceBasesG2, GpuMsmError> {
        self.upload_bases_repr::<G2Curve>(bases)
    }

    /// Uploads scalars (converted to canonical on the host).
    pub fn upload_scalars(&self, scalars: &[Scalar]) -> Result<DeviceScalars, GpuMsmError> {
        self.upload_scalar_words(&scalars_to_words(scalars))
    }

    /// Uploads canonical scalar words (8 little-endian u32 per scalar, each < r).
    pub fn upload_scalar_words(&self, words: &[u32]) -> Result<DeviceScalars, GpuMsmError> {
        let n = words.len() / SCALAR_WORDS;
        let words = self.gpu.upload(words, "gpu-msm scalars")?;
        Ok(DeviceScalars { words, n })
    }

    /// Room for `n` scalars on the device (zeroed, charged to the VRAM budget, queued on
    /// this engine's stream), to be filled in place, e.g. by a copy from a pinned staging
    /// buffer into [`DeviceScalars::words_mut`].
    pub fn alloc_scalars(&self, n: usize) -> Result<DeviceScalars, GpuMsmError> {
        let words = self
            .gpu
            .alloc_zeros::<u32>(n * SCALAR_WORDS, "gpu-msm scalars")?;
        Ok(DeviceScalars { words, n })
    }

    /// Room for `n` scalars whose contents are unspecified until written, entirely, by a
    /// copy or [`GpuMsm::select_scalars`] (charged to the VRAM budget). Unlike
    /// [`GpuMsm::alloc_scalars`] nothing is queued, so the call never waits behind kernels
    /// running on the device.
    pub fn alloc_scalars_for_overwrite(&self, n: usize) -> Result<DeviceScalars, GpuMsmError> {
        let words = self
            .gpu
            .alloc_for_overwrite::<u32>(n * SCALAR_WORDS, "gpu-msm scalars")?;
        Ok(DeviceScalars { words, n })
    }

    /// Uploads Montgomery-form scalars and converts them to canonical on the GPU.
    pub fn upload_scalars_montgomery(
        &self,
        scalars: &[FrRepr],
    ) -> Result<DeviceScalars, GpuMsmError> {
        let mut s = self.upload_scalar_words(bytemuck::cast_slice(scalars))?;
        self.montgomery_to_canonical(&mut s)?;
        Ok(s)
    }

    /// Adopts Montgomery-form scalars already on the device (4 u64 words each, e.g. the H
    /// polynomial from `gpu-ntt`), converting the first `n` to canonical in place, queued
    /// on this backend's stream after whatever the buffer's stream has queued. No copy.
    pub fn adopt_scalars_montgomery(
        &self,
        words: DeviceBuffer<u64>,
        n: usize,
    ) -> Result<DeviceScalars, GpuMsmError> {
        // The conversion runs on our stream; make it wait for the buffer's own stream.
        let producer = words.slice().stream().clone();
        let ev = if Arc::ptr_eq(&producer, self.gpu.stream()) {
            None
        } else {
            Some(
                producer
                    .record_event(None)
                    .map_err(driver("cuEventRecord"))?,
            )
        };
        self.adopt_montgomery(words, n, ev.as_ref())
    }

    /// [`GpuMsm::adopt_scalars_montgomery`] for a buffer whose writers and readers are all
    /// queued before `ready` (recorded on whichever stream): the conversion waits for that
    /// event only, not for work queued on the buffer's stream since (another proof's, say).
    pub fn adopt_scalars_montgomery_after(
        &self,
        words: DeviceBuffer<u64>,
        n: usize,
        ready: &CudaEvent,
    ) -> Result<DeviceScalars, GpuMsmError> {
        self.adopt_montgomery(words, n, Some(ready))
    }

    fn adopt_montgomery(
        &self,
        words: DeviceBuffer<u64>,
        n: usize,
        ready: Option<&CudaEvent>,
    ) -> Result<DeviceScalars, GpuMsmError> {
        if words.len() < n * (SCALAR_WORDS / 2) {
            return Err(GpuMsmError::LengthMismatch {
                n_bases: n,
                n_scalars: words.len() / (SCALAR_WORDS / 2),
            });
        }
        if let Some(ev) = ready {
            self.gpu
                .stream()
                .wait(ev)
                .map_err(driver("cuStreamWaitEvent"))?;
        }
        let words = words.into_u32_words();
        let mut s = DeviceScalars { words, n };
        self.montgomery_to_canonical(&mut s)?;
        Ok(s)
    }

    /// Converts scalars that were copied to the device in Montgomery form (the limbs of a
    /// `bls12_381::Scalar` or an [`FrRepr`], e.g. a witness copied as it is held) to
    /// canonical, in place, queued on this engine's stream.
    pub fn montgomery_to_canonical(&self, scalars: &mut DeviceScalars) -> Result<(), GpuMsmError> {
        let n = u32::try_from(scalars.n).map_err(|_| GpuMsmError::TooManyTerms {
            n_terms: scalars.n,
            max_terms: GPU_MAX_TERMS,
        })?;
        if n > 0 {
            let f = self.gpu.function(Entry::MsmFromMontgomery)?;
            let mut l = self.gpu.stream().launch_builder(&f);
            l.arg(scalars.words.slice_mut()).arg(&n);
            // SAFETY: (u32* scalars, u32 n); the buffer holds at least 8n words.
            unsafe { l.launch(grid(n, SCALAR_BLOCK)) }.map_err(launch_err)?;
        }
        Ok(())
    }

    /// Host words [`GpuMsm::upload_mask_staged`] writes for the first `limit` bits of
    /// `mask`: its words, then its offsets two to a word.
    pub fn mask_staging_words(mask: &DensityMask, limit: usize) -> usize {
        let n_words = mask_words_len(mask.len().min(limit));
        n_words + n_words.div_ceil(2)
    }

    /// [`GpuMsm::upload_mask`] through a pinned staging buffer instead of pageable memory:
    /// the words and offsets are written into `staging[at..]`
    /// ([`GpuMsm::mask_staging_words`] of them) and their copies queued on this engine's
    /// stream, without host scratch. Writing waits for the copies queued earlier from
    /// `staging` (as [`gpu_device::StagingBuffer::as_mut_slice`] does: a second mask in the
    /// same buffer waits for the first one's copies); the buffer's fences then keep it
    /// unchanged until these copies have read it.
    pub fn upload_mask_staged(
        &self,
        mask: &DensityMask,
        limit: usize,
        staging: &mut gpu_device::StagingBuffer<u64>,
        at: usize,
    ) -> Result<DeviceMask, GpuMsmError> {
        let len = mask.len().min(limit);
        let n_words = mask_words_len(len);
        let need = Self::mask_staging_words(mask, limit);
        let found = staging.capacity();
        if at.checked_add(need).is_none_or(|end| end > found) {
            return Err(GpuMsmError::Gpu(GpuError::LengthMismatch {
                what: "mask staging buffer (u64 words)",
                expected: at.saturating_add(need),
                found,
            }));
        }
        let host = &mut staging.as_mut_slice()?[at..at + need];
        let (words, offsets) = host.split_at_mut(n_words);
        cut_mask_words(mask, len, words);
        // Offsets as u32 pairs, low half first (the device's little-endian u32 words).
        let pairs: &mut [u32] = bytemuck::cast_slice_mut(offsets);
        let total = word_offsets_into(words, pairs);
        pairs[n_words..].fill(0);
        // Even length: the copy moves whole u64 words of the staging buffer.
        let mut dev_words = self
            .gpu
            .alloc_for_overwrite::<u64>(n_words, "gpu-msm mask words")?;
        let mut dev_offsets = self
            .gpu
            .alloc_for_overwrite::<u32>(2 * n_words.div_ceil(2), "gpu-msm mask offsets")?;
        let stream = self.gpu.stream();
        staging.copy_to_device(at..at + n_words, &mut dev_words, 0, stream)?;
        staging.copy_to_device(at + n_words..at + need, &mut dev_offsets, 0, stream)?;
        Ok(DeviceMask {
            words: dev_words,
            offsets: dev_offsets,
            len,
            ones: total,
        })
    }

    /// Uploads the first `limit` bits of a density mask (all of them when it is shorter):
    /// its words and each word's offset among the set bits, both charged to the VRAM
    /// budget, for [`GpuMsm::select_scalars`]. Host memory while they upload: 12 bytes per
    /// 64 bits (a copy of the words, cut at `limit`, and the offsets). Copies from pageable
    /// memory: the call returns once the driver has taken them, after the work queued
    /// earlier on this engine's stream.
    pub fn upload_mask(&self, mask: &DensityMask, limit: usize) -> Result<DeviceMask, GpuMsmError> {
        let len = mask.len().min(limit);
        let mut words = vec![0u64; mask_words_len(len)];
        cut_mask_words(mask, len, &mut words);
        let mut offsets = vec![0u32; words.len()];
        let ones = word_offsets_into(&words, &mut offsets);
        Ok(DeviceMask {
            words: self.gpu.upload(&words, "gpu-msm mask words")?,
            offsets: self.gpu.upload(&offsets, "gpu-msm mask offsets")?,
            len,
            ones,
        })
    }

    /// Writes the scalars `src[from..from + n]` into `dst` from scalar `at` on, in order;
    /// with a mask, only those whose bit is set (bit `j` for `src[from + j]`; then `n` must
    /// be the mask's length). Queued on this engine's stream; returns how many were
    /// written. A range outside either buffer, or a mask of another length, is
    /// [`GpuMsmError::ScalarRange`], and nothing is queued.
    pub fn select_scalars(
        &self,
        (src, from, n): (&DeviceScalars, usize, usize),
        mask: Option<&DeviceMask>,
        dst: &mut DeviceScalars,
        at: usize,
    ) -> Result<usize, GpuMsmError> {
        let range = |what, needed: Option<usize>, found| match needed {
            Some(needed) if needed <= found => Ok(needed),
            _ => Err(GpuMsmError::ScalarRange {
                what,
                needed: needed.unwrap_or(usize::MAX),
                found,
            }),
        };
        let end = range("select_scalars source", from.checked_add(n), src.n)?;
        let count = match mask {
            None => n,
            Some(m) if m.len == n => m.ones,
            Some(m) => {
                return Err(GpuMsmError::ScalarRange {
                    what: "select_scalars mask (bits) over the source range",
                    needed: n,
                    found: m.len,
                })
            }
        };
        range("select_scalars destination", at.checked_add(count), dst.n)?;
        if count == 0 {
            return Ok(0);
        }
        let stream = self.gpu.stream();
        let src_words = src
            .words
            .slice()
            .slice(from * SCALAR_WORDS..end * SCALAR_WORDS);
        let mut dst_words = dst
            .words
            .slice_mut()
            .slice_mut(at * SCALAR_WORDS..(at + count) * SCALAR_WORDS);
        match mask {
            None => stream
                .memcpy_dtod(&src_words, &mut dst_words)
                .map_err(driver("cuMemcpyDtoDAsync"))?,
            Some(m) => {
                let n32 = u32::try_from(n).map_err(|_| GpuMsmError::TooManyTerms {
                    n_terms: n,
                    max_terms: GPU_MAX_TERMS,
                })?;
                let f = self.gpu.function(Entry::MsmSelect)?;
                let mut l = stream.launch_builder(&f);
                l.arg(&src_words)
                    .arg(&n32)
                    .arg(m.words.slice())
                    .arg(m.offsets.slice())
                    .arg(&mut dst_words);
                // SAFETY: (const u32* src, u32 n, const u64* mask, const u32* word_offsets,
                // u32* dst): src holds the n scalars (8 words each); the mask has ⌈n/64⌉
                // words (its bits past n clear) and as many offsets; its set bits, `count`,
                // fit dst from `at` (checked above).
                unsafe { l.launch(grid(n32, SCALAR_BLOCK)) }.map_err(launch_err)?;
            }
        }
        Ok(count)
    }

    /// `Σ scalars[i]·bases[i]` on curve `C` (with a density mask: see the crate docs);
    /// uploads bases and scalars for this call only.
    pub fn msm<C: GpuCurve>(
        &self,
        bases: &[C::Affine],
        scalars: &[Scalar],
        density: Option<&DensityMask>,
    ) -> Result<C::Projective, GpuMsmError> {
        check_shapes(bases.len(), scalars.len(), density)?;
        check_terms(bases.len())?;
        if bases.is_empty() {
            return Ok(<C::Projective as group::Group>::identity());
        }
        let words = selected_words(scalars, density);
        let d_bases = self.upload_bases::<C>(bases)?;
        let d_scalars = self.upload_scalar_words(&words)?;
        self.msm_resident(&d_bases, &d_scalars)
    }

    /// One MSM on curve `C` per scalar vector over the same bases (uploaded once).
    pub fn msm_batch<C: GpuCurve>(
        &self,
        bases: &[C::Affine],
        scalar_sets: &[&[Scalar]],
        density: Option<&DensityMask>,
    ) -> Result<Vec<C::Projective>, GpuMsmError> {
        crate::check_batch(bases.len(), scalar_sets, density)?;
        check_terms(bases.len())?;
        if bases.is_empty() {
            return Ok(vec![
                <C::Projective as group::Group>::identity();
                scalar_sets.len()
            ]);
        }
        let d_bases = self.upload_bases::<C>(bases)?;
        scalar_sets
            .iter()
            .map(|scalars| {
                let d_scalars = self.upload_scalar_words(&selected_words(scalars, density))?;
                self.msm_resident(&d_bases, &d_scalars)
            })
            .collect()
    }

    /// `Σ scalars[i]·bases[i]` on curve `C` with both already on the device (the fast path).
    pub fn msm_resident<C: GpuCurve>(
        &self,
        bases: &DeviceBases<C>,
        scalars: &DeviceScalars,
    ) -> Result<C::Projective, GpuMsmError> {
        Ok(self.msm_resident_inner(bases, scalars, false)?.0)
    }

    /// As [`GpuMsm::msm_resident`], also returning the device time of each phase in
    /// milliseconds (CUDA events between the launches; for benchmarks). Empty for n = 0.
    pub fn msm_resident_profiled<C: GpuCurve>(
        &self,
        bases: &DeviceBases<C>,
        scalars: &DeviceScalars,
    ) -> Result<(C::Projective, PhaseTimes), GpuMsmError> {
        self.msm_resident_inner(bases, scalars, true)
    }

    /// The first `bases.len()` G1 bases with their windows of `window_bits` bits
    /// precomputed ([`PrecomputedBases`]): W = ⌈256 / c⌉ copies, the first the bases
    /// themselves, each next one 2^c times the one before (c doublings a base a window on
    /// the device, then one inversion to make it affine). The table is charged to the VRAM
    /// budget before it is allocated. `window_bits` within
    /// [`GPU_MIN_WINDOW_BITS`]`..=`[`GPU_MAX_WINDOW_BITS`]; W·n must stay below 2^31 (the
    /// entries' index bits).
    pub fn precompute_windows_g1(
        &self,
        bases: &DeviceBasesView<'_, G1Curve>,
        window_bits: u32,
    ) -> Result<PrecomputedBasesG1, GpuMsmError> {
        if !(GPU_MIN_WINDOW_BITS..=GPU_MAX_WINDOW_BITS).contains(&window_bits) {
            return Err(GpuMsmError::BadWindow {
                window_bits,
                min_bits: GPU_MIN_WINDOW_BITS,
                max_bits: GPU_MAX_WINDOW_BITS,
            });
        }
        let n = bases.n;
        let n_windows = GpuMsmPlan::new(window_bits).n_windows;
        let rows = n.saturating_mul(n_windows as usize);
        if rows >= SIGN_BIT_INDEX_LIMIT {
            return Err(GpuMsmError::TooManyTerms {
                n_terms: rows,
                max_terms: SIGN_BIT_INDEX_LIMIT - 1,
            });
        }
        let words = rows * G1Curve::AFFINE_WORDS;
        let mut table = self
            .gpu
            .alloc_for_overwrite::<u32>(words.max(1), "gpu-msm precomputed windows")?;
        if n > 0 {
            let gpu = &self.gpu;
            let f = gpu.function(Entry::G1PrecomputeWindows)?;
            // Its calls (the field product, the inversion) keep a small frame: local memory,
            // inside the context's initial stack, charged if it ever is not.
            gpu.reserve_local_memory(&f, "gpu-msm precompute's local memory")?;
            let (n32, c) = (n as u32, window_bits);
            let src = bases.words.slice(..n * G1Curve::AFFINE_WORDS);
            let mut l = gpu.stream().launch_builder(&f);
            l.arg(&src)
                .arg(&n32)
                .arg(&c)
                .arg(&n_windows)
                .arg(table.slice_mut());
            // SAFETY: g1_precompute_windows(const G1Affine* bases, u32 n, u32 c, u32 n_windows,
            // G1Affine* table): bases holds n points (AFFINE_WORDS words each, checked when the
            // view was made), the table n_windows·n points (allocated above); a thread per base
            // writes its W rows only; both outlive the launch (synchronized below).
            unsafe { l.launch(grid(n32, POINT_BLOCK)) }.map_err(launch_err)?;
            gpu.stream()
                .synchronize()
                .map_err(driver("cuStreamSynchronize"))?;
        }
        Ok(PrecomputedBases {
            table,
            n,
            window_bits,
            n_windows,
            curve: std::marker::PhantomData,
        })
    }

    /// The G1 bases of a sparse query laid out one per scalar: `len >= mask.len()` points
    /// on the device, the k-th of `compact` at the k-th set bit of `mask` and the point at
    /// infinity (all zero) at every clear bit and past the mask, so that an MSM over them
    /// and the scalars is the query's sum over the scalars the mask selects (the inverse
    /// of [`GpuMsm::select_scalars`] for points). The mask is copied to the device for the
    /// call; [`GpuMsm::expand_bases_g1_with`] takes one already there.
    pub fn expand_bases_g1(
        &self,
        compact: &DeviceBasesView<'_, G1Curve>,
        mask: &DensityMask,
        len: usize,
    ) -> Result<DeviceBasesG1, GpuMsmError> {
        let mask = self.upload_mask(mask, mask.len())?;
        self.expand_bases_g1_with(compact, &mask, len)
    }

    /// [`GpuMsm::expand_bases_g1`] with the mask on the device: one kernel launch queued on
    /// this engine's stream, the output charged to the VRAM budget. `compact` must hold
    /// the mask's set bits and `len` be at least its length
    /// ([`GpuMsmError::LengthMismatch`]).
    pub fn expand_bases_g1_with(
        &self,
        compact: &DeviceBasesView<'_, G1Curve>,
        mask: &DeviceMask,
        len: usize,
    ) -> Result<DeviceBasesG1, GpuMsmError> {
        for (n_bases, n_scalars) in [(compact.n, mask.ones), (len, mask.len)] {
            if n_bases < n_scalars {
                return Err(GpuMsmError::LengthMismatch { n_bases, n_scalars });
            }
        }
        check_terms(len)?;
        let words = len * G1Curve::AFFINE_WORDS;
        let mut out = self
            .gpu
            .alloc_for_overwrite::<u32>(words.max(1), "gpu-msm expanded bases")?;
        if len > 0 {
            let (n_mask, len32) = (mask.len as u32, len as u32);
            let f = self.gpu.function(Entry::G1ExpandBases)?;
            let mut l = self.gpu.stream().launch_builder(&f);
            l.arg(&compact.words)
                .arg(&n_mask)
                .arg(&len32)
                .arg(mask.words.slice())
                .arg(mask.offsets.slice())
                .arg(out.slice_mut());
            // SAFETY: g1_expand_bases(const u32* compact, u32 n_mask, u32 len, const u64*
            // mask, const u32* word_offsets, u32* out): compact holds at least the mask's
            // set bits' points (checked above), the mask ⌈n_mask/64⌉ words (its bits past
            // n_mask clear) and as many offsets, out len points (allocated above); a thread
            // an output point writes all of it; the buffers outlive the stream work (out
            // is returned, the mask and bases are borrowed by the caller, whose later
            // stream work orders after this launch).
            unsafe { l.launch(grid(len32, SCALAR_BLOCK)) }.map_err(launch_err)?;
        }
        Ok(DeviceBases {
            words: out,
            n: len,
            curve: std::marker::PhantomData,
        })
    }

    /// `Σ scalars[i]·P_i` over precomputed windows ([`GpuMsm::precompute_windows_g1`]): the
    /// same result as [`GpuMsm::msm_resident`] over the bases, by one shared set of
    /// 2^(c-1) buckets. `scalars` may be fewer than the bases (a prefix). The table's window
    /// applies (the configured `window_bits` and `scatter_windows` do not); the
    /// accumulation and reduction kernels are chosen as for any MSM, except that a
    /// one-thread-a-bucket accumulation is replaced by the chunked one (a shared bucket
    /// holds the entries of every window).
    pub fn msm_g1_precomputed(
        &self,
        table: &PrecomputedBasesG1,
        scalars: &DeviceScalars,
    ) -> Result<G1Projective, GpuMsmError> {
        self.msm_precomputed(table, scalars)
    }

    /// [`GpuMsm::msm_g1_precomputed`] for any curve whose tables can be made (G1 today).
    pub fn msm_precomputed<C: GpuCurve>(
        &self,
        table: &PrecomputedBases<C>,
        scalars: &DeviceScalars,
    ) -> Result<C::Projective, GpuMsmError> {
        let (sums, _) = self.msm_precomputed_inner(&[table], scalars, false)?;
        Ok(sums[0])
    }

    /// `Σ scalars[i]·P_i` over each of several tables of precomputed windows, the scalars
    /// sorted into buckets once for all of them: the sums a Groth16 proof needs of two
    /// queries that read the same scalars (l and the aux part of a, its table made from
    /// [`GpuMsm::expand_bases_g1`] where A lacks some aux variables). The tables must have
    /// the same window bits and the same bases a row ([`GpuMsmError::TablesDiffer`]),
    /// since the sorted entries name table rows; each sum is what
    /// [`GpuMsm::msm_precomputed`] gives for its table. The sort's scratch is the one of a
    /// single MSM; each table adds its accumulation and reduction only.
    pub fn msm_precomputed_many<C: GpuCurve>(
        &self,
        tables: &[&PrecomputedBases<C>],
        scalars: &DeviceScalars,
    ) -> Result<Vec<C::Projective>, GpuMsmError> {
        Ok(self.msm_precomputed_inner(tables, scalars, false)?.0)
    }

    /// As [`GpuMsm::msm_g1_precomputed`], with the device time of each phase (benchmarks).
    pub fn msm_g1_precomputed_profiled(
        &self,
        table: &PrecomputedBasesG1,
        scalars: &DeviceScalars,
    ) -> Result<(G1Projective, PhaseTimes), GpuMsmError> {
        let (sums, phases) = self.msm_precomputed_inner(&[table], scalars, true)?;
        Ok((sums[0], phases))
    }

    /// As [`GpuMsm::msm_precomputed_many`], with the device time of each phase
    /// (benchmarks; the accumulation and reduction phases once a table).
    pub fn msm_precomputed_many_profiled<C: GpuCurve>(
        &self,
        tables: &[&PrecomputedBases<C>],
        scalars: &DeviceScalars,
    ) -> Result<(Vec<C::Projective>, PhaseTimes), GpuMsmError> {
        self.msm_precomputed_inner(tables, scalars, true)
    }

    fn msm_precomputed_inner<C: GpuCurve>(
        &self,
        tables: &[&PrecomputedBases<C>],
        scalars: &DeviceScalars,
        profile: bool,
    ) -> Result<(Vec<C::Projective>, PhaseTimes), GpuMsmError> {
        let Some(first) = tables.first() else {
            return Ok((Vec::new(), Vec::new()));
        };
        if let Some(other) = tables
            .iter()
            .find(|t| (t.window_bits, t.n) != (first.window_bits, first.n))
        {
            return Err(GpuMsmError::TablesDiffer {
                window_bits: [first.window_bits, other.window_bits],
                n_bases: [first.n, other.n],
            });
        }
        let n = scalars.n;
        if n > first.n {
            return Err(GpuMsmError::LengthMismatch {
                n_bases: first.n,
                n_scalars: n,
            });
        }
        check_terms(n)?;
        if n == 0 {
            let zero = <C::Projective as group::Group>::identity();
            return Ok((vec![zero; tables.len()], Vec::new()));
        }
        let shared = SharedWindows {
            window_bits: first.window_bits,
            // Below 2^31 / W (checked when the table was made).
            stride: first.n as u32,
        };
        let views: Vec<CudaView<'_, u32>> =
            tables.iter().map(|t| t.table.slice().slice(..)).collect();
        let mut marks = Vec::new();
        let sums = self.window_sums::<C>(
            &views,
            &scalars.words.slice().slice(..),
            n,
            Some(shared),
            profile.then_some(&mut marks),
        )?;
        Ok((sums, phase_times(&marks)?))
    }

    /// [`GpuMsm::msm`] on G1.
    pub fn msm_g1(
        &self,
        bases: &[G1Affine],
        scalars: &[Scalar],
        density: Option<&DensityMask>,
    ) -> Result<G1Projective, GpuMsmError> {
        self.msm::<G1Curve>(bases, scalars, density)
    }

    /// [`GpuMsm::msm`] on G2.
    pub fn msm_g2(
        &self,
        bases: &[G2Affine],
        scalars: &[Scalar],
        density: Option<&DensityMask>,
    ) -> Result<G2Projective, GpuMsmError> {
        self.msm::<G2Curve>(bases, scalars, density)
    }

    /// [`GpuMsm::msm_batch`] on G1.
    pub fn msm_g1_batch(
        &self,
        bases: &[G1Affine],
        scalar_sets: &[&[Scalar]],
        density: Option<&DensityMask>,
    ) -> Result<Vec<G1Projective>, GpuMsmError> {
        self.msm_batch::<G1Curve>(bases, scalar_sets, density)
    }

    /// [`GpuMsm::msm_batch`] on G2.
    pub fn msm_g2_batch(
        &self,
        bases: &[G2Affine],
        scalar_sets: &[&[Scalar]],
        density: Option<&DensityMask>,
    ) -> Result<Vec<G2Projective>, GpuMsmError> {
        self.msm_batch::<G2Curve>(bases, scalar_sets, density)
    }

    /// [`GpuMsm::msm_resident`] on G1.
    pub fn msm_g1_resident(
        &self,
        bases: &DeviceBasesG1,
        scalars: &DeviceScalars,
    ) -> Result<G1Projective, GpuMsmError> {
        self.msm_resident(bases, scalars)
    }

    /// [`GpuMsm::msm_resident`] on G2.
    pub fn msm_g2_resident(
        &self,
        bases: &DeviceBasesG2,
        scalars: &DeviceScalars,
    ) -> Result<G2Projective, GpuMsmError> {
        self.msm_resident(bases, scalars)
    }

    /// [`GpuMsm::msm_resident_profiled`] on G1.
    pub fn msm_g1_resident_profiled(
        &self,
        bases: &DeviceBasesG1,
        scalars: &DeviceScalars,
    ) -> Result<(G1Projective, PhaseTimes), GpuMsmError> {
        self.msm_resident_profiled(bases, scalars)
    }

    /// [`GpuMsm::msm_resident_profiled`] on G2.
    pub fn msm_g2_resident_profiled(
        &self,
        bases: &DeviceBasesG2,
        scalars: &DeviceScalars,
    ) -> Result<(G2Projective, PhaseTimes), GpuMsmError> {
        self.msm_resident_profiled(bases, scalars)
    }

    /// `Σ scalars[i]·bases[i]` with the bases in pinned host memory, streamed to the device
    /// in chunks of `chunk_len` bases: the copy of chunk k+1 runs on a second stream while
    /// chunk k is summed, and the chunks' sums add up. Device memory for bases is two
    /// chunks, whatever `n`: this is also how an MSM whose bases do not fit the VRAM budget
    /// runs. Each chunk is a full MSM (its own sort and bucket reduction), so chunks much
    /// smaller than 2^20 waste work on the reduction.
    pub fn msm_streamed<C: GpuCurve>(
        &self,
        bases: &PinnedBases<C>,
        scalars: &DeviceScalars,
        chunk_len: usize,
    ) -> Result<C::Projective, GpuMsmError> {
        if bases.n != scalars.n {
            return Err(GpuMsmError::LengthMismatch {
                n_bases: bases.n,
                n_scalars: scalars.n,
            });
        }
        self.streamed_words::<C>(bases.words.as_slice()?, scalars, chunk_len)
    }

    /// `Σ scalars[i]·bases[i]` over the first `scalars.len()` of `bases`, which stay in
    /// host memory and are streamed to the device in chunks as [`GpuMsm::msm_streamed`]
    /// does. In pinned memory (`srs-store`'s pinned tier) the copies are truly
    /// asynchronous; from pageable memory the driver stages them, so they overlap less.
    /// Fewer bases than scalars is [`GpuMsmError::LengthMismatch`].
    pub fn msm_streamed_host<C: GpuCurve>(
        &self,
        bases: &[C::Repr],
        scalars: &DeviceScalars,
        chunk_len: usize,
    ) -> Result<C::Projective, GpuMsmError> {
        let bases = bases.get(..scalars.n).ok_or(GpuMsmError::LengthMismatch {
            n_bases: bases.len(),
            n_scalars: scalars.n,
        })?;
        self.streamed_words::<C>(bytemuck::cast_slice(bases), scalars, chunk_len)
    }

    /// `Σ scalars[i]·bases[i]` over the first `scalars.len()` bases of a device view (the
    /// resident path, for a query longer than the circuit's use of it). Fewer bases than
    /// scalars is [`GpuMsmError::LengthMismatch`].
    pub fn msm_resident_prefix<C: GpuCurve>(
        &self,
        bases: &DeviceBasesView<'_, C>,
        scalars: &DeviceScalars,
    ) -> Result<C::Projective, GpuMsmError> {
        if bases.n < scalars.n {
            return Err(GpuMsmError::LengthMismatch {
                n_bases: bases.n,
                n_scalars: scalars.n,
            });
        }
        let (sums, _) = self.msm_words::<C>(&[&bases.words], scalars, false)?;
        Ok(sums[0])
    }

    /// `Σ scalars[i]·bases_k[i]` over the first `scalars.len()` bases of each of several
    /// device views, the scalars sorted into buckets once for all of them (two queries
    /// of a proof that read the same scalars: l and the aux part of a, a view of
    /// [`DeviceBasesView::skip`]). Each sum is what [`GpuMsm::msm_resident_prefix`] gives
    /// for its view; a view with fewer bases than scalars is
    /// [`GpuMsmError::LengthMismatch`].
    pub fn msm_resident_prefix_many<C: GpuCurve>(
        &self,
        bases: &[&DeviceBasesView<'_, C>],
        scalars: &DeviceScalars,
    ) -> Result<Vec<C::Projective>, GpuMsmError> {
        if let Some(short) = bases.iter().find(|b| b.n < scalars.n) {
            return Err(GpuMsmError::LengthMismatch {
                n_bases: short.n,
                n_scalars: scalars.n,
            });
        }
        let words: Vec<&CudaView<'_, u32>> = bases.iter().map(|b| &b.words).collect();
        Ok(self.msm_words::<C>(&words, scalars, false)?.0)
    }

    /// The streamed pipeline over `host`, the first `scalars.n` bases' words.
    fn streamed_words<C: GpuCurve>(
        &self,
        host: &[u32],
        scalars: &DeviceScalars,
        chunk_len: usize,
    ) -> Result<C::Projective, GpuMsmError> {
        if chunk_len == 0 {
            return Err(GpuMsmError::BadChunk { chunk_len });
        }
        let mut total = <C::Projective as group::Group>::identity();
        let n = scalars.n;
        if n == 0 {
            return Ok(total);
        }
        let chunk_len = chunk_len.min(n);
        check_terms(chunk_len)?;
        let chunk_words = chunk_len * C::AFFINE_WORDS;
        let label = format!("gpu-msm streamed {} bases", C::NAME);
        let mut buffers = [
            self.gpu.alloc_zeros::<u32>(chunk_words, &label)?,
            self.gpu.alloc_zeros::<u32>(chunk_words, &label)?,
        ];
        let copy_stream = self.gpu.new_stream()?;
        // The buffers' zero fill is queued on the main stream: copies must come after it
        // (cudarc's event tracking would also order them; this does not rely on it).
        let allocated = self
            .gpu
            .stream()
            .record_event(None)
            .map_err(driver("cuEventRecord"))?;
        copy_stream
            .wait(&allocated)
            .map_err(driver("cuStreamWaitEvent"))?;
        let range = |k: usize| k * chunk_len..((k + 1) * chunk_len).min(n);
        // Queues the copy of chunk k into `dst` on the copy stream; the returned event
        // marks its end. `dst` was last read by chunk k - 2, whose window sums were
        // downloaded (the main stream synchronized) before this copy is queued.
        let copy = |k: usize, dst: &mut DeviceBuffer<u32>| -> Result<_, GpuMsmError> {
            let r = range(k);
            let src = &host[r.start * C::AFFINE_WORDS..r.end * C::AFFINE_WORDS];
            let mut view = dst.slice_mut().slice_mut(..src.len());
            // The source is page-locked, so the copy is truly asynchronous: `bases` is
            // borrowed for the whole call, which synchronizes on every chunk's download.
            copy_stream
                .memcpy_htod(src, &mut view)
                .map_err(driver("cuMemcpyHtoDAsync"))?;
            copy_stream
                .record_event(None)
                .map_err(driver("cuEventRecord"))
        };
        let n_chunks = n.div_ceil(chunk_len);
        let mut ready = copy(0, &mut buffers[0])?;
        for k in 0..n_chunks {
            let next = if k + 1 < n_chunks {
                Some(copy(k + 1, &mut buffers[(k + 1) % 2])?)
            } else {
                None
            };
            self.gpu
                .stream()
                .wait(&ready)
                .map_err(driver("cuStreamWaitEvent"))?;
            let r = range(k);
            let len = r.len();
            let sums = self.window_sums::<C>(
                &[buffers[k % 2].slice().slice(..len * C::AFFINE_WORDS)],
                &scalars
                    .words
                    .slice()
                    .slice(r.start * SCALAR_WORDS..r.end * SCALAR_WORDS),
                len,
                None,
                None,
            )?;
            total += sums[0];
            if let Some(e) = next {
                ready = e;
            }
        }
        Ok(total)
    }

    /// Shape checks, the pipeline, optional phase timings and the window combination.
    fn msm_resident_inner<C: GpuCurve>(
        &self,
        bases: &DeviceBases<C>,
        scalars: &DeviceScalars,
        profile: bool,
    ) -> Result<(C::Projective, PhaseTimes), GpuMsmError> {
        if bases.n != scalars.n {
            return Err(GpuMsmError::LengthMismatch {
                n_bases: bases.n,
                n_scalars: scalars.n,
            });
        }
        let (sums, phases) =
            self.msm_words::<C>(&[&bases.words.slice().slice(..)], scalars, profile)?;
        Ok((sums[0], phases))
    }

    /// The resident pipeline over the first `scalars.n` bases of `bases` (words; the
    /// callers checked there are that many).
    fn msm_words<C: GpuCurve>(
        &self,
        bases: &[&CudaView<'_, u32>],
        scalars: &DeviceScalars,
        profile: bool,
    ) -> Result<(Vec<C::Projective>, PhaseTimes), GpuMsmError> {
        let n = scalars.n;
        check_terms(n)?;
        if n == 0 {
            let zero = <C::Projective as group::Group>::identity();
            return Ok((vec![zero; bases.len()], Vec::new()));
        }
        let views: Vec<CudaView<'_, u32>> = bases
            .iter()
            .map(|b| b.slice(..n * C::AFFINE_WORDS))
            .collect();
        let mut marks = Vec::new();
        let sums = self.window_sums::<C>(
            &views,
            &scalars.words.slice().slice(..),
            n,
            None,
            profile.then_some(&mut marks),
        )?;
        Ok((sums, phase_times(&marks)?))
    }

    /// Runs the pipeline over `n` canonical scalars (8 words each) and each set of `n`
    /// bases in `bases` (`C::AFFINE_WORDS` words each) and returns each set's MSM: the
    /// scalars are classified and sorted into buckets once, then every set is accumulated
    /// and reduced over the same entries, and its W + 1 window sums (the ones window
    /// last) are combined ([`combine_windows`]). `0 < n <= GPU_MAX_TERMS` (checked by the
    /// callers).
    ///
    /// With `shared`, each set is a table of precomputed windows ([`PrecomputedBases`],
    /// all of the same stride) and every window's digits go to one shared set of buckets:
    /// two sums a table (the shared set's, then the ones'), which [`combine_windows`]
    /// adds as it adds W + 1.
    fn window_sums<C: GpuCurve>(
        &self,
        bases: &[CudaView<'_, u32>],
        scalars: &CudaView<'_, u32>,
        n: usize,
        shared: Option<SharedWindows>,
        mut marks: Option<&mut Vec<(&'static str, cudarc::driver::CudaEvent)>>,
    ) -> Result<Vec<C::Projective>, GpuMsmError> {
        let gpu = &self.gpu;
        let stream = gpu.stream();
        // Records an event after the work queued so far, named after the phase it ends.
        let mut mark = |name: &'static str| -> Result<(), GpuMsmError> {
            if let Some(m) = marks.as_deref_mut() {
                let e = gpu.timing_event()?;
                e.record(stream).map_err(driver("cuEventRecord"))?;
                m.push((name, e));
            }
            Ok(())
        };
        debug_assert!(
            bases.iter().all(|b| b.len() >= n * C::AFFINE_WORDS)
                && scalars.len() >= n * SCALAR_WORDS
        );
        let n = n as u32;
        mark("start")?;
        // The plan follows the scalars that take windows (neither 0 nor 1): a Groth16
        // witness's MSM over 2^27 terms of which 1% are other values is planned (window
        // size, entries) for those 1%, not for 2^27.
        let classes = self.classify(scalars, n)?;
        mark("classify")?;
        let (n_ones, n_others) = (classes[0] as usize, classes[1] as usize);
        let plan = &match shared {
            Some(sh) => GpuMsmPlan::shared(sh.window_bits),
            None => self.plan(n_others),
        };
        let c = plan.window_bits;
        let n_windows = plan.n_windows;
        let n_keys = plan.n_keys;
        // Groups of buckets: the W windows and the ones, or (shared) one set and the ones.
        let n_groups = n_keys / plan.n_buckets;
        let ones_window = n_groups - 1;
        // Exactly the entries the scatter writes: one per window per other scalar (at most:
        // digits 0 make none), one per scalar equal to 1.
        let n_entries = n_others * (n_windows as usize) + n_ones;
        let reduce = self.config.reduce.resolve::<C>();
        let n_segments = match shared {
            // Two groups of buckets: the plan's segments fill the device in one wave.
            Some(_) => plan.n_segments,
            None => reduce.segments(plan.n_buckets),
        };
        let seg_threads = n_groups * n_segments;
        // The segment sums of each window are added by a tree of TREE_FANIN-point groups
        // (one launch per level): the serial chain per window is log(segments) levels of a
        // few additions, not one long run.
        let levels = tree_levels(n_segments);

        let mut counts = gpu.alloc_zeros::<u32>(n_keys as usize, "gpu-msm counts")?;
        let mut offsets = gpu.alloc_zeros::<u32>(n_keys as usize, "gpu-msm offsets")?;
        // Not zero-filled: the scatter (or the two-level sort) writes every entry the later
        // kernels read (those below offsets[last] + counts[last] <= n_entries).
        let mut entries = gpu.alloc_for_overwrite::<u32>(n_entries.max(1), "gpu-msm entries")?;
        let mut buckets =
            gpu.alloc_zeros::<u32>(n_keys as usize * C::XYZZ_WORDS, "gpu-msm buckets")?;
        let mut segs =
            gpu.alloc_zeros::<u32>(seg_threads as usize * C::XYZZ_WORDS, "gpu-msm segments")?;
        // Tree levels ping-pong between two buffers sized for the first level's output.
        let tree_len = (seg_threads / levels.first().copied().unwrap_or(1)).max(n_groups);
        let mut tree = [
            gpu.alloc_zeros::<u32>(tree_len as usize * C::XYZZ_WORDS, "gpu-msm tree a")?,
            gpu.alloc_zeros::<u32>(tree_len as usize * C::XYZZ_WORDS, "gpu-msm tree b")?,
        ];

        mark("alloc")?;
        // SAFETY (all launches below): each kernel's parameter list in msm.cu is matched
        // argument by argument (device pointers to u32 words, then u32 values); every buffer
        // was sized above for the plan (counts/offsets/cursors: n_keys; chunk_sums: n_chunks;
        // entries: n·W, the most entries n scalars can produce; buckets: n_keys XYZZ points;
        // segs: (W+1)·n_segments; tree: the first tree level's output, the largest), and
        // every buffer outlives the stream work (the final download synchronizes).
        // (Shared: msm_count_shared / msm_scatter_shared take the table's row length
        // before the output pointers; the table holds W rows of `stride >= n` bases.)
        let two_level = match self.config.sort {
            _ if shared.is_some() => None,
            SortKind::Counting => None,
            SortKind::TwoLevel => Some(self.two_level_scratch(plan, n_entries)?),
            // Only where the scratch is at most half of what the budget has free: what a
            // caller planned for a concurrent MSM (the prover's side MSMs, sized for the
            // counting sort) stays free.
            SortKind::Auto
                if c >= TWO_LEVEL_FROM_BITS
                    && 2 * self.two_level_scratch_bytes(plan, n_entries)
                        <= gpu.vram_budget().available_bytes() =>
            {
                match self.two_level_scratch(plan, n_entries) {
                    Ok(scratch) => Some(scratch),
                    Err(GpuMsmError::Gpu(e)) if e.is_vram_refusal() => None,
                    Err(e) => return Err(e),
                }
            }
            SortKind::Auto => None,
        };
        if let Some(scratch) = two_level {
            self.two_level_sort(
                scalars,
                n,
                plan,
                scratch,
                &mut entries,
                &mut offsets,
                &mut counts,
                &mut mark,
            )?;
        } else {
            let mut cursors = gpu.alloc_zeros::<u32>(n_keys as usize, "gpu-msm cursors")?;
            let f = gpu.function(match shared {
                Some(_) => Entry::MsmCountShared,
                None => Entry::MsmCount,
            })?;
            let mut l = stream.launch_builder(&f);
            l.arg(scalars).arg(&n).arg(&c).arg(&n_windows);
            if let Some(sh) = &shared {
                l.arg(&sh.stride);
            }
            l.arg(counts.slice_mut());
            unsafe { l.launch(grid(n, SCALAR_BLOCK)) }.map_err(launch_err)?;

            mark("count")?;
            self.exclusive_scan(&counts, n_keys, &mut offsets, &mut cursors)?;
            mark("scan")?;
            if let Some(sh) = &shared {
                // All windows write into the same 2^(c-1) buckets: the launches split the
                // keys (each reads every scalar), not the windows.
                let f = gpu.function(Entry::MsmScatterShared)?;
                let per_launch = self
                    .config
                    .shared_scatter_keys
                    .unwrap_or(SHARED_SCATTER_KEYS);
                let ones = self.config.shared_scatter_ones;
                for (key_lo, key_hi) in shared_scatter_ranges(plan.n_buckets, per_launch, ones) {
                    let mut l = stream.launch_builder(&f);
                    l.arg(scalars)
                        .arg(&n)
                        .arg(&c)
                        .arg(&n_windows)
                        .arg(&sh.stride)
                        .arg(&key_lo)
                        .arg(&key_hi)
                        .arg(cursors.slice_mut())
                        .arg(entries.slice_mut());
                    unsafe { l.launch(grid(n, SCALAR_BLOCK)) }.map_err(launch_err)?;
                }
            }
            let f = gpu.function(Entry::MsmScatter)?;
            let per_window_ranges = match shared {
                Some(_) => Vec::new(),
                None => scatter_ranges(n_groups, self.scatter_windows(plan)),
            };
            for (w_lo, w_hi) in per_window_ranges {
                let mut l = stream.launch_builder(&f);
                l.arg(scalars)
                    .arg(&n)
                    .arg(&c)
                    .arg(&n_windows)
                    .arg(&w_lo)
                    .arg(&w_hi)
                    .arg(cursors.slice_mut())
                    .arg(entries.slice_mut());
                unsafe { l.launch(grid(n, SCALAR_BLOCK)) }.map_err(launch_err)?;
            }
        }
        mark("scatter")?;
        let mut accumulate = self.prepare_accumulate_kernel::<C>(n_others)?;
        if shared.is_some() && !accumulate.is_chunked() {
            // One thread a bucket would add a shared bucket's W·n / 2^(c-1) entries in a row.
            accumulate = AccumulateKernel::ChunkedCapped.resolve::<C>();
        }
        let seg_len = plan.n_buckets / n_segments;
        let reduce_fn = gpu.function(match reduce {
            ReduceKernel::Capped => C::REDUCE_SEGMENTS_CAPPED.unwrap_or(C::REDUCE_SEGMENTS),
            _ => C::REDUCE_SEGMENTS,
        })?;
        let sum_groups_fn = gpu.function(C::SUM_GROUPS)?;
        // One sort, then each set of bases summed over it: the entries index terms (or a
        // table's rows), the same for every set of the same length (or stride).
        let mut all_sums = Vec::with_capacity(bases.len());
        for (set, bases) in bases.iter().enumerate() {
            if set > 0 {
                // The accumulations write only the buckets that hold entries; the next
                // set starts from empty ones as the first did.
                stream
                    .memset_zeros(buckets.slice_mut())
                    .map_err(driver("cuMemsetD8Async"))?;
            }
            // Held until this set's download has synchronized the stream.
            let mut _partials = None;
            if accumulate.is_chunked() {
                _partials = Some(self.accumulate_chunks::<C>(
                    accumulate,
                    bases,
                    &entries,
                    &offsets,
                    &counts,
                    &mut buckets,
                    plan,
                    n_entries.div_ceil(n_windows as usize),
                    n_entries,
                )?);
            } else {
                let f = gpu.function(match accumulate {
                    AccumulateKernel::Capped128 => C::ACCUMULATE_CAPPED,
                    _ => C::ACCUMULATE,
                })?;
                let mut l = stream.launch_builder(&f);
                l.arg(bases)
                    .arg(entries.slice())
                    .arg(offsets.slice())
                    .arg(counts.slice())
                    .arg(buckets.slice_mut())
                    .arg(&n_keys);
                unsafe { l.launch(grid(n_keys, POINT_BLOCK)) }.map_err(launch_err)?;
            }
            mark("accumulate")?;
            let mut l = stream.launch_builder(&reduce_fn);
            l.arg(buckets.slice())
                .arg(&plan.n_buckets)
                .arg(&seg_len)
                .arg(&n_segments)
                .arg(&ones_window)
                .arg(segs.slice_mut())
                .arg(&seg_threads);
            unsafe { l.launch(grid(seg_threads, POINT_BLOCK)) }.map_err(launch_err)?;

            mark("reduce segments")?;
            let mut n_in = seg_threads;
            for (i, &fan_in) in levels.iter().enumerate() {
                let n_out = n_in / fan_in;
                let [a, b] = &mut tree;
                let (src, dst) = match i {
                    0 => (&segs, a),
                    _ if i % 2 == 1 => (&*a, b),
                    _ => (&*b, a),
                };
                let mut l = stream.launch_builder(&sum_groups_fn);
                l.arg(src.slice())
                    .arg(&fan_in)
                    .arg(dst.slice_mut())
                    .arg(&n_out);
                unsafe { l.launch(grid(n_out, POINT_BLOCK)) }.map_err(launch_err)?;
                n_in = n_out;
            }
            debug_assert_eq!(n_in, n_groups);
            // The last level wrote tree[0] after an odd number of levels, tree[1] after an
            // even one; with one segment per window the segment sums are the window sums.
            let sums = match levels.len() {
                0 => &segs,
                k if k % 2 == 1 => &tree[0],
                _ => &tree[1],
            };

            mark("sum groups")?;
            let mut words = gpu.download(sums)?;
            words.truncate(n_groups as usize * C::XYZZ_WORDS);
            all_sums.push(combine_windows::<C>(
                &C::sums_from_xyzz(&words)?,
                plan.window_bits,
            )?);
        }
        Ok(all_sums)
    }

    /// `offsets` and `cursors` = the exclusive prefix sum of `counts[..n_keys]` (three
    /// launches on the stream: chunk sums, their scan by one thread, the chunks' sums).
    fn exclusive_scan(
        &self,
        counts: &DeviceBuffer<u32>,
        n_keys: u32,
        offsets: &mut DeviceBuffer<u32>,
        cursors: &mut DeviceBuffer<u32>,
    ) -> Result<(), GpuMsmError> {
        let gpu = &self.gpu;
        let stream = gpu.stream();
        let scan_chunk = scan_chunk(n_keys);
        let n_chunks = n_keys.div_ceil(scan_chunk);
        let mut chunk_sums = gpu.alloc_zeros::<u32>(n_chunks as usize, "gpu-msm chunk sums")?;
        // SAFETY (three launches): msm_chunk_sums(counts, n_keys, chunk, chunk_sums),
        // msm_scan_chunks(chunk_sums, n_chunks), msm_scan_apply(counts, n_keys, chunk,
        // chunk_sums, offsets, cursors) as in msm.cu; counts, offsets and cursors hold n_keys
        // words (the callers' buffers), chunk_sums n_chunks; the stream's later download
        // synchronizes before chunk_sums is freed (stream-ordered).
        let f = gpu.function(Entry::MsmChunkSums)?;
        let mut l = stream.launch_builder(&f);
        l.arg(counts.slice())
            .arg(&n_keys)
            .arg(&scan_chunk)
            .arg(chunk_sums.slice_mut());
        unsafe { l.launch(grid(n_chunks, SCALAR_BLOCK)) }.map_err(launch_err)?;
        let f = gpu.function(Entry::MsmScanChunks)?;
        let mut l = stream.launch_builder(&f);
        l.arg(chunk_sums.slice_mut()).arg(&n_chunks);
        unsafe { l.launch(grid(1, 32)) }.map_err(launch_err)?;
        let f = gpu.function(Entry::MsmScanApply)?;
        let mut l = stream.launch_builder(&f);
        l.arg(counts.slice())
            .arg(&n_keys)
            .arg(&scan_chunk)
            .arg(chunk_sums.slice())
            .arg(offsets.slice_mut())
            .arg(cursors.slice_mut());
        unsafe { l.launch(grid(n_chunks, SCALAR_BLOCK)) }.map_err(launch_err)?;
        Ok(())
    }

    /// The two-level sort's bins for the plan's keys and `n_entries` entries: their width
    /// in bits of keys ([`GpuMsmPlan::two_level_fine_log`]) and their number.
    fn two_level_bins(&self, plan: &GpuMsmPlan, n_entries: usize) -> (u32, u32) {
        let fine_log = plan.two_level_fine_log(n_entries, self.config.two_level.bin_entries_log);
        (fine_log, plan.n_keys >> fine_log)
    }

    /// Device bytes of [`Self::two_level_scratch`]: three words a bin, six bytes an entry.
    fn two_level_scratch_bytes(&self, plan: &GpuMsmPlan, n_entries: usize) -> u64 {
        let (_, n_bins) = self.two_level_bins(plan, n_entries);
        12 * u64::from(n_bins) + 6 * n_entries.max(1) as u64
    }

    /// The two-level sort's scratch for the plan's keys and at most `n_entries` entries,
    /// charged to the VRAM budget.
    fn two_level_scratch(
        &self,
        plan: &GpuMsmPlan,
        n_entries: usize,
    ) -> Result<TwoLevelScratch, GpuMsmError> {
        let gpu = &self.gpu;
        let (fine_log, n_bins) = self.two_level_bins(plan, n_entries);
        Ok(TwoLevelScratch {
            fine_log,
            n_bins,
            bin_counts: gpu.alloc_zeros::<u32>(n_bins as usize, "gpu-msm bin counts")?,
            bin_offsets: gpu.alloc_for_overwrite::<u32>(n_bins as usize, "gpu-msm bin offsets")?,
            bin_cursors: gpu.alloc_for_overwrite::<u32>(n_bins as usize, "gpu-msm bin cursors")?,
            tmp_entries: gpu
                .alloc_for_overwrite::<u32>(n_entries.max(1), "gpu-msm binned entries")?,
            tmp_low: gpu.alloc_for_overwrite::<u16>(n_entries.max(1), "gpu-msm binned key bits")?,
        })
    }

    /// [`SortKind::TwoLevel`]: `entries`, `offsets` and `counts` of the plan's keys for the
    /// first `n` scalars (at most the entries `scratch` was sized for), as the counting sort
    /// leaves them; `mark` is called after the bin count ("count") and the bins' scan
    /// ("scan"); the caller marks the end of the placing and sorting ("scatter").
    #[allow(clippy::too_many_arguments)]
    fn two_level_sort(
        &self,
        scalars: &CudaView<'_, u32>,
        n: u32,
        plan: &GpuMsmPlan,
        scratch: TwoLevelScratch,
        entries: &mut DeviceBuffer<u32>,
        offsets: &mut DeviceBuffer<u32>,
        counts: &mut DeviceBuffer<u32>,
        mark: &mut impl FnMut(&'static str) -> Result<(), GpuMsmError>,
    ) -> Result<(), GpuMsmError> {
        let gpu = &self.gpu;
        let stream = gpu.stream();
        let (c, n_windows) = (plan.window_bits, plan.n_windows);
        let tl = self.config.two_level;
        let TwoLevelScratch {
            fine_log,
            n_bins,
            mut bin_counts,
            mut bin_offsets,
            mut bin_cursors,
            mut tmp_entries,
            mut tmp_low,
        } = scratch;
        let chunk = 1u32 << tl.chunk_log;
        let n_blocks = n.div_ceil(chunk);
        let hist_bytes = 4 * n_bins;
        // At least `sort_shared_kib`: with 116 KiB one block holds an SM, so that few bins'
        // ranges are being filled at once.
        let sort_bytes = bin_sort_shared_bytes(fine_log).max(tl.sort_shared_kib << 10);
        let raise = |entry: Entry, bytes: u32| -> Result<(), GpuMsmError> {
            gpu.function(entry)?
                .set_attribute(
                    CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    bytes as i32,
                )
                .map_err(driver("cuFuncSetAttribute"))
        };
        raise(Entry::MsmBinCount, hist_bytes)?;
        raise(Entry::MsmBinPlace, hist_bytes)?;
        raise(Entry::MsmBinSort, sort_bytes)?;
        let blocks = |grid: u32, shared: u32| LaunchConfig {
            grid_dim: (grid.max(1), 1, 1),
            block_dim: (BIN_THREADS, 1, 1),
            shared_mem_bytes: shared,
        };
        // SAFETY (three launches): msm_bin_count / msm_bin_place / msm_bin_sort as in msm.cu;
        // block b of the count and place launches reads scalars [b·chunk, min(n, (b+1)·chunk))
        // and has n_bins shared counters (hist_bytes, the attribute raised above; a place
        // launch uses those of its windows' bins, bin_lo.. bin_lo + range <= n_bins); bin_counts,
        // bin_offsets and bin_cursors hold n_bins words, tmp_entries and tmp_low n_entries
        // (the most entries n scalars make: bin_place writes exactly sum(bin_counts)); one
        // msm_bin_sort block per bin with 2^fine_log + threads shared words (sort_bytes)
        // writes offsets and counts for its 2^fine_log keys (n_bins·2^fine_log = n_keys) and
        // the entries of its range; msm_bin_place_staged's blocks take place_chunk scalars
        // and 3·range + threads + 2·cap shared words (staged_place_shared_bytes, the
        // attribute raised for the largest launch; cap = place_chunk·windows bounds a
        // block's digits, range < 2^16 and fine_log <= 15 fit a staged key's 16 + 16 bits);
        // all buffers outlive the stream work (the caller's final
        // download synchronizes; these are freed stream-ordered).
        let f = gpu.function(Entry::MsmBinCount)?;
        let mut l = stream.launch_builder(&f);
        l.arg(scalars)
            .arg(&n)
            .arg(&c)
            .arg(&n_windows)
            .arg(&fine_log)
            .arg(&n_bins)
            .arg(&chunk)
            .arg(bin_counts.slice_mut());
        unsafe { l.launch(blocks(n_blocks, hist_bytes)) }.map_err(launch_err)?;
        mark("count")?;
        self.exclusive_scan(&bin_counts, n_bins, &mut bin_offsets, &mut bin_cursors)?;
        mark("scan")?;
        // A few windows a launch: the (block, bin) runs being filled at once stay few.
        let bins_per_window = plan.n_buckets >> fine_log;
        let max_windows = (tl.place_bins / bins_per_window).max(1);
        // Staged: blocks of `place_chunk` scalars and launches of as many windows as their
        // staging fits in a block's shared memory (place blocks need not be count blocks:
        // each recounts its own digits).
        let staged = tl
            .staged
            .then(|| staged_place_shape(chunk, bins_per_window, max_windows))
            .flatten();
        let (place_entry, place_chunk, windows_per_place) = match staged {
            Some((place_chunk, w)) => {
                let bytes = staged_place_shared_bytes(place_chunk, bins_per_window, w);
                raise(Entry::MsmBinPlaceStaged, bytes)?;
                (Entry::MsmBinPlaceStaged, place_chunk, w)
            }
            None => (Entry::MsmBinPlace, chunk, max_windows),
        };
        let place_blocks = n.div_ceil(place_chunk);
        let f = gpu.function(place_entry)?;
        for (w_lo, w_hi) in scatter_ranges(n_windows + 1, windows_per_place) {
            let bin_lo = w_lo * bins_per_window;
            let range = (w_hi - w_lo) * bins_per_window;
            let mut l = stream.launch_builder(&f);
            l.arg(scalars)
                .arg(&n)
                .arg(&c)
                .arg(&n_windows)
                .arg(&w_lo)
                .arg(&w_hi)
                .arg(&fine_log)
                .arg(&bin_lo)
                .arg(&range)
                .arg(&place_chunk);
            // (Staged: a block's digits here are at most place_chunk per window, its
            // staging `cap` words of each kind; the shared size covers every launch's.)
            let cap = place_chunk * (w_hi - w_lo);
            let shared = if staged.is_some() {
                l.arg(&cap);
                staged_place_shared_bytes(place_chunk, bins_per_window, w_hi - w_lo)
            } else {
                4 * range
            };
            l.arg(bin_cursors.slice_mut())
                .arg(tmp_entries.slice_mut())
                .arg(tmp_low.slice_mut());
            unsafe { l.launch(blocks(place_blocks, shared)) }.map_err(launch_err)?;
        }
        let f = gpu.function(Entry::MsmBinSort)?;
        let mut l = stream.launch_builder(&f);
        l.arg(tmp_entries.slice())
            .arg(tmp_low.slice())
            .arg(bin_offsets.slice())
            .arg(bin_counts.slice())
            .arg(&fine_log)
            .arg(entries.slice_mut())
            .arg(offsets.slice_mut())
            .arg(counts.slice_mut());
        unsafe { l.launch(blocks(n_bins, sort_bytes)) }.map_err(launch_err)?;
        Ok(())
    }

    /// `[scalars equal to 1, scalars other than 0 and 1]` among the first `n` (one pass
    /// over the scalars on the stream, then a synchronizing download of two words).
    fn classify(&self, scalars: &CudaView<'_, u32>, n: u32) -> Result<Vec<u32>, GpuMsmError> {
        let gpu = &self.gpu;
        let mut classes = gpu.alloc_zeros::<u32>(2, "gpu-msm scalar classes")?;
        let f = gpu.function(Entry::MsmClassify)?;
        let mut l = gpu.stream().launch_builder(&f);
        l.arg(scalars).arg(&n).arg(classes.slice_mut());
        // SAFETY: msm_classify(const u32* scalars, u32 n, u32* classes): scalars holds at
        // least n scalars (8 words each, checked by the callers), classes 2 words; both
        // outlive the launch (the download below synchronizes).
        unsafe { l.launch(grid(n, SCALAR_BLOCK)) }.map_err(launch_err)?;
        Ok(gpu.download(&classes)?)
    }

    /// Windows per scatter launch: the configured number, or as many as keep the buckets
    /// one launch writes to at most [`SCATTER_BUCKETS`].
    fn scatter_windows(&self, plan: &GpuMsmPlan) -> u32 {
        self.config
            .scatter_windows
            .unwrap_or((SCATTER_BUCKETS / plan.n_buckets).max(1))
    }
}

/// `[lo, hi)` ranges of the scatter launches: `n_groups` windows (the ones window
/// included), or keys of shared buckets, in `⌈n_groups / per_launch⌉` launches of near-equal
/// size.
fn scatter_ranges(n_groups: u32, per_launch: u32) -> Vec<(u32, u32)> {
    let launches = n_groups.div_ceil(per_launch.max(1)).max(1);
    let at = |k: u32| (u64::from(k) * u64::from(n_groups) / u64::from(launches)) as u32;
    (0..launches).map(|k| (at(k), at(k + 1))).collect()
}

/// The affine accumulation's chunk (entries a thread, `streams` streams of 16 to 64 each)
/// for `n_entries` entries on a device holding `wave` of its threads at once: `default`,
/// unless its threads fill fewer than three waves with the last one less than 90% full;
/// then the chunk whose threads just fit the fewest whole waves. Its blocks run as SMs
/// free, so a last wave a fraction full costs nearly a whole one when there are few.
/// Session 36 on an H100 (wave 67,584 threads), 2^24 over 20- and 22-bit tables (2^24·13
/// and 2^24·12 entries), the accumulation at 16 / 26 / 32 (the default) / 47 / 51 / 64
/// entries a stream (ms): c = 20 87.9 / 86.3 / 91.3 / 103.1 (1.07 waves) / **84.6** (0.99
/// waves) / 98.8; c = 22 87.1 / 89.1 / 87.8 / **84.5** (0.99 waves) / 87.0 / 88.9. Plain
/// MSMs of 2^24 (16 windows: 1.94 waves) and 2^26 (6.3) keep the default, measured best or
/// even there.
fn wave_filling_affine_chunk(n_entries: usize, default: u32, streams: u32, wave: u32) -> u32 {
    let (streams, wave, entries) = (u64::from(streams), u64::from(wave), n_entries as u64);
    if streams == 0 || wave == 0 || default == 0 {
        return default;
    }
    let waves = entries as f64 / (u64::from(default) * wave) as f64;
    if waves >= 3.0 || waves.ceil() - waves <= 0.1 {
        return default;
    }
    let (shortest, longest) = (
        u64::from(*AFFINE_STREAM_ENTRIES.start()),
        u64::from(*AFFINE_STREAM_ENTRIES.end()),
    );
    (1..=3u64)
        .map(|k| entries.div_ceil(streams * wave * k))
        .find(|&per_stream| per_stream <= longest)
        .map_or(default, |per_stream| {
            (per_stream.max(shortest) * streams) as u32
        })
}

/// `[lo, hi)` key ranges of the scatter launches over `2 * n_buckets` shared keys (the
/// digits' `[0, n_buckets)`, then the ones'), `per_launch` keys a launch at most but where
/// `ones` puts all the ones into one launch.
fn shared_scatter_ranges(n_buckets: u32, per_launch: u32, ones: OnesScatter) -> Vec<(u32, u32)> {
    let n_keys = 2 * n_buckets;
    match ones {
        OnesScatter::Split => scatter_ranges(n_keys, per_launch),
        OnesScatter::WithLast => {
            let mut r = scatter_ranges(n_buckets, per_launch);
            if let Some(last) = r.last_mut() {
                last.1 = n_keys;
            }
            r
        }
        OnesScatter::Alone => {
            let mut r = scatter_ranges(n_buckets, per_launch);
            r.push((n_buckets, n_keys));
            r
        }
    }
}

impl GpuMsm {
    /// The chunked accumulation: `<g>_accumulate_chunks` over `n_entries` (an upper bound of
    /// the sorted entries; threads past the real count return at once), then the two fix-up
    /// launches. Every bucket that holds entries is written; empty ones keep their zeros
    /// (the point at infinity). Returns the partial-sum buffer, which the queued work uses:
    /// the caller keeps it until the stream has synchronized.
    #[allow(clippy::too_many_arguments)]
    fn accumulate_chunks<C: GpuCurve>(
        &self,
        accumulate: AccumulateKernel,
        bases: &CudaView<'_, u32>,
        entries: &DeviceBuffer<u32>,
        offsets: &DeviceBuffer<u32>,
        counts: &DeviceBuffer<u32>,
        buckets: &mut DeviceBuffer<u32>,
        plan: &GpuMsmPlan,
        n_terms: usize,
        n_entries: usize,
    ) -> Result<DeviceBuffer<u32>, GpuMsmError> {
        let n_keys = plan.n_keys;
        let gpu = &self.gpu;
        let stream = gpu.stream();
        let chunk_len = match accumulate {
            AccumulateKernel::ChunkedAffine => self
                .config
                .chunk_len
                .unwrap_or_else(|| {
                    let wave = gpu.info().sm_count * C::AFFINE_BLOCKS_PER_SM * POINT_BLOCK;
                    wave_filling_affine_chunk(
                        n_entries,
                        plan.default_affine_chunk_len::<C>(n_terms),
                        C::AFFINE_STREAMS,
                        wave,
                    )
                })
                .next_multiple_of(C::AFFINE_STREAMS),
            _ => self
                .config
                .chunk_len
                .unwrap_or_else(|| plan.default_chunk_len(n_terms)),
        };
        let n_chunks =
            u32::try_from(n_entries.div_ceil(chunk_len as usize).max(1)).map_err(|_| {
                GpuMsmError::TooManyTerms {
                    n_terms: n_entries,
                    max_terms: GPU_MAX_TERMS,
                }
            })?;
        let mut partials = gpu.alloc_zeros::<u32>(
            2 * n_chunks as usize * C::XYZZ_WORDS,
            "gpu-msm partial bucket sums",
        )?;
        let group = FIXUP_GROUP;
        let f = gpu.function(
            match (
                accumulate,
                C::ACCUMULATE_CHUNKS_CAPPED,
                C::ACCUMULATE_CHUNKS_AFFINE,
            ) {
                (AccumulateKernel::ChunkedCapped, Some(capped), _) => capped,
                (AccumulateKernel::ChunkedAffine, _, Some(affine)) => affine,
                _ => C::ACCUMULATE_CHUNKS,
            },
        )?;
        // SAFETY (the three launches): parameter lists as in include/msm_kernels.cuh
        // (device pointers, then u32 values); entries holds n_entries words, offsets and
        // counts n_keys, buckets n_keys XYZZ points, partials 2·n_chunks; every kernel reads
        // only entries below offsets[n_keys-1] + counts[n_keys-1] <= n_entries; all buffers
        // outlive the stream work (the caller's download synchronizes, and the caller keeps
        // partials until then).
        let mut l = stream.launch_builder(&f);
        l.arg(bases)
            .arg(entries.slice())
            .arg(offsets.slice())
            .arg(counts.slice())
            .arg(&n_keys)
            .arg(&chunk_len)
            .arg(buckets.slice_mut())
            .arg(partials.slice_mut())
            .arg(&n_chunks);
        unsafe { l.launch(grid(n_chunks, POINT_BLOCK)) }.map_err(launch_err)?;
        let f = gpu.function(C::FIXUP_GROUPS)?;
        let mut l = stream.launch_builder(&f);
        l.arg(offsets.slice())
            .arg(counts.slice())
            .arg(&n_keys)
            .arg(&chunk_len)
            .arg(&group)
            .arg(partials.slice_mut())
            .arg(&n_chunks);
        unsafe { l.launch(grid(n_chunks, POINT_BLOCK)) }.map_err(launch_err)?;
        let f = gpu.function(C::FIXUP_BUCKETS)?;
        let mut l = stream.launch_builder(&f);
        l.arg(offsets.slice())
            .arg(counts.slice())
            .arg(&n_keys)
            .arg(&chunk_len)
            .arg(&group)
            .arg(partials.slice())
            .arg(buckets.slice_mut())
            .arg(&n_chunks);
        unsafe { l.launch(grid(n_chunks, POINT_BLOCK)) }.map_err(launch_err)?;
        Ok(partials)
    }
}

/// Milliseconds between consecutive marks, each named after the phase it ends.
fn phase_times(marks: &[(&'static str, CudaEvent)]) -> Result<PhaseTimes, GpuMsmError> {
    let mut phases = Vec::new();
    for pair in marks.windows(2) {
        let (_, start) = &pair[0];
        let (name, end) = &pair[1];
        let ms = start
            .elapsed_ms(end)
            .map_err(driver("cuEventElapsedTime"))?;
        phases.push((*name, ms));
    }
    Ok(phases)
}

/// `Σ_w 2^(c·w)·sums[w]` over the W signed-digit windows, plus the ones window (last).
fn combine_windows<C: GpuCurve>(
    sums: &[C::Projective],
    c: u32,
) -> Result<C::Projective, GpuMsmError> {
    let (ones, windows) = sums.split_last().ok_or(GpuMsmError::LengthMismatch {
        n_bases: 1,
        n_scalars: 0,
    })?;
    let mut acc = <C::Projective as group::Group>::identity();
    for w in windows.iter().rev() {
        for _ in 0..c {
            acc = group::Group::double(&acc);
        }
        acc += *w;
    }
    Ok(acc + *ones)
}

impl From<GpuMsmError> for MsmError {
    /// Shape errors pass through unchanged; device errors become [`MsmError::Gpu`] with
    /// their message (the device error itself is not `Clone`).
    fn from(e: GpuMsmError) -> MsmError {
        match e {
            GpuMsmError::Shape(e) => e,
            GpuMsmError::TooManyTerms { n_terms, max_terms } => {
                MsmError::TooManyTerms { n_terms, max_terms }
            }
            other => MsmError::Gpu {
                backend: "cuda",
                message: other.to_string(),
            },
        }
    }
}

/// The trait view of the CUDA engine: G1 and G2 on the GPU, bases uploaded per call (use
/// [`GpuMsm::upload_bases`] and [`GpuMsm::msm_resident`] to keep them resident).
impl crate::MsmBackend for GpuMsm {
    fn name(&self) -> &'static str {
        "cuda"
    }

    fn msm_g1(
        &self,
        bases: &[G1Affine],
        scalars: &[Scalar],
        density: Option<&DensityMask>,
    ) -> Result<G1Projective, MsmError> {
        Ok(GpuMsm::msm_g1(self, bases, scalars, density)?)
    }

    fn msm_g2(
        &self,
        bases: &[G2Affine],
        scalars: &[Scalar],
        density: Option<&DensityMask>,
    ) -> Result<G2Projective, MsmError> {
        Ok(GpuMsm::msm_g2(self, bases, scalars, density)?)
    }

    fn msm_g1_batch(
        &self,
        bases: &[G1Affine],
        scalar_sets: &[&[Scalar]],
        density: Option<&DensityMask>,
    ) -> Result<Vec<G1Projective>, MsmError> {
        Ok(GpuMsm::msm_g1_batch(self, bases, scalar_sets, density)?)
    }

    fn msm_g2_batch(
        &self,
        bases: &[G2Affine],
        scalar_sets: &[&[Scalar]],
        density: Option<&DensityMask>,
    ) -> Result<Vec<G2Projective>, MsmError> {
        Ok(GpuMsm::msm_g2_batch(self, bases, scalar_sets, density)?)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn cut_mask_words_and_offsets_follow_the_bits() {
        // A fixed pattern of bits: every third one set, and a dense run.
        let bits: Vec<bool> = (0..300)
            .map(|i| i % 3 == 0 || (130..190).contains(&i))
            .collect();
        let mask = crate::DensityMask::from_bools(bits.iter().copied());
        for len in [0usize, 1, 63, 64, 65, 128, 200, 300] {
            let n = mask_words_len(len);
            assert_eq!(n, len.div_ceil(64).max(1), "len {len}");
            let mut words = vec![u64::MAX; n];
            cut_mask_words(&mask, len, &mut words);
            let mut offsets = vec![u32::MAX; n];
            let ones = word_offsets_into(&words, &mut offsets);
            assert_eq!(
                ones,
                bits[..len].iter().filter(|&&b| b).count(),
                "len {len}"
            );
            for (i, &b) in bits.iter().enumerate().take(n * 64) {
                let got = (words[i / 64] >> (i % 64)) & 1 == 1;
                assert_eq!(got, i < len && b, "len {len}, bit {i}");
            }
            for (k, &o) in offsets.iter().enumerate() {
                let before = bits[..(64 * k).min(len)].iter().filter(|&&b| b).count();
                assert_eq!(o as usize, before, "len {len}, word {k}");
            }
        }
    }

    #[test]
    fn tree_levels_multiply_to_the_segment_count() {
        for log in 0..=12u32 {
            let levels = tree_levels(1 << log);
            assert_eq!(levels.iter().product::<u32>(), 1 << log, "{levels:?}");
            assert!(levels.iter().all(|&f| (2..=TREE_FANIN).contains(&f)));
        }
        assert!(tree_levels(1).is_empty());
    }

    #[test]
    fn staged_place_shapes_fit_shared_memory_and_sixteen_bit_bins() {
        for chunk_log in 8..=24u32 {
            for bpw_log in 0..=17u32 {
                for max_windows in [1u32, 2, 3, 7, 16, 130] {
                    let (chunk, bpw) = (1u32 << chunk_log, 1u32 << bpw_log);
                    let what = format!("chunk 2^{chunk_log}, 2^{bpw_log} bins a window");
                    match staged_place_shape(chunk, bpw, max_windows) {
                        Some((c, w)) => {
                            assert!(c.is_power_of_two() && c <= chunk, "{what}: {c}");
                            assert!((1..=max_windows).contains(&w), "{what}: {w}");
                            assert!(
                                staged_place_shared_bytes(c, bpw, w) <= MAX_BLOCK_SHARED,
                                "{what}"
                            );
                            assert!(u64::from(w) * u64::from(bpw) <= 1 << 16, "{what}");
                            // The chunk only shrinks when one window's staging did not fit.
                            if c < chunk {
                                assert!(
                                    staged_place_shared_bytes(2 * c, bpw, 1) > MAX_BLOCK_SHARED,
                                    "{what}"
                                );
                            }
                        }
                        None => assert!(
                            bpw > 1 << 16
                                || staged_place_shared_bytes(1, bpw, 1) > MAX_BLOCK_SHARED,
                            "{what}: refused"
                        ),
                    }
                }
            }
        }
        // At 2^26 (c = 20): bins of 2^9 keys (1024 a window) with blocks of 2^14 scalars
        // stage one window a launch (147 KB), of 2^13 two (160 KB); bins of 2^11 keys (256
        // a window) with blocks of 2^13 three (210 KB).
        assert_eq!(staged_place_shape(1 << 14, 1024, 16), Some((1 << 14, 1)));
        assert_eq!(staged_place_shape(1 << 13, 1024, 16), Some((1 << 13, 2)));
        assert_eq!(staged_place_shape(1 << 13, 256, 16), Some((1 << 13, 3)));
        assert_eq!(staged_place_shape(1 << 13, 256, 2), Some((1 << 13, 2)));
    }

    #[test]
    fn two_level_params_outside_their_ranges_are_refused() {
        let ok = TwoLevelParams::default();
        assert!(ok.check().is_ok());
        for bad in [
            TwoLevelParams { chunk_log: 7, ..ok },
            TwoLevelParams {
                chunk_log: 25,
                ..ok
            },
            TwoLevelParams {
                bin_entries_log: 32,
                ..ok
            },
            TwoLevelParams {
                place_bins: 0,
                ..ok
            },
            TwoLevelParams {
                place_bins: TWO_LEVEL_MAX_BINS + 1,
                ..ok
            },
            TwoLevelParams {
                sort_shared_kib: 228,
                ..ok
            },
        ] {
            let err = bad.check().expect_err("out of range");
            assert!(matches!(err, GpuMsmError::BadTwoLevel { params } if params == bad));
            assert!(err.to_string().contains("two-level sort sizes"), "{err}");
        }
        for edge in [
            TwoLevelParams { chunk_log: 8, ..ok },
            TwoLevelParams {
                chunk_log: 24,
                ..ok
            },
            TwoLevelParams {
                bin_entries_log: 0,
                ..ok
            },
            TwoLevelParams {
                bin_entries_log: 31,
                ..ok
            },
            TwoLevelParams {
                place_bins: 1,
                ..ok
            },
            TwoLevelParams {
                place_bins: TWO_LEVEL_MAX_BINS,
                ..ok
            },
            TwoLevelParams {
                sort_shared_kib: 0,
                ..ok
            },
            TwoLevelParams {
                sort_shared_kib: 227,
                ..ok
            },
        ] {
            assert!(edge.check().is_ok(), "{edge:?}");
        }
    }

    #[test]
    fn two_level_bins_fit_their_shared_memory_and_u16_key_bits() {
        for bin_entries_log in [0, 8, 16, 18, 20, 31] {
            for c in GPU_MIN_WINDOW_BITS..=GPU_MAX_WINDOW_BITS {
                let plan = GpuMsmPlan::new(c);
                for log_entries in 0..=31u32 {
                    let n_entries = (1usize << log_entries).min(GPU_MAX_TERMS * 16);
                    let fine_log = plan.two_level_fine_log(n_entries, bin_entries_log);
                    let what = format!(
                        "c = {c}, 2^{log_entries} entries, bins of 2^{bin_entries_log}: \
                         fine_log {fine_log}"
                    );
                    assert!(fine_log <= MAX_BIN_KEYS_LOG, "{what}");
                    assert!(
                        bin_sort_shared_bytes(fine_log) <= MAX_BLOCK_SHARED,
                        "{what}"
                    );
                    assert_eq!(plan.n_buckets % (1 << fine_log), 0, "{what}");
                    assert!(plan.n_keys >> fine_log <= TWO_LEVEL_MAX_BINS, "{what}");
                    // Wider bins than the target size only where narrower ones would be
                    // too many.
                    let per_bin = n_entries as f64 / f64::from(plan.n_keys >> fine_log);
                    assert!(
                        per_bin <= (1u64 << bin_entries_log) as f64
                            || fine_log == 0
                            || fine_log == MAX_BIN_KEYS_LOG
                            || fine_log == c - 1
                            || plan.n_keys >> (fine_log - 1) > TWO_LEVEL_MAX_BINS,
                        "{what}: {per_bin} entries a bin"
                    );
                }
            }
        }
    }

    #[test]
    fn affine_chunks_fill_whole_waves() {
        let h100 = 132 * 4 * 128;
        // 2^24 over 20- and 22-bit tables: one wave, just under.
        assert_eq!(wave_filling_affine_chunk(13 << 24, 2048, 64, h100), 51 * 64);
        assert_eq!(wave_filling_affine_chunk(12 << 24, 2048, 64, h100), 47 * 64);
        for (entries, chunk) in [(13usize << 24, 51 * 64u32), (12 << 24, 47 * 64)] {
            let threads = entries.div_ceil(chunk as usize);
            assert!(threads <= h100 as usize && threads > h100 as usize * 9 / 10);
        }
        // 16 windows (1.94 waves) and many waves keep the default.
        assert_eq!(wave_filling_affine_chunk(16 << 24, 2048, 64, h100), 2048);
        assert_eq!(wave_filling_affine_chunk(13 << 26, 2048, 64, h100), 2048);
        assert_eq!(wave_filling_affine_chunk(13 << 27, 4096, 64, h100), 4096);
        // Few entries: 16 a stream at least, more threads than the default's.
        assert_eq!(wave_filling_affine_chunk(13 << 22, 2048, 64, h100), 16 * 64);
        assert_eq!(wave_filling_affine_chunk(1, 1024, 64, h100), 16 * 64);
        // Between one and three waves badly filled, at most 64 a stream: two waves.
        let two = wave_filling_affine_chunk(100 * 64 * h100 as usize, 4096, 64, h100);
        assert_eq!(two, 50 * 64);
        // G2 (32 streams, two blocks an SM) and degenerate devices.
        let g2 = 132 * 2 * 128;
        assert_eq!(wave_filling_affine_chunk(16 << 24, 2048, 32, g2), 2048);
        assert_eq!(wave_filling_affine_chunk(13 << 24, 1024, 32, 0), 1024);
        for entries in [1usize, 1000, 1 << 20, 13 << 24, 3 << 28] {
            for default in [1024u32, 2048, 4096] {
                let c = wave_filling_affine_chunk(entries, default, 64, h100);
                assert!(c == default || (c % 64 == 0 && (16 * 64..=64 * 64).contains(&c)));
            }
        }
    }

    #[test]
    fn shared_scatter_ranges_cover_every_key_once() {
        for n_buckets in [1u32, 2, 3, 1 << 10, 1 << 19, 1 << 21] {
            for per in [1u32, 2, 5, 1 << 12, 1 << 17, 1 << 18, u32::MAX] {
                let n_keys = 2 * n_buckets;
                for ones in [
                    OnesScatter::Split,
                    OnesScatter::WithLast,
                    OnesScatter::Alone,
                ] {
                    let r = shared_scatter_ranges(n_buckets, per, ones);
                    let what = format!("{n_buckets} buckets, {per} a launch, {ones:?}");
                    assert_eq!(r.first().map(|x| x.0), Some(0), "{what}");
                    assert_eq!(r.last().map(|x| x.1), Some(n_keys), "{what}");
                    assert!(r.windows(2).all(|p| p[0].1 == p[1].0), "{what}");
                    assert!(r.iter().all(|&(lo, hi)| lo < hi), "{what}");
                    let digit_launches = n_buckets.div_ceil(per) as usize;
                    match ones {
                        OnesScatter::Split => {
                            assert_eq!(r.len() as u32, n_keys.div_ceil(per), "{what}");
                            assert!(r.iter().all(|&(lo, hi)| hi - lo <= per), "{what}");
                        }
                        OnesScatter::WithLast => {
                            assert_eq!(r.len(), digit_launches, "{what}");
                            // Every launch but the last within the limit; the last holds
                            // every one.
                            let (last, rest) = r.split_last().unwrap();
                            assert!(rest.iter().all(|&(lo, hi)| hi - lo <= per), "{what}");
                            assert!(last.0 < n_buckets, "{what}");
                        }
                        OnesScatter::Alone => {
                            assert_eq!(r.len(), digit_launches + 1, "{what}");
                            assert_eq!(r.last(), Some(&(n_buckets, n_keys)), "{what}");
                            let digits = &r[..digit_launches];
                            assert!(digits.iter().all(|&(lo, hi)| hi - lo <= per), "{what}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn scatter_ranges_cover_every_window_once() {
        let check = |n: u32, per: u32| {
            let r = scatter_ranges(n, per);
            assert_eq!(r.len() as u32, n.div_ceil(per));
            assert_eq!(r.first().map(|x| x.0), Some(0));
            assert_eq!(r.last().map(|x| x.1), Some(n));
            assert!(r.windows(2).all(|p| p[0].1 == p[1].0));
            assert!(r.iter().all(|&(lo, hi)| lo < hi && hi - lo <= per));
        };
        for n_groups in 1..40u32 {
            for per in 1..45u32 {
                check(n_groups, per);
            }
        }
        // Shared-bucket keys: up to 2^22 keys, where k * n_keys leaves u32.
        for (n_keys, per) in [
            (1u32 << 22, 1u32 << 17),
            (1 << 22, 1000),
            (1 << 21, 7),
            (1 << 22, 1 << 22),
        ] {
            check(n_keys, per);
        }
    }

    use super::*;

    #[test]
    fn shared_plans_have_two_groups_of_buckets() {
        for c in GPU_MIN_WINDOW_BITS..=GPU_MAX_WINDOW_BITS {
            let per_window = GpuMsmPlan::new(c);
            let shared = GpuMsmPlan::shared(c);
            // window_sums derives the groups (and the ones group, the last) from these.
            assert_eq!(
                per_window.n_keys / per_window.n_buckets,
                per_window.n_windows + 1
            );
            assert_eq!(shared.n_keys / shared.n_buckets, 2, "c = {c}");
            // Same digits and buckets: the keys differ, and the segments (more a group).
            assert_eq!(
                GpuMsmPlan {
                    n_keys: per_window.n_keys,
                    n_segments: per_window.n_segments,
                    ..shared
                },
                per_window
            );
            assert!(shared.n_segments >= per_window.n_segments);
            assert_eq!(shared.n_buckets % shared.n_segments, 0);
            // The largest table a 2^31 index allows still holds whole MSMs of 2^24 terms at
            // every window from 8 bits (the entries' sign bit stays free).
            if c >= 8 {
                assert!(
                    (1usize << 24) * (shared.n_windows as usize) < SIGN_BIT_INDEX_LIMIT,
                    "c = {c}"
                );
            }
        }
    }

    #[test]
    fn plans_cover_256_bits_and_fill_segments() {
        for c in GPU_MIN_WINDOW_BITS..=GPU_MAX_WINDOW_BITS {
            let p = GpuMsmPlan::new(c);
            assert!(p.n_windows * c >= 256, "c = {c}");
            assert!((p.n_windows - 1) * c < 256, "c = {c}");
            assert_eq!(p.n_buckets % p.n_segments, 0);
            assert!(p.n_segments.is_power_of_two());
            assert!(p.n_segments <= MAX_SEGMENTS);
        }
        assert_eq!(GpuMsmPlan::default_window_bits(0), 8);
        assert_eq!(GpuMsmPlan::default_window_bits(1 << 14), 13);
        assert_eq!(GpuMsmPlan::default_window_bits(1 << 16), 13);
        assert_eq!(GpuMsmPlan::default_window_bits(1 << 17), 16);
        assert_eq!(GpuMsmPlan::default_window_bits(1 << 24), 16);
        assert_eq!(GpuMsmPlan::default_window_bits(LARGE_WINDOW_FROM - 1), 16);
        assert_eq!(GpuMsmPlan::default_window_bits(LARGE_WINDOW_FROM), 20);
        // Every default keeps at least 8 bits of the scalar in the top window.
        for log_n in 0..30 {
            let c = GpuMsmPlan::default_window_bits(1 << log_n);
            let top_bits = 255 - (256u32.div_ceil(c) - 1) * c;
            assert!(top_bits >= 7, "c = {c}: top window has {top_bits} bits");
        }
    }

    /// The word counts the pipeline sizes its buffers with match the host layouts
    /// (affine: the bls-repr struct; XYZZ: four coordinates, twice the affine point).
    fn layout_matches<C: GpuCurve>() {
        assert_eq!(
            C::AFFINE_WORDS * 4,
            std::mem::size_of::<C::Repr>(),
            "{}",
            C::NAME
        );
        assert_eq!(C::XYZZ_WORDS, 2 * C::AFFINE_WORDS, "{}", C::NAME);
        // Every point kernel of the curve is its own, from one module.
        for e in [
            C::ACCUMULATE,
            C::ACCUMULATE_CAPPED,
            C::ACCUMULATE_CHUNKS,
            C::FIXUP_GROUPS,
            C::FIXUP_BUCKETS,
            C::REDUCE_SEGMENTS,
            C::SUM_GROUPS,
        ]
        .into_iter()
        .chain(C::REDUCE_SEGMENTS_CAPPED)
        .chain(C::ACCUMULATE_CHUNKS_CAPPED)
        .chain(C::ACCUMULATE_CHUNKS_AFFINE)
        {
            assert!(e.name().starts_with(&format!("{}_", C::NAME)), "{e:?}");
            assert_eq!(e.module(), C::ACCUMULATE.module(), "{e:?}");
        }
    }

    #[test]
    fn curve_layouts_and_entries_match() {
        layout_matches::<G1Curve>();
        layout_matches::<G2Curve>();
        for k in AccumulateKernel::ALL {
            assert_eq!(k.resolve::<G1Curve>(), k);
            let on_g2 = match k {
                AccumulateKernel::ChunkedCapped => AccumulateKernel::Chunked,
                other => other,
            };
            assert_eq!(k.resolve::<G2Curve>(), on_g2);
        }
        let auto = AccumulateKernel::Auto;
        assert_eq!(auto.resolve::<G1Curve>(), AccumulateKernel::ChunkedCapped);
        assert_eq!(auto.resolve::<G2Curve>(), AccumulateKernel::Chunked);
        // The automatic pick by windowed terms: affine on G1 from AFFINE_FROM, on G2 from
        // G2_AFFINE_FROM; a configured kernel is kept whatever the size.
        for n in [0, 1 << 16, AFFINE_FROM - 1] {
            assert_eq!(
                pick_accumulate::<G1Curve>(auto, n),
                AccumulateKernel::ChunkedCapped
            );
        }
        for n in [0, 1 << 16, G2_AFFINE_FROM - 1] {
            assert_eq!(
                pick_accumulate::<G2Curve>(auto, n),
                AccumulateKernel::Chunked
            );
        }
        for n in [G2_AFFINE_FROM, AFFINE_FROM - 1, 1 << 27] {
            assert_eq!(
                pick_accumulate::<G2Curve>(auto, n),
                AccumulateKernel::ChunkedAffine
            );
        }
        for n in [AFFINE_FROM, 1 << 27] {
            assert_eq!(
                pick_accumulate::<G1Curve>(auto, n),
                AccumulateKernel::ChunkedAffine
            );
            let capped = AccumulateKernel::ChunkedCapped;
            assert_eq!(pick_accumulate::<G1Curve>(capped, n), capped);
        }
        let affine = AccumulateKernel::ChunkedAffine;
        assert_eq!(pick_accumulate::<G1Curve>(affine, 1 << 10), affine);
        assert_eq!(
            GpuMsmPlan::new(20).default_affine_chunk_len::<G1Curve>(1 << 27),
            4 * MAX_DEFAULT_CHUNK_LEN
        );
        let lens: Vec<u32> = [
            (8, 12),
            (13, 14),
            (13, 16),
            (16, 18),
            (16, 20),
            (16, 22),
            (16, 26),
        ]
        .into_iter()
        .map(|(c, log_n)| GpuMsmPlan::new(c).default_chunk_len(1 << log_n))
        .collect();
        assert_eq!(lens, [32, 32, 32, 32, 128, 512, 512]);
    }

    /// Independent oracle: filter first, then each scalar's bytes as words, serially.
    fn oracle_words(scalars: &[Scalar], mask: Option<&DensityMask>) -> Vec<u32> {
        scalars
            .iter()
            .enumerate()
            .filter(|(i, _)| mask.is_none_or(|m| m.get(*i)))
            .flat_map(|(_, s)| {
                let b = s.to_bytes();
                (0..8)
                    .map(|j| {
                        u32::from_le_bytes([b[4 * j], b[4 * j + 1], b[4 * j + 2], b[4 * j + 3]])
                    })
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// A generator of test data from a fresh seed (or `PINION_SEED`), printed.
    fn seeded_u64s() -> impl FnMut() -> u64 {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
        let seed = std::env::var("PINION_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(seed);
        eprintln!("seed = {seed}");
        let mut x = seed | 1;
        move || {
            // xorshift64*: enough for test data.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

    #[test]
    fn select_scalar_words_matches_per_element_filter() {
        let mut next = seeded_u64s();
        let lens = [
            0usize,
            1,
            63,
            64,
            65,
            4095,
            4096,
            4097,
            3 * 4096 + 130,
            20_000,
        ];
        for &n in &lens {
            let s: Vec<Scalar> = (0..n)
                .map(|_| match next() % 4 {
                    // Zeros and ones are what the masks and fast paths meet most.
                    0 => Scalar::zero(),
                    1 => Scalar::one(),
                    _ => Scalar::from(next()) * Scalar::from(next()) + Scalar::from(next()),
                })
                .collect();
            for per_mille in [0u64, 1, 300, 999, 1000] {
                // Masks as long as the scalars, shorter and longer.
                for mask_len in [
                    n,
                    n.saturating_sub((next() % 70) as usize),
                    n + (next() % 70) as usize,
                ] {
                    let m =
                        DensityMask::from_bools((0..mask_len).map(|_| next() % 1000 < per_mille));
                    // Scalars past the mask's end are dropped, bits past the scalars ignored.
                    let kept: Vec<bool> = (0..n).map(|i| i < mask_len && m.get(i)).collect();
                    let expected = oracle_words(&s, Some(&DensityMask::from_bools(kept)));
                    // Room to spare, filled with garbage: only the kept prefix is written.
                    let spare = 8 * (next() % 3) as usize;
                    let mut out = vec![7u32; SCALAR_WORDS * m.count_ones().min(n) + spare];
                    let k = select_scalar_words_into(&mut out, &s, Some(&m));
                    assert_eq!(8 * k, expected.len(), "n = {n}");
                    assert_eq!(
                        &out[..SCALAR_WORDS * k],
                        &expected[..],
                        "n = {n}, mask len = {mask_len}, density = {per_mille}/1000"
                    );
                    assert!(out[SCALAR_WORDS * k..].iter().all(|&w| w == 7));
                    if mask_len == n {
                        assert_eq!(selected_words(&s, Some(&m)), expected, "n = {n}");
                    }
                }
            }
            let mut out = vec![0u32; SCALAR_WORDS * n];
            assert_eq!(select_scalar_words_into(&mut out, &s, None), n);
            assert_eq!(out, oracle_words(&s, None), "n = {n}");
            assert_eq!(scalars_to_words(&s), out, "n = {n}");
            assert_eq!(selected_words(&s, None), out, "n = {n}");
        }
    }

    #[test]
    fn scalar_words_are_canonical_little_endian() {
        let s = Scalar::from(0x1234_5678_9abc_def0u64);
        let w = scalars_to_words(&[s, -Scalar::one()]);
        assert_eq!(&w[..3], &[0x9abc_def0, 0x1234_5678, 0]);
        let r_minus_1 = bls_repr::FR_MODULUS_U32;
        assert_eq!(w[8], r_minus_1[0] - 1);
        assert_eq!(&w[9..16], &r_minus_1[1..8]);
    }

    #[test]
    fn scalars_come_back_from_their_words_and_unreduced_words_are_named() {
        let mut next = seeded_u64s();
        let mut s: Vec<Scalar> = (0..1000)
            .map(|_| {
                let mut wide = [0u8; 64];
                for chunk in wide.chunks_exact_mut(8) {
                    chunk.copy_from_slice(&next().to_le_bytes());
                }
                Scalar::from_bytes_wide(&wide)
            })
            .collect();
        s.extend([Scalar::zero(), Scalar::one(), -Scalar::one()]);
        let words = scalars_to_words(&s);
        let back = scalars_from_words(bytemuck::cast_slice(&words)).expect("reduced words");
        assert_eq!(back, s);
        assert!(scalars_from_words(&[]).expect("no words").is_empty());
        // r itself, then all ones: the first index not below r is the one named.
        let mut bad: Vec<[u32; SCALAR_WORDS]> = bytemuck::cast_slice(&words[..40]).to_vec();
        bad[3] = bls_repr::FR_MODULUS_U32;
        bad[4] = [u32::MAX; SCALAR_WORDS];
        match scalars_from_words(&bad) {
            Err(GpuMsmError::NotReduced { index }) => assert_eq!(index, 3),
            other => panic!("expected NotReduced at 3, got {other:?}"),
        }
    }
}
