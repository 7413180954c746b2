//! Every `ReprError` case: the right variant with the found value, and a readable
//! message. Parse cases go through one `check` helper per group.

mod common;

use bls12_381::{G1Affine, G2Affine};
use bls_repr::{
    g1_from_uncompressed_slice, g1_to_uncompressed_slice, g2_from_uncompressed_slice,
    g2_to_uncompressed_slice, Coordinate, Fp2Repr, FpRepr, FrRepr, G1AffineRepr, G2AffineRepr,
    Group, ReprError, FP_MODULUS, FR_MODULUS,
};

fn check_g1(enc: &[u8; 96], expected: ReprError) {
    assert_eq!(G1AffineRepr::from_uncompressed(enc), Err(expected.clone()));
    let mut out = [G1AffineRepr::default(); 1];
    assert_eq!(
        g1_from_uncompressed_slice(enc, &mut out),
        Err((0, expected))
    );
}

fn check_g2(enc: &[u8; 192], expected: ReprError) {
    assert_eq!(G2AffineRepr::from_uncompressed(enc), Err(expected.clone()));
    let mut out = [G2AffineRepr::default(); 1];
    assert_eq!(
        g2_from_uncompressed_slice(enc, &mut out),
        Err((0, expected))
    );
}

/// The canonical value below 2^384 that the 48 bytes at `off` hold, flag bits removed.
fn be_value(enc: &[u8], off: usize) -> [u64; 6] {
    let mut b = [0u8; 48];
    b.copy_from_slice(&enc[off..off + 48]);
    if off == 0 {
        b[0] &= 0x1f;
    }
    std::array::from_fn(|i| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[40 - 8 * i..48 - 8 * i]);
        u64::from_be_bytes(w)
    })
}

#[test]
fn g1_flag_errors() {
    let g = G1Affine::generator().to_uncompressed();
    let inf = G1Affine::identity().to_uncompressed();
    assert_eq!(inf[0], 0x40);
    let mut e = g;
    e[0] |= 0x80;
    check_g1(
        &e,
        ReprError::CompressedFlag {
            group: Group::G1,
            first_byte: e[0],
        },
    );
    // A compressed infinity (0xc0) is still reported as compressed.
    let mut e = inf;
    e[0] = 0xc0;
    check_g1(
        &e,
        ReprError::CompressedFlag {
            group: Group::G1,
            first_byte: 0xc0,
        },
    );
    // The library's compressed encoding of the generator.
    let c = G1Affine::generator().to_compressed();
    let mut e = [0u8; 96];
    e[..48].copy_from_slice(&c);
    check_g1(
        &e,
        ReprError::CompressedFlag {
            group: Group::G1,
            first_byte: c[0],
        },
    );
    let mut e = g;
    e[0] |= 0x20;
    check_g1(
        &e,
        ReprError::SortFlag {
            group: Group::G1,
            first_byte: e[0],
        },
    );
    let mut e = inf;
    e[0] = 0x60;
    check_g1(
        &e,
        ReprError::SortFlag {
            group: Group::G1,
            first_byte: 0x60,
        },
    );
}

#[test]
fn g1_infinity_payload_errors() {
    let inf = G1Affine::identity().to_uncompressed();
    let mut e = inf;
    e[0] = 0x41;
    check_g1(
        &e,
        ReprError::InfinityWithPayload {
            group: Group::G1,
            offset: 0,
            byte: 0x01,
        },
    );
    for (offset, byte) in [(1, 0x80), (47, 0x01), (48, 0xff), (95, 0x02)] {
        let mut e = inf;
        e[offset] = byte;
        check_g1(
            &e,
            ReprError::InfinityWithPayload {
                group: Group::G1,
                offset,
                byte,
            },
        );
    }
    // Infinity flag on top of a real point's coordinates.
    let mut e = G1Affine::generator().to_uncompressed();
    e[0] |= 0x40;
    let first = e
        .iter()
        .enumerate()
        .skip(1)
        .find(|(_, b)| **b != 0)
        .unwrap();
    let expected = if e[0] & 0x1f != 0 {
        ReprError::InfinityWithPayload {
            group: Group::G1,
            offset: 0,
            byte: e[0] & 0x1f,
        }
    } else {
        ReprError::InfinityWithPayload {
            group: Group::G1,
            offset: first.0,
            byte: *first.1,
        }
    };
    check_g1(&e, expected);
}

