// Runs the MSM accumulation bodies of include/ on the CPU (carry flag emulated, as
// field_emu.cpp does) on real G1 and G2 points (multiples of the generators, each checked on
// its curve first) and checks every bucket
// of the affine chunked accumulation (msm_affine.cuh; 64 streams on G1, 32 on G2 as the
// kernels use), of the XYZZ one (msm.cuh) and of the one-thread-a-bucket kernels, after
// their fix-ups, against a plain sum: random bucket sizes (empty, single, up to 500
// entries, so buckets cross chunks and streams), bases at infinity, repeated bases and
// P followed by -P and P followed by P (doubling, cancellation), chunks of 64..2048, fix-up
// runs of 1..64 chunks.
// Then whole MSMs on both curves through every body in order (classes and counting sort, the affine
// chunked accumulation and fix-ups, reduce_segments, sum_groups, the host's Horner sum of
// the windows) on bases k_i G against (sum s_i k_i mod r) G by double-and-add: windows of
// 2-8 bits, scalars 0, 1, r - 1 and random, random chunk and segment lengths; and the same MSMs
// over a table of precomputed windows with one shared set of buckets (msm_precompute.cuh).
//   g++ -O2 -std=c++17 -DPINION_HOST_EMULATION -I cuda-kernels/include \
//       cuda-kernels/tools/msm_emu.cpp -o /tmp/msm_emu && /tmp/msm_emu SEED
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <random>
#include "emu_common.h"
#include "emu_serial.h"
#include "msm_affine.cuh"
#include "msm_precompute.cuh"
#include "msm_scalars.cuh"
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
template <class F>
static Affine<F> affine_infinity() {
  return {f_zero(static_cast<const F*>(nullptr)), f_zero(static_cast<const F*>(nullptr))};
}
template <class F>
static Affine<F> to_affine(const Xyzz<F>& p) {
  if (xyzz_is_inf(p)) return affine_infinity<F>();
  // x = X/ZZ, y = Y/ZZZ
  return {f_mul(p.x, f_inv(p.zz)), f_mul(p.y, f_inv(p.zzz))};
}
template <class F>
static bool same(const Affine<F>& a, const Affine<F>& b) { return f_eq(a.x, b.x) && f_eq(a.y, b.y); }
// y^2 = x^3 + b
template <class F>
static bool on_curve(const Affine<F>& p, const F& b) {
  return f_eq(f_sqr(p.y), f_add(f_mul(f_sqr(p.x), p.x), b));
}

// k * P by double-and-add over k's bits (k canonical, 8 words).
template <class F>
static Xyzz<F> mul_scalar(const Affine<F>& p, const uint32_t* k) {
  Xyzz<F> acc = xyzz_infinity<F>(), q = xyzz_infinity<F>();
  q = xyzz_add_affine(q, p);
  for (int bit = 0; bit < 256; ++bit) {
    if ((k[bit / 32] >> (bit % 32)) & 1) acc = xyzz_add(acc, q);
    q = xyzz_double(q);
  }
  return acc;
}

