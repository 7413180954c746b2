// Runs the MSM's scalar-side kernel bodies (include/msm_scalars.cuh: classes, signed-window
// digits, the counting sort's count / scan / scatter, the compaction by a density mask, the
// Montgomery-to-canonical conversion) on the CPU and prints what they produced for tools/check_msm_sort_emu.py,
// which rebuilds every scalar from its bucket entries with Python integers: the signed
// digits d * 2^(c w) of a scalar's entries must sum to the scalar (scalars 1 go to the ones
// window, spread by index), offsets must be the exclusive prefix sum of the counts, and each
// bucket's entries must fill exactly its range. Scalars: 0, 1, r - 1, runs of ones that
// carry through every window, digits at the +-2^(c-1) boundary, and random values below r;
// windows c = 2..20 (W = ceil(256 / c)); the scatter split over random window ranges as
// gpu.rs splits it over launches; the scan over random chunk lengths. The compaction's
// output must be the masked scalars in order, and nothing written past them.
//   g++ -O2 -std=c++17 -DPINION_HOST_EMULATION -I cuda-kernels/include \
//       cuda-kernels/tools/msm_sort_emu.cpp -o /tmp/msm_sort_emu && /tmp/msm_sort_emu SEED | \
//       python3 cuda-kernels/tools/check_msm_sort_emu.py
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "emu_common.h"
#include "emu_serial.h"
#include "msm_scalars.cuh"
using namespace pinion;
using namespace pinion::msm;

static std::mt19937_64 rng;
static const uint32_t R_WORDS[8] = {0x00000001u, 0xffffffffu, 0xfffe5bfeu, 0x53bda402u,
                                    0x09a1d805u, 0x3339d808u, 0x299d7d48u, 0x73eda753u};

static void random_scalar(uint32_t* w, uint32_t c) {
  const uint32_t kind = (uint32_t)(rng() % 10);
  for (int j = 0; j < 8; ++j) w[j] = 0;
  switch (kind) {
    case 0: return;                                   // 0
    case 1: w[0] = 1; return;                         // 1
    case 2:                                           // r - 1
      for (int j = 0; j < 8; ++j) w[j] = R_WORDS[j];
      w[0] -= 1;
      return;
    case 3: {  // 2^k - 1: every window's digit is 2^c - 1 and carries into the next
      const uint32_t k = 1 + (uint32_t)(rng() % 254);
      for (uint32_t b = 0; b < k; ++b) w[b / 32] |= 1u << (b % 32);
      return;
    }
    case 4: {  // windows of exactly 2^(c-1) or 2^(c-1) + 1 (the sign boundary)
      for (uint32_t pos = 0; pos + c <= 254; pos += c) {
        const uint32_t d = (1u << (c - 1)) + (uint32_t)(rng() % 2);
        for (uint32_t b = 0; b < c; ++b)
          if ((d >> b) & 1) w[(pos + b) / 32] |= 1u << ((pos + b) % 32);
      }
      return;
    }
    default:  // random below r: the top word below r's
      for (int j = 0; j < 8; ++j) w[j] = (uint32_t)rng();
      w[7] %= R_WORDS[7];
      return;
  }
}

static void print_words(const uint32_t* w) {
  printf(" ");
  for (int j = 7; j >= 0; --j) printf("%08x", w[j]);
}

