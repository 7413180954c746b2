//! The tiny circuit behind `fixtures/circom/`: `x³ + x + k = out`, written as circom
//! would compile it, so tests have a hand-checkable `.r1cs`/`.wtns` pair.
//!
//! Wires: 0 = ONE, 1 = out (public output), 2 = k (public input), 3 = x (private input),
//! 4 = x², 5 = x³. Constraints: x·x = x²; x²·x = x³; (x³ + x + k − out)·1 = 0 (a −1
//! coefficient and an empty C). Regenerate the files with
//! `cargo run -p pinion --example circom_fixtures`.
//!
//! [`chain_circuit`] is the benchmarks' circuit of any size (`memory_bench`, `zkey_bench`).

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

/// The benchmarks' chain circuit of `n + 1` constraints (`n ≥ 1`): wires [1, out, x, y_1 ..
/// y_n]; constraints x · x = y_1, (y_i + x) · y_i = y_{i+1}, and y_n · 1 = out; one public
/// output and one public input. Returns it with a satisfying witness for x = 7, whose
/// values are spread over the whole field (the worst case for an MSM).
pub fn chain_circuit(n: u32) -> Result<(R1cs, Vec<Scalar>), crate::circom::CircomError> {
    let one = Scalar::ONE;
    let n = n.max(1);
    let y = |i: u32| 2 + i; // y_0 = x (wire 2), y_i = wire 2 + i
    let mut constraints = Vec::with_capacity(n as usize + 1);
    constraints.push(Constraint {
        a: vec![t(2, one)],
        b: vec![t(2, one)],
        c: vec![t(y(1), one)],
    });
    for i in 1..n {
        constraints.push(Constraint {
            a: vec![t(y(i), one), t(2, one)],
            b: vec![t(y(i), one)],
            c: vec![t(y(i + 1), one)],
        });
    }
    constraints.push(Constraint {
        a: vec![t(y(n), one)],
        b: vec![t(0, one)],
        c: vec![t(1, one)],
    });
    let r1cs = R1cs::new(3 + n, 1, 1, 0, constraints)?;
    let x = Scalar::from(7u64);
    let mut w = vec![one, Scalar::ZERO, x];
    let mut cur = x * x;
    w.push(cur);
    for _ in 1..n {
        cur = (cur + x) * cur;
        w.push(cur);
    }
    w[1] = cur;
    Ok((r1cs, w))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_chain_witness_satisfies_the_chain() {
        for n in [1, 2, 50] {
            let (r1cs, w) = super::chain_circuit(n).unwrap();
            assert_eq!(r1cs.constraints().len(), n as usize + 1);
            r1cs.check_witness(&w).unwrap();
        }
    }
}
