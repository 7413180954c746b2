// Test and benchmark kernels for the field arithmetic in include/field.cuh and
// include/fp2.cuh. One element per thread over device arrays of `n` elements
// (grid-stride loop, so any launch shape covers all of them).
//
// Binary ops:  <f>_<op>(const T* a, const T* b, T* out, uint32_t n)   op = add, sub, mul
// Unary ops:   <f>_<op>(const T* a, T* out, uint32_t n)               op = neg, sqr, inv
// Throughput:  <f>_mul_chain, <f>_sqr_chain (squarings in the rounds; variants: fp_ab_ and fr_ab_mul_chain use fe_mul_ab,
//   fp64_mul_chain uses 64-bit limbs, fr_f64_ and fp_f64_mul_chain the FP64 pipe)(const T* a, const T* b, T* out, uint32_t n, uint32_t iters)
//   each thread keeps independent accumulators x_k in registers and does iters rounds of
//   x_k = x_k * b[i] (dependent within a chain, independent across chains), then writes
//   the product of the chains: out[i] = prod_k x_k, so the work cannot be optimised away
//   and the host can check the result.
#include <stdint.h>

#include "field.cuh"
#include "field64.cuh"
#include "field_f64.cuh"
#include "fp2.cuh"

using namespace pinion;

#define GRID_STRIDE(i, n) \
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += gridDim.x * blockDim.x)

#define FIELD_KERNELS(PFX, T, LOAD, STORE, ADD, SUB, NEG, MUL, SQR, INV)                    \
  extern "C" __global__ void PFX##_add(const T* a, const T* b, T* out, uint32_t n) {        \
    GRID_STRIDE(i, n) STORE(out + i, ADD(LOAD(a + i), LOAD(b + i)));                         \
  }                                                                                          \
  extern "C" __global__ void PFX##_sub(const T* a, const T* b, T* out, uint32_t n) {        \
    GRID_STRIDE(i, n) STORE(out + i, SUB(LOAD(a + i), LOAD(b + i)));                         \
  }                                                                                          \
  extern "C" __global__ void PFX##_mul(const T* a, const T* b, T* out, uint32_t n) {        \
    GRID_STRIDE(i, n) STORE(out + i, MUL(LOAD(a + i), LOAD(b + i)));                         \
  }                                                                                          \
  extern "C" __global__ void PFX##_neg(const T* a, T* out, uint32_t n) {                    \
    GRID_STRIDE(i, n) STORE(out + i, NEG(LOAD(a + i)));                                      \
  }                                                                                          \
  extern "C" __global__ void PFX##_sqr(const T* a, T* out, uint32_t n) {                    \
    GRID_STRIDE(i, n) STORE(out + i, SQR(LOAD(a + i)));                                      \
  }                                                                                          \
  extern "C" __global__ void PFX##_inv(const T* a, T* out, uint32_t n) {                    \
    GRID_STRIDE(i, n) STORE(out + i, INV(LOAD(a + i)));                                      \
  }

FIELD_KERNELS(fp, Fp, fe_load<FpParams>, fe_store<FpParams>, fe_add<FpParams>,
              fe_sub<FpParams>, fe_neg<FpParams>, fe_mul<FpParams>, fe_sqr<FpParams>,
              fe_inv<FpParams>)
FIELD_KERNELS(fr, Fr, fe_load<FrParams>, fe_store<FrParams>, fe_add<FrParams>,
              fe_sub<FrParams>, fe_neg<FrParams>, fe_mul<FrParams>, fe_sqr<FrParams>,
              fe_inv<FrParams>)
FIELD_KERNELS(fp2, Fp2, fp2_load, fp2_store, fp2_add, fp2_sub, fp2_neg, fp2_mul, fp2_sqr,
              fp2_inv)

