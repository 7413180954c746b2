//! A 2 KiB sector sealed by filecoin-proofs inside the test (add piece, pre-commit 1 and 2,
//! commit 1), its C2 proved by Pinion with insecure parameters from groth16-prover's
//! generator (made once, cached under `target/pinion-filecoin-params/`), and checked:
//! accepted by filecoin-proofs' `verify_seal` with those parameters' vk, byte-identical to
//! bellperson's prover for the same (r, s), and bad inputs refused with typed errors.
//!
//! Slow (parameter generation about a minute the first time, two provers): runs when
//! `PINION_FILECOIN_TESTS=1` (`.ci/run` sets it), else says it is skipped.

use std::convert::TryInto;
use std::path::PathBuf;
use std::time::Instant;

use filecoin_proofs::parameters::setup_params;
use filecoin_proofs::{as_safe_commitment, DefaultPieceHasher, SectorShape2KiB};
use filecoin_proofs_api::seal::{verify_seal, SealCommitPhase1Output};
use filecoin_proofs_api::{RegisteredSealProof, SectorId};
use groth16_prover::testing::{test_seed, SplitMix};
use groth16_prover::Randomness;
use memory_budget::Budget;
use pinion_filecoin::porep::{self, C2Target};
use pinion_filecoin::{job, FilecoinError, ProveOptions};
use storage_proofs_core::compound_proof::{CompoundProof, SetupParams};
use storage_proofs_porep::stacked::{self, StackedCompound, StackedDrg, Tau};

mod common;

use common::*;

/// The insecure 2 KiB PoRep parameters, generated once.
fn porep_params(dir: &std::path::Path, budget: &Budget) -> PathBuf {
    insecure_params(porep::blank_job(PROOF).unwrap().as_ref(), dir, budget)
}

/// bellperson's own proof of the single partition for (r, s), through filecoin-proofs'
/// circuit construction.
fn bellperson_proof(c1: &SealCommitPhase1Output, path: PathBuf, rs: Randomness) -> Vec<u8> {
    type Tree = SectorShape2KiB;
    type Compound = StackedCompound<Tree, DefaultPieceHasher>;
    let config = PROOF.as_v1_config();
    let pp = <Compound as CompoundProof<StackedDrg<'_, Tree, DefaultPieceHasher>, _>>::setup(
        &SetupParams {
            vanilla_params: setup_params(&config).unwrap(),
            partitions: Some(1),
            priority: false,
        },
    )
    .unwrap();
    let vanilla: Vec<Vec<stacked::Proof<Tree, DefaultPieceHasher>>> =
        c1.vanilla_proofs.clone().try_into().unwrap();
    let inputs = stacked::PublicInputs {
        replica_id: c1.replica_id,
        tau: Some(Tau {
            comm_d: as_safe_commitment(&c1.comm_d, "comm_d").unwrap(),
            comm_r: as_safe_commitment(&c1.comm_r, "comm_r").unwrap(),
        }),
        k: None,
        seed: Some(c1.seed),
    };
    let circuit =
        <Compound as CompoundProof<StackedDrg<'_, Tree, DefaultPieceHasher>, _>>::circuit(
            &inputs,
            (),
            &vanilla[0],
            &pp.vanilla_params,
            Some(0),
        )
        .unwrap();
    let params =
        bellperson::groth16::Parameters::<blstrs::Bls12>::build_mapped_parameters(path, false)
            .unwrap();
    use pinion_filecoin::bridge::to_blstrs;
    let t = Instant::now();
    let proof =
        bellperson::groth16::create_proof(circuit, &params, to_blstrs(&rs.r), to_blstrs(&rs.s))
            .unwrap();
    eprintln!("bellperson's prover: {:?}", t.elapsed());
    let mut bytes = Vec::new();
    proof.write(&mut bytes).unwrap();
    bytes
}

#[test]
fn c2_of_a_2kib_sector_verifies_and_equals_bellpersons() {
    if !enabled() {
        return;
    }
    let seed = test_seed();
    let mut g = SplitMix::new(seed);
    let dir = params_dir();
    let budget = Budget::fixed(16 << 30);
    let path = porep_params(&dir, &budget);
    let sealed = seal(&mut g);

    let rs = Randomness::new(g.scalar(), g.scalar());
    let c1 = porep::parse_c1(&wrapped(&sealed.c1, 2048)).unwrap();
    let job = porep::porep_job(
        c1,
        &C2Target {
            miner_id: MINER,
            sector_number: None,
            expect: Some(PROOF),
        },
    )
    .unwrap();
    let mut opts = ProveOptions::new(&dir, budget.clone());
    opts.randomness = Some(vec![rs]);
    let t = Instant::now();
    let proof = job::prove(job.as_ref(), &opts).unwrap();
    eprintln!("pinion c2 (record, load, prove, verify): {:?}", t.elapsed());
    assert_eq!(proof.len(), pinion_filecoin::PARTITION_PROOF_BYTES);

    let verify = |proof: &[u8]| {
        verify_seal(
            PROOF,
            sealed.c1.comm_r,
            sealed.c1.comm_d,
            porep::prover_id(MINER),
            SectorId::from(SECTOR),
            sealed.ticket,
            sealed.seed,
            proof,
        )
    };
    assert!(
        verify(&proof).unwrap(),
        "verify_seal accepts pinion's proof"
    );
    let mut bad = proof.clone();
    bad[100] ^= 1;
    assert!(!verify(&bad).unwrap_or(false), "a changed byte is refused");

    let theirs = bellperson_proof(&sealed.c1, path, rs);
    assert_eq!(
        proof, theirs,
        "byte-identical to bellperson's proof for the same (r, s)"
    );
}

