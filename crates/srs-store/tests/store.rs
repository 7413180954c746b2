//! The store: single flight, hits, budget-driven eviction that respects holders and the idle
//! minimum, explicit eviction, preload, and the verifying key without a load.

mod common;

use std::sync::{Arc, Barrier};
use std::time::Duration;

use common::*;
use memory_budget::Budget;
use rand::RngExt;
use srs_store::{LoadOptions, ParamsFile, SrsError, SrsSpec, SrsStore, StoreConfig, Tier};

const GIB: u64 = 1 << 30;

fn cfg(min_idle: Duration) -> StoreConfig {
    StoreConfig {
        min_idle,
        reserve_timeout: Some(Duration::ZERO),
        ..StoreConfig::default()
    }
}

fn h_ptr(h: &srs_store::SrsHandle) -> usize {
    h.h_query().as_host().unwrap().as_ptr() as usize
}

/// Two distinct parameter files of the same shape; returns their specs and load plan peak.
fn two_files(dir: &TempDir, seed: u64) -> (SrsSpec, SrsSpec, u64, u64) {
    let mut rng = rng(seed);
    let shape = (rng.random_range(1..3), rng.random_range(8..30));
    let a = dir.write(
        "a.params",
        &to_bytes(&generate(rng.random(), shape.0, shape.1)),
    );
    let b = dir.write(
        "b.params",
        &to_bytes(&generate(rng.random(), shape.0, shape.1)),
    );
    let plan = ParamsFile::open(&a).unwrap().plan(&LoadOptions::default());
    (
        SrsSpec::new("a", a),
        SrsSpec::new("b", b),
        plan.peak_bytes(),
        plan.destination_bytes,
    )
}

#[test]
fn concurrent_requests_share_one_load() {
    let seed = seed();
    let dir = TempDir::new("flight");
    let (spec, _, _, steady) = two_files(&dir, seed);
    let budget = Budget::fixed(GIB);
    let store = SrsStore::new(budget.clone(), cfg(Duration::ZERO));
    let n = 6;
    let barrier = Arc::new(Barrier::new(n));
    let handles: Vec<_> = (0..n)
        .map(|_| {
            let (store, spec, barrier) = (store.clone(), spec.clone(), Arc::clone(&barrier));
            std::thread::spawn(move || {
                barrier.wait();
                store.get_or_load(&spec).expect("load")
            })
        })
        .collect();
    let handles: Vec<_> = handles
        .into_iter()
        .map(|t| t.join().expect("no panic"))
        .collect();
    let first = h_ptr(&handles[0]);
    assert!(
        handles.iter().all(|h| h_ptr(h) == first),
        "all callers share one copy"
    );
    assert_eq!(budget.used_bytes(), steady, "charged once");
    // A later call is a hit on the same memory.
    let again = store.get_or_load(&spec).unwrap();
    assert_eq!(h_ptr(&again), first);
    assert_eq!(store.tier_of("a"), Some(Tier::Host));
    assert_eq!(store.tier_bytes(Tier::Host), steady);
    assert_same(&again, &std::fs::read(&spec.path).unwrap());
}

