// Runs the device field code of include/ on the CPU, with the carry flag emulated
// (PINION_HOST_EMULATION in carry.cuh), and prints inputs and outputs as hex for
// tools/check_field_emu.py to verify with Python big integers. Developer tool: catches
// carry-chain and bound mistakes without a GPU.
//   g++ -O2 -std=c++17 -DPINION_HOST_EMULATION -I cuda-kernels/include \
//       cuda-kernels/tools/field_emu.cpp -o /tmp/field_emu && /tmp/field_emu N SEED | \
//       python3 cuda-kernels/tools/check_field_emu.py
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "emu_common.h"

#include "field.cuh"
#include "field64.cuh"
#include "fp2.cuh"
#include "fp_inv.cuh"
#include "field_f64.cuh"
#include "ntt.cuh"

using namespace pinion;

static uint64_t rng_state;
static uint32_t next32() {  // splitmix64
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return (uint32_t)((z ^ (z >> 31)) >> 16);
}

template <class P>
static Fe<P> random_fe(int kind) {
  Fe<P> r;
  uint32_t m[P::N];
  P::modulus(m);
  switch (kind) {
    case 0: for (int j = 0; j < P::N; ++j) r.l[j] = 0; return r;
    case 1: for (int j = 0; j < P::N; ++j) r.l[j] = m[j]; r.l[0] -= 1; return r;  // m - 1
    case 2: return fe_one<P>();
    case 4:  // random with a zero low word: a product's first reduction step has q = 0
      r = random_fe<P>(3);
      r.l[0] = 0;
      return r;
    default: break;
  }
  // random below m: random words with the top word below m's top word
  for (int j = 0; j < P::N; ++j) r.l[j] = next32();
  r.l[P::N - 1] %= m[P::N - 1];
  return r;
}

template <class P>
static void print(const Fe<P>& a) {
  printf(" ");
  for (int j = P::N - 1; j >= 0; --j) printf("%08x", a.l[j]);
}

template <class P>
static void run(const char* name, int n) {
  for (int i = 0; i < n; ++i) {
    // Edge values first, then random ones, every fifth with a zero low word.
    const int kind = i < 9 ? -1 : i % 5 == 0 ? 4 : 3;
    Fe<P> a = random_fe<P>(kind < 0 ? i / 3 : kind), b = random_fe<P>(kind < 0 ? i % 3 : 3);
    printf("%s add", name); print(a); print(b); print(fe_add(a, b)); printf("\n");
    printf("%s sub", name); print(a); print(b); print(fe_sub(a, b)); printf("\n");
    printf("%s mul", name); print(a); print(b); print(fe_mul(a, b)); printf("\n");
    printf("%s mul", name); print(a); print(b); print(fe_mul_ab(a, b)); printf("\n");
    printf("%s mul", name); print(a); print(a); print(fe_sqr(a)); printf("\n");
    printf("%s mul", name); print(b); print(b); print(fe_sqr(b)); printf("\n");
    if constexpr (P::N == 12) {
      printf("%s mul", name); print(a); print(b); print(fp_mul_u64(a, b)); printf("\n");
      printf("%s mul", name); print(a); print(b); print(fp_mul_f64(a, b)); printf("\n");
      printf("%s mul", name); print(a); print(a); print(fp_mul_f64(a, a)); printf("\n");
    } else {
      printf("%s mul", name); print(a); print(b); print(fr_mul_f64(a, b)); printf("\n");
      printf("%s mul", name); print(a); print(a); print(fr_mul_f64(a, a)); printf("\n");
    }
    printf("%s neg", name); print(a); print(fe_neg(a)); printf("\n");
    if (i < 40) { printf("%s inv", name); print(a); print(fe_inv(a)); printf("\n"); }
    if constexpr (P::N == 12) {
      printf("%s inv", name); print(a); print(fp_inv_gcd(a)); printf("\n");
      // short and structured values: 2^k, p - 2^k (slow cases for a binary GCD)
      Fe<P> s = fe_zero<P>(), t;
      s.l[(i % 381) / 32] = 1u << (i % 32);
      printf("%s inv", name); print(s); print(fp_inv_gcd(s)); printf("\n");
      uint32_t m[P::N];
      P::modulus(m);
      uint32_t br = 0;
      for (int j = 0; j < P::N; ++j) {
        const uint64_t d = (uint64_t)m[j] - s.l[j] - br;
        t.l[j] = (uint32_t)d;
        br = (uint32_t)(d >> 63);
      }
      printf("%s inv", name); print(t); print(fp_inv_gcd(t)); printf("\n");
    }
  }
}

