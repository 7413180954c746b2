// Kernel bodies run serially by one host thread: thread index 0, warps of one lane, atomics
// as plain read-modify-writes. For the bodies that take their thread index as an argument
// (msm.cuh, msm_scalars.cuh); include after emu_common.h.
#pragma once
#include <cstdint>

static struct { uint32_t x = 0; } threadIdx;
inline uint32_t __ballot_sync(uint32_t, bool b) { return b ? 1u : 0u; }
inline uint32_t __popc(uint32_t x) { return (uint32_t)__builtin_popcount(x); }
inline int __popcll(uint64_t x) { return __builtin_popcountll(x); }
inline uint32_t atomicAdd(uint32_t* p, uint32_t v) {
  const uint32_t old = *p;
  *p += v;
  return old;
}
