//! Window PoSt, Winning PoSt and SnapDeals of a 2 KiB sector sealed inside the test, proved
//! by Pinion from the inputs Curio hands cuzk (bincode vanilla proofs + randomness;
//! partition proofs + comm_r_old/new + comm_d_new) with insecure parameters generated once,
//! and accepted by filecoin-proofs' verifiers; tampered inputs are typed errors.
//!
//! Runs when `PINION_FILECOIN_TESTS=1` (`.ci/run` sets it), else says it is skipped.

use std::collections::BTreeMap;
use std::time::Instant;

use filecoin_proofs_api::post::{
    generate_fallback_sector_challenges, generate_single_vanilla_proof, verify_window_post,
    verify_winning_post,
};
use filecoin_proofs_api::update::{
    empty_sector_update_encode_into, generate_partition_proofs, verify_empty_sector_update_proof,
};
use filecoin_proofs_api::{
    PrivateReplicaInfo, PublicReplicaInfo, RegisteredPoStProof, RegisteredUpdateProof, SectorId,
};
use groth16_prover::testing::{test_seed, SplitMix};
use memory_budget::Budget;
use pinion_filecoin::post::{self, PostRequest};
use pinion_filecoin::snap::{self, SnapRequest};
use pinion_filecoin::{job, FilecoinError, ProofKind, ProveOptions};

mod common;

use common::*;

/// The vanilla proof of `sector` for `randomness`, as Curio computes it.
fn vanilla(proof: RegisteredPoStProof, sealed: &Sealed, randomness: &[u8; 32]) -> Vec<u8> {
    let id = SectorId::from(SECTOR);
    let challenges = generate_fallback_sector_challenges(proof, randomness, &[id], porep_prover())
        .expect("challenges");
    let replica = PrivateReplicaInfo::new(
        proof,
        sealed.c1.comm_r,
        sealed.cache.clone(),
        sealed.sealed.clone(),
    );
    generate_single_vanilla_proof(proof, id, &replica, &challenges[&id]).expect("vanilla proof")
}

/// Randomness other than `good`; with `same_first_leaf`, one whose first challenged leaf of
/// the test's sector is the one `good` challenges first (found by trying, 1 in 64 hits).
fn other_randomness(
    proof: RegisteredPoStProof,
    good: &[u8; 32],
    same_first_leaf: bool,
    g: &mut SplitMix,
) -> [u8; 32] {
    let id = SectorId::from(SECTOR);
    let first = |r: &[u8; 32]| {
        generate_fallback_sector_challenges(proof, r, &[id], porep_prover()).expect("challenges")
            [&id][0]
    };
    let want = first(good);
    for _ in 0..10_000 {
        let r = bytes32(g);
        if r != *good && (!same_first_leaf || first(&r) == want) {
            return r;
        }
    }
    panic!("no randomness with first leaf {want} in 10,000 tries");
}

fn porep_prover() -> [u8; 32] {
    pinion_filecoin::porep::prover_id(MINER)
}

#[test]
fn window_and_winning_post_verify() {
    if !enabled() {
        return;
    }
    let mut g = SplitMix::new(test_seed());
    let dir = params_dir();
    let budget = Budget::fixed(8 << 30);
    let sealed = seal(&mut g);

    for (kind, proof) in [
        (
            ProofKind::WinningPost,
            RegisteredPoStProof::StackedDrgWinning2KiBV1,
        ),
        (
            ProofKind::WindowPost,
            RegisteredPoStProof::StackedDrgWindow2KiBV1_2,
        ),
    ] {
        insecure_params(post::blank_job(proof).unwrap().as_ref(), &dir, &budget);
        let randomness = bytes32(&mut g);
        let req = PostRequest {
            proof,
            vanilla_proofs: vec![vanilla(proof, &sealed, &randomness)],
            randomness,
            miner_id: MINER,
            partition: None,
        };
        let t = Instant::now();
        let job = post::post_job(kind, &req).unwrap();
        let bytes = job::prove(job.as_ref(), &ProveOptions::new(&dir, budget.clone())).unwrap();
        eprintln!(
            "{}: {} bytes in {:?}",
            kind.name(),
            bytes.len(),
            t.elapsed()
        );
        assert_eq!(bytes.len(), pinion_filecoin::PARTITION_PROOF_BYTES);
        let replicas: BTreeMap<SectorId, PublicReplicaInfo> = [(
            SectorId::from(SECTOR),
            PublicReplicaInfo::new(proof, sealed.c1.comm_r),
        )]
        .into();
        let ok = match kind {
            ProofKind::WinningPost => {
                verify_winning_post(&randomness, &bytes, &replicas, porep_prover())
            }
            _ => verify_window_post(&randomness, &[(proof, &bytes)], &replicas, porep_prover()),
        };
        assert!(ok.expect("verifier runs"), "{} verifies", kind.name());

        // The same request as the other kind, tampered vanilla proofs, garbage.
        let other = if kind == ProofKind::WindowPost {
            ProofKind::WinningPost
        } else {
            ProofKind::WindowPost
        };
        assert!(matches!(
            post::post_job(other, &req),
            Err(FilecoinError::ProofTypeMismatch { .. })
        ));
        // Other randomness fails the vanilla check: any, and one whose first challenged
        // leaf is the same (filecoin-proofs' own check of a Winning PoSt looks at that
        // leaf only, unless given the sector once per challenge).
        for same_first_leaf in [false, true] {
            let mut bad = req.clone();
            bad.randomness = other_randomness(proof, &req.randomness, same_first_leaf, &mut g);
            match post::post_job(kind, &bad) {
                Err(e @ FilecoinError::InvalidVanillaProof { .. }) => eprintln!("{e}"),
                other => panic!(
                    "expected an invalid vanilla proof (same first leaf: {same_first_leaf}), got {:?}",
                    other.err()
                ),
            }
        }
        let mut bad = req.clone();
        let n = bad.vanilla_proofs[0].len();
        bad.vanilla_proofs[0].truncate(n / 2);
        assert!(matches!(
            post::post_job(kind, &bad),
            Err(FilecoinError::Decode { .. })
        ));
    }
}

