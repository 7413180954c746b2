//! Typed errors, never panics or bad proofs: unsatisfied witnesses, self-check failures
//! naming the partition, shapes, keys, budgets, the GPU slot.

mod common;

use std::sync::Arc;

use bellman::{Circuit, ConstraintSystem, Index, SynthesisError, Variable};
use bls12_381::Scalar;
use ff::Field;
use groth16::Parameters;
use groth16_prover::testing::{MimcChain, RandomR1cs};
use groth16_prover::{
    BackendChoice, GpuBackend, Prover, ProverConfig, ProverError, ProvingKey, Randomness,
    SelfCheck, Synthesis,
};
use memory_budget::{Budget, Category};
use rand::RngExt;

use common::*;

fn random_circuit(rng: &mut rand::rngs::StdRng, n_constraints: usize) -> RandomR1cs {
    RandomR1cs {
        n_inputs: 2,
        n_constraints,
        shape_seed: rng.random(),
        value_seed: rng.random(),
        corrupt: false,
    }
}

#[test]
fn unsatisfied_witness_is_a_typed_error_on_both_paths() {
    let seed = seed();
    let mut rng = rng(seed);
    for n_constraints in [1usize, 50, 300] {
        let circuit = random_circuit(&mut rng, n_constraints);
        let params = generate(circuit.clone(), &mut rng);
        let budget = big_budget();
        let p = prover(
            ProvingKey::from_parameters(&params),
            &budget,
            ProverConfig::default(),
        );
        let (_cache, pce) = record(&budget, "unsat", circuit.clone());
        let bad = RandomR1cs {
            corrupt: true,
            ..circuit
        };
        for synthesis in [Synthesis::Pce(&pce), Synthesis::Plain] {
            match p.prove(synthesis, bad.clone(), Randomness::random(&mut rng)) {
                Err(ProverError::Unsatisfied {
                    row,
                    n_constraints: n,
                    n_rows,
                }) => {
                    // The corrupted value is the last constraint's output.
                    assert_eq!(row, n_constraints + 3 - 1, "{synthesis:?}");
                    assert_eq!(n, n_constraints + 3);
                    assert_eq!(n_rows, n + 3, "three input rows (one included)");
                }
                other => panic!("{synthesis:?}: expected Unsatisfied, got {other:?}"),
            }
        }
        assert_eq!(
            budget.snapshot().used_in(Category::WorkingSet),
            0,
            "charge returned on error"
        );
    }
}

#[test]
fn mimc_unsatisfied_names_the_last_round() {
    let seed = seed();
    let mut rng = rng(seed);
    let circuit = MimcChain::new(30, rng.random());
    let params = generate(circuit.clone(), &mut rng);
    let budget = big_budget();
    let p = prover(
        ProvingKey::from_parameters(&params),
        &budget,
        ProverConfig::default(),
    );
    let bad = MimcChain {
        corrupt: true,
        ..circuit
    };
    match p.prove(Synthesis::Plain, bad, Randomness::random(&mut rng)) {
        Err(ProverError::Unsatisfied { row, .. }) => assert_eq!(row, 2 * 30 - 1),
        other => panic!("expected Unsatisfied, got {other:?}"),
    }
}

/// Parameters whose verifying key belongs to another setup of the same circuit: proofs
/// are well-formed but do not verify.
fn mismatched(
    params: &Parameters<bls12_381::Bls12>,
    other: &Parameters<bls12_381::Bls12>,
) -> ProvingKey {
    let mixed = Parameters {
        vk: other.vk.clone(),
        h: params.h.clone(),
        l: params.l.clone(),
        a: params.a.clone(),
        b_g1: params.b_g1.clone(),
        b_g2: params.b_g2.clone(),
    };
    ProvingKey::from_parameters(&mixed)
}

