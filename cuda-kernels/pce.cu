// The PCE's sparse mat-vec on the device: a = A·w, b = B·w, c = C·w from the matrices in
// pce-cache's compact layout, and the witness check a·b = c. Launched by
// crates/groth16-prover/src/gpu/pce.rs.
//
// Layout of one matrix (pce-cache's storage.rs): rows in blocks of 256 (ROW_BLOCK); block k
// starts at non-zero block_ptr[k]; row r's length is row_len[r], or, when that byte is 255,
// the next entry of long_len (long_row holds those rows, ascending); each non-zero has a
// column (u32: inputs first, then aux) and a coefficient code (1, 2 or 4 bytes; 0 is +1,
// 1 is -1, others index the coefficient table, Montgomery form). The witness on the device
// is aux ++ inputs (the order the MSMs' staging uses), Montgomery form.
//
//   pce_eval(Fr* out, u32 m, u32 n_rows, const u64* block_ptr, const u8* row_len,
//            const u64* long_row, const u64* long_len, u32 n_long, const u32* cols,
//            const u8* codes, u32 code_bytes, u64 n_nonzeros, const Fr* table, u32 n_table,
//            const Fr* w, u32 n_inputs, u32 n_aux, u64* long_start, u32* status)
//       one block of ROW_BLOCK threads per row block, one thread per row; rows n_rows..m
//       (the domain's padding) are zero. A column, code or non-zero index out of range
//       (a damaged PCE) sets status[1] = 1 and contributes nothing.
//       Long rows are left to pce_eval_long: each one's first non-zero goes to
//       long_start[its index among the long rows] (u64* long_start, after w); rows of
//       wide_min..254 terms (u32 wide_min, after long_start) too, from a list the host
//       made (their starts known ahead).
//   pce_eval_batched(the same): each row's terms four at a time, their loads issued
//       together (more gathers in flight, more registers).
//   pce_eval_long(Fr* out, u32 n_rows, const u64* long_row, const u64* long_len,
//                 const u64* long_start, u32 n_long, const u32* cols, const u8* codes,
//                 u32 code_bytes, u64 n_nonzeros, const Fr* table, u32 n_table, const Fr* w,
//                 u32 n_inputs, u32 n_aux, u32* status)
//       listed rows (long_row / long_len / long_start: rows, lengths, starts), a warp each
//       (blocks of 256 threads), after pce_eval.
//   pce_check(const Fr* a, const Fr* b, const Fr* c, u32 n, u32* status)
//       status[0] = min(status[0], first i with a[i]·b[i] ≠ c[i]).
#include <stdint.h>

#include "field.cuh"

using namespace pinion;

#define ROW_BLOCK 256
#define LONG_ROW 255u

// Exclusive prefix sum over the block (ROW_BLOCK threads) and the block's total.
template <class T>
__device__ __forceinline__ T block_exclusive_scan(T x, T* warp_sums, T& total) {
  const uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  T inc = x;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const T y = __shfl_up_sync(0xffffffffu, inc, d);
    if (lane >= d) inc += y;
  }
  if (lane == 31) warp_sums[warp] = inc;
  __syncthreads();
  if (warp == 0) {
    T s = lane < ROW_BLOCK / 32 ? warp_sums[lane] : T(0);
#pragma unroll
    for (int d = 1; d < ROW_BLOCK / 32; d <<= 1) {
      const T y = __shfl_up_sync(0xffffffffu, s, d);
      if (lane >= d) s += y;
    }
    if (lane < ROW_BLOCK / 32) warp_sums[lane] = s;  // inclusive over warps
  }
  __syncthreads();
  const T before = warp == 0 ? T(0) : warp_sums[warp - 1];
  total = warp_sums[ROW_BLOCK / 32 - 1];
  __syncthreads();  // warp_sums is reused by the next scan
  return before + inc - x;
}

__device__ __forceinline__ uint32_t code_at(const uint8_t* codes, uint32_t code_bytes,
                                            uint64_t j) {
  switch (code_bytes) {
    case 1:
      return codes[j];
    case 2:
      return reinterpret_cast<const uint16_t*>(codes)[j];
    default:
      return reinterpret_cast<const uint32_t*>(codes)[j];
  }
}

