//! Our proofs are byte-for-byte `groth16::create_proof`'s for the same parameters and
//! (r, s), through the PCE path and plain synthesis, with the key loaded from a file
//! through srs-store or shared from in-memory parameters; they verify, and a wrong
//! public input does not.

mod common;

use bellman::Circuit;
use bls12_381::{Bls12, Scalar};
use ff::Field;
use groth16::Parameters;
use groth16_prover::testing::{MimcChain, RandomR1cs, Sha256Circuit};
use groth16_prover::{ProverConfig, ProverError, ProvingKey, Randomness, SelfCheck, Synthesis};
use memory_budget::Category;
use rand::RngExt;

use common::*;

/// Proves `circuit` for each (r, s) with the reference and with both our paths (the PCE
/// path also from a witness computed outside the prover) and both key sources; checks
/// equal bytes, verification, and rejection of a wrong input.
fn check_equivalence<C: Circuit<Scalar> + Clone>(
    name: &str,
    circuit: C,
    public_inputs: &[Scalar],
    params: &Parameters<Bls12>,
    pairs: &[Randomness],
    plain_too: bool,
) {
    let budget = big_budget();
    let file_key = key_via_file(params, &budget, name);
    assert!(
        file_key.charged_bytes() > 0,
        "{name}: converted bases are charged"
    );
    let mem_key = ProvingKey::from_parameters(params);
    let (_cache, pce) = record(&budget, name, circuit.clone());
    let config = ProverConfig {
        self_check: SelfCheck::Always,
        ..ProverConfig::default()
    };
    let from_file = prover(file_key, &budget, config);
    let from_mem = prover(mem_key, &budget, config);
    for (i, rs) in pairs.iter().enumerate() {
        let want =
            groth16::create_proof(circuit.clone(), params, rs.r, rs.s).expect("reference proof");
        let want_bytes = bytes(&want);
        let got = from_file
            .prove(Synthesis::Pce(&pce), circuit.clone(), *rs)
            .unwrap_or_else(|e| panic!("{name} pair {i}: pce proof failed: {e}"));
        assert_eq!(
            bytes(&got.proof),
            want_bytes,
            "{name} pair {i}: pce path, key from file"
        );
        assert!(got.self_checked);
        assert!(got.peak_charged_bytes > 0);
        // The same proof from a witness computed outside the prover.
        let witness = pce
            .synthesize_witness(circuit.clone())
            .expect("witness-only synthesis");
        if i == 0 {
            // A witness of the wrong length is refused with nothing left charged.
            let mut short = witness.clone();
            short.aux.pop();
            match from_file.prove_witness(&pce, short, None, *rs) {
                Err(ProverError::Pce(_)) => {}
                other => panic!("{name}: a short witness gave {other:?}"),
            }
        }
        let from_witness = from_file
            .prove_witness(&pce, witness, None, *rs)
            .unwrap_or_else(|e| panic!("{name} pair {i}: proof from a witness failed: {e}"));
        assert_eq!(
            bytes(&from_witness.proof),
            want_bytes,
            "{name} pair {i}: pce path from a computed witness"
        );
        assert!(from_witness.self_checked);
        let t = got.timings;
        assert!(
            t.total >= t.h + t.msm_total(),
            "{name}: phases fit in the total"
        );
        if plain_too {
            let got = from_mem
                .prove(Synthesis::Plain, circuit.clone(), *rs)
                .unwrap_or_else(|e| panic!("{name} pair {i}: plain proof failed: {e}"));
            assert_eq!(
                bytes(&got.proof),
                want_bytes,
                "{name} pair {i}: plain path, in-memory key"
            );
        }
        let key = from_file.key();
        assert!(
            verifies(key, &got.proof, public_inputs),
            "{name} pair {i}: verifies"
        );
        if public_inputs.is_empty() {
            assert!(
                !verifies(key, &got.proof, &[Scalar::ONE]),
                "{name}: extra input rejected"
            );
        } else {
            for j in 0..public_inputs.len() {
                let mut wrong = public_inputs.to_vec();
                wrong[j] += Scalar::ONE;
                assert!(
                    !verifies(key, &got.proof, &wrong),
                    "{name} pair {i}: wrong input {j} rejected"
                );
            }
        }
    }
    assert_eq!(
        budget.snapshot().used_in(Category::WorkingSet),
        0,
        "{name}: every working set returned"
    );
}

