//! Pinion's CUDA kernels, embedded as PTX.
//!
//! # Example
//! A kernel is named by an [`Entry`], which knows its module; the module's PTX (embedded in
//! the binary unless built with `external-ptx`) is inflated on demand:
//! ```
//! use pinion_kernels::{Entry, Module};
//!
//! let entry = Entry::NttPassDif;
//! assert_eq!((entry.name(), entry.module()), ("ntt_pass_dif", Module::Ntt));
//! let ptx = entry.module().ptx()?;
//! assert!(ptx.contains(".entry ntt_pass_dif("));
//! // Every entry point is defined in its module (the crate's unit test checks all of them).
//! assert!(Entry::ALL.iter().filter(|e| e.module() == Module::Ntt).all(|e| ptx.contains(e.name())));
//! # Ok::<(), pinion_kernels::PtxError>(())
//! ```
//!
//! Contract: every top-level `cuda-kernels/<stem>.cu` is compiled by `cargo xtask kernels`
//! (`nvcc -arch=sm_90 -ptx -O3 -std=c++17 -I cuda-kernels/include`) to PTX stored
//! zlib-compressed as `cuda-kernels/ptx/<stem>.ptx.zlib`, which is committed, so building this
//! crate needs no CUDA toolkit. [`Module`] names each PTX module and [`Entry`] each kernel
//! entry point, so a misspelt kernel is a compile error rather than a failed lookup at run
//! time; a unit test checks that every [`Entry`] is really defined (`.entry <name>`) in its
//! module's PTX.
//!
//! Each module also comes as an sm_90 cubin (`ptx/<stem>.sm_90.cubin.zlib`, made by `ptxas`
//! from the same PTX, [`Module::cubin_sm90`]) so that a Hopper GPU loads it without the
//! driver's JIT; other GPUs use the PTX.
//!
//! With the `external-ptx` feature the PTX is not embedded but read at run time from
//! `$PINION_PTX_DIR/<stem>.ptx.zlib` (the GPU bundle ships one copy beside its binaries); a
//! missing or damaged file is a [`PtxError`], never a panic.
//!
//! Non-goals: loading or launching (that is `gpu-device`'s job); this crate is data only.
//! Cost: about a tenth of the PTX's size in the binary's read-only data (the text compresses
//! ~10x), plus the compressed cubins; a module is inflated when asked for (`gpu-device` asks
//! once per device) and not kept; without a usable cubin the driver JIT-compiles the PTX
//! once when `gpu-device` first loads the module.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

/// One PTX module (one top-level `.cu` file).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Module {
    /// `field_test.cu`: batch and throughput kernels for Fp, Fr and Fp2 arithmetic.
    FieldTest,
    /// `msm.cu`: the Pippenger MSM pipeline (sort by bucket, XYZZ buckets, reduction).
    Msm,
    /// `msm_g2.cu`: the point kernels of the MSM pipeline on G2 (the scalar kernels are
    /// `msm.cu`'s).
    MsmG2,
    /// `ntt.cu`: NTT passes, twiddle table, scaling, bit reversal and the H pointwise step.
    Ntt,
    /// `pce.cu`: the PCE's sparse mat-vec (a, b, c from the witness) and the witness check.
    Pce,
}