// One row's terms summed: BATCH terms at a time, their columns, codes and witness values
// all loaded before any is added, so that BATCH gathers are in flight at once (a row's
// terms are otherwise a chain of dependent loads and adds); BATCH = 1 is the plain loop.
template <int BATCH>
__device__ __forceinline__ Fr row_sum(uint64_t start, uint64_t end, const uint32_t* cols,
                                      const uint8_t* codes, uint32_t code_bytes,
                                      const Fr* table, uint32_t n_table, const Fr* w,
                                      uint32_t n_inputs, uint32_t n_aux, bool& bad) {
  const uint32_t n_cols = n_inputs + n_aux;
  Fr acc = fe_zero<FrParams>();
  for (uint64_t j = start; j < end; j += BATCH) {
    Fr v[BATCH];
    uint32_t code[BATCH];
#pragma unroll
    for (int k = 0; k < BATCH; ++k) {
      code[k] = 0;
      v[k] = fe_zero<FrParams>();
      if (j + k < end) {
        const uint32_t col = cols[j + k];
        const uint32_t c = code_at(codes, code_bytes, j + k);
        if (col < n_cols && c < n_table) {
          code[k] = c;
          v[k] = fe_load<FrParams>(w + (col < n_inputs ? n_aux + col : col - n_inputs));
        } else {
          bad = true;  // skipped: v stays 0 with code +1
        }
      }
    }
#pragma unroll
    for (int k = 0; k < BATCH; ++k) {
      if (j + k < end) {
        if (code[k] == 0) {
          acc = fe_add<FrParams>(acc, v[k]);
        } else if (code[k] == 1) {
          acc = fe_sub<FrParams>(acc, v[k]);
        } else {
          acc = fe_add<FrParams>(acc, fe_mul<FrParams>(fe_load<FrParams>(table + code[k]), v[k]));
        }
      }
    }
  }
  return acc;
}

template <int BATCH>
__device__ __forceinline__ void eval_rows(Fr* __restrict__ out, uint32_t m, uint32_t n_rows,
                                          const uint64_t* __restrict__ block_ptr,
                                          const uint8_t* __restrict__ row_len,
                                          const uint64_t* __restrict__ long_row,
                                          const uint64_t* __restrict__ long_len,
                                          uint32_t n_long, const uint32_t* __restrict__ cols,
                                          const uint8_t* __restrict__ codes,
                                          uint32_t code_bytes, uint64_t n_nonzeros,
                                          const Fr* __restrict__ table, uint32_t n_table,
                                          const Fr* __restrict__ w, uint32_t n_inputs,
                                          uint32_t n_aux, uint64_t* __restrict__ long_start,
                                          uint32_t wide_min, uint32_t* status) {
  __shared__ uint64_t sums64[ROW_BLOCK / 32];
  __shared__ uint32_t sums32[ROW_BLOCK / 32];
  __shared__ uint32_t first_long;
  const uint32_t blk = blockIdx.x;
  const uint32_t r0 = blk * ROW_BLOCK;
  if (r0 >= m) return;
  if (r0 >= n_rows) {  // the whole block is padding (uniform across the block)
    const uint32_t r = r0 + threadIdx.x;
    if (r < m) fe_store<FrParams>(out + r, fe_zero<FrParams>());
    return;
  }
  const uint32_t r = r0 + threadIdx.x;
  const bool in = r < n_rows;
  const uint32_t len8 = in ? row_len[r] : 0;
  const uint32_t is_long = len8 == LONG_ROW ? 1 : 0;
  // Long rows before this block: a lower bound over the (short) ascending list.
  if (threadIdx.x == 0) {
    uint32_t lo = 0, hi = n_long;
    while (lo < hi) {
      const uint32_t mid = (lo + hi) >> 1;
      if (long_row[mid] < r0) lo = mid + 1; else hi = mid;
    }
    first_long = lo;
  }
  __syncthreads();
  uint32_t n_long_here;
  const uint32_t long_rank = block_exclusive_scan<uint32_t>(is_long, sums32, n_long_here);
  uint64_t len = len8;
  bool bad = false;
  uint32_t li = 0xffffffffu;
  if (is_long) {
    li = first_long + long_rank;
    if (li < n_long && long_row[li] == r) {
      len = long_len[li];
    } else {
      li = 0xffffffffu;
      len = 0;
      bad = true;
    }
  }
  uint64_t block_len;
  const uint64_t before = block_exclusive_scan<uint64_t>(len, sums64, block_len);
  if (!in) {  // padding rows of the last row block
    if (r < m) fe_store<FrParams>(out + r, fe_zero<FrParams>());
    return;
  }
  const uint64_t start = block_ptr[blk] + before;
  if (li != 0xffffffffu) {
    // A long row: a warp of pce_eval_long sums it (one thread here would hold its block,
    // and the block its SM slot, for hundreds of dependent steps). Its start is all
    // that is known only here.
    long_start[li] = start;
    return;
  }
  // A wide row (wide_min..254 terms): in the host's list, summed by a warp the same way.
  if (!is_long && len8 >= wide_min) return;
  uint64_t end = start + len;
  if (end > n_nonzeros || end < start) {
    bad = true;
    end = start;
  }
  const Fr acc = row_sum<BATCH>(start, end, cols, codes, code_bytes, table, n_table, w,
                                n_inputs, n_aux, bad);
  if (bad) atomicOr(status + 1, 1u);
  fe_store<FrParams>(out + r, acc);
}

