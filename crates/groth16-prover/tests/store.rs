//! Keys over an `SrsStore`: proofs read the store's one copy of the bases (bls-repr layout,
//! no converted copy) and equal the reference; two keys that do not both fit the budget
//! alternate, the store demoting the idle one and loading it again; a key a proof holds is
//! never evicted.

mod common;

use std::time::Duration;

use groth16_prover::testing::MimcChain;
use groth16_prover::{
    BasesKind, Prover, ProverConfig, ProverError, ProvingKey, Randomness, SelfCheck, Synthesis,
};
use memory_budget::{Budget, Category};
use rand::RngExt;
use srs_store::{SrsError, SrsSpec, SrsStore, StoreConfig, Tier};

use common::*;

/// A store that may evict an idle entry at once and never waits for the budget.
fn eager_store(budget: &Budget) -> SrsStore {
    SrsStore::new(
        budget.clone(),
        StoreConfig {
            min_idle: Duration::ZERO,
            reserve_timeout: Some(Duration::ZERO),
            ..StoreConfig::default()
        },
    )
}

/// Small load windows, so a load's peak is close to what it keeps.
fn spec(id: &str, path: &std::path::Path) -> SrsSpec {
    let mut spec = SrsSpec::new(id, path);
    spec.options.chunk_bytes = 16 << 10;
    spec
}

fn write(params: &groth16::Parameters<bls12_381::Bls12>, dir: &TempDir) -> std::path::PathBuf {
    let path = dir.0.join("circuit.params");
    let mut bytes = Vec::new();
    params.write(&mut bytes).expect("write params");
    std::fs::write(&path, &bytes).expect("write params file");
    path
}

fn cpu_prover(key: ProvingKey, budget: &Budget) -> Prover {
    prover(
        key,
        budget,
        ProverConfig {
            backend: groth16_prover::BackendChoice::Cpu,
            self_check: SelfCheck::Always,
        },
    )
}

#[test]
fn stored_key_proofs_match_reference_on_the_cpu() {
    let mut rng = rng(seed());
    let circuit = MimcChain::new(300, rng.random());
    let params = generate(circuit.clone(), &mut rng);
    let budget = big_budget();
    let store = SrsStore::new(budget.clone(), StoreConfig::default());
    let (_dir, key) = key_via_store(&params, &store, "stored-cpu");
    assert_eq!(key.tier(), Some(Tier::Host));
    assert_eq!(key.charged_bytes(), 0, "the store owns the entry's charge");
    let srs_charged = budget.snapshot().used_in(Category::Srs);
    assert!(srs_charged > 0, "the store charged the entry");
    let p = cpu_prover(key, &budget);
    let (_cache, pce) = record(&budget, "stored-cpu", circuit.clone());
    for _ in 0..2 {
        let rs = Randomness::random(&mut rng);
        let want = groth16::create_proof(circuit.clone(), &params, rs.r, rs.s).unwrap();
        let got = p.prove(Synthesis::Pce(&pce), circuit.clone(), rs).unwrap();
        assert_eq!(bytes(&got.proof), bytes(&want));
        assert!(got.bases.iter().all(|b| b.kind == BasesKind::Cpu));
        assert_eq!(got.bases.len(), 5, "{:?}", got.bases);
    }
    assert_eq!(
        budget.snapshot().used_in(Category::Srs),
        srs_charged,
        "proofs add no copy of the bases"
    );
}

