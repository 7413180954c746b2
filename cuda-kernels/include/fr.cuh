// Fr-specific Montgomery multiplication (BLS12-381 scalar field r, 8 x 32-bit limbs).
//
// r's two low words are 0x00000001 and 0xffffffff, so -r^-1 mod 2^32 = 0xffffffff and each
// CIOS reduction step needs no multiply for them: with x the accumulator's low word,
//   q = -x mod 2^32,
//   q * r[0] = q           (added to x it gives 0 and a carry exactly when x != 0),
//   q * r[1] = q * 2^32 - q: low word x, high word (x != 0 ? ~x : 0).
// The generic fe_mul (field.cuh) multiplies by both words; ptxas folds the 1 but not the
// 0xffffffff, so this saves 2 of the 32 multiply instructions per step (16 per product)
// and moves them to the adder pipe. Same bounds and result as fe_mul<FrParams>.
// Included only by the NTT module, so a change here rebuilds only ntt.ptx.
#pragma once
#include "field.cuh"

namespace pinion {

__device__ __forceinline__ Fr fr_mul(const Fr& a, const Fr& b) {
  constexpr int N = 8;
  uint32_t m[N];
  FrParams::modulus(m);
  uint32_t t[N + 1];
#pragma unroll
  for (int j = 0; j <= N; ++j) t[j] = 0;

#pragma unroll
  for (int i = 0; i < N; ++i) {
    const uint32_t bi = b.l[i];
    detail::mul_add_row<N, 0>(t, a.l, bi);
    t[N] = cc::addc(0, 0);
    detail::mul_add_row<N, 1>(t, a.l, bi);

    const uint32_t x = t[0];
    const uint32_t q = 0u - x;
    // Even words of r: r[0] = 1 (carry out of x + q), then r[2], r[4], r[6].
    (void)cc::add_cc(x, q);
    t[1] = cc::addc_cc(t[1], 0);
    t[2] = cc::madc_lo_cc(m[2], q, t[2]);
    t[3] = cc::madc_hi_cc(m[2], q, t[3]);
    t[4] = cc::madc_lo_cc(m[4], q, t[4]);
    t[5] = cc::madc_hi_cc(m[4], q, t[5]);
    t[6] = cc::madc_lo_cc(m[6], q, t[6]);
    t[7] = cc::madc_hi_cc(m[6], q, t[7]);
    t[N] = cc::addc(t[N], 0);
    // Odd words: r[1] = 0xffffffff without a multiply, then r[3], r[5], r[7].
    const uint32_t hi1 = x != 0 ? ~x : 0u;
    t[1] = cc::add_cc(t[1], x);
    t[2] = cc::addc_cc(t[2], hi1);
    t[3] = cc::madc_lo_cc(m[3], q, t[3]);
    t[4] = cc::madc_hi_cc(m[3], q, t[4]);
    t[5] = cc::madc_lo_cc(m[5], q, t[5]);
    t[6] = cc::madc_hi_cc(m[5], q, t[6]);
    t[7] = cc::madc_lo_cc(m[7], q, t[7]);
    t[8] = cc::madc_hi_cc(m[7], q, t[8]);  // no carry out (fe_mul's bound)
    // t[0] is now 0: shift down one word.
#pragma unroll
    for (int j = 0; j < N; ++j) t[j] = t[j + 1];
    t[N] = 0;
  }
  uint32_t lo[N];
#pragma unroll
  for (int j = 0; j < N; ++j) lo[j] = t[j];
  Fr r;
  detail::reduce_once<FrParams>(r.l, lo);
  return r;
}

}  // namespace pinion
