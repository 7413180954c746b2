// The grid-stride wrapper and the point-kernel macro shared by msm.cu (G1 over Fp) and
// msm_g2.cu (G2 over Fp2). They live in two modules so that a G1-only change does not
// recompile the slow G2 PTX (nvcc ~10 minutes on a 2-core machine) and vice versa.
#pragma once
#include <stdint.h>

#include "msm.cuh"

#define GRID_STRIDE(i, n) \
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += gridDim.x * blockDim.x)

// Point kernels of one curve: G is the name prefix (g1, g2), F the coordinate field.
//   <G>_accumulate(bases, entries, offsets, counts, buckets, n_keys)
//   <G>_accumulate_capped(...)   the same, registers capped (4 blocks of 128 per SM)
//   <G>_accumulate_chunks(bases, entries, offsets, counts, n_keys, chunk_len, buckets,
//                         partials, n_chunks)   one thread per chunk_len sorted entries
//   <G>_fixup_groups(offsets, counts, n_keys, chunk_len, group, partials, n_chunks)
//   <G>_fixup_buckets(offsets, counts, n_keys, chunk_len, group, partials, buckets, n_chunks)
//   <G>_reduce_segments(buckets, n_buckets, seg_len, n_segments, ones_window, out, n_threads)
//   <G>_sum_groups(in, group_len, out, n_groups)
// ptxas register counts and spills per curve are recorded in cuda-kernels/NOTES.md.
#define POINT_KERNELS(G, F)                                                                   \
  extern "C" __global__ void __launch_bounds__(128)                                           \
      G##_accumulate(const pinion::Affine<F>* bases, const uint32_t* entries,                 \
                     const uint32_t* offsets, const uint32_t* counts,                         \
                     pinion::Xyzz<F>* buckets, uint32_t n_keys) {                             \
    GRID_STRIDE(k, n_keys)                                                                    \
    pinion::msm::accumulate_body(bases, entries, offsets, counts, buckets, k);                \
  }                                                                                           \
  /* Same body, registers capped so that 4 blocks (16 warps) fit an SM: more warps to hide   \
     the latency of the random base loads, at the price of a few spills. */                  \
  extern "C" __global__ void __launch_bounds__(128, 4)                                        \
      G##_accumulate_capped(const pinion::Affine<F>* bases, const uint32_t* entries,          \
                            const uint32_t* offsets, const uint32_t* counts,                  \
                            pinion::Xyzz<F>* buckets, uint32_t n_keys) {                      \
    GRID_STRIDE(k, n_keys)                                                                    \
    pinion::msm::accumulate_body(bases, entries, offsets, counts, buckets, k);                \
  }                                                                                           \
  /* Chunked accumulation (msm.cuh): one thread per L sorted entries, then the two         \
     fix-up kernels for buckets that cross chunk boundaries. */                             \
  extern "C" __global__ void __launch_bounds__(128)                                           \
      G##_accumulate_chunks(const pinion::Affine<F>* bases, const uint32_t* entries,          \
                            const uint32_t* offsets, const uint32_t* counts, uint32_t n_keys, \
                            uint32_t chunk_len, pinion::Xyzz<F>* buckets,                     \
                            pinion::Xyzz<F>* partials, uint32_t n_chunks) {                   \
    GRID_STRIDE(t, n_chunks)                                                                  \
    pinion::msm::accumulate_chunk_body(bases, entries, offsets, counts, n_keys, chunk_len,    \
                                       buckets, partials, t);                                 \
  }                                                                                           \
  extern "C" __global__ void __launch_bounds__(128)                                           \
      G##_fixup_groups(const uint32_t* offsets, const uint32_t* counts, uint32_t n_keys,      \
                       uint32_t chunk_len, uint32_t group, pinion::Xyzz<F>* partials,         \
                       uint32_t n_chunks) {                                                   \
    GRID_STRIDE(t, n_chunks)                                                                  \
    pinion::msm::fixup_groups_body(offsets, counts, n_keys, chunk_len, group, partials, t);   \
  }                                                                                           \
  extern "C" __global__ void __launch_bounds__(128)                                           \
      G##_fixup_buckets(const uint32_t* offsets, const uint32_t* counts, uint32_t n_keys,     \
                        uint32_t chunk_len, uint32_t group, const pinion::Xyzz<F>* partials,  \
                        pinion::Xyzz<F>* buckets, uint32_t n_chunks) {                        \
    GRID_STRIDE(t, n_chunks)                                                                  \
    pinion::msm::fixup_buckets_body(offsets, counts, n_keys, chunk_len, group, partials,      \
                                    buckets, t);                                              \
  }                                                                                           \
  extern "C" __global__ void __launch_bounds__(128)                                           \
      G##_reduce_segments(const pinion::Xyzz<F>* buckets, uint32_t n_buckets,                 \
                          uint32_t seg_len, uint32_t n_segments, uint32_t ones_window,        \
                          pinion::Xyzz<F>* out, uint32_t n_threads) {                         \
    GRID_STRIDE(t, n_threads)                                                                 \
    pinion::msm::reduce_segments_body(buckets, n_buckets, seg_len, n_segments, ones_window,   \
                                      out, t);                                                \
  }                                                                                           \
  extern "C" __global__ void __launch_bounds__(128)                                           \
      G##_sum_groups(const pinion::Xyzz<F>* in, uint32_t group_len, pinion::Xyzz<F>* out,     \
                     uint32_t n_groups) {                                                     \
    GRID_STRIDE(g, n_groups) pinion::msm::sum_groups_body(in, group_len, out, g);             \
  }
