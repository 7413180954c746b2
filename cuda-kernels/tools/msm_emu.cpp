// Runs the MSM accumulation bodies of include/ on the CPU (carry flag emulated, as
// field_emu.cpp does) on real G1 points (multiples of the generator) and checks every bucket
// of the affine chunked accumulation (msm_affine.cuh) and of the XYZZ one (msm.cuh), after
// their fix-ups, against a plain sum: random bucket sizes (empty, single, up to 500
// entries, so buckets cross chunks and streams), bases at infinity, repeated bases and
// P followed by -P and P followed by P (doubling, cancellation), chunks of 64..2048.
//   g++ -O2 -std=c++17 -DPINION_HOST_EMULATION -I cuda-kernels/include \
//       cuda-kernels/tools/msm_emu.cpp -o /tmp/msm_emu && /tmp/msm_emu SEED
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <random>
#define __device__
#define __forceinline__ inline
#define __noinline__ inline
struct uint4 { uint32_t x, y, z, w; };
inline uint4 make_uint4(uint32_t x, uint32_t y, uint32_t z, uint32_t w) { return {x, y, z, w}; }
#include "msm_affine.cuh"
using namespace pinion;
using namespace pinion::msm;

static Fp from_hex(const char* h) {  // canonical big-endian hex -> Montgomery
  Fp r = fe_zero<FpParams>();
  int len = 0; while (h[len]) ++len;
  for (int i = 0; i < len; ++i) {
    int c = h[len - 1 - i]; int v = c <= '9' ? c - '0' : (c | 32) - 'a' + 10;
    r.l[i / 8] |= (uint32_t)v << (4 * (i % 8));
  }
  Fp r2; FpParams::r2(r2.l);
  return fe_mul(r, r2);
}
static Affine<Fp> to_affine(const Xyzz<Fp>& p) {
  if (xyzz_is_inf(p)) return {fe_zero<FpParams>(), fe_zero<FpParams>()};
  // x = X/ZZ, y = Y/ZZZ
  return {fe_mul(p.x, fe_inv(p.zz)), fe_mul(p.y, fe_inv(p.zzz))};
}
static bool same(const Affine<Fp>& a, const Affine<Fp>& b) { return f_eq(a.x, b.x) && f_eq(a.y, b.y); }

int main(int argc, char** argv) {
  const uint32_t seed = argc > 1 ? atoi(argv[1]) : 1;
  std::mt19937 rng(seed);
  printf("seed %u\n", seed);
  Affine<Fp> g{from_hex("17f1d3a73197d7942695638c4fa9ac0fc3688c4f9774b905a14e3a3f171bac586c55e83ff97a1aeffb3af00adb22c6bb"),
               from_hex("08b3f481e3aaa0f1a09e30ed741d8ae4fcf5e095d5d00af600db18cb2c04b3edd03cc744a2888ae40caa232946c5e7e1")};
  const int n_bases = 200;
  std::vector<Affine<Fp>> bases(n_bases);
  Xyzz<Fp> acc = xyzz_infinity<Fp>();
  for (int i = 0; i < n_bases; ++i) { acc = xyzz_add_affine(acc, g); bases[i] = to_affine(acc); }
  bases[7] = {fe_zero<FpParams>(), fe_zero<FpParams>()};  // infinity
  int fails = 0;
  for (int trial = 0; trial < 12; ++trial) {
    const uint32_t n_keys = 1 + rng() % 40;
    std::vector<uint32_t> counts(n_keys), offsets(n_keys);
    uint32_t total = 0;
    for (uint32_t k = 0; k < n_keys; ++k) {
      uint32_t r = rng() % 10;
      counts[k] = r < 2 ? 0 : r < 5 ? 1 + rng() % 4 : r < 8 ? rng() % 70 : 100 + rng() % 400;
      offsets[k] = total; total += counts[k];
    }
    if (total == 0) { counts[n_keys - 1] = 3; total = 3; }
    std::vector<uint32_t> entries(total);
    for (uint32_t e = 0; e < total; ++e) {
      uint32_t b = rng() % 12 == 0 ? 7 : rng() % 20 == 0 ? 3 : rng() % n_bases;  // infinity, repeats
      entries[e] = b | (rng() % 2 ? SIGN_BIT : 0);
    }
    // P then -P and P then P runs
    if (total > 4) { entries[1] = entries[0] ^ SIGN_BIT; entries[3] = entries[2]; }
    for (uint32_t chunk_len : {64u, 128u, 320u, 1024u, 2048u}) {
      const uint32_t n_chunks = (total + chunk_len - 1) / chunk_len;
      std::vector<Xyzz<Fp>> b1(n_keys, xyzz_infinity<Fp>()), b2 = b1;
      std::vector<Xyzz<Fp>> p1(2 * n_chunks, xyzz_infinity<Fp>()), p2 = p1;
      for (uint32_t t = 0; t < n_chunks; ++t)
        accumulate_chunk_body(bases.data(), entries.data(), offsets.data(), counts.data(), n_keys, chunk_len, b1.data(), p1.data(), t);
      for (uint32_t t = 0; t < n_chunks; ++t)
        accumulate_chunk_affine_body<64>(bases.data(), entries.data(), offsets.data(), counts.data(), n_keys, chunk_len, b2.data(), p2.data(), t);
      for (auto* pb : {&p1, &p2}) for (uint32_t t = 0; t < n_chunks; ++t)
        fixup_groups_body(offsets.data(), counts.data(), n_keys, chunk_len, 4u, pb->data(), t);
      for (uint32_t t = 0; t < n_chunks; ++t) {
        fixup_buckets_body(offsets.data(), counts.data(), n_keys, chunk_len, 4u, p1.data(), b1.data(), t);
        fixup_buckets_body(offsets.data(), counts.data(), n_keys, chunk_len, 4u, p2.data(), b2.data(), t);
      }
      // reference: plain sums
      for (uint32_t k = 0; k < n_keys; ++k) {
        Xyzz<Fp> r = xyzz_infinity<Fp>();
        for (uint32_t e = offsets[k]; e < offsets[k] + counts[k]; ++e) {
          Affine<Fp> q = bases[entries[e] & ~SIGN_BIT];
          if (affine_is_inf(q)) continue;
          if (entries[e] & SIGN_BIT) q.y = f_neg(q.y);
          r = xyzz_add_affine(r, q);
        }
        Affine<Fp> want = to_affine(r), a1 = to_affine(b1[k]), a2 = to_affine(b2[k]);
        if (!same(want, a1) || !same(want, a2)) {
          if (++fails < 10) printf("MISMATCH trial %d L %u bucket %u (count %u): xyzz %s affine %s\n", trial, chunk_len, k, counts[k], same(want, a1) ? "ok" : "BAD", same(want, a2) ? "ok" : "BAD");
        }
      }
    }
  }
  printf("%s (%d mismatches)\n", fails ? "FAILED" : "all buckets equal", fails);
  return fails != 0;
}
