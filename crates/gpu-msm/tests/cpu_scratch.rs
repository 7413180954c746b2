//! `CpuMsm::scratch_bytes_g1` / `_g2` against what an MSM really allocates: a counting
//! global allocator records the peak of live heap bytes during one call (every thread of
//! the rayon pool included). The estimate is what a prover charges before the call, so it
//! must bound the peak, and it must not be far above it (an over-charge refuses work that
//! would fit).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use bls12_381::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::Field;
use gpu_msm::{BucketArith, CpuMsm, CpuMsmConfig};
use group::Curve;
use rand::rngs::StdRng;

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is passed on unchanged.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Heap bytes `f` allocated at its peak beyond what was live when it started.
fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let out = f();
    (out, PEAK.load(Ordering::Relaxed) - before)
}

mod common;

use common::rng;

/// Distinct points cheaply: running sums of one random point.
fn points<G: Curve>(rng: &mut StdRng, n: usize) -> Vec<G::Affine> {
    let step = G::random(&mut *rng);
    let mut acc = G::random(&mut *rng);
    let proj: Vec<G> = (0..n)
        .map(|_| {
            acc += step;
            acc
        })
        .collect();
    let mut out = vec![G::identity().to_affine(); n];
    G::batch_normalize(&proj, &mut out);
    out
}

/// Runs one MSM per backend and size and checks estimate ≥ peak ≥ estimate / 3.
fn check<A: gpu_msm::MsmBase + Sync>(
    name: &str,
    bases: &[A],
    scalars: &[Scalar],
    estimate: impl Fn(&CpuMsm, usize) -> u64,
) {
    let backends = [
        CpuMsm::new(),
        CpuMsm::with_config(CpuMsmConfig {
            buckets: BucketArith::Projective,
            ..CpuMsmConfig::default()
        })
        .unwrap(),
        CpuMsm::with_config(CpuMsmConfig {
            buckets: BucketArith::BatchAffine,
            scalars_in_flight: Some(1 << 12),
            ..CpuMsmConfig::default()
        })
        .unwrap(),
    ];
    for (i, msm) in backends.iter().enumerate() {
        let (_sum, peak) = peak_during(|| msm.msm(bases, scalars, None).unwrap());
        let want = estimate(msm, scalars.len());
        eprintln!(
            "{name} n={} backend {i}: peak {peak} bytes, estimate {want}",
            scalars.len()
        );
        assert!(
            peak as u64 <= want,
            "{name} n={} backend {i}: allocated {peak} bytes, estimate {want}",
            scalars.len()
        );
        assert!(
            peak as u64 >= want / 3,
            "{name} n={} backend {i}: estimate {want} far above the {peak} bytes allocated",
            scalars.len()
        );
    }
}

#[test]
fn scratch_estimates_bound_what_an_msm_allocates() {
    let mut rng = rng();
    for log_n in [10, 13, 15] {
        let n = 1usize << log_n;
        let bases = points::<G1Projective>(&mut rng, n);
        let scalars: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
        check::<G1Affine>("G1", &bases, &scalars, CpuMsm::scratch_bytes_g1);
    }
    for log_n in [10, 12] {
        let n = 1usize << log_n;
        let bases = points::<G2Projective>(&mut rng, n);
        let scalars: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
        check::<G2Affine>("G2", &bases, &scalars, CpuMsm::scratch_bytes_g2);
    }
    assert_eq!(CpuMsm::new().scratch_bytes_g1(0), 0);
}
