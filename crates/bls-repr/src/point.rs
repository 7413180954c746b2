//! Affine G1/G2 layouts and the uncompressed `.params` point encoding.

use bls12_381::{G1Affine, G2Affine};
use bytemuck::{Pod, Zeroable};

use crate::arith;
use crate::constants::{
    FLAG_COMPRESSION, FLAG_INFINITY, FLAG_SORT, FP_INV, FP_MODULUS, FP_R2, G1_UNCOMPRESSED_BYTES,
    G2_UNCOMPRESSED_BYTES,
};
use crate::error::{Coordinate, Group, ReprError};
use crate::fp::{be_limbs_at, fp_to_be_at, Fp2Repr, FpRepr};

/// The constant b = 4 of the G1 curve y^2 = x^3 + b, in Montgomery form.
pub const G1_CURVE_B: FpRepr = FpRepr::from_u64(4);
/// The constant b = 4(1 + u) of the G2 curve y^2 = x^3 + b, in Montgomery form.
pub const G2_CURVE_B: Fp2Repr = Fp2Repr::new(FpRepr::from_u64(4), FpRepr::from_u64(4));

/// An affine G1 point: `x` then `y`, 96 bytes, Montgomery coordinates. The point at
/// infinity is all zero ((0, 0) is not on the curve, so this is unambiguous).
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default, Pod, Zeroable)]
pub struct G1AffineRepr {
    /// The x coordinate.
    pub x: FpRepr,
    /// The y coordinate.
    pub y: FpRepr,
}

/// An affine G2 point: `x` then `y`, each `c0` then `c1`, 192 bytes, Montgomery
/// coordinates. The point at infinity is all zero.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default, Pod, Zeroable)]
pub struct G2AffineRepr {
    /// The x coordinate.
    pub x: Fp2Repr,
    /// The y coordinate.
    pub y: Fp2Repr,
}

/// Canonical limbs to Montgomery form, no range check (caller checked `< p`).
#[inline(always)]
fn to_mont(limbs: &[u64; 6]) -> FpRepr {
    FpRepr {
        limbs: arith::mont_mul6(limbs, &FP_R2, &FP_MODULUS, FP_INV),
    }
}

/// Checks the canonical limbs of one coordinate.
#[inline(always)]
fn check_canonical(limbs: &[u64; 6], coordinate: Coordinate) -> Result<(), ReprError> {
    if arith::lt(limbs, &FP_MODULUS) {
        Ok(())
    } else {
        Err(ReprError::FpNotCanonical {
            coordinate,
            found: *limbs,
        })
    }
}

/// The slow path taken when any flag bit is set: only a well-formed infinity passes.
#[cold]
fn parse_flagged(bytes: &[u8], group: Group) -> Result<(), ReprError> {
    let first_byte = bytes[0];
    if first_byte & FLAG_COMPRESSION != 0 {
        return Err(ReprError::CompressedFlag { group, first_byte });
    }
    if first_byte & FLAG_SORT != 0 {
        return Err(ReprError::SortFlag { group, first_byte });
    }
    // Only the infinity flag is left set.
    let payload0 = first_byte & !(FLAG_COMPRESSION | FLAG_INFINITY | FLAG_SORT);
    if payload0 != 0 {
        return Err(ReprError::InfinityWithPayload {
            group,
            offset: 0,
            byte: payload0,
        });
    }
    match bytes.iter().enumerate().skip(1).find(|(_, b)| **b != 0) {
        Some((offset, &byte)) => Err(ReprError::InfinityWithPayload {
            group,
            offset,
            byte,
        }),
        None => Ok(()),
    }
}

/// Parses limbs of a coordinate that is canonical by construction (from `bls12_381`),
/// reducing instead of failing so the conversion from a library point is infallible.
fn to_mont_reducing(mut limbs: [u64; 6]) -> FpRepr {
    // At most 15 rounds: the value is below 2^384 < 16p.
    while !arith::lt(&limbs, &FP_MODULUS) {
        limbs = arith::sub_mod(&limbs, &FP_MODULUS, &FP_MODULUS);
    }
    to_mont(&limbs)
}

impl G1AffineRepr {
    /// The point at infinity (all zero).
    pub const IDENTITY: G1AffineRepr = G1AffineRepr {
        x: FpRepr::ZERO,
        y: FpRepr::ZERO,
    };

    /// The standard generator of G1.
    pub fn generator() -> G1AffineRepr {
        G1AffineRepr::from_affine(&G1Affine::generator())
    }

    /// Whether this is the point at infinity (all zero).
    pub fn is_identity(&self) -> bool {
        self.x.is_zero() && self.y.is_zero()
    }

    /// Whether both coordinates are `< p` (always true for values from this crate).
    pub fn is_reduced(&self) -> bool {
        self.x.is_reduced() && self.y.is_reduced()
    }

