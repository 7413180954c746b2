//! Naive oracles: O(n²) transforms and direct polynomial evaluation. Used by this
//! crate's tests and by the GPU backend's tests.

use bls12_381::Scalar;
use ff::Field;

use crate::domain::{bit_reverse, coset_shift, omega};
use crate::{Direction, Domain, NttSpec, Order};

/// Evaluates the polynomial with coefficients `coeffs` (lowest first) at `x` (Horner).
pub fn eval_poly(coeffs: &[Scalar], x: Scalar) -> Scalar {
    coeffs.iter().rev().fold(Scalar::ZERO, |acc, c| acc * x + c)
}

/// The transform `spec` describes, computed from its definition in O(n²). `data.len()`
/// must be a power of two (panics otherwise: a test oracle, not an API).
pub fn naive_transform(data: &[Scalar], spec: NttSpec) -> Vec<Scalar> {
    let n = data.len();
    assert!(n.is_power_of_two());
    let log_n = n.trailing_zeros();
    let from_order = |v: &[Scalar], order: Order| -> Vec<Scalar> {
        match order {
            Order::Natural => v.to_vec(),
            Order::BitReversed => (0..n).map(|i| v[bit_reverse(i, log_n)]).collect(),
        }
    };
    let input = from_order(data, spec.input);
    let w = omega(log_n);
    let g = match spec.domain {
        Domain::Subgroup => Scalar::ONE,
        Domain::Coset => coset_shift(),
    };
    let out: Vec<Scalar> = match spec.direction {
        // y_i = p(g·ω^i) with p the polynomial whose coefficients are the input.
        Direction::Forward => (0..n)
            .map(|i| eval_poly(&input, g * w.pow_vartime(&[i as u64, 0, 0, 0])))
            .collect(),
        // x_j = g^-j · n^-1 · Σ_i y_i ω^-ij.
        Direction::Inverse => {
            let n_inv = Scalar::from(n as u64).invert().unwrap();
            let w_inv = w.invert().unwrap();
            let g_inv = g.invert().unwrap();
            (0..n)
                .map(|j| {
                    let wj = w_inv.pow_vartime(&[j as u64, 0, 0, 0]);
                    let s = eval_poly(&input, wj);
                    s * n_inv * g_inv.pow_vartime(&[j as u64, 0, 0, 0])
                })
                .collect()
        }
    };
    match spec.output {
        Order::Natural => out,
        // Position p holds logical index bit_reverse(p); the map is its own inverse.
        Order::BitReversed => (0..n).map(|p| out[bit_reverse(p, log_n)]).collect(),
    }
}
