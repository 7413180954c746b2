// NTT kernels over Fr (BLS12-381 scalar field), Montgomery form, 8 x 32-bit limbs per
// element (the bytes of bls-repr's FrRepr). Launched by crates/gpu-ntt/src/gpu.rs.
//
// A transform of n = 2^L points is a sequence of passes. A pass covers the index bits
// [lo, lo + s): each block loads a tile of 2^s rows (stride 2^lo) by C = 2^clog
// consecutive columns into shared memory, runs the s radix-2 stages on it, and writes it
// back in place. C > 1 for passes with lo > 0 so that global accesses come in runs of
// C * 32 bytes. DIF passes (Gentleman-Sande, natural in -> bit-reversed out) go from the
// top bits down; DIT passes (Cooley-Tukey, bit-reversed in -> natural out) from bit 0 up.
// Each pass reads and writes reduced elements; in between, its butterflies keep
// representatives in [0, 2r) (ntt.cuh: the products skip their final subtraction) and the
// store reduces each element once.
//
//   ntt_pass_dif / ntt_pass_dit(Fr* data, const Fr* tw, u32 tw_log, u32 lo, u32 s,
//                               u32 clog, u32 inverse, ScaleArgs pre, ScaleArgs post)
//       grid n / 2^(s+clog) blocks, dynamic shared memory 32 * 2^(s+clog) bytes; `pre`
//       scales each element as it is loaded, `post` as it is stored (ntt.cuh), which
//       saves the memory pass of a separate coset or 1/n scaling.
//   ntt_pass_dif_bit0 / ntt_pass_dit_bit0(same arguments, lo = 0 and clog = 0)
//       the same for the pass over bits [0, s): the butterflies of a stage that share
//       a twiddle exponent in whole warps run together, so that the warps of exponent 0
//       skip the product (see ntt_pass), on a swizzled tile (ntt.cuh, sh_slot).
//   ntt_twiddles(Fr* tw, const Fr* lo, const Fr* hi, u32 lo_bits, u32 count)
//       tw[i] = lo[i & (2^lo_bits - 1)] * hi[i >> lo_bits] for i < count.
//   ntt_scale(Fr* data, const Fr* lo, const Fr* hi, u32 lo_bits, u32 lo_mask, u32 hi_mask,
//             u32 log_n, u32 bitrev, u32 n)
//       data[p] *= base^j (the factor folded in by the host), j = bitrev ? rev(p) : p.
//   ntt_bitrev(Fr* data, u32 log_n, u32 n): in-place bit-reversal permutation.
//   ntt_abc(Fr* a, const Fr* b, const Fr* c, const Fr* z_inv, u32 n):
//       a[i] = (a[i] * b[i] - c[i]) * z_inv[0].
//   ntt_ab(Fr* a, const Fr* b, u32 n): a[i] = a[i] * b[i].
//   ntt_bitrev_scale_sub(Fr* out, const Fr* in, const Fr* sub, const Fr* k, lo, hi, lo_bits,
//                        lo_mask, hi_mask, u32 log_n, u32 n):
//       out[i] = in[rev(i)] * base^i - sub[rev(i)] * k[0] (out distinct from in and sub).
#include <stdint.h>

#include "field.cuh"
#include "ntt.cuh"

using namespace pinion;
using namespace pinion::ntt;

#define GRID_STRIDE(i, n) \
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += gridDim.x * blockDim.x)

