// Precomputed windows for fixed bases: table[w * n + i] = 2^(c w) P_i for w < W, so that an
// MSM over those bases can put every window's digits into one shared set of buckets
// (msm_scalars.cuh, for_each_digit<true>) and skip the per-window bucket reductions and the
// host's doublings: with one reduction instead of W, larger windows pay (fewer windows,
// fewer additions), at the price of W copies of the bases in device memory.
#pragma once
#include "msm_affine.cuh"

namespace pinion {
namespace msm {

// (X / ZZ, Y / ZZZ) with one inversion of ZZ * ZZZ; infinity (ZZ = 0) as all-zero.
template <class F>
__device__ __forceinline__ Affine<F> xyzz_to_affine(const Xyzz<F>& p) {
  if (xyzz_is_inf(p)) {
    const F z = f_zero((const F*)nullptr);
    return {z, z};
  }
  const F t = f_inv_batch(f_mul(p.zz, p.zzz));  // 1 / (ZZ ZZZ)
  return {f_mul(p.x, f_mul(t, p.zzz)), f_mul(p.y, f_mul(t, p.zz))};
}

// Row i of the table: base i and its W - 1 shifts by c bits (c doublings each, made
// affine). A base at infinity gives infinity in every window. The table has n_windows * n
// points (index arithmetic in 64 bits).
template <class F>
__device__ __forceinline__ void precompute_windows_body(const Affine<F>* bases, uint32_t n,
                                                        uint32_t c, uint32_t n_windows,
                                                        Affine<F>* table, uint32_t i) {
  const Affine<F> a = affine_load(bases + i);
  affine_store(table + i, a);
  const F one = f_one((const F*)nullptr);
  Xyzz<F> p = affine_is_inf(a) ? xyzz_infinity<F>() : Xyzz<F>{a.x, a.y, one, one};
  for (uint32_t w = 1; w < n_windows; ++w) {
    for (uint32_t j = 0; j < c; ++j) p = xyzz_double(p);
    affine_store(table + (size_t)w * n + i, xyzz_to_affine(p));
  }
}

}  // namespace msm
}  // namespace pinion