#define PCE_EVAL_PARAMS                                                                   \
  Fr *__restrict__ out, uint32_t m, uint32_t n_rows, const uint64_t *__restrict__ block_ptr, \
      const uint8_t *__restrict__ row_len, const uint64_t *__restrict__ long_row,           \
      const uint64_t *__restrict__ long_len, uint32_t n_long,                               \
      const uint32_t *__restrict__ cols, const uint8_t *__restrict__ codes,                 \
      uint32_t code_bytes, uint64_t n_nonzeros, const Fr *__restrict__ table,               \
      uint32_t n_table, const Fr *__restrict__ w, uint32_t n_inputs, uint32_t n_aux,        \
      uint64_t *__restrict__ long_start, uint32_t wide_min, uint32_t *status
#define PCE_EVAL_ARGS                                                                  \
  out, m, n_rows, block_ptr, row_len, long_row, long_len, n_long, cols, codes, code_bytes, \
      n_nonzeros, table, n_table, w, n_inputs, n_aux, long_start, wide_min, status

extern "C" __global__ void __launch_bounds__(ROW_BLOCK) pce_eval(PCE_EVAL_PARAMS) {
  eval_rows<1>(PCE_EVAL_ARGS);
}

extern "C" __global__ void __launch_bounds__(ROW_BLOCK) pce_eval_batched(PCE_EVAL_PARAMS) {
  eval_rows<4>(PCE_EVAL_ARGS);
}

// Listed rows of one matrix, a warp each: the lanes take every 32nd term, then the warp
// adds the 32 partial sums by shuffles. The long rows (length byte 255), whose starts come
// from pce_eval's pass over the same matrix (`long_start`, which must run first on the
// same stream), and the wide ones (the host's list).
extern "C" __global__ void __launch_bounds__(256)
    pce_eval_long(Fr* __restrict__ out, uint32_t n_rows, const uint64_t* __restrict__ long_row,
                  const uint64_t* __restrict__ long_len, const uint64_t* __restrict__ long_start,
                  uint32_t n_long, const uint32_t* __restrict__ cols,
                  const uint8_t* __restrict__ codes, uint32_t code_bytes, uint64_t n_nonzeros,
                  const Fr* __restrict__ table, uint32_t n_table, const Fr* __restrict__ w,
                  uint32_t n_inputs, uint32_t n_aux, uint32_t* status) {
  const uint32_t lane = threadIdx.x & 31;
  const uint32_t li = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  if (li >= n_long) return;  // whole warps: li is the same on every lane
  const uint64_t r = long_row[li];
  const uint64_t start = long_start[li];
  const uint64_t len = long_len[li];
  const uint64_t end = start + len;
  bool bad = r >= n_rows || end > n_nonzeros || end < start;
  const uint32_t n_cols = n_inputs + n_aux;
  Fr acc = fe_zero<FrParams>();
  if (!bad) {
    for (uint64_t j = start + lane; j < end; j += 32) {
      const uint32_t col = cols[j];
      const uint32_t code = code_at(codes, code_bytes, j);
      if (col >= n_cols || code >= n_table) {
        bad = true;
        continue;
      }
      const Fr v = fe_load<FrParams>(w + (col < n_inputs ? n_aux + col : col - n_inputs));
      if (code == 0) {
        acc = fe_add<FrParams>(acc, v);
      } else if (code == 1) {
        acc = fe_sub<FrParams>(acc, v);
      } else {
        acc = fe_add<FrParams>(acc, fe_mul<FrParams>(fe_load<FrParams>(table + code), v));
      }
    }
  }
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) {
    Fr other;
#pragma unroll
    for (int k = 0; k < FrParams::N; ++k) other.l[k] = __shfl_down_sync(0xffffffffu, acc.l[k], d);
    acc = fe_add<FrParams>(acc, other);
  }
  if (bad) atomicOr(status + 1, 1u);
  if (lane == 0 && r < n_rows) fe_store<FrParams>(out + r, acc);
}

__device__ __forceinline__ bool fe_eq(const Fr& x, const Fr& y) {
  uint32_t d = 0;
#pragma unroll
  for (int j = 0; j < FrParams::N; ++j) d |= x.l[j] ^ y.l[j];
  return d == 0;
}

// Each thread keeps its least failing row, a warp takes the least of its lanes' and only
// then touches status: a witness that fails many rows (a timing-only one) costs a few
// atomics a warp, not one a row. Every lane reaches the reduction (no early exit).
extern "C" __global__ void pce_check(const Fr* __restrict__ a, const Fr* __restrict__ b,
                                     const Fr* __restrict__ c, uint32_t n, uint32_t* status) {
  uint32_t first = 0xffffffffu;
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const Fr ab = fe_mul<FrParams>(fe_load<FrParams>(a + i), fe_load<FrParams>(b + i));
    if (!fe_eq(ab, fe_load<FrParams>(c + i)) && i < first) first = i;
  }
  first = __reduce_min_sync(0xffffffffu, first);
  if ((threadIdx.x & 31) == 0 && first != 0xffffffffu) atomicMin(status, first);
}