impl Module {
    /// Every module, in declaration order.
    pub const ALL: &'static [Module] = &[
        Module::FieldTest,
        Module::Msm,
        Module::MsmG2,
        Module::Ntt,
        Module::Pce,
    ];

    /// The module's stem (`<stem>.cu`, `<stem>.ptx`).
    pub const fn name(self) -> &'static str {
        match self {
            Module::FieldTest => "field_test",
            Module::Msm => "msm",
            Module::MsmG2 => "msm_g2",
            Module::Ntt => "ntt",
            Module::Pce => "pce",
        }
    }

    /// The module's PTX text, inflated on each call (the driver copies what it loads, and
    /// `gpu-device` loads a module once per device, so nothing is kept here).
    pub fn ptx(self) -> Result<String, PtxError> {
        inflate(self, &self.compressed()?)
    }

    /// The module compiled for sm_90 (an ELF cubin made by `ptxas` from the same PTX), so a
    /// Hopper GPU can load it without the driver's JIT (which takes more than a minute for
    /// the G2 MSM module); inflated on each call, as [`Module::ptx`].
    pub fn cubin_sm90(self) -> Result<Vec<u8>, PtxError> {
        inflate_bytes(self, &self.compressed_cubin()?)
    }

    /// The zlib-compressed sm_90 cubin as stored in `ptx/`.
    #[cfg(not(feature = "external-ptx"))]
    fn compressed_cubin(self) -> Result<std::borrow::Cow<'static, [u8]>, PtxError> {
        Ok(std::borrow::Cow::Borrowed(match self {
            Module::FieldTest => include_bytes!("../ptx/field_test.sm_90.cubin.zlib"),
            Module::Msm => include_bytes!("../ptx/msm.sm_90.cubin.zlib"),
            Module::MsmG2 => include_bytes!("../ptx/msm_g2.sm_90.cubin.zlib"),
            Module::Ntt => include_bytes!("../ptx/ntt.sm_90.cubin.zlib"),
            Module::Pce => include_bytes!("../ptx/pce.sm_90.cubin.zlib"),
        }))
    }

    /// The zlib-compressed sm_90 cubin read from `$PINION_PTX_DIR`.
    #[cfg(feature = "external-ptx")]
    fn compressed_cubin(self) -> Result<std::borrow::Cow<'static, [u8]>, PtxError> {
        read_external(self, &format!("{}.sm_90.cubin.zlib", self.name()))
    }

    /// The zlib-compressed PTX as stored in `ptx/`.
    #[cfg(not(feature = "external-ptx"))]
    fn compressed(self) -> Result<std::borrow::Cow<'static, [u8]>, PtxError> {
        Ok(std::borrow::Cow::Borrowed(match self {
            Module::FieldTest => include_bytes!("../ptx/field_test.ptx.zlib"),
            Module::Msm => include_bytes!("../ptx/msm.ptx.zlib"),
            Module::MsmG2 => include_bytes!("../ptx/msm_g2.ptx.zlib"),
            Module::Ntt => include_bytes!("../ptx/ntt.ptx.zlib"),
            Module::Pce => include_bytes!("../ptx/pce.ptx.zlib"),
        }))
    }

    /// The zlib-compressed PTX read from `$PINION_PTX_DIR`.
    #[cfg(feature = "external-ptx")]
    fn compressed(self) -> Result<std::borrow::Cow<'static, [u8]>, PtxError> {
        read_external(self, &format!("{}.ptx.zlib", self.name()))
    }
}

/// A file of `$PINION_PTX_DIR`.
#[cfg(feature = "external-ptx")]
fn read_external(module: Module, file: &str) -> Result<std::borrow::Cow<'static, [u8]>, PtxError> {
    let dir = std::env::var_os(PTX_DIR_VAR).ok_or(PtxError::NoDirectory)?;
    let path = std::path::Path::new(&dir).join(file);
    std::fs::read(&path)
        .map(std::borrow::Cow::Owned)
        .map_err(|e| PtxError::Unreadable {
            module: module.name(),
            path: path.display().to_string(),
            reason: e.to_string(),
        })
}

/// Blocks of 128 threads an SM that `g1_accumulate_chunks_affine`'s registers are capped for
/// (`AFFINE_KERNEL(g1, Fp, 64, 4)` in msm.cu): with its 64 streams a thread, what one wave
/// of the kernel holds.
pub const G1_AFFINE_BLOCKS_PER_SM: u32 = 4;
/// [`G1_AFFINE_BLOCKS_PER_SM`] for `g2_accumulate_chunks_affine` (msm_g2.cu).
pub const G2_AFFINE_BLOCKS_PER_SM: u32 = 2;

/// Environment variable naming the PTX directory of `external-ptx` builds.
pub const PTX_DIR_VAR: &str = "PINION_PTX_DIR";

