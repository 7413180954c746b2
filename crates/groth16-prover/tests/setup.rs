//! The insecure parameter generator against `groth16::generate_random_parameters`: the same
//! RNG state gives byte-identical parameter files; bad circuits, budgets and writers are
//! typed errors.

mod common;

use bellman::{Circuit, ConstraintSystem, SynthesisError};
use bls12_381::Scalar;
use common::*;
use groth16_prover::setup::{self, ToxicWaste};
use groth16_prover::testing::{KeyedChain, MimcChain, RandomR1cs, Sha256Circuit};
use groth16_prover::{ProverConfig, ProverError, Randomness, Synthesis};
use memory_budget::Budget;
use pce_cache::Pce;
use rand::RngExt;

/// Generates with both generators from the same seed and compares the bytes; returns ours.
fn check<C: Circuit<Scalar> + Clone>(name: &str, circuit: C, seed: u64) -> Vec<u8> {
    let pce = Pce::record(circuit.clone()).expect("record");
    let budget = big_budget();
    let mut ours = Vec::new();
    let t = std::time::Instant::now();
    let report = setup::generate(&pce, &mut rng(seed), &budget, &mut ours).expect("generate");
    let ours_time = t.elapsed();
    assert_eq!(budget.used_bytes(), 0, "{name}: every charge returned");
    assert!(report.peak_charged_bytes > 0);
    assert_eq!(report.bytes_written, ours.len() as u64);
    let t = std::time::Instant::now();
    let params = generate(circuit, &mut rng(seed));
    let reference_time = t.elapsed();
    let mut expected = Vec::new();
    params.write(&mut expected).expect("write reference");
    eprintln!(
        "{name}: {} bytes, ours {ours_time:?} (qap {:?}, tables {:?} w={:?}, points {:?}), groth16 {reference_time:?}",
        ours.len(),
        report.qap_time,
        report.table_time,
        report.windows,
        report.points_time
    );
    assert_eq!(
        (report.n_h, report.n_l, report.n_a, report.n_b, report.n_ic),
        (
            params.h.len() as u64,
            params.l.len() as u64,
            params.a.len() as u64,
            params.b_g1.len() as u64,
            params.vk.ic.len() as u64
        ),
        "{name}: query lengths"
    );
    if let Some(at) = ours.iter().zip(&expected).position(|(a, b)| a != b) {
        panic!("{name}: first differing byte at {at} of {}", expected.len());
    }
    assert_eq!(ours.len(), expected.len(), "{name}: length");
    ours
}

#[test]
fn byte_identical_to_groth16_on_several_circuits() {
    let seed = seed();
    let mut g = rng(seed);
    check(
        "mimc",
        MimcChain::new(g.random_range(1..300), g.random()),
        g.random(),
    );
    for _ in 0..3 {
        let circuit = RandomR1cs {
            n_inputs: g.random_range(0..6),
            n_constraints: g.random_range(1..1500),
            shape_seed: g.random(),
            value_seed: g.random(),
            corrupt: false,
        };
        check("random r1cs", circuit, g.random());
    }
    check(
        "keyed chain",
        KeyedChain {
            n_constraints: g.random_range(1..3000),
            n_keys: g.random_range(1..4),
            seed: g.random(),
        },
        g.random(),
    );
}

#[test]
fn sha256_parameters_prove_and_verify() {
    let seed = seed();
    let mut g = rng(seed);
    let circuit = Sha256Circuit::with_blocks(1, g.random());
    let bytes = check("sha256", circuit.clone(), g.random());
    // The generated file loads through srs-store and the prover's proof verifies.
    let budget = big_budget();
    let dir = TempDir::new("setup-sha");
    let path = dir.0.join("sha.params");
    std::fs::write(&path, &bytes).expect("write");
    let key = groth16_prover::ProvingKey::load(&path, &budget, &srs_store::LoadOptions::default())
        .expect("load generated parameters");
    let pce = Pce::record(circuit.clone()).expect("record");
    let p = prover(key, &budget, ProverConfig::default());
    let out = p
        .prove(
            Synthesis::Pce(&pce),
            circuit.clone(),
            Randomness::random(&mut g),
        )
        .expect("prove");
    assert!(verifies(p.key(), &out.proof, &circuit.public_inputs()));
}

