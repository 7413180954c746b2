//! Batch-affine bucket accumulation for the CPU backend.
//!
//! Adding an affine point into an affine bucket costs one inversion plus 2M + 1S; the
//! inversions of a whole batch of independent additions share one field inversion
//! (Montgomery's trick, 3M each), so a bucket addition costs about 6M against about
//! 11M for bls12_381's complete mixed addition. bls12_381 hides its base field, so the
//! arithmetic here runs on `bls-repr`'s Montgomery types (the layout the GPU uses too).

use bls12_381::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use bls_repr::{Fp2Repr, FpRepr, G1AffineRepr, G2AffineRepr};
use group::{Curve, CurveAffine};

/// `CurveAffine::to_curve` without the name clash with [`MsmBase::to_curve`].
trait ToCurvePoint: CurveAffine {
    fn to_curve_point(&self) -> Self::Curve {
        CurveAffine::to_curve(self)
    }
}
impl<T: CurveAffine> ToCurvePoint for T {}

/// The few field operations affine addition needs.
pub trait BaseField: Copy + Send + Sync + PartialEq {
    const ZERO: Self;
    const ONE: Self;
    fn add(&self, rhs: &Self) -> Self;
    fn sub(&self, rhs: &Self) -> Self;
    fn mul(&self, rhs: &Self) -> Self;
    fn square(&self) -> Self;
    fn neg(&self) -> Self;
    fn is_zero(&self) -> bool;
    fn inverse(&self) -> Option<Self>;
}

macro_rules! base_field {
    ($t:ty) => {
        impl BaseField for $t {
            const ZERO: Self = <$t>::ZERO;
            const ONE: Self = <$t>::ONE;
            #[inline(always)]
            fn add(&self, rhs: &Self) -> Self {
                <$t>::add(self, rhs)
            }
            #[inline(always)]
            fn sub(&self, rhs: &Self) -> Self {
                <$t>::sub(self, rhs)
            }
            #[inline(always)]
            fn mul(&self, rhs: &Self) -> Self {
                <$t>::mul(self, rhs)
            }
            #[inline(always)]
            fn square(&self) -> Self {
                <$t>::square(self)
            }
            #[inline(always)]
            fn neg(&self) -> Self {
                <$t>::neg(self)
            }
            #[inline(always)]
            fn is_zero(&self) -> bool {
                <$t>::is_zero(self)
            }
            fn inverse(&self) -> Option<Self> {
                <$t>::inverse(self)
            }
        }
    };
}
base_field!(FpRepr);
base_field!(Fp2Repr);

/// Replaces every element of `v` (all nonzero) by its inverse with one field inversion and
/// 3 multiplications per element (Montgomery's trick); `prefix` is reusable scratch.
pub(crate) fn batch_invert<F: BaseField>(v: &mut [F], prefix: &mut Vec<F>) {
    if v.is_empty() {
        return;
    }
    prefix.clear();
    let mut acc = F::ONE;
    for x in v.iter() {
        prefix.push(acc);
        acc = acc.mul(x);
    }
    // Nonzero factors give a nonzero product in a field.
    let mut inv = acc
        .inverse()
        .expect("batch_invert is given nonzero elements only");
    for (x, before) in v.iter_mut().zip(prefix.iter()).rev() {
        let xi = inv.mul(before);
        inv = inv.mul(x);
        *x = xi;
    }
}

/// A curve whose points convert to and from `bls-repr` coordinates.
pub trait ReprCurve: Curve<Scalar = Scalar> {
    /// Coordinate field.
    type F: BaseField;
    /// The point `(x, y)`; both reduced (they come from field arithmetic).
    fn from_xy(x: Self::F, y: Self::F) -> Self;
}

impl ReprCurve for G1Projective {
    type F = FpRepr;
    fn from_xy(x: FpRepr, y: FpRepr) -> Self {
        G1AffineRepr { x, y }
            .to_affine_unchecked()
            .expect("bls-repr arithmetic keeps coordinates reduced")
            .to_curve_point()
    }
}

impl ReprCurve for G2Projective {
    type F = Fp2Repr;
    fn from_xy(x: Fp2Repr, y: Fp2Repr) -> Self {
        G2AffineRepr { x, y }
            .to_affine_unchecked()
            .expect("bls-repr arithmetic keeps coordinates reduced")
            .to_curve_point()
    }
}

/// Affine coordinates of a point of `G` in bls-repr's layout.
pub type Xy<G> = (<G as ReprCurve>::F, <G as ReprCurve>::F);

mod sealed {
    pub trait Sealed {}
    impl Sealed for bls12_381::G1Affine {}
    impl Sealed for bls12_381::G2Affine {}
    impl Sealed for bls_repr::G1AffineRepr {}
    impl Sealed for bls_repr::G2AffineRepr {}
}

