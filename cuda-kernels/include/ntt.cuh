// Radix-2 NTT building blocks over Fr (see ntt.cu for the kernels and their contracts).
//
// Twiddle table: tw[i] = w^i for i < N_tw/2, w the primitive N_tw-th root of unity that
// bellman picks. Every transform of n <= N_tw points reads it with a stride: the stage
// twiddle w_{2h}^j is tw[j << (log N_tw - log 2h)]. Inverse twiddles come from the same
// table through w_{2h}^-j = -w_{2h}^(h-j); the sign is folded into the butterfly.
#pragma once
#include <stdint.h>

#include "field.cuh"

namespace pinion {
namespace ntt {

// The Fr product of the transforms' kernels: fe_mul_ab, measured faster here than fe_mul
// (h200, 2026-12-04: 2^27 forward 44.08 -> 40.72 ms, H step 336.8 -> 314.7 ms), although
// slower in field.cuh's single-product throughput kernels (see fe_mul_ab).
__device__ __forceinline__ Fr fr_mul(const Fr& a, const Fr& b) { return fe_mul_ab<FrParams>(a, b); }

// Butterflies on representatives in [0, 2r) (r the Fr modulus; 2r < 2^256 < 4r): the
// products skip their final conditional subtraction, and each pass reduces its elements
// once as it stores them (ntt.cu). Under emulation every operand's bound is checked.
__device__ __forceinline__ void fr_twice_modulus(uint32_t (&m)[8]) {
  m[0] = 0x00000002u; m[1] = 0xfffffffeu; m[2] = 0xfffcb7fdu; m[3] = 0xa77b4805u;
  m[4] = 0x1343b00au; m[5] = 0x6673b010u; m[6] = 0x533afa90u; m[7] = 0xe7db4ea6u;
}

#if defined(PINION_HOST_EMULATION)
// a < 2r (a < r with `below_r`), else abort: the lazy bounds are the contract.
inline void lazy_check(const Fr& a, bool below_r) {
  uint32_t m[8];
  if (below_r) {
    FrParams::modulus(m);
  } else {
    fr_twice_modulus(m);
  }
  for (int j = 7; j >= 0; --j) {
    if (a.l[j] != m[j]) {
      if (a.l[j] < m[j]) return;
      break;
    }
  }
  fprintf(stderr, "lazy NTT bound broken (%s)\n", below_r ? "< r" : "< 2r");
  abort();
}
#define LAZY_CHECK(a, below_r) lazy_check(a, below_r)
#else
#define LAZY_CHECK(a, below_r) ((void)0)
#endif

// a + b for a, b < 2r, result < 2r: a + b < 4r may carry out of 256 bits; 2r is taken off
// when it does or when the 256-bit sum is at least 2r.
__device__ __forceinline__ Fr fr_add_lazy(const Fr& a, const Fr& b) {
  LAZY_CHECK(a, false);
  LAZY_CHECK(b, false);
  uint32_t m[8], t[8], d[8];
  fr_twice_modulus(m);
  t[0] = cc::add_cc(a.l[0], b.l[0]);
#pragma unroll
  for (int j = 1; j < 8; ++j) t[j] = cc::addc_cc(a.l[j], b.l[j]);
  const uint32_t carry = cc::addc(0, 0);
  d[0] = cc::sub_cc(t[0], m[0]);
#pragma unroll
  for (int j = 1; j < 8; ++j) d[j] = cc::subc_cc(t[j], m[j]);
  // carry - borrow: all ones exactly when the sum (with its carry) is below 2r.
  const uint32_t keep = cc::subc(carry, 0);
  Fr r;
#pragma unroll
  for (int j = 0; j < 8; ++j) r.l[j] = keep ? t[j] : d[j];
  LAZY_CHECK(r, false);
  return r;
}

// a - b for a, b < 2r, result in [0, 2r): 2r added back on a borrow.
__device__ __forceinline__ Fr fr_sub_lazy(const Fr& a, const Fr& b) {
  LAZY_CHECK(a, false);
  LAZY_CHECK(b, false);
  uint32_t m[8], t[8];
  fr_twice_modulus(m);
  t[0] = cc::sub_cc(a.l[0], b.l[0]);
#pragma unroll
  for (int j = 1; j < 8; ++j) t[j] = cc::subc_cc(a.l[j], b.l[j]);
  const uint32_t mask = cc::subc(0, 0);
  Fr r;
  r.l[0] = cc::add_cc(t[0], m[0] & mask);
#pragma unroll
  for (int j = 1; j < 7; ++j) r.l[j] = cc::addc_cc(t[j], m[j] & mask);
  r.l[7] = cc::addc(t[7], m[7] & mask);
  LAZY_CHECK(r, false);
  return r;
}

// w * x * R^-1 for a twiddle w < r and x < 2r: below w*x/R + r < 2r (2r < R), so no
// final subtraction (detail::mul_ab_unreduced: w, the multiplicand, must be below r).
__device__ __forceinline__ Fr fr_mul_lazy(const Fr& w, const Fr& x) {
  LAZY_CHECK(w, true);
  LAZY_CHECK(x, false);
  Fr r;
  detail::mul_ab_unreduced<FrParams>(r.l, w, x);
  LAZY_CHECK(r, false);
  return r;
}

// x < 2r to its reduced representative.
__device__ __forceinline__ Fr fr_reduce_lazy(const Fr& x) {
  LAZY_CHECK(x, false);
  Fr r;
  detail::reduce_once<FrParams>(r.l, x.l);
  return r;
}

// Position of logical index i among 2^log_n elements in bit-reversed order (log_n >= 1).
__device__ __forceinline__ uint32_t bit_reverse(uint32_t i, uint32_t log_n) {
  return __brev(i) >> (32 - log_n);
}

// Shared-memory tile: the two 16-byte halves of element e at sh[q] and sh[E + q]
// (structure of arrays), so a warp touching consecutive elements reads consecutive
// 16-byte words, two vector accesses per element. q = e, or with SWZ (the bit-0 pass,
// ntt.cu) q = sh_slot(e): e with its low three bits XORed with bits 3-5 and 6-8 (a
// permutation of each aligned run of 8 slots), so that eight lanes' 16-byte accesses (one
// shared-memory wavefront) fall in distinct banks both for consecutive elements and for
// elements 2, 4, 8, 16 or 32 apart.
template <bool SWZ>
__device__ __forceinline__ uint32_t sh_slot(uint32_t e) {
  return SWZ ? e ^ (((e >> 3) ^ (e >> 6)) & 7u) : e;
}

template <bool SWZ>
__device__ __forceinline__ Fr sh_load(const uint4* sh, uint32_t E, uint32_t e) {
  e = sh_slot<SWZ>(e);
  const uint4 a = sh[e], b = sh[E + e];
  Fr x;
  x.l[0] = a.x; x.l[1] = a.y; x.l[2] = a.z; x.l[3] = a.w;
  x.l[4] = b.x; x.l[5] = b.y; x.l[6] = b.z; x.l[7] = b.w;
  return x;
}

template <bool SWZ>
__device__ __forceinline__ void sh_store(uint4* sh, uint32_t E, uint32_t e, const Fr& x) {
  e = sh_slot<SWZ>(e);
  sh[e] = make_uint4(x.l[0], x.l[1], x.l[2], x.l[3]);
  sh[E + e] = make_uint4(x.l[4], x.l[5], x.l[6], x.l[7]);
}

// base^j from two tables: lo[j & lo_mask] * hi[(j >> lo_bits) & hi_mask]. A constant
// factor is folded into lo by the host. With both masks 0 it is the constant lo[0]*hi[0].
__device__ __forceinline__ Fr power_from_tables(const Fr* lo, const Fr* hi, uint32_t j,
                                                uint32_t lo_bits, uint32_t lo_mask,
                                                uint32_t hi_mask) {
  return fe_mul<FrParams>(fe_load<FrParams>(lo + (j & lo_mask)),
                          fe_load<FrParams>(hi + ((j >> lo_bits) & hi_mask)));
}

// Scaling fused into a pass: element at array position p is multiplied by
// lo[j & lo_mask] * hi[(j >> lo_bits) & hi_mask] with j = p (mode 1) or bit_reverse(p)
// (mode 2); mode 0 leaves it alone. Passed by value (matches gpu.rs's ScaleArgs).
struct ScaleArgs {
  const Fr* lo;
  const Fr* hi;
  uint32_t lo_bits;
  uint32_t lo_mask;
  uint32_t hi_mask;
  uint32_t mode;
  uint32_t log_n;
  uint32_t pad;
};

__device__ __forceinline__ Fr apply_scale(const ScaleArgs& a, uint32_t p, const Fr& x) {
  if (a.mode == 0) return x;
  const uint32_t j = a.mode == 2 ? bit_reverse(p, a.log_n) : p;
  return fe_mul<FrParams>(x, power_from_tables(a.lo, a.hi, j, a.lo_bits, a.lo_mask, a.hi_mask));
}

// apply_scale for x < 2r (each pass's store), result reduced: the factor (< r) is the
// product's multiplicand, x the scanned operand (detail::mul_ab_unreduced's bounds hold
// for fe_mul's accumulation alike), and the result below 2r loses r once if it must.
__device__ __forceinline__ Fr apply_scale_lazy(const ScaleArgs& a, uint32_t p, const Fr& x) {
  if (a.mode == 0) return fr_reduce_lazy(x);
  LAZY_CHECK(x, false);
  const uint32_t j = a.mode == 2 ? bit_reverse(p, a.log_n) : p;
  return fe_mul<FrParams>(power_from_tables(a.lo, a.hi, j, a.lo_bits, a.lo_mask, a.hi_mask), x);
}

}  // namespace ntt
}  // namespace pinion
