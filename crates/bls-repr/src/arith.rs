//! Generic Montgomery arithmetic over `N` little-endian 64-bit limbs.
//!
//! Every function here assumes its field operands are fully reduced (< p) and that the
//! modulus leaves the top bit of its top limb clear with room to spare
//! (`p[N-1] < 2^63 - 1`); both BLS12-381 moduli do (checked at compile time in
//! `constants`). That spare bit lets additions skip a carry limb and lets the
//! multiplication use the "no-carry" CIOS variant (one carry chain fewer per round).
//! The loops have constant trip counts and are unrolled by the optimiser.

/// `a + b*c + carry` as (low, high) words; cannot overflow 128 bits.
#[inline(always)]
pub(crate) const fn mac(a: u64, b: u64, c: u64, carry: u64) -> (u64, u64) {
    let t = (a as u128) + (b as u128) * (c as u128) + (carry as u128);
    (t as u64, (t >> 64) as u64)
}

/// `a + b + carry` as (sum, carry-out).
#[inline(always)]
pub(crate) const fn adc(a: u64, b: u64, carry: u64) -> (u64, u64) {
    let t = (a as u128) + (b as u128) + (carry as u128);
    (t as u64, (t >> 64) as u64)
}

/// `a - b - borrow` with `borrow` in {0, 1}, as (difference, borrow-out in {0, 1}).
#[inline(always)]
pub(crate) const fn sbb(a: u64, b: u64, borrow: u64) -> (u64, u64) {
    let (d1, b1) = a.overflowing_sub(b);
    let (d2, b2) = d1.overflowing_sub(borrow);
    (d2, (b1 | b2) as u64)
}

/// `a < b` as integers.
#[inline(always)]
pub(crate) const fn lt<const N: usize>(a: &[u64; N], b: &[u64; N]) -> bool {
    let mut borrow = 0;
    let mut i = 0;
    while i < N {
        (_, borrow) = sbb(a[i], b[i], borrow);
        i += 1;
    }
    borrow == 1
}

/// `a == 0`.
#[inline(always)]
pub(crate) const fn is_zero<const N: usize>(a: &[u64; N]) -> bool {
    let mut acc = 0;
    let mut i = 0;
    while i < N {
        acc |= a[i];
        i += 1;
    }
    acc == 0
}

/// Returns `a - p` if `a >= p`, else `a` (branch-free select; `a < 2p` assumed).
#[inline(always)]
pub(crate) const fn sub_if_ge<const N: usize>(a: &[u64; N], p: &[u64; N]) -> [u64; N] {
    let mut d = [0u64; N];
    let mut borrow = 0;
    let mut i = 0;
    while i < N {
        (d[i], borrow) = sbb(a[i], p[i], borrow);
        i += 1;
    }
    // borrow == 1 means a < p: keep a.
    let keep_a = 0u64.wrapping_sub(borrow);
    let mut i = 0;
    while i < N {
        d[i] = (a[i] & keep_a) | (d[i] & !keep_a);
        i += 1;
    }
    d
}

/// `(a + b) mod p`.
#[inline(always)]
pub(crate) const fn add_mod<const N: usize>(a: &[u64; N], b: &[u64; N], p: &[u64; N]) -> [u64; N] {
    // a + b < 2p < 2^(64N) thanks to the spare top bit: no carry limb needed.
    let mut s = [0u64; N];
    let mut carry = 0;
    let mut i = 0;
    while i < N {
        (s[i], carry) = adc(a[i], b[i], carry);
        i += 1;
    }
    sub_if_ge(&s, p)
}

/// `(a - b) mod p`.
#[inline(always)]
pub(crate) const fn sub_mod<const N: usize>(a: &[u64; N], b: &[u64; N], p: &[u64; N]) -> [u64; N] {
    let mut d = [0u64; N];
    let mut borrow = 0;
    let mut i = 0;
    while i < N {
        (d[i], borrow) = sbb(a[i], b[i], borrow);
        i += 1;
    }
    // On underflow add p back (masked so there is no data-dependent branch).
    let mask = 0u64.wrapping_sub(borrow);
    let mut carry = 0;
    let mut i = 0;
    while i < N {
        (d[i], carry) = adc(d[i], p[i] & mask, carry);
        i += 1;
    }
    d
}

/// `(-a) mod p`.
#[inline(always)]
pub(crate) const fn neg_mod<const N: usize>(a: &[u64; N], p: &[u64; N]) -> [u64; N] {
    let mut d = [0u64; N];
    let mut borrow = 0;
    let mut i = 0;
    while i < N {
        (d[i], borrow) = sbb(p[i], a[i], borrow);
        i += 1;
    }
    // -0 must be 0, not p.
    let mask = if is_zero(a) { 0 } else { u64::MAX };
    let mut i = 0;
    while i < N {
        d[i] &= mask;
        i += 1;
    }
    d
}