/// A base point layout the CPU backend reads: `bls12_381`'s affine points, or
/// `bls-repr`'s Montgomery layout (what `srs-store` loads and the GPU reads), so a key
/// held in that layout is summed without a converted copy. Sealed: these four types.
pub trait MsmBase: sealed::Sealed + Copy + Send + Sync {
    /// The group the sum is in.
    type Curve: ReprCurve;
    /// Whether the point is usable as given (bls-repr: both coordinates reduced, which
    /// every point from this workspace's parsers is; `bls12_381` points always are).
    #[doc(hidden)]
    fn is_valid(&self) -> bool;
    /// `(x, y)` of a finite point in bls-repr's Montgomery layout; `None` at infinity.
    #[doc(hidden)]
    fn xy(&self) -> Option<Xy<Self::Curve>>;
    /// The point as a projective point (valid points only).
    #[doc(hidden)]
    fn to_curve(&self) -> Self::Curve;
    /// `acc += self` (a mixed addition; valid points only).
    #[doc(hidden)]
    fn add_to(&self, acc: &mut Self::Curve);
    /// `acc -= self`.
    #[doc(hidden)]
    fn sub_from(&self, acc: &mut Self::Curve);
}

macro_rules! affine_base {
    ($affine:ty, $proj:ty, $repr:ty) => {
        impl MsmBase for $affine {
            type Curve = $proj;
            #[inline]
            fn is_valid(&self) -> bool {
                true
            }
            #[inline]
            fn xy(&self) -> Option<Xy<$proj>> {
                let r = <$repr>::from_affine(self);
                (!r.is_identity()).then_some((r.x, r.y))
            }
            #[inline]
            fn to_curve(&self) -> $proj {
                CurveAffine::to_curve(self)
            }
            #[inline]
            fn add_to(&self, acc: &mut $proj) {
                *acc += self;
            }
            #[inline]
            fn sub_from(&self, acc: &mut $proj) {
                *acc -= self;
            }
        }
    };
}
affine_base!(G1Affine, G1Projective, G1AffineRepr);
affine_base!(G2Affine, G2Projective, G2AffineRepr);

macro_rules! repr_base {
    ($repr:ty, $affine:ty, $proj:ty) => {
        impl MsmBase for $repr {
            type Curve = $proj;
            #[inline]
            fn is_valid(&self) -> bool {
                self.is_reduced()
            }
            #[inline]
            fn xy(&self) -> Option<Xy<$proj>> {
                (!self.is_identity()).then_some((self.x, self.y))
            }
            #[inline]
            fn to_curve(&self) -> $proj {
                CurveAffine::to_curve(&self.affine())
            }
            #[inline]
            fn add_to(&self, acc: &mut $proj) {
                *acc += self.affine();
            }
            #[inline]
            fn sub_from(&self, acc: &mut $proj) {
                *acc -= self.affine();
            }
        }
    };
}
repr_base!(G1AffineRepr, G1Affine, G1Projective);
repr_base!(G2AffineRepr, G2Affine, G2Projective);

/// The `bls12_381` point of a reduced repr (the identity is all zero: the library's
/// identity). Callers check [`MsmBase::is_valid`] on every base first.
trait ReprAffine {
    type Affine;
    fn affine(&self) -> Self::Affine;
}
impl ReprAffine for G1AffineRepr {
    type Affine = G1Affine;
    #[inline]
    fn affine(&self) -> G1Affine {
        self.to_affine_unchecked()
            .expect("bases are checked to be reduced before the sum")
    }
}
impl ReprAffine for G2AffineRepr {
    type Affine = G2Affine;
    #[inline]
    fn affine(&self) -> G2Affine {
        self.to_affine_unchecked()
            .expect("bases are checked to be reduced before the sum")
    }
}

