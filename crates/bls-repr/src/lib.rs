//! GPU-ready, `bytemuck`-able layouts of BLS12-381 field elements and affine points,
//! their conversion to and from `bls12_381` types, the uncompressed point encoding of
//! `.params` files, and a host Montgomery arithmetic that serves as the CPU reference
//! for the GPU kernels.
//!
//! # Example
//!
//! ```
//! use bls_repr::{g1_from_uncompressed_slice, FrRepr, G1AffineRepr};
//!
//! // Two points as they sit in a `.params` file: the generator and infinity.
//! let mut file_bytes = G1AffineRepr::generator().to_uncompressed().to_vec();
//! file_bytes.extend_from_slice(&G1AffineRepr::IDENTITY.to_uncompressed());
//! let mut bases = vec![G1AffineRepr::default(); 2];
//! g1_from_uncompressed_slice(&file_bytes, &mut bases).map_err(|(i, e)| format!("point {i}: {e}"))?;
//! assert!(bases.iter().all(|p| p.is_on_curve()));
//! assert!(bases[1].is_identity());
//! // Ready for a device copy: 96 bytes per point, Montgomery limbs.
//! let device_bytes: &[u8] = bytemuck::cast_slice(&bases);
//! assert_eq!(device_bytes.len(), 192);
//! // Scalars: from `bls12_381` and back, with host arithmetic in between.
//! let s = bls12_381::Scalar::from(7u64);
//! let f = FrRepr::from_scalar(&s).square();
//! assert_eq!(f.to_scalar()?, s * s);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Layout contract
//!
//! Every type is `#[repr(C)]`, `Pod + Zeroable`, has alignment 8 and no padding, so a
//! `&[G1AffineRepr]` can be cast to bytes and copied to a device as is.
//!
//! | type           | bytes | layout (byte offsets)                                  |
//! |----------------|-------|--------------------------------------------------------|
//! | [`FpRepr`]     | 48    | `limbs[i]` at `8*i`, i = 0..6, least significant first  |
//! | [`FrRepr`]     | 32    | `limbs[i]` at `8*i`, i = 0..4, least significant first  |
//! | [`Fp2Repr`]    | 96    | `c0` at 0, `c1` at 48 (value `c0 + c1·u`, `u^2 = -1`)  |
//! | [`G1AffineRepr`] | 96  | `x` at 0, `y` at 48                                    |
//! | [`G2AffineRepr`] | 192 | `x.c0` at 0, `x.c1` at 48, `y.c0` at 96, `y.c1` at 144 |
//!
//! - **Montgomery form.** An `FpRepr` holding the number `m` represents `m / R mod p`
//!   with `R = 2^384`; an `FrRepr` represents `m / R mod r` with `R = 2^256`. So
//!   `limbs == [0; N]` is 0 and [`FP_R`] / [`FR_R`] is 1.
//! - **Little-endian limbs.** Each `u64` limb is stored little-endian (every target we
//!   run on is little-endian), so the same bytes read as `u32` are 12 (Fp) or 8 (Fr)
//!   little-endian 32-bit limbs: `u32 limb 2i` is the low half of `u64 limb i`. The
//!   Montgomery radix stays `2^384` / `2^256`; a 32-bit CIOS kernel uses the reduction
//!   factor [`FP_INV_U32`] / [`FR_INV_U32`] (the low half of [`FP_INV`] / [`FR_INV`]).
//!   The `*_U32` constants are the same numbers as 32-bit limb arrays.
//! - **Fully reduced.** Values made by this crate are always `< p` (resp. `< r`).
//!   The fields are public (GPU code writes them), so memory from elsewhere is checked
//!   with `is_reduced` / `from_montgomery_limbs`; host arithmetic on unreduced input
//!   gives unspecified (but memory-safe) results.
//! - **Infinity is all zero.** `(0, 0)` is on neither curve, so the all-zero point is
//!   free to mean the identity. The parser rejects an encoding of `(0, 0)` without the
//!   infinity flag, so the two cannot be confused.
//!
//! # `.params` point encoding
//!
//! Uncompressed, big-endian: G1 is `x || y` (96 bytes), G2 is `x.c1 || x.c0 || y.c1 ||
//! y.c0` (192 bytes). The top three bits of byte 0 are flags: `0x80` compression (must be
//! 0), `0x40` infinity (then every other bit must be 0), `0x20` sort (must be 0 when
//! uncompressed). Each coordinate must be `< p`. [`G1AffineRepr::from_uncompressed`] and
//! the slice helpers check exactly this and return a [`ReprError`] naming what was found;
//! they do **not** check the curve equation or the subgroup (use
//! [`G1AffineRepr::is_on_curve`] and `bls12_381`'s `is_torsion_free`, or
//! [`G1AffineRepr::to_affine`], which does both).
//!
//! # Cost model
//!
//! No heap allocation on any success path, no bignum crate. Parsing one Fp is a range
//! check plus one Montgomery multiplication by `R^2`; one G1 point is two of those. Run
//! `cargo run --release -p bls-repr --example convert_bench` for the numbers on a given
//! machine. Measured there on the 2-core development VM (AMD EPYC, 2.6 GHz, on-CPU time,
//! one thread): Fp `from_be_bytes` about 30 ns, one G1 point parse about 60 ns (about
//! 1.5 GiB/s of `.params` bytes per core), G2 about 125 ns, Fp `mul` about 28 ns,
//! Fr `mul` about 13 ns, `FrRepr::from_scalar` about 6 ns (a copy of the limbs:
//! memory-bound; 36 ns when it was two Montgomery products). `inverse` uses Fermat's little
//! theorem (hundreds of multiplications): a reference, not a fast path.
//!
//! # Unsafe
//!
//! One place: [`FrRepr::from_scalar`] and [`FrRepr::to_scalar`] read and write the limbs of a
//! `bls12_381::Scalar` directly (a `transmute` between `Scalar` and `[u64; 4]`), because that
//! crate stores them in exactly `FrRepr`'s form; constant assertions prove the form at
//! compile time for the version built against.
//!
//! # Non-goals
//!
//! Constant-time execution (these are public parameters and test references), projective
//! point arithmetic, pairings, subgroup checks (delegated to `bls12_381`).
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod arith;
mod constants;
mod error;
mod fp;
mod fr;
mod ops;
mod point;

