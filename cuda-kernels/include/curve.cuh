// Short Weierstrass curves y^2 = x^3 + b (a = 0) over Fp (G1) and Fp2 (G2) for MSM.
//
// Points: affine (x, y) with the point at infinity encoded as all-zero (bls-repr's layout;
// (0, 0) is on neither curve), and XYZZ (x = X/ZZ, y = Y/ZZZ, ZZ^3 = ZZZ^2), the cheapest
// system for adding affine points into buckets: a mixed addition costs 8M + 2S and needs
// no inversion. Infinity in XYZZ is ZZ = ZZZ = 0. Formulas: the "xyzz" family for a = 0
// (madd-2008-s, add-2008-s, dbl-2008-s-1, mdbl-2008-s-1), with the exceptional cases
// (equal points, opposite points, infinity) handled explicitly, so any input gives the
// exact group sum: a bucket that meets the same base twice doubles it.
#pragma once
#include "field.cuh"
#include "fp2.cuh"

namespace pinion {

// One name per operation for both coordinate fields, so the curve code is written once.
__device__ __forceinline__ Fp f_add(const Fp& a, const Fp& b) { return fe_add(a, b); }
__device__ __forceinline__ Fp f_sub(const Fp& a, const Fp& b) { return fe_sub(a, b); }
__device__ __forceinline__ Fp f_neg(const Fp& a) { return fe_neg(a); }
// G1's point arithmetic multiplies with fe_mul_ab (two accumulators, no word shift): slower
// than fe_mul in the plain product-chain kernel, but fewer registers and instructions in
// the point kernels, where it measured 11% faster (the bucket accumulation at 2^27: 944 ->
// 837 ms on the H200; cuda-kernels/NOTES.md).
//
// And it is a call, not inlined (fp_mul_call, fp2.cuh, which G2's Fp2 products share):
// with every product inlined a mixed addition is ~150 KB of machine code, more than the
// multiprocessor's instruction caches hold, and the warps of the XYZZ accumulation spent
// 4.3 of every 11.3 cycles between issues waiting for instructions (ncu, H200, session 23);
// with one copy of the product the wait is 0.06 cycles, the kernel 153 -> 70 KB, and the
// accumulation 11-15% faster. The squaring stays inline (measured: a call there too was
// slower).
__device__ __forceinline__ Fp f_mul(const Fp& a, const Fp& b) { return fp_mul_call(a, b); }
__device__ __forceinline__ Fp f_sqr(const Fp& a) { return fe_sqr(a); }
__device__ __forceinline__ Fp f_inv(const Fp& a) { return fe_inv(a); }
__device__ __forceinline__ bool f_is_zero(const Fp& a) { return fe_is_zero(a); }
__device__ __forceinline__ Fp f_zero(const Fp*) { return fe_zero<FpParams>(); }
__device__ __forceinline__ Fp f_one(const Fp*) { return fe_one<FpParams>(); }
__device__ __forceinline__ Fp f_load(const Fp* p) { return fe_load(p); }
__device__ __forceinline__ void f_store(Fp* p, const Fp& a) { fe_store(p, a); }
__device__ __forceinline__ bool f_eq(const Fp& a, const Fp& b) {
  uint32_t d = 0;
#pragma unroll
  for (int j = 0; j < Fp::N; ++j) d |= a.l[j] ^ b.l[j];
  return d == 0;
}

__device__ __forceinline__ Fp2 f_add(const Fp2& a, const Fp2& b) { return fp2_add(a, b); }
__device__ __forceinline__ Fp2 f_sub(const Fp2& a, const Fp2& b) { return fp2_sub(a, b); }
__device__ __forceinline__ Fp2 f_neg(const Fp2& a) { return fp2_neg(a); }
__device__ __forceinline__ Fp2 f_mul(const Fp2& a, const Fp2& b) { return fp2_mul(a, b); }
__device__ __forceinline__ Fp2 f_sqr(const Fp2& a) { return fp2_sqr(a); }
__device__ __forceinline__ Fp2 f_inv(const Fp2& a) { return fp2_inv(a); }
__device__ __forceinline__ bool f_is_zero(const Fp2& a) {
  return fe_is_zero(a.c0) && fe_is_zero(a.c1);
}
__device__ __forceinline__ Fp2 f_zero(const Fp2*) {
  return {fe_zero<FpParams>(), fe_zero<FpParams>()};
}
__device__ __forceinline__ Fp2 f_one(const Fp2*) {
  return {fe_one<FpParams>(), fe_zero<FpParams>()};
}
__device__ __forceinline__ Fp2 f_load(const Fp2* p) { return fp2_load(p); }
__device__ __forceinline__ void f_store(Fp2* p, const Fp2& a) { fp2_store(p, a); }
__device__ __forceinline__ bool f_eq(const Fp2& a, const Fp2& b) {
  return f_eq(a.c0, b.c0) && f_eq(a.c1, b.c1);
}

template <class F>
struct Affine {
  F x, y;
};

template <class F>
struct Xyzz {
  F x, y, zz, zzz;
};

using G1Affine = Affine<Fp>;
using G2Affine = Affine<Fp2>;
using G1Xyzz = Xyzz<Fp>;
using G2Xyzz = Xyzz<Fp2>;

template <class F>
__device__ __forceinline__ Xyzz<F> xyzz_infinity() {
  const F z = f_zero((const F*)nullptr);
  return {z, z, z, z};
}

template <class F>
__device__ __forceinline__ bool xyzz_is_inf(const Xyzz<F>& p) {
  return f_is_zero(p.zz);
}

template <class F>
__device__ __forceinline__ bool affine_is_inf(const Affine<F>& p) {
  return f_is_zero(p.x) && f_is_zero(p.y);
}

template <class F>
__device__ __forceinline__ Affine<F> affine_load(const Affine<F>* p) {
  return {f_load(&p->x), f_load(&p->y)};
}

template <class F>
__device__ __forceinline__ void affine_store(Affine<F>* p, const Affine<F>& a) {
  f_store(&p->x, a.x);
  f_store(&p->y, a.y);
}

template <class F>
__device__ __forceinline__ Xyzz<F> xyzz_load(const Xyzz<F>* p) {
  return {f_load(&p->x), f_load(&p->y), f_load(&p->zz), f_load(&p->zzz)};
}

template <class F>
__device__ __forceinline__ void xyzz_store(Xyzz<F>* p, const Xyzz<F>& a) {
  f_store(&p->x, a.x);
  f_store(&p->y, a.y);
  f_store(&p->zz, a.zz);
  f_store(&p->zzz, a.zzz);
}

// 2*(x, y) for an affine point not at infinity (y != 0 on these curves: no 2-torsion
// in the prime-order groups; y = 0 would give ZZ = 0, i.e. infinity, which is right).
template <class F>
__device__ __forceinline__ Xyzz<F> xyzz_from_affine_double(const Affine<F>& q) {
  const F u = f_add(q.y, q.y);
  const F v = f_sqr(u);
  const F w = f_mul(u, v);
  const F s = f_mul(q.x, v);
  const F x2 = f_sqr(q.x);
  const F m = f_add(f_add(x2, x2), x2);
  const F x3 = f_sub(f_sub(f_sqr(m), s), s);
  const F y3 = f_sub(f_mul(m, f_sub(s, x3)), f_mul(w, q.y));
  return {x3, y3, v, w};
}

template <class F>
__device__ __forceinline__ Xyzz<F> xyzz_double(const Xyzz<F>& p) {
  if (xyzz_is_inf(p)) return p;
  const F u = f_add(p.y, p.y);
  const F v = f_sqr(u);
  const F w = f_mul(u, v);
  const F s = f_mul(p.x, v);
  const F x2 = f_sqr(p.x);
  const F m = f_add(f_add(x2, x2), x2);
  const F x3 = f_sub(f_sub(f_sqr(m), s), s);
  const F y3 = f_sub(f_mul(m, f_sub(s, x3)), f_mul(w, p.y));
  return {x3, y3, f_mul(v, p.zz), f_mul(w, p.zzz)};
}

// p + q with q affine and not at infinity.
template <class F>
__device__ __forceinline__ Xyzz<F> xyzz_add_affine(const Xyzz<F>& p, const Affine<F>& q) {
  if (xyzz_is_inf(p)) {
    // ZZ = ZZZ = 1 (Montgomery form of one).
    Xyzz<F> r;
    r.x = q.x;
    r.y = q.y;
    r.zz = f_one((const F*)nullptr);
    r.zzz = r.zz;
    return r;
  }
  const F u2 = f_mul(q.x, p.zz);
  const F s2 = f_mul(q.y, p.zzz);
  const F pp_ = f_sub(u2, p.x);
  const F r = f_sub(s2, p.y);
  if (f_is_zero(pp_)) {
    if (f_is_zero(r)) return xyzz_from_affine_double(q);
    return xyzz_infinity<F>();
  }
  const F pp = f_sqr(pp_);
  const F ppp = f_mul(pp_, pp);
  const F qq = f_mul(p.x, pp);
  const F x3 = f_sub(f_sub(f_sqr(r), ppp), f_add(qq, qq));
  const F y3 = f_sub(f_mul(r, f_sub(qq, x3)), f_mul(p.y, ppp));
  return {x3, y3, f_mul(p.zz, pp), f_mul(p.zzz, ppp)};
}

template <class F>
__device__ __forceinline__ Xyzz<F> xyzz_add(const Xyzz<F>& p, const Xyzz<F>& q) {
  if (xyzz_is_inf(p)) return q;
  if (xyzz_is_inf(q)) return p;
  const F u1 = f_mul(p.x, q.zz);
  const F u2 = f_mul(q.x, p.zz);
  const F s1 = f_mul(p.y, q.zzz);
  const F s2 = f_mul(q.y, p.zzz);
  const F pp_ = f_sub(u2, u1);
  const F r = f_sub(s2, s1);
  if (f_is_zero(pp_)) {
    if (f_is_zero(r)) return xyzz_double(p);
    return xyzz_infinity<F>();
  }
  const F pp = f_sqr(pp_);
  const F ppp = f_mul(pp_, pp);
  const F qq = f_mul(u1, pp);
  const F x3 = f_sub(f_sub(f_sqr(r), ppp), f_add(qq, qq));
  const F y3 = f_sub(f_mul(r, f_sub(qq, x3)), f_mul(s1, ppp));
  return {x3, y3, f_mul(f_mul(p.zz, q.zz), pp), f_mul(f_mul(p.zzz, q.zzz), ppp)};
}

// k*p for a small non-negative k (bucket weights), double-and-add from the top bit.
template <class F>
__device__ __forceinline__ Xyzz<F> xyzz_mul_small(const Xyzz<F>& p, uint32_t k) {
  Xyzz<F> acc = xyzz_infinity<F>();
  for (int bit = 31; bit >= 0; --bit) {
    acc = xyzz_double(acc);
    if ((k >> bit) & 1u) acc = xyzz_add(acc, p);
  }
  return acc;
}

}  // namespace pinion
