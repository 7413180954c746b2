//! The tiny circuit behind `fixtures/circom/`: `x³ + x + k = out`, written as circom
//! would compile it, so tests have a hand-checkable `.r1cs`/`.wtns` pair.
//!
//! Wires: 0 = ONE, 1 = out (public output), 2 = k (public input), 3 = x (private input),
//! 4 = x², 5 = x³. Constraints: x·x = x²; x²·x = x³; (x³ + x + k − out)·1 = 0 (a −1
//! coefficient and an empty C). Regenerate the files with
//! `cargo run -p pinion --example circom_fixtures`.

use bls12_381::Scalar;
use ff::Field;

use crate::circom::{Constraint, R1cs, Term};

fn t(wire: u32, coeff: Scalar) -> Term {
    Term { wire, coeff }
}

/// The constraint system.
pub fn cubic_r1cs() -> R1cs {
    let one = Scalar::ONE;
    let constraints = vec![
        Constraint {
            a: vec![t(3, one)],
            b: vec![t(3, one)],
            c: vec![t(4, one)],
        },
        Constraint {
            a: vec![t(4, one)],
            b: vec![t(3, one)],
            c: vec![t(5, one)],
        },
        Constraint {
            a: vec![t(5, one), t(3, one), t(2, one), t(1, -one)],
            b: vec![t(0, one)],
            c: vec![],
        },
    ];
    // Counts are consistent by construction (6 wires ≥ 1 + 1 + 1 + 1).
    R1cs::new(6, 1, 1, 1, constraints).unwrap_or_else(|e| unreachable!("cubic fixture: {e}"))
}

/// A satisfying witness for `x` and `k`.
pub fn cubic_witness(x: u64, k: u64) -> Vec<Scalar> {
    let (x, k) = (Scalar::from(x), Scalar::from(k));
    let sq = x * x;
    let cube = sq * x;
    vec![Scalar::ONE, cube + x + k, k, x, sq, cube]
}

/// The fixture files: name and bytes.
pub fn cubic_files() -> Vec<(&'static str, Vec<u8>)> {
    let good = cubic_witness(3, 5);
    let mut bad = good.clone();
    // out = 36 instead of 35: only the last constraint fails.
    bad[1] += Scalar::ONE;
    vec![
        ("cubic.r1cs", cubic_r1cs().to_bytes()),
        ("cubic.wtns", crate::circom::wtns_bytes(&good)),
        ("cubic-bad.wtns", crate::circom::wtns_bytes(&bad)),
    ]
}
