// Pippenger MSM pipeline, one function per kernel thread (msm.cu wraps each in a
// grid-stride kernel). This header holds what both curves' point kernels use (msm.cu and
// msm_g2.cu include it through msm_kernels.cuh); the scalar kernels' bodies (digits,
// counting sort, classes, Montgomery conversion) are in msm_scalars.cuh, which only msm.cu
// includes, so that changing them does not rebuild the G2 module. The bodies take the
// thread index and use atomics only through atomic_inc, so a host build with
// PINION_HOST_EMULATION runs them serially: tools/msm_sort_emu.cpp (the scalar side) and
// tools/msm_emu.cpp (the accumulation), besides the GPU tests in crates/gpu-msm/tests.
//
// Scalars: canonical little-endian 256-bit integers (8 u32 words, < r < 2^255).
// Windows: c bits, W = ceil(256/c) signed digits in [-2^(c-1), 2^(c-1)] (cW >= 256, so the
// top digit never carries out), B = 2^(c-1) buckets per window for |digit| = 1..B.
// Scalars 0 are skipped; scalars 1 skip the windows and go to an extra "ones" window W,
// spread over its B buckets by index (i mod B), whose buckets are summed unweighted.
//
// Bucket assignment is a counting sort by key k = w*B + bucket over (W+1)*B keys:
//   count   : counts[k] += 1 for each nonzero digit        (atomics)
//   scan    : offsets = exclusive prefix sum of counts; cursors = offsets
//   scatter : entries[cursors[k]++] = point index | sign << 31  (atomics; order inside a
//             bucket is arbitrary, which the group law does not see)
// (or the two-level sort of msm_scalars.cuh, which leaves the same entries, offsets and
// counts with one global atomic per block and bin instead of per entry)
// then accumulate (one thread per bucket, XYZZ += affine), reduce_segments (one thread
// per run of L buckets: sum_k k*S_k by running sums, plus the run's offset times its
// total) and sum_groups (tree levels in global memory, fan-in chosen by the host). The host
// reads the W+1 window sums in XYZZ, makes them affine with one shared inversion and
// combines them by doubling (Horner).
#pragma once
#include "curve.cuh"

