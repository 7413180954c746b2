//! Many threads reserving, partly releasing, growing, splitting and dropping at random
//! against a tiny budget: used never exceeds total, every waiter is admitted, no deadlock.
//! `PINION_SLOW_TESTS=1` runs ten times more operations.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use common::seeded_rng;
use memory_budget::{Budget, BudgetError, Category, Priority};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

fn worker(b: Budget, total: u64, seed: u64, n_ops: usize, async_path: bool) -> u64 {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut admitted = 0u64;
    for _ in 0..n_ops {
        // Sizes up to the whole budget, so big requests compete with small ones.
        let n = if rng.random_bool(0.05) {
            total
        } else {
            rng.random_range(1..=total)
        };
        let pr = [Priority::LOW, Priority::NORMAL, Priority::HIGH][rng.random_range(0..3)];
        let cat = Category::ALL[rng.random_range(0..Category::N)];
        let req = b.request(n, cat).priority(pr).label("stress");
        let r = match rng.random_range(0..10) {
            0..=1 => match req.try_reserve() {
                Ok(r) => r,
                Err(BudgetError::WouldBlock { .. }) => continue,
                Err(e) => panic!("{e}"),
            },
            2 => match req.reserve(Some(Duration::from_micros(rng.random_range(0..500)))) {
                Ok(r) => r,
                Err(BudgetError::Timeout { .. }) => continue,
                Err(e) => panic!("{e}"),
            },
            _ if async_path => {
                pollster::block_on(req.reserve_async()).expect("async waiter admitted")
            }
            _ => req.reserve(None).expect("blocking waiter admitted"),
        };
        admitted += 1;
        let mut r = r;
        // While holding, never block (hold-and-wait across threads could deadlock any budget).
        for _ in 0..rng.random_range(0..4) {
            match rng.random_range(0..5) {
                0 => {
                    let k = rng.random_range(0..=r.bytes());
                    r.release(k);
                }
                1 => {
                    let _ = r.try_grow(rng.random_range(1..=total));
                }
                2 => {
                    let part = r.split(rng.random_range(0..=r.bytes()));
                    if rng.random_bool(0.5) {
                        drop(part);
                    } else {
                        let _ = r.merge(part);
                    }
                }
                3 => r.shrink_to(rng.random_range(0..=total)),
                _ => std::thread::yield_now(),
            }
        }
        drop(r);
    }
    admitted
}

#[test]
fn stress_tiny_budget() {
    let mut rng = seeded_rng("stress_tiny_budget");
    let slow = std::env::var("PINION_SLOW_TESTS").is_ok_and(|v| v == "1");
    let n_ops = if slow { 20_000 } else { 2_000 };
    let total: u64 = rng.random_range(1..64);
    let n_threads = 8;
    let rec = common::TestRecorder::default();
    let b = metrics::with_local_recorder(&rec, || Budget::fixed_named("stress", total));

    let running = Arc::new(AtomicBool::new(true));
    let max_seen = Arc::new(AtomicU64::new(0));
    let watcher = {
        let (b, running, max_seen) = (b.clone(), running.clone(), max_seen.clone());
        std::thread::spawn(move || {
            while running.load(Ordering::SeqCst) {
                let s = b.snapshot();
                assert!(
                    s.used_bytes <= s.total_bytes,
                    "used {} > total {}",
                    s.used_bytes,
                    s.total_bytes
                );
                assert_eq!(s.used_by_category.iter().sum::<u64>(), s.used_bytes);
                max_seen.fetch_max(s.used_bytes, Ordering::SeqCst);
                std::thread::yield_now();
            }
        })
    };

    let (tx, rx) = mpsc::channel();
    for i in 0..n_threads {
        let (b, tx) = (b.clone(), tx.clone());
        let seed: u64 = rng.random();
        std::thread::spawn(move || {
            let admitted = worker(b, total, seed, n_ops, i % 2 == 1);
            let _ = tx.send(admitted);
        });
    }
    drop(tx);
    let deadline = Instant::now() + Duration::from_secs(if slow { 600 } else { 45 });
    let mut admitted = 0;
    for _ in 0..n_threads {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(n) => admitted += n,
            Err(e) => panic!(
                "worker did not finish ({e:?}): deadlock or starvation; budget {:?}",
                b.snapshot()
            ),
        }
    }
    running.store(false, Ordering::SeqCst);
    watcher.join().expect("invariant held");
    let s = b.snapshot();
    assert_eq!((s.used_bytes, s.n_waiting, s.waiting_bytes), (0, 0, 0));
    assert!(admitted > 0);
    let waits = rec
        .counter("pinion_budget_waits_total{budget=stress}")
        .unwrap_or(0);
    eprintln!(
        "admitted {admitted} reservations ({waits} waited), max used {} of {total}",
        max_seen.load(Ordering::SeqCst)
    );
    // Eight threads asking for up to the whole budget: the waiting path must have run.
    assert!(
        waits > 0,
        "no request ever waited: the stress did not stress"
    );
}

/// Futures cancelled at random points (queued, granted-but-not-collected, never polled) while
/// other threads release: every byte comes back and nothing is left queued.
#[test]
fn cancellation_races_return_every_byte() {
    use std::future::Future;
    use std::task::{Context, Waker};

    let mut rng = seeded_rng("cancellation_races_return_every_byte");
    let total: u64 = rng.random_range(1..32);
    let b = Budget::fixed(total);
    let seeds: Vec<u64> = (0..4).map(|_| rng.random()).collect();
    let threads: Vec<_> = seeds
        .into_iter()
        .map(|seed| {
            let b = b.clone();
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(seed);
                let mut cx = Context::from_waker(Waker::noop());
                for _ in 0..3_000 {
                    let n = rng.random_range(1..=total);
                    let mut fut = Box::pin(b.reserve_async(n, Category::Other, "c"));
                    let mut kept = None;
                    for _ in 0..rng.random_range(0..3) {
                        if let std::task::Poll::Ready(r) = fut.as_mut().poll(&mut cx) {
                            kept = Some(r.expect("fits the total"));
                            break;
                        }
                        std::thread::yield_now();
                    }
                    // Drop the future (maybe queued, maybe granted meanwhile) and any grant.
                    drop(fut);
                    if rng.random_bool(0.5) {
                        std::thread::yield_now();
                    }
                    drop(kept);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("no panic");
    }
    let s = b.snapshot();
    assert_eq!((s.used_bytes, s.n_waiting, s.waiting_bytes), (0, 0, 0));
}