// Every bucket of both chunked accumulations (XYZZ and affine with K streams), after the
// fix-ups, against a plain sum. Returns the number of mismatches.
template <class F, int K>
static int run_buckets(const char* curve, std::mt19937& rng, const std::vector<Affine<F>>& bases,
                       int trials) {
  const uint32_t n_bases = (uint32_t)bases.size();
  int fails = 0;
  for (int trial = 0; trial < trials; ++trial) {
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
    // One thread a bucket (the unchunked kernels).
    std::vector<Xyzz<F>> b3(n_keys, xyzz_infinity<F>());
    for (uint32_t k = 0; k < n_keys; ++k) accumulate_body(bases.data(), entries.data(), offsets.data(), counts.data(), b3.data(), k);
    for (uint32_t chunk_len : {64u, 128u, 320u, 1024u, 2048u}) {
      const uint32_t n_chunks = (total + chunk_len - 1) / chunk_len;
      const uint32_t group = 1u << (rng() % 7);  // chunks a fix-up run sums (the host's G)
      std::vector<Xyzz<F>> b1(n_keys, xyzz_infinity<F>()), b2 = b1;
      std::vector<Xyzz<F>> p1(2 * n_chunks, xyzz_infinity<F>()), p2 = p1;
      for (uint32_t t = 0; t < n_chunks; ++t)
        accumulate_chunk_body(bases.data(), entries.data(), offsets.data(), counts.data(), n_keys, chunk_len, b1.data(), p1.data(), t);
      for (uint32_t t = 0; t < n_chunks; ++t)
        accumulate_chunk_affine_body<K>(bases.data(), entries.data(), offsets.data(), counts.data(), n_keys, chunk_len, b2.data(), p2.data(), t);
      for (auto* pb : {&p1, &p2}) for (uint32_t t = 0; t < n_chunks; ++t)
        fixup_groups_body(offsets.data(), counts.data(), n_keys, chunk_len, group, pb->data(), t);
      for (uint32_t t = 0; t < n_chunks; ++t) {
        fixup_buckets_body(offsets.data(), counts.data(), n_keys, chunk_len, group, p1.data(), b1.data(), t);
        fixup_buckets_body(offsets.data(), counts.data(), n_keys, chunk_len, group, p2.data(), b2.data(), t);
      }
      // reference: plain sums
      for (uint32_t k = 0; k < n_keys; ++k) {
        Xyzz<F> r = xyzz_infinity<F>();
        for (uint32_t e = offsets[k]; e < offsets[k] + counts[k]; ++e) {
          Affine<F> q = bases[entries[e] & ~SIGN_BIT];
          if (affine_is_inf(q)) continue;
          if (entries[e] & SIGN_BIT) q.y = f_neg(q.y);
          r = xyzz_add_affine(r, q);
        }
        Affine<F> want = to_affine(r), a1 = to_affine(b1[k]), a2 = to_affine(b2[k]), a3 = to_affine(b3[k]);
        if (!same(want, a1) || !same(want, a2) || !same(want, a3)) {
          if (++fails < 10) printf("MISMATCH %s trial %d L %u G %u bucket %u (count %u): xyzz %s affine %s unchunked %s\n", curve, trial, chunk_len, group, k, counts[k], same(want, a1) ? "ok" : "BAD", same(want, a2) ? "ok" : "BAD", same(want, a3) ? "ok" : "BAD");
        }
      }
    }
  }
  return fails;
}

// n scalars (canonical words: 0, 1, r - 1 and random below r) and t = sum s_i k_i mod r
// (canonical), the multiple of the generator their MSM over the bases k_i G must give.
static Fr random_scalars(std::mt19937& rng, uint32_t n, const std::vector<uint32_t>& ks,
                         std::vector<uint32_t>& scalars) {
  scalars.assign(8 * (size_t)n, 0);
  Fr r2, t = fe_zero<FrParams>();
  FrParams::r2(r2.l);
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t* w = &scalars[8 * (size_t)i];
    const uint32_t kind = rng() % 6;
    if (kind == 1) w[0] = 1;
    if (kind == 2) {  // r - 1: every window's digit carries
      const uint32_t r[8] = {0x00000000u, 0xffffffffu, 0xfffe5bfeu, 0x53bda402u,
                             0x09a1d805u, 0x3339d808u, 0x299d7d48u, 0x73eda753u};
      for (int j = 0; j < 8; ++j) w[j] = r[j];
    }
    if (kind >= 3) {
      for (int j = 0; j < 8; ++j) w[j] = rng();
      w[7] %= 0x73eda753u;
    }
    Fr s, k = fe_zero<FrParams>();
    for (int j = 0; j < 8; ++j) s.l[j] = w[j];
    k.l[0] = ks[i];
    t = fe_add(t, fe_mul(fe_mul(s, r2), fe_mul(k, r2)));  // Montgomery s * k
  }
  Fr one = fe_zero<FrParams>();
  one.l[0] = 1;
  return fe_mul(t, one);  // canonical
}

