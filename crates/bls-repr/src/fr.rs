//! `FrRepr`: the scalar field.

use std::fmt;

use bls12_381::Scalar;
use bytemuck::{Pod, Zeroable};

use crate::arith;
use crate::constants::{FR_INV, FR_MODULUS, FR_MODULUS_MINUS_2, FR_R, FR_R2};
use crate::error::{hex_limbs, ReprError};

/// An element of Fr in Montgomery form: `limbs` holds `a * 2^256 mod r`, little-endian
/// 64-bit limbs (8 little-endian 32-bit limbs on the GPU); 32 bytes. Always fully
/// reduced (`< r`) when produced by this crate; check foreign memory with
/// [`FrRepr::is_reduced`] or [`FrRepr::from_montgomery_limbs`]. All zero is 0.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default, Pod, Zeroable)]
pub struct FrRepr {
    /// Montgomery limbs, little-endian.
    pub limbs: [u64; 4],
}

/// The limbs of a `bls12_381` scalar as it stores them, without conversion.
///
/// `bls12_381` 0.9 keeps a `Scalar` as four little-endian u64 limbs in Montgomery form with
/// R = 2^256, fully reduced: exactly [`FrRepr`]'s layout. The constant checks below prove
/// that for the version this crate builds against (at compile time), so reading the limbs
/// replaces a reduction and a Montgomery product per conversion (≈ 50 ns → a few ns, a
/// memory copy; most of a prover's conversions are of witness values and a, b, c).
#[allow(unsafe_code)]
#[inline(always)]
const fn scalar_limbs(s: Scalar) -> [u64; 4] {
    // SAFETY: `Scalar` is a struct whose only field is a `[u64; 4]`, and `transmute` checks
    // that the two have the same size, so that field fills the struct from offset 0 and
    // these bytes are its limbs; every bit pattern is a valid `[u64; 4]`.
    unsafe { std::mem::transmute::<Scalar, [u64; 4]>(s) }
}

/// The scalar whose stored limbs are `limbs`, which must be reduced (`< r`): the one
/// invariant `bls12_381` keeps on a `Scalar`.
#[allow(unsafe_code)]
#[inline(always)]
const fn scalar_from_reduced_limbs(limbs: [u64; 4]) -> Scalar {
    debug_assert!(arith::lt(&limbs, &FR_MODULUS));
    // SAFETY: as in `scalar_limbs`, the same size and the one field at offset 0; the
    // caller passes reduced limbs, so the scalar's invariant holds.
    unsafe { std::mem::transmute::<[u64; 4], Scalar>(limbs) }
}

// Compile-time proof that `bls12_381` stores scalars as `FrRepr` does: Montgomery form with
// R = 2^256 (1 is stored as R mod r), little-endian limbs, reduced (r - 1 stored below r).
const _: () = {
    assert!(arith::eq(&scalar_limbs(<Scalar as ff::Field>::ONE), &FR_R));
    assert!(arith::is_zero(&scalar_limbs(<Scalar as ff::Field>::ZERO)));
    let two = Scalar::from_raw([2, 0, 0, 0]);
    assert!(arith::eq(
        &scalar_limbs(two),
        &arith::add_mod(&FR_R, &FR_R, &FR_MODULUS)
    ));
    let big = Scalar::from_raw([0x0123_4567_89ab_cdef, 0xfedc_ba98_7654_3210, 7, 1 << 60]);
    assert!(arith::eq(
        &arith::from_mont(&scalar_limbs(big), &FR_MODULUS, FR_INV),
        &[0x0123_4567_89ab_cdef, 0xfedc_ba98_7654_3210, 7, 1 << 60]
    ));
    let minus_one = arith::sub_mod(&[0; 4], &[1, 0, 0, 0], &FR_MODULUS);
    let top = scalar_limbs(Scalar::from_raw(minus_one));
    assert!(arith::lt(&top, &FR_MODULUS));
    assert!(arith::eq(
        &arith::from_mont(&top, &FR_MODULUS, FR_INV),
        &minus_one
    ));
};

/// Little-endian u64 at `off`.
#[inline(always)]
fn le_u64(bytes: &[u8], off: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&bytes[off..off + 8]);
    u64::from_le_bytes(w)
}

impl FrRepr {
    /// The element 0.
    pub const ZERO: FrRepr = FrRepr { limbs: [0; 4] };
    /// The element 1 (R mod r).
    pub const ONE: FrRepr = FrRepr { limbs: FR_R };

    /// `v` as a field element.
    pub const fn from_u64(v: u64) -> FrRepr {
        FrRepr {
            limbs: arith::mont_mul(&[v, 0, 0, 0], &FR_R2, &FR_MODULUS, FR_INV),
        }
    }

    /// Converts a `bls12_381` scalar: a copy of its limbs (the same Montgomery form).
    #[inline]
    pub fn from_scalar(s: &Scalar) -> FrRepr {
        FrRepr {
            limbs: scalar_limbs(*s),
        }
    }

