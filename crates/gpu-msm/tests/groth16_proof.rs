//! End to end: a Groth16 proof assembled from `CpuMsm` (with density masks) and
//! `gpu_ntt::CpuNtt::h_poly` equals `groth16::create_proof` for the same parameters and
//! (r, s). This is the recipe `groth16-prover` follows; it pins down how the queries are
//! sliced and which density goes with which MSM.

use bellman::{Circuit, ConstraintSystem, SynthesisError, Variable};
use bls12_381::{Bls12, G1Projective, G2Projective, Scalar};
use ff::Field;
use gpu_msm::{CpuMsm, DensityMask, MsmBackend};
use gpu_ntt::{AbcEvaluations, CpuNtt, NttBackend};
use group::Curve;
use pce_cache::reference::FullSynthesis;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

mod common;

use common::seed;

/// A random satisfiable circuit: public inputs, witness values that are often 0 or 1,
/// product constraints over random linear combinations, and some variables that only
/// appear in C (so the A and B densities have gaps).
#[derive(Clone)]
struct RandomCircuit {
    seed: u64,
    n_inputs: usize,
    n_constraints: usize,
}

fn witness_value(rng: &mut StdRng) -> Scalar {
    match rng.random_range(0..10u32) {
        0..3 => Scalar::ZERO,
        3..6 => Scalar::ONE,
        _ => Scalar::random(&mut *rng),
    }
}

impl Circuit<Scalar> for RandomCircuit {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let mut rng = StdRng::seed_from_u64(self.seed);
        let mut vars: Vec<(Variable, Scalar)> = vec![(CS::one(), Scalar::ONE)];
        for i in 0..self.n_inputs {
            let v = witness_value(&mut rng);
            vars.push((cs.alloc_input(|| format!("in{i}"), || Ok(v))?, v));
        }
        for i in 0..4 {
            let v = witness_value(&mut rng);
            let var = cs.alloc(|| format!("seed{i}"), || Ok(v))?;
            // Every variable must be constrained, or parameter generation refuses.
            cs.enforce(
                || format!("s{i}"),
                |lc| lc + var,
                |lc| lc + CS::one(),
                |lc| lc + var,
            );
            vars.push((var, v));
        }
        for t in 0..self.n_constraints {
            let pick = |rng: &mut StdRng| vars[rng.random_range(0..vars.len())];
            let ((x, xv), (y, yv), (u, uv)) = (pick(&mut rng), pick(&mut rng), pick(&mut rng));
            let k = witness_value(&mut rng);
            let left = xv + k * yv;
            let out = left * uv;
            let z = cs.alloc(|| format!("z{t}"), || Ok(out))?;
            if t % 5 == 4 {
                // z only in C: a gap in both densities.
                cs.enforce(
                    || format!("c{t}"),
                    |lc| lc + CS::one(),
                    |lc| lc + (out, CS::one()),
                    |lc| lc + z,
                );
            } else {
                cs.enforce(
                    || format!("c{t}"),
                    |lc| lc + x + (k, y),
                    |lc| lc + u,
                    |lc| lc + z,
                );
            }
            vars.push((z, out));
        }
        Ok(())
    }
}

fn prove_with_pinion(
    circuit: RandomCircuit,
    params: &groth16::Parameters<Bls12>,
    r: Scalar,
    s: Scalar,
) -> groth16::Proof<Bls12> {
    // pce-cache's oracle records exactly groth16's bookkeeping: ONE first, the input rows
    // x_i · 0 = 0 (so A has every input), densities marking nonzero coefficients.
    let mut cs = FullSynthesis::run(circuit).unwrap();
    let msm = CpuMsm::new();
    let h = CpuNtt::new()
        .h_poly(AbcEvaluations {
            a: std::mem::take(&mut cs.a),
            b: std::mem::take(&mut cs.b),
            c: std::mem::take(&mut cs.c),
        })
        .unwrap();
    let h_sum = msm.msm_g1(&params.h[..h.len()], &h, None).unwrap();
    let l_sum = msm
        .msm_g1(&params.l[..cs.aux.len()], &cs.aux, None)
        .unwrap();

    let n_in = cs.inputs.len();
    let a_aux = DensityMask::from_bools(cs.a_aux_density.iter().copied());
    let b_in = DensityMask::from_bools(cs.b_input_density.iter().copied());
    let b_aux = DensityMask::from_bools(cs.b_aux_density.iter().copied());
    let (n_b_in, n_b_aux) = (b_in.count_ones(), b_aux.count_ones());

    let a_query = &params.a[..];
    let a_sum = msm.msm_g1(&a_query[..n_in], &cs.inputs, None).unwrap()
        + msm
            .msm_g1(
                &a_query[n_in..n_in + a_aux.count_ones()],
                &cs.aux,
                Some(&a_aux),
            )
            .unwrap();
    let b_g1 = &params.b_g1[..];
    let b1_sum = msm
        .msm_g1(&b_g1[..n_b_in], &cs.inputs, Some(&b_in))
        .unwrap()
        + msm
            .msm_g1(&b_g1[n_b_in..n_b_in + n_b_aux], &cs.aux, Some(&b_aux))
            .unwrap();
    let b_g2 = &params.b_g2[..];
    let b2_sum: G2Projective = msm
        .msm_g2(&b_g2[..n_b_in], &cs.inputs, Some(&b_in))
        .unwrap()
        + msm
            .msm_g2(&b_g2[n_b_in..n_b_in + n_b_aux], &cs.aux, Some(&b_aux))
            .unwrap();

    let vk = &params.vk;
    let g_a: G1Projective = vk.delta_g1 * r + vk.alpha_g1 + a_sum;
    let g_b: G2Projective = vk.delta_g2 * s + vk.beta_g2 + b2_sum;
    let g_c: G1Projective = vk.delta_g1 * (r * s)
        + vk.alpha_g1 * s
        + vk.beta_g1 * r
        + a_sum * s
        + b1_sum * r
        + h_sum
        + l_sum;
    groth16::Proof {
        a: g_a.to_affine(),
        b: g_b.to_affine(),
        c: g_c.to_affine(),
    }
}

#[test]
fn proof_equals_groth16_create_proof() {
    let seed = seed();
    let mut rng = StdRng::seed_from_u64(seed);
    for (n_inputs, n_constraints) in [(0usize, 1usize), (1, 10), (3, 100), (5, 300)] {
        let circuit = RandomCircuit {
            seed: rng.random(),
            n_inputs,
            n_constraints,
        };
        let params =
            groth16::generate_random_parameters::<Bls12, _, _>(circuit.clone(), &mut rng).unwrap();
        for _ in 0..2 {
            let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
            let want = groth16::create_proof(circuit.clone(), &params, r, s).unwrap();
            let got = prove_with_pinion(circuit.clone(), &params, r, s);
            assert!(
                got == want,
                "{n_inputs} inputs, {n_constraints} constraints"
            );
        }
    }
}
