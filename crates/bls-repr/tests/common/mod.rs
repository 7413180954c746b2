//! Shared test helpers: a seeded RNG (seed printed, `PINION_SEED` overrides) and
//! random field elements and points.
#![allow(dead_code)]

use bls12_381::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use bls_repr::{FpRepr, FrRepr, FP_MODULUS, FR_MODULUS};
use ff::Field;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

/// A fresh RNG; prints its seed so a failure can be replayed with `PINION_SEED=<seed>`.
pub fn rng() -> StdRng {
    let seed = match std::env::var("PINION_SEED") {
        Ok(s) => s
            .parse::<u64>()
            .unwrap_or_else(|_| panic!("PINION_SEED={s:?} is not a u64")),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0),
    };
    eprintln!("seed = {seed}");
    StdRng::seed_from_u64(seed)
}

/// `slow` iterations when `PINION_SLOW_TESTS=1`, else `default`.
pub fn iterations(default: usize, slow: usize) -> usize {
    if std::env::var("PINION_SLOW_TESTS").is_ok_and(|v| v == "1") {
        slow
    } else {
        default
    }
}

/// Canonical limbs of p - 1.
pub fn p_minus_1() -> [u64; 6] {
    let mut l = FP_MODULUS;
    l[0] -= 1;
    l
}

/// Canonical limbs of r - 1.
pub fn r_minus_1() -> [u64; 4] {
    let mut l = FR_MODULUS;
    l[0] -= 1;
    l
}

/// Big-endian 48 bytes of canonical limbs.
pub fn limbs_to_be(l: &[u64; 6]) -> [u8; 48] {
    let mut out = [0u8; 48];
    for i in 0..6 {
        out[8 * i..8 * i + 8].copy_from_slice(&l[5 - i].to_be_bytes());
    }
    out
}

/// A uniformly random canonical Fp value (limbs), by rejection sampling below p.
pub fn random_fp_limbs(rng: &mut StdRng) -> [u64; 6] {
    loop {
        let mut l: [u64; 6] = rng.random();
        l[5] &= (1 << 61) - 1; // below 2^381, then reject >= p (about 1 in 5)
        if FpRepr::from_canonical_limbs(l).is_ok() {
            return l;
        }
    }
}

/// A random Fp element.
pub fn random_fp(rng: &mut StdRng) -> FpRepr {
    match FpRepr::from_canonical_limbs(random_fp_limbs(rng)) {
        Ok(v) => v,
        Err(e) => panic!("random_fp_limbs gave a non-canonical value: {e}"),
    }
}

/// A random scalar and its repr.
pub fn random_fr(rng: &mut StdRng) -> (Scalar, FrRepr) {
    let s = Scalar::random(&mut *rng);
    (s, FrRepr::from_scalar(&s))
}

/// A random G1 point (a random multiple of the generator).
pub fn random_g1(rng: &mut StdRng) -> G1Affine {
    G1Affine::from(G1Projective::generator() * Scalar::random(&mut *rng))
}

/// A random G2 point.
pub fn random_g2(rng: &mut StdRng) -> G2Affine {
    G2Affine::from(G2Projective::generator() * Scalar::random(&mut *rng))
}