#[test]
fn g1_range_and_zero_errors() {
    let g = G1Affine::generator().to_uncompressed();
    let p_be = common::limbs_to_be(&FP_MODULUS);
    let mut e = g;
    e[..48].copy_from_slice(&p_be);
    check_g1(
        &e,
        ReprError::FpNotCanonical {
            coordinate: Coordinate::X,
            found: FP_MODULUS,
        },
    );
    // The largest value that fits beside the flag bits: 2^381 - 1.
    let mut e = g;
    e[0] = 0x1f;
    e[1..48].fill(0xff);
    check_g1(
        &e,
        ReprError::FpNotCanonical {
            coordinate: Coordinate::X,
            found: be_value(&e, 0),
        },
    );
    let mut e = g;
    e[48..].copy_from_slice(&p_be);
    check_g1(
        &e,
        ReprError::FpNotCanonical {
            coordinate: Coordinate::Y,
            found: FP_MODULUS,
        },
    );
    let mut e = g;
    e[48..].fill(0xff);
    check_g1(
        &e,
        ReprError::FpNotCanonical {
            coordinate: Coordinate::Y,
            found: [u64::MAX; 6],
        },
    );
    check_g1(
        &[0u8; 96],
        ReprError::ZeroWithoutInfinityFlag { group: Group::G1 },
    );
    // x = p - 1 is in range (no curve check in the parser).
    let mut e = g;
    e[..48].copy_from_slice(&common::limbs_to_be(&common::p_minus_1()));
    let r = G1AffineRepr::from_uncompressed(&e).unwrap();
    assert!(!r.is_on_curve());
    assert_eq!(
        r.to_affine(),
        Err(ReprError::NotOnCurve { group: Group::G1 })
    );
}

#[test]
fn g2_errors_name_the_coordinate() {
    let g = G2Affine::generator().to_uncompressed();
    let p_be = common::limbs_to_be(&FP_MODULUS);
    for (off, coordinate) in [
        (0, Coordinate::XC1),
        (48, Coordinate::XC0),
        (96, Coordinate::YC1),
        (144, Coordinate::YC0),
    ] {
        let mut e = g;
        e[off..off + 48].copy_from_slice(&p_be);
        check_g2(
            &e,
            ReprError::FpNotCanonical {
                coordinate,
                found: FP_MODULUS,
            },
        );
    }
    let mut e = g;
    e[0] |= 0x80;
    check_g2(
        &e,
        ReprError::CompressedFlag {
            group: Group::G2,
            first_byte: e[0],
        },
    );
    let mut e = g;
    e[0] |= 0x20;
    check_g2(
        &e,
        ReprError::SortFlag {
            group: Group::G2,
            first_byte: e[0],
        },
    );
    let mut e = G2Affine::identity().to_uncompressed();
    e[191] = 0x07;
    check_g2(
        &e,
        ReprError::InfinityWithPayload {
            group: Group::G2,
            offset: 191,
            byte: 0x07,
        },
    );
    check_g2(
        &[0u8; 192],
        ReprError::ZeroWithoutInfinityFlag { group: Group::G2 },
    );
    let mut e = [0u8; 96];
    e[48..].copy_from_slice(&p_be);
    assert_eq!(
        Fp2Repr::from_be_bytes(&e),
        Err(ReprError::FpNotCanonical {
            coordinate: Coordinate::C0,
            found: FP_MODULUS
        })
    );
    e[..48].copy_from_slice(&p_be);
    assert_eq!(
        Fp2Repr::from_be_bytes(&e),
        Err(ReprError::FpNotCanonical {
            coordinate: Coordinate::C1,
            found: FP_MODULUS
        })
    );
}