    /// Converts a `bls12_381` point (through its uncompressed encoding).
    pub fn from_affine(p: &G1Affine) -> G1AffineRepr {
        if bool::from(p.is_identity()) {
            return G1AffineRepr::IDENTITY;
        }
        let b = p.to_uncompressed();
        G1AffineRepr {
            x: to_mont_reducing(be_limbs_at(&b, 0)),
            y: to_mont_reducing(be_limbs_at(&b, 48)),
        }
    }

    /// Converts to a `bls12_381` point, checking the curve equation and the subgroup.
    pub fn to_affine(&self) -> Result<G1Affine, ReprError> {
        let p = self.to_affine_unchecked()?;
        if !bool::from(p.is_on_curve()) {
            return Err(ReprError::NotOnCurve { group: Group::G1 });
        }
        if !bool::from(p.is_torsion_free()) {
            return Err(ReprError::NotInSubgroup { group: Group::G1 });
        }
        Ok(p)
    }

    /// Converts to a `bls12_381` point checking only that the coordinates are reduced
    /// (no curve or subgroup check).
    pub fn to_affine_unchecked(&self) -> Result<G1Affine, ReprError> {
        if !self.x.is_reduced() {
            return Err(ReprError::FpNotReduced {
                coordinate: Coordinate::X,
                limbs: self.x.limbs,
            });
        }
        if !self.y.is_reduced() {
            return Err(ReprError::FpNotReduced {
                coordinate: Coordinate::Y,
                limbs: self.y.limbs,
            });
        }
        // Our encoding is always well-formed, so the library parse cannot fail; the
        // fallback error is there only so this path has no panic.
        Option::from(G1Affine::from_uncompressed_unchecked(
            &self.to_uncompressed(),
        ))
        .ok_or(ReprError::NotOnCurve { group: Group::G1 })
    }

    /// Parses the 96-byte uncompressed encoding (big-endian x then y; flag bits in the
    /// top three bits of byte 0). Rejects the compression and sort flags, an infinity
    /// flag with any other bit set, coordinates `>= p`, and (0, 0) without the infinity
    /// flag. Does not check the curve equation or the subgroup.
    #[inline]
    pub fn from_uncompressed(bytes: &[u8; 96]) -> Result<G1AffineRepr, ReprError> {
        if bytes[0] & (FLAG_COMPRESSION | FLAG_INFINITY | FLAG_SORT) != 0 {
            parse_flagged(bytes, Group::G1)?;
            return Ok(G1AffineRepr::IDENTITY);
        }
        let x = be_limbs_at(bytes, 0);
        let y = be_limbs_at(bytes, 48);
        check_canonical(&x, Coordinate::X)?;
        check_canonical(&y, Coordinate::Y)?;
        if arith::is_zero(&x) && arith::is_zero(&y) {
            return Err(ReprError::ZeroWithoutInfinityFlag { group: Group::G1 });
        }
        Ok(G1AffineRepr {
            x: to_mont(&x),
            y: to_mont(&y),
        })
    }

    /// The 96-byte uncompressed encoding (infinity: `0x40` then zeros).
    pub fn to_uncompressed(&self) -> [u8; 96] {
        let mut out = [0u8; 96];
        if self.is_identity() {
            out[0] = FLAG_INFINITY;
        } else {
            fp_to_be_at(&self.x, &mut out, 0);
            fp_to_be_at(&self.y, &mut out, 48);
        }
        out
    }

    /// Whether `y^2 = x^3 + 4` (the identity counts as on the curve); false when a
    /// coordinate is not reduced. Four multiplications.
    pub fn is_on_curve(&self) -> bool {
        if !self.is_reduced() {
            return false;
        }
        if self.is_identity() {
            return true;
        }
        let lhs = self.y.square();
        let rhs = self.x.square().mul(&self.x).add(&G1_CURVE_B);
        lhs == rhs
    }

    /// `-self` (the identity stays the identity).
    pub fn neg(&self) -> G1AffineRepr {
        G1AffineRepr {
            x: self.x,
            y: self.y.neg(),
        }
    }
}

impl G2AffineRepr {
    /// The point at infinity (all zero).
    pub const IDENTITY: G2AffineRepr = G2AffineRepr {
        x: Fp2Repr::ZERO,
        y: Fp2Repr::ZERO,
    };

    /// The standard generator of G2.
    pub fn generator() -> G2AffineRepr {
        G2AffineRepr::from_affine(&G2Affine::generator())
    }

    /// Whether this is the point at infinity (all zero).
    pub fn is_identity(&self) -> bool {
        self.x.is_zero() && self.y.is_zero()
    }

    /// Whether all four base-field coordinates are `< p`.
    pub fn is_reduced(&self) -> bool {
        self.x.is_reduced() && self.y.is_reduced()
    }

