// Experimental: the Fr Montgomery product on the FP64 pipe (an idea published by Emmart,
// Zheng and Weems, "Faster Modular Exponentiation Using Double Precision Floating Point
// Arithmetic on the GPU", ARITH 2018), for the comparison with field.cuh's IMAD product in
// field_test.cu's chain kernels. The H200 issues a DFMA at the same rate as an IMAD, and a
// DFMA multiplies 52 x 52 bits where an IMAD does 32 x 32.
//
// Same inputs and result as fe_mul<FrParams> (x * y * 2^-256 mod r, fully reduced, the
// 8 x 32-bit layout), so it can replace it anywhere:
// - Operands become five 52-bit limbs held exactly in doubles; y is shifted left by 4
//   bits first (y < r < 2^255, so 16y < 2^260 still fits five limbs), which turns the
//   radix-2^260 Montgomery product x * 16y * 2^-260 into the radix-2^256 one.
// - Each limb product a * b (< 2^104) is split exactly by two FMAs:
//     h = fma_rz(a, b, 2^104)        = 2^104 + H * 2^52,   H = floor(a * b / 2^52)
//     l = fma(a, b, (2^104 + 2^52) - h) = 2^52 + L,         L = a * b mod 2^52
//   h and l stay in one binade each, so their bit patterns are the constant pattern of
//   2^104 (2^52) plus H (L): the column sums add bit patterns as 64-bit integers and
//   start from minus every pattern constant the column will receive.
// - Montgomery reduction word by word with q in [0, 2^52). r's low limb is
//   2^52 - 2^32 + 1, so -r^-1 = -(1 + 2^32) mod 2^52 and q is two integer adds; q * r
//   goes through the same splits. The bit-pattern constants are multiples of 2^52, so
//   they never disturb the low 52 bits q is computed from.
// - The result is below 1.5r (x < r, 16y < 2^259, q < 2^260): one conditional
//   subtraction.
// Exactness needs IEEE binary64 with a round-toward-zero FMA: CUDA's __fma_rz on the
// device; the host emulation (PINION_HOST_EMULATION, tools/field_emu.cpp) computes it
// exactly with 128-bit integers (every operand here is an integer below 2^105).
#pragma once
#include <stdint.h>

#include "field.cuh"

#if defined(PINION_HOST_EMULATION)
#include <cstring>
#endif