// Chains per thread: enough independent work to hide the carry-chain latency, few
// enough that everything stays in registers.
#define MUL_CHAIN_KERNEL(PFX, T, K, LOAD, STORE, MUL)                                        \
  extern "C" __global__ void PFX##_mul_chain(const T* a, const T* b, T* out, uint32_t n,    \
                                              uint32_t iters) {                              \
    GRID_STRIDE(i, n) {                                                                      \
      const T y = LOAD(b + i);                                                               \
      T x[K];                                                                                \
      x[0] = LOAD(a + i);                                                                    \
      _Pragma("unroll") for (int k = 1; k < K; ++k) x[k] = MUL(x[k - 1], y);                 \
      _Pragma("unroll 1") for (uint32_t it = 0; it < iters; ++it) {                          \
        _Pragma("unroll") for (int k = 0; k < K; ++k) x[k] = MUL(x[k], y);                   \
      }                                                                                      \
      T acc = x[0];                                                                          \
      _Pragma("unroll") for (int k = 1; k < K; ++k) acc = MUL(acc, x[k]);                    \
      STORE(out + i, acc);                                                                   \
    }                                                                                        \
  }

MUL_CHAIN_KERNEL(fp, Fp, 4, fe_load<FpParams>, fe_store<FpParams>, fe_mul<FpParams>)
MUL_CHAIN_KERNEL(fr, Fr, 4, fe_load<FrParams>, fe_store<FrParams>, fe_mul<FrParams>)
MUL_CHAIN_KERNEL(fp2, Fp2, 2, fp2_load, fp2_store, fp2_mul)
// Squaring chains: the same start, then iters rounds of x_k = x_k^2 (fe_sqr).
#define SQR_CHAIN_KERNEL(PFX, T, K, LOAD, STORE, MUL, SQR)                                   \
  extern "C" __global__ void PFX##_sqr_chain(const T* a, const T* b, T* out, uint32_t n,    \
                                              uint32_t iters) {                              \
    GRID_STRIDE(i, n) {                                                                      \
      const T y = LOAD(b + i);                                                               \
      T x[K];                                                                                \
      x[0] = LOAD(a + i);                                                                    \
      _Pragma("unroll") for (int k = 1; k < K; ++k) x[k] = MUL(x[k - 1], y);                 \
      _Pragma("unroll 1") for (uint32_t it = 0; it < iters; ++it) {                          \
        _Pragma("unroll") for (int k = 0; k < K; ++k) x[k] = SQR(x[k]);                      \
      }                                                                                      \
      T acc = x[0];                                                                          \
      _Pragma("unroll") for (int k = 1; k < K; ++k) acc = MUL(acc, x[k]);                    \
      STORE(out + i, acc);                                                                   \
    }                                                                                        \
  }

SQR_CHAIN_KERNEL(fp, Fp, 4, fe_load<FpParams>, fe_store<FpParams>, fe_mul<FpParams>,
                 fe_sqr<FpParams>)
SQR_CHAIN_KERNEL(fr, Fr, 4, fe_load<FrParams>, fe_store<FrParams>, fe_mul<FrParams>,
                 fe_sqr<FrParams>)

// The two-accumulator product (fe_mul_ab), for the comparison with fe_mul.
MUL_CHAIN_KERNEL(fp_ab, Fp, 4, fe_load<FpParams>, fe_store<FpParams>, fe_mul_ab<FpParams>)
MUL_CHAIN_KERNEL(fr_ab, Fr, 4, fe_load<FrParams>, fe_store<FrParams>, fe_mul_ab<FrParams>)
// The 64-bit-limb variant (include/field64.cuh), same chains and result as fp_mul_chain.
MUL_CHAIN_KERNEL(fp64, Fp, 4, fe_load<FpParams>, fe_store<FpParams>, fp_mul_u64)
// The FP64-pipe products (include/field_f64.cuh), same chains and results as fr_mul_chain
// and fp_mul_chain.
MUL_CHAIN_KERNEL(fr_f64, Fr, 4, fe_load<FrParams>, fe_store<FrParams>, fr_mul_f64)
MUL_CHAIN_KERNEL(fp_f64, Fp, 4, fe_load<FpParams>, fe_store<FpParams>, fp_mul_f64)