#[test]
fn self_check_failure_names_the_partition() {
    let seed = seed();
    let mut rng = rng(seed);
    let circuit = random_circuit(&mut rng, 100);
    let params = generate(circuit.clone(), &mut rng);
    let other = generate(circuit.clone(), &mut rng);
    let budget = big_budget();
    let p = prover(
        mismatched(&params, &other),
        &budget,
        ProverConfig::default(),
    );
    let rs = vec![Randomness::random(&mut rng); 2];
    match p.prove_batch(
        Synthesis::Plain,
        vec![circuit.clone(), circuit.clone()],
        &rs,
    ) {
        Err(e @ ProverError::SelfCheckFailed { .. }) => assert_eq!(e.partition(), Some(0)),
        other => panic!("expected SelfCheckFailed, got {other:?}"),
    }
    // Without the self-check the same prover returns the (useless) proof.
    let unchecked = prover(
        mismatched(&params, &other),
        &budget,
        ProverConfig {
            self_check: SelfCheck::Never,
            ..ProverConfig::default()
        },
    );
    let out = unchecked
        .prove_batch(Synthesis::Plain, vec![circuit], &rs[..1])
        .unwrap();
    assert!(!out.proofs[0].self_checked);
}

#[test]
fn batch_errors_name_the_partition() {
    let seed = seed();
    let mut rng = rng(seed);
    let circuit = random_circuit(&mut rng, 120);
    let params = generate(circuit.clone(), &mut rng);
    let budget = big_budget();
    let p = prover(
        ProvingKey::from_parameters(&params),
        &budget,
        ProverConfig::default(),
    );
    let rs = vec![Randomness::random(&mut rng); 3];
    // Fewer constraints in partition 1: another shape.
    let short = RandomR1cs {
        n_constraints: 119,
        ..circuit.clone()
    };
    match p.prove_batch(
        Synthesis::Plain,
        vec![circuit.clone(), short, circuit.clone()],
        &rs,
    ) {
        Err(ProverError::ShapeMismatch {
            partition,
            what,
            expected,
            found,
        }) => {
            assert_eq!(
                (partition, what, expected, found),
                (1, "number of aux variables", 123, 122)
            );
        }
        other => panic!("expected ShapeMismatch, got {other:?}"),
    }
    // An unsatisfied partition 2.
    let bad = RandomR1cs {
        corrupt: true,
        ..circuit.clone()
    };
    match p.prove_batch(
        Synthesis::Plain,
        vec![circuit.clone(), circuit.clone(), bad],
        &rs,
    ) {
        Err(e @ ProverError::Partition { .. }) => {
            assert_eq!(e.partition(), Some(2));
            assert!(matches!(e.root(), ProverError::Unsatisfied { .. }), "{e}");
        }
        other => panic!("expected a partition error, got {other:?}"),
    }
    match p.prove_batch(Synthesis::Plain, vec![circuit], &rs) {
        Err(ProverError::BatchLength {
            n_circuits: 1,
            n_randomness: 3,
        }) => {}
        other => panic!("expected BatchLength, got {other:?}"),
    }
}

#[test]
fn key_of_another_circuit_is_refused() {
    let seed = seed();
    let mut rng = rng(seed);
    let small = random_circuit(&mut rng, 10);
    let params = generate(small, &mut rng);
    let budget = big_budget();
    let p = prover(
        ProvingKey::from_parameters(&params),
        &budget,
        ProverConfig::default(),
    );
    let big = random_circuit(&mut rng, 200);
    let (_cache, pce) = record(&budget, "big", big.clone());
    for synthesis in [Synthesis::Pce(&pce), Synthesis::Plain] {
        match p.prove(synthesis, big.clone(), Randomness::random(&mut rng)) {
            Err(ProverError::KeyTooSmall { needed, found, .. }) => assert!(needed > found),
            other => panic!("{synthesis:?}: expected KeyTooSmall, got {other:?}"),
        }
    }
    let more_inputs = RandomR1cs {
        n_inputs: 5,
        ..random_circuit(&mut rng, 10)
    };
    match p.prove(Synthesis::Plain, more_inputs, Randomness::random(&mut rng)) {
        Err(ProverError::InputCountMismatch {
            expected: 6,
            found: 3,
        }) => {}
        other => panic!("expected InputCountMismatch, got {other:?}"),
    }
}

