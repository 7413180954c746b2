// Runs the MSM's scalar-side kernel bodies (include/msm_scalars.cuh: classes, signed-window
// digits, the counting sort's count / scan / scatter, the compaction by a density mask and
// its inverse for points (expand_body, checked here), the Montgomery-to-canonical
// conversion) on the CPU and prints what they produced for tools/check_msm_sort_emu.py,
// which rebuilds every scalar from its bucket entries with Python integers: the signed
// digits d * 2^(c w) of a scalar's entries must sum to the scalar (scalars 1 go to the ones
// window, spread by index), offsets must be the exclusive prefix sum of the counts, and each
// bucket's entries must fill exactly its range. Scalars: 0, 1, r - 1, runs of ones that
// carry through every window, digits at the +-2^(c-1) boundary, and random values below r;
// windows c = 2..20 (W = ceil(256 / c)); the scatter split over random window ranges as
// gpu.rs splits it over launches; the scan over random chunk lengths. Each sort runs again
// through the two-level sort (bin_count / bin_place / bin_sort, random bin widths, chunks
// and block sizes, a block's threads as host threads), twice: placed plain and staged
// (bin_place_staged_block), each checked the same way. The
// compaction's output must be the masked scalars in order, and nothing written past them.
//   g++ -O2 -std=c++17 -pthread -DPINION_HOST_EMULATION -I cuda-kernels/include \
//       cuda-kernels/tools/msm_sort_emu.cpp -o /tmp/msm_sort_emu && /tmp/msm_sort_emu SEED | \
//       python3 cuda-kernels/tools/check_msm_sort_emu.py
#include <pthread.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>
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

static void print_sort(uint32_t n, uint32_t c, uint32_t n_windows,
                       const std::vector<uint32_t>& classes,
                       const std::vector<uint32_t>& scalars, const std::vector<uint32_t>& counts,
                       const std::vector<uint32_t>& offsets,
                       const std::vector<uint32_t>& entries) {
  const uint32_t n_keys = (uint32_t)counts.size();
  printf("sort %u %u %u %u %u\n", n, c, n_windows, classes[0], classes[1]);
  printf("scalars");
  for (uint32_t i = 0; i < n; ++i) print_words(&scalars[8 * (size_t)i]);
  printf("\nkeys");  // key offset count entries... for the nonempty buckets
  for (uint32_t k = 0; k < n_keys; ++k) {
    if (counts[k] == 0) continue;
    printf(" %u:%u:%u", k, offsets[k], counts[k]);
    for (uint32_t e = 0; e < counts[k]; ++e) printf(":%x", entries[offsets[k] + e]);
  }
  printf("\nends %u %u\n", offsets[n_keys - 1] + counts[n_keys - 1], (uint32_t)entries.size());
}

// The three-level scan (chunk sums, their scan, the chunks' sums) of counts into offsets
// and cursors, over chunks of `chunk` counts.
static void emulated_scan(const std::vector<uint32_t>& counts, uint32_t chunk,
                          std::vector<uint32_t>& offsets, std::vector<uint32_t>& cursors) {
  const uint32_t n_keys = (uint32_t)counts.size();
  const uint32_t n_chunks = (n_keys + chunk - 1) / chunk;
  std::vector<uint32_t> chunk_sums(n_chunks);
  offsets.assign(n_keys, 0);
  cursors.assign(n_keys, 0);
  for (uint32_t t = 0; t < n_chunks; ++t) chunk_sum_body(counts.data(), n_keys, chunk, chunk_sums.data(), t);
  scan_chunks_body(chunk_sums.data(), n_chunks);
  for (uint32_t t = 0; t < n_chunks; ++t) {
    scan_apply_body(counts.data(), n_keys, chunk, chunk_sums.data(), offsets.data(), cursors.data(), t);
  }
}

// A grid of n_blocks blocks of n_threads host threads meeting at a barrier for the bodies'
// sync (the same threads run the blocks one after another, with a barrier between them).
template <class Body>
static void run_grid(uint32_t n_blocks, uint32_t n_threads, Body body) {
  if (n_threads == 1) {
    for (uint32_t b = 0; b < n_blocks; ++b) body(b, 0u, [] {});
    return;
  }
  pthread_barrier_t barrier;
  pthread_barrier_init(&barrier, nullptr, n_threads);
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < n_threads; ++t) {
    threads.emplace_back([&, t] {
      auto sync = [&] { pthread_barrier_wait(&barrier); };
      for (uint32_t b = 0; b < n_blocks; ++b) {
        body(b, t, sync);
        sync();
      }
    });
  }
  for (auto& th : threads) th.join();
  pthread_barrier_destroy(&barrier);
}

