// Montgomery arithmetic over the BLS12-381 base field Fp and scalar field Fr.
//
// Layout (matches crates/bls-repr): an element is N little-endian 32-bit limbs holding
// x*R mod m, fully reduced (< m), with R = 2^(32N): N = 12 (R = 2^384) for Fp and N = 8
// (R = 2^256) for Fr. A host `[u64; 6]` is read as 12 little-endian u32 words.
//
// Multiplication is CIOS (one row a*b_i, one row m*q, shift by a word) with 32-bit limbs.
// Each row is split by limb parity: the lo/hi halves of a[j]*b_i for even j tile the
// words [0, N) without overlap, the odd ones [1, N], so each is an unbroken
// `mad.lo.cc / madc.hi.cc` chain that ptxas turns into N/2 `IMAD.WIDE` (64-bit
// multiply-accumulate). Cost per product: 2*N^2 wide IMADs plus carry fix-ups and one
// final conditional subtraction; fe_mul and fe_mul_ab differ in how the accumulator
// moves down a word per step (see each).
//
// Bounds used (Fp has 8m < R, Fr only 2m < R < 4m): with a, b < m the CIOS accumulator
// stays below 2m < 2^(32N) at the start of each iteration, and below 2^(32(N+1)) inside
// it, so the top word t[N] never carries out. Everything stays in registers: every loop
// over limbs is fully unrolled and every array index is a compile-time constant.
#pragma once
#include <stdint.h>

#include "carry.cuh"