/// Montgomery product `a * b * 2^(-64N) mod p` (no-carry CIOS), with
/// `inv = -p^{-1} mod 2^64`.
#[inline(always)]
pub(crate) const fn mont_mul<const N: usize>(
    a: &[u64; N],
    b: &[u64; N],
    p: &[u64; N],
    inv: u64,
) -> [u64; N] {
    let mut t = [0u64; N];
    let mut i = 0;
    while i < N {
        let (t0, mut hi_a) = mac(t[0], a[0], b[i], 0);
        let m = t0.wrapping_mul(inv);
        let (_, mut hi_c) = mac(t0, m, p[0], 0);
        let mut j = 1;
        while j < N {
            let (tj, ha) = mac(t[j], a[j], b[i], hi_a);
            hi_a = ha;
            let (tjm1, hc) = mac(tj, m, p[j], hi_c);
            hi_c = hc;
            t[j - 1] = tjm1;
            j += 1;
        }
        // Cannot overflow: the spare top bit of p keeps t below 2p < 2^(64N).
        t[N - 1] = hi_c.wrapping_add(hi_a);
        i += 1;
    }
    sub_if_ge(&t, p)
}

/// Montgomery reduction: `a * 2^(-64N) mod p`, i.e. Montgomery form to canonical.
#[inline(always)]
pub(crate) const fn from_mont<const N: usize>(a: &[u64; N], p: &[u64; N], inv: u64) -> [u64; N] {
    let mut one = [0u64; N];
    one[0] = 1;
    mont_mul(a, &one, p, inv)
}

/// `base^exp` in Montgomery form (`one` is R mod p); `exp` little-endian limbs,
/// square-and-multiply from the top bit. Variable time in `exp` (fine: the
/// exponents used here are public constants).
pub(crate) const fn mont_pow<const N: usize>(
    base: &[u64; N],
    exp: &[u64],
    one: &[u64; N],
    p: &[u64; N],
    inv: u64,
) -> [u64; N] {
    let mut acc = *one;
    let mut i = exp.len();
    while i > 0 {
        i -= 1;
        let mut bit = 64;
        while bit > 0 {
            bit -= 1;
            acc = mont_mul(&acc, &acc, p, inv);
            if (exp[i] >> bit) & 1 == 1 {
                acc = mont_mul(&acc, base, p, inv);
            }
        }
    }
    acc
}

/// `2a mod p` (no carry out: `2a < 2p < 2^(64N)`). Used to derive R and R^2.
pub(crate) const fn double_mod<const N: usize>(a: &[u64; N], p: &[u64; N]) -> [u64; N] {
    add_mod(a, a, p)
}

/// `-p^{-1} mod 2^64` by Newton iteration (each step doubles the correct low bits).
pub(crate) const fn neg_inv_mod_2_64(p0: u64) -> u64 {
    // p0 odd: x = p0 is already correct to 3 bits (p0*p0 = 1 mod 8).
    let mut x = p0;
    let mut k = 0;
    while k < 6 {
        x = x.wrapping_mul(2u64.wrapping_sub(p0.wrapping_mul(x)));
        k += 1;
    }
    x.wrapping_neg()
}

/// `2^bits mod p`, by doubling 1 `bits` times (compile-time derivation of R and R^2).
pub(crate) const fn pow2_mod<const N: usize>(bits: usize, p: &[u64; N]) -> [u64; N] {
    let mut a = [0u64; N];
    a[0] = 1;
    let mut k = 0;
    while k < bits {
        a = double_mod(&a, p);
        k += 1;
    }
    a
}

/// `p - 2` (the Fermat inversion exponent), `p > 2` assumed.
pub(crate) const fn minus_two<const N: usize>(p: &[u64; N]) -> [u64; N] {
    let mut d = [0u64; N];
    let mut borrow = 2;
    let mut i = 0;
    while i < N {
        let (x, b) = p[i].overflowing_sub(borrow);
        d[i] = x;
        borrow = b as u64;
        i += 1;
    }
    d
}

/// Widens little-endian u64 limbs to little-endian u32 limbs (`M = 2N`; the same
/// bytes in memory on a little-endian machine).
pub(crate) const fn to_u32_limbs<const N: usize, const M: usize>(a: &[u64; N]) -> [u32; M] {
    assert!(M == 2 * N, "M must be 2N");
    let mut out = [0u32; M];
    let mut i = 0;
    while i < N {
        out[2 * i] = a[i] as u32;
        out[2 * i + 1] = (a[i] >> 32) as u32;
        i += 1;
    }
    out
}

/// Equality usable in `const` assertions.
pub(crate) const fn eq<const N: usize>(a: &[u64; N], b: &[u64; N]) -> bool {
    let mut i = 0;
    while i < N {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}
