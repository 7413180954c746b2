// Fp2 = Fp[u] / (u^2 + 1), layout c0 then c1 (each an Fp, 48 bytes): matches
// bls-repr's `Fp2Repr`. Every operation returns fully reduced coordinates.
#pragma once
#include "field.cuh"

namespace pinion {

struct Fp2 {
  Fp c0;
  Fp c1;
};

__device__ __forceinline__ Fp2 fp2_add(const Fp2& a, const Fp2& b) {
  return {fe_add(a.c0, b.c0), fe_add(a.c1, b.c1)};
}

__device__ __forceinline__ Fp2 fp2_sub(const Fp2& a, const Fp2& b) {
  return {fe_sub(a.c0, b.c0), fe_sub(a.c1, b.c1)};
}

__device__ __forceinline__ Fp2 fp2_neg(const Fp2& a) { return {fe_neg(a.c0), fe_neg(a.c1)}; }

// The Fp product as a call (fe_mul_ab, one copy of its code in a kernel): what the point
// kernels multiply with, G1's directly (curve.cuh's f_mul) and G2's inside fp2_mul and
// fp2_sqr. Inlined, the point kernels were 150-500 KB of machine code and waited on the
// instruction caches; as a call the G2 MSM at 2^24 took 399 instead of 490 ms on the H200
// (session 23), and nvcc builds msm_g2 in a minute instead of ten. Arguments and result
// travel in registers (ptxas: no stack frame for the call).
__device__ __noinline__ Fp fp_mul_call(Fp a, Fp b) { return fe_mul_ab(a, b); }

// Karatsuba: three Fp products instead of four. Uses fe_mul_ab, measured 17% faster
// here than fe_mul (fewer registers: 167 vs 190 in the 2-chain throughput kernel).
__device__ __forceinline__ Fp2 fp2_mul(const Fp2& a, const Fp2& b) {
  const Fp t0 = fp_mul_call(a.c0, b.c0);
  const Fp t1 = fp_mul_call(a.c1, b.c1);
  const Fp s = fp_mul_call(fe_add(a.c0, a.c1), fe_add(b.c0, b.c1));
  return {fe_sub(t0, t1), fe_sub(fe_sub(s, t0), t1)};
}

// (c0 + c1 u)^2 = (c0 + c1)(c0 - c1) + 2 c0 c1 u: two Fp products.
__device__ __forceinline__ Fp2 fp2_sqr(const Fp2& a) {
  const Fp c0 = fp_mul_call(fe_add(a.c0, a.c1), fe_sub(a.c0, a.c1));
  const Fp t = fp_mul_call(a.c0, a.c1);
  return {c0, fe_add(t, t)};
}

// 1 / (c0 + c1 u) = (c0 - c1 u) / (c0^2 + c1^2); zero maps to zero.
__device__ __forceinline__ Fp2 fp2_inv(const Fp2& a) {
  const Fp norm = fe_add(fe_sqr(a.c0), fe_sqr(a.c1));
  const Fp ni = fe_inv(norm);
  return {fe_mul(a.c0, ni), fe_neg(fe_mul(a.c1, ni))};
}

__device__ __forceinline__ Fp2 fp2_load(const Fp2* p) {
  const Fp* q = reinterpret_cast<const Fp*>(p);
  return {fe_load(q), fe_load(q + 1)};
}

__device__ __forceinline__ void fp2_store(Fp2* p, const Fp2& a) {
  Fp* q = reinterpret_cast<Fp*>(p);
  fe_store(q, a.c0);
  fe_store(q + 1, a.c1);
}

}  // namespace pinion
