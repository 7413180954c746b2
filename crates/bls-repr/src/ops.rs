//! Operator sugar (`+ - * -x` and the `op=` forms) over the inherent methods.
//!
//! The inherent methods take `&self`, so `a.mul(&b)` keeps resolving to them unless
//! `std::ops::Mul` is imported into the caller's scope.

use std::ops::{Add, AddAssign, Mul, MulAssign, Neg, Sub, SubAssign};

use crate::fp::{Fp2Repr, FpRepr};
use crate::fr::FrRepr;

macro_rules! field_ops {
    ($t:ty) => {
        impl Add for $t {
            type Output = $t;
            #[inline]
            fn add(self, rhs: $t) -> $t {
                <$t>::add(&self, &rhs)
            }
        }
        impl Add<&$t> for &$t {
            type Output = $t;
            #[inline]
            fn add(self, rhs: &$t) -> $t {
                <$t>::add(self, rhs)
            }
        }
        impl Sub for $t {
            type Output = $t;
            #[inline]
            fn sub(self, rhs: $t) -> $t {
                <$t>::sub(&self, &rhs)
            }
        }
        impl Sub<&$t> for &$t {
            type Output = $t;
            #[inline]
            fn sub(self, rhs: &$t) -> $t {
                <$t>::sub(self, rhs)
            }
        }
        impl Mul for $t {
            type Output = $t;
            #[inline]
            fn mul(self, rhs: $t) -> $t {
                <$t>::mul(&self, &rhs)
            }
        }
        impl Mul<&$t> for &$t {
            type Output = $t;
            #[inline]
            fn mul(self, rhs: &$t) -> $t {
                <$t>::mul(self, rhs)
            }
        }
        impl Neg for $t {
            type Output = $t;
            #[inline]
            fn neg(self) -> $t {
                <$t>::neg(&self)
            }
        }
        impl Neg for &$t {
            type Output = $t;
            #[inline]
            fn neg(self) -> $t {
                <$t>::neg(self)
            }
        }
        impl AddAssign for $t {
            #[inline]
            fn add_assign(&mut self, rhs: $t) {
                *self = <$t>::add(self, &rhs);
            }
        }
        impl SubAssign for $t {
            #[inline]
            fn sub_assign(&mut self, rhs: $t) {
                *self = <$t>::sub(self, &rhs);
            }
        }
        impl MulAssign for $t {
            #[inline]
            fn mul_assign(&mut self, rhs: $t) {
                *self = <$t>::mul(self, &rhs);
            }
        }
    };
}

field_ops!(FpRepr);
field_ops!(Fp2Repr);
field_ops!(FrRepr);