pub use constants::{
    FLAG_COMPRESSION, FLAG_INFINITY, FLAG_SORT, FP_BYTES, FP_INV, FP_INV_U32, FP_MODULUS,
    FP_MODULUS_BITS, FP_MODULUS_U32, FP_R, FP_R2, FP_R2_U32, FP_R_U32, FR_BYTES, FR_INV,
    FR_INV_U32, FR_MODULUS, FR_MODULUS_BITS, FR_MODULUS_U32, FR_R, FR_R2, FR_R2_U32, FR_R_U32,
    G1_UNCOMPRESSED_BYTES, G2_UNCOMPRESSED_BYTES,
};
pub use error::{Coordinate, Group, ReprError};
pub use fp::{Fp2Repr, FpRepr};
pub use fr::FrRepr;
pub use point::{
    g1_from_uncompressed_slice, g1_to_uncompressed_slice, g2_from_uncompressed_slice,
    g2_to_uncompressed_slice, G1AffineRepr, G2AffineRepr, G1_CURVE_B, G2_CURVE_B,
};

// Layout guarantees the GPU code relies on.
const _: () = assert!(std::mem::size_of::<FpRepr>() == 48);
const _: () = assert!(std::mem::size_of::<FrRepr>() == 32);
const _: () = assert!(std::mem::size_of::<Fp2Repr>() == 96);
const _: () = assert!(std::mem::size_of::<G1AffineRepr>() == 96);
const _: () = assert!(std::mem::size_of::<G2AffineRepr>() == 192);
const _: () = assert!(std::mem::align_of::<G2AffineRepr>() == 8);
#[cfg(not(target_endian = "little"))]
compile_error!("bls-repr's layouts assume a little-endian host (as the GPU is)");