// The whole pipeline on scalars s_i and bases P_i = k_i G: classes and the counting sort
// (msm_scalars.cuh), the affine chunked accumulation (K streams) with its fix-ups,
// reduce_segments, sum_groups, and the host's Horner combination of the window sums,
// against (sum s_i k_i mod r) G by double-and-add. Returns the number of mismatches.
template <class F, int K>
static int run_pipeline(const char* curve, std::mt19937& rng, const Affine<F>& g,
                        const std::vector<Affine<F>>& bases, const std::vector<uint32_t>& ks,
                        int trials) {
  int fails = 0;
  const uint32_t n_bases = (uint32_t)bases.size();
  for (int trial = 0; trial < trials; ++trial) {
    const uint32_t c = 2 + rng() % 7, n = 1 + rng() % n_bases;
    const uint32_t n_windows = (256 + c - 1) / c, n_buckets = 1u << (c - 1);
    const uint32_t n_keys = (n_windows + 1) * n_buckets;
    std::vector<uint32_t> scalars;
    const Fr t = random_scalars(rng, n, ks, scalars);
    const Windows win{c, n_windows};
    std::vector<uint32_t> counts(n_keys, 0), offsets(n_keys);
    for (uint32_t i = 0; i < n; ++i) count_body(scalars.data(), win, counts.data(), i);
    uint32_t total = 0;
    for (uint32_t k = 0; k < n_keys; ++k) { offsets[k] = total; total += counts[k]; }
    std::vector<uint32_t> cursors = offsets, entries(total);
    for (uint32_t i = 0; i < n; ++i) scatter_body(scalars.data(), win, 0, n_windows + 1, cursors.data(), entries.data(), i);
    // A multiple of the affine body's K streams, as the host plans it.
    const uint32_t chunk_len = (uint32_t)K << (rng() % 4), n_chunks = (total + chunk_len - 1) / chunk_len;
    std::vector<Xyzz<F>> buckets(n_keys, xyzz_infinity<F>()), partials(2 * n_chunks + 2, xyzz_infinity<F>());
    for (uint32_t ch = 0; ch < n_chunks; ++ch)
      accumulate_chunk_affine_body<K>(bases.data(), entries.data(), offsets.data(), counts.data(), n_keys, chunk_len, buckets.data(), partials.data(), ch);
    const uint32_t group = 1u << (rng() % 4);
    for (uint32_t ch = 0; ch < n_chunks; ++ch) fixup_groups_body(offsets.data(), counts.data(), n_keys, chunk_len, group, partials.data(), ch);
    for (uint32_t ch = 0; ch < n_chunks; ++ch) fixup_buckets_body(offsets.data(), counts.data(), n_keys, chunk_len, group, partials.data(), buckets.data(), ch);
    // Segments of a window's buckets, then one group per window.
    const uint32_t seg_len = 1u << (rng() % c), n_segments = n_buckets / seg_len;
    std::vector<Xyzz<F>> segs((n_windows + 1) * n_segments), sums(n_windows + 1);
    for (uint32_t s = 0; s < (n_windows + 1) * n_segments; ++s)
      reduce_segments_body(buckets.data(), n_buckets, seg_len, n_segments, n_windows, segs.data(), s);
    for (uint32_t w = 0; w <= n_windows; ++w) sum_groups_body(segs.data(), n_segments, sums.data(), w);
    Xyzz<F> acc = xyzz_infinity<F>();
    for (uint32_t w = n_windows; w-- > 0;) {
      for (uint32_t b = 0; b < c; ++b) acc = xyzz_double(acc);
      acc = xyzz_add(acc, sums[w]);
    }
    acc = xyzz_add(acc, sums[n_windows]);
    if (!same(to_affine(acc), to_affine(mul_scalar(g, t.l)))) {
      if (++fails < 5) printf("MISMATCH %s pipeline trial %d: c %u n %u chunks of %u segments of %u\n", curve, trial, c, n, chunk_len, seg_len);
    }
  }
  return fails;
}

