//! `FpRepr` (the base field) and `Fp2Repr` (its quadratic extension).

use std::fmt;

use bytemuck::{Pod, Zeroable};

use crate::arith;
use crate::constants::{FP_INV, FP_MODULUS, FP_MODULUS_MINUS_2, FP_R, FP_R2};
use crate::error::{hex_limbs, Coordinate, ReprError};

/// An element of Fp in Montgomery form: `limbs` holds `a * 2^384 mod p`, little-endian
/// 64-bit limbs (byte `8*i + k` of the struct is byte `k` of limb `i`; on the GPU the
/// same 48 bytes are 12 little-endian 32-bit limbs). Always fully reduced (`< p`) when
/// produced by this crate; the field is public for `bytemuck` and GPU use, so memory
/// read back from elsewhere should be checked with [`FpRepr::is_reduced`] or
/// [`FpRepr::from_montgomery_limbs`]. All zero is the element 0.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default, Pod, Zeroable)]
pub struct FpRepr {
    /// Montgomery limbs, little-endian.
    pub limbs: [u64; 6],
}

/// Reads a big-endian u64 at `off` (the slices are fixed-size arrays at every call
/// site, so the bounds checks fold away).
#[inline(always)]
pub(crate) fn be_u64(bytes: &[u8], off: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&bytes[off..off + 8]);
    u64::from_be_bytes(w)
}

/// The 48 big-endian bytes at `off` to canonical little-endian limbs (no range check).
#[inline(always)]
pub(crate) fn be_limbs_at(bytes: &[u8], off: usize) -> [u64; 6] {
    [
        be_u64(bytes, off + 40),
        be_u64(bytes, off + 32),
        be_u64(bytes, off + 24),
        be_u64(bytes, off + 16),
        be_u64(bytes, off + 8),
        be_u64(bytes, off),
    ]
}

/// Parses the 48 big-endian bytes at `off` as a canonical Fp value.
#[inline(always)]
pub(crate) fn fp_from_be_at(
    bytes: &[u8],
    off: usize,
    coordinate: Coordinate,
) -> Result<FpRepr, ReprError> {
    FpRepr::from_canonical_limbs(be_limbs_at(bytes, off)).map_err(|e| e.at(coordinate))
}

/// Writes the canonical big-endian encoding of `x` at `off`.
#[inline(always)]
pub(crate) fn fp_to_be_at(x: &FpRepr, out: &mut [u8], off: usize) {
    let c = x.to_canonical_limbs();
    for (i, l) in c.iter().rev().enumerate() {
        out[off + 8 * i..off + 8 * i + 8].copy_from_slice(&l.to_be_bytes());
    }
}

impl FpRepr {
    /// The element 0.
    pub const ZERO: FpRepr = FpRepr { limbs: [0; 6] };
    /// The element 1 (R mod p).
    pub const ONE: FpRepr = FpRepr { limbs: FP_R };

    /// `v` as a field element (`v < p` always holds).
    pub const fn from_u64(v: u64) -> FpRepr {
        FpRepr {
            limbs: arith::mont_mul(&[v, 0, 0, 0, 0, 0], &FP_R2, &FP_MODULUS, FP_INV),
        }
    }

    /// Converts canonical limbs (little-endian, `< p`) to Montgomery form.
    pub fn from_canonical_limbs(limbs: [u64; 6]) -> Result<FpRepr, ReprError> {
        if !arith::lt(&limbs, &FP_MODULUS) {
            return Err(ReprError::FpNotCanonical {
                coordinate: Coordinate::Element,
                found: limbs,
            });
        }
        Ok(FpRepr {
            limbs: arith::mont_mul6(&limbs, &FP_R2, &FP_MODULUS, FP_INV),
        })
    }

    /// Canonical limbs (little-endian, `< p`) of this element.
    pub fn to_canonical_limbs(&self) -> [u64; 6] {
        arith::from_mont(&self.limbs, &FP_MODULUS, FP_INV)
    }

    /// Parses the canonical 48-byte big-endian encoding; rejects values `>= p`.
    /// No allocation; one range check and one Montgomery multiplication.
    #[inline]
    pub fn from_be_bytes(bytes: &[u8; 48]) -> Result<FpRepr, ReprError> {
        Self::from_canonical_limbs(be_limbs_at(bytes, 0))
    }