/// `x` is allocated and used nowhere.
#[derive(Clone)]
struct Unconstrained;

impl Circuit<Scalar> for Unconstrained {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let a = cs.alloc(|| "a", || Ok(Scalar::from(3)))?;
        cs.alloc(|| "x", || Ok(Scalar::from(5)))?;
        cs.enforce(|| "a·1 = a", |lc| lc + a, |lc| lc + CS::one(), |lc| lc + a);
        Ok(())
    }
}

/// `y` occurs in A as `y − y`: the densities mark it, its value at tau is zero.
#[derive(Clone)]
struct Cancelling;

impl Circuit<Scalar> for Cancelling {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let a = cs.alloc(|| "a", || Ok(Scalar::from(3)))?;
        let y = cs.alloc(|| "y", || Ok(Scalar::from(5)))?;
        cs.enforce(
            || "a·1 = a",
            |lc| lc + a + y - y,
            |lc| lc + CS::one(),
            |lc| lc + a,
        );
        cs.enforce(
            || "y·1 = y",
            |lc| lc + CS::one(),
            |lc| lc + CS::one(),
            |lc| lc + CS::one(),
        );
        cs.enforce(|| "1·y = y", |lc| lc + CS::one(), |lc| lc + y, |lc| lc + y);
        Ok(())
    }
}

#[test]
fn bad_circuits_toxic_waste_budgets_and_writers_are_typed_errors() {
    let seed = seed();
    let budget = big_budget();
    let mut sink = Vec::new();

    let pce = Pce::record(Unconstrained).unwrap();
    match setup::generate(&pce, &mut rng(seed), &budget, &mut sink) {
        Err(ProverError::UnconstrainedVariable { index: 1, n_aux: 2 }) => {}
        other => panic!("unconstrained: {other:?}"),
    }
    assert!(sink.is_empty(), "nothing written before the check");
    // groth16 refuses the same circuit.
    assert!(
        groth16::generate_random_parameters::<bls12_381::Bls12, _, _>(
            Unconstrained,
            &mut rng(seed)
        )
        .is_err()
    );

    let pce = Pce::record(Cancelling).unwrap();
    match setup::generate(&pce, &mut rng(seed), &budget, &mut sink) {
        Err(
            e @ ProverError::DensityMismatch {
                query: "a_query",
                column: 2,
                marked: true,
            },
        ) => eprintln!("{e}"),
        other => panic!("cancelling: {other:?}"),
    }

    let circuit = MimcChain::new(50, seed);
    let pce = Pce::record(circuit).unwrap();
    let mut waste = ToxicWaste::random(&mut rng(seed));
    waste.delta = Scalar::from(0u64);
    assert!(matches!(
        setup::generate_with(&pce, &waste, &budget, &mut sink),
        Err(ProverError::DegenerateToxicWaste { which: "delta", .. })
    ));

    let small = Budget::fixed(4096);
    match setup::generate(&pce, &mut rng(seed), &small, &mut sink) {
        Err(ProverError::Budget {
            requested_bytes, ..
        }) => assert!(requested_bytes > 4096),
        other => panic!("small budget: {other:?}"),
    }
    assert_eq!(small.used_bytes(), 0);

    let mut full = [0u8; 1000];
    match setup::generate(&pce, &mut rng(seed), &budget, &mut full[..]) {
        Err(
            e @ ProverError::ParamsWrite {
                section: "vk.ic",
                offset: 868,
                ..
            },
        ) => {
            eprintln!("{e}")
        }
        other => panic!("short writer: {other:?}"),
    }
    assert_eq!(budget.used_bytes(), 0);
}

/// The toxic waste is drawn in groth16's order: the same seed, the same values.
#[test]
fn toxic_waste_draw_order_matches_groth16() {
    let seed = seed();
    let waste = ToxicWaste::random(&mut rng(seed));
    let circuit = MimcChain::new(3, seed);
    let params = generate(circuit, &mut rng(seed));
    use group::Curve;
    assert_eq!(params.vk.alpha_g1, (waste.g1 * waste.alpha).to_affine());
    assert_eq!(params.vk.delta_g2, (waste.g2 * waste.delta).to_affine());
}
