// Runs ntt.cu's kernels on the CPU with the carry flag emulated (PINION_HOST_EMULATION) and
// prints inputs and outputs as hex for tools/check_ntt_emu.py, which verifies them against
// the kernels' documented contracts (ntt.cu, ntt.cuh) with Python integers.
// - The pass kernels (ntt_pass_dif / ntt_pass_dit, and *_bit0 for a pass over bits [0, s))
//   run with the threads of a block as OS threads meeting at barriers for __syncthreads
//   (and per warp for __syncwarp). Pass plans are random (any split of the index bits into
//   passes, any column count the kernel allows), as are the block sizes (1-8 threads, or
//   two or four warps), the twiddle table's size (strided reads) and the fused scalings:
//   more than gpu.rs's own plans.
// - The elementwise kernels (bit reversal, scaling, the H step's pointwise products and its
//   last gather, the twiddle table) run on random launch shapes after each transform.
//   g++ -O2 -std=c++17 -pthread -DPINION_HOST_EMULATION -I cuda-kernels/include \
//       cuda-kernels/tools/ntt_emu.cpp -o /tmp/ntt_emu && /tmp/ntt_emu SEED | \
//       python3 cuda-kernels/tools/check_ntt_emu.py
// NTT_CU (a path) selects another kernel file, for variants of ntt.cu.
#include <pthread.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include "emu_common.h"
struct dim3 { uint32_t x = 0, y = 1, z = 1; };
static thread_local dim3 threadIdx;
static dim3 blockIdx, blockDim, gridDim;
static pthread_barrier_t block_barrier;
static pthread_barrier_t warp_barriers[8];  // blocks of up to 256 threads
inline void __syncthreads() {
  if (blockDim.x > 1) pthread_barrier_wait(&block_barrier);
}
// Every lane of the (possibly partial) warp must take part, as the kernels' masks say.
inline void __syncwarp(uint32_t = 0xffffffffu) {
  if (blockDim.x > 1) pthread_barrier_wait(&warp_barriers[threadIdx.x / 32]);
}
// Dynamic shared memory of the running block (one block at a time): 2^12 elements at most.
uint4 sh[2 << 12];

#ifndef NTT_CU
#define NTT_CU "../ntt.cu"
#endif
#include NTT_CU

static std::mt19937_64 rng;

static Fr random_fr() {
  Fr r;
  for (int j = 0; j < 8; ++j) r.l[j] = (uint32_t)rng();
  r.l[7] %= 0x73eda753u;
  return r;
}

static void print(const Fr& a) {
  printf(" ");
  for (int j = 7; j >= 0; --j) printf("%08x", a.l[j]);
}

// Runs body for every thread of every block of a grid of `grid` blocks of `block` threads.
template <class F>
static void launch(uint32_t grid, uint32_t block, F body) {
  gridDim.x = grid;
  blockDim.x = block;
  for (uint32_t b = 0; b < grid; ++b) {
    blockIdx.x = b;
    if (block == 1) {
      threadIdx.x = 0;
      body();
      continue;
    }
    pthread_barrier_init(&block_barrier, nullptr, block);
    const uint32_t n_warps = (block + 31) / 32;
    for (uint32_t w = 0; w < n_warps; ++w) {
      pthread_barrier_init(&warp_barriers[w], nullptr, block - 32 * w < 32 ? block - 32 * w : 32);
    }
    std::vector<std::thread> threads;
    for (uint32_t t = 0; t < block; ++t) {
      threads.emplace_back([t, &body] {
        threadIdx.x = t;
        body();
      });
    }
    for (auto& th : threads) th.join();
    pthread_barrier_destroy(&block_barrier);
    for (uint32_t w = 0; w < n_warps; ++w) pthread_barrier_destroy(&warp_barriers[w]);
  }
}

struct Pass { uint32_t lo, s, clog; };