// The same MSM over a table of precomputed windows (msm_precompute.cuh) with shared buckets:
// the table of all the bases (its rows checked against 2^(c w) P_i by doubling), the sort
// of for_each_digit<true> over a prefix of n scalars (stride: the table's row length), the
// accumulation into 2 B buckets, reduce_segments with the ones as group 1, and the sum of
// the two groups (no Horner). Returns the number of mismatches.
template <class F, int K>
static int run_pipeline_shared(const char* curve, std::mt19937& rng, const Affine<F>& g,
                               const std::vector<Affine<F>>& bases,
                               const std::vector<uint32_t>& ks, int trials) {
  int fails = 0;
  const uint32_t n_bases = (uint32_t)bases.size();
  for (int trial = 0; trial < trials; ++trial) {
    const uint32_t c = 2 + rng() % 9, n = 1 + rng() % n_bases;
    const uint32_t n_windows = (256 + c - 1) / c, n_buckets = 1u << (c - 1);
    std::vector<Affine<F>> table((size_t)n_windows * n_bases);
    for (uint32_t i = 0; i < n_bases; ++i)
      precompute_windows_body(bases.data(), n_bases, c, n_windows, table.data(), i);
    for (int probe = 0; probe < 4; ++probe) {
      const uint32_t i = rng() % n_bases, w = rng() % n_windows;
      Xyzz<F> p = xyzz_infinity<F>();
      if (!affine_is_inf(bases[i])) p = xyzz_add_affine(p, bases[i]);
      for (uint32_t b = 0; b < c * w; ++b) p = xyzz_double(p);
      if (!same(to_affine(p), table[(size_t)w * n_bases + i])) {
        if (++fails < 5) printf("MISMATCH %s table c %u window %u base %u\n", curve, c, w, i);
      }
    }
    std::vector<uint32_t> scalars;
    const Fr t = random_scalars(rng, n, ks, scalars);
    const Windows win{c, n_windows, n_bases};
    const uint32_t n_keys = 2 * n_buckets;
    std::vector<uint32_t> counts(n_keys, 0), offsets(n_keys);
    for (uint32_t i = 0; i < n; ++i) count_body<true>(scalars.data(), win, counts.data(), i);
    uint32_t total = 0;
    for (uint32_t k = 0; k < n_keys; ++k) { offsets[k] = total; total += counts[k]; }
    std::vector<uint32_t> cursors = offsets, entries(total);
    // The keys split over 1-4 launches at random points, as the host may split them; a
    // launch that wrote keys outside its range, or missed one of its own, leaves entries
    // unwritten or written twice and the sum wrong.
    std::vector<uint32_t> cuts{0, n_keys};
    for (uint32_t k = rng() % 4; k > 0; --k) cuts.push_back(rng() % (n_keys + 1));
    std::sort(cuts.begin(), cuts.end());
    for (size_t r = 0; r + 1 < cuts.size(); ++r)
      for (uint32_t i = 0; i < n; ++i)
        scatter_shared_body(scalars.data(), win, cuts[r], cuts[r + 1], cursors.data(), entries.data(), i);
    const uint32_t chunk_len = (uint32_t)K << (rng() % 4), n_chunks = (total + chunk_len - 1) / chunk_len;
    std::vector<Xyzz<F>> buckets(n_keys, xyzz_infinity<F>()), partials(2 * n_chunks + 2, xyzz_infinity<F>());
    const bool affine = rng() % 2;
    for (uint32_t ch = 0; ch < n_chunks; ++ch) {
      if (affine) {
        accumulate_chunk_affine_body<K>(table.data(), entries.data(), offsets.data(), counts.data(), n_keys, chunk_len, buckets.data(), partials.data(), ch);
      } else {
        accumulate_chunk_body(table.data(), entries.data(), offsets.data(), counts.data(), n_keys, chunk_len, buckets.data(), partials.data(), ch);
      }
    }
    const uint32_t group = 1u << (rng() % 4);
    for (uint32_t ch = 0; ch < n_chunks; ++ch) fixup_groups_body(offsets.data(), counts.data(), n_keys, chunk_len, group, partials.data(), ch);
    for (uint32_t ch = 0; ch < n_chunks; ++ch) fixup_buckets_body(offsets.data(), counts.data(), n_keys, chunk_len, group, partials.data(), buckets.data(), ch);
    const uint32_t seg_len = 1u << (rng() % c), n_segments = n_buckets / seg_len;
    std::vector<Xyzz<F>> segs(2 * n_segments), sums(2);
    for (uint32_t s = 0; s < 2 * n_segments; ++s)
      reduce_segments_body(buckets.data(), n_buckets, seg_len, n_segments, 1, segs.data(), s);
    for (uint32_t w = 0; w < 2; ++w) sum_groups_body(segs.data(), n_segments, sums.data(), w);
    const Xyzz<F> acc = xyzz_add(sums[0], sums[1]);
    if (!same(to_affine(acc), to_affine(mul_scalar(g, t.l)))) {
      if (++fails < 5) printf("MISMATCH %s shared-bucket pipeline trial %d: c %u n %u of %u, %s chunks of %u\n", curve, trial, c, n, n_bases, affine ? "affine" : "xyzz", chunk_len);
    }
  }
  return fails;
}