// The two-level sort (bin_count / scan / bin_place / bin_sort) on the same scalars, with a
// random bin width, chunk and block size (a block's threads are host threads meeting at a
// barrier); printed as another sort for the checker. Keys no bin_sort block wrote stay
// poisoned, so a missed key shows.
static void run_two_level(uint32_t n, uint32_t c, const std::vector<uint32_t>& scalars,
                          const std::vector<uint32_t>& classes) {
  const uint32_t n_windows = (256 + c - 1) / c, n_buckets = 1u << (c - 1);
  const uint32_t n_keys = (n_windows + 1) * n_buckets;
  const Windows win{c, n_windows};
  // At most c - 1 (no bin spans two windows) and 16 (tmp_low is 16 bits).
  uint32_t fine_log = (uint32_t)(rng() % std::min(c, 17u));
  // Threads meet at a barrier per bin: keep bins to a few thousand.
  while ((n_keys >> fine_log) > 4096 && fine_log + 1 < std::min(c, 17u)) ++fine_log;
  const uint32_t bins_per_window = n_buckets >> fine_log;
  const uint32_t n_bins = n_keys >> fine_log;
  const uint32_t chunk = 1 + (uint32_t)(rng() % 64);
  const uint32_t n_blocks = (n + chunk - 1) / chunk;
  const uint32_t block_sizes[] = {1, 2, 3, 8, 32};
  const uint32_t n_threads = block_sizes[rng() % 5];
  std::vector<uint32_t> hist(n_bins), bin_counts(n_bins, 0);
  run_grid(n_blocks, n_threads, [&](uint32_t b, uint32_t tid, auto sync) {
    const uint32_t first = b * chunk, last = std::min(n, first + chunk);
    bin_count_block(scalars.data(), first, last, win, fine_log, n_bins, hist.data(),
                    bin_counts.data(), tid, n_threads, sync);
  });
  std::vector<uint32_t> bin_offsets, bin_cursors;
  emulated_scan(bin_counts, 1u << (rng() % 6), bin_offsets, bin_cursors);
  uint64_t total = 0;
  for (uint32_t b = 0; b < n_bins; ++b) total += bin_counts[b];
  // Placed plain (bin_place_block) and staged (bin_place_staged_block, its own random
  // chunk), each sorted by bin_sort and printed: the checker holds both to the plain sums.
  for (int staged = 0; staged < 2; ++staged) {
    std::vector<uint32_t> cursors = bin_cursors;
    std::vector<uint32_t> tmp_entries(total), entries(total, 0xffffffffu);
    std::vector<uint16_t> tmp_low(total);
    const uint32_t place_chunk = staged ? 1 + (uint32_t)(rng() % 64) : chunk;
    const uint32_t place_blocks = (n + place_chunk - 1) / place_chunk;
    // The windows in launches of random ranges covering [0, W + 1), as gpu.rs splits them.
    for (uint32_t w_lo = 0; w_lo < n_windows + 1;) {
      const uint32_t w_hi = w_lo + 1 + (uint32_t)(rng() % (n_windows + 1 - w_lo));
      const uint32_t bin_lo = w_lo * bins_per_window, range = (w_hi - w_lo) * bins_per_window;
      const uint32_t cap = place_chunk * (w_hi - w_lo);
      std::vector<uint32_t> base(range), run(range), part(n_threads), stage_entry(cap),
          stage_key(cap);
      run_grid(place_blocks, n_threads, [&](uint32_t b, uint32_t tid, auto sync) {
        const uint32_t first = b * place_chunk, last = std::min(n, first + place_chunk);
        if (staged) {
          bin_place_staged_block(scalars.data(), first, last, win, w_lo, w_hi, fine_log, bin_lo,
                                 range, hist.data(), base.data(), run.data(), part.data(),
                                 stage_entry.data(), stage_key.data(), cursors.data(),
                                 tmp_entries.data(), tmp_low.data(), tid, n_threads, sync);
        } else {
          bin_place_block(scalars.data(), first, last, win, w_lo, w_hi, fine_log, bin_lo, range,
                          hist.data(), cursors.data(), tmp_entries.data(), tmp_low.data(), tid,
                          n_threads, sync);
        }
      });
      w_lo = w_hi;
    }
    std::vector<uint32_t> offsets(n_keys, 0xdeadbeefu), counts(n_keys, 0xdeadbeefu);
    std::vector<uint32_t> cnt(1u << fine_log), part(n_threads);
    run_grid(n_bins, n_threads, [&](uint32_t b, uint32_t tid, auto sync) {
      bin_sort_block(tmp_entries.data(), tmp_low.data(), bin_offsets.data(), bin_counts.data(),
                     b, fine_log, cnt.data(), part.data(), entries.data(), offsets.data(),
                     counts.data(), tid, n_threads, sync);
    });
    print_sort(n, c, n_windows, classes, scalars, counts, offsets, entries);
  }
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
  std::vector<uint32_t> offsets, cursors;
  emulated_scan(counts, 1u << (rng() % 8), offsets, cursors);
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
  print_sort(n, c, n_windows, classes, scalars, counts, offsets, entries);
  run_two_level(n, c, scalars, classes);
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
  // Its inverse (expand_body) for items of 2 and 6 16-byte words, over len >= n outputs
  // (poisoned first): the selected items back at their bits, zero elsewhere; checked here.
  for (uint32_t u4 : {2u, 6u}) {
    const uint32_t words = 4 * u4, len = n + (uint32_t)(rng() % 70);
    std::vector<uint32_t> items(words * (size_t)n), compact(words * ((size_t)total + 1));
    for (auto& w : items) w = (uint32_t)rng();
    for (uint32_t i = 0, k = 0; i < n; ++i) {
      if (mask[i / 64] >> (i % 64) & 1) {
        std::copy_n(&items[words * (size_t)i], words, &compact[words * (size_t)k++]);
      }
    }
    std::vector<uint32_t> out(words * (size_t)len, 0xdeadbeefu);
    for (uint32_t i = 0; i < len; ++i) {
      if (u4 == 2) {
        expand_body<2>(compact.data(), n, mask.data(), offsets.data(), out.data(), i);
      } else {
        expand_body<6>(compact.data(), n, mask.data(), offsets.data(), out.data(), i);
      }
    }
    for (uint32_t i = 0; i < len; ++i) {
      const bool on = i < n && (mask[i / 64] >> (i % 64) & 1);
      for (uint32_t j = 0; j < words; ++j) {
        const uint32_t want = on ? items[words * (size_t)i + j] : 0u;
        if (out[words * (size_t)i + j] != want) {
          fprintf(stderr, "expand_body<%u>: item %u of %u (n %u) word %u: %08x, want %08x\n", u4,
                  i, len, n, j, out[words * (size_t)i + j], want);
          exit(1);
        }
      }
    }
  }
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