    /// The canonical 48-byte big-endian encoding.
    pub fn to_be_bytes(&self) -> [u8; 48] {
        let mut out = [0u8; 48];
        fp_to_be_at(self, &mut out, 0);
        out
    }

    /// Wraps Montgomery limbs (e.g. read back from a GPU), checking they are `< p`.
    pub fn from_montgomery_limbs(limbs: [u64; 6]) -> Result<FpRepr, ReprError> {
        let r = FpRepr { limbs };
        if r.is_reduced() {
            Ok(r)
        } else {
            Err(ReprError::FpNotReduced {
                coordinate: Coordinate::Element,
                limbs,
            })
        }
    }

    /// Whether the Montgomery limbs are `< p` (the invariant every operation assumes).
    pub fn is_reduced(&self) -> bool {
        arith::lt(&self.limbs, &FP_MODULUS)
    }

    /// Whether this is 0.
    pub fn is_zero(&self) -> bool {
        arith::is_zero(&self.limbs)
    }

    /// `self + rhs`.
    #[inline]
    pub fn add(&self, rhs: &FpRepr) -> FpRepr {
        FpRepr {
            limbs: arith::add_mod(&self.limbs, &rhs.limbs, &FP_MODULUS),
        }
    }

    /// `self - rhs`.
    #[inline]
    pub fn sub(&self, rhs: &FpRepr) -> FpRepr {
        FpRepr {
            limbs: arith::sub_mod(&self.limbs, &rhs.limbs, &FP_MODULUS),
        }
    }

    /// `-self`.
    #[inline]
    pub fn neg(&self) -> FpRepr {
        FpRepr {
            limbs: arith::neg_mod(&self.limbs, &FP_MODULUS),
        }
    }

    /// `2 * self`.
    #[inline]
    pub fn double(&self) -> FpRepr {
        self.add(self)
    }

    /// `self * rhs` (Montgomery multiplication, no-carry CIOS).
    #[inline]
    pub fn mul(&self, rhs: &FpRepr) -> FpRepr {
        FpRepr {
            limbs: arith::mont_mul6(&self.limbs, &rhs.limbs, &FP_MODULUS, FP_INV),
        }
    }

    /// `self^2`.
    #[inline]
    pub fn square(&self) -> FpRepr {
        self.mul(self)
    }

    /// `self^exp`, `exp` as little-endian limbs (variable time in `exp`).
    pub fn pow(&self, exp: &[u64]) -> FpRepr {
        FpRepr {
            limbs: arith::mont_pow(&self.limbs, exp, &FP_R, &FP_MODULUS, FP_INV),
        }
    }

    /// `1 / self` by Fermat (`self^(p-2)`), `None` for 0. About 570 multiplications.
    pub fn inverse(&self) -> Option<FpRepr> {
        if self.is_zero() {
            None
        } else {
            Some(self.pow(&FP_MODULUS_MINUS_2))
        }
    }
}

/// An element `c0 + c1·u` of Fp2 = Fp\[u\]/(u^2 + 1); 96 bytes, `c0` first.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default, Pod, Zeroable)]
pub struct Fp2Repr {
    /// The real part.
    pub c0: FpRepr,
    /// The coefficient of u.
    pub c1: FpRepr,
}

impl Fp2Repr {
    /// The element 0.
    pub const ZERO: Fp2Repr = Fp2Repr {
        c0: FpRepr::ZERO,
        c1: FpRepr::ZERO,
    };
    /// The element 1.
    pub const ONE: Fp2Repr = Fp2Repr {
        c0: FpRepr::ONE,
        c1: FpRepr::ZERO,
    };

    /// `c0 + c1·u`.
    pub const fn new(c0: FpRepr, c1: FpRepr) -> Fp2Repr {
        Fp2Repr { c0, c1 }
    }

    /// `v` as an element of the base field embedded in Fp2.
    pub const fn from_u64(v: u64) -> Fp2Repr {
        Fp2Repr {
            c0: FpRepr::from_u64(v),
            c1: FpRepr::ZERO,
        }
    }

