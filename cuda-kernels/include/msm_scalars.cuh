// The scalar side of the MSM pipeline (msm.cuh describes the whole): digits of signed
// windows, the counting sort by bucket key, the classes of scalars (0, 1, other), the
// compaction by a density mask and the Montgomery-to-canonical conversion.
// Curve-independent; included by msm.cu only (the G2 module, msm_g2.cu, has no scalar
// kernels, so edits here do not rebuild its slow PTX).
#pragma once
#include "msm.cuh"

namespace pinion {
namespace msm {

struct Scalar256 {
  uint32_t w[8];
};

__device__ __forceinline__ Scalar256 scalar_load(const uint32_t* s, uint32_t i) {
  const uint4* v = reinterpret_cast<const uint4*>(s + 8 * (size_t)i);
  const uint4 a = v[0], b = v[1];
  return {{a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w}};
}

// Word `i` (0..8, 8 and above read as zero) without a run-time register index, so the
// scalar stays in registers.
__device__ __forceinline__ uint32_t word_at(const Scalar256& s, uint32_t i) {
  uint32_t r = 0;
#pragma unroll
  for (uint32_t j = 0; j < 8; ++j) r = (j == i) ? s.w[j] : r;
  return r;
}

// Bits [pos, pos + c) of s, c <= 31.
__device__ __forceinline__ uint32_t bits_at(const Scalar256& s, uint32_t pos, uint32_t c) {
  const uint32_t word = pos >> 5, shift = pos & 31;
  uint32_t v = word_at(s, word) >> shift;
  if (shift != 0) v |= word_at(s, word + 1) << (32 - shift);
  return v & ((1u << c) - 1);
}

// 0: zero, 1: one, 2: anything else.
__device__ __forceinline__ int scalar_class(const Scalar256& s) {
  uint32_t hi = 0;
#pragma unroll
  for (int j = 1; j < 8; ++j) hi |= s.w[j];
  if (hi == 0 && s.w[0] == 0) return 0;
  if (hi == 0 && s.w[0] == 1) return 1;
  return 2;
}

struct Windows {
  uint32_t c;        // window bits
  uint32_t n_windows;  // W (the ones window is index W)
  // Shared buckets only: bases per window of the precomputed table (entry w * stride + i
  // is 2^(c w) times base i).
  uint32_t stride = 0;
};

// Calls f(key, entry) for each term scalar i contributes in windows [w_lo, w_hi) (the
// ones window is window W; the carries of the windows below w_lo are still computed).
// SHARED: every window's digits go to one set of B buckets (key |d| - 1) over a table of
// precomputed bases 2^(c w) P_i (entry w * stride + i, sign bit as usual), and the ones to
// keys B + (i mod B): two groups of buckets instead of W + 1, summed without Horner.
template <bool SHARED = false, class Fn>
__device__ __forceinline__ void for_each_digit(const Scalar256& s, uint32_t i, Windows win,
                                               uint32_t w_lo, uint32_t w_hi, Fn&& f) {
  const uint32_t c = win.c, half = 1u << (c - 1), n_buckets = half;
  const int cls = scalar_class(s);
  if (cls == 0) return;
  if (cls == 1) {
    if (w_lo <= win.n_windows && win.n_windows < w_hi) {
      f((SHARED ? 1 : win.n_windows) * n_buckets + (i & (n_buckets - 1)), i);
    }
    return;
  }
  uint32_t carry = 0;
  const uint32_t w_end = min_u32(w_hi, win.n_windows);
  for (uint32_t w = 0; w < w_end; ++w) {
    uint32_t d = bits_at(s, w * c, c) + carry;
    uint32_t sign = 0;
    if (d > half) {
      d = (1u << c) - d;  // |d - 2^c|; d == 2^c gives 0
      sign = SIGN_BIT;
      carry = 1;
    } else {
      carry = 0;
    }
    if (d != 0 && w >= w_lo) {
      if (SHARED) {
        f(d - 1, (w * win.stride + i) | sign);
      } else {
        f(w * n_buckets + (d - 1), i | sign);
      }
    }
  }
}

template <bool SHARED = false>
__device__ __forceinline__ void count_body(const uint32_t* scalars, Windows win,
                                           uint32_t* counts, uint32_t i) {
  const Scalar256 s = scalar_load(scalars, i);
  for_each_digit<SHARED>(s, i, win, 0, win.n_windows + 1,
                         [&](uint32_t key, uint32_t) { atomic_inc(counts + key); });
}

// The entries of windows [w_lo, w_hi): the host splits the W + 1 windows over launches so
// that the buckets one launch writes into stay few (their partly written 32-byte sectors
// then stay in L2 instead of being written back and read again for every 4-byte entry).
// (Shared buckets: scatter_shared_body.)
__device__ __forceinline__ void scatter_body(const uint32_t* scalars, Windows win,
                                             uint32_t w_lo, uint32_t w_hi, uint32_t* cursors,
                                             uint32_t* entries, uint32_t i) {
  const Scalar256 s = scalar_load(scalars, i);
  for_each_digit(s, i, win, w_lo, w_hi, [&](uint32_t key, uint32_t entry) {
    entries[atomic_inc(cursors + key)] = entry;
  });
}

// Shared buckets: the entries whose key lies in [key_lo, key_hi). All windows write into
// the same 2^(c-1) buckets, so the host splits the keys instead of the windows over
// launches, for the same reason (few partly written sectors open at once); each launch
// reads every scalar again.
__device__ __forceinline__ void scatter_shared_body(const uint32_t* scalars, Windows win,
                                                    uint32_t key_lo, uint32_t key_hi,
                                                    uint32_t* cursors, uint32_t* entries,
                                                    uint32_t i) {
  const Scalar256 s = scalar_load(scalars, i);
  for_each_digit<true>(s, i, win, 0, win.n_windows + 1, [&](uint32_t key, uint32_t entry) {
    if (key - key_lo < key_hi - key_lo) entries[atomic_inc(cursors + key)] = entry;
  });
}

// ---- Two-level sort (gpu.rs's SortKind::TwoLevel; an experiment, off by default) --------
// The same entries, offsets and counts as count + scan + scatter, without a global atomic
// per entry (cuda-kernels/NOTES.md, "A two-level sort"). Keys are grouped into bins of
// 2^fine_log consecutive keys (bin = key >> fine_log, n_bins = n_keys >> fine_log,
// fine_log <= c - 1 and <= 16: no bin spans two windows, the low bits travel as u16):
//   bin_count: each block counts the digits of its chunk of scalars per bin in shared
//              memory, then adds its nonzero counts to bin_counts (one atomic per bin);
//   (the scan kernels turn bin_counts into bin_offsets and bin_cursors)
//   bin_place: for a few windows a launch, each block counts its chunk's digits there
//              again, reserves each bin's run with one atomic on bin_cursors, and writes
//              every entry into its bin's run of tmp_entries, the key's low fine_log bits
//              beside it in tmp_low;
//   bin_sort : one block a bin counts its entries by low bits, writes those keys' offsets
//              and counts, and places the entries in key order inside the bin's range of
//              `entries` (a range small enough for its stores to meet in L2).
// Block bodies: thread `tid` of `n_threads`, `sync` the block barrier between phases; a
// serial host emulation runs them with one thread and no barrier. `hist`, `cnt`, `part`
// point into the block's shared memory.

// Zeroes hist[0..n_bins), then hist[bin - bin_lo] = digits of scalars [first, last) in
// windows [w_lo, w_hi) falling in each bin (bins [bin_lo, bin_lo + n_bins) hold them all).
template <class Sync>
__device__ __forceinline__ void bin_histogram(const uint32_t* scalars, uint32_t first,
                                              uint32_t last, Windows win, uint32_t w_lo,
                                              uint32_t w_hi, uint32_t fine_log, uint32_t bin_lo,
                                              uint32_t n_bins, uint32_t* hist, uint32_t tid,
                                              uint32_t n_threads, Sync&& sync) {
  for (uint32_t b = tid; b < n_bins; b += n_threads) hist[b] = 0;
  sync();
  for (uint32_t i = first + tid; i < last; i += n_threads) {
    const Scalar256 s = scalar_load(scalars, i);
    for_each_digit(s, i, win, w_lo, w_hi, [&](uint32_t key, uint32_t) {
      atomic_inc(hist + ((key >> fine_log) - bin_lo));
    });
  }
  sync();
}

// All windows' digits (bins [0, n_bins)).
template <class Sync>
__device__ __forceinline__ void bin_count_block(const uint32_t* scalars, uint32_t first,
                                                uint32_t last, Windows win, uint32_t fine_log,
                                                uint32_t n_bins, uint32_t* hist,
                                                uint32_t* bin_counts, uint32_t tid,
                                                uint32_t n_threads, Sync&& sync) {
  bin_histogram(scalars, first, last, win, 0, win.n_windows + 1, fine_log, 0, n_bins, hist,
                tid, n_threads, sync);
  for (uint32_t b = tid; b < n_bins; b += n_threads) {
    if (hist[b] != 0) atomic_add(bin_counts + b, hist[b]);
  }
}

// The digits of windows [w_lo, w_hi) only, whose keys fill bins [bin_lo, bin_lo + n_bins)
// (fine_log <= c - 1: no bin spans two windows): the host places a few windows a launch, so
// that the runs a launch's blocks are filling stay few enough for L2.
template <class Sync>
__device__ __forceinline__ void bin_place_block(const uint32_t* scalars, uint32_t first,
                                                uint32_t last, Windows win, uint32_t w_lo,
                                                uint32_t w_hi, uint32_t fine_log,
                                                uint32_t bin_lo, uint32_t n_bins, uint32_t* hist,
                                                uint32_t* bin_cursors, uint32_t* tmp_entries,
                                                uint16_t* tmp_low, uint32_t tid,
                                                uint32_t n_threads, Sync&& sync) {
  bin_histogram(scalars, first, last, win, w_lo, w_hi, fine_log, bin_lo, n_bins, hist, tid,
                n_threads, sync);
  // Each bin's run for this block: hist[bin - bin_lo] becomes its first position.
  for (uint32_t b = tid; b < n_bins; b += n_threads) {
    if (hist[b] != 0) hist[b] = atomic_add(bin_cursors + bin_lo + b, hist[b]);
  }
  sync();
  const uint32_t low_mask = (1u << fine_log) - 1;
  for (uint32_t i = first + tid; i < last; i += n_threads) {
    const Scalar256 s = scalar_load(scalars, i);
    for_each_digit(s, i, win, w_lo, w_hi, [&](uint32_t key, uint32_t entry) {
      const uint32_t pos = atomic_inc(hist + ((key >> fine_log) - bin_lo));
      tmp_entries[pos] = entry;
      tmp_low[pos] = (uint16_t)(key & low_mask);
    });
  }
}

// Block-wide exclusive scan of one value a thread: returns the sum of `sum` over threads
// 0..tid. `part` holds n_threads shared words. Hillis-Steele in shared memory: log2(n_threads)
// rounds of two barriers, no thread serial over the block.
template <class Sync>
__device__ __forceinline__ uint32_t block_exclusive_scan(uint32_t sum, uint32_t* part,
                                                         uint32_t tid, uint32_t n_threads,
                                                         Sync&& sync) {
  part[tid] = sum;
  sync();
  for (uint32_t d = 1; d < n_threads; d <<= 1) {
    const uint32_t v = tid >= d ? part[tid - d] : 0;
    sync();
    part[tid] += v;
    sync();
  }
  return part[tid] - sum;
}

// bin_place with the block's entries staged in shared memory (TwoLevelParams::staged): the
// block counts its digits per bin, scans the counts into its local bin order, reserves each
// bin's run with one atomic, places every entry in shared memory at its bin's local
// position, and then writes the staged entries out in that order, so that a run's entries
// leave in one coalesced store instead of one warp's store each. Shared words: hist, base
// and run n_bins each, part n_threads, stage_entry and stage_key `cap` each (cap at least
// the block's digits in these windows: (last - first) * (w_hi - w_lo)); n_bins <= 2^16 and
// fine_log <= 16 (a staged key holds its bin above its low bits).
template <class Sync>
__device__ __forceinline__ void bin_place_staged_block(
    const uint32_t* scalars, uint32_t first, uint32_t last, Windows win, uint32_t w_lo,
    uint32_t w_hi, uint32_t fine_log, uint32_t bin_lo, uint32_t n_bins, uint32_t* hist,
    uint32_t* base, uint32_t* run, uint32_t* part, uint32_t* stage_entry, uint32_t* stage_key,
    uint32_t* bin_cursors, uint32_t* tmp_entries, uint16_t* tmp_low, uint32_t tid,
    uint32_t n_threads, Sync&& sync) {
  bin_histogram(scalars, first, last, win, w_lo, w_hi, fine_log, bin_lo, n_bins, hist, tid,
                n_threads, sync);
  // Exclusive scan of hist into base: thread t sums its run of bins, the block scans the
  // runs' sums.
  const uint32_t per = (n_bins + n_threads - 1) / n_threads;
  const uint32_t b0 = min_u32(tid * per, n_bins), b1 = min_u32(b0 + per, n_bins);
  uint32_t sum = 0;
  for (uint32_t b = b0; b < b1; ++b) sum += hist[b];
  uint32_t acc = block_exclusive_scan(sum, part, tid, n_threads, sync);
  for (uint32_t b = b0; b < b1; ++b) {
    const uint32_t h = hist[b];
    base[b] = acc;
    run[b] = h != 0 ? atomic_add(bin_cursors + bin_lo + b, h) : 0;
    hist[b] = acc;  // the bin's local cursor
    acc += h;
  }
  sync();
  const uint32_t low_mask = (1u << fine_log) - 1;
  for (uint32_t i = first + tid; i < last; i += n_threads) {
    const Scalar256 s = scalar_load(scalars, i);
    for_each_digit(s, i, win, w_lo, w_hi, [&](uint32_t key, uint32_t entry) {
      const uint32_t b = (key >> fine_log) - bin_lo;
      const uint32_t pos = atomic_inc(hist + b);
      stage_entry[pos] = entry;
      stage_key[pos] = (b << 16) | (key & low_mask);
    });
  }
  sync();
  // hist[n_bins - 1] is now the last bin's end: the block's digit count.
  const uint32_t total = n_bins != 0 ? hist[n_bins - 1] : 0;
  for (uint32_t p = tid; p < total; p += n_threads) {
    const uint32_t k = stage_key[p];
    const uint32_t b = k >> 16;
    const uint32_t g = run[b] + (p - base[b]);
    tmp_entries[g] = stage_entry[p];
    tmp_low[g] = (uint16_t)(k & 0xffffu);
  }
}

// Bin `bin` (entries [bin_offsets[bin], + bin_counts[bin]) of tmp_entries / tmp_low): the
// offsets and counts of its 2^fine_log keys, and its entries in key order. cnt holds
// 2^fine_log words, part n_threads.
template <class Sync>
__device__ __forceinline__ void bin_sort_block(const uint32_t* tmp_entries,
                                               const uint16_t* tmp_low,
                                               const uint32_t* bin_offsets,
                                               const uint32_t* bin_counts, uint32_t bin,
                                               uint32_t fine_log, uint32_t* cnt, uint32_t* part,
                                               uint32_t* entries, uint32_t* offsets,
                                               uint32_t* counts, uint32_t tid,
                                               uint32_t n_threads, Sync&& sync) {
  const uint32_t n_fine = 1u << fine_log;
  const uint32_t start = bin_offsets[bin], len = bin_counts[bin];
  for (uint32_t f = tid; f < n_fine; f += n_threads) cnt[f] = 0;
  sync();
  for (uint32_t e = tid; e < len; e += n_threads) atomic_inc(cnt + tmp_low[start + e]);
  sync();
  // Exclusive prefix sum of cnt: thread t sums its run of keys, the block scans the runs'
  // sums.
  const uint32_t per = (n_fine + n_threads - 1) / n_threads;
  const uint32_t f0 = min_u32(tid * per, n_fine), f1 = min_u32(f0 + per, n_fine);
  uint32_t sum = 0;
  for (uint32_t f = f0; f < f1; ++f) sum += cnt[f];
  uint32_t acc = block_exclusive_scan(sum, part, tid, n_threads, sync);
  const uint32_t key0 = bin << fine_log;
  for (uint32_t f = f0; f < f1; ++f) {
    const uint32_t c = cnt[f];
    offsets[key0 + f] = start + acc;
    counts[key0 + f] = c;
    cnt[f] = acc;  // the key's cursor, relative to start
    acc += c;
  }
  sync();
  for (uint32_t e = tid; e < len; e += n_threads) {
    const uint32_t pos = atomic_inc(cnt + tmp_low[start + e]);
    entries[start + pos] = tmp_entries[start + e];
  }
}

// Scalars equal to 1 and scalars other than 0 and 1 among s[0..n), added to classes[0]
// and classes[1] (one atomic per warp and class). Every lane of the warp calls it.
__device__ __forceinline__ void classify_body(const uint32_t* scalars, uint32_t n,
                                              uint32_t* classes, uint32_t i) {
  int cls = 0;
  if (i < n) cls = scalar_class(scalar_load(scalars, i));
  const uint32_t ones = __popc(__ballot_sync(0xffffffffu, cls == 1));
  const uint32_t others = __popc(__ballot_sync(0xffffffffu, cls == 2));
  if ((threadIdx.x & 31) == 0) {
    if (ones != 0) atomicAdd(classes, ones);
    if (others != 0) atomicAdd(classes + 1, others);
  }
}

// Scan, level 1: chunk_sums[t] = sum of counts[t*chunk .. (t+1)*chunk).
__device__ __forceinline__ void chunk_sum_body(const uint32_t* counts, uint32_t n_keys,
                                               uint32_t chunk, uint32_t* chunk_sums,
                                               uint32_t t) {
  uint32_t acc = 0;
  const uint32_t end = min_u32(n_keys, (t + 1) * chunk);
  for (uint32_t k = t * chunk; k < end; ++k) acc += counts[k];
  chunk_sums[t] = acc;
}

// Scan, level 2 (one thread): exclusive prefix sum of chunk_sums, in place.
__device__ __forceinline__ void scan_chunks_body(uint32_t* chunk_sums, uint32_t n_chunks) {
  uint32_t acc = 0;
  for (uint32_t t = 0; t < n_chunks; ++t) {
    const uint32_t v = chunk_sums[t];
    chunk_sums[t] = acc;
    acc += v;
  }
}

// Scan, level 3: offsets and cursors of chunk t.
__device__ __forceinline__ void scan_apply_body(const uint32_t* counts, uint32_t n_keys,
                                                uint32_t chunk, const uint32_t* chunk_sums,
                                                uint32_t* offsets, uint32_t* cursors,
                                                uint32_t t) {
  uint32_t acc = chunk_sums[t];
  const uint32_t end = min_u32(n_keys, (t + 1) * chunk);
  for (uint32_t k = t * chunk; k < end; ++k) {
    offsets[k] = acc;
    cursors[k] = acc;
    acc += counts[k];
  }
}

// The scalars a density mask selects, packed in order: src[i] (8 words) goes to
// dst[word_offsets[i / 64] + (set bits of mask word i / 64 below bit i % 64)] when bit i is
// set; word_offsets[k] is the number of set bits in words 0..k. One thread per source
// scalar: the reads are coalesced, the writes of consecutive selected scalars contiguous.
// src and dst are 16-byte aligned (device allocations; views start at whole scalars).
__device__ __forceinline__ void select_body(const uint32_t* src, const uint64_t* mask,
                                            const uint32_t* word_offsets, uint32_t* dst,
                                            uint32_t i) {
  const uint32_t k = i >> 6;
  const uint32_t bit = i & 63;
  const uint64_t w = mask[k];
  if ((w >> bit) & 1) {
    const uint32_t pos = word_offsets[k] + __popcll(w & ((1ull << bit) - 1));
    const uint4* s = reinterpret_cast<const uint4*>(src) + 2 * static_cast<size_t>(i);
    uint4* d = reinterpret_cast<uint4*>(dst) + 2 * static_cast<size_t>(pos);
    d[0] = s[0];
    d[1] = s[1];
  }
}

// The inverse of select_body for items of UINT4S 16-byte words (a G1 affine point: 6):
// output item i is the k-th compact item when bit i is the k-th set bit of the mask, and all
// zero (a point: the point at infinity) at a clear bit and for i >= n_mask. One thread per
// output item: every item of the output is written. compact and out are 16-byte aligned.
template <uint32_t UINT4S>
__device__ __forceinline__ void expand_body(const uint32_t* compact, uint32_t n_mask,
                                            const uint64_t* mask, const uint32_t* word_offsets,
                                            uint32_t* out, uint32_t i) {
  uint4* d = reinterpret_cast<uint4*>(out) + UINT4S * static_cast<size_t>(i);
  if (i < n_mask) {
    const uint32_t k = i >> 6;
    const uint32_t bit = i & 63;
    const uint64_t w = mask[k];
    if ((w >> bit) & 1) {
      const uint32_t pos = word_offsets[k] + __popcll(w & ((1ull << bit) - 1));
      const uint4* s = reinterpret_cast<const uint4*>(compact) + UINT4S * static_cast<size_t>(pos);
#pragma unroll
      for (uint32_t j = 0; j < UINT4S; ++j) d[j] = s[j];
      return;
    }
  }
#pragma unroll
  for (uint32_t j = 0; j < UINT4S; ++j) d[j] = make_uint4(0, 0, 0, 0);
}

// Montgomery form a*R to canonical a: one Montgomery product with the integer 1.
__device__ __forceinline__ void from_montgomery_body(uint32_t* scalars, uint32_t i) {
  Fr a = fe_load(reinterpret_cast<const Fr*>(scalars) + i);
  Fr one_raw = fe_zero<FrParams>();
  one_raw.l[0] = 1;
  fe_store(reinterpret_cast<Fr*>(scalars) + i, fe_mul(a, one_raw));
}

}  // namespace msm
}  // namespace pinion