fn pairs(rng: &mut rand::rngs::StdRng, n: usize) -> Vec<Randomness> {
    let mut v: Vec<Randomness> = (0..n).map(|_| Randomness::random(rng)).collect();
    // Edge values of the blinding factors too.
    v.push(Randomness::new(Scalar::ZERO, Scalar::ONE));
    v
}

#[test]
fn random_r1cs_matches_reference() {
    let seed = seed();
    let mut rng = rng(seed);
    for (n_inputs, n_constraints) in [(0usize, 1usize), (1, 20), (4, 300), (9, 1500)] {
        let circuit = RandomR1cs {
            n_inputs,
            n_constraints,
            shape_seed: rng.random(),
            value_seed: rng.random(),
            corrupt: false,
        };
        let params = generate(circuit.clone(), &mut rng);
        let name = format!("random-{n_inputs}-{n_constraints}");
        let inputs = circuit.public_inputs();
        let rs = pairs(&mut rng, 2);
        check_equivalence(&name, circuit, &inputs, &params, &rs, true);
    }
}

#[test]
fn mimc_chain_matches_reference() {
    let seed = seed();
    let mut rng = rng(seed);
    let circuit = MimcChain::new(400, rng.random());
    let params = generate(circuit.clone(), &mut rng);
    let rs = pairs(&mut rng, 2);
    check_equivalence(
        "mimc-400",
        circuit.clone(),
        &[circuit.output()],
        &params,
        &rs,
        true,
    );
}

#[test]
fn sha256_one_block_matches_reference_and_rejects_bad_witness() {
    let seed = seed();
    let mut rng = rng(seed);
    let circuit = Sha256Circuit::with_blocks(1, rng.random());
    let params = generate(circuit.clone(), &mut rng);
    let rs = vec![Randomness::random(&mut rng)];
    check_equivalence(
        "sha256-1",
        circuit.clone(),
        &circuit.public_inputs(),
        &params,
        &rs,
        false,
    );

    // A corrupted witness of the same shape: typed error on both paths, no proof.
    let budget = big_budget();
    let p = prover(
        ProvingKey::from_parameters(&params),
        &budget,
        ProverConfig::default(),
    );
    let (_cache, pce) = record(&budget, "sha256-1", circuit.clone());
    let bad = Sha256Circuit {
        corrupt: true,
        ..circuit
    };
    for synthesis in [Synthesis::Pce(&pce), Synthesis::Plain] {
        match p.prove(synthesis, bad.clone(), rs[0]) {
            Err(ProverError::Unsatisfied {
                row, n_constraints, ..
            }) => {
                assert!(
                    row < n_constraints,
                    "the failing row is a circuit constraint"
                )
            }
            other => panic!("{synthesis:?}: expected Unsatisfied, got {other:?}"),
        }
    }
    assert_eq!(budget.snapshot().used_in(Category::WorkingSet), 0);
}

#[test]
fn prove_random_matches_create_random_proof() {
    let seed = seed();
    let mut rng = rng(seed);
    let circuit = MimcChain::new(50, rng.random());
    let params = generate(circuit.clone(), &mut rng);
    let budget = big_budget();
    let p = prover(
        ProvingKey::from_parameters(&params),
        &budget,
        ProverConfig::default(),
    );
    let rng_seed: u64 = rng.random();
    let want =
        groth16::create_random_proof(circuit.clone(), &params, &mut common::rng(rng_seed)).unwrap();
    let got = p
        .prove_random(Synthesis::Plain, circuit, &mut common::rng(rng_seed))
        .unwrap();
    assert_eq!(bytes(&got.proof), bytes(&want));
}

