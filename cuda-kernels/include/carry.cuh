// Carry-chain primitives: one PTX instruction each.
//
// The carry flag lives between instructions, so every helper is `asm volatile`: the
// compiler must neither drop nor reorder them relative to each other. A chain must run
// in straight-line code with nothing else that writes the flag in between (nothing the
// compiler emits for ordinary C++ does).
#pragma once
#include <stdint.h>

namespace pinion {
namespace cc {

#if defined(PINION_HOST_EMULATION)
// Host emulation of the carry flag, so tools/field_emu.cpp can run this exact source on
// the CPU (no GPU needed) and check it against big-integer arithmetic.
inline uint32_t& carry_flag() {
  static thread_local uint32_t flag = 0;
  return flag;
}
inline uint32_t emu_add(uint32_t a, uint32_t b, bool cin, bool cout) {
  const uint64_t s = (uint64_t)a + b + (cin ? carry_flag() : 0);
  if (cout) carry_flag() = (uint32_t)(s >> 32);
  return (uint32_t)s;
}
inline uint32_t emu_sub(uint32_t a, uint32_t b, bool bin, bool bout) {
  const uint64_t d = (uint64_t)a - b - (bin ? carry_flag() : 0);
  if (bout) carry_flag() = (uint32_t)(d >> 63);
  return (uint32_t)d;
}
inline uint32_t emu_mad(uint32_t a, uint32_t b, uint32_t c, bool hi, bool cin, bool cout) {
  const uint64_t p = (uint64_t)a * b;
  return emu_add(hi ? (uint32_t)(p >> 32) : (uint32_t)p, c, cin, cout);
}
inline uint32_t mul_hi(uint32_t a, uint32_t b) { return (uint32_t)(((uint64_t)a * b) >> 32); }
inline uint32_t add_cc(uint32_t a, uint32_t b) { return emu_add(a, b, false, true); }
inline uint32_t addc_cc(uint32_t a, uint32_t b) { return emu_add(a, b, true, true); }
inline uint32_t addc(uint32_t a, uint32_t b) { return emu_add(a, b, true, false); }
inline uint32_t sub_cc(uint32_t a, uint32_t b) { return emu_sub(a, b, false, true); }
inline uint32_t subc_cc(uint32_t a, uint32_t b) { return emu_sub(a, b, true, true); }
inline uint32_t subc(uint32_t a, uint32_t b) { return emu_sub(a, b, true, false); }
inline uint32_t mad_lo_cc(uint32_t a, uint32_t b, uint32_t c) { return emu_mad(a, b, c, false, false, true); }
inline uint32_t madc_lo_cc(uint32_t a, uint32_t b, uint32_t c) { return emu_mad(a, b, c, false, true, true); }
inline uint32_t madc_hi_cc(uint32_t a, uint32_t b, uint32_t c) { return emu_mad(a, b, c, true, true, true); }
inline uint32_t madc_hi(uint32_t a, uint32_t b, uint32_t c) { return emu_mad(a, b, c, true, true, false); }
#else
// High half of a*b (no carry flag involved).
__device__ __forceinline__ uint32_t mul_hi(uint32_t a, uint32_t b) { return __umulhi(a, b); }

__device__ __forceinline__ uint32_t add_cc(uint32_t a, uint32_t b) {
  uint32_t r;
  asm volatile("add.cc.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
__device__ __forceinline__ uint32_t addc_cc(uint32_t a, uint32_t b) {
  uint32_t r;
  asm volatile("addc.cc.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
__device__ __forceinline__ uint32_t addc(uint32_t a, uint32_t b) {
  uint32_t r;
  asm volatile("addc.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
__device__ __forceinline__ uint32_t sub_cc(uint32_t a, uint32_t b) {
  uint32_t r;
  asm volatile("sub.cc.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
__device__ __forceinline__ uint32_t subc_cc(uint32_t a, uint32_t b) {
  uint32_t r;
  asm volatile("subc.cc.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
__device__ __forceinline__ uint32_t subc(uint32_t a, uint32_t b) {
  uint32_t r;
  asm volatile("subc.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
// c + lo(a*b), sets carry.
__device__ __forceinline__ uint32_t mad_lo_cc(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t r;
  asm volatile("mad.lo.cc.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
  return r;
}
__device__ __forceinline__ uint32_t madc_lo_cc(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t r;
  asm volatile("madc.lo.cc.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
  return r;
}
__device__ __forceinline__ uint32_t madc_hi_cc(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t r;
  asm volatile("madc.hi.cc.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
  return r;
}
__device__ __forceinline__ uint32_t madc_hi(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t r;
  asm volatile("madc.hi.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
  return r;
}

#endif  // PINION_HOST_EMULATION

}  // namespace cc
}  // namespace pinion
