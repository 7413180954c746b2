//! The bellperson bridge against bellperson's own prover: circuits written for bellperson
//! (over blstrs) are recorded and witnessed through the bridge, proved by Pinion with
//! parameters from groth16-prover's generator, and the proof bytes equal bellperson's for
//! the same parameters and (r, s).

use bellperson::gadgets::boolean::{AllocatedBit, Boolean};
use bellperson::gadgets::{multipack, sha256};
use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar as Fr;
use ff013::Field;
use groth16_prover::testing::{test_seed, SplitMix};
use groth16_prover::{Prover, ProverConfig, ProvingKey, Randomness, Synthesis};
use memory_budget::Budget;
use pinion_filecoin::bridge::{to_bls, to_blstrs, RecordingCs, Replay, WitnessCs};
use rand::{RngExt, SeedableRng};

/// `x_{i+1} = (x_i + k_i)^3`, the output and one constant public.
#[derive(Clone)]
struct Mimc {
    x0: Fr,
    constants: Vec<Fr>,
}

impl Circuit<Fr> for Mimc {
    fn synthesize<CS: ConstraintSystem<Fr>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let k0 = cs.alloc_input(|| "k0", || Ok(self.constants[0]))?;
        let mut x_val = self.x0;
        let mut x = cs.alloc(|| "x0", || Ok(x_val))?;
        for (i, k) in self.constants.iter().enumerate() {
            let t = x_val + k;
            let sq_val = t.square();
            let sq = cs.alloc(|| format!("sq{i}"), || Ok(sq_val))?;
            let kvar = if i == 0 { k0 } else { CS::one() };
            let kc = if i == 0 { Fr::ONE } else { *k };
            cs.enforce(
                || "sq",
                |lc| lc + x + (kc, kvar),
                |lc| lc + x + (kc, kvar),
                |lc| lc + sq,
            );
            let next_val = sq_val * t;
            let next = if i + 1 == self.constants.len() {
                cs.alloc_input(|| "out", || Ok(next_val))?
            } else {
                cs.alloc(|| "x", || Ok(next_val))?
            };
            cs.enforce(
                || "cube",
                |lc| lc + sq,
                |lc| lc + x + (kc, kvar),
                |lc| lc + next,
            );
            x = next;
            x_val = next_val;
        }
        Ok(())
    }
}

/// SHA-256 of a 55-byte message with bellperson's gadget, digest packed into inputs.
#[derive(Clone)]
struct Sha(Vec<u8>);

impl Circuit<Fr> for Sha {
    fn synthesize<CS: ConstraintSystem<Fr>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let bits: Vec<Boolean> = multipack::bytes_to_bits(&self.0)
            .into_iter()
            .enumerate()
            .map(|(i, b)| {
                AllocatedBit::alloc(cs.namespace(|| format!("bit {i}")), Some(b)).map(Boolean::from)
            })
            .collect::<Result<_, _>>()?;
        let digest = sha256::sha256(cs.namespace(|| "sha256"), &bits)?;
        multipack::pack_into_inputs(cs.namespace(|| "digest"), &digest)
    }
}

fn fr(g: &mut SplitMix) -> Fr {
    to_blstrs(&g.scalar())
}

/// Pinion (through the bridge) and bellperson prove `circuit` with the same generated
/// parameters and (r, s); the proofs must be byte-identical and verify.
fn check<C: Circuit<Fr> + Clone + Send>(name: &str, circuit: C, seed: u64) {
    let budget = Budget::fixed(4 << 30);
    let (pce, _) = RecordingCs::record(circuit.clone(), None).expect("record");
    let mut params = Vec::new();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    groth16_prover::setup::generate(&pce, &mut rng, &budget, &mut params).expect("generate");
    let dir = std::env::temp_dir().join(format!("pinion-fc-bridge-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("p.params");
    std::fs::write(&path, &params).unwrap();
    let key = ProvingKey::load(&path, &budget, &Default::default()).expect("load");
    let _ = std::fs::remove_dir_all(&dir);
    let prover = Prover::new(
        std::sync::Arc::new(key),
        budget.clone(),
        ProverConfig::default(),
    )
    .expect("prover");
    let rs = Randomness::random(&mut rng);
    let shape = pce.shape();
    let witness = WitnessCs::synthesize(
        circuit.clone(),
        shape.n_inputs as usize,
        shape.n_aux as usize,
    )
    .expect("witness");
    let inputs: Vec<bls12_381::Scalar> = witness.inputs[1..].to_vec();
    let ours = prover
        .prove(Synthesis::Pce(&pce), Replay(witness), rs)
        .expect("prove")
        .proof;
    assert!(groth16::verify_proof(prover.key().prepared_vk(), &ours, &inputs).is_ok());
    let mut ours_bytes = Vec::new();
    ours.write(&mut ours_bytes).unwrap();

    let bp_params = bellperson::groth16::Parameters::<blstrs::Bls12>::read(&params[..], true)
        .expect("bellperson reads the generated parameters");
    let theirs =
        bellperson::groth16::create_proof(circuit, &bp_params, to_blstrs(&rs.r), to_blstrs(&rs.s))
            .expect("bellperson proves");
    let mut theirs_bytes = Vec::new();
    theirs.write(&mut theirs_bytes).unwrap();
    let pvk = bellperson::groth16::prepare_verifying_key(&bp_params.vk);
    let bp_inputs: Vec<Fr> = inputs.iter().map(to_blstrs).collect();
    assert!(bellperson::groth16::verify_proof(&pvk, &theirs, &bp_inputs).unwrap());
    eprintln!(
        "{name}: {} constraints, {} inputs",
        shape.n_constraints, shape.n_inputs
    );
    assert_eq!(ours_bytes.len(), pinion_filecoin::PARTITION_PROOF_BYTES);
    assert_eq!(ours_bytes, theirs_bytes, "{name}: proofs differ");
}

#[test]
fn proofs_equal_bellpersons_for_the_same_parameters_and_randomness() {
    let seed = test_seed();
    let mut g = SplitMix::new(seed);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    for _ in 0..2 {
        let n = rng.random_range(1..200usize);
        let circuit = Mimc {
            x0: fr(&mut g),
            constants: (0..n).map(|_| fr(&mut g)).collect(),
        };
        check("mimc", circuit, g.next_u64());
    }
    let msg: Vec<u8> = (0..55).map(|_| g.next_u64() as u8).collect();
    check("sha256", Sha(msg), g.next_u64());
}

#[test]
fn scalars_round_trip_through_canonical_bytes() {
    let mut g = SplitMix::new(test_seed());
    for _ in 0..1000 {
        let x = g.scalar();
        assert_eq!(to_bls(&to_blstrs(&x)), x);
    }
    assert_eq!(to_bls(&-Fr::ONE), -bls12_381::Scalar::one());
    assert_eq!(to_bls(&Fr::ZERO), bls12_381::Scalar::zero());
    assert_eq!(to_bls(&Fr::ONE), bls12_381::Scalar::one());
    assert_eq!(to_bls(&(Fr::ONE + Fr::ONE)), bls12_381::Scalar::from(2u64));
}
