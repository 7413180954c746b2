//! `porep::synthetic_job`: the 2 KiB PoRep circuit with a synthetic (timing-only)
//! partition. Its witness has the recorded shape, a real proof's mix of bits and field
//! elements, fails the circuit (so the prover refuses it by default), and is the same for
//! the same seed. Slow-ish (one recording, three witness syntheses): runs when
//! `PINION_FILECOIN_TESTS=1`.

use bls12_381::Scalar;
use filecoin_proofs_api::RegisteredSealProof;
use groth16_prover::{Prover, ProverConfig, ProverError, ProvingKey, Randomness, Synthesis};
use memory_budget::Budget;
use pinion_filecoin::{bridge::Replay, job, porep, FilecoinError};

#[test]
fn synthetic_partitions_have_the_shape_and_mix_of_a_real_witness_but_fail_the_circuit() {
    if !pinion_filecoin::testing::enabled("synthesize a synthetic 2 KiB PoRep partition") {
        return;
    }
    let budget = Budget::fixed(8 << 30);
    let proof = RegisteredSealProof::StackedDrg2KiBV1_1;
    let synthetic = porep::synthetic_job(proof, 7).expect("synthetic job");
    let blank = porep::blank_job(proof).expect("blank job");
    assert_eq!(synthetic.circuit_id(), blank.circuit_id());
    let (pce, _charge) = job::record(synthetic.as_ref(), &budget).expect("record");
    let (blank_pce, _blank_charge) = job::record(blank.as_ref(), &budget).expect("record");
    assert_eq!(
        pce.fingerprint(),
        blank_pce.fingerprint(),
        "the same circuit"
    );
    let shape = pce.shape();
    let w = synthetic.witness(0, shape).expect("witness");
    assert_eq!(w.inputs.len() as u64, shape.n_inputs);
    assert_eq!(w.aux.len() as u64, shape.n_aux);
    let bits = w
        .aux
        .iter()
        .filter(|x| **x == Scalar::zero() || **x == Scalar::one())
        .count();
    let share = bits as f64 / w.aux.len() as f64;
    assert!(
        share > 0.9,
        "mostly bits (sha-256 gadgets), found {share:.3}"
    );
    assert!(share < 1.0, "and some field elements");
    assert_eq!(
        w,
        synthetic.witness(0, shape).expect("witness"),
        "deterministic"
    );
    assert!(pce.check(&w.inputs, &w.aux).is_err(), "unsatisfied");
    assert!(matches!(
        synthetic.public_inputs(0),
        Err(FilecoinError::Unsupported(_))
    ));
    // The prover refuses it (the timing-only switch is never turned on here).
    let shape_p = groth16_prover::testing::ParamShape::of(&pce);
    let params = groth16_prover::testing::insecure_bench_parameters(shape_p, 1);
    let prover = Prover::new(
        std::sync::Arc::new(ProvingKey::from_parameters(&params)),
        budget.clone(),
        ProverConfig {
            backend: groth16_prover::BackendChoice::Cpu,
            ..ProverConfig::default()
        },
    )
    .expect("prover");
    let err = prover
        .prove(
            Synthesis::Pce(&pce),
            Replay(w),
            Randomness::random(&mut rand::rng()),
        )
        .expect_err("an unsatisfied witness is refused");
    assert!(matches!(err, ProverError::Unsatisfied { .. }), "{err}");
}