namespace pinion {
namespace msm {

#if defined(PINION_HOST_EMULATION)
// Real atomics, so that an emulator may run a block's threads as host threads.
inline uint32_t atomic_inc(uint32_t* p) { return __atomic_fetch_add(p, 1u, __ATOMIC_RELAXED); }
inline uint32_t atomic_add(uint32_t* p, uint32_t v) {
  return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}
#else
__device__ __forceinline__ uint32_t atomic_inc(uint32_t* p) { return atomicAdd(p, 1u); }
__device__ __forceinline__ uint32_t atomic_add(uint32_t* p, uint32_t v) { return atomicAdd(p, v); }
#endif

constexpr uint32_t SIGN_BIT = 0x80000000u;

__device__ __forceinline__ uint32_t min_u32(uint32_t a, uint32_t b) { return a < b ? a : b; }

// Bucket k = sum of its entries' bases (negated for negative digits); bases at infinity
// (all-zero) are skipped.
template <class F>
__device__ __forceinline__ void accumulate_body(const Affine<F>* bases, const uint32_t* entries,
                                                const uint32_t* offsets, const uint32_t* counts,
                                                Xyzz<F>* buckets, uint32_t k) {
  Xyzz<F> acc = xyzz_infinity<F>();
  const uint32_t begin = offsets[k], end = begin + counts[k];
  for (uint32_t e = begin; e < end; ++e) {
    const uint32_t entry = entries[e];
    Affine<F> q = affine_load(bases + (entry & ~SIGN_BIT));
    if (affine_is_inf(q)) continue;
    if (entry & SIGN_BIT) q.y = f_neg(q.y);
    acc = xyzz_add_affine(acc, q);
  }
  xyzz_store(buckets + k, acc);
}

// ---- Chunked accumulation ------------------------------------------------------------
// The sorted entry list (T = offsets[n_keys-1] + counts[n_keys-1] entries) is cut into
// chunks of L consecutive entries, one thread per chunk, whatever the buckets' sizes: every
// thread adds the same number of points (no warp waits on its longest bucket, and a bucket
// of a million equal digits is spread over many threads). A bucket wholly inside chunk t is
// written by t; a bucket crossing chunk boundaries leaves partial sums:
//   partials[2t]     the part of the bucket that began before chunk t (its "head" part)
//   partials[2t + 1] the part of the bucket that begins in chunk t and goes on after it.
// fixup_groups sums the head parts of consecutive chunks in runs of at most G chunks (one
// thread per run, written to the run's first slot), then fixup_buckets (one thread per
// bucket that begins in a chunk and crosses its end) adds its partials[2t+1] and its run
// sums: a bucket of m entries costs m/L additions across fixup_groups threads and m/(L*G)
// in one fixup_buckets thread.

__device__ __forceinline__ uint32_t total_entries(const uint32_t* offsets, const uint32_t* counts,
                                                  uint32_t n_keys) {
  return offsets[n_keys - 1] + counts[n_keys - 1];
}

// The bucket holding sorted entry e < T: the largest k with offsets[k] <= e (empty buckets
// share their offset with the next bucket, so the largest such k is not empty).
__device__ __forceinline__ uint32_t bucket_of(const uint32_t* offsets, uint32_t n_keys,
                                              uint32_t e) {
  uint32_t lo = 0, hi = n_keys - 1;
  while (lo < hi) {
    const uint32_t mid = hi - ((hi - lo) >> 1);
    if (offsets[mid] <= e) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// Entries [t*L, min((t+1)*L, T)). (Loading the next base ahead of each addition was
// measured slower on the H200: docs/benchmarks.md, session 9.)
template <class F>
__device__ __forceinline__ void accumulate_chunk_body(const Affine<F>* bases,
                                                      const uint32_t* entries,
                                                      const uint32_t* offsets,
                                                      const uint32_t* counts, uint32_t n_keys,
                                                      uint32_t chunk_len, Xyzz<F>* buckets,
                                                      Xyzz<F>* partials, uint32_t t) {
  const uint32_t total = total_entries(offsets, counts, n_keys);
  const uint64_t first = (uint64_t)t * chunk_len;
  if (first >= total) return;
  const uint32_t e0 = (uint32_t)first;
  const uint32_t e1 = min_u32(total - e0, chunk_len) + e0;
  uint32_t k = bucket_of(offsets, n_keys, e0);
  uint32_t begin = offsets[k];
  uint32_t end = begin + counts[k];
  Xyzz<F> acc = xyzz_infinity<F>();
  for (uint32_t e = e0; e < e1; ++e) {
    const uint32_t entry = entries[e];
    Affine<F> q = affine_load(bases + (entry & ~SIGN_BIT));
    if (e == end) {
      // Bucket k ended before e: it began before e0 (head part) or inside this chunk
      // (complete).
      if (begin < e0) {
        xyzz_store(partials + 2 * (size_t)t, acc);
      } else {
        xyzz_store(buckets + k, acc);
      }
      do {
        ++k;
      } while (counts[k] == 0);
      begin = offsets[k];
      end = begin + counts[k];
      acc = xyzz_infinity<F>();
    }
    if (!affine_is_inf(q)) {
      if (entry & SIGN_BIT) q.y = f_neg(q.y);
      acc = xyzz_add_affine(acc, q);
    }
  }
  // The last bucket touched: complete, a head part, or a part that goes on after e1.
  if (begin < e0) {
    xyzz_store(partials + 2 * (size_t)t, acc);
  } else if (end <= e1) {
    xyzz_store(buckets + k, acc);
  } else {
    xyzz_store(partials + 2 * (size_t)t + 1, acc);
  }
}

// Thread t = chunk t: if chunk t holds a head part and starts a run (t is a multiple of G,
// or the bucket began in chunk t - 1), sums the head parts of chunks t.. up to the run's end
// (the next multiple of G or the bucket's last chunk) into partials[2t].
template <class F>
__device__ __forceinline__ void fixup_groups_body(const uint32_t* offsets, const uint32_t* counts,
                                                  uint32_t n_keys, uint32_t chunk_len,
                                                  uint32_t group, Xyzz<F>* partials,
                                                  uint32_t t) {
  const uint32_t total = total_entries(offsets, counts, n_keys);
  const uint64_t first = (uint64_t)t * chunk_len;
  if (first >= total) return;
  const uint32_t k = bucket_of(offsets, n_keys, (uint32_t)first);
  const uint32_t begin = offsets[k];
  if (begin >= first) return;  // chunk t starts with a new bucket: no head part
  if (t % group != 0 && begin / chunk_len + 1 != t) return;  // inside a run
  const uint64_t end = (uint64_t)begin + counts[k];
  Xyzz<F> acc = xyzz_load(partials + 2 * (size_t)t);
  for (uint32_t u = t + 1; u % group != 0 && (uint64_t)u * chunk_len < end; ++u) {
    acc = xyzz_add(acc, xyzz_load(partials + 2 * (size_t)u));
  }
  xyzz_store(partials + 2 * (size_t)t, acc);
}

// Thread t = chunk t: if the last bucket chunk t touches began in t and goes on after it,
// writes that bucket: partials[2t + 1] plus the run sums of the chunks it continues into.
template <class F>
__device__ __forceinline__ void fixup_buckets_body(const uint32_t* offsets, const uint32_t* counts,
                                                   uint32_t n_keys, uint32_t chunk_len,
                                                   uint32_t group, const Xyzz<F>* partials,
                                                   Xyzz<F>* buckets, uint32_t t) {
  const uint32_t total = total_entries(offsets, counts, n_keys);
  const uint64_t first = (uint64_t)t * chunk_len;
  if (first >= total) return;
  const uint32_t e0 = (uint32_t)first;
  const uint32_t e1 = min_u32(total - e0, chunk_len) + e0;
  const uint32_t k = bucket_of(offsets, n_keys, e1 - 1);
  const uint32_t begin = offsets[k];
  const uint64_t end = (uint64_t)begin + counts[k];
  if (begin < e0 || end <= e1) return;
  Xyzz<F> acc = xyzz_load(partials + 2 * (size_t)t + 1);
  for (uint32_t u = t + 1; (uint64_t)u * chunk_len < end; u = (u / group + 1) * group) {
    acc = xyzz_add(acc, xyzz_load(partials + 2 * (size_t)u));
  }
  xyzz_store(buckets + k, acc);
}

// Thread t = w*n_segments + j handles buckets [j*seg_len, (j+1)*seg_len) of window w
// (bucket b holds digit b+1). Writes sum over those b of (b+1)*S_b, or, for the ones
// window (w == ones_window), the plain sum.
template <class F>
__device__ __forceinline__ void reduce_segments_body(const Xyzz<F>* buckets, uint32_t n_buckets,
                                                     uint32_t seg_len, uint32_t n_segments,
                                                     uint32_t ones_window, Xyzz<F>* out,
                                                     uint32_t t) {
  const uint32_t w = t / n_segments, j = t % n_segments;
  const Xyzz<F>* seg = buckets + (size_t)w * n_buckets + (size_t)j * seg_len;
  Xyzz<F> running = xyzz_infinity<F>();
  Xyzz<F> weighted = xyzz_infinity<F>();
  for (uint32_t b = seg_len; b-- > 0;) {
    running = xyzz_add(running, xyzz_load(seg + b));
    if (w != ones_window) weighted = xyzz_add(weighted, running);
  }
  if (w == ones_window) {
    xyzz_store(out + t, running);
    return;
  }
  // Digit of local bucket b is j*seg_len + b + 1; the running sums gave weights b + 1.
  weighted = xyzz_add(weighted, xyzz_mul_small(running, j * seg_len));
  xyzz_store(out + t, weighted);
}

template <class F>
__device__ __forceinline__ void sum_groups_body(const Xyzz<F>* in, uint32_t group_len,
                                                Xyzz<F>* out, uint32_t g) {
  Xyzz<F> acc = xyzz_infinity<F>();
  for (uint32_t e = 0; e < group_len; ++e) acc = xyzz_add(acc, xyzz_load(in + (size_t)g * group_len + e));
  xyzz_store(out + g, acc);
}

}  // namespace msm
}  // namespace pinion