// A random plan over bits [0, log_n): bit 0's pass has one column; a pass above takes up to
// 2^lo columns and fits 2^12 elements in a tile. With `wide_bit0` (log_n >= 7) the pass
// over bits [0, s) has s >= 7, so that the bit-0 kernels' twiddle-major stages run.
static std::vector<Pass> random_plan(uint32_t log_n, bool wide_bit0) {
  std::vector<Pass> plan;
  uint32_t lo = 0;
  while (lo < log_n) {
    const uint32_t left = log_n - lo;
    uint32_t s = 1 + (uint32_t)(rng() % (left < 8 ? left : 8));
    if (lo == 0 && wide_bit0) s = log_n == 7 ? 7 : 7 + (uint32_t)(rng() % 2);
    uint32_t clog = 0;
    if (lo > 0) clog = (uint32_t)(rng() % ((lo < 3 ? lo : 3) + 1));
    if (s + clog > 12) clog = 12 - s;
    plan.push_back({lo, s, clog});
    lo += s;
  }
  return plan;
}

// Power tables for a fused scaling: random lo / hi entries (the contract does not need them
// to be powers; the check recomputes the factor from the tables).
struct Scale {
  std::vector<Fr> lo, hi;
  ScaleArgs args{};
};

static Scale random_scale(uint32_t mode, uint32_t log_n) {
  Scale s;
  const uint32_t lo_bits = (uint32_t)(rng() % 4);
  const uint32_t hi_bits = (uint32_t)(rng() % 4);
  s.lo.resize(1u << lo_bits);
  s.hi.resize(1u << hi_bits);
  for (auto& x : s.lo) x = random_fr();
  for (auto& x : s.hi) x = random_fr();
  s.args.lo_bits = lo_bits;
  s.args.lo_mask = (1u << lo_bits) - 1;
  s.args.hi_mask = (1u << hi_bits) - 1;
  s.args.mode = mode;
  s.args.log_n = log_n;
  return s;
}

static void print_scale(const char* name, const Scale& s) {
  printf("%s %u %u %u %u %zu %zu", name, s.args.mode, s.args.lo_bits, s.args.lo_mask,
         s.args.hi_mask, s.lo.size(), s.hi.size());
  for (const auto& x : s.lo) print(x);
  for (const auto& x : s.hi) print(x);
  printf("\n");
}