// One pass; DIF selects the butterfly and the stage order. Index of tile element (t, cc)
// in the array: span * 2^(lo+s) + t * 2^lo + cg * C + cc; its butterfly partner at stage
// k is t +- 2^k, and its twiddle exponent within the 2h-span (h = 2^(lo+k)) is
// j = (t mod 2^k) * 2^lo + column.
//
// BIT0 (the kernels for the pass over bits [0, s), lo = 0 and clog = 0 only): stages whose
// butterflies share twiddles in whole warps run twiddle-major (below), on the swizzled tile
// (sh_slot).
template <bool DIF, bool BIT0>
__device__ __forceinline__ void ntt_pass(Fr* __restrict__ data, const Fr* __restrict__ tw,
                                         uint32_t tw_log, uint32_t lo, uint32_t s,
                                         uint32_t clog, uint32_t inverse,
                                         const ScaleArgs& pre, const ScaleArgs& post) {
  extern __shared__ uint4 sh[];
  const uint32_t E = 1u << (s + clog);
  const uint32_t cmask = (1u << clog) - 1;
  const uint32_t groups_log = lo - clog;  // column groups per span
  const uint32_t span = blockIdx.x >> groups_log;
  const uint32_t cg = blockIdx.x & ((1u << groups_log) - 1);
  const uint32_t col0 = cg << clog;
  // Positions fit in 32 bits: n <= 2^28.
  const uint32_t base = (span << (lo + s)) + col0;

  for (uint32_t e = threadIdx.x; e < E; e += blockDim.x) {
    const uint32_t p = base + ((e >> clog) << lo) + (e & cmask);
    sh_store<BIT0>(sh, E, e, apply_scale(pre, p, fe_load<FrParams>(data + p)));
  }
  __syncthreads();

  const uint32_t n_bfly = E >> 1;
  for (uint32_t st = 0; st < s; ++st) {
    const uint32_t k = DIF ? s - 1 - st : st;
    const uint32_t ht = 1u << k;
    const uint32_t h = 1u << (lo + k);
    const uint32_t shift = tw_log - (lo + k + 1);
    // In the bit-0 pass (lo = 0, one column) stage k's twiddle exponent is t mod 2^k, so
    // with butterflies numbered group-major a warp's 32 lanes alternate between 2^k
    // exponents, and the j = 0 ones (no product) save nothing: the warp multiplies for
    // its other lanes. Numbered twiddle-major instead (r = group + exponent * groups,
    // when the 2^(s-1-k) groups fill whole warps), every warp shares one exponent and the
    // 1 / 2^k of warps with j = 0 skip the product. sh_slot keeps those strided accesses
    // free of bank conflicts.
    const uint32_t glog = s - 1 - k;  // log2 of the stage's butterfly groups
    const bool by_twiddle = BIT0 && lo == 0 && clog == 0 && k != 0 && glog >= 5;
    for (uint32_t b = threadIdx.x; b < n_bfly; b += blockDim.x) {
      const uint32_t cc = b & cmask;
      const uint32_t r = by_twiddle
                             ? ((b & ((1u << glog) - 1)) << k) | (b >> glog)
                             : b >> clog;
      const uint32_t tlow = r & (ht - 1);
      const uint32_t t0 = ((r >> k) << (k + 1)) | tlow;
      const uint32_t e0 = (t0 << clog) | cc;
      const uint32_t e1 = e0 + (ht << clog);
      const uint32_t j = (tlow << lo) | col0 | cc;
      const Fr x = sh_load<BIT0>(sh, E, e0);
      const Fr y = sh_load<BIT0>(sh, E, e1);
      Fr u, v;
      if (DIF) {
        u = fr_add_lazy(x, y);
        if (j == 0) {
          v = fr_sub_lazy(x, y);
        } else if (inverse) {
          // w^-j = -w^(h-j): (x - y) w^-j = (y - x) w^(h-j)
          v = fr_mul_lazy(fe_load<FrParams>(tw + ((h - j) << shift)), fr_sub_lazy(y, x));
        } else {
          v = fr_mul_lazy(fe_load<FrParams>(tw + (j << shift)), fr_sub_lazy(x, y));
        }
      } else {
        if (j == 0) {
          u = fr_add_lazy(x, y);
          v = fr_sub_lazy(x, y);
        } else {
          const uint32_t idx = inverse ? (h - j) : j;
          const Fr t = fr_mul_lazy(fe_load<FrParams>(tw + (idx << shift)), y);
          // inverse: y w^-j = -t, so (x - t, x + t)
          u = inverse ? fr_sub_lazy(x, t) : fr_add_lazy(x, t);
          v = inverse ? fr_add_lazy(x, t) : fr_sub_lazy(x, t);
        }
      }
      sh_store<BIT0>(sh, E, e0, u);
      sh_store<BIT0>(sh, E, e1, v);
    }
    __syncthreads();
  }

  for (uint32_t e = threadIdx.x; e < E; e += blockDim.x) {
    const uint32_t p = base + ((e >> clog) << lo) + (e & cmask);
    fe_store<FrParams>(data + p, apply_scale_lazy(post, p, sh_load<BIT0>(sh, E, e)));
  }
}

extern "C" __global__ void ntt_pass_dif(Fr* data, const Fr* tw, uint32_t tw_log, uint32_t lo,
                                        uint32_t s, uint32_t clog, uint32_t inverse,
                                        ScaleArgs pre, ScaleArgs post) {
  ntt_pass<true, false>(data, tw, tw_log, lo, s, clog, inverse, pre, post);
}