#[test]
fn budget_is_charged_then_returned_and_refusal_is_typed() {
    let seed = seed();
    let mut rng = rng(seed);
    let circuit = random_circuit(&mut rng, 500);
    let params = generate(circuit.clone(), &mut rng);
    let key = Arc::new(ProvingKey::from_parameters(&params));
    let budget = big_budget();
    let (_cache, pce) = record(&budget, "budget", circuit.clone());
    let p = Prover::new(Arc::clone(&key), budget.clone(), ProverConfig::default()).unwrap();
    let out = p
        .prove(
            Synthesis::Pce(&pce),
            circuit.clone(),
            Randomness::random(&mut rng),
        )
        .unwrap();
    let shape = out.shape;
    // At least witness + a, b, c over the domain; computed from the real sizes.
    let floor = 32 * (shape.n_inputs + shape.n_aux + 3 * shape.domain_size) as u64;
    assert!(
        out.peak_charged_bytes >= floor,
        "{} < {floor}",
        out.peak_charged_bytes
    );
    assert_eq!(budget.snapshot().used_in(Category::WorkingSet), 0);

    // A budget below the working set: refused up front with the sizes.
    let tight = Budget::fixed(floor / 2);
    let p = Prover::new(key, tight.clone(), ProverConfig::default()).unwrap();
    for synthesis in [Synthesis::Pce(&pce), Synthesis::Plain] {
        match p.prove(synthesis, circuit.clone(), Randomness::random(&mut rng)) {
            Err(ProverError::Budget {
                requested_bytes, ..
            }) => assert!(requested_bytes > 0),
            other => panic!("{synthesis:?}: expected Budget, got {other:?}"),
        }
        assert_eq!(tight.used_bytes(), 0, "{synthesis:?}: nothing left charged");
    }
}

/// Without a driver (this CI machine): `Auto` gives the CPU backend and explicit `Gpu` the
/// typed error. Where device 0 opens, `Auto` and `Gpu` give the GPU backend instead.
#[test]
fn backend_choice_without_a_driver() {
    let key = Arc::new(ProvingKey::from_parameters(&generate(
        MimcChain::new(2, 1),
        &mut rng(seed()),
    )));
    let gpu_usable = gpu_device::Gpu::open(0).is_ok();
    let config = ProverConfig {
        backend: BackendChoice::Gpu,
        ..ProverConfig::default()
    };
    let explicit = Prover::new(Arc::clone(&key), Budget::fixed(1 << 30), config);
    let direct = GpuBackend::new(Budget::fixed(1 << 30));
    if gpu_usable {
        assert_eq!(explicit.expect("gpu prover").backend_name(), "gpu");
        assert!(direct.is_ok());
    } else {
        match explicit {
            Err(ProverError::GpuUnavailable { source }) => {
                assert!(!source.to_string().is_empty())
            }
            other => panic!("expected GpuUnavailable, got {other:?}"),
        }
        assert!(matches!(direct, Err(ProverError::GpuUnavailable { .. })));
    }
    let auto = Prover::new(
        Arc::clone(&key),
        Budget::fixed(1 << 30),
        ProverConfig::default(),
    )
    .expect("auto never fails for want of a gpu");
    assert_eq!(
        auto.backend_name(),
        if gpu_usable { "gpu" } else { "cpu" },
        "auto picks the gpu exactly when device 0 opens"
    );
    // Whatever Auto picked proves correctly.
    let circuit = MimcChain::new(2, 1);
    let out = auto
        .prove(
            Synthesis::Plain,
            circuit.clone(),
            Randomness::random(&mut rng(seed())),
        )
        .expect("auto proof");
    assert!(groth16::verify_proof(key.prepared_vk(), &out.proof, &[circuit.output()]).is_ok());
}

