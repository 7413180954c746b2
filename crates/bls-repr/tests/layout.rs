//! The byte layout promised in the crate doc, checked through `bytemuck`.

mod common;

use bls_repr::{
    Fp2Repr, FpRepr, FrRepr, G1AffineRepr, G2AffineRepr, FP_INV, FP_INV_U32, FP_MODULUS,
    FP_MODULUS_U32, FP_R, FP_R2, FP_R2_U32, FP_R_U32, FR_INV, FR_INV_U32, FR_MODULUS,
    FR_MODULUS_U32, FR_R, FR_R2, FR_R2_U32, FR_R_U32,
};
use std::mem::{align_of, size_of};

#[test]
fn sizes_and_alignment() {
    assert_eq!(size_of::<FpRepr>(), 48);
    assert_eq!(size_of::<FrRepr>(), 32);
    assert_eq!(size_of::<Fp2Repr>(), 96);
    assert_eq!(size_of::<G1AffineRepr>(), 96);
    assert_eq!(size_of::<G2AffineRepr>(), 192);
    for a in [
        align_of::<FpRepr>(),
        align_of::<FrRepr>(),
        align_of::<Fp2Repr>(),
        align_of::<G1AffineRepr>(),
        align_of::<G2AffineRepr>(),
    ] {
        assert_eq!(a, 8);
    }
}

#[test]
fn zeroed_is_zero_and_identity() {
    assert_eq!(<FpRepr as bytemuck::Zeroable>::zeroed(), FpRepr::ZERO);
    assert_eq!(FrRepr::default(), FrRepr::ZERO);
    assert!(G1AffineRepr::default().is_identity());
    assert!(G2AffineRepr::default().is_identity());
    assert_eq!(G1AffineRepr::default(), G1AffineRepr::IDENTITY);
    assert_eq!(G2AffineRepr::default(), G2AffineRepr::IDENTITY);
}

#[test]
fn g1_byte_offsets() {
    let mut rng = common::rng();
    let p = G1AffineRepr::from_affine(&common::random_g1(&mut rng));
    let bytes: &[u8] = bytemuck::bytes_of(&p);
    assert_eq!(bytes.len(), 96);
    for i in 0..6 {
        assert_eq!(&bytes[8 * i..8 * i + 8], &p.x.limbs[i].to_le_bytes());
        assert_eq!(&bytes[48 + 8 * i..56 + 8 * i], &p.y.limbs[i].to_le_bytes());
    }
}

#[test]
fn g2_byte_offsets() {
    let mut rng = common::rng();
    let p = G2AffineRepr::from_affine(&common::random_g2(&mut rng));
    let bytes: &[u8] = bytemuck::bytes_of(&p);
    for (off, c) in [(0, p.x.c0), (48, p.x.c1), (96, p.y.c0), (144, p.y.c1)] {
        assert_eq!(&bytes[off..off + 48], bytemuck::bytes_of(&c));
        assert_eq!(&bytes[off..off + 8], &c.limbs[0].to_le_bytes());
    }
}

#[test]
fn u32_view_matches_u64_limbs() {
    let mut rng = common::rng();
    let x = common::random_fp(&mut rng);
    let words: &[u32] = bytemuck::cast_slice(&x.limbs);
    assert_eq!(words.len(), 12);
    for i in 0..6 {
        assert_eq!(words[2 * i], x.limbs[i] as u32);
        assert_eq!(words[2 * i + 1], (x.limbs[i] >> 32) as u32);
    }
    let (_, f) = common::random_fr(&mut rng);
    let words: &[u32] = bytemuck::cast_slice(&f.limbs);
    assert_eq!(words.len(), 8);
    assert_eq!(words[1], (f.limbs[0] >> 32) as u32);
}

#[test]
fn u32_constants_are_the_u64_constants() {
    let as_u32_6 = |a: &[u64; 6]| -> Vec<u32> { bytemuck::cast_slice(a).to_vec() };
    let as_u32_4 = |a: &[u64; 4]| -> Vec<u32> { bytemuck::cast_slice(a).to_vec() };
    assert_eq!(as_u32_6(&FP_MODULUS), FP_MODULUS_U32.to_vec());
    assert_eq!(as_u32_6(&FP_R), FP_R_U32.to_vec());
    assert_eq!(as_u32_6(&FP_R2), FP_R2_U32.to_vec());
    assert_eq!(as_u32_4(&FR_MODULUS), FR_MODULUS_U32.to_vec());
    assert_eq!(as_u32_4(&FR_R), FR_R_U32.to_vec());
    assert_eq!(as_u32_4(&FR_R2), FR_R2_U32.to_vec());
    // -p^{-1} mod 2^32 times p must be -1 mod 2^32.
    assert_eq!((FP_MODULUS_U32[0].wrapping_mul(FP_INV_U32)), u32::MAX);
    assert_eq!((FR_MODULUS_U32[0].wrapping_mul(FR_INV_U32)), u32::MAX);
    assert_eq!(FP_MODULUS[0].wrapping_mul(FP_INV), u64::MAX);
    assert_eq!(FR_MODULUS[0].wrapping_mul(FR_INV), u64::MAX);
}

#[test]
fn slice_casts_round_trip() {
    let mut rng = common::rng();
    let points: Vec<G1AffineRepr> = (0..5)
        .map(|_| G1AffineRepr::from_affine(&common::random_g1(&mut rng)))
        .collect();
    let bytes: &[u8] = bytemuck::cast_slice(&points);
    assert_eq!(bytes.len(), 5 * 96);
    // Back through an owned, 8-aligned buffer (u64 words).
    let words: Vec<u64> = bytemuck::cast_slice::<G1AffineRepr, u64>(&points).to_vec();
    let back: &[G1AffineRepr] = bytemuck::cast_slice(&words);
    assert_eq!(back, &points[..]);
    let g2 = [G2AffineRepr::generator(), G2AffineRepr::IDENTITY];
    let fps: &[FpRepr] = bytemuck::cast_slice(&g2);
    assert_eq!(fps.len(), 8);
    assert_eq!(fps[0], g2[0].x.c0);
    assert_eq!(fps[3], g2[0].y.c1);
    assert!(fps[4..].iter().all(|f| f.is_zero()));
}
