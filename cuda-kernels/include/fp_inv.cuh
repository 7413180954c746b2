// Fp inversion by a binary GCD on approximated top bits: the method of T. Pornin,
// "Optimized Binary GCD for Modular Inversion" (2020), written here from the paper. The
// values a, b (starting at x and p) are reduced by 30 steps at a time computed on 62-bit
// approximations (the low 30 bits and the top 32 bits of the longer one), then the
// round's 2x2 update is applied to the full values; u, v follow modulo p, each round
// dividing by 2^30 in the Montgomery way. 26 rounds cover the 2*381 - 1 steps a 381-bit
// modulus needs. Branch-free inner steps (selects), a fixed round count: every lane of a
// warp runs the same instructions. Variable-time in the values (the selects depend on
// them): for public data only (MSM points), never for secrets.
//
// Cost: about a tenth of Fermat's exponentiation (fe_inv: 381 squarings and ~190
// products); measured in docs/benchmarks.md (session 19).
//
// Montgomery form in and out: u starts at R^2 mod p, so for the stored x = X*R the result
// is R^2 / (X*R) = X^-1 * R. The inverse of zero is zero, as fe_inv's.
#pragma once
#include <stdint.h>

#include "field.cuh"

namespace pinion {
namespace gcd_inv {


constexpr uint32_t M30 = (1u << 30) - 1;

__device__ __forceinline__ uint32_t clz32(uint32_t x) {
#if defined(PINION_HOST_EMULATION)
  return x ? (uint32_t)__builtin_clz(x) : 32u;
#else
  return (uint32_t)__clz(x);
#endif
}

__device__ __forceinline__ uint32_t clz64(uint64_t x) {
#if defined(PINION_HOST_EMULATION)
  return x ? (uint32_t)__builtin_clzll(x) : 64u;
#else
  return (uint32_t)__clzll((long long)x);
#endif
}

// Bit length of max(a, b) (of a | b).
__device__ __forceinline__ int maxlen(const uint32_t (&a)[12], const uint32_t (&b)[12]) {
  int n = 0;
#pragma unroll
  for (int i = 0; i < 12; ++i) {
    const uint32_t w = a[i] | b[i];
    if (w) n = 32 * i + 32 - (int)clz32(w);
  }
  return n;
}

// floor(x / 2^s) mod 2^32, 30 <= s <= 352.
__device__ __forceinline__ uint32_t bits_at(const uint32_t (&x)[12], int s) {
  const int wi = s >> 5, sh = s & 31;
  uint32_t lo = 0, hi = 0;
#pragma unroll
  for (int i = 0; i < 12; ++i) {
    if (i == wi) lo = x[i];
    if (i == wi + 1) hi = x[i];
  }
  return sh ? (lo >> sh) | (hi << (32 - sh)) : lo;
}

// The transition matrix's entries: each row has |f| + |g| <= 2^j after j steps (a step
// subtracts one row from the other and doubles the second), 2^30 after a round, so 32-bit
// signed words hold them: the inner steps update 32-bit registers, and the linear
// combinations multiply a word by a sign-extended 32-bit value, which ptxas does with fewer
// instructions than a 64 x 64 product (sm_90 SASS, one inversion a thread: 26 instructions an
// inner step and 990 a round outside them, against 36 and 1,089 with int64_t entries; with
// lincomb_mod's single fix-ups 1,591 a round in all, against 2,169). Timed on an H100 in
// session 38: G1 accumulation -3.8%, G2 -3.5% (cuda-kernels/NOTES.md).
typedef int32_t coef_t;

// t = x f + y g as 13 words, two's complement, for x, y < 2^384 and |f| + |g| <= 2^30
// (each column's sum stays below 2^63 in magnitude).
__device__ __forceinline__ void signed_lincomb(const uint32_t (&x)[12], const uint32_t (&y)[12],
                                               coef_t f, coef_t g, uint32_t (&t)[13]) {
  int64_t carry = 0;
#pragma unroll
  for (int i = 0; i < 12; ++i) {
    const int64_t s = (int64_t)x[i] * f + (int64_t)y[i] * g + carry;
    t[i] = (uint32_t)s;
    carry = s >> 32;
  }
  t[12] = (uint32_t)carry;
}

// r = |x f + y g| / 2^30 (exact division), returns whether x f + y g < 0.
__device__ __forceinline__ bool lincomb_shift(const uint32_t (&x)[12], const uint32_t (&y)[12],
                                              coef_t f, coef_t g, uint32_t (&r)[12]) {
  uint32_t t[13];
  signed_lincomb(x, y, f, g, t);
  const bool neg = (int32_t)t[12] < 0;
#pragma unroll
  for (int i = 0; i < 12; ++i) r[i] = (t[i] >> 30) | (t[i + 1] << 2);
  if (neg) {
    uint32_t c = 1;
#pragma unroll
    for (int i = 0; i < 12; ++i) {
      const uint64_t s = (uint64_t)(~r[i]) + c;
      r[i] = (uint32_t)s;
      c = (uint32_t)(s >> 32);
    }
  }
  return neg;
}

// r = (x f + y g) / 2^30 mod m for x, y < m, |f| + |g| <= 2^30; r < m.
// minv30 = -m^-1 mod 2^30.
__device__ __forceinline__ void lincomb_mod(const uint32_t (&x)[12], const uint32_t (&y)[12],
                                            coef_t f, coef_t g, const uint32_t (&m)[12],
                                            uint32_t minv30, uint32_t (&r)[12]) {
  uint32_t t[13];
  signed_lincomb(x, y, f, g, t);
  const uint32_t q = (t[0] * minv30) & M30;
  uint64_t c = 0;
#pragma unroll
  for (int i = 0; i < 12; ++i) {
    const uint64_t s = (uint64_t)q * m[i] + t[i] + c;
    t[i] = (uint32_t)s;
    c = s >> 32;
  }
  t[12] += (uint32_t)c;
#pragma unroll
  for (int i = 0; i < 12; ++i) r[i] = (t[i] >> 30) | (t[i + 1] << 2);
  // value = hi * 2^384 + r. |x f + y g| < 2^30 m and 0 <= q m < 2^30 m, so the value is in
  // (-m, 2m): one conditional addition of m and one subtraction bring it below m.
  const uint32_t mask = (((int32_t)t[12]) >> 30) < 0 ? 0xffffffffu : 0u;
  uint64_t cc = 0;
#pragma unroll
  for (int i = 0; i < 12; ++i) {
    const uint64_t s = (uint64_t)r[i] + (m[i] & mask) + cc;
    r[i] = (uint32_t)s;
    cc = s >> 32;
  }
  uint32_t d[12];
  int64_t br = 0;
#pragma unroll
  for (int i = 0; i < 12; ++i) {
    const int64_t s = (int64_t)r[i] - m[i] + br;
    d[i] = (uint32_t)s;
    br = s >> 32;  // 0 or -1
  }
  const bool ge = br == 0;
#pragma unroll
  for (int i = 0; i < 12; ++i) r[i] = ge ? d[i] : r[i];
}

// out = r2 / x mod m for x < m (0 for x = 0); m odd, minv30 = -m^-1 mod 2^30.
__device__ __forceinline__ void inv_words(const uint32_t (&x)[12], const uint32_t (&m)[12],
                                          const uint32_t (&r2)[12], uint32_t minv30,
                                          uint32_t (&out)[12]) {
  uint32_t a[12], b[12], u[12], v[12];
#pragma unroll
  for (int i = 0; i < 12; ++i) {
    a[i] = x[i];
    b[i] = m[i];
    u[i] = r2[i];
    v[i] = 0;
  }
#pragma unroll 1
  for (int round = 0; round < 26; ++round) {
    int n = maxlen(a, b);
    n = n < 62 ? 62 : n;
    uint64_t A = (uint64_t)(a[0] & M30) | ((uint64_t)bits_at(a, n - 32) << 30);
    uint64_t B = (uint64_t)(b[0] & M30) | ((uint64_t)bits_at(b, n - 32) << 30);
    coef_t f0 = 1, g0 = 0, f1 = 0, g1 = 1;
#pragma unroll 2
    for (int j = 0; j < 30; ++j) {
      const bool odd = A & 1;
      const bool sw = odd && A < B;
      const uint64_t tA = sw ? B : A;
      B = sw ? A : B;
      A = tA;
      const coef_t tf = sw ? f1 : f0;
      f1 = sw ? f0 : f1;
      f0 = tf;
      const coef_t tg = sw ? g1 : g0;
      g1 = sw ? g0 : g1;
      g0 = tg;
      A -= odd ? B : 0;
      f0 -= odd ? f1 : 0;
      g0 -= odd ? g1 : 0;
      A >>= 1;
      f1 += f1;
      g1 += g1;
    }
    uint32_t a2[12], b2[12], u2[12], v2[12];
    if (lincomb_shift(a, b, f0, g0, a2)) {
      f0 = -f0;
      g0 = -g0;
    }
    if (lincomb_shift(a, b, f1, g1, b2)) {
      f1 = -f1;
      g1 = -g1;
    }
    lincomb_mod(u, v, f0, g0, m, minv30, u2);
    lincomb_mod(u, v, f1, g1, m, minv30, v2);
#pragma unroll
    for (int i = 0; i < 12; ++i) {
      a[i] = a2[i];
      b[i] = b2[i];
      u[i] = u2[i];
      v[i] = v2[i];
    }
  }
#pragma unroll
  for (int i = 0; i < 12; ++i) out[i] = v[i];
}

}  // namespace gcd_inv

// x^-1 in Montgomery form (0 for 0), by the binary GCD above.
__device__ __forceinline__ Fp fp_inv_gcd(const Fp& x) {
  uint32_t m[12], r2[12];
  FpParams::modulus(m);
  FpParams::r2(r2);
  Fp r;
  gcd_inv::inv_words(x.l, m, r2, FpParams::INV & gcd_inv::M30, r.l);
  return r;
}

}  // namespace pinion