    /// Converts a `bls12_381` point (through its uncompressed encoding).
    pub fn from_affine(p: &G2Affine) -> G2AffineRepr {
        if bool::from(p.is_identity()) {
            return G2AffineRepr::IDENTITY;
        }
        let b = p.to_uncompressed();
        G2AffineRepr {
            x: Fp2Repr::new(
                to_mont_reducing(be_limbs_at(&b, 48)),
                to_mont_reducing(be_limbs_at(&b, 0)),
            ),
            y: Fp2Repr::new(
                to_mont_reducing(be_limbs_at(&b, 144)),
                to_mont_reducing(be_limbs_at(&b, 96)),
            ),
        }
    }

    /// Converts to a `bls12_381` point, checking the curve equation and the subgroup.
    pub fn to_affine(&self) -> Result<G2Affine, ReprError> {
        let p = self.to_affine_unchecked()?;
        if !bool::from(p.is_on_curve()) {
            return Err(ReprError::NotOnCurve { group: Group::G2 });
        }
        if !bool::from(p.is_torsion_free()) {
            return Err(ReprError::NotInSubgroup { group: Group::G2 });
        }
        Ok(p)
    }

    /// Converts to a `bls12_381` point checking only that the coordinates are reduced.
    pub fn to_affine_unchecked(&self) -> Result<G2Affine, ReprError> {
        for (c, coordinate) in [
            (&self.x.c0, Coordinate::XC0),
            (&self.x.c1, Coordinate::XC1),
            (&self.y.c0, Coordinate::YC0),
            (&self.y.c1, Coordinate::YC1),
        ] {
            if !c.is_reduced() {
                return Err(ReprError::FpNotReduced {
                    coordinate,
                    limbs: c.limbs,
                });
            }
        }
        // As for G1: well-formed by construction; the fallback only avoids a panic.
        Option::from(G2Affine::from_uncompressed_unchecked(
            &self.to_uncompressed(),
        ))
        .ok_or(ReprError::NotOnCurve { group: Group::G2 })
    }

    /// Parses the 192-byte uncompressed encoding: big-endian `x.c1, x.c0, y.c1, y.c0`,
    /// flag bits in the top three bits of byte 0. Same rejections as
    /// [`G1AffineRepr::from_uncompressed`]; no curve or subgroup check.
    #[inline]
    pub fn from_uncompressed(bytes: &[u8; 192]) -> Result<G2AffineRepr, ReprError> {
        if bytes[0] & (FLAG_COMPRESSION | FLAG_INFINITY | FLAG_SORT) != 0 {
            parse_flagged(bytes, Group::G2)?;
            return Ok(G2AffineRepr::IDENTITY);
        }
        let xc1 = be_limbs_at(bytes, 0);
        let xc0 = be_limbs_at(bytes, 48);
        let yc1 = be_limbs_at(bytes, 96);
        let yc0 = be_limbs_at(bytes, 144);
        check_canonical(&xc1, Coordinate::XC1)?;
        check_canonical(&xc0, Coordinate::XC0)?;
        check_canonical(&yc1, Coordinate::YC1)?;
        check_canonical(&yc0, Coordinate::YC0)?;
        if arith::is_zero(&xc0)
            && arith::is_zero(&xc1)
            && arith::is_zero(&yc0)
            && arith::is_zero(&yc1)
        {
            return Err(ReprError::ZeroWithoutInfinityFlag { group: Group::G2 });
        }
        Ok(G2AffineRepr {
            x: Fp2Repr::new(to_mont(&xc0), to_mont(&xc1)),
            y: Fp2Repr::new(to_mont(&yc0), to_mont(&yc1)),
        })
    }

    /// The 192-byte uncompressed encoding (infinity: `0x40` then zeros).
    pub fn to_uncompressed(&self) -> [u8; 192] {
        let mut out = [0u8; 192];
        if self.is_identity() {
            out[0] = FLAG_INFINITY;
        } else {
            fp_to_be_at(&self.x.c1, &mut out, 0);
            fp_to_be_at(&self.x.c0, &mut out, 48);
            fp_to_be_at(&self.y.c1, &mut out, 96);
            fp_to_be_at(&self.y.c0, &mut out, 144);
        }
        out
    }

    /// Whether `y^2 = x^3 + 4(1 + u)` (the identity counts as on the curve); false when
    /// a coordinate is not reduced.
    pub fn is_on_curve(&self) -> bool {
        if !self.is_reduced() {
            return false;
        }
        if self.is_identity() {
            return true;
        }
        let lhs = self.y.square();
        let rhs = self.x.square().mul(&self.x).add(&G2_CURVE_B);
        lhs == rhs
    }

    /// `-self` (the identity stays the identity).
    pub fn neg(&self) -> G2AffineRepr {
        G2AffineRepr {
            x: self.x,
            y: self.y.neg(),
        }
    }
}

