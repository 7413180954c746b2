// Pippenger multi-scalar multiplication on G1 (G2's point kernels are in msm_g2.cu): the
// kernels of the pipeline in include/msm.cuh, each a grid-stride loop over its threads' bodies.
// The launch order, buffer sizes and window parameters are chosen by crates/gpu-msm/src/gpu.rs.
//
// Scalar kernels (shared by G1 and G2):
//   msm_from_montgomery(u32* scalars, u32 n)                         in place, to canonical
//   msm_count(const u32* scalars, u32 n, u32 c, u32 W, u32* counts)
//   msm_chunk_sums(const u32* counts, u32 n_keys, u32 chunk, u32* chunk_sums)
//   msm_scan_chunks(u32* chunk_sums, u32 n_chunks)                   one thread
//   msm_scan_apply(const u32* counts, u32 n_keys, u32 chunk, const u32* chunk_sums,
//                  u32* offsets, u32* cursors)
//   msm_scatter(const u32* scalars, u32 n, u32 c, u32 W, u32 w_lo, u32 w_hi, u32* cursors,
//               u32* entries)                                      windows [w_lo, w_hi)
//   msm_classify(const u32* scalars, u32 n, u32* classes)           counts of 1s and others
//   msm_bin_count(scalars, n, c, W, fine_log, n_bins, chunk, bin_counts)   the two-level
//   msm_bin_place(scalars, n, c, W, w_lo, w_hi, fine_log, bin_lo, n_bins,  sort (an
//                 chunk, bin_cursors, tmp_entries, u16* tmp_low)           experiment, off
//   msm_bin_place_staged(..., chunk, cap, bin_cursors, tmp_entries, tmp_low)
//   msm_bin_sort(tmp_entries, tmp_low, bin_offsets, bin_counts, fine_log,  by default)
//                entries, offsets, counts)
//   msm_select(const u32* src, u32 n, const u64* mask, const u32* word_offsets, u32* dst)
//                                                                    compaction by a mask
//   g1_expand_bases(const u32* compact, u32 n_mask, u32 len, const u64* mask,
//                   const u32* word_offsets, u32* out)  its inverse for G1 points
//   msm_count_shared(scalars, n, c, W, stride, counts)              shared buckets (two
//   msm_scatter_shared(scalars, n, c, W, stride, key_lo, key_hi,    groups: |d|, the ones);
//                      cursors, entries)                             keys [key_lo, key_hi)
//   g1_precompute_windows(const G1Affine* bases, u32 n, u32 c, u32 W, G1Affine* table)
//                                                  table[w n + i] = 2^(c w) bases[i]
// Point kernels (g1_ here, g2_ in msm_g2.cu; the macro is in include/msm_kernels.cuh):
//   <g>_accumulate(const Affine* bases, const u32* entries, const u32* offsets,
//                  const u32* counts, Xyzz* buckets, u32 n_keys)
//   <g>_accumulate_capped(...)   the same, registers capped at 128 (4 blocks per SM)
//   <g>_accumulate_chunks(bases, entries, offsets, counts, n_keys, chunk_len, buckets,
//                         partials, n_chunks)  one thread per chunk_len sorted entries
//   g1_accumulate_chunks_capped(...)  the same, registers capped at 128 (G1 only)
//   <g>_fixup_groups(offsets, counts, n_keys, chunk_len, group, partials, n_chunks)
//   <g>_fixup_buckets(offsets, counts, n_keys, chunk_len, group, partials, buckets,
//                     n_chunks)  buckets that cross chunk boundaries
//   <g>_reduce_segments(const Xyzz* buckets, u32 n_buckets, u32 seg_len, u32 n_segments,
//                       u32 ones_window, Xyzz* out, u32 n_threads)
//   <g>_sum_groups(const Xyzz* in, u32 group_len, Xyzz* out, u32 n_groups)
#include <stdint.h>

#include "msm_affine.cuh"
#include "msm_kernels.cuh"
#include "msm_precompute.cuh"
#include "msm_scalars.cuh"

using namespace pinion;
using namespace pinion::msm;

extern "C" __global__ void msm_from_montgomery(uint32_t* scalars, uint32_t n) {
  GRID_STRIDE(i, n) from_montgomery_body(scalars, i);
}

extern "C" __global__ void msm_count(const uint32_t* scalars, uint32_t n, uint32_t c,
                                     uint32_t n_windows, uint32_t* counts) {
  GRID_STRIDE(i, n) count_body(scalars, Windows{c, n_windows}, counts, i);
}

extern "C" __global__ void msm_chunk_sums(const uint32_t* counts, uint32_t n_keys,
                                          uint32_t chunk, uint32_t* chunk_sums) {
  const uint32_t n_chunks = (n_keys + chunk - 1) / chunk;
  GRID_STRIDE(t, n_chunks) chunk_sum_body(counts, n_keys, chunk, chunk_sums, t);
}