#[test]
fn snap_deals_update_verifies() {
    if !enabled() {
        return;
    }
    let mut g = SplitMix::new(test_seed());
    let dir = params_dir();
    let budget = Budget::fixed(8 << 30);
    let sealed = seal(&mut g);
    let update = RegisteredUpdateProof::StackedDrg2KiBV1;
    insecure_params(snap::blank_job(update).unwrap().as_ref(), &dir, &budget);

    // New data into the sealed sector (the sector key).
    let root = &sealed.dir.0;
    let staged = root.join("staged-new");
    let data: Vec<u8> = (0..2032).map(|_| g.next_u64() as u8).collect();
    let staged_file = std::fs::File::create(&staged).unwrap();
    let mut reader = std::io::Cursor::new(&data);
    let (piece, _) = filecoin_proofs_api::seal::add_piece(
        PROOF,
        &mut reader,
        &mut std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&staged)
            .unwrap(),
        filecoin_proofs_api::UnpaddedBytesAmount(2032),
        &[],
    )
    .unwrap();
    drop(staged_file.sync_all());
    let new_replica = root.join("replica-new");
    let new_cache = root.join("cache-new");
    std::fs::create_dir_all(&new_cache).unwrap();
    // The new replica has the sector key's size.
    std::fs::File::create(&new_replica)
        .and_then(|f| f.set_len(2048))
        .unwrap();
    let encoded = empty_sector_update_encode_into(
        update,
        &new_replica,
        &new_cache,
        &sealed.sealed,
        &sealed.cache,
        &staged,
        &[piece],
    )
    .expect("encode");
    let partition_proofs = generate_partition_proofs(
        update,
        sealed.c1.comm_r,
        encoded.comm_r_new,
        encoded.comm_d_new,
        &sealed.sealed,
        &sealed.cache,
        &new_replica,
        &new_cache,
    )
    .expect("partition proofs");
    let req = SnapRequest {
        proof: update,
        partition_proofs: partition_proofs.into_iter().map(|p| p.0).collect(),
        comm_r_old: sealed.c1.comm_r,
        comm_r_new: encoded.comm_r_new,
        comm_d_new: encoded.comm_d_new,
    };
    let t = Instant::now();
    let job = snap::snap_job(&req).unwrap();
    let bytes = job::prove(job.as_ref(), &ProveOptions::new(&dir, budget.clone())).unwrap();
    eprintln!("snap-deals: {} bytes in {:?}", bytes.len(), t.elapsed());
    assert_eq!(bytes.len() % pinion_filecoin::PARTITION_PROOF_BYTES, 0);
    assert!(verify_empty_sector_update_proof(
        update,
        &bytes,
        req.comm_r_old,
        req.comm_r_new,
        req.comm_d_new
    )
    .expect("verifier runs"));

    // A wrong commitment fails the vanilla check; a missing partition is a count error.
    let mut bad = req.clone();
    bad.comm_r_new = bad.comm_r_old;
    match snap::snap_job(&bad) {
        Err(e @ FilecoinError::InvalidVanillaProof { .. }) => eprintln!("{e}"),
        other => panic!("expected an invalid vanilla proof, got {:?}", other.err()),
    }
    let mut bad = req.clone();
    bad.partition_proofs.pop();
    assert!(matches!(
        snap::snap_job(&bad),
        Err(FilecoinError::CountMismatch { .. })
    ));
}