impl From<&G1Affine> for G1AffineRepr {
    fn from(p: &G1Affine) -> G1AffineRepr {
        G1AffineRepr::from_affine(p)
    }
}

impl From<&G2Affine> for G2AffineRepr {
    fn from(p: &G2Affine) -> G2AffineRepr {
        G2AffineRepr::from_affine(p)
    }
}

/// Checks `bytes.len() == out_len * point_bytes`; the error index is the first point
/// that the two slices do not both cover.
fn check_slice_len(
    group: Group,
    found_bytes: usize,
    n_points: usize,
    point_bytes: usize,
) -> Result<(), (usize, ReprError)> {
    // Cannot overflow: `n_points` points of at least `point_bytes` bytes exist in memory.
    let expected_bytes = n_points * point_bytes;
    if found_bytes == expected_bytes {
        Ok(())
    } else {
        Err((
            n_points.min(found_bytes / point_bytes),
            ReprError::SliceLength {
                group,
                n_points,
                expected_bytes,
                found_bytes,
            },
        ))
    }
}

/// Parses `out.len()` consecutive 96-byte uncompressed G1 points from `bytes` (which
/// must be exactly `96 * out.len()` bytes). On error returns the index of the failing
/// point (for a length mismatch: the first index the two slices do not both cover);
/// `out` is then filled up to that index. No curve or subgroup checks.
pub fn g1_from_uncompressed_slice(
    bytes: &[u8],
    out: &mut [G1AffineRepr],
) -> Result<(), (usize, ReprError)> {
    check_slice_len(Group::G1, bytes.len(), out.len(), G1_UNCOMPRESSED_BYTES)?;
    for (i, (chunk, o)) in bytes
        .chunks_exact(G1_UNCOMPRESSED_BYTES)
        .zip(out.iter_mut())
        .enumerate()
    {
        let chunk: &[u8; G1_UNCOMPRESSED_BYTES] = chunk.try_into().map_err(|_| {
            (
                i,
                ReprError::SliceLength {
                    group: Group::G1,
                    n_points: 1,
                    expected_bytes: G1_UNCOMPRESSED_BYTES,
                    found_bytes: chunk.len(),
                },
            )
        })?;
        *o = G1AffineRepr::from_uncompressed(chunk).map_err(|e| (i, e))?;
    }
    Ok(())
}

/// Parses `out.len()` consecutive 192-byte uncompressed G2 points; see
/// [`g1_from_uncompressed_slice`].
pub fn g2_from_uncompressed_slice(
    bytes: &[u8],
    out: &mut [G2AffineRepr],
) -> Result<(), (usize, ReprError)> {
    check_slice_len(Group::G2, bytes.len(), out.len(), G2_UNCOMPRESSED_BYTES)?;
    for (i, (chunk, o)) in bytes
        .chunks_exact(G2_UNCOMPRESSED_BYTES)
        .zip(out.iter_mut())
        .enumerate()
    {
        let chunk: &[u8; G2_UNCOMPRESSED_BYTES] = chunk.try_into().map_err(|_| {
            (
                i,
                ReprError::SliceLength {
                    group: Group::G2,
                    n_points: 1,
                    expected_bytes: G2_UNCOMPRESSED_BYTES,
                    found_bytes: chunk.len(),
                },
            )
        })?;
        *o = G2AffineRepr::from_uncompressed(chunk).map_err(|e| (i, e))?;
    }
    Ok(())
}

/// Writes the uncompressed encodings of `points` into `out` (exactly
/// `96 * points.len()` bytes).
pub fn g1_to_uncompressed_slice(points: &[G1AffineRepr], out: &mut [u8]) -> Result<(), ReprError> {
    check_slice_len(Group::G1, out.len(), points.len(), G1_UNCOMPRESSED_BYTES)
        .map_err(|(_, e)| e)?;
    for (p, chunk) in points
        .iter()
        .zip(out.chunks_exact_mut(G1_UNCOMPRESSED_BYTES))
    {
        chunk.copy_from_slice(&p.to_uncompressed());
    }
    Ok(())
}

/// Writes the uncompressed encodings of `points` into `out` (exactly
/// `192 * points.len()` bytes).
pub fn g2_to_uncompressed_slice(points: &[G2AffineRepr], out: &mut [u8]) -> Result<(), ReprError> {
    check_slice_len(Group::G2, out.len(), points.len(), G2_UNCOMPRESSED_BYTES)
        .map_err(|(_, e)| e)?;
    for (p, chunk) in points
        .iter()
        .zip(out.chunks_exact_mut(G2_UNCOMPRESSED_BYTES))
    {
        chunk.copy_from_slice(&p.to_uncompressed());
    }
    Ok(())
}