    /// Parses the 96-byte big-endian encoding used inside G2 points: `c1` then `c0`.
    pub fn from_be_bytes(bytes: &[u8; 96]) -> Result<Fp2Repr, ReprError> {
        let c1 = fp_from_be_at(bytes, 0, Coordinate::C1)?;
        let c0 = fp_from_be_at(bytes, 48, Coordinate::C0)?;
        Ok(Fp2Repr { c0, c1 })
    }

    /// The 96-byte big-endian encoding: `c1` then `c0`.
    pub fn to_be_bytes(&self) -> [u8; 96] {
        let mut out = [0u8; 96];
        fp_to_be_at(&self.c1, &mut out, 0);
        fp_to_be_at(&self.c0, &mut out, 48);
        out
    }

    /// Whether both halves are `< p`.
    pub fn is_reduced(&self) -> bool {
        self.c0.is_reduced() && self.c1.is_reduced()
    }

    /// Whether this is 0.
    pub fn is_zero(&self) -> bool {
        self.c0.is_zero() && self.c1.is_zero()
    }

    /// `self + rhs`.
    #[inline]
    pub fn add(&self, rhs: &Fp2Repr) -> Fp2Repr {
        Fp2Repr {
            c0: self.c0.add(&rhs.c0),
            c1: self.c1.add(&rhs.c1),
        }
    }

    /// `self - rhs`.
    #[inline]
    pub fn sub(&self, rhs: &Fp2Repr) -> Fp2Repr {
        Fp2Repr {
            c0: self.c0.sub(&rhs.c0),
            c1: self.c1.sub(&rhs.c1),
        }
    }

    /// `-self`.
    #[inline]
    pub fn neg(&self) -> Fp2Repr {
        Fp2Repr {
            c0: self.c0.neg(),
            c1: self.c1.neg(),
        }
    }

    /// `2 * self`.
    #[inline]
    pub fn double(&self) -> Fp2Repr {
        self.add(self)
    }

    /// `c0 - c1·u`.
    #[inline]
    pub fn conjugate(&self) -> Fp2Repr {
        Fp2Repr {
            c0: self.c0,
            c1: self.c1.neg(),
        }
    }

    /// `self * k` for `k` in the base field.
    #[inline]
    pub fn mul_by_fp(&self, k: &FpRepr) -> Fp2Repr {
        Fp2Repr {
            c0: self.c0.mul(k),
            c1: self.c1.mul(k),
        }
    }

    /// `self * (1 + u)` (the non-residue used to build Fp6 and in the G2 curve constant).
    #[inline]
    pub fn mul_by_nonresidue(&self) -> Fp2Repr {
        Fp2Repr {
            c0: self.c0.sub(&self.c1),
            c1: self.c0.add(&self.c1),
        }
    }

    /// `self * rhs` (Karatsuba: three base-field multiplications).
    #[inline]
    pub fn mul(&self, rhs: &Fp2Repr) -> Fp2Repr {
        let aa = self.c0.mul(&rhs.c0);
        let bb = self.c1.mul(&rhs.c1);
        let cross = self.c0.add(&self.c1).mul(&rhs.c0.add(&rhs.c1));
        Fp2Repr {
            c0: aa.sub(&bb),
            c1: cross.sub(&aa).sub(&bb),
        }
    }

    /// `self^2` via `(c0 + c1)(c0 - c1) + 2·c0·c1·u` (two multiplications).
    #[inline]
    pub fn square(&self) -> Fp2Repr {
        let a = self.c0.add(&self.c1);
        let b = self.c0.sub(&self.c1);
        let c = self.c0.mul(&self.c1);
        Fp2Repr {
            c0: a.mul(&b),
            c1: c.double(),
        }
    }

    /// `1 / self = conj(self) / (c0^2 + c1^2)`, `None` for 0 (one Fp inversion).
    pub fn inverse(&self) -> Option<Fp2Repr> {
        let norm = self.c0.square().add(&self.c1.square());
        norm.inverse().map(|n| self.conjugate().mul_by_fp(&n))
    }
}

/// The canonical value as big-endian hex (`0x` then 96 digits); `Debug` shows the
/// Montgomery limbs instead.
impl fmt::Display for FpRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex_limbs(&self.to_canonical_limbs()))
    }
}

/// `c0 + c1*u` with both parts as canonical hex.
impl fmt::Display for Fp2Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} + {}*u", self.c0, self.c1)
    }
}