extern "C" __global__ void ntt_pass_dit(Fr* data, const Fr* tw, uint32_t tw_log, uint32_t lo,
                                        uint32_t s, uint32_t clog, uint32_t inverse,
                                        ScaleArgs pre, ScaleArgs post) {
  ntt_pass<false, false>(data, tw, tw_log, lo, s, clog, inverse, pre, post);
}

extern "C" __global__ void ntt_pass_dif_bit0(Fr* data, const Fr* tw, uint32_t tw_log,
                                             uint32_t lo, uint32_t s, uint32_t clog,
                                             uint32_t inverse, ScaleArgs pre, ScaleArgs post) {
  ntt_pass<true, true>(data, tw, tw_log, lo, s, clog, inverse, pre, post);
}

extern "C" __global__ void ntt_pass_dit_bit0(Fr* data, const Fr* tw, uint32_t tw_log,
                                             uint32_t lo, uint32_t s, uint32_t clog,
                                             uint32_t inverse, ScaleArgs pre, ScaleArgs post) {
  ntt_pass<false, true>(data, tw, tw_log, lo, s, clog, inverse, pre, post);
}

extern "C" __global__ void ntt_twiddles(Fr* tw, const Fr* lo, const Fr* hi, uint32_t lo_bits,
                                        uint32_t count) {
  const uint32_t mask = (1u << lo_bits) - 1;
  GRID_STRIDE(i, count) {
    fe_store<FrParams>(tw + i, fr_mul(fe_load<FrParams>(lo + (i & mask)),
                                                fe_load<FrParams>(hi + (i >> lo_bits))));
  }
}

extern "C" __global__ void ntt_scale(Fr* data, const Fr* lo, const Fr* hi, uint32_t lo_bits,
                                     uint32_t lo_mask, uint32_t hi_mask, uint32_t log_n,
                                     uint32_t bitrev, uint32_t n) {
  GRID_STRIDE(p, n) {
    const uint32_t j = bitrev ? bit_reverse(p, log_n) : p;
    const Fr f = power_from_tables(lo, hi, j, lo_bits, lo_mask, hi_mask);
    fe_store<FrParams>(data + p, fr_mul(fe_load<FrParams>(data + p), f));
  }
}

extern "C" __global__ void ntt_bitrev(Fr* data, uint32_t log_n, uint32_t n) {
  GRID_STRIDE(i, n) {
    const uint32_t r = bit_reverse(i, log_n);
    if (i < r) {
      const Fr x = fe_load<FrParams>(data + i);
      const Fr y = fe_load<FrParams>(data + r);
      fe_store<FrParams>(data + i, y);
      fe_store<FrParams>(data + r, x);
    }
  }
}

extern "C" __global__ void ntt_abc(Fr* __restrict__ a, const Fr* __restrict__ b,
                                   const Fr* __restrict__ c, const Fr* z_inv, uint32_t n) {
  const Fr z = fe_load<FrParams>(z_inv);
  GRID_STRIDE(i, n) {
    const Fr ab = fr_mul(fe_load<FrParams>(a + i), fe_load<FrParams>(b + i));
    fe_store<FrParams>(a + i, fr_mul(fe_sub<FrParams>(ab, fe_load<FrParams>(c + i)), z));
  }
}

extern "C" __global__ void ntt_ab(Fr* __restrict__ a, const Fr* __restrict__ b, uint32_t n) {
  GRID_STRIDE(i, n) {
    fe_store<FrParams>(a + i, fr_mul(fe_load<FrParams>(a + i), fe_load<FrParams>(b + i)));
  }
}

// The H step's last gather (gpu.rs, `h_device`): `in` holds the inverse transform of the
// coset product and `sub` that of c, both bit-reversed; out is h in natural order. Each
// element is one 32-byte sector, so the scattered reads waste no fetched bytes; the writes
// are coalesced.
extern "C" __global__ void ntt_bitrev_scale_sub(Fr* __restrict__ out, const Fr* __restrict__ in,
                                                const Fr* __restrict__ sub, const Fr* k,
                                                const Fr* lo, const Fr* hi, uint32_t lo_bits,
                                                uint32_t lo_mask, uint32_t hi_mask,
                                                uint32_t log_n, uint32_t n) {
  const Fr kk = fe_load<FrParams>(k);
  GRID_STRIDE(i, n) {
    const Fr f = power_from_tables(lo, hi, i, lo_bits, lo_mask, hi_mask);
    const uint32_t r = bit_reverse(i, log_n);
    const Fr x = fr_mul(fe_load<FrParams>(in + r), f);
    const Fr y = fr_mul(fe_load<FrParams>(sub + r), kk);
    fe_store<FrParams>(out + i, fe_sub<FrParams>(x, y));
  }
}