    /// Converts back to a `bls12_381` scalar; fails if the limbs are not reduced.
    pub fn to_scalar(&self) -> Result<Scalar, ReprError> {
        if !self.is_reduced() {
            return Err(ReprError::FrNotReduced { limbs: self.limbs });
        }
        Ok(scalar_from_reduced_limbs(self.limbs))
    }

    /// Converts canonical limbs (little-endian, `< r`) to Montgomery form.
    pub fn from_canonical_limbs(limbs: [u64; 4]) -> Result<FrRepr, ReprError> {
        if !arith::lt(&limbs, &FR_MODULUS) {
            return Err(ReprError::FrNotCanonical { found: limbs });
        }
        Ok(FrRepr {
            limbs: arith::mont_mul4(&limbs, &FR_R2, &FR_MODULUS, FR_INV),
        })
    }

    /// Canonical limbs (little-endian, `< r`). Most values of real circuits' witnesses are
    /// 0 or 1: those skip the Montgomery reduction.
    #[inline]
    pub fn to_canonical_limbs(&self) -> [u64; 4] {
        // One well-predicted branch for both (a witness mixes them at random).
        let one = self.limbs == FR_R;
        if one || self.limbs == [0; 4] {
            [u64::from(one), 0, 0, 0]
        } else {
            arith::from_mont(&self.limbs, &FR_MODULUS, FR_INV)
        }
    }

    /// Parses the canonical 32-byte little-endian encoding (as `Scalar::to_bytes`);
    /// rejects values `>= r`.
    pub fn from_le_bytes(bytes: &[u8; 32]) -> Result<FrRepr, ReprError> {
        Self::from_canonical_limbs([
            le_u64(bytes, 0),
            le_u64(bytes, 8),
            le_u64(bytes, 16),
            le_u64(bytes, 24),
        ])
    }

    /// The canonical 32-byte little-endian encoding.
    pub fn to_le_bytes(&self) -> [u8; 32] {
        let c = self.to_canonical_limbs();
        let mut out = [0u8; 32];
        for (i, l) in c.iter().enumerate() {
            out[8 * i..8 * i + 8].copy_from_slice(&l.to_le_bytes());
        }
        out
    }

    /// Wraps Montgomery limbs (e.g. read back from a GPU), checking they are `< r`.
    pub fn from_montgomery_limbs(limbs: [u64; 4]) -> Result<FrRepr, ReprError> {
        let v = FrRepr { limbs };
        if v.is_reduced() {
            Ok(v)
        } else {
            Err(ReprError::FrNotReduced { limbs })
        }
    }

    /// Whether the Montgomery limbs are `< r`.
    pub fn is_reduced(&self) -> bool {
        arith::lt(&self.limbs, &FR_MODULUS)
    }

    /// Whether this is 0.
    pub fn is_zero(&self) -> bool {
        arith::is_zero(&self.limbs)
    }

    /// `self + rhs`.
    #[inline]
    pub fn add(&self, rhs: &FrRepr) -> FrRepr {
        FrRepr {
            limbs: arith::add_mod(&self.limbs, &rhs.limbs, &FR_MODULUS),
        }
    }

    /// `self - rhs`.
    #[inline]
    pub fn sub(&self, rhs: &FrRepr) -> FrRepr {
        FrRepr {
            limbs: arith::sub_mod(&self.limbs, &rhs.limbs, &FR_MODULUS),
        }
    }

    /// `-self`.
    #[inline]
    pub fn neg(&self) -> FrRepr {
        FrRepr {
            limbs: arith::neg_mod(&self.limbs, &FR_MODULUS),
        }
    }

    /// `2 * self`.
    #[inline]
    pub fn double(&self) -> FrRepr {
        self.add(self)
    }

    /// `self * rhs` (Montgomery multiplication, no-carry CIOS).
    #[inline]
    pub fn mul(&self, rhs: &FrRepr) -> FrRepr {
        FrRepr {
            limbs: arith::mont_mul4(&self.limbs, &rhs.limbs, &FR_MODULUS, FR_INV),
        }
    }

    /// `self^2`.
    #[inline]
    pub fn square(&self) -> FrRepr {
        self.mul(self)
    }

    /// `self^exp`, `exp` as little-endian limbs (variable time in `exp`).
    pub fn pow(&self, exp: &[u64]) -> FrRepr {
        FrRepr {
            limbs: arith::mont_pow(&self.limbs, exp, &FR_R, &FR_MODULUS, FR_INV),
        }
    }

    /// `1 / self` by Fermat (`self^(r-2)`), `None` for 0.
    pub fn inverse(&self) -> Option<FrRepr> {
        if self.is_zero() {
            None
        } else {
            Some(self.pow(&FR_MODULUS_MINUS_2))
        }
    }
}

impl From<&Scalar> for FrRepr {
    fn from(s: &Scalar) -> FrRepr {
        FrRepr::from_scalar(s)
    }
}

impl From<Scalar> for FrRepr {
    fn from(s: Scalar) -> FrRepr {
        FrRepr::from_scalar(&s)
    }
}

/// The canonical value as big-endian hex (`0x` then 64 digits), as `Scalar` prints it;
/// `Debug` shows the Montgomery limbs instead.
impl fmt::Display for FrRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex_limbs(&self.to_canonical_limbs()))
    }
}
