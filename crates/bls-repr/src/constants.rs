//! Moduli and Montgomery constants, as little-endian limbs.
//!
//! The literals are written once and checked against values derived from the modulus
//! at compile time (see the `const _: () = assert!(..)` items below): R by doubling 1
//! 384 (resp. 256) times mod p, R^2 by doubling 768 (resp. 512) times, and the inverse
//! by Newton iteration. A wrong literal fails the build.

use crate::arith;

/// The base field modulus p (canonical, little-endian 64-bit limbs).
pub const FP_MODULUS: [u64; 6] = [
    0xb9fe_ffff_ffff_aaab,
    0x1eab_fffe_b153_ffff,
    0x6730_d2a0_f6b0_f624,
    0x6477_4b84_f385_12bf,
    0x4b1b_a7b6_434b_acd7,
    0x1a01_11ea_397f_e69a,
];
/// Bit length of p.
pub const FP_MODULUS_BITS: u32 = 381;
/// Bytes of one canonical big-endian Fp encoding.
pub const FP_BYTES: usize = 48;
/// R mod p with R = 2^384: the Montgomery form of 1.
pub const FP_R: [u64; 6] = [
    0x7609_0000_0002_fffd,
    0xebf4_000b_c40c_0002,
    0x5f48_9857_53c7_58ba,
    0x77ce_5853_7052_5745,
    0x5c07_1a97_a256_ec6d,
    0x15f6_5ec3_fa80_e493,
];
/// R^2 mod p: Montgomery-multiplying a canonical value by it converts to Montgomery form.
pub const FP_R2: [u64; 6] = [
    0xf4df_1f34_1c34_1746,
    0x0a76_e6a6_09d1_04f1,
    0x8de5_476c_4c95_b6d5,
    0x67eb_88a9_939d_83c0,
    0x9a79_3e85_b519_952d,
    0x1198_8fe5_92ca_e3aa,
];
/// -p^{-1} mod 2^64 (the CIOS reduction factor for 64-bit limbs).
pub const FP_INV: u64 = 0x89f3_fffc_fffc_fffd;
/// -p^{-1} mod 2^32 (the CIOS reduction factor for 32-bit limbs; R is still 2^384).
pub const FP_INV_U32: u32 = FP_INV as u32;
/// p as 12 little-endian 32-bit limbs.
pub const FP_MODULUS_U32: [u32; 12] = arith::to_u32_limbs(&FP_MODULUS);
/// R mod p as 12 little-endian 32-bit limbs.
pub const FP_R_U32: [u32; 12] = arith::to_u32_limbs(&FP_R);
/// R^2 mod p as 12 little-endian 32-bit limbs.
pub const FP_R2_U32: [u32; 12] = arith::to_u32_limbs(&FP_R2);

/// The scalar field modulus r (the group order; canonical, little-endian 64-bit limbs).
pub const FR_MODULUS: [u64; 4] = [
    0xffff_ffff_0000_0001,
    0x53bd_a402_fffe_5bfe,
    0x3339_d808_09a1_d805,
    0x73ed_a753_299d_7d48,
];
/// Bit length of r.
pub const FR_MODULUS_BITS: u32 = 255;
/// Bytes of one canonical Fr encoding.
pub const FR_BYTES: usize = 32;
/// R mod r with R = 2^256: the Montgomery form of 1.
pub const FR_R: [u64; 4] = [
    0x0000_0001_ffff_fffe,
    0x5884_b7fa_0003_4802,
    0x998c_4fef_ecbc_4ff5,
    0x1824_b159_acc5_056f,
];
/// R^2 mod r.
pub const FR_R2: [u64; 4] = [
    0xc999_e990_f3f2_9c6d,
    0x2b6c_edcb_8792_5c23,
    0x05d3_1496_7254_398f,
    0x0748_d9d9_9f59_ff11,
];
/// -r^{-1} mod 2^64.
pub const FR_INV: u64 = 0xffff_fffe_ffff_ffff;
/// -r^{-1} mod 2^32.
pub const FR_INV_U32: u32 = FR_INV as u32;
/// r as 8 little-endian 32-bit limbs.
pub const FR_MODULUS_U32: [u32; 8] = arith::to_u32_limbs(&FR_MODULUS);
/// R mod r as 8 little-endian 32-bit limbs.
pub const FR_R_U32: [u32; 8] = arith::to_u32_limbs(&FR_R);
/// R^2 mod r as 8 little-endian 32-bit limbs.
pub const FR_R2_U32: [u32; 8] = arith::to_u32_limbs(&FR_R2);

/// Bytes of one uncompressed G1 point (`.params` encoding).
pub const G1_UNCOMPRESSED_BYTES: usize = 96;
/// Bytes of one uncompressed G2 point (`.params` encoding).
pub const G2_UNCOMPRESSED_BYTES: usize = 192;
/// Flag bit in byte 0 of a point encoding: the point is compressed.
pub const FLAG_COMPRESSION: u8 = 0x80;
/// Flag bit in byte 0 of a point encoding: the point at infinity.
pub const FLAG_INFINITY: u8 = 0x40;
/// Flag bit in byte 0 of a compressed encoding: y is the lexicographically larger root.
pub const FLAG_SORT: u8 = 0x20;

/// p - 2, the Fermat inversion exponent.
pub(crate) const FP_MODULUS_MINUS_2: [u64; 6] = arith::minus_two(&FP_MODULUS);
/// r - 2.
pub(crate) const FR_MODULUS_MINUS_2: [u64; 4] = arith::minus_two(&FR_MODULUS);

// Compile-time checks of the literals above.
const _: () = assert!(arith::eq(&FP_R, &arith::pow2_mod(384, &FP_MODULUS)));
const _: () = assert!(arith::eq(&FP_R2, &arith::pow2_mod(768, &FP_MODULUS)));
const _: () = assert!(FP_INV == arith::neg_inv_mod_2_64(FP_MODULUS[0]));
const _: () = assert!(arith::eq(&FR_R, &arith::pow2_mod(256, &FR_MODULUS)));
const _: () = assert!(arith::eq(&FR_R2, &arith::pow2_mod(512, &FR_MODULUS)));
const _: () = assert!(FR_INV == arith::neg_inv_mod_2_64(FR_MODULUS[0]));
// The no-carry CIOS and carry-free additions need a spare top bit (see `arith`).
const _: () = assert!(FP_MODULUS[5] < (u64::MAX >> 1) - 1);
const _: () = assert!(FR_MODULUS[3] < (u64::MAX >> 1) - 1);
// Bit lengths as documented.
const _: () = assert!(64 * 5 + (64 - FP_MODULUS[5].leading_zeros()) == FP_MODULUS_BITS);
const _: () = assert!(64 * 3 + (64 - FR_MODULUS[3].leading_zeros()) == FR_MODULUS_BITS);