/// Additions per batch: enough to amortise the inversion (~600 multiplications), few
/// enough that two of them rarely hit one bucket.
pub(crate) fn affine_flush_at(n_buckets: usize) -> usize {
    (n_buckets / 4).clamp(1, 1024)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Slot {
    Empty,
    Filled,
    /// Filled, with an addition pending in the current batch.
    Busy,
}

#[derive(Clone, Copy)]
struct Pending<F> {
    slot: u32,
    x: F,
    y: F,
}

/// Affine buckets with batched additions.
///
/// A point for a bucket that already has an addition in the current batch goes into
/// that bucket's projective overflow (one mixed addition) instead of waiting: skewed
/// digit distributions (the top window, many equal scalars) then cost what projective
/// buckets cost, never a flush per point or a re-scan of waiting points.
pub(crate) struct AffineBuckets<G: ReprCurve> {
    x: Vec<G::F>,
    y: Vec<G::F>,
    state: Vec<Slot>,
    overflow: Vec<G>,
    overflow_used: Vec<bool>,
    batch: Vec<Pending<G::F>>,
    /// Scratch for the batch inversion: denominators, then prefix products.
    denom: Vec<G::F>,
    prefix: Vec<G::F>,
    flush_at: usize,
}

impl<G: ReprCurve> AffineBuckets<G> {
    /// Host bytes [`AffineBuckets::new`] allocates for `n_buckets` (all of it touched).
    pub(crate) fn bytes(n_buckets: usize) -> u64 {
        use std::mem::size_of;
        let per_bucket = 2 * size_of::<G::F>() + size_of::<Slot>() + size_of::<G>() + 1;
        let per_pending = size_of::<Pending<G::F>>() + 2 * size_of::<G::F>();
        (n_buckets * per_bucket + affine_flush_at(n_buckets) * per_pending) as u64
    }

    pub(crate) fn new(n_buckets: usize) -> Self {
        let flush_at = affine_flush_at(n_buckets);
        Self {
            x: vec![G::F::ZERO; n_buckets],
            y: vec![G::F::ZERO; n_buckets],
            state: vec![Slot::Empty; n_buckets],
            overflow: vec![G::identity(); n_buckets],
            overflow_used: vec![false; n_buckets],
            batch: Vec::with_capacity(flush_at),
            denom: Vec::with_capacity(flush_at),
            prefix: Vec::with_capacity(flush_at),
            flush_at,
        }
    }

    /// bucket[slot] += (x, y), where (x, y) is `base` (or `−base` when `negative`).
    #[inline]
    pub(crate) fn add<B: MsmBase<Curve = G>>(
        &mut self,
        slot: usize,
        x: G::F,
        y: G::F,
        base: &B,
        negative: bool,
    ) {
        match self.state[slot] {
            Slot::Empty => {
                self.x[slot] = x;
                self.y[slot] = y;
                self.state[slot] = Slot::Filled;
            }
            Slot::Filled => {
                self.state[slot] = Slot::Busy;
                self.batch.push(Pending {
                    slot: slot as u32,
                    x,
                    y,
                });
                if self.batch.len() >= self.flush_at {
                    self.run_batch();
                }
            }
            Slot::Busy => {
                if negative {
                    base.sub_from(&mut self.overflow[slot]);
                } else {
                    base.add_to(&mut self.overflow[slot]);
                }
                self.overflow_used[slot] = true;
            }
        }
    }

    fn run_batch(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        self.denom.clear();
        for p in &self.batch {
            let s = p.slot as usize;
            let dx = p.x.sub(&self.x[s]);
            self.denom.push(if !dx.is_zero() {
                dx
            } else if p.y == self.y[s] && !p.y.is_zero() {
                // Doubling: λ = 3x² / 2y.
                self.y[s].add(&self.y[s])
            } else {
                // P + (−P) (a point with y = 0, off the prime-order subgroup, is its
                // own negative): the bucket empties; any nonzero placeholder keeps
                // the batch inversion going.
                G::F::ONE
            });
        }
        // Denominators are nonzero by construction: one inversion for the whole batch.
        batch_invert(&mut self.denom, &mut self.prefix);
        for i in (0..self.batch.len()).rev() {
            let inv_i = self.denom[i];
            let p = self.batch[i];
            let s = p.slot as usize;
            let (x1, y1) = (self.x[s], self.y[s]);
            let dx = p.x.sub(&x1);
            let lambda = if !dx.is_zero() {
                p.y.sub(&y1).mul(&inv_i)
            } else if p.y == y1 && !y1.is_zero() {
                let xx = x1.square();
                xx.add(&xx).add(&xx).mul(&inv_i)
            } else {
                self.state[s] = Slot::Empty;
                continue;
            };
            let x3 = lambda.square().sub(&x1).sub(&p.x);
            let y3 = lambda.mul(&x1.sub(&x3)).sub(&y1);
            self.x[s] = x3;
            self.y[s] = y3;
            self.state[s] = Slot::Filled;
        }
        self.batch.clear();
    }

    /// Finishes all additions and returns Σ (k+1)·bucket[k] by running sums.
    pub(crate) fn reduce(mut self) -> G {
        self.run_batch();
        let mut running = G::identity();
        let mut acc = G::identity();
        let mut started = false;
        for k in (0..self.state.len()).rev() {
            if self.state[k] == Slot::Filled {
                running += G::from_xy(self.x[k], self.y[k]);
                started = true;
            }
            if self.overflow_used[k] {
                running += self.overflow[k];
                started = true;
            }
            if started {
                acc += running;
            }
        }
        acc
    }
}

/// Negation of a coordinate pair's y (a negative digit adds −P).
#[inline]
pub(crate) fn neg_y<F: BaseField>(y: &F) -> F {
    y.neg()
}