#[test]
fn bad_c1_inputs_and_parameters_are_typed_errors() {
    if !enabled() {
        return;
    }
    let mut g = SplitMix::new(test_seed());
    let _ = params_dir();
    let sealed = seal(&mut g);
    let target = C2Target {
        miner_id: MINER,
        sector_number: Some(SECTOR),
        expect: Some(PROOF),
    };
    let bare = serde_json::to_vec(&sealed.c1).unwrap();

    // Another sector size or proof version than expected.
    let other = C2Target {
        expect: Some(RegisteredSealProof::StackedDrg8MiBV1_1),
        ..target
    };
    match porep::porep_job(porep::parse_c1(&bare).unwrap(), &other) {
        Err(e @ FilecoinError::ProofTypeMismatch { .. }) => eprintln!("{e}"),
        other => panic!("expected a proof type mismatch, got {:?}", other.err()),
    }
    let v1 = C2Target {
        expect: Some(RegisteredSealProof::StackedDrg2KiBV1),
        ..target
    };
    assert!(matches!(
        porep::porep_job(porep::parse_c1(&bare).unwrap(), &v1),
        Err(FilecoinError::ProofTypeMismatch { .. })
    ));
    // The wrapper says 8 MiB.
    match porep::parse_c1(&wrapped(&sealed.c1, 8 << 20)) {
        Err(
            e @ FilecoinError::SectorSizeMismatch {
                expected,
                found: 2048,
                ..
            },
        ) => {
            assert_eq!(expected, 8 << 20);
            eprintln!("{e}");
        }
        other => panic!("expected a sector size mismatch, got {:?}", other.err()),
    }
    // Another miner: the replica id does not match.
    let thief = C2Target {
        miner_id: MINER + 1,
        ..target
    };
    assert!(matches!(
        porep::porep_job(porep::parse_c1(&bare).unwrap(), &thief),
        Err(FilecoinError::Filecoin {
            what: "c1 replica id",
            ..
        })
    ));
    // A tampered vanilla proof: one byte of a 32-byte value in the first partition's proof.
    let mut json: serde_json::Value = serde_json::from_slice(&bare).unwrap();
    assert!(
        tamper(&mut json["vanilla_proofs"]),
        "found a 32-byte value to change"
    );
    let tampered = serde_json::to_vec(&json).unwrap();
    match porep::parse_c1(&tampered).and_then(|c1| porep::porep_job(c1, &target)) {
        Err(e @ FilecoinError::InvalidVanillaProof { .. }) => eprintln!("{e}"),
        other => panic!("expected an invalid vanilla proof, got {:?}", other.err()),
    }
    // Not JSON at all.
    assert!(matches!(
        porep::parse_c1(b"{\"Phase1Out\": 3}"),
        Err(FilecoinError::Decode { .. })
    ));

    // Parameters of another circuit under the PoRep's name: refused before loading.
    let job = porep::porep_job(porep::parse_c1(&bare).unwrap(), &target).unwrap();
    let wrong = std::env::temp_dir().join(format!("pinion-wrong-params-{}", std::process::id()));
    std::fs::create_dir_all(&wrong).unwrap();
    let wrong = TempDir(wrong);
    let small = pce_cache::Pce::record(groth16_prover::testing::MimcChain::new(40, 1)).unwrap();
    let file = std::fs::File::create(wrong.0.join(job.circuit_id().params_file_name())).unwrap();
    let budget = Budget::fixed(4 << 30);
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(g.next_u64());
    groth16_prover::setup::generate(&small, &mut rng, &budget, file).unwrap();
    match job::prove(job.as_ref(), &ProveOptions::new(&wrong.0, budget.clone())) {
        Err(e @ FilecoinError::ParamsMismatch { .. }) => eprintln!("{e}"),
        other => panic!("expected a parameter mismatch, got {:?}", other.err()),
    }
    match job::prove(
        job.as_ref(),
        &ProveOptions::new(wrong.0.join("none"), budget),
    ) {
        Err(e @ FilecoinError::ParamsMissing { .. }) => eprintln!("{e}"),
        other => panic!("expected missing parameters, got {:?}", other.err()),
    }
}

/// Changes the low byte of the first array of 32 small numbers (a serialized domain
/// element) found depth-first.
fn tamper(v: &mut serde_json::Value) -> bool {
    match v {
        serde_json::Value::Array(items) => {
            if items.len() == 32 && items.iter().all(|x| x.as_u64().is_some_and(|n| n < 256)) {
                let x = items[0].as_u64().unwrap_or(0);
                items[0] = serde_json::Value::from(x ^ 1);
                return true;
            }
            items.iter_mut().any(tamper)
        }
        serde_json::Value::Object(map) => map.values_mut().any(tamper),
        _ => false,
    }
}