extern "C" __global__ void msm_scan_chunks(uint32_t* chunk_sums, uint32_t n_chunks) {
  if (blockIdx.x == 0 && threadIdx.x == 0) scan_chunks_body(chunk_sums, n_chunks);
}

extern "C" __global__ void msm_scan_apply(const uint32_t* counts, uint32_t n_keys,
                                          uint32_t chunk, const uint32_t* chunk_sums,
                                          uint32_t* offsets, uint32_t* cursors) {
  const uint32_t n_chunks = (n_keys + chunk - 1) / chunk;
  GRID_STRIDE(t, n_chunks) scan_apply_body(counts, n_keys, chunk, chunk_sums, offsets, cursors, t);
}

extern "C" __global__ void msm_scatter(const uint32_t* scalars, uint32_t n, uint32_t c,
                                       uint32_t n_windows, uint32_t w_lo, uint32_t w_hi,
                                       uint32_t* cursors, uint32_t* entries) {
  GRID_STRIDE(i, n) scatter_body(scalars, Windows{c, n_windows}, w_lo, w_hi, cursors, entries, i);
}

// The two-level sort (msm_scalars.cuh; gpu.rs's SortKind::TwoLevel): block b takes scalars
// [b * chunk, (b + 1) * chunk); dynamic shared memory n_bins words (bin_count; bin_place:
// the bins of its windows [w_lo, w_hi), from bin_lo) or
// 2^fine_log + blockDim.x words (bin_sort, one block a bin).
extern "C" __global__ void msm_bin_count(const uint32_t* scalars, uint32_t n, uint32_t c,
                                         uint32_t n_windows, uint32_t fine_log, uint32_t n_bins,
                                         uint32_t chunk, uint32_t* bin_counts) {
  extern __shared__ uint32_t hist[];
  const uint32_t first = blockIdx.x * chunk, last = min_u32(n, first + chunk);
  bin_count_block(scalars, first, last, Windows{c, n_windows}, fine_log, n_bins, hist,
                  bin_counts, threadIdx.x, blockDim.x, [] { __syncthreads(); });
}

extern "C" __global__ void msm_bin_place(const uint32_t* scalars, uint32_t n, uint32_t c,
                                         uint32_t n_windows, uint32_t w_lo, uint32_t w_hi,
                                         uint32_t fine_log, uint32_t bin_lo, uint32_t n_bins,
                                         uint32_t chunk, uint32_t* bin_cursors,
                                         uint32_t* tmp_entries, uint16_t* tmp_low) {
  extern __shared__ uint32_t hist[];
  const uint32_t first = blockIdx.x * chunk, last = min_u32(n, first + chunk);
  bin_place_block(scalars, first, last, Windows{c, n_windows}, w_lo, w_hi, fine_log, bin_lo,
                  n_bins, hist, bin_cursors, tmp_entries, tmp_low, threadIdx.x, blockDim.x,
                  [] { __syncthreads(); });
}

// bin_place staged (bin_place_staged_block): dynamic shared memory 3 n_bins + blockDim.x +
// 2 cap words, cap >= chunk (w_hi - w_lo).
extern "C" __global__ void msm_bin_place_staged(const uint32_t* scalars, uint32_t n, uint32_t c,
                                                uint32_t n_windows, uint32_t w_lo,
                                                uint32_t w_hi, uint32_t fine_log,
                                                uint32_t bin_lo, uint32_t n_bins,
                                                uint32_t chunk, uint32_t cap,
                                                uint32_t* bin_cursors, uint32_t* tmp_entries,
                                                uint16_t* tmp_low) {
  extern __shared__ uint32_t sh[];
  const uint32_t first = blockIdx.x * chunk, last = min_u32(n, first + chunk);
  uint32_t* hist = sh;
  uint32_t* base = hist + n_bins;
  uint32_t* run = base + n_bins;
  uint32_t* part = run + n_bins;
  uint32_t* stage_entry = part + blockDim.x;
  uint32_t* stage_key = stage_entry + cap;
  bin_place_staged_block(scalars, first, last, Windows{c, n_windows}, w_lo, w_hi, fine_log,
                         bin_lo, n_bins, hist, base, run, part, stage_entry, stage_key,
                         bin_cursors, tmp_entries, tmp_low, threadIdx.x, blockDim.x,
                         [] { __syncthreads(); });
}

extern "C" __global__ void msm_bin_sort(const uint32_t* tmp_entries, const uint16_t* tmp_low,
                                        const uint32_t* bin_offsets, const uint32_t* bin_counts,
                                        uint32_t fine_log, uint32_t* entries, uint32_t* offsets,
                                        uint32_t* counts) {
  extern __shared__ uint32_t cnt[];
  bin_sort_block(tmp_entries, tmp_low, bin_offsets, bin_counts, blockIdx.x, fine_log, cnt,
                 cnt + (1u << fine_log), entries, offsets, counts, threadIdx.x, blockDim.x,
                 [] { __syncthreads(); });
}

