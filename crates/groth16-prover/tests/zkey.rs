//! Proofs from snarkjs's `.zkey` (fixtures/snarkjs) verify against the zkey's own
//! verifying key; a wrong witness is refused; a zkey key never proves without its PCE.
//! (That snarkjs accepts these proofs is checked end to end by the CLI's interop test.)

mod common;

use std::path::PathBuf;

use bls12_381::Scalar;
use ff::{Field, PrimeField};
use groth16_prover::{
    BackendChoice, HStep, ProverConfig, ProverError, Randomness, SelfCheck, ZkeyProver,
};
use srs_store::PointCheck;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/snarkjs")
        .join(name)
}

/// The values of a `.wtns` (version 2): section 2 holds 32-byte little-endian values.
fn wtns_values(bytes: &[u8]) -> Vec<Scalar> {
    let n_sections = u32::from_le_bytes(bytes[8..12].try_into().unwrap());
    let mut at = 12;
    for _ in 0..n_sections {
        let id = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
        let len = u64::from_le_bytes(bytes[at + 4..at + 12].try_into().unwrap()) as usize;
        at += 12;
        if id == 2 {
            return bytes[at..at + len]
                .chunks_exact(32)
                .map(|c| Scalar::from_repr(c.try_into().unwrap()).unwrap())
                .collect();
        }
        at += len;
    }
    panic!("no values section");
}

fn prover(backend: BackendChoice) -> ZkeyProver {
    let config = ProverConfig {
        backend,
        self_check: SelfCheck::Always,
    };
    ZkeyProver::open(
        fixture("example.zkey"),
        &common::big_budget(),
        config,
        PointCheck::Full,
    )
    .unwrap()
}

#[test]
fn zkey_proofs_verify_with_the_zkeys_key() {
    let seed = common::seed();
    let mut rng = common::rng(seed);
    let zk = prover(BackendChoice::Cpu);
    assert!(matches!(
        zk.prover().key().h_step(),
        HStep::CosetEvaluations { .. }
    ));
    let w = wtns_values(&std::fs::read(fixture("example.wtns")).unwrap());
    // input.json: a = 3, b = 11 → c = 9·11 + 3·11 = 132; public values c, b.
    assert_eq!(w[1], Scalar::from(132u64));
    assert_eq!(w[2], Scalar::from(11u64));
    for _ in 0..3 {
        let out = zk.prove(&w, Randomness::random(&mut rng)).unwrap();
        assert!(out.self_checked, "seed {seed}");
        groth16::verify_proof(zk.prover().key().prepared_vk(), &out.proof, &w[1..3])
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert_eq!(out.shape.domain_size, 8);
    }
}

#[test]
fn a_wrong_witness_fails_the_self_check() {
    let zk = prover(BackendChoice::Cpu);
    let mut w = wtns_values(&std::fs::read(fixture("example.wtns")).unwrap());
    // x = a² is signal 4; 10 ≠ 9 breaks a constraint but keeps every length.
    w[4] = Scalar::from(10u64);
    let err = zk
        .prove(&w, Randomness::new(Scalar::ONE, Scalar::ONE))
        .unwrap_err();
    assert!(matches!(err, ProverError::SelfCheckFailed { .. }), "{err}");
    let err = zk
        .prove(&w[..5], Randomness::new(Scalar::ONE, Scalar::ONE))
        .unwrap_err();
    assert!(matches!(err, ProverError::Witness { .. }), "{err}");
    w[0] = Scalar::from(2u64);
    let err = zk
        .prove(&w, Randomness::new(Scalar::ONE, Scalar::ONE))
        .unwrap_err();
    assert!(matches!(err, ProverError::Witness { .. }), "{err}");
}

#[test]
fn gpu_and_cpu_give_the_same_zkey_proof() {
    // GPU when a device opens (Auto), else the CPU twice: the proofs of one (r, s) agree.
    let seed = common::seed();
    let mut rng = common::rng(seed);
    let rs = Randomness::random(&mut rng);
    let w = wtns_values(&std::fs::read(fixture("example.wtns")).unwrap());
    let cpu = prover(BackendChoice::Cpu).prove(&w, rs).unwrap();
    let auto = prover(BackendChoice::Auto);
    let other = auto.prove(&w, rs).unwrap();
    assert!(
        cpu.proof == other.proof,
        "seed {seed}, backend {}",
        other.backend
    );
}

/// A zkey written by `setup::generate_zkey` reads back through srs-store's zkey reader
/// (the one that reads snarkjs's files), proves, and its proofs verify with the zkey's
/// own key — for circuits with several public inputs, A/B density gaps and arbitrary
/// coefficients. (That snarkjs proves with it is the CLI's interop test.)
#[test]
fn generated_zkeys_prove_and_verify() {
    use groth16_prover::testing::{MimcChain, RandomR1cs};
    let seed = common::seed();
    let mut rng = common::rng(seed);
    let dir = common::TempDir::new("generated-zkey");
    let random = RandomR1cs {
        n_inputs: 5,
        n_constraints: 300,
        shape_seed: seed,
        value_seed: seed ^ 1,
        corrupt: false,
    };
    let cases: Vec<(&str, pce_cache::Pce, pce_cache::Witness)> = vec![
        {
            let pce = pce_cache::Pce::record(MimcChain::new(40, seed)).unwrap();
            let w = pce.synthesize_witness(MimcChain::new(40, seed)).unwrap();
            ("mimc", pce, w)
        },
        {
            let pce = pce_cache::Pce::record(random.clone()).unwrap();
            let w = pce.synthesize_witness(random).unwrap();
            ("random", pce, w)
        },
    ];
    for (name, pce, witness) in cases {
        let path = dir.0.join(format!("{name}.zkey"));
        let report = groth16_prover::setup::generate_zkey(
            &pce,
            &mut rng,
            &common::big_budget(),
            std::io::BufWriter::new(std::fs::File::create(&path).unwrap()),
        )
        .unwrap();
        assert_eq!(
            report.bytes_written,
            std::fs::metadata(&path).unwrap().len(),
            "{name}"
        );
        let zk = ZkeyProver::open(
            &path,
            &common::big_budget(),
            ProverConfig {
                backend: BackendChoice::Cpu,
                self_check: SelfCheck::Always,
            },
            PointCheck::Full,
        )
        .unwrap_or_else(|e| panic!("{name}, seed {seed}: {e}"));
        assert_eq!(zk.n_public() as u32, report.n_public, "{name}");
        assert_eq!(zk.n_vars() as u32, report.n_vars, "{name}");
        let signals: Vec<Scalar> = witness.inputs.iter().chain(&witness.aux).copied().collect();
        let out = zk
            .prove(&signals, Randomness::random(&mut rng))
            .unwrap_or_else(|e| panic!("{name}, seed {seed}: {e}"));
        assert!(out.self_checked);
        groth16::verify_proof(
            zk.prover().key().prepared_vk(),
            &out.proof,
            &witness.inputs[1..],
        )
        .unwrap_or_else(|e| panic!("{name}, seed {seed}: {e}"));
        // Another public value: the proof does not verify.
        let mut wrong = witness.inputs[1..].to_vec();
        wrong[0] += Scalar::ONE;
        assert!(
            groth16::verify_proof(zk.prover().key().prepared_vk(), &out.proof, &wrong).is_err(),
            "{name}, seed {seed}"
        );
    }
}
