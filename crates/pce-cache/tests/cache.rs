//! The cache: single flight, budget charging, eviction, disk preference, stale files.

mod common;

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use common::*;
use memory_budget::{Budget, Category};
use pce_cache::{CacheConfig, CircuitKey, Pce, PceCache, PceError, PceSource};
use rand::RngExt;

fn temp_dir(tag: &str, seed: u64) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pce-cache-{tag}-{}-{seed}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn config(dir: &std::path::Path) -> CacheConfig {
    CacheConfig {
        min_idle: Duration::ZERO,
        ..CacheConfig::with_dir(dir)
    }
}

fn pce_used(budget: &Budget) -> u64 {
    budget.snapshot().used_by_category[Category::Pce.index()]
}

#[test]
fn handles_and_pces_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<pce_cache::PceHandle>();
    send_sync::<Pce>();
    send_sync::<PceCache>();
}

#[test]
fn concurrent_first_calls_extract_once() {
    let seed = seed("single flight");
    let mut rng = rng(seed);
    let circuit = MimcCircuit::random(rng.random_range(50..200usize), &mut rng);
    let dir = temp_dir("flight", seed);
    let budget = Budget::fixed(1 << 30);
    let cache = Arc::new(PceCache::new(budget.clone(), config(&dir)).unwrap());
    let calls = Arc::new(AtomicUsize::new(0));
    let n = 4;
    let barrier = Arc::new(Barrier::new(n));
    let handles: Vec<_> = (0..n)
        .map(|_| {
            let (cache, calls, barrier, circuit) = (
                cache.clone(),
                calls.clone(),
                barrier.clone(),
                circuit.clone(),
            );
            std::thread::spawn(move || {
                barrier.wait();
                let h = cache
                    .get_or_extract(&CircuitKey::new("mimc"), || {
                        calls.fetch_add(1, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(50));
                        circuit
                    })
                    .unwrap();
                (h.source(), h.fingerprint(), h.charged_bytes())
            })
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(calls.load(Ordering::SeqCst), 1, "extracted more than once");
    let extracted = results
        .iter()
        .filter(|r| r.0 == PceSource::Extracted)
        .count();
    assert_eq!(extracted, 1);
    assert!(results.iter().all(|r| r.1 == results[0].1));
    // every handle is gone; the entry keeps exactly its resident bytes charged
    let expected = Pce::record(circuit).unwrap().resident_bytes();
    assert_eq!(results[0].2, expected);
    assert_eq!(pce_used(&budget), expected);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn evicted_entries_reload_from_disk_and_held_ones_stay() {
    let seed = seed("evict and reload");
    let mut rng = rng(seed);
    let circuit = MimcCircuit::random(rng.random_range(50..200usize), &mut rng);
    let dir = temp_dir("reload", seed);
    let budget = Budget::fixed(1 << 30);
    let cache = PceCache::new(budget.clone(), config(&dir)).unwrap();
    let key = CircuitKey::new("mimc");
    let h = cache.get_or_extract(&key, || circuit.clone()).unwrap();
    assert_eq!(h.source(), PceSource::Extracted);
    let fp = h.fingerprint();
    // held: never evicted
    assert_eq!(cache.evict(u64::MAX), 0);
    assert!(cache.contains("mimc"));
    // a clone is a hold of its own
    let h2 = h.clone();
    drop(h);
    assert_eq!(cache.evict(u64::MAX), 0);
    let h = h2;
    assert_eq!(pce_used(&budget), h.charged_bytes());
    // Held: the budget cannot count on it.
    assert_eq!(budget.reclaimable_bytes(), 0);
    let charged = h.charged_bytes();
    drop(h);
    assert_eq!(budget.reclaimable_bytes(), charged);
    assert!(cache.evict(1) > 0);
    assert_eq!(budget.reclaimable_bytes(), 0);
    assert!(!cache.contains("mimc"));
    assert_eq!(pce_used(&budget), 0, "eviction returns the bytes");
    let key = CircuitKey {
        id: "mimc".into(),
        fingerprint: Some(fp),
    };
    let h = cache
        .get_or_extract(&key, || -> MimcCircuit { panic!("must reload from disk") })
        .unwrap();
    assert_eq!(h.source(), PceSource::Disk);
    assert_eq!(h.file_path(), Some(dir.join("mimc.pce").as_path()));
    assert_pce_matches_with(&h, circuit.clone());
    let again = cache
        .get_or_extract(&key, || -> MimcCircuit { panic!("in memory") })
        .unwrap();
    assert_eq!(again.source(), PceSource::Memory);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn budget_pressure_runs_the_cache_evictor() {
    let seed = seed("evictor");
    let mut rng = rng(seed);
    let circuit = MimcCircuit::random(rng.random_range(200..400usize), &mut rng);
    let resident = Pce::record(circuit.clone()).unwrap().resident_bytes();
    let total = 64 << 20;
    let budget = Budget::fixed(total);
    let cache = PceCache::new(
        budget.clone(),
        CacheConfig {
            min_idle: Duration::ZERO,
            ..CacheConfig::in_memory()
        },
    )
    .unwrap();
    drop(
        cache
            .get_or_extract(&CircuitKey::new("m"), || circuit)
            .unwrap(),
    );
    assert_eq!(pce_used(&budget), resident);
    // a request that fits only if the idle entry goes
    let r = budget
        .reserve(
            total - resident / 2,
            Category::WorkingSet,
            "test",
            Some(Duration::ZERO),
        )
        .unwrap();
    assert!(!cache.contains("m"));
    assert_eq!(pce_used(&budget), 0);
    drop(r);
}

#[test]
fn stale_files_are_rejected_and_reextracted() {
    let seed = seed("stale files");
    let mut rng = rng(seed);
    let circuit = MimcCircuit::random(rng.random_range(50..200usize), &mut rng);
    let dir = temp_dir("stale", seed);
    let budget = Budget::fixed(1 << 30);
    let good = {
        let cache = PceCache::new(budget.clone(), config(&dir)).unwrap();
        let h = cache
            .get_or_extract(&CircuitKey::new("c"), || circuit.clone())
            .unwrap();
        h.fingerprint()
    };
    let path = dir.join("c.pce");
    let original = std::fs::read(&path).unwrap();
    type Corrupt = Box<dyn Fn(&mut Vec<u8>)>;
    let corruptions: Vec<(&str, Corrupt)> = vec![
        (
            "section byte",
            Box::new(|b: &mut Vec<u8>| {
                let n = b.len();
                b[n - 3] ^= 0x10;
            }),
        ),
        (
            "version",
            Box::new(|b: &mut Vec<u8>| b[8] = b[8].wrapping_add(1)),
        ),
        ("magic", Box::new(|b: &mut Vec<u8>| b[0] = b'X')),
        (
            "truncated",
            Box::new(|b: &mut Vec<u8>| b.truncate(b.len() / 2)),
        ),
    ];
    for (what, corrupt) in corruptions {
        let mut bytes = original.clone();
        corrupt(&mut bytes);
        std::fs::write(&path, &bytes).unwrap();
        // fresh cache: nothing in memory
        let cache = PceCache::new(budget.clone(), config(&dir)).unwrap();
        let calls = AtomicUsize::new(0);
        let key = CircuitKey {
            id: "c".into(),
            fingerprint: Some(good),
        };
        let h = cache
            .get_or_extract(&key, || {
                calls.fetch_add(1, Ordering::SeqCst);
                circuit.clone()
            })
            .unwrap();
        assert_eq!(h.source(), PceSource::Extracted, "{what}");
        assert_eq!(calls.load(Ordering::SeqCst), 1, "{what}");
        // the file was replaced by a good one
        assert_eq!(std::fs::read(&path).unwrap(), original, "{what}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn another_circuit_under_a_pinned_fingerprint_is_refused() {
    let seed = seed("pinned fingerprint");
    let mut rng = rng(seed);
    let a = MimcCircuit::random(10, &mut rng);
    let b = MimcCircuit::random(11, &mut rng);
    let fp_a = Pce::record(a.clone()).unwrap().fingerprint();
    let budget = Budget::fixed(1 << 30);
    let cache = PceCache::new(budget.clone(), CacheConfig::in_memory()).unwrap();
    let key = CircuitKey {
        id: "x".into(),
        fingerprint: Some(fp_a),
    };
    let e = cache.get_or_extract(&key, || b.clone()).err().unwrap();
    assert!(
        matches!(e, PceError::FingerprintMismatch { expected, .. } if expected == fp_a),
        "{e}"
    );
    assert_eq!(
        pce_used(&budget),
        0,
        "a failed extraction returns its bytes"
    );
    // the slot is free again
    let h = cache.get_or_extract(&key, || a.clone()).unwrap();
    assert_eq!(h.fingerprint(), fp_a);
}

#[test]
fn too_small_a_budget_is_a_typed_error_and_the_cache_recovers() {
    let seed = seed("small budget");
    let mut rng = rng(seed);
    let circuit = Sha256Circuit::random(1, &mut rng);
    let budget = Budget::fixed(2 << 20);
    let mut cfg = CacheConfig::in_memory();
    cfg.extraction_initial_bytes = 1 << 20;
    let cache = PceCache::new(budget.clone(), cfg).unwrap();
    let e = cache
        .get_or_extract(&CircuitKey::new("sha"), || circuit.clone())
        .err()
        .unwrap();
    assert!(matches!(e, PceError::Budget { .. }), "{e}");
    assert_eq!(pce_used(&budget), 0);
    // a panicking circuit factory does not wedge the slot either
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = cache.get_or_extract(&CircuitKey::new("sha"), || -> MimcCircuit {
            panic!("boom")
        });
    }));
    assert!(r.is_err());
    let small = MimcCircuit::random(5, &mut rng);
    let h = cache
        .get_or_extract(&CircuitKey::new("sha"), || small)
        .unwrap();
    assert_eq!(h.source(), PceSource::Extracted);
}

#[test]
fn extraction_is_charged_at_its_peak() {
    let seed = seed("extraction peak");
    let mut rng = rng(seed);
    let circuit = Sha256Circuit::random(1, &mut rng);
    let budget = Budget::fixed(1 << 30);
    let (pce, reservation) = pce_cache::Recorder::record(
        circuit,
        Some(budget.try_reserve(0, Category::Pce, "test").unwrap()),
    )
    .unwrap();
    let peak = reservation.as_ref().unwrap().bytes();
    eprintln!(
        "peak charge {peak} bytes for {} resident bytes",
        pce.resident_bytes()
    );
    // the recording buffers (u32 columns and codes per non-zero) exceed what stays resident
    assert!(peak >= pce.n_nonzeros() * 8);
    assert!(peak > pce.resident_bytes());
    assert_eq!(pce_used(&budget), peak);
}
