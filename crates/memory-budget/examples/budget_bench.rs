//! Budget benchmark: ns per uncontended reserve+release, and contended throughput.
//!
//! `cargo run --release -p memory-budget --example budget_bench [-- --quick]`
//! (`PINION_BENCH_QUICK=1` also selects quick mode; `PINION_BENCH` lines feed `cargo xtask bench`.)
//! Target: uncontended reserve+release under 100 ns.

use pinion_bench::{quick, BenchLine};
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use memory_budget::{Budget, Category, DetectOptions};

fn ns_per_op(n: u64, mut f: impl FnMut()) -> f64 {
    // Warm up, then take the best of many short runs: the least disturbed by other processes
    // on a shared machine.
    for _ in 0..n / 10 {
        f();
    }
    let chunk = (n / 20).max(1);
    (0..20)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..chunk {
                f();
            }
            t.elapsed().as_nanos() as f64 / chunk as f64
        })
        .fold(f64::INFINITY, f64::min)
}

/// Ops/s with `n_threads` threads hammering one budget for `dur`.
fn throughput(b: &Budget, n_threads: usize, bytes: u64, dur: Duration) -> f64 {
    let stop = Arc::new(AtomicBool::new(false));
    let ops = Arc::new(AtomicU64::new(0));
    let start = Arc::new(Barrier::new(n_threads + 1));
    let threads: Vec<_> = (0..n_threads)
        .map(|_| {
            let (b, stop, ops, start) = (b.clone(), stop.clone(), ops.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let r = b
                        .request(bytes, Category::Transient)
                        .label("bench")
                        .reserve(None)
                        .expect("bench budget admits everything eventually");
                    black_box(&r);
                    drop(r);
                    n += 1;
                }
                ops.fetch_add(n, Ordering::Relaxed);
            })
        })
        .collect();
    start.wait();
    let t = Instant::now();
    std::thread::sleep(dur);
    stop.store(true, Ordering::Relaxed);
    for th in threads {
        th.join().expect("bench thread");
    }
    ops.load(Ordering::Relaxed) as f64 / t.elapsed().as_secs_f64()
}

fn main() {
    let quick = quick() || std::env::args().any(|a| a == "--quick");
    let n = if quick { 200_000 } else { 5_000_000 };
    let dur = Duration::from_millis(if quick { 200 } else { 1000 });
    println!(
        "cpus: {}",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );

    let b = Budget::fixed(1 << 40);
    let static_label = ns_per_op(n, || {
        let r = b
            .request(4096, Category::Transient)
            .label("bench")
            .try_reserve()
            .expect("fits");
        black_box(&r);
    });
    println!("uncontended reserve+release (request, &'static label): {static_label:.1} ns/op");
    BenchLine {
        what: "budget reserve+release, uncontended",
        size: "4 KiB".into(),
        ours: static_label,
        peer: None,
        unit: "ns",
        lower_is_better: true,
        target: Some("< 100 ns"),
        pass: Some(static_label < 100.0),
    }
    .emit();
    let string_label = ns_per_op(n, || {
        let r = b
            .try_reserve(4096, Category::Transient, "bench")
            .expect("fits");
        black_box(&r);
    });
    println!("uncontended try_reserve+release (String label):        {string_label:.1} ns/op");
    let mut held = b
        .try_reserve(4096, Category::Transient, "bench")
        .expect("fits");
    let grow = ns_per_op(n, || {
        held.try_grow(4096).expect("fits");
        held.release(4096);
    });
    println!("uncontended try_grow+release on a held reservation:   {grow:.1} ns/op");
    BenchLine {
        what: "budget try_grow+release, uncontended",
        size: "4 KiB".into(),
        ours: grow,
        peer: None,
        unit: "ns",
        lower_is_better: true,
        target: None,
        pass: None,
    }
    .emit();
    drop(held);

    match Budget::detect(&DetectOptions::default()) {
        Ok(host) => {
            let drift = ns_per_op(n, || {
                let r = host
                    .request(4096, Category::Transient)
                    .label("bench")
                    .try_reserve()
                    .expect("fits");
                black_box(&r);
            });
            println!("uncontended reserve+release, detected host budget with drift check: {drift:.1} ns/op");
        }
        Err(e) => println!("detected host budget unavailable: {e}"),
    }

    for n_threads in [1, 2, 4, 8] {
        let b = Budget::fixed(1 << 40);
        let ops = throughput(&b, n_threads, 4096, dur);
        // Room for half the threads: the others wait, so this measures hand-off through the queue.
        let tight = Budget::fixed(4096 * (n_threads as u64 / 2).max(1));
        let ops_tight = throughput(&tight, n_threads, 4096, dur);
        println!(
            "contended, {n_threads} threads: {:.2} M ops/s (always fits), {:.2} M ops/s (room for half, waiters)",
            ops / 1e6,
            ops_tight / 1e6
        );
        if n_threads == 2 || n_threads == 8 {
            for (what, x) in [
                ("budget contended, always fits", ops),
                ("budget contended, room for half", ops_tight),
            ] {
                BenchLine {
                    what,
                    size: format!("{n_threads} threads"),
                    ours: x / 1e6,
                    peer: None,
                    unit: "M ops/s",
                    lower_is_better: false,
                    target: None,
                    pass: None,
                }
                .emit();
            }
        }
    }
}
