// Chunked bucket accumulation in affine coordinates with batched inversions, one body for
// G1 (F = Fp, msm.cu) and G2 (F = Fp2, msm_g2.cu).
//
// Same contract as accumulate_chunk_body (msm.cuh): thread t takes the sorted entries
// [t*L, min((t+1)*L, T)), writes every bucket wholly inside them to `buckets`, the part of
// a bucket begun before the chunk to partials[2t] and the part of one going on after it to
// partials[2t+1]; fixup_groups / fixup_buckets then finish the crossing buckets.
//
// Inside the chunk: K streams, stream s taking the M = L/K consecutive entries
// [t*L + s*M, t*L + (s+1)*M), all K advancing one entry a step. Each stream keeps an affine
// partial sum of its current bucket; the K additions of a step are independent, so one
// inversion (Montgomery's trick: the product of the K denominators, inverted once by
// fp_inv_gcd, then unwound; on G2 the norm c0^2 + c1^2 is inverted) serves all of them. An
// affine addition then costs about 5 products and a squaring, against 8 and 2 for an XYZZ
// mixed addition. The stream sums are
// combined at the end, in order, in XYZZ (about one mixed addition per stream); a bucket
// that begins and ends inside one stream's range is written as soon as it ends.
//
// Exceptional cases are exact: a base at infinity (all-zero) is skipped; adding P to itself
// doubles (denominator 2y, numerator 3x^2); adding -P gives infinity (the stream's sum
// becomes empty); a doubling with y = 0 gives infinity. No denominator in a batch is zero,
// so no lane's result depends on another's values.
//
// Each entry's point is read once (x and y, in the first pass, which keeps it for the
// second) and the loads are software-pipelined across the streams: the point of stream
// s + 1 and the entry of stream s + 2 are in flight while stream s is handled.
//
// State per thread: 7*K field elements and 3*K words in local memory (G1's K = 64: ~22 KB;
// the driver reserves that for every thread the device can hold, GpuMsm charges it), which
// the caches and memory serve (docs/benchmarks.md, sessions 19 and 23). Nsight Compute
// (session 31) finds the kernel memory bound on that state: ~750 bytes of DRAM traffic an
// addition, the issue slots a third busy. Reading each point again in the second pass instead
// of keeping it (13-33% slower) and prefetching the streams' state ahead (2-6% slower) both
// lost (session 32; cuda-kernels/NOTES.md).
#pragma once
#include "fp_inv.cuh"
#include "msm.cuh"

