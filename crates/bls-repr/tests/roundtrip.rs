//! Conversions to and from `bls12_381` types and canonical encodings, on random and
//! edge values.

mod common;

use bls12_381::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use bls_repr::{
    g1_from_uncompressed_slice, g1_to_uncompressed_slice, g2_from_uncompressed_slice,
    g2_to_uncompressed_slice, Fp2Repr, FpRepr, FrRepr, G1AffineRepr, G2AffineRepr, FP_MODULUS,
    FP_R, FR_MODULUS, FR_R,
};
use ff::{Field, PrimeField};
use rand::RngExt;

fn scalar_edges() -> Vec<Scalar> {
    vec![
        Scalar::ZERO,
        Scalar::ONE,
        -Scalar::ONE,
        Scalar::from(2u64),
        Scalar::from(u64::MAX),
        Scalar::ROOT_OF_UNITY,
    ]
}

#[test]
fn fr_scalar_round_trip_edges_and_random() {
    let mut rng = common::rng();
    let mut values = scalar_edges();
    values.extend((0..1000).map(|_| Scalar::random(&mut rng)));
    for s in values {
        let f = FrRepr::from_scalar(&s);
        assert!(f.is_reduced());
        assert_eq!(f.to_scalar(), Ok(s));
        // Canonical limbs agree with the library's canonical little-endian bytes.
        let limbs = f.to_canonical_limbs();
        let le: Vec<u8> = limbs.iter().flat_map(|l| l.to_le_bytes()).collect();
        assert_eq!(le, s.to_bytes().to_vec());
        assert_eq!(FrRepr::from_canonical_limbs(limbs), Ok(f));
        assert_eq!(f.to_le_bytes(), s.to_bytes());
        assert_eq!(FrRepr::from_le_bytes(&s.to_bytes()), Ok(f));
        assert_eq!(f.to_string(), format!("{s:?}"));
    }
}

#[test]
fn fr_edge_values_have_expected_montgomery_limbs() {
    assert_eq!(FrRepr::from_scalar(&Scalar::ZERO).limbs, [0; 4]);
    assert_eq!(FrRepr::from_scalar(&Scalar::ONE).limbs, FR_R);
    assert_eq!(FrRepr::from_scalar(&Scalar::ONE), FrRepr::ONE);
    let r1 = FrRepr::from_canonical_limbs(common::r_minus_1()).unwrap();
    assert_eq!(r1.to_scalar(), Ok(-Scalar::ONE));
    assert_eq!(r1, FrRepr::ONE.neg());
    assert_eq!(r1.to_canonical_limbs(), common::r_minus_1());
    // Scalar::MODULUS (a hex string) is our FR_MODULUS.
    let hex: String = FR_MODULUS
        .iter()
        .rev()
        .map(|l| format!("{l:016x}"))
        .collect();
    assert_eq!(Scalar::MODULUS.trim_start_matches("0x"), hex);
}

#[test]
fn fp_canonical_round_trip_edges_and_random() {
    let mut rng = common::rng();
    let mut values = vec![[0u64; 6], [1, 0, 0, 0, 0, 0], common::p_minus_1()];
    values.extend((0..1000).map(|_| common::random_fp_limbs(&mut rng)));
    for l in values {
        let f = FpRepr::from_canonical_limbs(l).unwrap();
        assert!(f.is_reduced());
        assert_eq!(f.to_canonical_limbs(), l);
        let be = common::limbs_to_be(&l);
        assert_eq!(f.to_be_bytes(), be);
        assert_eq!(FpRepr::from_be_bytes(&be), Ok(f));
        let hex: String = be.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(f.to_string(), format!("0x{hex}"));
    }
    assert_eq!(
        FpRepr::from_canonical_limbs([1, 0, 0, 0, 0, 0]),
        Ok(FpRepr::ONE)
    );
    assert_eq!(FpRepr::ONE.limbs, FP_R);
    assert_eq!(FpRepr::from_canonical_limbs([0; 6]), Ok(FpRepr::ZERO));
    assert_eq!(
        FpRepr::from_canonical_limbs(common::p_minus_1()),
        Ok(FpRepr::ONE.neg())
    );
}