// Whole warps: the loop runs while any lane of the warp has a scalar (the ballots need
// every lane).
extern "C" __global__ void msm_classify(const uint32_t* scalars, uint32_t n, uint32_t* classes) {
  const uint32_t stride = gridDim.x * blockDim.x;
  for (uint32_t base = blockIdx.x * blockDim.x; base < n; base += stride) {
    classify_body(scalars, n, classes, base + threadIdx.x);
  }
}

// Shared buckets over a table of precomputed windows (msm_precompute.cuh): the count and
// the scatter of for_each_digit<true> (keys |d| - 1 for every window, B + (i mod B) for the
// ones; entries w * stride + i), all W + 1 windows in one launch; a scatter launch writes
// the entries of keys [key_lo, key_hi) (the host splits the keys over launches).
extern "C" __global__ void msm_count_shared(const uint32_t* scalars, uint32_t n, uint32_t c,
                                            uint32_t n_windows, uint32_t stride,
                                            uint32_t* counts) {
  GRID_STRIDE(i, n) count_body<true>(scalars, Windows{c, n_windows, stride}, counts, i);
}

extern "C" __global__ void msm_scatter_shared(const uint32_t* scalars, uint32_t n, uint32_t c,
                                              uint32_t n_windows, uint32_t stride,
                                              uint32_t key_lo, uint32_t key_hi,
                                              uint32_t* cursors, uint32_t* entries) {
  GRID_STRIDE(i, n) {
    scatter_shared_body(scalars, Windows{c, n_windows, stride}, key_lo, key_hi, cursors,
                        entries, i);
  }
}

// table[w * n + i] = 2^(c w) bases[i] for w < n_windows (affine; one thread a base).
extern "C" __global__ void g1_precompute_windows(const G1Affine* bases, uint32_t n, uint32_t c,
                                                 uint32_t n_windows, G1Affine* table) {
  GRID_STRIDE(i, n) precompute_windows_body(bases, n, c, n_windows, table, i);
}

// The scalars a density mask selects, packed in order (select_body, msm_scalars.cuh).
extern "C" __global__ void msm_select(const uint32_t* src, uint32_t n, const uint64_t* mask,
                                      const uint32_t* word_offsets, uint32_t* dst) {
  GRID_STRIDE(i, n) select_body(src, mask, word_offsets, dst, i);
}

// A sparse query's G1 bases one per scalar (expand_body, msm_scalars.cuh): out[i] is the
// k-th compact point where bit i is the k-th set bit of the mask, the point at infinity
// elsewhere and from n_mask to len; one thread an output point.
extern "C" __global__ void g1_expand_bases(const uint32_t* compact, uint32_t n_mask, uint32_t len,
                                           const uint64_t* mask, const uint32_t* word_offsets,
                                           uint32_t* out) {
  GRID_STRIDE(i, len) expand_body<6>(compact, n_mask, mask, word_offsets, out, i);
}

POINT_KERNELS(g1, Fp)

// G1 segment reduction with registers capped for 3 blocks of 128 per SM (168 registers and
// some spills, against 254 uncapped): with 2048 segments per window it runs 17 x 2048
// threads in one wave, twice the threads of the uncapped kernel at 1024 segments.
extern "C" __global__ void __launch_bounds__(128, 3)
    g1_reduce_segments_capped(const Xyzz<Fp>* buckets, uint32_t n_buckets, uint32_t seg_len,
                              uint32_t n_segments, uint32_t ones_window, Xyzz<Fp>* out,
                              uint32_t n_threads) {
  GRID_STRIDE(t, n_threads)
  reduce_segments_body(buckets, n_buckets, seg_len, n_segments, ones_window, out, t);
}
// G1 chunked accumulation with registers capped for 4 blocks of 128 per SM.
extern "C" __global__ void __launch_bounds__(128, 4)
    g1_accumulate_chunks_capped(const Affine<Fp>* bases, const uint32_t* entries,
                                const uint32_t* offsets, const uint32_t* counts, uint32_t n_keys,
                                uint32_t chunk_len, Xyzz<Fp>* buckets, Xyzz<Fp>* partials,
                                uint32_t n_chunks) {
  GRID_STRIDE(t, n_chunks)
  accumulate_chunk_body(bases, entries, offsets, counts, n_keys, chunk_len, buckets, partials, t);
}
// G2 lives in msm_g2.cu (its own PTX module: its PTX alone takes nvcc ~10 minutes).

// Affine accumulation with batched inversions (msm_affine.cuh): chunk_len must be a
// multiple of 64, the streams per thread. Registers capped for 4 blocks of 128 per SM (160
// uncapped, 3 blocks): faster despite the spills (session 23).
AFFINE_KERNEL(g1, Fp, 64, 4)