/// A circuit that enforces on a variable it never allocated.
struct Dangling;

impl Circuit<Scalar> for Dangling {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let x = cs.alloc(|| "x", || Ok(Scalar::from(3u64)))?;
        let ghost = Variable::new_unchecked(Index::Aux(7));
        cs.enforce(|| "x*x=ghost", |lc| lc + x, |lc| lc + x, |lc| lc + ghost);
        Ok(())
    }
}

#[test]
fn unallocated_variable_is_a_typed_error() {
    let key = Arc::new(ProvingKey::from_parameters(&generate(
        MimcChain::new(2, 1),
        &mut rng(seed()),
    )));
    let p = Prover::new(key, Budget::fixed(1 << 30), ProverConfig::default()).unwrap();
    match p.prove(
        Synthesis::Plain,
        Dangling,
        Randomness::new(Scalar::ONE, Scalar::ONE),
    ) {
        Err(ProverError::UnallocatedVariable {
            constraint: 0,
            kind: "aux",
            index: 7,
            allocated: 1,
        }) => {}
        other => panic!("expected UnallocatedVariable, got {other:?}"),
    }
}

#[test]
fn truncated_params_file_is_a_typed_error() {
    let seed = seed();
    let mut rng = rng(seed);
    let params = generate(MimcChain::new(20, rng.random()), &mut rng);
    let mut bytes = Vec::new();
    params.write(&mut bytes).unwrap();
    let dir = TempDir::new("truncated");
    let cut = rng.random_range(1..bytes.len());
    let path = dir.0.join("cut.params");
    std::fs::write(&path, &bytes[..cut]).unwrap();
    let budget = big_budget();
    match ProvingKey::load(&path, &budget, &srs_store::LoadOptions::default()) {
        Err(ProverError::Srs(e)) => eprintln!("cut at {cut}: {e}"),
        other => panic!("cut at {cut}: expected an srs error, got {other:?}"),
    }
    assert_eq!(budget.used_bytes(), 0, "nothing stays charged");
}

#[test]
fn backend_slices_queries_without_panicking() {
    use gpu_msm::DensityMask;
    use groth16_prover::{CpuBackend, HPoly, MsmInputs, ProverBackend};
    let params = generate(MimcChain::new(3, 9), &mut rng(seed()));
    let key = ProvingKey::from_parameters(&params);
    let backend = CpuBackend::new(Budget::fixed(1 << 30));
    let n_h = key.lens().h;
    let h = vec![Scalar::ONE; n_h + 1];
    let inputs = vec![Scalar::ONE; 2];
    let aux = vec![Scalar::ONE; key.lens().l];
    let empty_aux = DensityMask::new(aux.len());
    let empty_in = DensityMask::new(inputs.len());
    let x = MsmInputs {
        inputs: &inputs,
        aux: &aux,
        a_aux: &empty_aux,
        b_input: &empty_in,
        b_aux: &empty_aux,
    };
    match backend.msms(&backend.view_key(&key).unwrap(), HPoly::Host(h), &x) {
        Err(ProverError::KeyTooSmall {
            query: "h_query",
            needed,
            found,
        }) => {
            assert_eq!((needed, found), (n_h + 1, n_h))
        }
        other => panic!("expected KeyTooSmall, got {other:?}"),
    }
    // Scratch estimates grow with the MSM size.
    assert!(
        backend.msm_scratch_bytes(1 << 16, 1 << 10) > backend.msm_scratch_bytes(1 << 10, 1 << 10)
    );
    assert!(
        backend.msm_scratch_bytes(1 << 10, 1 << 16) > backend.msm_scratch_bytes(1 << 10, 1 << 10)
    );
}