// Bases k_i G for k_i = i + 1, except base 7 at infinity (k = 0).
template <class F>
static void make_bases(const Affine<F>& g, int n, std::vector<Affine<F>>& bases, std::vector<uint32_t>& ks) {
  bases.resize(n);
  ks.resize(n);
  Xyzz<F> acc = xyzz_infinity<F>();
  for (int i = 0; i < n; ++i) {
    acc = xyzz_add_affine(acc, g);
    bases[i] = to_affine(acc);
    ks[i] = i + 1;
  }
  bases[7] = affine_infinity<F>();
  ks[7] = 0;
}

template <class F, int K>
static int run_curve(const char* curve, std::mt19937& rng, const Affine<F>& g, const F& b, int n_bases,
                     int bucket_trials, int pipeline_trials) {
  if (!on_curve(g, b)) {
    printf("%s: generator not on the curve\n", curve);
    return 1;
  }
  std::vector<Affine<F>> bases;
  std::vector<uint32_t> ks;
  make_bases(g, n_bases, bases, ks);
  const int bucket_fails = run_buckets<F, K>(curve, rng, bases, bucket_trials);
  const int pipeline_fails = run_pipeline<F, K>(curve, rng, g, bases, ks, pipeline_trials);
  const int shared_fails = run_pipeline_shared<F, K>(curve, rng, g, bases, ks, pipeline_trials);
  printf("%s: buckets %s, MSMs %s, MSMs over precomputed windows %s (%d mismatches)\n", curve,
         bucket_fails ? "FAILED" : "equal plain sums", pipeline_fails ? "FAILED" : "equal double-and-add",
         shared_fails ? "FAILED" : "equal double-and-add", bucket_fails + pipeline_fails + shared_fails);
  return bucket_fails + pipeline_fails + shared_fails;
}

int main(int argc, char** argv) {
  const uint32_t seed = argc > 1 ? atoi(argv[1]) : 1;
  std::mt19937 rng(seed);
  printf("seed %u\n", seed);
  const Affine<Fp> g1{from_hex("17f1d3a73197d7942695638c4fa9ac0fc3688c4f9774b905a14e3a3f171bac586c55e83ff97a1aeffb3af00adb22c6bb"),
                      from_hex("08b3f481e3aaa0f1a09e30ed741d8ae4fcf5e095d5d00af600db18cb2c04b3edd03cc744a2888ae40caa232946c5e7e1")};
  const Affine<Fp2> g2{
      {from_hex("024aa2b2f08f0a91260805272dc51051c6e47ad4fa403b02b4510b647ae3d1770bac0326a805bbefd48056c8c121bdb8"),
       from_hex("13e02b6052719f607dacd3a088274f65596bd0d09920b61ab5da61bbdc7f5049334cf11213945d57e5ac7d055d042b7e")},
      {from_hex("0ce5d527727d6e118cc9cdc6da2e351aadfd9baa8cbdd3a76d429a695160d12c923ac9cc3baca289e193548608b82801"),
       from_hex("0606c4a02ea734cc32acd2b02bc28b99cb3e287e85a763af267492ab572e99ab3f370d275cec1da1aaa9075ff05f79be")}};
  const Fp four = from_hex("4");
  int fails = run_curve<Fp, 64>("g1", rng, g1, four, 200, 12, 6);
  fails += run_curve<Fp2, 32>("g2", rng, g2, Fp2{four, four}, 100, 4, 3);
  printf("%s (%d mismatches)\n", fails ? "FAILED" : "all buckets equal", fails);
  return fails != 0;
}