namespace pinion {

struct FpParams {
  static constexpr int N = 12;
  // -m^-1 mod 2^32
  static constexpr uint32_t INV = 0xfffcfffdu;
  // Whether m's two low words are 1 and 2^32 - 1 (see detail::redc_step).
  static constexpr bool LOW_WORDS_1_FFFFFFFF = false;
  __device__ static __forceinline__ void modulus(uint32_t (&m)[N]) {
    m[0] = 0xffffaaabu; m[1] = 0xb9feffffu; m[2] = 0xb153ffffu; m[3] = 0x1eabfffeu;
    m[4] = 0xf6b0f624u; m[5] = 0x6730d2a0u; m[6] = 0xf38512bfu; m[7] = 0x64774b84u;
    m[8] = 0x434bacd7u; m[9] = 0x4b1ba7b6u; m[10] = 0x397fe69au; m[11] = 0x1a0111eau;
  }
  // R mod m: the Montgomery form of 1.
  __device__ static __forceinline__ void one(uint32_t (&m)[N]) {
    m[0] = 0x0002fffdu; m[1] = 0x76090000u; m[2] = 0xc40c0002u; m[3] = 0xebf4000bu;
    m[4] = 0x53c758bau; m[5] = 0x5f489857u; m[6] = 0x70525745u; m[7] = 0x77ce5853u;
    m[8] = 0xa256ec6du; m[9] = 0x5c071a97u; m[10] = 0xfa80e493u; m[11] = 0x15f65ec3u;
  }
  // R^2 mod m: multiplying a canonical value by this converts it to Montgomery form.
  __device__ static __forceinline__ void r2(uint32_t (&m)[N]) {
    m[0] = 0x1c341746u; m[1] = 0xf4df1f34u; m[2] = 0x09d104f1u; m[3] = 0x0a76e6a6u;
    m[4] = 0x4c95b6d5u; m[5] = 0x8de5476cu; m[6] = 0x939d83c0u; m[7] = 0x67eb88a9u;
    m[8] = 0xb519952du; m[9] = 0x9a793e85u; m[10] = 0x92cae3aau; m[11] = 0x11988fe5u;
  }
};

struct FrParams {
  static constexpr int N = 8;
  static constexpr uint32_t INV = 0xffffffffu;
  // r = ... 0xffffffff 0x00000001: the reduction rows' two low products are adds
  // (detail::redc_step). Timed on the H200 in session 30 (cuda-kernels/NOTES.md): Fr
  // `fe_mul_ab` +9%, transforms 0.3-1.3% faster.
  static constexpr bool LOW_WORDS_1_FFFFFFFF = true;
  __device__ static __forceinline__ void modulus(uint32_t (&m)[N]) {
    m[0] = 0x00000001u; m[1] = 0xffffffffu; m[2] = 0xfffe5bfeu; m[3] = 0x53bda402u;
    m[4] = 0x09a1d805u; m[5] = 0x3339d808u; m[6] = 0x299d7d48u; m[7] = 0x73eda753u;
  }
  __device__ static __forceinline__ void one(uint32_t (&m)[N]) {
    m[0] = 0xfffffffeu; m[1] = 0x00000001u; m[2] = 0x00034802u; m[3] = 0x5884b7fau;
    m[4] = 0xecbc4ff5u; m[5] = 0x998c4fefu; m[6] = 0xacc5056fu; m[7] = 0x1824b159u;
  }
  __device__ static __forceinline__ void r2(uint32_t (&m)[N]) {
    m[0] = 0xf3f29c6du; m[1] = 0xc999e990u; m[2] = 0x87925c23u; m[3] = 0x2b6cedcbu;
    m[4] = 0x7254398fu; m[5] = 0x05d31496u; m[6] = 0x9f59ff11u; m[7] = 0x0748d9d9u;
  }
};

template <class P>
struct Fe {
  static constexpr int N = P::N;
  uint32_t l[N];
};

using Fp = Fe<FpParams>;
using Fr = Fe<FrParams>;

namespace detail {

// t[PAR .. N+PAR) += sum over j = PAR, PAR+2, ... of x[j]*y << 32*(j-PAR), as one carry
// chain. Leaves the carry out in the flag for the caller (consumed or provably zero).
template <int N, int PAR>
__device__ __forceinline__ void mul_add_row(uint32_t (&t)[N + 1], const uint32_t (&x)[N],
                                            uint32_t y) {
  t[PAR] = cc::mad_lo_cc(x[PAR], y, t[PAR]);
  t[PAR + 1] = cc::madc_hi_cc(x[PAR], y, t[PAR + 1]);
#pragma unroll
  for (int j = PAR + 2; j < N; j += 2) {
    t[j] = cc::madc_lo_cc(x[j], y, t[j]);
    t[j + 1] = cc::madc_hi_cc(x[j], y, t[j + 1]);
  }
}

// One CIOS reduction step's rows for a modulus whose two low words are 1 and 2^32 - 1
// (Fr; INV = 2^32 - 1, so q = -a0 for the accumulator's low word a0). The products of
// those two words need no multiplier:
//   m0 * q = q:                      lo q, hi 0; a0 + q = c0 * 2^32, c0 = (a0 != 0);
//   m1 * q = q * 2^32 - q:           lo -q = a0, hi q - c0.
// Even row: E[0 .. N] += m_even * q, E[0] = a0 (left as it is: the step drops that word;
// E[N] takes the carry). Odd row: O[OFF .. OFF + N) += m_odd * q, O[OFF] being word 1
// (OFF = 1 for one accumulator, 0 for fe_mul_ab's B), the carry left in the flag as
// mul_add_row leaves it. Same values as mul_add_row<N, 0> and <N, 1> over m, but for E[0].
__device__ __forceinline__ uint32_t redc_low_c0(uint32_t a0, uint32_t q) {
  (void)cc::add_cc(a0, q);
  return cc::addc(0, 0);
}

template <int N>
__device__ __forceinline__ void redc_low_even(uint32_t (&E)[N + 1], const uint32_t (&m)[N],
                                              uint32_t q, uint32_t c0) {
  E[1] = cc::add_cc(E[1], c0);
#pragma unroll
  for (int j = 2; j < N; j += 2) {
    E[j] = cc::madc_lo_cc(m[j], q, E[j]);
    E[j + 1] = cc::madc_hi_cc(m[j], q, E[j + 1]);
  }
}

template <int N, int OFF, int W>
__device__ __forceinline__ void redc_low_odd(uint32_t (&O)[W], const uint32_t (&m)[N],
                                             uint32_t q, uint32_t a0, uint32_t c0) {
  static_assert(OFF + N <= W, "the odd row ends inside the accumulator");
  O[OFF] = cc::add_cc(O[OFF], a0);
  O[OFF + 1] = cc::addc_cc(O[OFF + 1], q - c0);
#pragma unroll
  for (int j = 3; j < N; j += 2) {
    O[OFF + j - 1] = cc::madc_lo_cc(m[j], q, O[OFF + j - 1]);
    O[OFF + j] = cc::madc_hi_cc(m[j], q, O[OFF + j]);
  }
}

// One reduction step of a single accumulator t (N + 1 words): t += m * q, q = t[0] * INV,
// leaving t[0] to be shifted out (zero, or a0 under LOW_WORDS_1_FFFFFFFF).
template <class P>
__device__ __forceinline__ void redc_step(uint32_t (&t)[P::N + 1], const uint32_t (&m)[P::N]) {
  constexpr int N = P::N;
  const uint32_t q = t[0] * P::INV;
  if constexpr (P::LOW_WORDS_1_FFFFFFFF) {
    const uint32_t a0 = t[0];
    const uint32_t c0 = redc_low_c0(a0, q);
    redc_low_even<N>(t, m, q, c0);
    t[N] = cc::addc(t[N], 0);
    redc_low_odd<N, 1>(t, m, q, a0, c0);
  } else {
    mul_add_row<N, 0>(t, m, q);
    t[N] = cc::addc(t[N], 0);
    mul_add_row<N, 1>(t, m, q);
  }
}

// r = t - m if t >= m else t, for t < 2m.
template <class P>
__device__ __forceinline__ void reduce_once(uint32_t (&r)[P::N], const uint32_t (&t)[P::N]) {
  constexpr int N = P::N;
  uint32_t m[N];
  P::modulus(m);
  uint32_t s[N];
  s[0] = cc::sub_cc(t[0], m[0]);
#pragma unroll
  for (int j = 1; j < N; ++j) s[j] = cc::subc_cc(t[j], m[j]);
  const uint32_t borrow = cc::subc(0, 0);  // 0 or 0xffffffff (t < m)
#pragma unroll
  for (int j = 0; j < N; ++j) r[j] = borrow ? t[j] : s[j];
}

}  // namespace detail

template <class P>
__device__ __forceinline__ Fe<P> fe_zero() {
  Fe<P> r;
#pragma unroll
  for (int j = 0; j < P::N; ++j) r.l[j] = 0;
  return r;
}

template <class P>
__device__ __forceinline__ Fe<P> fe_one() {
  Fe<P> r;
  P::one(r.l);
  return r;
}

template <class P>
__device__ __forceinline__ bool fe_is_zero(const Fe<P>& a) {
  uint32_t acc = 0;
#pragma unroll
  for (int j = 0; j < P::N; ++j) acc |= a.l[j];
  return acc == 0;
}

template <class P>
__device__ __forceinline__ Fe<P> fe_add(const Fe<P>& a, const Fe<P>& b) {
  constexpr int N = P::N;
  uint32_t t[N];
  // a + b < 2m < 2^(32N): no carry out of the top word.
  t[0] = cc::add_cc(a.l[0], b.l[0]);
#pragma unroll
  for (int j = 1; j < N - 1; ++j) t[j] = cc::addc_cc(a.l[j], b.l[j]);
  t[N - 1] = cc::addc(a.l[N - 1], b.l[N - 1]);
  Fe<P> r;
  detail::reduce_once<P>(r.l, t);
  return r;
}

template <class P>
__device__ __forceinline__ Fe<P> fe_sub(const Fe<P>& a, const Fe<P>& b) {
  constexpr int N = P::N;
  uint32_t t[N];
  t[0] = cc::sub_cc(a.l[0], b.l[0]);
#pragma unroll
  for (int j = 1; j < N; ++j) t[j] = cc::subc_cc(a.l[j], b.l[j]);
  const uint32_t mask = cc::subc(0, 0);  // all ones when a < b: add m back
  uint32_t m[N];
  P::modulus(m);
  Fe<P> r;
  r.l[0] = cc::add_cc(t[0], m[0] & mask);
#pragma unroll
  for (int j = 1; j < N - 1; ++j) r.l[j] = cc::addc_cc(t[j], m[j] & mask);
  r.l[N - 1] = cc::addc(t[N - 1], m[N - 1] & mask);
  return r;
}

template <class P>
__device__ __forceinline__ Fe<P> fe_neg(const Fe<P>& a) {
  constexpr int N = P::N;
  uint32_t m[N];
  P::modulus(m);
  // m - 0 = m is not reduced, so zero maps to zero through the mask.
  const uint32_t mask = fe_is_zero(a) ? 0u : 0xffffffffu;
  Fe<P> r;
  r.l[0] = cc::sub_cc(m[0], a.l[0]);
#pragma unroll
  for (int j = 1; j < N - 1; ++j) r.l[j] = cc::subc_cc(m[j], a.l[j]);
  r.l[N - 1] = cc::subc(m[N - 1], a.l[N - 1]);
#pragma unroll
  for (int j = 0; j < N; ++j) r.l[j] &= mask;
  return r;
}

// Montgomery product a*b*R^-1 mod m, for a, b < m; result < m. One accumulator t,
// shifted down a word per step. The shift misaligns the register pairs of the fused
// wide multiplies, so ptxas adds ~390 moves (Fp), which cost little: it is the faster
// variant in the throughput kernels.
template <class P>
__device__ __forceinline__ Fe<P> fe_mul(const Fe<P>& a, const Fe<P>& b) {
  constexpr int N = P::N;
  uint32_t m[N];
  P::modulus(m);
  uint32_t t[N + 1];
#pragma unroll
  for (int j = 0; j <= N; ++j) t[j] = 0;

#pragma unroll
  for (int i = 0; i < N; ++i) {
    const uint32_t bi = b.l[i];
    // t[N] is zero here (start, or shifted in below).
    detail::mul_add_row<N, 0>(t, a.l, bi);
    t[N] = cc::addc(0, 0);
    detail::mul_add_row<N, 1>(t, a.l, bi);  // ends at t[N]; no carry out (bound above)

    detail::redc_step<P>(t, m);
    // t[0] is now 0 (or dropped): shift down one word.
#pragma unroll
    for (int j = 0; j < N; ++j) t[j] = t[j + 1];
    t[N] = 0;
  }
  uint32_t lo[N];
#pragma unroll
  for (int j = 0; j < N; ++j) lo[j] = t[j];
  Fe<P> r;
  detail::reduce_once<P>(r.l, lo);
  return r;
}

// fe_mul_ab: the product with two accumulators, so that every lo/hi pair lands in an aligned
// register pair (ptxas fuses such a pair into one IMAD.WIDE): T = A + B * 2^32, where A
// takes the even-indexed limbs' products and B (one word up) the odd ones. After each
// reduction step A[0] is zero and the next A is B + A / 2^32, an add chain, instead of a
// one-word shift of a single accumulator that misaligns the pairs every iteration.
// Bounds: A' = B + A/2^32 is the CIOS accumulator (< 2m < 2^(32N)), so B <= A' fits N
// words and neither B's chain nor the merge carries out.
//
// Same result as fe_mul. Measured on the H200 (cuda-kernels/NOTES.md): fewer
// instructions (Fp 518 vs 776) and registers, yet slower in the single-field
// throughput kernels (Fp -8%, Fr -14%) and faster inside Fp2 (+17%), so both are kept
// and each caller uses the one measured faster for it.
namespace detail {
// fe_mul_ab's accumulation without its final conditional subtraction: lo = (a*b + q*m) / R
// for the CIOS quotient q < R, so lo = a*b*R^-1 (mod m) and lo < a*b/R + m. The bounds the
// accumulation relies on (below a + m < 2m < 2^(32N) at the start of each step) need a < m
// only: b may be any N-word value.
template <class P>
__device__ __forceinline__ void mul_ab_unreduced(uint32_t (&lo)[P::N], const Fe<P>& a,
                                                 const Fe<P>& b) {
  constexpr int N = P::N;
  uint32_t m[N];
  P::modulus(m);
  uint32_t A[N + 1], B[N];
#pragma unroll
  for (int j = 0; j <= N; ++j) A[j] = 0;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const uint32_t bi = b.l[i];
    detail::mul_add_row<N, 0>(A, a.l, bi);
    A[N] = cc::addc(0, 0);
    // B starts empty each step: plain products, no carries between the pairs.
#pragma unroll
    for (int j = 1; j < N; j += 2) {
      B[j - 1] = a.l[j] * bi;
      B[j] = cc::mul_hi(a.l[j], bi);
    }
    const uint32_t q = A[0] * P::INV;
    if constexpr (P::LOW_WORDS_1_FFFFFFFF) {
      const uint32_t a0 = A[0];
      const uint32_t c0 = detail::redc_low_c0(a0, q);
      detail::redc_low_even<N>(A, m, q, c0);
      A[N] = cc::addc(A[N], 0);
      detail::redc_low_odd<N, 0>(B, m, q, a0, c0);
    } else {
      detail::mul_add_row<N, 0>(A, m, q);
      A[N] = cc::addc(A[N], 0);
      B[0] = cc::mad_lo_cc(m[1], q, B[0]);
      B[1] = cc::madc_hi_cc(m[1], q, B[1]);
#pragma unroll
      for (int j = 3; j < N; j += 2) {
        B[j - 1] = cc::madc_lo_cc(m[j], q, B[j - 1]);
        B[j] = cc::madc_hi_cc(m[j], q, B[j]);
      }
    }
    // A = B + A / 2^32 (A[0] is zero, or a0 and dropped)
    A[0] = cc::add_cc(B[0], A[1]);
#pragma unroll
    for (int k = 1; k < N - 1; ++k) A[k] = cc::addc_cc(B[k], A[k + 1]);
    A[N - 1] = cc::addc(B[N - 1], A[N]);
    A[N] = 0;
  }
#pragma unroll
  for (int j = 0; j < N; ++j) lo[j] = A[j];
}
}  // namespace detail

