//! Host arithmetic checked against `bls12_381`: Fr directly against `Scalar`, Fp and
//! Fp2 through the affine addition and doubling formulas on G1 and G2 points (the
//! library's group law is the oracle; `bls12_381` does not expose Fp).

mod common;

use bls12_381::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use bls_repr::{Fp2Repr, FpRepr, FrRepr, G1AffineRepr, G2AffineRepr, FP_MODULUS, FR_MODULUS};
use ff::Field;
use rand::RngExt;

#[test]
fn fr_ops_match_scalar() {
    let mut rng = common::rng();
    let mut values: Vec<Scalar> = vec![Scalar::ZERO, Scalar::ONE, -Scalar::ONE];
    values.extend((0..common::iterations(500, 100_000)).map(|_| Scalar::random(&mut rng)));
    for (i, a) in values.iter().enumerate() {
        let b = values[(i * 7 + 3) % values.len()];
        let (fa, fb) = (FrRepr::from_scalar(a), FrRepr::from_scalar(&b));
        let check = |name: &str, got: FrRepr, want: Scalar| {
            assert_eq!(got.to_scalar(), Ok(want), "{name}({a:?}, {b:?})");
        };
        check("add", fa.add(&fb), a + b);
        check("sub", fa.sub(&fb), a - b);
        check("mul", fa.mul(&fb), a * b);
        check("neg", fa.neg(), -a);
        check("double", fa.double(), a.double());
        check("square", fa.square(), a.square());
        check("op+", fa + fb, a + b);
        // Exercises the by-reference operator impls on purpose.
        #[allow(clippy::op_ref)]
        let by_ref = (&fa - &fb, &fa * &fb, &fa + &fb, -&fa);
        check("op-ref", by_ref.0, a - b);
        check("op*ref", by_ref.1, a * b);
        check("op+ref", by_ref.2, a + b);
        check("op-neg-ref", by_ref.3, -a);
        check("op*", fa * fb, a * b);
        check("op-neg", -fa, -a);
        let mut acc = fa;
        acc *= fb;
        acc += fa;
        acc -= fb;
        check("assign ops", acc, a * b + a - b);
        match Option::<Scalar>::from(a.invert()) {
            Some(inv) => check("inverse", fa.inverse().unwrap(), inv),
            None => assert_eq!(fa.inverse(), None),
        }
    }
}

#[test]
fn fr_pow_and_from_u64_match_scalar() {
    let mut rng = common::rng();
    for _ in 0..50 {
        let (s, f) = common::random_fr(&mut rng);
        let e: [u64; 4] = [
            rng.random(),
            rng.random(),
            rng.random(),
            rng.random::<u64>() >> 2,
        ];
        assert_eq!(f.pow(&e).to_scalar(), Ok(s.pow_vartime(&e)));
        let v: u64 = rng.random();
        assert_eq!(FrRepr::from_u64(v).to_scalar(), Ok(Scalar::from(v)));
    }
    assert_eq!(FrRepr::from_u64(0), FrRepr::ZERO);
    assert_eq!(FrRepr::from_u64(1), FrRepr::ONE);
    // Scalar::ROOT_OF_UNITY has order 2^32.
    let w = FrRepr::from_scalar(&<Scalar as ff::PrimeField>::ROOT_OF_UNITY);
    assert_eq!(w.pow(&[1 << 32]), FrRepr::ONE);
    assert_ne!(w.pow(&[1 << 31]), FrRepr::ONE);
    // x^(r-1) = 1 for x != 0 (Fermat).
    let mut r1 = FR_MODULUS;
    r1[0] -= 1;
    let (_, f) = common::random_fr(&mut rng);
    assert_eq!(f.pow(&r1), FrRepr::ONE);
}

/// Affine addition of distinct, non-opposite points with our Fp arithmetic.
fn add_affine_fp(p: &G1AffineRepr, q: &G1AffineRepr) -> G1AffineRepr {
    let lambda = q.y.sub(&p.y).mul(&q.x.sub(&p.x).inverse().unwrap());
    let x3 = lambda.square().sub(&p.x).sub(&q.x);
    let y3 = lambda.mul(&p.x.sub(&x3)).sub(&p.y);
    G1AffineRepr { x: x3, y: y3 }
}

/// Affine doubling with our Fp arithmetic (different operations: square, double, 3x^2).
fn double_affine_fp(p: &G1AffineRepr) -> G1AffineRepr {
    let xx = p.x.square();
    let num = xx.double().add(&xx);
    let lambda = num * p.y.double().inverse().unwrap();
    let x3 = lambda.square() - p.x.double();
    let y3 = lambda * (p.x - x3) + p.y.neg();
    G1AffineRepr { x: x3, y: y3 }
}

