// Experimental: Fp Montgomery multiplication with 64-bit limbs (6 words), the same
// even/odd split CIOS as field.cuh, for the 32- vs 64-bit comparison in the benchmark.
// PTX's 64-bit multiply-add is emulated by several 32-bit IMADs on NVIDIA GPUs, so this
// is expected to lose; it is kept to measure rather than assume that. Same layout as Fp
// (a [u64; 6] is 12 little-endian u32 words), so results can be compared bit for bit.
#pragma once
#include <stdint.h>

#include "field.cuh"

namespace pinion {
namespace cc64 {

#if defined(PINION_HOST_EMULATION)
inline uint64_t& carry_flag() {
  static thread_local uint64_t flag = 0;
  return flag;
}
inline uint64_t emu_mad(uint64_t a, uint64_t b, uint64_t c, bool hi, bool cin, bool cout) {
  const unsigned __int128 p = (unsigned __int128)a * b;
  const uint64_t x = hi ? (uint64_t)(p >> 64) : (uint64_t)p;
  const unsigned __int128 s = (unsigned __int128)x + c + (cin ? carry_flag() : 0);
  if (cout) carry_flag() = (uint64_t)(s >> 64);
  return (uint64_t)s;
}
inline uint64_t mad_lo_cc(uint64_t a, uint64_t b, uint64_t c) { return emu_mad(a, b, c, false, false, true); }
inline uint64_t madc_lo_cc(uint64_t a, uint64_t b, uint64_t c) { return emu_mad(a, b, c, false, true, true); }
inline uint64_t madc_hi_cc(uint64_t a, uint64_t b, uint64_t c) { return emu_mad(a, b, c, true, true, true); }
inline uint64_t addc(uint64_t a, uint64_t b) { return emu_mad(0, 0, a + b, false, true, false); }
#else
__device__ __forceinline__ uint64_t mad_lo_cc(uint64_t a, uint64_t b, uint64_t c) {
  uint64_t r;
  asm volatile("mad.lo.cc.u64 %0, %1, %2, %3;" : "=l"(r) : "l"(a), "l"(b), "l"(c));
  return r;
}
__device__ __forceinline__ uint64_t madc_lo_cc(uint64_t a, uint64_t b, uint64_t c) {
  uint64_t r;
  asm volatile("madc.lo.cc.u64 %0, %1, %2, %3;" : "=l"(r) : "l"(a), "l"(b), "l"(c));
  return r;
}
__device__ __forceinline__ uint64_t madc_hi_cc(uint64_t a, uint64_t b, uint64_t c) {
  uint64_t r;
  asm volatile("madc.hi.cc.u64 %0, %1, %2, %3;" : "=l"(r) : "l"(a), "l"(b), "l"(c));
  return r;
}
__device__ __forceinline__ uint64_t addc(uint64_t a, uint64_t b) {
  uint64_t r;
  asm volatile("addc.u64 %0, %1, %2;" : "=l"(r) : "l"(a), "l"(b));
  return r;
}
#endif

}  // namespace cc64

namespace detail64 {
template <int PAR>
__device__ __forceinline__ void mul_add_row(uint64_t (&t)[7], const uint64_t (&x)[6], uint64_t y) {
  t[PAR] = cc64::mad_lo_cc(x[PAR], y, t[PAR]);
  t[PAR + 1] = cc64::madc_hi_cc(x[PAR], y, t[PAR + 1]);
#pragma unroll
  for (int j = PAR + 2; j < 6; j += 2) {
    t[j] = cc64::madc_lo_cc(x[j], y, t[j]);
    t[j + 1] = cc64::madc_hi_cc(x[j], y, t[j + 1]);
  }
}
}  // namespace detail64

// a * b * 2^-384 mod p over 64-bit limbs; result fully reduced, in 32-bit Fp layout.
__device__ __forceinline__ Fp fp_mul_u64(const Fp& a32, const Fp& b32) {
  uint64_t a[6], b[6], m[6], t[7];
  uint32_t m32[12];
  FpParams::modulus(m32);
#pragma unroll
  for (int j = 0; j < 6; ++j) {
    a[j] = (uint64_t)a32.l[2 * j] | ((uint64_t)a32.l[2 * j + 1] << 32);
    b[j] = (uint64_t)b32.l[2 * j] | ((uint64_t)b32.l[2 * j + 1] << 32);
    m[j] = (uint64_t)m32[2 * j] | ((uint64_t)m32[2 * j + 1] << 32);
  }
#pragma unroll
  for (int j = 0; j < 7; ++j) t[j] = 0;
#pragma unroll
  for (int i = 0; i < 6; ++i) {
    detail64::mul_add_row<0>(t, a, b[i]);
    t[6] = cc64::addc(0, 0);
    detail64::mul_add_row<1>(t, a, b[i]);
    const uint64_t q = t[0] * 0x89f3fffcfffcfffdull;  // -p^-1 mod 2^64
    detail64::mul_add_row<0>(t, m, q);
    t[6] = cc64::addc(t[6], 0);
    detail64::mul_add_row<1>(t, m, q);
#pragma unroll
    for (int j = 0; j < 6; ++j) t[j] = t[j + 1];
    t[6] = 0;
  }
  uint32_t lo[12];
#pragma unroll
  for (int j = 0; j < 6; ++j) {
    lo[2 * j] = (uint32_t)t[j];
    lo[2 * j + 1] = (uint32_t)(t[j] >> 32);
  }
  Fp r;
  detail::reduce_once<FpParams>(r.l, lo);
  return r;
}

}  // namespace pinion