#[test]
fn fp_modulus_is_the_library_modulus() {
    // bls12_381's own parser accepts a coordinate of p - 1 and rejects p: the
    // unchecked parse does no curve check, so only the range check decides.
    let g = G1Affine::generator().to_uncompressed();
    let mut enc = g;
    enc[..48].copy_from_slice(&common::limbs_to_be(&common::p_minus_1()));
    assert!(bool::from(
        G1Affine::from_uncompressed_unchecked(&enc).is_some()
    ));
    enc[..48].copy_from_slice(&common::limbs_to_be(&FP_MODULUS));
    assert!(bool::from(
        G1Affine::from_uncompressed_unchecked(&enc).is_none()
    ));
    assert!(G1AffineRepr::from_uncompressed(&enc).is_err());
}

#[test]
fn g1_round_trip_random_edges() {
    let mut rng = common::rng();
    let mut points = vec![
        G1Affine::identity(),
        G1Affine::generator(),
        -G1Affine::generator(),
    ];
    points.extend((0..64).map(|_| common::random_g1(&mut rng)));
    for p in points {
        let r = G1AffineRepr::from_affine(&p);
        assert!(r.is_reduced());
        assert_eq!(r.is_identity(), bool::from(p.is_identity()));
        assert!(r.is_on_curve());
        assert_eq!(r.to_affine(), Ok(p));
        assert_eq!(r.to_affine_unchecked(), Ok(p));
        let enc = p.to_uncompressed();
        assert_eq!(r.to_uncompressed(), enc);
        assert_eq!(G1AffineRepr::from_uncompressed(&enc), Ok(r));
        // Coordinates agree with the encoding's big-endian halves.
        if !r.is_identity() {
            assert_eq!(r.x.to_be_bytes()[..], enc[..48]);
            assert_eq!(r.y.to_be_bytes()[..], enc[48..]);
        }
    }
    assert_eq!(
        G1AffineRepr::from_affine(&G1Affine::identity()),
        G1AffineRepr::IDENTITY
    );
    assert_eq!(
        G1AffineRepr::generator().to_affine(),
        Ok(G1Affine::generator())
    );
}

#[test]
fn g2_round_trip_random_edges() {
    let mut rng = common::rng();
    let mut points = vec![
        G2Affine::identity(),
        G2Affine::generator(),
        -G2Affine::generator(),
    ];
    points.extend((0..32).map(|_| common::random_g2(&mut rng)));
    for p in points {
        let r = G2AffineRepr::from_affine(&p);
        assert!(r.is_reduced());
        assert_eq!(r.is_identity(), bool::from(p.is_identity()));
        assert!(r.is_on_curve());
        assert_eq!(r.to_affine(), Ok(p));
        assert_eq!(r.to_affine_unchecked(), Ok(p));
        let enc = p.to_uncompressed();
        assert_eq!(r.to_uncompressed(), enc);
        assert_eq!(G2AffineRepr::from_uncompressed(&enc), Ok(r));
        if !r.is_identity() {
            // The encoding puts c1 before c0.
            assert_eq!(r.x.c1.to_be_bytes()[..], enc[..48]);
            assert_eq!(r.x.c0.to_be_bytes()[..], enc[48..96]);
            let mut xb = [0u8; 96];
            xb.copy_from_slice(&enc[..96]);
            assert_eq!(Fp2Repr::from_be_bytes(&xb), Ok(r.x));
            assert_eq!(r.x.to_be_bytes(), xb);
        }
    }
    assert_eq!(
        G2AffineRepr::from_affine(&G2Affine::identity()),
        G2AffineRepr::IDENTITY
    );
}

#[test]
fn slices_round_trip() {
    let mut rng = common::rng();
    let n = 20;
    let g1: Vec<G1Affine> = (0..n)
        .map(|i| {
            if i == 7 {
                G1Affine::identity()
            } else {
                common::random_g1(&mut rng)
            }
        })
        .collect();
    let bytes: Vec<u8> = g1.iter().flat_map(|p| p.to_uncompressed()).collect();
    let mut out = vec![G1AffineRepr::default(); n];
    assert_eq!(g1_from_uncompressed_slice(&bytes, &mut out), Ok(()));
    for (r, p) in out.iter().zip(&g1) {
        assert_eq!(r.to_affine(), Ok(*p));
    }
    let mut written = vec![0u8; bytes.len()];
    assert_eq!(g1_to_uncompressed_slice(&out, &mut written), Ok(()));
    assert_eq!(written, bytes);

    let g2: Vec<G2Affine> = (0..6)
        .map(|i| {
            if i == 0 {
                G2Affine::identity()
            } else {
                common::random_g2(&mut rng)
            }
        })
        .collect();
    let bytes: Vec<u8> = g2.iter().flat_map(|p| p.to_uncompressed()).collect();
    let mut out = vec![G2AffineRepr::default(); g2.len()];
    assert_eq!(g2_from_uncompressed_slice(&bytes, &mut out), Ok(()));
    for (r, p) in out.iter().zip(&g2) {
        assert_eq!(r.to_affine(), Ok(*p));
    }
    let mut written = vec![0u8; bytes.len()];
    assert_eq!(g2_to_uncompressed_slice(&out, &mut written), Ok(()));
    assert_eq!(written, bytes);

    // Empty slices are fine.
    assert_eq!(g1_from_uncompressed_slice(&[], &mut []), Ok(()));
}