// An NTT butterfly operand below 2r (ntt.cuh's lazy representatives): edge values (0,
// r - 1, r, 2r - 1, 2r - 2^32), then random ones, half of them in [r, 2r).
static Fr lazy_operand(int kind) {
  uint32_t m[8], t[8];
  FrParams::modulus(m);
  ntt::fr_twice_modulus(t);
  Fr r;
  switch (kind) {
    case 0: return fe_zero<FrParams>();
    case 1: for (int j = 0; j < 8; ++j) r.l[j] = m[j]; r.l[0] -= 1; return r;  // low word 1
    case 2: for (int j = 0; j < 8; ++j) r.l[j] = m[j]; return r;
    case 3: for (int j = 0; j < 8; ++j) r.l[j] = t[j]; r.l[0] -= 1; return r;  // low word 2
    case 4: for (int j = 0; j < 8; ++j) r.l[j] = t[j]; r.l[1] -= 1; return r;  // 2r - 2^32
    default: break;
  }
  // Random words with the top word below 2r's (below 2r), or between r's and 2r's.
  for (int j = 0; j < 8; ++j) r.l[j] = next32();
  r.l[7] = kind % 2 ? r.l[7] % t[7] : m[7] + 1 + r.l[7] % (t[7] - m[7] - 1);
  return r;
}

// ntt.cuh's butterfly arithmetic on representatives below 2r: sums, differences and
// products (twiddle below r) congruent to the exact ones and below 2r, and the reduction.
static void run_fr_lazy(int n) {
  for (int i = 0; i < n; ++i) {
    const bool edge = i < 25;
    const Fr x = lazy_operand(edge ? i / 5 : 5 + i % 2);
    const Fr y = lazy_operand(edge ? i % 5 : 6 + i % 2);
    const Fr w = random_fe<FrParams>(i < 3 ? i : i % 5 == 0 ? 4 : 3);
    printf("fr ladd"); print(x); print(y); print(ntt::fr_add_lazy(x, y)); printf("\n");
    printf("fr lsub"); print(x); print(y); print(ntt::fr_sub_lazy(x, y)); printf("\n");
    printf("fr lsub"); print(y); print(x); print(ntt::fr_sub_lazy(y, x)); printf("\n");
    printf("fr lmul"); print(w); print(x); print(ntt::fr_mul_lazy(w, x)); printf("\n");
    printf("fr lred"); print(x); print(ntt::fr_reduce_lazy(x)); printf("\n");
  }
}

static void run_fp2(int n) {
  for (int i = 0; i < n; ++i) {
    Fp2 a{random_fe<FpParams>(i < 4 ? i : 3), random_fe<FpParams>(3)};
    Fp2 b{random_fe<FpParams>(3), random_fe<FpParams>(i < 4 ? i : 3)};
    printf("fp2 mul"); print(a.c0); print(a.c1); print(b.c0); print(b.c1);
    Fp2 c = fp2_mul(a, b); print(c.c0); print(c.c1); printf("\n");
    printf("fp2 sqr"); print(a.c0); print(a.c1);
    c = fp2_sqr(a); print(c.c0); print(c.c1); printf("\n");
    if (i < 20) {
      printf("fp2 inv"); print(a.c0); print(a.c1);
      c = fp2_inv(a); print(c.c0); print(c.c1); printf("\n");
    }
  }
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 1000;
  rng_state = argc > 2 ? strtoull(argv[2], nullptr, 10) : 1;
  run<FpParams>("fp", n);
  run<FrParams>("fr", n);
  run_fr_lazy(n);
  run_fp2(n / 4);
  return 0;
}