// One transform: tw_log >= log_n (tw[i] = w^i, i < 2^(tw_log-1), w of order 2^tw_log).
// `wide_bit0`: a pass over bits [0, s >= 7) on the bit-0 kernel (log_n >= 7).
static void run(uint32_t log_n, uint32_t tw_log, bool dif, bool inverse, const Fr& root_mont,
                bool wide_bit0) {
  const uint32_t n = 1u << log_n;
  // w = root^(2^(32 - tw_log)), root of order 2^32.
  Fr w = root_mont;
  for (uint32_t k = tw_log; k < 32; ++k) w = fe_mul(w, w);
  std::vector<Fr> tw(1u << (tw_log - 1));
  tw[0] = fe_one<FrParams>();
  for (size_t i = 1; i < tw.size(); ++i) tw[i] = fe_mul(tw[i - 1], w);
  std::vector<Fr> data(n);
  for (auto& x : data) x = random_fr();
  const std::vector<Fr> input = data;
  const std::vector<Pass> plan = random_plan(log_n, wide_bit0);
  // The pass over bits [0, s) runs on the bit-0 kernels three times in four (as gpu.rs
  // launches it), else on the general ones, which take it too; always with `wide_bit0`.
  std::vector<bool> on_bit0(plan.size());
  for (size_t i = 0; i < plan.size(); ++i) {
    on_bit0[i] = plan[i].lo == 0 && plan[i].clog == 0 && (wide_bit0 || rng() % 4 != 0);
  }
  const uint32_t r = (uint32_t)(rng() % 3);
  Scale pre = random_scale(r == 0 ? 0 : (uint32_t)(1 + rng() % 2), log_n);
  Scale post = random_scale((uint32_t)(rng() % 3), log_n);
  pre.args.lo = pre.lo.data();
  pre.args.hi = pre.hi.data();
  post.args.lo = post.lo.data();
  post.args.hi = post.hi.data();
  // DIF runs the passes from the top bits down, DIT from bit 0 up; the pre scaling applies
  // at the first pass's loads, the post scaling at the last pass's stores.
  std::vector<Pass> order = plan;
  std::vector<bool> order_bit0 = on_bit0;
  if (dif) {
    std::reverse(order.begin(), order.end());
    std::reverse(order_bit0.begin(), order_bit0.end());
  }
  ScaleArgs none{};
  printf("ntt %u %u %u %u", log_n, tw_log, dif ? 1u : 0u, inverse ? 1u : 0u);
  print(w);
  printf(" plan");
  // lo:s:clog:k, k = 1 when the pass ran on the bit-0 kernel.
  for (size_t i = 0; i < plan.size(); ++i) {
    printf(" %u:%u:%u:%u", plan[i].lo, plan[i].s, plan[i].clog, on_bit0[i] ? 1u : 0u);
  }
  printf("\n");
  print_scale("pre", pre);
  print_scale("post", post);
  for (size_t i = 0; i < order.size(); ++i) {
    const Pass& p = order[i];
    const ScaleArgs a_pre = i == 0 ? pre.args : none;
    const ScaleArgs a_post = i + 1 == order.size() ? post.args : none;
    const uint32_t elems = 1u << (p.s + p.clog);
    const uint32_t grid = n / elems;
    const uint32_t block_max = elems / 2;
    // 1-8 threads, or 64 or 128 (two or four warps) one time in three.
    const uint32_t block = rng() % 3 == 0 ? 64u << (rng() % 2) : 1u << (rng() % 4);
    const uint32_t threads = block < block_max ? block : block_max;
    const bool bit0 = order_bit0[i];
    Fr* d = data.data();
    const Fr* t = tw.data();
    launch(grid, threads, [&] {
      const uint32_t inv = inverse ? 1u : 0u;
      if (bit0 && dif) {
        ntt_pass_dif_bit0(d, t, tw_log, p.lo, p.s, p.clog, inv, a_pre, a_post);
      } else if (bit0) {
        ntt_pass_dit_bit0(d, t, tw_log, p.lo, p.s, p.clog, inv, a_pre, a_post);
      } else if (dif) {
        ntt_pass_dif(d, t, tw_log, p.lo, p.s, p.clog, inv, a_pre, a_post);
      } else {
        ntt_pass_dit(d, t, tw_log, p.lo, p.s, p.clog, inv, a_pre, a_post);
      }
    });
  }
  printf("in");
  for (const auto& x : input) print(x);
  printf("\nout");
  for (const auto& x : data) print(x);
  printf("\n");
}

static std::vector<Fr> random_vec(size_t n) {
  std::vector<Fr> v(n);
  for (auto& x : v) x = random_fr();
  return v;
}

static void print_arr(const char* label, const std::vector<Fr>& v) {
  printf("arr %s", label);
  for (const auto& x : v) print(x);
  printf("\n");
}