#[test]
fn slice_errors_report_index_and_lengths() {
    let mut rng = common::rng();
    let points: Vec<G1Affine> = (0..6).map(|_| common::random_g1(&mut rng)).collect();
    let mut bytes: Vec<u8> = points.iter().flat_map(|p| p.to_uncompressed()).collect();
    bytes[3 * 96] |= 0x80;
    let mut out = vec![G1AffineRepr::default(); 6];
    let first_byte = bytes[3 * 96];
    assert_eq!(
        g1_from_uncompressed_slice(&bytes, &mut out),
        Err((
            3,
            ReprError::CompressedFlag {
                group: Group::G1,
                first_byte
            }
        ))
    );
    // Points before the failure were written.
    for i in 0..3 {
        assert_eq!(out[i].to_affine(), Ok(points[i]));
    }
    // Length mismatches: one byte short, one point too many.
    let mut out = vec![G1AffineRepr::default(); 6];
    assert_eq!(
        g1_from_uncompressed_slice(&bytes[..6 * 96 - 1], &mut out),
        Err((
            5,
            ReprError::SliceLength {
                group: Group::G1,
                n_points: 6,
                expected_bytes: 576,
                found_bytes: 575
            }
        ))
    );
    let mut out = vec![G1AffineRepr::default(); 5];
    assert_eq!(
        g1_from_uncompressed_slice(&bytes, &mut out),
        Err((
            5,
            ReprError::SliceLength {
                group: Group::G1,
                n_points: 5,
                expected_bytes: 480,
                found_bytes: 576
            }
        ))
    );
    let mut out = vec![G2AffineRepr::default(); 2];
    assert_eq!(
        g2_from_uncompressed_slice(&[0u8; 100], &mut out),
        Err((
            0,
            ReprError::SliceLength {
                group: Group::G2,
                n_points: 2,
                expected_bytes: 384,
                found_bytes: 100
            }
        ))
    );
    let mut small = vec![0u8; 95];
    assert_eq!(
        g1_to_uncompressed_slice(&[G1AffineRepr::generator()], &mut small),
        Err(ReprError::SliceLength {
            group: Group::G1,
            n_points: 1,
            expected_bytes: 96,
            found_bytes: 95
        })
    );
    assert!(g2_to_uncompressed_slice(&[G2AffineRepr::generator()], &mut small).is_err());
}

#[test]
fn scalar_range_and_reduction_errors() {
    assert_eq!(
        FrRepr::from_canonical_limbs(FR_MODULUS),
        Err(ReprError::FrNotCanonical { found: FR_MODULUS })
    );
    assert_eq!(
        FrRepr::from_canonical_limbs([u64::MAX; 4]),
        Err(ReprError::FrNotCanonical {
            found: [u64::MAX; 4]
        })
    );
    let mut le = [0u8; 32];
    for (i, l) in FR_MODULUS.iter().enumerate() {
        le[8 * i..8 * i + 8].copy_from_slice(&l.to_le_bytes());
    }
    assert_eq!(
        FrRepr::from_le_bytes(&le),
        Err(ReprError::FrNotCanonical { found: FR_MODULUS })
    );
    let unreduced = FrRepr { limbs: FR_MODULUS };
    assert!(!unreduced.is_reduced());
    assert_eq!(
        unreduced.to_scalar(),
        Err(ReprError::FrNotReduced { limbs: FR_MODULUS })
    );
    assert_eq!(
        FrRepr::from_montgomery_limbs(FR_MODULUS),
        Err(ReprError::FrNotReduced { limbs: FR_MODULUS })
    );
    assert_eq!(
        FrRepr::from_montgomery_limbs(FrRepr::ONE.limbs),
        Ok(FrRepr::ONE)
    );
}

#[test]
fn fp_range_and_reduction_errors() {
    assert_eq!(
        FpRepr::from_be_bytes(&common::limbs_to_be(&FP_MODULUS)),
        Err(ReprError::FpNotCanonical {
            coordinate: Coordinate::Element,
            found: FP_MODULUS
        })
    );
    assert_eq!(
        FpRepr::from_be_bytes(&[0xff; 48]),
        Err(ReprError::FpNotCanonical {
            coordinate: Coordinate::Element,
            found: [u64::MAX; 6]
        })
    );
    assert_eq!(
        FpRepr::from_montgomery_limbs(FP_MODULUS),
        Err(ReprError::FpNotReduced {
            coordinate: Coordinate::Element,
            limbs: FP_MODULUS
        })
    );
    let mut g = G1AffineRepr::generator();
    g.y.limbs = [u64::MAX; 6];
    assert_eq!(
        g.to_affine(),
        Err(ReprError::FpNotReduced {
            coordinate: Coordinate::Y,
            limbs: [u64::MAX; 6]
        })
    );
    let mut g2 = G2AffineRepr::generator();
    g2.x.c1.limbs = FP_MODULUS;
    assert_eq!(
        g2.to_affine_unchecked(),
        Err(ReprError::FpNotReduced {
            coordinate: Coordinate::XC1,
            limbs: FP_MODULUS
        })
    );
}