/// Two circuits' keys in a budget that holds one key plus a proof's working set: proofs
/// alternate between them, none is refused, and each load demotes the other, idle, key.
/// Then a proof holding one key makes the other's load fail instead of evicting it.
#[test]
fn two_keys_alternate_and_a_held_key_is_never_evicted() {
    let seed = seed();
    let mut rng = rng(seed);
    let circuits = [
        MimcChain::new(400, rng.random()),
        MimcChain::new(400, rng.random()),
    ];
    let params = [
        generate(circuits[0].clone(), &mut rng),
        generate(circuits[1].clone(), &mut rng),
    ];
    let dirs = [TempDir::new("alt-a"), TempDir::new("alt-b")];
    let paths = [write(&params[0], &dirs[0]), write(&params[1], &dirs[1])];

    // The PCEs live in a budget of their own: the one under test holds keys and proofs.
    let pce_budget = big_budget();
    let pces: Vec<_> = circuits
        .iter()
        .enumerate()
        .map(|(i, c)| record(&pce_budget, &format!("alt-pce-{i}"), c.clone()))
        .collect();
    // Measure with room to spare: one key's steady charge and load peak, and a proof's
    // peak (the CPU backend's tables are charged alongside in both budgets).
    let roomy = big_budget();
    let store = eager_store(&roomy);
    let key = ProvingKey::from_store(&store, spec("a", &paths[0])).unwrap();
    assert_eq!(roomy.used_bytes(), 0, "opening a stored key loads nothing");
    store.preload(&spec("a", &paths[0])).unwrap();
    let steady = roomy.snapshot().used_in(Category::Srs);
    let p = cpu_prover(key, &roomy);
    let out = p
        .prove(
            Synthesis::Pce(&pces[0].1),
            circuits[0].clone(),
            Randomness::random(&mut rng),
        )
        .unwrap();
    let fixed = roomy.used_bytes() - steady;
    let load_peak = steady + 4 * (16 << 10) + 16 * 4096;
    let total = fixed + load_peak + out.peak_charged_bytes + (64 << 10);
    drop((p, store));
    assert!(
        2 * steady > total - fixed - out.peak_charged_bytes,
        "the budget must not hold both keys at once (steady {steady}, total {total})"
    );

    let budget = Budget::fixed(total);
    let store = eager_store(&budget);
    let provers: Vec<Prover> = paths
        .iter()
        .enumerate()
        .map(|(i, path)| {
            let id = format!("key-{i}");
            let key = ProvingKey::from_store(&store, spec(&id, path)).unwrap();
            cpu_prover(key, &budget)
        })
        .collect();
    for round in 0..6 {
        let i = round % 2;
        let rs = Randomness::random(&mut rng);
        let got = provers[i]
            .prove(Synthesis::Pce(&pces[i].1), circuits[i].clone(), rs)
            .unwrap_or_else(|e| panic!("seed {seed} round {round}: key {i} refused: {e}"));
        let want = groth16::create_proof(circuits[i].clone(), &params[i], rs.r, rs.s).unwrap();
        assert_eq!(bytes(&got.proof), bytes(&want), "round {round}");
        assert_eq!(store.tier_of(&format!("key-{i}")), Some(Tier::Host));
        if round > 0 {
            assert_eq!(
                store.tier_of(&format!("key-{}", 1 - i)),
                Some(Tier::Mapped),
                "round {round}: the idle key was demoted"
            );
        }
        assert!(budget.used_bytes() <= total);
    }

    // A proof holds key 0 (its view); key 1 cannot load without evicting it, and does not.
    let view = provers[0].key().view_host().unwrap();
    let rs = Randomness::random(&mut rng);
    match provers[1].prove(Synthesis::Pce(&pces[1].1), circuits[1].clone(), rs) {
        Err(ProverError::Srs(SrsError::Budget { .. })) => {}
        other => panic!("seed {seed}: expected a budget refusal, got {other:?}"),
    }
    assert_eq!(store.tier_of("key-0"), Some(Tier::Host), "held key stays");
    drop(view);
    provers[1]
        .prove(Synthesis::Pce(&pces[1].1), circuits[1].clone(), rs)
        .expect("once released, the idle key makes room");
    assert_eq!(store.tier_of("key-0"), Some(Tier::Mapped));
}

/// A proof's compute phase reads the bases its admission holds and asks the store
/// nothing: it finishes even when the store could not serve the key again (here the
/// parameter file is gone, so any lookup fails), with the proof the reference gives. A
/// hold of another key is refused before any work.
#[test]
fn compute_over_a_hold_never_asks_the_store() {
    let seed = seed();
    let mut rng = rng(seed);
    let circuit = MimcChain::new(300, rng.random());
    let params = generate(circuit.clone(), &mut rng);
    let budget = big_budget();
    let store = SrsStore::new(budget.clone(), StoreConfig::default());
    let dir = TempDir::new("held-compute");
    let path = write(&params, &dir);
    let key = ProvingKey::from_store(&store, spec("held", &path)).unwrap();
    let other = ProvingKey::from_store(&store, spec("held-other", &path)).unwrap();
    let p = cpu_prover(key, &budget);
    let (_cache, pce) = record(&budget, "held-compute", circuit.clone());

    let hold = p.key().view_host().unwrap().into_hold();
    assert_eq!(hold.key_id(), p.key().id());
    let other_hold = other.view_host().unwrap().into_hold();
    std::fs::remove_file(&path).unwrap();
    assert!(
        p.key().view_host().is_err(),
        "seed {seed}: the store cannot serve the key once its file is gone"
    );

    let s = p
        .synthesize(Synthesis::Pce(&pce), circuit.clone(), None)
        .unwrap();
    match p.compute_held(s, &other_hold) {
        Err(ProverError::HoldMismatch { expected, found }) => {
            assert_eq!((expected, found), (p.key().id(), other.id()))
        }
        other => panic!("seed {seed}: expected HoldMismatch, got {other:?}"),
    }
    let rs = Randomness::random(&mut rng);
    let s = p
        .synthesize(Synthesis::Pce(&pce), circuit.clone(), None)
        .unwrap();
    let computed = p
        .compute_held(s, &hold)
        .unwrap_or_else(|e| panic!("seed {seed}: a held key must not be looked up again: {e}"));
    let out = p.assemble(computed, rs, true, 0).unwrap();
    let want = groth16::create_proof(circuit, &params, rs.r, rs.s).unwrap();
    assert_eq!(bytes(&out.proof), bytes(&want), "seed {seed}");
}
