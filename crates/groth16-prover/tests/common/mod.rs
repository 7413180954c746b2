//! Shared test helpers: printed seeds, parameters written to a temp file and loaded
//! through srs-store, PCE recording, proof bytes.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use bellman::Circuit;
use bls12_381::{Bls12, Scalar};
use groth16::{Parameters, Proof};
use groth16_prover::{Prover, ProverConfig, ProvingKey};
use memory_budget::Budget;
use pce_cache::{CacheConfig, CircuitKey, PceCache, PceHandle};
use rand::rngs::StdRng;
use rand::SeedableRng;
use srs_store::LoadOptions;

/// Seed from `PINION_SEED`, else the clock; printed so a failure replays.
pub use groth16_prover::testing::test_seed as seed;

pub fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

/// A budget far larger than any test needs.
pub fn big_budget() -> Budget {
    Budget::fixed(8 << 30)
}

/// A temp directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let p = std::env::temp_dir().join(format!(
            "pinion-prover-{tag}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&p).expect("create temp dir");
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Parameters for `circuit` from `groth16::generate_random_parameters`.
pub fn generate<C: Circuit<Scalar>>(circuit: C, rng: &mut StdRng) -> Parameters<Bls12> {
    groth16::generate_random_parameters::<Bls12, _, _>(circuit, rng).expect("parameter generation")
}

/// Writes `params` to a temp file and loads it back through srs-store.
pub fn key_via_file(params: &Parameters<Bls12>, budget: &Budget, tag: &str) -> ProvingKey {
    let dir = TempDir::new(tag);
    let path = dir.0.join("circuit.params");
    let mut bytes = Vec::new();
    params.write(&mut bytes).expect("write params");
    std::fs::write(&path, &bytes).expect("write params file");
    ProvingKey::load(&path, budget, &LoadOptions::default()).expect("load params through srs-store")
}

/// Writes `params` to a temp file (kept as long as the returned directory) and makes a
/// key over `store`'s entry for it, preloaded into host memory.
pub fn key_via_store(
    params: &Parameters<Bls12>,
    store: &srs_store::SrsStore,
    tag: &str,
) -> (TempDir, ProvingKey) {
    let dir = TempDir::new(tag);
    let path = dir.0.join("circuit.params");
    let mut bytes = Vec::new();
    params.write(&mut bytes).expect("write params");
    std::fs::write(&path, &bytes).expect("write params file");
    let spec = srs_store::SrsSpec::new(tag, &path);
    let key = ProvingKey::from_store(store, spec.clone()).expect("open params through the store");
    store.preload(&spec).expect("load params through the store");
    (dir, key)
}

/// Records `circuit` once through an in-memory PCE cache charged to `budget`.
pub fn record<C: Circuit<Scalar>>(budget: &Budget, id: &str, circuit: C) -> (PceCache, PceHandle) {
    let cache = PceCache::new(budget.clone(), CacheConfig::in_memory()).expect("pce cache");
    let handle = cache
        .get_or_extract(&CircuitKey::new(id), || circuit)
        .expect("record pce");
    (cache, handle)
}

pub fn prover(key: ProvingKey, budget: &Budget, config: ProverConfig) -> Prover {
    Prover::new(Arc::new(key), budget.clone(), config).expect("cpu prover")
}

pub fn bytes(proof: &Proof<Bls12>) -> Vec<u8> {
    let mut v = Vec::new();
    proof.write(&mut v).expect("write proof");
    v
}

pub fn verifies(key: &ProvingKey, proof: &Proof<Bls12>, inputs: &[Scalar]) -> bool {
    groth16::verify_proof(key.prepared_vk(), proof, inputs).is_ok()
}