#[test]
fn curve_and_subgroup_errors() {
    let mut rng = common::rng();
    // Off the curve.
    let mut g = G1AffineRepr::generator();
    g.y = g.y.add(&FpRepr::ONE);
    assert_eq!(
        g.to_affine(),
        Err(ReprError::NotOnCurve { group: Group::G1 })
    );
    assert!(g.to_affine_unchecked().is_ok());
    let mut g2 = G2AffineRepr::generator();
    g2.y.c0 = g2.y.c0.add(&FpRepr::ONE);
    assert_eq!(
        g2.to_affine(),
        Err(ReprError::NotOnCurve { group: Group::G2 })
    );
    // On the curve but outside the subgroup: a random x with x^3 + 4 a square
    // (p = 3 mod 4, so the root is a power); the cofactor makes a subgroup hit negligible.
    let mut e = FP_MODULUS;
    e[0] += 1;
    for i in 0..6 {
        e[i] = (e[i] >> 2) | if i < 5 { e[i + 1] << 62 } else { 0 };
    }
    let point = loop {
        let x = common::random_fp(&mut rng);
        let rhs = x.square().mul(&x).add(&bls_repr::G1_CURVE_B);
        let y = rhs.pow(&e);
        if y.square() == rhs {
            break G1AffineRepr { x, y };
        }
    };
    assert!(point.is_on_curve());
    assert_eq!(
        point.to_affine(),
        Err(ReprError::NotInSubgroup { group: Group::G1 })
    );
    // The parser accepts it (no subgroup check), and so does the library's unchecked one.
    let enc = point.to_uncompressed();
    assert_eq!(G1AffineRepr::from_uncompressed(&enc), Ok(point));
    assert!(bool::from(G1Affine::from_uncompressed(&enc).is_none()));
}

#[test]
fn messages_are_lowercase_with_context() {
    let cases: Vec<(ReprError, &str)> = vec![
        (
            ReprError::FpNotCanonical { coordinate: Coordinate::XC1, found: FP_MODULUS },
            "x.c1: value 0x1a0111ea397fe69a4b1ba7b6434bacd764774b84f38512bf6730d2a0f6b0f6241eabfffeb153ffffb9feffffffffaaab is not below",
        ),
        (ReprError::FrNotCanonical { found: FR_MODULUS }, "scalar value 0x73eda753"),
        (ReprError::FpNotReduced { coordinate: Coordinate::Y, limbs: [0; 6] }, "y: montgomery limbs 0x000"),
        (ReprError::FrNotReduced { limbs: [1, 0, 0, 0] }, "0x0000000000000000000000000000000000000000000000000000000000000001"),
        (ReprError::CompressedFlag { group: Group::G1, first_byte: 0x97 }, "g1 point: compression flag set (first byte 0x97)"),
        (ReprError::SortFlag { group: Group::G2, first_byte: 0x20 }, "g2 point: sort flag set"),
        (ReprError::InfinityWithPayload { group: Group::G1, offset: 17, byte: 0x0a }, "byte 17 is 0x0a"),
        (ReprError::ZeroWithoutInfinityFlag { group: Group::G2 }, "infinity flag is not set"),
        (ReprError::NotOnCurve { group: Group::G1 }, "g1 point is not on the curve"),
        (ReprError::NotInSubgroup { group: Group::G2 }, "not in the prime-order subgroup"),
        (
            ReprError::SliceLength { group: Group::G1, n_points: 2, expected_bytes: 192, found_bytes: 7 },
            "7 bytes given for 2 points, expected 192 bytes",
        ),
    ];
    for (e, needle) in cases {
        let msg = e.to_string();
        assert!(msg.contains(needle), "{msg:?} lacks {needle:?}");
        assert!(!msg.ends_with('.'), "{msg:?}");
        assert!(!msg.chars().next().unwrap().is_uppercase(), "{msg:?}");
    }
}