static void run_sort(uint32_t n, uint32_t c) {
  const uint32_t n_windows = (256 + c - 1) / c, n_buckets = 1u << (c - 1);
  const uint32_t n_keys = (n_windows + 1) * n_buckets;
  const Windows win{c, n_windows};
  std::vector<uint32_t> scalars(8 * (size_t)n);
  for (uint32_t i = 0; i < n; ++i) random_scalar(&scalars[8 * (size_t)i], c);
  std::vector<uint32_t> counts(n_keys, 0), classes(2, 0);
  for (uint32_t i = 0; i < n; ++i) count_body(scalars.data(), win, counts.data(), i);
  for (uint32_t i = 0; i < n; ++i) classify_body(scalars.data(), n, classes.data(), i);
  // The three-level scan over chunks of a random power-of-two length.
  const uint32_t chunk = 1u << (rng() % 8);
  const uint32_t n_chunks = (n_keys + chunk - 1) / chunk;
  std::vector<uint32_t> chunk_sums(n_chunks), offsets(n_keys), cursors(n_keys);
  for (uint32_t t = 0; t < n_chunks; ++t) chunk_sum_body(counts.data(), n_keys, chunk, chunk_sums.data(), t);
  scan_chunks_body(chunk_sums.data(), n_chunks);
  for (uint32_t t = 0; t < n_chunks; ++t) {
    scan_apply_body(counts.data(), n_keys, chunk, chunk_sums.data(), offsets.data(), cursors.data(), t);
  }
  uint64_t total = 0;
  for (uint32_t k = 0; k < n_keys; ++k) total += counts[k];
  std::vector<uint32_t> entries(total, 0xffffffffu);
  // The scatter over random window ranges [w_lo, w_hi) covering [0, W + 1), in order.
  for (uint32_t w_lo = 0; w_lo < n_windows + 1;) {
    const uint32_t w_hi = w_lo + 1 + (uint32_t)(rng() % (n_windows + 1 - w_lo));
    for (uint32_t i = 0; i < n; ++i) {
      scatter_body(scalars.data(), win, w_lo, w_hi, cursors.data(), entries.data(), i);
    }
    w_lo = w_hi;
  }
  printf("sort %u %u %u %u %u\n", n, c, n_windows, classes[0], classes[1]);
  printf("scalars");
  for (uint32_t i = 0; i < n; ++i) print_words(&scalars[8 * (size_t)i]);
  printf("\nkeys");  // key offset count entries... for the nonempty buckets
  for (uint32_t k = 0; k < n_keys; ++k) {
    if (counts[k] == 0) continue;
    printf(" %u:%u:%u", k, offsets[k], counts[k]);
    for (uint32_t e = 0; e < counts[k]; ++e) printf(":%x", entries[offsets[k] + e]);
  }
  printf("\nends %u %u\n", offsets[n_keys - 1] + counts[n_keys - 1], (uint32_t)total);
}

// The compaction by a density mask (msm_select): masks empty, full, sparse, dense and
// random over n not a multiple of 64; word_offsets as gpu.rs computes them; dst holds two
// poisoned scalars past the selected ones, which must stay so.
static void run_select(uint32_t n) {
  const uint32_t n_words = (n + 63) / 64;
  std::vector<uint64_t> mask(n_words, 0);
  const uint32_t kind = (uint32_t)(rng() % 5);
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t r = (uint32_t)(rng() % 100);
    const bool on = kind == 1 || (kind == 2 && r < 3) || (kind == 3 && r < 97) ||
                    (kind == 4 && r < 50);
    if (on) mask[i / 64] |= 1ull << (i % 64);
  }
  std::vector<uint32_t> offsets(n_words);
  uint32_t total = 0;
  for (uint32_t k = 0; k < n_words; ++k) {
    offsets[k] = total;
    total += (uint32_t)__builtin_popcountll(mask[k]);
  }
  std::vector<uint32_t> src(8 * (size_t)n), dst(8 * ((size_t)total + 2), 0xdeadbeefu);
  for (uint32_t i = 0; i < n; ++i) random_scalar(&src[8 * (size_t)i], 8);
  for (uint32_t i = 0; i < n; ++i) select_body(src.data(), mask.data(), offsets.data(), dst.data(), i);
  printf("select %u %u\nmask", n, total);
  for (uint32_t k = 0; k < n_words; ++k) printf(" %016llx", (unsigned long long)mask[k]);
  printf("\nsrc");
  for (uint32_t i = 0; i < n; ++i) print_words(&src[8 * (size_t)i]);
  printf("\ndst");
  for (uint32_t i = 0; i < total + 2; ++i) print_words(&dst[8 * (size_t)i]);
  printf("\n");
}

static void run_from_montgomery(uint32_t n) {
  std::vector<uint32_t> s(8 * (size_t)n);
  for (uint32_t i = 0; i < n; ++i) random_scalar(&s[8 * (size_t)i], 8);
  printf("mont");
  for (uint32_t i = 0; i < n; ++i) print_words(&s[8 * (size_t)i]);
  for (uint32_t i = 0; i < n; ++i) from_montgomery_body(s.data(), i);
  printf("\ncanonical");
  for (uint32_t i = 0; i < n; ++i) print_words(&s[8 * (size_t)i]);
  printf("\n");
}

int main(int argc, char** argv) {
  const uint64_t seed = argc > 1 ? strtoull(argv[1], nullptr, 10) : 1;
  const int cases = argc > 2 ? atoi(argv[2]) : 30;
  rng.seed(seed);
  fprintf(stderr, "msm_sort_emu: seed %llu, %d sorts\n", (unsigned long long)seed, cases);
  for (int t = 0; t < cases; ++t) {
    const uint32_t c = 2 + (uint32_t)(rng() % 19);
    const uint32_t n = 1 + (uint32_t)(rng() % (c > 16 ? 200 : 1500));
    run_sort(n, c);
  }
  for (int t = 0; t < cases; ++t) run_select(1 + (uint32_t)(rng() % 700));
  run_from_montgomery(500);
  return 0;
}