#[test]
fn fp_arithmetic_reproduces_g1_group_law() {
    let mut rng = common::rng();
    for _ in 0..common::iterations(100, 10_000) {
        let (a, b) = (common::random_g1(&mut rng), common::random_g1(&mut rng));
        let (ra, rb) = (G1AffineRepr::from_affine(&a), G1AffineRepr::from_affine(&b));
        let sum = G1Affine::from(G1Projective::from(a) + b);
        assert_eq!(add_affine_fp(&ra, &rb), G1AffineRepr::from_affine(&sum));
        let dbl = G1Affine::from(G1Projective::from(a).double());
        assert_eq!(double_affine_fp(&ra), G1AffineRepr::from_affine(&dbl));
        assert_eq!(ra.neg(), G1AffineRepr::from_affine(&-a));
    }
    // Small multiples of the generator, with low-entropy coordinates.
    let g = G1AffineRepr::generator();
    let mut acc = double_affine_fp(&g);
    for k in 3u64..40 {
        acc = add_affine_fp(&acc, &g);
        let want = G1Affine::from(G1Projective::generator() * Scalar::from(k));
        assert_eq!(acc, G1AffineRepr::from_affine(&want), "{k}·G");
    }
}

/// Affine addition on G2 with our Fp2 arithmetic.
fn add_affine_fp2(p: &G2AffineRepr, q: &G2AffineRepr) -> G2AffineRepr {
    let lambda = q.y.sub(&p.y).mul(&q.x.sub(&p.x).inverse().unwrap());
    let x3 = lambda.square().sub(&p.x).sub(&q.x);
    let y3 = lambda.mul(&p.x.sub(&x3)).sub(&p.y);
    G2AffineRepr { x: x3, y: y3 }
}

/// Affine doubling on G2 with our Fp2 arithmetic.
fn double_affine_fp2(p: &G2AffineRepr) -> G2AffineRepr {
    let xx = p.x.square();
    let num = xx.double() + xx;
    let lambda = num * p.y.double().inverse().unwrap();
    let x3 = lambda.square() - p.x.double();
    let y3 = lambda * (p.x - x3) - p.y;
    G2AffineRepr { x: x3, y: y3 }
}

#[test]
fn fp2_arithmetic_reproduces_g2_group_law() {
    let mut rng = common::rng();
    for _ in 0..common::iterations(40, 4_000) {
        let (a, b) = (common::random_g2(&mut rng), common::random_g2(&mut rng));
        let (ra, rb) = (G2AffineRepr::from_affine(&a), G2AffineRepr::from_affine(&b));
        let sum = G2Affine::from(G2Projective::from(a) + b);
        assert_eq!(add_affine_fp2(&ra, &rb), G2AffineRepr::from_affine(&sum));
        let dbl = G2Affine::from(G2Projective::from(a).double());
        assert_eq!(double_affine_fp2(&ra), G2AffineRepr::from_affine(&dbl));
        assert_eq!(ra.neg(), G2AffineRepr::from_affine(&-a));
    }
}

#[test]
fn fp_field_axioms_on_random_values() {
    let mut rng = common::rng();
    let one = FpRepr::ONE;
    let mut p_minus_1 = FP_MODULUS;
    p_minus_1[0] -= 1;
    let edges = [
        FpRepr::ZERO,
        FpRepr::ONE,
        FpRepr::from_canonical_limbs(p_minus_1).unwrap(),
    ];
    let values: Vec<FpRepr> = edges
        .iter()
        .copied()
        .chain((0..common::iterations(500, 100_000)).map(|_| common::random_fp(&mut rng)))
        .collect();
    for (i, a) in values.iter().enumerate() {
        let b = values[(i * 13 + 5) % values.len()];
        let c = values[(i * 31 + 1) % values.len()];
        for v in [a.add(&b), a.sub(&b), a.mul(&b), a.neg(), a.square()] {
            assert!(v.is_reduced());
        }
        assert_eq!(a.add(&b).sub(&b), *a);
        assert_eq!(a.add(&a.neg()), FpRepr::ZERO);
        assert_eq!(a.mul(&b), b.mul(a));
        assert_eq!(a.mul(&b.add(&c)), a.mul(&b).add(&a.mul(&c)));
        assert_eq!(a.mul(&b).mul(&c), a.mul(&b.mul(&c)));
        assert_eq!(a.mul(&one), *a);
        assert_eq!(a.square(), a.mul(a));
        assert_eq!(a.double(), a.add(a));
        match a.inverse() {
            Some(inv) => assert_eq!(a.mul(&inv), one),
            None => assert!(a.is_zero()),
        }
        // Canonical (a·b) for small factors is the integer product.
        let (x, y): (u64, u64) = (rng.random(), rng.random());
        let prod = (x as u128) * (y as u128);
        let want = FpRepr::from_canonical_limbs([prod as u64, (prod >> 64) as u64, 0, 0, 0, 0]);
        assert_eq!(Ok(FpRepr::from_u64(x).mul(&FpRepr::from_u64(y))), want);
        let sum = (x as u128) + (y as u128);
        let want = FpRepr::from_canonical_limbs([sum as u64, (sum >> 64) as u64, 0, 0, 0, 0]);
        assert_eq!(Ok(FpRepr::from_u64(x).add(&FpRepr::from_u64(y))), want);
    }
    // (p - 1)^2 = 1 and (p - 1) + 1 = 0: wrap-around at the top of the range.
    assert_eq!(edges[2].square(), one);
    assert_eq!(edges[2].add(&one), FpRepr::ZERO);
    assert_eq!(FpRepr::ZERO.sub(&one), edges[2]);
    assert_eq!(FpRepr::ZERO.neg(), FpRepr::ZERO);
}