#[test]
fn batch_of_partitions_matches_reference_and_self_checks() {
    let seed = seed();
    let mut rng = rng(seed);
    let shape_seed: u64 = rng.random();
    let partitions: Vec<RandomR1cs> = (0..3)
        .map(|_| RandomR1cs {
            n_inputs: 3,
            n_constraints: 400,
            shape_seed,
            value_seed: rng.random(),
            corrupt: false,
        })
        .collect();
    let params = generate(partitions[0].clone(), &mut rng);
    let budget = big_budget();
    let key = key_via_file(&params, &budget, "batch");
    let (_cache, pce) = record(&budget, "batch", partitions[0].clone());
    let p = prover(key, &budget, ProverConfig::default());
    let rs: Vec<Randomness> = (0..3).map(|_| Randomness::random(&mut rng)).collect();
    for synthesis in [Synthesis::Pce(&pce), Synthesis::Plain] {
        let out = p.prove_batch(synthesis, partitions.clone(), &rs).unwrap();
        assert_eq!(out.proofs.len(), 3);
        let mut peak = 0;
        for (i, (proof, c)) in out.proofs.iter().zip(&partitions).enumerate() {
            assert!(proof.self_checked, "batches are self-checked by default");
            let want = groth16::create_proof(c.clone(), &params, rs[i].r, rs[i].s).unwrap();
            assert_eq!(
                bytes(&proof.proof),
                bytes(&want),
                "{synthesis:?} partition {i}"
            );
            assert!(verifies(p.key(), &proof.proof, &c.public_inputs()));
            peak = peak.max(proof.peak_charged_bytes);
        }
        assert_eq!(out.peak_charged_bytes, peak);
    }
}

#[test]
fn concurrent_proofs_share_one_prover() {
    let seed = seed();
    let mut rng = rng(seed);
    let circuit = MimcChain::new(200, rng.random());
    let params = generate(circuit.clone(), &mut rng);
    let budget = big_budget();
    let (_cache, pce) = record(&budget, "concurrent", circuit.clone());
    let p = prover(
        ProvingKey::from_parameters(&params),
        &budget,
        ProverConfig::default(),
    );
    let rs: Vec<Randomness> = (0..4).map(|_| Randomness::random(&mut rng)).collect();
    let proofs: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = rs
            .iter()
            .map(|rs| {
                let (p, pce, circuit) = (&p, &pce, circuit.clone());
                scope.spawn(move || p.prove(Synthesis::Pce(pce), circuit, *rs).unwrap())
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (out, rs) in proofs.iter().zip(&rs) {
        let want = groth16::create_proof(circuit.clone(), &params, rs.r, rs.s).unwrap();
        assert_eq!(bytes(&out.proof), bytes(&want));
    }
    assert_eq!(budget.snapshot().used_in(Category::WorkingSet), 0);
}

#[test]
fn keyed_chain_matches_reference() {
    let seed = seed();
    let mut rng = rng(seed);
    let circuit = groth16_prover::testing::KeyedChain {
        n_constraints: 700,
        n_keys: 16,
        seed: rng.random(),
    };
    let params = generate(circuit.clone(), &mut rng);
    let rs = pairs(&mut rng, 1);
    check_equivalence("keyed-700", circuit, &[], &params, &rs, true);
}

/// The benchmark's insecure parameters have exactly the shape the prover needs, and both
/// provers compute the same proof from them (which does not verify: unrelated points).
#[test]
fn insecure_bench_parameters_fit_the_circuit() {
    use groth16_prover::testing::{insecure_bench_parameters, KeyedChain, ParamShape};
    let seed = seed();
    let mut rng = rng(seed);
    for circuit in [
        KeyedChain {
            n_constraints: 300,
            n_keys: 16,
            seed: rng.random(),
        },
        KeyedChain {
            n_constraints: 1,
            n_keys: 1,
            seed: rng.random(),
        },
    ] {
        let budget = big_budget();
        let (_cache, pce) = record(&budget, "keyed", circuit.clone());
        let shape = ParamShape::of(&pce);
        let params = insecure_bench_parameters(shape, rng.random());
        assert_eq!(params.h.len(), shape.n_h);
        assert_eq!(params.b_g2.len(), shape.n_b);
        assert_eq!(params.vk.ic.len(), shape.n_inputs);
        let p = prover(
            ProvingKey::from_parameters(&params),
            &budget,
            ProverConfig::default(),
        );
        let rs = Randomness::random(&mut rng);
        let got = p
            .prove(Synthesis::Pce(&pce), circuit.clone(), rs)
            .expect("proof from bench parameters");
        let want = groth16::create_proof(circuit, &params, rs.r, rs.s).expect("reference");
        assert_eq!(bytes(&got.proof), bytes(&want));
        assert!(
            !verifies(p.key(), &got.proof, &[]),
            "unrelated points: no valid proof"
        );
    }
}