#[test]
fn parser_agrees_with_library_on_mutated_encodings() {
    // Differential check: flip random bits in valid encodings; our parser accepts
    // exactly when bls12_381's unchecked parser does (except (0, 0), which we reject by
    // design) and then yields the same point.
    let mut rng = common::rng();
    let base: Vec<[u8; 96]> = (0..8)
        .map(|_| common::random_g1(&mut rng).to_uncompressed())
        .chain([G1Affine::identity().to_uncompressed(), [0u8; 96]])
        .collect();
    let mut n_ok = 0;
    let mut n_err = 0;
    for _ in 0..common::iterations(4000, 1_000_000) {
        let mut enc = base[rng.random_range(0..base.len())];
        for _ in 0..rng.random_range(0..3) {
            // Mostly the first bytes, where flags and range checks live.
            let i = if rng.random::<bool>() {
                rng.random_range(0..2)
            } else {
                rng.random_range(0..96)
            };
            enc[i] ^= 1 << rng.random_range(0..8);
        }
        let ours = G1AffineRepr::from_uncompressed(&enc);
        let theirs: Option<G1Affine> = G1Affine::from_uncompressed_unchecked(&enc).into();
        let zero_coords = enc.iter().all(|b| *b == 0);
        match (ours, theirs) {
            (Ok(r), Some(p)) => {
                n_ok += 1;
                assert_eq!(r.to_affine_unchecked(), Ok(p));
            }
            (Err(_), None) => n_err += 1,
            (Err(e), Some(_)) if zero_coords => {
                n_err += 1;
                assert!(matches!(
                    e,
                    bls_repr::ReprError::ZeroWithoutInfinityFlag { .. }
                ));
            }
            (o, t) => panic!("disagree on {enc:02x?}: ours {o:?}, library {t:?}"),
        }
    }
    assert!(n_ok > 100 && n_err > 100, "ok {n_ok}, err {n_err}");
}

#[test]
fn g2_parser_agrees_with_library_on_mutated_encodings() {
    let mut rng = common::rng();
    let base: Vec<[u8; 192]> = (0..4)
        .map(|_| common::random_g2(&mut rng).to_uncompressed())
        .chain([G2Affine::identity().to_uncompressed()])
        .collect();
    for _ in 0..common::iterations(2000, 500_000) {
        let mut enc = base[rng.random_range(0..base.len())];
        // Flip a bit in the top bytes of one of the four coordinates.
        let coord = rng.random_range(0..4) * 48;
        let i = coord + rng.random_range(0..2);
        enc[i] ^= 1 << rng.random_range(0..8);
        let ours = G2AffineRepr::from_uncompressed(&enc);
        let theirs: Option<G2Affine> = G2Affine::from_uncompressed_unchecked(&enc).into();
        let zero_coords = enc.iter().all(|b| *b == 0);
        match (ours, theirs) {
            (Ok(r), Some(p)) => assert_eq!(r.to_affine_unchecked(), Ok(p)),
            (Err(_), None) => {}
            (Err(e), Some(_)) if zero_coords => {
                assert!(matches!(
                    e,
                    bls_repr::ReprError::ZeroWithoutInfinityFlag { .. }
                ));
            }
            (o, t) => panic!("disagree on {enc:02x?}: ours {o:?}, library {t:?}"),
        }
    }
}

#[test]
fn generator_multiples_round_trip_through_projective() {
    // Small multiples hit low-entropy coordinates (e.g. 2G, 3G).
    let mut acc = G1Projective::identity();
    let mut acc2 = G2Projective::identity();
    for _ in 0..16 {
        let a = G1Affine::from(acc);
        assert_eq!(G1AffineRepr::from_affine(&a).to_affine(), Ok(a));
        let b = G2Affine::from(acc2);
        assert_eq!(G2AffineRepr::from_affine(&b).to_affine(), Ok(b));
        acc += G1Projective::generator();
        acc2 += G2Projective::generator();
    }
}