namespace pinion {
namespace f64 {

#if defined(PINION_HOST_EMULATION)
inline uint64_t bits(double x) {
  uint64_t u;
  std::memcpy(&u, &x, 8);
  return u;
}
inline double from_bits(uint64_t u) {
  double x;
  std::memcpy(&x, &u, 8);
  return x;
}
// a * b + c rounded toward zero, for integer-valued operands with |a * b + c| < 2^127.
inline double fma_rz(double a, double b, double c) {
  const __int128 exact = (__int128)(int64_t)a * (__int128)(int64_t)b + (__int128)c;
  const bool neg = exact < 0;
  unsigned __int128 m = neg ? (unsigned __int128)(-exact) : (unsigned __int128)exact;
  int len = 0;
  for (unsigned __int128 t = m; t != 0; t >>= 1) ++len;
  if (len > 53) m = (m >> (len - 53)) << (len - 53);  // drop the low bits: toward zero
  const double mag = (double)m;                          // exact: at most 53 significant bits
  return neg ? -mag : mag;
}
// Exact for every use here; the rounding mode does not matter.
inline double fma_rn(double a, double b, double c) { return fma_rz(a, b, c); }
inline double sub_rn(double a, double b) { return a - b; }
#else
__device__ __forceinline__ uint64_t bits(double x) { return (uint64_t)__double_as_longlong(x); }
__device__ __forceinline__ double from_bits(uint64_t u) { return __longlong_as_double((long long)u); }
__device__ __forceinline__ double fma_rz(double a, double b, double c) { return __fma_rz(a, b, c); }
__device__ __forceinline__ double fma_rn(double a, double b, double c) { return __fma_rn(a, b, c); }
__device__ __forceinline__ double sub_rn(double a, double b) { return __dsub_rn(a, b); }
#endif

constexpr uint64_t MASK52 = (1ull << 52) - 1;
constexpr uint64_t BITS_2P52 = 0x4330000000000000ull;   // bit pattern of 2^52
constexpr uint64_t BITS_2P104 = 0x4670000000000000ull;  // bit pattern of 2^104
constexpr double TWO_P52 = 4503599627370496.0;
constexpr double TWO_P104 = 20282409603651670423947251286016.0;
constexpr double TWO_P104_P52 = 20282409603651674927546878656512.0;  // 2^104 + 2^52

// A value below 2^52 as an (exact) double.
__device__ __forceinline__ double to_double(uint64_t v) { return sub_rn(from_bits(v | BITS_2P52), TWO_P52); }

// Adds the split of a * b to columns lo (L) and hi (H), as bit patterns.
__device__ __forceinline__ void mul_split(double a, double b, uint64_t& lo, uint64_t& hi) {
  const double h = fma_rz(a, b, TWO_P104);
  const double l = fma_rn(a, b, sub_rn(TWO_P104_P52, h));
  lo += bits(l);
  hi += bits(h);
}

// Limb pairs (i, j), i and j in [0, 5), with i + j = k. Column k receives the lo halves
// of the pairs of k and the hi halves of those of k - 1, twice (x * 16y and q * r).
constexpr int pairs(int k) { return k < 0 || k > 8 ? 0 : 5 - (k > 4 ? k - 4 : 4 - k); }
template <int K>
struct ColumnStart {
  static constexpr uint64_t value =
      0ull - 2ull * (uint64_t)pairs(K) * BITS_2P52 - 2ull * (uint64_t)pairs(K - 1) * BITS_2P104;
};

}  // namespace f64

// x * y * 2^-256 mod r (the same as fe_mul<FrParams>) on the FP64 pipe.
__device__ __forceinline__ Fr fr_mul_f64(const Fr& x, const Fr& y) {
  using namespace f64;
  uint64_t w[4], v[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    w[j] = (uint64_t)x.l[2 * j] | ((uint64_t)x.l[2 * j + 1] << 32);
    v[j] = (uint64_t)y.l[2 * j] | ((uint64_t)y.l[2 * j + 1] << 32);
  }
  const double a[5] = {
      to_double(w[0] & MASK52),
      to_double(((w[0] >> 52) | (w[1] << 12)) & MASK52),
      to_double(((w[1] >> 40) | (w[2] << 24)) & MASK52),
      to_double(((w[2] >> 28) | (w[3] << 36)) & MASK52),
      to_double(w[3] >> 16),
  };
  // 16y
  const double b[5] = {
      to_double((v[0] << 4) & MASK52),
      to_double(((v[0] >> 48) | (v[1] << 16)) & MASK52),
      to_double(((v[1] >> 36) | (v[2] << 28)) & MASK52),
      to_double(((v[2] >> 24) | (v[3] << 40)) & MASK52),
      to_double(v[3] >> 12),
  };
  // r in 52-bit limbs.
  const double r[5] = {(double)0xfffff00000001ull, (double)0x2fffe5bfefffull,
                       (double)0x9a1d80553bda4ull, (double)0x7d483339d8080ull,
                       (double)0x73eda753299dull};
  uint64_t c[10] = {ColumnStart<0>::value, ColumnStart<1>::value, ColumnStart<2>::value,
                    ColumnStart<3>::value, ColumnStart<4>::value, ColumnStart<5>::value,
                    ColumnStart<6>::value, ColumnStart<7>::value, ColumnStart<8>::value,
                    ColumnStart<9>::value};
#pragma unroll
  for (int i = 0; i < 5; ++i) {
#pragma unroll
    for (int j = 0; j < 5; ++j) mul_split(a[i], b[j], c[i + j], c[i + j + 1]);
  }
#pragma unroll
  for (int i = 0; i < 5; ++i) {
    // Column i holds every term but q * r_0's low half (and the constants' parts).
    const uint64_t ci = c[i];
    const uint64_t q = (0ull - (ci + (ci << 32))) & MASK52;  // ci + q r_0 = 0 mod 2^52
    const double qd = to_double(q);
    mul_split(qd, r[0], c[i], c[i + 1]);
    c[i + 1] += (uint64_t)((int64_t)c[i] >> 52);  // column i is now 0 mod 2^52
#pragma unroll
    for (int j = 1; j < 5; ++j) mul_split(qd, r[j], c[i + j], c[i + j + 1]);
  }
  // Columns 5..9 are the result's limbs with carries still to propagate.
#pragma unroll
  for (int k = 5; k < 9; ++k) {
    c[k + 1] += (uint64_t)((int64_t)c[k] >> 52);
    c[k] &= MASK52;
  }
  const uint64_t o[4] = {c[5] | (c[6] << 52), (c[6] >> 12) | (c[7] << 40),
                         (c[7] >> 24) | (c[8] << 28), (c[8] >> 36) | (c[9] << 16)};
  uint32_t t[8];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    t[2 * j] = (uint32_t)o[j];
    t[2 * j + 1] = (uint32_t)(o[j] >> 32);
  }
  Fr out;
  detail::reduce_once<FrParams>(out.l, t);
  return out;
}

}  // namespace pinion