namespace pinion {
namespace msm {

// The inversion a batch shares: the binary GCD on Fp; on Fp2, 1/(c0 + c1 u) =
// (c0 - c1 u) / (c0^2 + c1^2) with the norm inverted by the GCD.
__device__ __forceinline__ Fp f_inv_batch(const Fp& a) { return fp_inv_gcd(a); }
__device__ __forceinline__ Fp2 f_inv_batch(const Fp2& a) {
  const Fp ni = fp_inv_gcd(fe_add(fe_sqr(a.c0), fe_sqr(a.c1)));
  return {fp_mul_call(a.c0, ni), fe_neg(fp_mul_call(a.c1, ni))};
}

// The slope of a + b for affine a, b not at infinity: den != 0 and num, or `cancel`
// (a + b is infinity).
template <class F>
struct AffineSlope {
  F den, num;
  bool cancel;
};

template <class F>
__device__ __forceinline__ AffineSlope<F> affine_slope(const Affine<F>& a, const Affine<F>& b) {
  AffineSlope<F> s;
  s.cancel = false;
  const F d = f_sub(b.x, a.x);
  if (!f_is_zero(d)) {
    s.den = d;
    s.num = f_sub(b.y, a.y);
  } else if (f_eq(a.y, b.y) && !f_is_zero(a.y)) {
    s.den = f_add(a.y, a.y);
    const F x2 = f_sqr(a.x);
    s.num = f_add(f_add(x2, x2), x2);
  } else {
    s.den = f_one((const F*)nullptr);
    s.num = s.den;
    s.cancel = true;
  }
  return s;
}

// Writes the sum of bucket k's entries seen by chunk [e0, e1) where the chunk contract says.
template <class F>
__device__ __forceinline__ void affine_chunk_output(const uint32_t* offsets,
                                                    const uint32_t* counts, uint32_t k,
                                                    uint32_t e0, uint32_t e1,
                                                    const Xyzz<F>& acc, Xyzz<F>* buckets,
                                                    Xyzz<F>* partials, uint32_t t) {
  const uint32_t begin = offsets[k];
  const uint32_t end = begin + counts[k];
  if (begin < e0) {
    xyzz_store(partials + 2 * (size_t)t, acc);
  } else if (end <= e1) {
    xyzz_store(buckets + k, acc);
  } else {
    xyzz_store(partials + 2 * (size_t)t + 1, acc);
  }
}

template <class F>
__device__ __forceinline__ Xyzz<F> xyzz_of_affine(const Affine<F>& a) {
  const F one = f_one((const F*)nullptr);
  return {a.x, a.y, one, one};
}

// K <= 64 streams; chunk_len a multiple of K (the host's plan guarantees it).
template <int K, class F>
__device__ __forceinline__ void accumulate_chunk_affine_body(
    const Affine<F>* bases, const uint32_t* entries, const uint32_t* offsets,
    const uint32_t* counts, uint32_t n_keys, uint32_t chunk_len, Xyzz<F>* buckets,
    Xyzz<F>* partials, uint32_t t) {
  static_assert(K >= 1 && K <= 64, "streams are tracked in 64-bit masks");
  const uint32_t total = total_entries(offsets, counts, n_keys);
  const uint64_t first = (uint64_t)t * chunk_len;
  if (first >= total) return;
  const uint32_t e0 = (uint32_t)first;
  const uint32_t e1 = min_u32(total - e0, chunk_len) + e0;
  const uint32_t m = chunk_len / K;

  F ax[K], ay[K], pref[K], bx[K], by[K], hx[K], hy[K];
  uint32_t kb[K], kend[K], hk[K];
  uint64_t live = 0;       // stream s's current sum is not infinity
  uint64_t crossed = 0;    // stream s has finished its first segment (its head)
  uint64_t head_live = 0;  // that head is not infinity
  const uint32_t n_streams = min_u32((e1 - e0 + m - 1) / m, K);

  // Each stream's first bucket, walking forward from the chunk's.
  {
    uint32_t k = bucket_of(offsets, n_keys, e0);
#pragma unroll 1
    for (uint32_t s = 0; s < n_streams; ++s) {
      const uint32_t es = e0 + s * m;
      while (offsets[k] + counts[k] <= es) ++k;
      kb[s] = k;
      kend[s] = offsets[k] + counts[k];
    }
  }

#pragma unroll 1
  for (uint32_t j = 0; j < m; ++j) {
    F prod = f_one((const F*)nullptr);
    uint64_t adding = 0;
    // Software pipeline over the streams: the point of stream s + 1 and the entry of
    // stream s + 2 are in flight while stream s is handled.
    uint32_t n_entry = 0, nn_entry = 0;
    Affine<F> nq;
    if (e0 + j < e1) {
      n_entry = entries[e0 + j];
      nq = affine_load(bases + (n_entry & ~SIGN_BIT));
    }
    if (n_streams > 1 && e0 + m + j < e1) nn_entry = entries[e0 + m + j];
#pragma unroll 1
    for (uint32_t s = 0; s < n_streams; ++s) {
      const uint32_t e = e0 + s * m + j;
      if (e >= e1) break;
      const uint32_t entry = n_entry;
      Affine<F> q = nq;
      if (s + 1 < n_streams && e + m < e1) {
        n_entry = nn_entry;
        nq = affine_load(bases + (n_entry & ~SIGN_BIT));
        if (s + 2 < n_streams && e + 2 * m < e1) nn_entry = entries[e + 2 * m];
      }
      const uint64_t bit = 1ull << s;
      if (e == kend[s]) {
        // The stream's bucket ended before e: keep its first segment for the final
        // merge, write any later one (a bucket begun and ended inside the stream).
        if (!(crossed & bit)) {
          crossed |= bit;
          hx[s] = ax[s];
          hy[s] = ay[s];
          hk[s] = kb[s];
          if (live & bit) head_live |= bit;
        } else {
          xyzz_store(buckets + kb[s],
                     (live & bit) ? xyzz_of_affine(Affine<F>{ax[s], ay[s]}) : xyzz_infinity<F>());
        }
        uint32_t k = kb[s];
        do {
          ++k;
        } while (counts[k] == 0);
        kb[s] = k;
        kend[s] = offsets[k] + counts[k];
        live &= ~bit;
      }
      if (f_is_zero(q.x) && f_is_zero(q.y)) continue;  // a base at infinity
      if (entry & SIGN_BIT) q.y = f_neg(q.y);
      if (!(live & bit)) {
        ax[s] = q.x;
        ay[s] = q.y;
        live |= bit;
        continue;
      }
      F den = f_sub(q.x, ax[s]);
      if (f_is_zero(den)) {
        const AffineSlope<F> sl = affine_slope({ax[s], ay[s]}, q);
        if (sl.cancel) {
          live &= ~bit;
          continue;
        }
        den = sl.den;
      }
      bx[s] = q.x;
      by[s] = q.y;
      pref[s] = prod;
      prod = f_mul(prod, den);
      adding |= bit;
    }
    if (adding == 0) continue;
    F inv = f_inv_batch(prod);
#pragma unroll 1
    for (int s = (int)n_streams - 1; s >= 0; --s) {
      if (!((adding >> s) & 1)) continue;
      const Affine<F> q{bx[s], by[s]};
      const Affine<F> a{ax[s], ay[s]};
      F den = f_sub(q.x, a.x), num;
      if (!f_is_zero(den)) {
        num = f_sub(q.y, a.y);
      } else {
        const AffineSlope<F> sl = affine_slope(a, q);
        den = sl.den;
        num = sl.num;
      }
      const F inv_s = f_mul(inv, pref[s]);
      inv = f_mul(inv, den);
      const F lam = f_mul(num, inv_s);
      const F x3 = f_sub(f_sub(f_sqr(lam), a.x), q.x);
      ay[s] = f_sub(f_mul(lam, f_sub(a.x, x3)), a.y);
      ax[s] = x3;
    }
  }

  // Merge the streams' segments in entry order: heads, then each stream's last segment.
  Xyzz<F> cur = xyzz_infinity<F>();
  uint32_t cur_k = 0;
  bool any = false;
#pragma unroll 1
  for (uint32_t s = 0; s < n_streams; ++s) {
    const uint64_t bit = 1ull << s;
#pragma unroll 1
    for (int part = 0; part < 2; ++part) {
      if (part == 0 && !(crossed & bit)) continue;
      const uint32_t k = part == 0 ? hk[s] : kb[s];
      const bool has = part == 0 ? (head_live & bit) != 0 : (live & bit) != 0;
      if (any && k != cur_k) {
        affine_chunk_output(offsets, counts, cur_k, e0, e1, cur, buckets, partials, t);
        cur = xyzz_infinity<F>();
      }
      cur_k = k;
      any = true;
      if (has) {
        cur = xyzz_add_affine(cur, part == 0 ? Affine<F>{hx[s], hy[s]}
                                             : Affine<F>{ax[s], ay[s]});
      }
    }
  }
  if (any) affine_chunk_output(offsets, counts, cur_k, e0, e1, cur, buckets, partials, t);
}

}  // namespace msm
}  // namespace pinion

// The affine accumulation kernel of one curve (after msm_kernels.cuh's GRID_STRIDE): G the
// name prefix (g1, g2), F the coordinate field, K the streams a thread (chunk_len a
// multiple of K), B the blocks of 128 threads an SM the registers are capped for.
//   <G>_accumulate_chunks_affine(bases, entries, offsets, counts, n_keys, chunk_len, buckets,
//                                partials, n_chunks)
#define AFFINE_KERNEL(G, F, K, B)                                                              \
  extern "C" __global__ void __launch_bounds__(128, B) G##_accumulate_chunks_affine(          \
      const pinion::Affine<F>* bases, const uint32_t* entries, const uint32_t* offsets,        \
      const uint32_t* counts, uint32_t n_keys, uint32_t chunk_len, pinion::Xyzz<F>* buckets,   \
      pinion::Xyzz<F>* partials, uint32_t n_chunks) {                                          \
    GRID_STRIDE(t, n_chunks)                                                                   \
    pinion::msm::accumulate_chunk_affine_body<K>(bases, entries, offsets, counts, n_keys,      \
                                                 chunk_len, buckets, partials, t);             \
  }
