// Experimental: Montgomery products on the FP64 pipe (an idea published by Emmart, Zheng and
// Weems, "Faster Modular Exponentiation Using Double Precision Floating Point Arithmetic on
// the GPU", ARITH 2018), for the comparison with field.cuh's IMAD products in field_test.cu's
// chain kernels. The H200 issues a DFMA at the same rate as an IMAD, and a DFMA multiplies
// 52 x 52 bits where an IMAD does 32 x 32.
//
// fr_mul_f64 / fp_mul_f64 have the inputs and result of fe_mul<FrParams> / fe_mul<FpParams>
// (x * y * 2^-(32N) mod m, fully reduced, the N x 32-bit layout), so they can replace them:
// - Operands become L 52-bit limbs held exactly in doubles (Fr 5, Fp 8); y is shifted left
//   by 52L - 32N bits first (Fr 4, Fp 32; y < m still fits L limbs after it), which turns
//   the radix-2^(52L) Montgomery product into the radix-2^(32N) one.
// - Each limb product a * b (< 2^104) is split exactly by two FMAs:
//     h = fma_rz(a, b, 2^104)        = 2^104 + H * 2^52,   H = floor(a * b / 2^52)
//     l = fma(a, b, (2^104 + 2^52) - h) = 2^52 + L,         L = a * b mod 2^52
//   h and l stay in one binade each, so their bit patterns are the constant pattern of
//   2^104 (2^52) plus H (L): the column sums add bit patterns as 64-bit integers and
//   start from minus every pattern constant the column will receive.
// - Montgomery reduction word by word: q = c_i * (-m^-1) mod 2^52 with a 64-bit integer
//   product, then q * m through the same splits. The bit-pattern constants are multiples
//   of 2^52, so they never disturb the low 52 bits q is computed from.
// - The result (x y' + Q m) / 2^(52L), with x < m, y' = y 2^shift and Q < 2^(52L), is below
//   m (1 + y' / 2^(52L)): below 1.5r for Fr (y' < 2^259) and 1.125p for Fp (y' < 2^413),
//   so one conditional subtraction reduces it.
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

template <int... K>
struct Seq {};
template <int N, int... K>
struct MakeSeqImpl : MakeSeqImpl<N - 1, N - 1, K...> {};
template <int... K>
struct MakeSeqImpl<0, K...> {
  using type = Seq<K...>;
};
template <int N>
using MakeSeq = typename MakeSeqImpl<N>::type;

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

// Limb pairs (i, j), i and j in [0, L), with i + j = k. Column k receives the lo halves of
// the pairs of k and the hi halves of those of k - 1, twice (x * y' and q * m).
template <int L>
constexpr int pairs(int k) {
  return k < 0 || k > 2 * L - 2 ? 0 : L - (k > L - 1 ? k - (L - 1) : (L - 1) - k);
}
template <int L, int K>
struct ColumnStart {
  static constexpr uint64_t value = 0ull - 2ull * (uint64_t)pairs<L>(K) * BITS_2P52 -
                                    2ull * (uint64_t)pairs<L>(K - 1) * BITS_2P104;
};
template <int L, int... K>
__device__ __forceinline__ void column_starts(uint64_t (&c)[2 * L], Seq<K...>) {
  const uint64_t v[] = {ColumnStart<L, K>::value...};
#pragma unroll
  for (int k = 0; k < 2 * L; ++k) c[k] = v[k];
}

// The 52-bit limbs of w << SHIFT (w: NW little-endian 64-bit words), as doubles.
template <int L, int NW, int SHIFT>
__device__ __forceinline__ void to_limbs(double (&out)[L], const uint64_t (&w)[NW]) {
#pragma unroll
  for (int k = 0; k < L; ++k) {
    const int pos = 52 * k - SHIFT;  // bit of w at the limb's bit 0
    uint64_t v;
    if (pos < 0) {
      v = w[0] << -pos;
    } else {
      const int i = pos / 64, off = pos % 64;
      v = i < NW ? w[i] >> off : 0;
      if (off > 12 && i + 1 < NW) v |= w[i + 1] << (64 - off);
    }
    out[k] = to_double(v & MASK52);
  }
}