#[test]
fn fp_pow_fermat_and_sqrt() {
    let mut rng = common::rng();
    let mut p_minus_1 = FP_MODULUS;
    p_minus_1[0] -= 1;
    // (p + 1) / 4: p = 3 mod 4, so a^((p+1)/4) is a square root of a square a.
    let mut e = FP_MODULUS;
    e[0] += 1;
    for i in 0..6 {
        e[i] = (e[i] >> 2) | if i < 5 { e[i + 1] << 62 } else { 0 };
    }
    for _ in 0..20 {
        let a = common::random_fp(&mut rng);
        assert_eq!(a.pow(&p_minus_1), FpRepr::ONE);
        let sq = a.square();
        let root = sq.pow(&e);
        assert!(root == a || root == a.neg());
    }
}

#[test]
fn fp2_field_axioms_on_random_values() {
    let mut rng = common::rng();
    let u = Fp2Repr::new(FpRepr::ZERO, FpRepr::ONE);
    assert_eq!(u.square(), Fp2Repr::ONE.neg());
    for _ in 0..200 {
        let a = Fp2Repr::new(common::random_fp(&mut rng), common::random_fp(&mut rng));
        let b = Fp2Repr::new(common::random_fp(&mut rng), common::random_fp(&mut rng));
        let c = Fp2Repr::new(common::random_fp(&mut rng), FpRepr::ZERO);
        assert_eq!(a.mul(&b), b.mul(&a));
        assert_eq!(a.square(), a.mul(&a));
        assert_eq!(a.mul(&b.add(&c)), a.mul(&b).add(&a.mul(&c)));
        assert_eq!(a.mul(&c), a.mul_by_fp(&c.c0));
        assert_eq!(a.mul_by_nonresidue(), a.mul(&Fp2Repr::ONE.add(&u)));
        assert_eq!(a.mul(&a.conjugate()).c1, FpRepr::ZERO);
        assert_eq!(a.mul(&a.inverse().unwrap()), Fp2Repr::ONE);
        assert_eq!(a.sub(&b).add(&b), a);
        assert_eq!(a.double(), a.add(&a));
    }
    assert_eq!(Fp2Repr::ZERO.inverse(), None);
    assert_eq!(Fp2Repr::from_u64(7).c0, FpRepr::from_u64(7));
}

#[test]
fn on_curve_checks_agree_with_library() {
    let mut rng = common::rng();
    for _ in 0..50 {
        let p = G1AffineRepr::from_affine(&common::random_g1(&mut rng));
        assert!(p.is_on_curve());
        let mut bad = p;
        bad.y = bad.y.add(&FpRepr::ONE);
        assert!(!bad.is_on_curve());
        let lib = bad.to_affine_unchecked().unwrap();
        assert!(!bool::from(lib.is_on_curve()));
    }
    for _ in 0..20 {
        let p = G2AffineRepr::from_affine(&common::random_g2(&mut rng));
        assert!(p.is_on_curve());
        let mut bad = p;
        bad.x.c1 = bad.x.c1.add(&FpRepr::ONE);
        assert!(!bad.is_on_curve());
        let lib = bad.to_affine_unchecked().unwrap();
        assert!(!bool::from(lib.is_on_curve()));
    }
    assert!(G1AffineRepr::IDENTITY.is_on_curve());
    assert!(G2AffineRepr::IDENTITY.is_on_curve());
    // Unreduced coordinates are never "on the curve".
    let mut unreduced = G1AffineRepr::generator();
    unreduced.x.limbs = FP_MODULUS;
    assert!(!unreduced.is_on_curve());
}