// The elementwise kernels of ntt.cu on a random launch shape (1-4 blocks of 1-8 threads,
// grid-stride loops), each as `elt NAME log_n ints...` and its arrays, inputs then outputs.
static void run_elementwise(uint32_t log_n) {
  const uint32_t n = 1u << log_n;
  const uint32_t grid = 1 + (uint32_t)(rng() % 4), block = 1u << (rng() % 4);
  const uint32_t lo_bits = (uint32_t)(rng() % 4), hi_bits = (uint32_t)(rng() % 4);
  const uint32_t lo_mask = (1u << lo_bits) - 1, hi_mask = (1u << hi_bits) - 1;
  const std::vector<Fr> lo = random_vec(1u << lo_bits), hi = random_vec(1u << hi_bits);
  {
    const std::vector<Fr> in = random_vec(n);
    std::vector<Fr> d = in;
    launch(grid, block, [&] { ntt_bitrev(d.data(), log_n, n); });
    printf("elt bitrev %u\n", log_n);
    print_arr("in", in);
    print_arr("out", d);
  }
  {
    const uint32_t bitrev = (uint32_t)(rng() % 2);
    const std::vector<Fr> in = random_vec(n);
    std::vector<Fr> d = in;
    launch(grid, block, [&] {
      ntt_scale(d.data(), lo.data(), hi.data(), lo_bits, lo_mask, hi_mask, log_n, bitrev, n);
    });
    printf("elt scale %u %u %u %u %u\n", log_n, lo_bits, lo_mask, hi_mask, bitrev);
    print_arr("in", in);
    print_arr("lo", lo);
    print_arr("hi", hi);
    print_arr("out", d);
  }
  {
    const std::vector<Fr> a0 = random_vec(n), b = random_vec(n), c = random_vec(n),
                          z = random_vec(1);
    std::vector<Fr> a = a0, a2 = a0;
    launch(grid, block, [&] { ntt_abc(a.data(), b.data(), c.data(), z.data(), n); });
    launch(grid, block, [&] { ntt_ab(a2.data(), b.data(), n); });
    printf("elt abc %u\n", log_n);
    print_arr("a", a0);
    print_arr("b", b);
    print_arr("c", c);
    print_arr("z", z);
    print_arr("abc", a);
    print_arr("ab", a2);
  }
  {
    std::vector<Fr> in = random_vec(n), sub = random_vec(n), k = random_vec(1), out(n);
    launch(grid, block, [&] {
      ntt_bitrev_scale_sub(out.data(), in.data(), sub.data(), k.data(), lo.data(), hi.data(),
                           lo_bits, lo_mask, hi_mask, log_n, n);
    });
    printf("elt gather %u %u %u %u\n", log_n, lo_bits, lo_mask, hi_mask);
    print_arr("in", in);
    print_arr("sub", sub);
    print_arr("k", k);
    print_arr("lo", lo);
    print_arr("hi", hi);
    print_arr("out", out);
  }
  {
    std::vector<Fr> tw(n);
    const uint32_t tb = log_n < 3 ? log_n : 3;  // lo[i & (2^tb - 1)] * hi[i >> tb]
    const std::vector<Fr> tlo = random_vec(1u << tb), thi = random_vec(n >> tb);
    launch(grid, block, [&] { ntt_twiddles(tw.data(), tlo.data(), thi.data(), tb, n); });
    printf("elt twiddles %u %u\n", log_n, tb);
    print_arr("lo", tlo);
    print_arr("hi", thi);
    print_arr("out", tw);
  }
}

int main(int argc, char** argv) {
  const uint64_t seed = argc > 1 ? strtoull(argv[1], nullptr, 10) : 1;
  const int cases = argc > 2 ? atoi(argv[2]) : 24;
  rng.seed(seed);
  fprintf(stderr, "ntt_emu: seed %llu, %d transforms\n", (unsigned long long)seed, cases);
  // bls12_381's Fr::ROOT_OF_UNITY (order 2^32), canonical; to Montgomery form with R^2.
  const uint32_t root[8] = {0x439f0d2bu, 0x3829971fu, 0x8c2280b9u, 0xb6368350u,
                            0x22c813b4u, 0xd09b6819u, 0xdfe81f20u, 0x16a2a19eu};
  Fr root_c, r2;
  for (int j = 0; j < 8; ++j) root_c.l[j] = root[j];
  FrParams::r2(r2.l);
  const Fr root_mont = fe_mul(root_c, r2);
  for (int c = 0; c < cases; ++c) {
    // The first four (DIF and DIT, forward and inverse) always run the bit-0 kernels'
    // twiddle-major stages: 2^7-2^12 points, a first pass of 7 or 8 bits.
    const bool wide_bit0 = c < 4;
    const uint32_t log_n = wide_bit0 ? 7 + (uint32_t)(rng() % 6) : 1 + (uint32_t)(rng() % 12);
    const uint32_t tw_log = log_n + (uint32_t)(rng() % 3);
    run(log_n, tw_log, (c & 1) == 0, (c & 2) != 0, root_mont, wide_bit0);
    run_elementwise(log_n);
  }
  return 0;
}