fn inflate_bytes(module: Module, compressed: &[u8]) -> Result<Vec<u8>, PtxError> {
    miniz_oxide::inflate::decompress_to_vec_zlib(compressed).map_err(|e| PtxError::Corrupt {
        module: module.name(),
        reason: format!("zlib: {:?}", e.status),
    })
}

fn inflate(module: Module, compressed: &[u8]) -> Result<String, PtxError> {
    let bytes = inflate_bytes(module, compressed)?;
    String::from_utf8(bytes).map_err(|e| PtxError::Corrupt {
        module: module.name(),
        reason: format!("not utf-8 at byte {}", e.utf8_error().valid_up_to()),
    })
}

/// Why a module's PTX text is unavailable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PtxError {
    /// An `external-ptx` build runs without `PINION_PTX_DIR` set.
    NoDirectory,
    /// The module's file cannot be read.
    Unreadable {
        /// Module name.
        module: &'static str,
        /// The file tried.
        path: String,
        /// The operating system's reason.
        reason: String,
    },
    /// The stored bytes are not zlib-compressed UTF-8 text.
    Corrupt {
        /// Module name.
        module: &'static str,
        /// What is wrong.
        reason: String,
    },
}

impl std::fmt::Display for PtxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PtxError::NoDirectory => write!(
                f,
                "this build reads its PTX from ${PTX_DIR_VAR}, which is not set"
            ),
            PtxError::Unreadable {
                module,
                path,
                reason,
            } => write!(
                f,
                "cannot read the ptx of module {module} from {path}: {reason}"
            ),
            PtxError::Corrupt { module, reason } => {
                write!(f, "the stored ptx of module {module} is damaged: {reason}")
            }
        }
    }
}

impl std::error::Error for PtxError {}

