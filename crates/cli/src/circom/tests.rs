//! Parser tests: round trips, every truncation, corruptions, and the typed errors.

use bls12_381::Scalar;
use ff::Field;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::*;
use crate::decimal::BLS12_381_R_LE;
use crate::fixtures::{cubic_r1cs, cubic_witness};

/// The seed of a randomized test (`PINION_SEED` replays one), printed.
pub(crate) fn seed() -> u64 {
    let seed = std::env::var("PINION_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    eprintln!("seed = {seed}");
    seed
}

/// A random system with `n_wires` wires and `n_constraints` constraints, random public
/// counts, and coefficients mixing ±1 and random elements.
fn random_r1cs(rng: &mut StdRng, n_wires: u32, n_constraints: usize) -> R1cs {
    let avail = n_wires - 1;
    let n_pub_out = rng.random_range(0..=avail.min(2));
    let n_pub_in = rng.random_range(0..=(avail - n_pub_out).min(2));
    let n_prv_in = rng.random_range(0..=avail - n_pub_out - n_pub_in);
    let lc = |rng: &mut StdRng| -> Vec<Term> {
        (0..rng.random_range(0..4))
            .map(|_| Term {
                wire: rng.random_range(0..n_wires),
                coeff: match rng.random_range(0..3) {
                    0 => Scalar::ONE,
                    1 => -Scalar::ONE,
                    _ => Scalar::random(&mut *rng),
                },
            })
            .collect()
    };
    let constraints = (0..n_constraints)
        .map(|_| Constraint {
            a: lc(rng),
            b: lc(rng),
            c: lc(rng),
        })
        .collect();
    R1cs::new(n_wires, n_pub_out, n_pub_in, n_prv_in, constraints).unwrap()
}

#[test]
fn r1cs_and_wtns_round_trip() {
    let mut rng = StdRng::seed_from_u64(seed());
    for _ in 0..20 {
        let n_wires = rng.random_range(1..40);
        let n_constraints = rng.random_range(0..30);
        let r = random_r1cs(&mut rng, n_wires, n_constraints);
        let bytes = r.to_bytes();
        let parsed = R1cs::parse(&bytes).unwrap();
        assert_eq!(parsed, r);
        // The charge taken before parsing covers what the parse holds.
        assert!(R1cs::parsed_bytes_bound(&bytes).unwrap() >= parsed.heap_bytes());
        let w: Vec<Scalar> = (0..n_wires).map(|_| Scalar::random(&mut rng)).collect();
        assert_eq!(parse_wtns(&wtns_bytes(&w)).unwrap(), w);
    }
}

#[test]
fn every_truncation_is_a_typed_error() {
    let r1cs = cubic_r1cs().to_bytes();
    for len in 0..r1cs.len() {
        assert!(
            R1cs::parse(&r1cs[..len]).is_err(),
            "r1cs prefix of {len} bytes accepted"
        );
    }
    let wtns = wtns_bytes(&cubic_witness(3, 5));
    for len in 0..wtns.len() {
        assert!(
            parse_wtns(&wtns[..len]).is_err(),
            "wtns prefix of {len} bytes accepted"
        );
    }
}

#[test]
fn random_corruption_never_panics() {
    let mut rng = StdRng::seed_from_u64(seed());
    let r1cs = cubic_r1cs().to_bytes();
    let wtns = wtns_bytes(&cubic_witness(3, 5));
    for _ in 0..3000 {
        for (bytes, is_r1cs) in [(&r1cs, true), (&wtns, false)] {
            let mut b = bytes.clone();
            for _ in 0..rng.random_range(1..4) {
                let i = rng.random_range(0..b.len());
                b[i] = rng.random();
            }
            // Any result is fine; reaching here means no panic and no huge allocation.
            if is_r1cs {
                let _ = R1cs::parse(&b);
            } else {
                let _ = parse_wtns(&b);
            }
        }
    }
}

/// Offsets inside the cubic fixture's `.r1cs` encoding (header section first).
const R1CS_VERSION_AT: usize = 4;
const R1CS_PRIME_AT: usize = 12 + 12 + 4;
const R1CS_N_CONSTRAINTS_AT: usize = R1CS_PRIME_AT + 32 + 16 + 8;
const R1CS_FIRST_COEFF_AT: usize = R1CS_N_CONSTRAINTS_AT + 4 + 12 + 4 + 4;

fn check(bytes: &[u8], want: impl Fn(&CircomError) -> bool) {
    match R1cs::parse(bytes) {
        Ok(_) => panic!("accepted"),
        Err(e) => assert!(want(&e), "unexpected error: {e}"),
    }
}

#[test]
fn r1cs_errors_name_what_is_wrong() {
    let good = cubic_r1cs().to_bytes();
    let mut b = good.clone();
    b[..4].copy_from_slice(b"wtns");
    check(&b, |e| matches!(e, CircomError::BadMagic { .. }));

    let mut b = good.clone();
    b[R1CS_VERSION_AT] = 2;
    check(&b, |e| {
        matches!(e, CircomError::UnsupportedVersion { found: 2, .. })
    });

    // BN254's scalar field, what circom uses by default.
    let bn254 = "21888242871839275222246405745257275088548364400416034343698204186575808495617";
    let mut b = good.clone();
    b[R1CS_PRIME_AT..R1CS_PRIME_AT + 32].copy_from_slice(&le_bytes_of_decimal(bn254));
    check(
        &b,
        |e| matches!(e, CircomError::WrongPrime { found, .. } if found == bn254),
    );
    assert!(R1cs::parse(&b).unwrap_err().to_string().contains(bn254));

    let mut b = good.clone();
    b[R1CS_PRIME_AT - 4] = 8;
    check(&b, |e| matches!(e, CircomError::FieldSize { found: 8, .. }));

    let mut b = good.clone();
    b[R1CS_FIRST_COEFF_AT..R1CS_FIRST_COEFF_AT + 32].copy_from_slice(&BLS12_381_R_LE);
    check(&b, |e| matches!(e, CircomError::NonCanonical { .. }));

    let mut b = good.clone();
    b[R1CS_FIRST_COEFF_AT - 4] = 6; // wire 6 of 6
    check(&b, |e| {
        matches!(
            e,
            CircomError::WireOutOfRange {
                wire: 6,
                n_wires: 6,
                ..
            }
        )
    });

    let mut b = good.clone();
    b[R1CS_N_CONSTRAINTS_AT] = 2; // the section holds three
    check(&b, |e| {
        matches!(
            e,
            CircomError::SectionSize {
                section: "constraints",
                ..
            }
        )
    });

    let mut b = good.clone();
    b[R1CS_N_CONSTRAINTS_AT] = 4;
    check(&b, |e| matches!(e, CircomError::Truncated { .. }));

    let mut b = good.clone();
    b.push(0);
    check(&b, |e| {
        matches!(e, CircomError::TrailingBytes { extra_bytes: 1, .. })
    });

    // Section count 2: the wire map is missing (and the file then has trailing bytes,
    // so drop them too).
    let map_bytes = 12 + 6 * 8;
    let mut b = good[..good.len() - map_bytes].to_vec();
    b[8] = 2;
    check(&b, |e| {
        matches!(
            e,
            CircomError::MissingSection {
                section_type: 3,
                ..
            }
        )
    });

    // A duplicated wire map.
    let mut b = good.clone();
    b[8] = 4;
    b.extend_from_slice(&good[good.len() - map_bytes..]);
    check(&b, |e| {
        matches!(
            e,
            CircomError::DuplicateSection {
                section_type: 3,
                ..
            }
        )
    });

    // Custom gates (plonk).
    let mut b = good.clone();
    b[8] = 4;
    b.extend_from_slice(&[4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    check(&b, |e| {
        matches!(e, CircomError::CustomGates { section_type: 4 })
    });
}

#[test]
fn r1cs_labels_are_checked_against_the_header() {
    let good = cubic_r1cs().to_bytes();
    let n_labels_at = R1CS_PRIME_AT + 32 + 16;
    let map_at = good.len() - 6 * 8;
    let label_at = |w: usize| map_at + 8 * w;
    let set = |b: &mut Vec<u8>, at: usize, v: u64| b[at..at + 8].copy_from_slice(&v.to_le_bytes());

    // More labels than wires (circom's eliminated signals) and a sparse map are fine.
    let mut b = good.clone();
    set(&mut b, n_labels_at, 100);
    set(&mut b, label_at(5), 99);
    assert_eq!(R1cs::parse(&b).unwrap().wire_to_label()[5], 99);

    let mut b = good.clone();
    set(&mut b, n_labels_at, 5);
    check(&b, |e| {
        matches!(
            e,
            CircomError::LabelCount {
                n_labels: 5,
                n_wires: 6
            }
        )
    });
    let mut b = good.clone();
    set(&mut b, label_at(0), 3);
    check(&b, |e| {
        matches!(
            e,
            CircomError::WireLabel {
                wire: 0,
                label: 3,
                ..
            }
        )
    });
    let mut b = good.clone();
    set(&mut b, label_at(4), 6);
    check(&b, |e| {
        matches!(
            e,
            CircomError::WireLabel {
                wire: 4,
                label: 6,
                ..
            }
        )
    });
    let mut b = good.clone();
    set(&mut b, label_at(2), 4);
    check(&b, |e| {
        matches!(
            e,
            CircomError::WireLabel {
                wire: 4,
                label: 4,
                ..
            }
        )
    });
    let msg = R1cs::parse(&b).unwrap_err().to_string();
    assert!(msg.contains("already the label of wire 2"), "{msg}");
}

fn le_bytes_of_decimal(text: &str) -> [u8; 32] {
    let mut limbs = [0u64; 4];
    for ch in text.bytes() {
        let mut carry = u128::from(ch - b'0');
        for l in limbs.iter_mut() {
            let cur = u128::from(*l) * 10 + carry;
            *l = cur as u64;
            carry = cur >> 64;
        }
    }
    let mut out = [0u8; 32];
    for (i, l) in limbs.iter().enumerate() {
        out[8 * i..8 * i + 8].copy_from_slice(&l.to_le_bytes());
    }
    out
}

#[test]
fn wtns_errors_name_what_is_wrong() {
    let good = wtns_bytes(&cubic_witness(3, 5));
    let mut b = good.clone();
    b[0] = b'x';
    assert!(matches!(parse_wtns(&b), Err(CircomError::BadMagic { .. })));
    let mut b = good.clone();
    b[4] = 1;
    assert!(matches!(
        parse_wtns(&b),
        Err(CircomError::UnsupportedVersion { found: 1, .. })
    ));
    let mut b = good.clone();
    b[28] ^= 1; // inside the prime
    assert!(matches!(
        parse_wtns(&b),
        Err(CircomError::WrongPrime { .. })
    ));
    let mut b = good.clone();
    let last = b.len() - 32;
    b[last..].copy_from_slice(&[0xff; 32]);
    assert!(matches!(
        parse_wtns(&b),
        Err(CircomError::NonCanonical { .. })
    ));
    let mut b = good.clone();
    b[60] = 7; // witness count 7, six values present
    assert!(matches!(
        parse_wtns(&b),
        Err(CircomError::SectionSize {
            section: "values",
            ..
        })
    ));
}

#[test]
fn witness_check_finds_the_first_failing_constraint() {
    let mut rng = StdRng::seed_from_u64(seed());
    let r = cubic_r1cs();
    let (x, k) = (rng.random_range(0..1u64 << 40), rng.random());
    let w = cubic_witness(x, k);
    r.check_witness(&w).unwrap();
    assert_eq!(r.public_values(&w), vec![w[1], w[2]]);

    for (wire, first_bad) in [(1, 2), (4, 0), (5, 1)] {
        let mut bad = w.clone();
        bad[wire] += Scalar::ONE;
        assert!(
            matches!(r.check_witness(&bad), Err(CircomError::Unsatisfied { constraint, n_constraints: 3 }) if constraint == first_bad),
            "wire {wire}"
        );
    }
    assert!(matches!(
        r.check_witness(&w[..5]),
        Err(CircomError::WitnessLength {
            expected: 6,
            found: 5
        })
    ));
    let mut not_one = w.clone();
    not_one[0] = Scalar::from(2u64);
    assert!(matches!(
        r.check_witness(&not_one),
        Err(CircomError::WitnessOne { .. })
    ));
    assert!(CircomCircuit::with_witness(&r, &not_one).is_err());
}

#[test]
fn header_counts_must_fit_the_wires() {
    assert!(matches!(
        R1cs::new(3, 1, 1, 1, vec![]),
        Err(CircomError::WireCounts { .. })
    ));
    assert!(R1cs::new(4, 1, 1, 1, vec![]).is_ok());
}

#[test]
fn circuit_adapter_has_groth16_shape() {
    // Recorded through pce-cache (a bellman ConstraintSystem): inputs are ONE + outputs +
    // inputs, aux the rest, one row per constraint.
    let mut rng = StdRng::seed_from_u64(seed());
    let n_wires = rng.random_range(2..50);
    let n_constraints = rng.random_range(1..40);
    let r = random_r1cs(&mut rng, n_wires, n_constraints);
    let pce = pce_cache::Pce::record(CircomCircuit::shape_only(&r)).unwrap();
    let s = pce.shape();
    assert_eq!(s.n_inputs, 1 + u64::from(r.n_public()));
    assert_eq!(
        s.n_aux,
        u64::from(r.n_wires()) - 1 - u64::from(r.n_public())
    );
    assert_eq!(s.n_constraints, r.constraints().len() as u64);
}
