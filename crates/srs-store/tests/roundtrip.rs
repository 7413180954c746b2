//! Files written by `groth16::Parameters::write` load into exactly what
//! `groth16::Parameters::read` returns, element by element, under the budget.

mod common;

use common::*;
use memory_budget::Budget;
use rand::RngExt;
use srs_store::{read_verifying_key, LoadOptions, ParamsFile, PointCheck};

const GIB: u64 = 1 << 30;

fn check_roundtrip(
    seed: u64,
    n_inputs: usize,
    n_squarings: usize,
    check: PointCheck,
    chunk_bytes: u64,
) {
    let params = generate(seed, n_inputs, n_squarings);
    let bytes = to_bytes(&params);
    let dir = TempDir::new("roundtrip");
    let path = dir.write("p.params", &bytes);
    let file = ParamsFile::open(&path).expect("open");
    assert_eq!(file.layout().file_bytes(), bytes.len() as u64);
    assert_eq!(file.layout().ic().n_points() as usize, params.vk.ic.len());
    let budget = Budget::fixed(GIB);
    let options = LoadOptions {
        check,
        chunk_bytes,
        ..LoadOptions::default()
    };
    let plan = file.plan(&options);
    let loaded = file.load(&budget, &options).expect("load");
    assert_same(&loaded, &bytes);
    // Peak charged first, steady size after.
    assert_eq!(loaded.stats().peak_charged_bytes, plan.peak_bytes());
    assert_eq!(budget.used_bytes(), plan.destination_bytes);
    assert_eq!(loaded.charged_bytes(), plan.destination_bytes);
    drop(loaded);
    assert_eq!(budget.used_bytes(), 0);
}

#[test]
fn random_small_circuits_every_check_mode() {
    let seed = seed();
    let mut rng = rng(seed);
    for check in [PointCheck::None, PointCheck::Curve, PointCheck::Full] {
        let n_inputs = rng.random_range(1..5);
        let n_squarings = rng.random_range(1..70);
        // Small windows (a few points) exercise the window boundaries inside sections.
        let chunk_bytes = rng.random_range(1..4000);
        check_roundtrip(rng.random(), n_inputs, n_squarings, check, chunk_bytes);
    }
}

#[test]
fn one_constraint_circuit_and_default_window() {
    let seed = seed();
    check_roundtrip(seed, 1, 0, PointCheck::Full, srs_store::DEFAULT_CHUNK_BYTES);
}

#[test]
fn verifying_key_alone_matches_reference() {
    let seed = seed();
    let params = generate(seed, 3, 5);
    let bytes = to_bytes(&params);
    let dir = TempDir::new("vk");
    let path = dir.write("p.params", &bytes);
    let vk = read_verifying_key(&path).expect("vk");
    assert_same_vk(&vk, &params.vk);
}

#[test]
fn committed_fixture_loads_and_matches_reference() {
    let bytes = std::fs::read(fixture_path())
        .expect("fixture exists (PINION_WRITE_FIXTURES=1 regenerates it)");
    let file = ParamsFile::open(fixture_path()).expect("open fixture");
    let budget = Budget::fixed(GIB);
    let loaded = file
        .load(
            &budget,
            &LoadOptions {
                check: PointCheck::Full,
                ..LoadOptions::default()
            },
        )
        .unwrap();
    assert_same(&loaded, &bytes);
    assert_eq!(loaded.vk().ic.len(), FIXTURE_INPUTS + 1);
}

/// The fixture is what the generator makes from its recorded seed; set
/// `PINION_WRITE_FIXTURES=1` to (re)write it.
#[test]
fn fixture_is_reproducible() {
    let bytes = to_bytes(&generate(FIXTURE_SEED, FIXTURE_INPUTS, FIXTURE_SQUARINGS));
    if std::env::var("PINION_WRITE_FIXTURES").as_deref() == Ok("1") {
        std::fs::create_dir_all(fixture_path().parent().unwrap()).unwrap();
        std::fs::write(fixture_path(), &bytes).unwrap();
    }
    let committed = std::fs::read(fixture_path()).expect("fixture exists");
    assert!(
        committed == bytes,
        "fixture is stale: run PINION_WRITE_FIXTURES=1 cargo test -p srs-store --test roundtrip"
    );
}