// Montgomery product x * y * 2^-(32N) mod m over L 52-bit limbs (see the top of the file).
template <class P, class F>
__device__ __forceinline__ Fe<P> mont_mul_f64(const Fe<P>& x, const Fe<P>& y) {
  constexpr int N = P::N, NW = N / 2, L = F::L, SHIFT = 52 * L - 32 * N;
  uint64_t w[NW], v[NW];
#pragma unroll
  for (int j = 0; j < NW; ++j) {
    w[j] = (uint64_t)x.l[2 * j] | ((uint64_t)x.l[2 * j + 1] << 32);
    v[j] = (uint64_t)y.l[2 * j] | ((uint64_t)y.l[2 * j + 1] << 32);
  }
  double a[L], b[L], m[L];
  to_limbs<L, NW, 0>(a, w);
  to_limbs<L, NW, SHIFT>(b, v);
  F::modulus(m);
  uint64_t c[2 * L];
  column_starts<L>(c, MakeSeq<2 * L>{});
#pragma unroll
  for (int i = 0; i < L; ++i) {
#pragma unroll
    for (int j = 0; j < L; ++j) mul_split(a[i], b[j], c[i + j], c[i + j + 1]);
  }
#pragma unroll
  for (int i = 0; i < L; ++i) {
    // Column i holds every term but q * m_0's low half (and the constants' parts).
    const uint64_t q = (c[i] * F::MINV) & MASK52;  // c_i + q m_0 = 0 mod 2^52
    const double qd = to_double(q);
    mul_split(qd, m[0], c[i], c[i + 1]);
    c[i + 1] += (uint64_t)((int64_t)c[i] >> 52);  // column i is now 0 mod 2^52
#pragma unroll
    for (int j = 1; j < L; ++j) mul_split(qd, m[j], c[i + j], c[i + j + 1]);
  }
  // Columns L..2L-1 are the result's limbs with carries still to propagate.
#pragma unroll
  for (int k = L; k < 2 * L - 1; ++k) {
    c[k + 1] += (uint64_t)((int64_t)c[k] >> 52);
    c[k] &= MASK52;
  }
  uint64_t o[NW];
#pragma unroll
  for (int i = 0; i < NW; ++i) o[i] = 0;
#pragma unroll
  for (int k = 0; k < L; ++k) {
    const int pos = 52 * k, i = pos / 64, off = pos % 64;
    if (i < NW) o[i] |= c[L + k] << off;
    if (off > 12 && i + 1 < NW) o[i + 1] |= c[L + k] >> (64 - off);
  }
  uint32_t t[N];
#pragma unroll
  for (int j = 0; j < NW; ++j) {
    t[2 * j] = (uint32_t)o[j];
    t[2 * j + 1] = (uint32_t)(o[j] >> 32);
  }
  Fe<P> out;
  detail::reduce_once<P>(out.l, t);
  return out;
}

// The moduli in 52-bit limbs and -m^-1 mod 2^52.
struct FrF64 {
  static constexpr int L = 5;
  static constexpr uint64_t MINV = 0xffffeffffffffull;
  __device__ static __forceinline__ void modulus(double (&m)[L]) {
    m[0] = (double)0xfffff00000001ull; m[1] = (double)0x2fffe5bfefffull;
    m[2] = (double)0x9a1d80553bda4ull; m[3] = (double)0x7d483339d8080ull;
    m[4] = (double)0x73eda753299dull;
  }
};
struct FpF64 {
  static constexpr int L = 8;
  static constexpr uint64_t MINV = 0x3fffcfffcfffdull;
  __device__ static __forceinline__ void modulus(double (&m)[L]) {
    m[0] = (double)0xeffffffffaaabull; m[1] = (double)0xfeb153ffffb9full;
    m[2] = (double)0x6b0f6241eabffull; m[3] = (double)0x12bf6730d2a0full;
    m[4] = (double)0x764774b84f385ull; m[5] = (double)0x1ba7b6434bacdull;
    m[6] = (double)0x1ea397fe69a4bull; m[7] = (double)0x1a011ull;
  }
};

}  // namespace f64

__device__ __forceinline__ Fr fr_mul_f64(const Fr& x, const Fr& y) {
  return f64::mont_mul_f64<FrParams, f64::FrF64>(x, y);
}
__device__ __forceinline__ Fp fp_mul_f64(const Fp& x, const Fp& y) {
  return f64::mont_mul_f64<FpParams, f64::FpF64>(x, y);
}

}  // namespace pinion
