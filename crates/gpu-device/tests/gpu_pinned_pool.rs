//! The CUDA staging pool: a buffer's copy into device memory (of another word type)
//! lands intact even when the guard is dropped and the buffer reused and overwritten
//! right after the copy was queued. Random data (seed printed; `PINION_SEED` replays).
//! Also: feeder streams of the greatest priority open on threads that never used the
//! device (the threads a prover spawns per proof).

use gpu_device::testing::gpu_or_skip;
use gpu_device::{FeederPriority, Gpu, GpuConfig, PinnedStagingPool};
use memory_budget::{Budget, Category};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

fn seed() -> u64 {
    let seed = std::env::var("PINION_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    eprintln!("seed = {seed}");
    seed
}

#[test]
fn gpu_staged_copies_survive_immediate_reuse() {
    let Some(gpu) = gpu_or_skip("pinned-pool") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(seed());
    let budget = Budget::fixed(1 << 30);
    let pool = PinnedStagingPool::<u64>::cuda(gpu.clone(), budget.clone(), "gpu test staging");
    let stream = gpu.new_stream().unwrap();
    let n = (1usize << 22) + rng.random_range(0..1000usize);
    let mut expected = Vec::new();
    let mut outputs = Vec::new();
    for round in 0..3 {
        let values: Vec<u64> = (0..n).map(|_| rng.random()).collect();
        let mut g = pool.acquire(n).unwrap();
        g.as_mut_slice().unwrap()[..n].copy_from_slice(&values);
        // Into u32 words at an offset of 3 u64 (6 u32).
        let mut dst = gpu.alloc_zeros::<u32>(2 * (n + 3), "staging dst").unwrap();
        g.copy_to_device(0..n, &mut dst, 3, &stream).unwrap();
        drop(g); // back to the pool while the copy may still run
                 // Reuse at once and overwrite: must wait for the copy above.
        let mut again = pool.acquire(n).unwrap();
        again.as_mut_slice().unwrap().fill(round);
        drop(again);
        expected.push(values);
        outputs.push(dst);
    }
    stream.synchronize().unwrap();
    gpu.synchronize().unwrap();
    for (values, dst) in expected.iter().zip(&outputs) {
        let words = stream.clone_dtoh(dst.slice()).unwrap();
        assert_eq!(&words[..6], &[0; 6]);
        for (i, v) in values.iter().enumerate() {
            let got = u64::from(words[6 + 2 * i]) | (u64::from(words[7 + 2 * i]) << 32);
            assert_eq!(got, *v, "element {i}");
        }
    }
    let s = pool.stats();
    assert_eq!(s.n_allocations, 1, "one buffer reused: {s:?}");
    assert_eq!(
        budget.snapshot().used_in(Category::PinnedPool),
        s.charged_bytes
    );
    drop(pool);
    assert_eq!(budget.used_bytes(), 0);
}

/// Buffers pinned ahead (`prewarm`) are real pinned buffers that serve the next
/// requests of their class: a copy from one lands intact, no new allocation is made.
#[test]
fn gpu_prewarmed_buffers_serve_requests() {
    let Some(gpu) = gpu_or_skip("pinned-pool") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(seed());
    let budget = Budget::fixed(1 << 30);
    let pool = PinnedStagingPool::<u64>::cuda(gpu.clone(), budget.clone(), "gpu test prewarm");
    let n = (1usize << 20) + rng.random_range(0..1000usize);
    assert_eq!(pool.prewarm(n, 2).unwrap(), 2);
    let charged = pool.stats().charged_bytes;
    assert_eq!(budget.snapshot().used_in(Category::PinnedPool), charged);
    let stream = gpu.new_stream().unwrap();
    let values: Vec<u64> = (0..n).map(|_| rng.random()).collect();
    let (mut g1, g2) = (pool.acquire(n).unwrap(), pool.acquire(n).unwrap());
    g1.as_mut_slice().unwrap()[..n].copy_from_slice(&values);
    let mut dst = gpu.alloc_zeros::<u32>(2 * n, "prewarm dst").unwrap();
    g1.copy_to_device(0..n, &mut dst, 0, &stream).unwrap();
    drop((g1, g2));
    stream.synchronize().unwrap();
    let words = stream.clone_dtoh(dst.slice()).unwrap();
    for (i, v) in values.iter().enumerate() {
        let got = u64::from(words[2 * i]) | (u64::from(words[2 * i + 1]) << 32);
        assert_eq!(got, *v, "element {i}");
    }
    let s = pool.stats();
    assert_eq!((s.n_allocations, s.n_reuses), (2, 2), "{s:?}");
    assert_eq!(s.charged_bytes, charged);
    drop(pool);
    assert_eq!(budget.used_bytes(), 0);
}

#[test]
fn gpu_high_priority_feeder_streams_open_on_a_fresh_thread() {
    let Some(_probe) = gpu_or_skip("pinned-pool") else {
        return;
    };
    let config = GpuConfig {
        feeders_first: FeederPriority::High,
        ..GpuConfig::default()
    };
    let gpu = Gpu::open_with(0, config).expect("opening device 0 with high-priority feeders");
    let mut rng = StdRng::seed_from_u64(seed());
    let words: Vec<u32> = (0..4096).map(|_| rng.random()).collect();
    let expected = words.clone();
    // A new thread has no current context: the stream's priority range must still be read.
    let back = std::thread::spawn(move || -> Result<Vec<u32>, String> {
        let stream = gpu.new_feeder_stream().map_err(|e| e.to_string())?;
        let dev = stream.clone_htod(&words).map_err(|e| e.to_string())?;
        stream.clone_dtoh(&dev).map_err(|e| e.to_string())
    })
    .join()
    .expect("the stream thread panicked")
    .expect("a high-priority feeder stream on a fresh thread");
    assert_eq!(
        back, expected,
        "a copy through the feeder stream came back changed"
    );
}