macro_rules! entries {
    ($( $(#[$doc:meta])* $variant:ident => ($module:ident, $name:literal), )*) => {
        /// A kernel entry point (an `extern "C" __global__` function) and its module.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Entry {
            $( $(#[$doc])* $variant, )*
        }

        impl Entry {
            /// Every entry point, in declaration order.
            pub const ALL: &'static [Entry] = &[$(Entry::$variant,)*];

            /// The unmangled symbol name in the PTX.
            pub const fn name(self) -> &'static str {
                match self { $(Entry::$variant => $name,)* }
            }

            /// The module that defines this entry point.
            pub const fn module(self) -> Module {
                match self { $(Entry::$variant => Module::$module,)* }
            }
        }
    };
}

entries! {
    /// `fp_add(const Fp* a, const Fp* b, Fp* out, u32 n)`: out = a + b.
    FpAdd => (FieldTest, "fp_add"),
    /// `fp_sub(a, b, out, n)`: out = a - b.
    FpSub => (FieldTest, "fp_sub"),
    /// `fp_mul(a, b, out, n)`: Montgomery product.
    FpMul => (FieldTest, "fp_mul"),
    /// `fp_neg(const Fp* a, Fp* out, u32 n)`: out = -a.
    FpNeg => (FieldTest, "fp_neg"),
    /// `fp_sqr(a, out, n)`: out = a^2.
    FpSqr => (FieldTest, "fp_sqr"),
    /// `fp_inv(a, out, n)`: out = a^-1 (0 for 0).
    FpInv => (FieldTest, "fp_inv"),
    /// `fp_mul_chain(a, b, out, n, iters)`: 4 chains of multiplications by b (benchmark).
    FpMulChain => (FieldTest, "fp_mul_chain"),
    /// `fr_add(const Fr* a, const Fr* b, Fr* out, u32 n)`.
    FrAdd => (FieldTest, "fr_add"),
    /// `fr_sub(a, b, out, n)`.
    FrSub => (FieldTest, "fr_sub"),
    /// `fr_mul(a, b, out, n)`.
    FrMul => (FieldTest, "fr_mul"),
    /// `fr_neg(a, out, n)`.
    FrNeg => (FieldTest, "fr_neg"),
    /// `fr_sqr(a, out, n)`.
    FrSqr => (FieldTest, "fr_sqr"),
    /// `fr_inv(a, out, n)` (0 for 0).
    FrInv => (FieldTest, "fr_inv"),
    /// `fr_mul_chain(a, b, out, n, iters)`: 4 chains (benchmark).
    FrMulChain => (FieldTest, "fr_mul_chain"),
    /// `fp2_add(const Fp2* a, const Fp2* b, Fp2* out, u32 n)`.
    Fp2Add => (FieldTest, "fp2_add"),
    /// `fp2_sub(a, b, out, n)`.
    Fp2Sub => (FieldTest, "fp2_sub"),
    /// `fp2_mul(a, b, out, n)` (Karatsuba, 3 Fp products).
    Fp2Mul => (FieldTest, "fp2_mul"),
    /// `fp2_neg(a, out, n)`.
    Fp2Neg => (FieldTest, "fp2_neg"),
    /// `fp2_sqr(a, out, n)` (2 Fp products).
    Fp2Sqr => (FieldTest, "fp2_sqr"),
    /// `fp2_inv(a, out, n)` (0 for 0).
    Fp2Inv => (FieldTest, "fp2_inv"),
    /// `fp2_mul_chain(a, b, out, n, iters)`: 2 chains (benchmark).
    Fp2MulChain => (FieldTest, "fp2_mul_chain"),
    /// `fp_sqr_chain(a, b, out, n, iters)`: 4 chains started like `fp_mul_chain`, then
    /// `iters` rounds of squaring (benchmark).
    FpSqrChain => (FieldTest, "fp_sqr_chain"),
    /// `fr_sqr_chain(a, b, out, n, iters)`: as `fp_sqr_chain` over Fr (benchmark).
    FrSqrChain => (FieldTest, "fr_sqr_chain"),
    /// `fp_ab_mul_chain(a, b, out, n, iters)`: as `fp_mul_chain` with the two-accumulator
    /// product `fe_mul_ab` (benchmark).
    FpAbMulChain => (FieldTest, "fp_ab_mul_chain"),
    /// `fr_ab_mul_chain(a, b, out, n, iters)`: as `fr_mul_chain` with `fe_mul_ab` (benchmark).
    FrAbMulChain => (FieldTest, "fr_ab_mul_chain"),
    /// `fp64_mul_chain(a, b, out, n, iters)`: as `fp_mul_chain` with 64-bit limbs (benchmark).
    Fp64MulChain => (FieldTest, "fp64_mul_chain"),
    /// `fr_f64_mul_chain(a, b, out, n, iters)`: as `fr_mul_chain` with the product on the
    /// FP64 pipe (`include/field_f64.cuh`, benchmark).
    FrF64MulChain => (FieldTest, "fr_f64_mul_chain"),
    /// `fp_f64_mul_chain(a, b, out, n, iters)`: as `fp_mul_chain` with the product on the
    /// FP64 pipe (`include/field_f64.cuh`, benchmark).
    FpF64MulChain => (FieldTest, "fp_f64_mul_chain"),
    /// `msm_from_montgomery(u32* scalars, u32 n)`: Fr Montgomery to canonical, in place.
    MsmFromMontgomery => (Msm, "msm_from_montgomery"),
    /// `msm_count(scalars, n, c, n_windows, counts)`: bucket-key histogram.
    MsmCount => (Msm, "msm_count"),
    /// `msm_chunk_sums(counts, n_keys, chunk, chunk_sums)`: prefix sum, level 1.
    MsmChunkSums => (Msm, "msm_chunk_sums"),
    /// `msm_scan_chunks(chunk_sums, n_chunks)`: prefix sum, level 2 (one thread).
    MsmScanChunks => (Msm, "msm_scan_chunks"),
    /// `msm_scan_apply(counts, n_keys, chunk, chunk_sums, offsets, cursors)`: level 3.
    MsmScanApply => (Msm, "msm_scan_apply"),
    /// `msm_scatter(scalars, n, c, n_windows, w_lo, w_hi, cursors, entries)`: counting-sort
    /// scatter of windows `w_lo..w_hi` (window `n_windows` is the ones window).
    MsmScatter => (Msm, "msm_scatter"),
    /// `msm_count_shared(scalars, n, c, n_windows, stride, counts)`: as `msm_count` with one
    /// set of buckets shared by every window (keys `|d| − 1`, the ones at `B + i mod B`).
    MsmCountShared => (Msm, "msm_count_shared"),
    /// `msm_scatter_shared(scalars, n, c, n_windows, stride, cursors, entries)`: the
    /// shared-bucket scatter of all windows; entries index a precomputed table
    /// (`w·stride + i`).
    MsmScatterShared => (Msm, "msm_scatter_shared"),
    /// `g1_precompute_windows(bases, n, c, n_windows, table)`: `table[w·n + i] =
    /// 2^(c·w)·bases[i]` (affine) for `w < n_windows`.
    G1PrecomputeWindows => (Msm, "g1_precompute_windows"),
    /// `msm_classify(scalars, n, classes)`: adds the count of scalars equal to 1 to
    /// `classes[0]` and of scalars other than 0 and 1 to `classes[1]`.
    MsmClassify => (Msm, "msm_classify"),
    /// `msm_bin_count(scalars, n, c, n_windows, fine_log, n_bins, chunk, bin_counts)`: the
    /// two-level sort's first pass (bins of `2^fine_log` keys; dynamic shared memory
    /// `4·n_bins` bytes; block `b` takes scalars `b·chunk..`).
    MsmBinCount => (Msm, "msm_bin_count"),
    /// `msm_bin_place(scalars, n, c, n_windows, w_lo, w_hi, fine_log, bin_lo, n_bins, chunk,
    /// bin_cursors, tmp_entries, tmp_low)`: each entry of windows `w_lo..w_hi` (bins
    /// `bin_lo..bin_lo + n_bins`, their counters in shared memory) into its bin's run, the
    /// key's low bits (u16) beside.
    MsmBinPlace => (Msm, "msm_bin_place"),
    /// `msm_bin_place_staged(scalars, n, c, n_windows, w_lo, w_hi, fine_log, bin_lo, n_bins,
    /// chunk, cap, bin_cursors, tmp_entries, tmp_low)`: as `msm_bin_place`, the block's entries
    /// staged in shared memory in bin order first and written out run by run (dynamic
    /// shared memory `4·(3·n_bins + threads + 2·cap)` bytes, `cap >= chunk·(w_hi - w_lo)`).
    MsmBinPlaceStaged => (Msm, "msm_bin_place_staged"),
    /// `msm_bin_sort(tmp_entries, tmp_low, bin_offsets, bin_counts, fine_log, entries,
    /// offsets, counts)`: one block a bin (dynamic shared memory `4·(2^fine_log + threads)`
    /// bytes), the bin's keys' offsets and counts and its entries in key order.
    MsmBinSort => (Msm, "msm_bin_sort"),
    /// `msm_select(src, n, mask, word_offsets, dst)`: the scalars a density mask selects,
    /// packed in order (`word_offsets[k]`: set bits in mask words `0..k`).
    MsmSelect => (Msm, "msm_select"),
    /// `g1_expand_bases(compact, n_mask, len, mask, word_offsets, out)`: `len` G1 points,
    /// the k-th compact one at the mask's k-th set bit, infinity elsewhere (the inverse of
    /// `msm_select` for points).
    G1ExpandBases => (Msm, "g1_expand_bases"),
    /// `g1_accumulate(bases, entries, offsets, counts, buckets, n_keys)`: bucket sums.
    G1Accumulate => (Msm, "g1_accumulate"),
    /// `g1_accumulate_capped(..)`: as `g1_accumulate`, registers capped at 128.
    G1AccumulateCapped => (Msm, "g1_accumulate_capped"),
    /// `g1_accumulate_chunks(bases, entries, offsets, counts, n_keys, chunk_len, buckets,
    /// partials, n_chunks)`: bucket sums, one thread per `chunk_len` sorted entries.
    G1AccumulateChunks => (Msm, "g1_accumulate_chunks"),
    /// `g1_accumulate_chunks_capped(..)`: as `g1_accumulate_chunks`, registers capped at 128.
    G1AccumulateChunksCapped => (Msm, "g1_accumulate_chunks_capped"),
    /// `g1_accumulate_chunks_affine(..)`: as `g1_accumulate_chunks`, in affine coordinates
    /// with one batched inversion per step of 64 streams (`chunk_len` a multiple of 64).
    G1AccumulateChunksAffine => (Msm, "g1_accumulate_chunks_affine"),
    /// `g1_fixup_groups(offsets, counts, n_keys, chunk_len, group, partials, n_chunks)`:
    /// sums the head parts of runs of up to `group` chunks.
    G1FixupGroups => (Msm, "g1_fixup_groups"),
    /// `g1_fixup_buckets(offsets, counts, n_keys, chunk_len, group, partials, buckets,
    /// n_chunks)`: writes the buckets that cross chunk boundaries.
    G1FixupBuckets => (Msm, "g1_fixup_buckets"),
    /// `g1_reduce_segments(buckets, n_buckets, seg_len, n_segments, ones_window, out, n)`.
    G1ReduceSegments => (Msm, "g1_reduce_segments"),
    /// `g1_reduce_segments_capped(...)`: the same, registers capped for 3 blocks per SM.
    G1ReduceSegmentsCapped => (Msm, "g1_reduce_segments_capped"),
    /// `g1_sum_groups(in, group_len, out, n_groups)`: sums of consecutive groups.
    G1SumGroups => (Msm, "g1_sum_groups"),
    /// `g2_accumulate(bases, entries, offsets, counts, buckets, n_keys)`: as `g1_accumulate`
    /// on G2 (Fp2 coordinates).
    G2Accumulate => (MsmG2, "g2_accumulate"),
    /// `g2_accumulate_capped(..)`: as `g2_accumulate`, registers capped (4 blocks per SM).
    G2AccumulateCapped => (MsmG2, "g2_accumulate_capped"),
    /// `g2_accumulate_chunks(..)`: as `g1_accumulate_chunks` on G2.
    G2AccumulateChunks => (MsmG2, "g2_accumulate_chunks"),
    /// `g2_accumulate_chunks_affine(..)`: as `g1_accumulate_chunks_affine` on G2, 32 streams
    /// (`chunk_len` a multiple of 32).
    G2AccumulateChunksAffine => (MsmG2, "g2_accumulate_chunks_affine"),
    /// `g2_fixup_groups(..)`: as `g1_fixup_groups` on G2.
    G2FixupGroups => (MsmG2, "g2_fixup_groups"),
    /// `g2_fixup_buckets(..)`: as `g1_fixup_buckets` on G2.
    G2FixupBuckets => (MsmG2, "g2_fixup_buckets"),
    /// `g2_reduce_segments(buckets, n_buckets, seg_len, n_segments, ones_window, out, n)`.
    G2ReduceSegments => (MsmG2, "g2_reduce_segments"),
    /// `g2_sum_groups(in, group_len, out, n_groups)`.
    G2SumGroups => (MsmG2, "g2_sum_groups"),
    /// `ntt_pass_dif(Fr* data, const Fr* tw, u32 tw_log, u32 lo, u32 s, u32 clog, u32 inverse,
    /// ScaleArgs pre, ScaleArgs post)`: DIF stages over index bits [lo, lo + s) in shared
    /// memory, with optional scaling on load (`pre`) and store (`post`).
    NttPassDif => (Ntt, "ntt_pass_dif"),
    /// `ntt_pass_dit(..)`: as `ntt_pass_dif`, DIT stages (bit-reversed in, natural out).
    NttPassDit => (Ntt, "ntt_pass_dit"),
    /// `ntt_pass_dif_bit0(..)`: as `ntt_pass_dif` for the pass over bits `[0, s)` (`lo = 0`,
    /// `clog = 0`): butterflies sharing a twiddle run in the same warps (those of exponent 0
    /// skip the product), on a swizzled tile.
    NttPassDifBit0 => (Ntt, "ntt_pass_dif_bit0"),
    /// `ntt_pass_dit_bit0(..)`: as `ntt_pass_dit`, for the bit-0 pass as `ntt_pass_dif_bit0`.
    NttPassDitBit0 => (Ntt, "ntt_pass_dit_bit0"),
    /// `ntt_twiddles(Fr* tw, const Fr* lo, const Fr* hi, u32 lo_bits, u32 count)`.
    NttTwiddles => (Ntt, "ntt_twiddles"),
    /// `ntt_scale(Fr* data, lo, hi, u32 lo_bits, u32 lo_mask, u32 hi_mask, u32 log_n,
    /// u32 bitrev, u32 n)`: multiply by powers of a base.
    NttScale => (Ntt, "ntt_scale"),
    /// `ntt_bitrev(Fr* data, u32 log_n, u32 n)`: in-place bit-reversal permutation.
    NttBitrev => (Ntt, "ntt_bitrev"),
    /// `ntt_abc(Fr* a, const Fr* b, const Fr* c, const Fr* z_inv, u32 n)`: a = (a b - c) z_inv.
    NttAbc => (Ntt, "ntt_abc"),
    /// `ntt_ab(Fr* a, const Fr* b, u32 n)`: a = a b, elementwise.
    NttAb => (Ntt, "ntt_ab"),
    /// `ntt_bitrev_scale_sub(Fr* out, const Fr* in, const Fr* sub, const Fr* k, lo, hi,
    /// u32 lo_bits, u32 lo_mask, u32 hi_mask, u32 log_n, u32 n)`:
    /// `out[i] = in[rev(i)] * base^i - sub[rev(i)] * k[0]`.
    NttBitrevScaleSub => (Ntt, "ntt_bitrev_scale_sub"),
    /// `pce_eval(Fr* out, u32 m, u32 n_rows, const u64* block_ptr, const u8* row_len,
    /// const u64* long_row, const u64* long_len, u32 n_long, const u32* cols, const u8* codes,
    /// u32 code_bytes, u64 n_nonzeros, const Fr* table, u32 n_table, const Fr* w, u32 n_inputs,
    /// u32 n_aux, u64* long_start, u32* status)`: one PCE matrix times the witness
    /// (`aux ++ inputs`), blocks of 256 threads, one per row block; rows past `n_rows`
    /// zero; long rows left to `pce_eval_long` (their starts written to `long_start`); a
    /// damaged matrix sets `status[1]`.
    PceEval => (Pce, "pce_eval"),
    /// `pce_eval_long(Fr* out, u32 n_rows, const u64* long_row, const u64* long_len,
    /// const u64* long_start, u32 n_long, const u32* cols, const u8* codes, u32 code_bytes,
    /// u64 n_nonzeros, const Fr* table, u32 n_table, const Fr* w, u32 n_inputs, u32 n_aux,
    /// u32* status)`: the long rows `pce_eval` left, a warp each.
    PceEvalLong => (Pce, "pce_eval_long"),
    /// `pce_eval_batched(..)`: as `pce_eval`, each row's terms four at a time (their
    /// loads issued together).
    PceEvalBatched => (Pce, "pce_eval_batched"),
    /// `pce_check(const Fr* a, const Fr* b, const Fr* c, u32 n, u32* status)`: `status[0]`
    /// becomes the least `i` with `a[i]·b[i] ≠ c[i]` (left as is when none).
    PceCheck => (Pce, "pce_check"),
}

#[cfg(test)]
mod constants_check;

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `ptx` defines a kernel named exactly `name` (`.entry name(`).
    fn defines_entry(ptx: &str, name: &str) -> bool {
        ptx.lines().any(|line| {
            line.split_once(".entry ")
                .map(|(_, rest)| {
                    rest.trim_start()
                        .strip_prefix(name)
                        .is_some_and(|tail| tail.starts_with('(') || tail.trim().is_empty())
                })
                .unwrap_or(false)
        })
    }

    #[test]
    #[cfg(not(feature = "external-ptx"))]
    fn every_entry_is_defined_in_its_module() {
        let texts: Vec<(Module, String)> =
            Module::ALL.iter().map(|m| (*m, m.ptx().unwrap())).collect();
        for entry in Entry::ALL {
            let ptx = &texts.iter().find(|(m, _)| *m == entry.module()).unwrap().1;
            assert!(
                defines_entry(ptx, entry.name()),
                "entry {} not found in {}.ptx: run `cargo xtask kernels`",
                entry.name(),
                entry.module().name()
            );
        }
    }

    #[test]
    #[cfg(not(feature = "external-ptx"))]
    fn entry_lookup_is_exact() {
        // `fp_mul` must not match `fp_mul_chain`, nor an absent name match anything.
        let ptx = Module::FieldTest.ptx().unwrap();
        assert!(defines_entry(&ptx, "fp_mul"));
        assert!(!defines_entry(&ptx, "fp_mu"));
        assert!(!defines_entry(&ptx, "fp_mul_cha"));
    }

    #[test]
    #[cfg(not(feature = "external-ptx"))]
    fn every_module_is_ptx_for_sm_90() {
        for module in Module::ALL {
            let ptx = module.ptx().unwrap();
            assert!(
                ptx.contains(".target sm_90"),
                "{} is not sm_90 PTX",
                module.name()
            );
            assert!(
                ptx.contains(".version"),
                "{} has no .version",
                module.name()
            );
        }
    }

    #[test]
    fn damaged_ptx_is_an_error_not_a_panic() {
        let good = miniz_oxide::deflate::compress_to_vec_zlib(b".version 9.0", 6);
        assert_eq!(inflate(Module::Ntt, &good).unwrap(), ".version 9.0");
        let mut bad = good.clone();
        bad.truncate(bad.len() / 2);
        assert!(matches!(
            inflate(Module::Ntt, &bad),
            Err(PtxError::Corrupt { module: "ntt", .. })
        ));
        let not_utf8 = miniz_oxide::deflate::compress_to_vec_zlib(&[0xff, 0xfe], 6);
        assert!(inflate(Module::Msm, &not_utf8).is_err());
    }

    #[test]
    #[cfg(feature = "external-ptx")]
    fn external_ptx_needs_its_directory() {
        if std::env::var_os(PTX_DIR_VAR).is_none() {
            assert_eq!(Module::Ntt.ptx(), Err(PtxError::NoDirectory));
            assert_eq!(Module::Ntt.cubin_sm90(), Err(PtxError::NoDirectory));
        } else {
            // Pointed at a directory: the text is there and is PTX, the cubin is ELF.
            assert!(Module::Ntt.ptx().unwrap().contains(".target sm_90"));
            assert_eq!(&Module::Ntt.cubin_sm90().unwrap()[..4], b"\x7fELF");
        }
    }

    #[test]
    #[cfg(not(feature = "external-ptx"))]
    fn every_module_has_an_sm_90_cubin() {
        for module in Module::ALL {
            let bin = module.cubin_sm90().unwrap();
            // ELF, 64-bit, and the entries are in its symbol table.
            assert_eq!(&bin[..5], b"\x7fELF\x02", "{}", module.name());
            for entry in Entry::ALL.iter().filter(|e| e.module() == *module) {
                let name = entry.name().as_bytes();
                assert!(
                    bin.windows(name.len() + 1)
                        .any(|w| &w[..name.len()] == name && w[name.len()] == 0),
                    "{} not in {}'s cubin",
                    entry.name(),
                    module.name()
                );
            }
        }
    }

    #[test]
    fn names_are_unique() {
        let mut names: Vec<&str> = Entry::ALL.iter().map(|e| e.name()).collect();
        names.sort_unstable();
        let n = names.len();
        names.dedup();
        assert_eq!(names.len(), n, "duplicate entry names");
    }
}
