// What the device headers need to compile as host C++ (PINION_HOST_EMULATION): the CUDA
// qualifiers as plain C++, the vector type the loads and stores use, and __brev. Included
// first by every tools/*_emu.cpp.
#pragma once
#include <cstdint>

#define __device__
#define __global__
#define __shared__
#define __forceinline__ inline
#define __noinline__ inline
#define __launch_bounds__(...)
struct uint4 { uint32_t x, y, z, w; };
inline uint4 make_uint4(uint32_t x, uint32_t y, uint32_t z, uint32_t w) { return {x, y, z, w}; }
inline uint32_t __brev(uint32_t x) {
  uint32_t r = 0;
  for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
  return r;
}