template <class P>
__device__ __forceinline__ Fe<P> fe_mul_ab(const Fe<P>& a, const Fe<P>& b) {
  uint32_t lo[P::N];
  detail::mul_ab_unreduced<P>(lo, a, b);
  Fe<P> r;
  detail::reduce_once<P>(r.l, lo);
  return r;
}

// Montgomery square a^2*R^-1 mod m, for a < m; result < m. Same result as fe_mul(a, a)
// with about a quarter fewer wide multiplies (Fp: 222 instead of 288):
//  1. S = sum over i < j of a_i a_j 2^(32(i+j)), row by row; row i is two parity chains.
//     After row i the partial sum is below a_{<=i} * a < 2^(32(N+i+1)), so a row's carry
//     never leaves word i+N: one chain ends there, the other carries into it.
//  2. t = 2S + sum of a_i^2 2^(64i) = a^2 (2N words; a^2 < 2^(64N), no carry out).
//  3. With t = L + U*R: REDC(L) by shifted one-word steps (as in fe_mul, without the a*b
//     rows) gives r <= m, then r + U <= 2m - 1 < 2^(32N) (U < m since a^2 < m*R), and one
//     conditional subtraction reduces it.
template <class P>
__device__ __forceinline__ Fe<P> fe_sqr(const Fe<P>& a) {
  constexpr int N = P::N;
  uint32_t t[2 * N];
#pragma unroll
  for (int k = 0; k < 2 * N; ++k) t[k] = 0;
  // 1. off-diagonal products
#pragma unroll
  for (int i = 0; i < N - 1; ++i) {
    const uint32_t ai = a.l[i];
    // Parity of j whose chain ends at word i+N (contains j = N-1) and the other one.
    constexpr int LAST = (N - 1) & 1;
    // Chain over j = i+1+q, q = 0, 2, ... with parity != LAST ends at word i+N-1.
    const int j0_other = ((i + 1) & 1) == LAST ? i + 2 : i + 1;
    const int j0_last = ((i + 1) & 1) == LAST ? i + 1 : i + 2;
    if (j0_other < N) {
      t[i + j0_other] = cc::mad_lo_cc(ai, a.l[j0_other], t[i + j0_other]);
      t[i + j0_other + 1] = cc::madc_hi_cc(ai, a.l[j0_other], t[i + j0_other + 1]);
#pragma unroll
      for (int j = j0_other + 2; j < N; j += 2) {
        t[i + j] = cc::madc_lo_cc(ai, a.l[j], t[i + j]);
        t[i + j + 1] = cc::madc_hi_cc(ai, a.l[j], t[i + j + 1]);
      }
      t[i + N] = cc::addc(t[i + N], 0);
    }
    if (j0_last < N) {
      t[i + j0_last] = cc::mad_lo_cc(ai, a.l[j0_last], t[i + j0_last]);
      t[i + j0_last + 1] = cc::madc_hi_cc(ai, a.l[j0_last], t[i + j0_last + 1]);
#pragma unroll
      for (int j = j0_last + 2; j < N; j += 2) {
        t[i + j] = cc::madc_lo_cc(ai, a.l[j], t[i + j]);
        t[i + j + 1] = cc::madc_hi_cc(ai, a.l[j], t[i + j + 1]);
      }
    }
  }
  // 2. double and add the diagonal
  t[0] = cc::add_cc(t[0], t[0]);
#pragma unroll
  for (int k = 1; k < 2 * N - 1; ++k) t[k] = cc::addc_cc(t[k], t[k]);
  t[2 * N - 1] = cc::addc(t[2 * N - 1], t[2 * N - 1]);
  t[0] = cc::mad_lo_cc(a.l[0], a.l[0], t[0]);
  t[1] = cc::madc_hi_cc(a.l[0], a.l[0], t[1]);
#pragma unroll
  for (int i = 1; i < N; ++i) {
    t[2 * i] = cc::madc_lo_cc(a.l[i], a.l[i], t[2 * i]);
    t[2 * i + 1] = cc::madc_hi_cc(a.l[i], a.l[i], t[2 * i + 1]);
  }
  // 3. REDC of the low half, then add the high half
  uint32_t m[N];
  P::modulus(m);
  uint32_t r[N + 1];
#pragma unroll
  for (int k = 0; k < N; ++k) r[k] = t[k];
  r[N] = 0;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    detail::redc_step<P>(r, m);
#pragma unroll
    for (int k = 0; k < N; ++k) r[k] = r[k + 1];
    r[N] = 0;
  }
  uint32_t s[N];
  s[0] = cc::add_cc(r[0], t[N]);