#[test]
fn concurrent_requests_for_a_bad_file_all_fail() {
    let seed = seed();
    let dir = TempDir::new("flight-bad");
    let mut bytes = to_bytes(&generate(seed, 1, 6));
    bytes.truncate(bytes.len() - 1);
    let spec = SrsSpec::new("bad", dir.write("bad.params", &bytes));
    let budget = Budget::fixed(GIB);
    let store = SrsStore::new(budget.clone(), cfg(Duration::ZERO));
    let barrier = Arc::new(Barrier::new(4));
    let results: Vec<_> = (0..4)
        .map(|_| {
            let (store, spec, barrier) = (store.clone(), spec.clone(), Arc::clone(&barrier));
            std::thread::spawn(move || {
                barrier.wait();
                store.get_or_load(&spec).map(|_| ())
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|t| t.join().expect("no panic"))
        .collect();
    for r in results {
        let err = r.unwrap_err();
        assert!(
            matches!(
                err,
                SrsError::SectionTruncated { .. } | SrsError::ConcurrentLoadFailed { .. }
            ),
            "{err}"
        );
    }
    assert_eq!(budget.used_bytes(), 0);
    assert_eq!(store.tier_of("bad"), None);
}

#[test]
fn budget_evicts_idle_unheld_entries_only() {
    let seed = seed();
    let dir = TempDir::new("evict");
    let (a, b, peak, steady) = two_files(&dir, seed);
    // Room for one entry's peak plus a little: a second load must evict the first.
    let budget = Budget::fixed(peak + steady / 2);
    let store = SrsStore::new(budget.clone(), cfg(Duration::ZERO));

    let ha = store.get_or_load(&a).unwrap();
    // `a` is held: loading `b` cannot evict it and fails at once, charging nothing extra.
    let err = store.get_or_load(&b).unwrap_err();
    assert!(matches!(err, SrsError::Budget { .. }), "{err}");
    assert_eq!(budget.used_bytes(), steady);
    assert_eq!(store.tier_of("a"), Some(Tier::Host));

    drop(ha);
    // Unheld and idle (minimum zero): the budget's evictor demotes `a` to the mapped tier.
    let hb = store.get_or_load(&b).unwrap();
    assert_eq!(store.tier_of("a"), Some(Tier::Mapped));
    assert_eq!(store.tier_of("b"), Some(Tier::Host));
    assert_eq!(budget.used_bytes(), steady);
    assert_same(&hb, &std::fs::read(&b.path).unwrap());
    // `b` is held, so reloading `a` does not fit; `a` keeps its mapping.
    let err = store.get_or_load(&a).unwrap_err();
    assert!(matches!(err, SrsError::Budget { .. }), "{err}");
    assert_eq!(store.tier_of("a"), Some(Tier::Mapped));
    assert_eq!(budget.used_bytes(), steady);
    drop(hb);
    // A mapped entry reloads from its open mapping.
    let ha = store.get_or_load(&a).unwrap();
    assert_eq!(store.tier_of("b"), Some(Tier::Mapped));
    assert_same(&ha, &std::fs::read(&a.path).unwrap());
}

#[test]
fn idle_minimum_protects_recent_entries() {
    let seed = seed();
    let dir = TempDir::new("idle");
    let (a, b, peak, steady) = two_files(&dir, seed);
    let budget = Budget::fixed(peak + steady / 2);
    let store = SrsStore::new(budget.clone(), cfg(Duration::from_secs(3600)));
    store.preload(&a).unwrap();
    assert_eq!(store.evict_idle(u64::MAX), 0, "not idle long enough");
    // Not evictable yet, but unheld: the budget may count on it going.
    assert_eq!(budget.reclaimable_bytes(), steady);
    let ha = store.get_or_load(&a).unwrap();
    assert_eq!(budget.reclaimable_bytes(), 0, "held");
    drop(ha);
    let err = store.get_or_load(&b).unwrap_err();
    assert!(matches!(err, SrsError::Budget { .. }), "{err}");
    assert_eq!(store.tier_of("a"), Some(Tier::Host));
    assert_eq!(budget.used_bytes(), steady);
}

#[test]
fn explicit_evict_frees_when_the_last_handle_drops() {
    let seed = seed();
    let dir = TempDir::new("explicit");
    let (a, _, _, steady) = two_files(&dir, seed);
    let budget = Budget::fixed(GIB);
    let store = SrsStore::new(budget.clone(), cfg(Duration::from_secs(3600)));
    let h = store.get_or_load(&a).unwrap();
    let h2 = h.clone();
    assert_eq!(
        store.evict("a", false).unwrap(),
        0,
        "held: nothing freed yet"
    );
    assert_eq!(store.tier_of("a"), Some(Tier::Mapped));
    assert_eq!(budget.used_bytes(), steady, "holders keep the memory");
    drop(h);
    assert_eq!(budget.used_bytes(), steady);
    drop(h2);
    assert_eq!(
        budget.used_bytes(),
        0,
        "last handle returns the reservation"
    );
    // Unheld explicit eviction frees at once; to disk drops the mapping too.
    store.preload(&a).unwrap();
    assert_eq!(store.evict("a", true).unwrap(), steady);
    assert_eq!(store.tier_of("a"), Some(Tier::Disk));
    assert_eq!(budget.used_bytes(), 0);
    assert!(matches!(
        store.evict("nope", false),
        Err(SrsError::UnknownCircuit { .. })
    ));
}

#[test]
fn entries_report_tier_bytes_and_holders() {
    let seed = seed();
    let dir = TempDir::new("entries");
    let (a, b, _, steady) = two_files(&dir, seed);
    let budget = Budget::fixed(GIB);
    let store = SrsStore::new(budget.clone(), cfg(Duration::from_secs(3600)));
    assert!(store.entries().is_empty());
    let h = store.get_or_load(&a).unwrap();
    let h2 = h.clone();
    store.preload(&b).unwrap();
    store.evict("b", false).unwrap();
    let file_b = std::fs::metadata(&b.path).unwrap().len();
    let entries = store.entries();
    let want = |id: &str, tier, bytes, n_holders| srs_store::EntryStatus {
        circuit_id: id.to_string(),
        tier,
        bytes,
        n_holders,
    };
    assert_eq!(
        entries,
        vec![
            want("a", Tier::Host, steady, 2),
            want("b", Tier::Mapped, file_b, 0)
        ]
    );
    drop((h, h2));
    assert_eq!(store.entries()[0].n_holders, 0);
    store.evict("a", true).unwrap();
    assert_eq!(store.entries()[0], want("a", Tier::Disk, 0, 0));
}

#[test]
fn verifying_key_without_loading() {
    let seed = seed();
    let dir = TempDir::new("vk-store");
    let params = generate(seed, 2, 9);
    let spec = SrsSpec::new("c", dir.write("c.params", &to_bytes(&params)));
    let budget = Budget::fixed(GIB);
    let store = SrsStore::new(budget.clone(), StoreConfig::default());
    let vk = store.verifying_key(&spec).unwrap();
    assert_same_vk(&vk, &params.vk);
    assert_eq!(budget.used_bytes(), 0);
    assert_eq!(store.tier_of("c"), None);
    let h = store.get_or_load(&spec).unwrap();
    assert_eq!(store.verifying_key(&spec).unwrap(), *h.vk());
}

#[test]
fn rewritten_file_is_reloaded() {
    let seed = seed();
    let dir = TempDir::new("stale");
    let (a, b, _, _) = two_files(&dir, seed);
    let budget = Budget::fixed(GIB);
    let store = SrsStore::new(budget.clone(), cfg(Duration::ZERO));
    let old = store.get_or_load(&a).unwrap();
    // Replace a's file by b's bytes (new inode via rename).
    let tmp = dir.path().join("a.tmp");
    std::fs::copy(&b.path, &tmp).unwrap();
    std::fs::rename(&tmp, &a.path).unwrap();
    let new = store.get_or_load(&a).unwrap();
    assert_ne!(h_ptr(&old), h_ptr(&new));
    assert_same(&new, &std::fs::read(&b.path).unwrap());
    drop(old);
    assert_eq!(budget.used_bytes(), new.charged_bytes());
}