#pragma unroll
  for (int k = 1; k < N - 1; ++k) s[k] = cc::addc_cc(r[k], t[N + k]);
  s[N - 1] = cc::addc(r[N - 1], t[2 * N - 1]);
  Fe<P> out;
  detail::reduce_once<P>(out.l, s);
  return out;
}

// a^(m-2) = a^-1 by Fermat; the inverse of zero is defined as zero. Left-to-right
// square-and-multiply over the exponent's words; the exponent is shifted through
// registers (compile-time indices only) so nothing lands in local memory. Cost:
// 32N squarings plus one multiplication per set bit.
template <class P>
__device__ __forceinline__ Fe<P> fe_inv(const Fe<P>& a) {
  constexpr int N = P::N;
  uint32_t m[N], e[N];
  P::modulus(m);
  // e = m - 2 with the borrow propagated (Fr's lowest word is 1).
  e[0] = cc::sub_cc(m[0], 2);
#pragma unroll
  for (int j = 1; j < N - 1; ++j) e[j] = cc::subc_cc(m[j], 0);
  e[N - 1] = cc::subc(m[N - 1], 0);
  Fe<P> x = fe_one<P>();
#pragma unroll 1
  for (int w = 0; w < N; ++w) {
    uint32_t word = e[N - 1];
#pragma unroll
    for (int k = N - 1; k > 0; --k) e[k] = e[k - 1];
    e[0] = 0;
#pragma unroll 1
    for (int bit = 0; bit < 32; ++bit) {
      x = fe_sqr<P>(x);
      if (word & 0x80000000u) x = fe_mul<P>(x, a);
      word <<= 1;
    }
  }
  return x;
}

// Vectorised global-memory access: elements are 16-byte multiples (Fp 48, Fr 32).
template <class P>
__device__ __forceinline__ Fe<P> fe_load(const Fe<P>* p) {
  static_assert(P::N % 4 == 0, "limb count must be a multiple of 4");
  const uint4* v = reinterpret_cast<const uint4*>(p);
  Fe<P> r;
#pragma unroll
  for (int k = 0; k < P::N / 4; ++k) {
    const uint4 q = v[k];
    r.l[4 * k + 0] = q.x;
    r.l[4 * k + 1] = q.y;
    r.l[4 * k + 2] = q.z;
    r.l[4 * k + 3] = q.w;
  }
  return r;
}

template <class P>
__device__ __forceinline__ void fe_store(Fe<P>* p, const Fe<P>& a) {
  uint4* v = reinterpret_cast<uint4*>(p);
#pragma unroll
  for (int k = 0; k < P::N / 4; ++k) {
    v[k] = make_uint4(a.l[4 * k + 0], a.l[4 * k + 1], a.l[4 * k + 2], a.l[4 * k + 3]);
  }
}

}  // namespace pinion
