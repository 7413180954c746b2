//! CPU MSM timings: ours (`CpuMsm`) against bellman's `multiexp`, the routine that
//! `groth16::create_proof` calls for every query.
//!
//! `cargo run --release -p gpu-msm --example msm_bench [-- max_log_n]`
//! Prints one line per case: curve, n, scalar mix, median ms of ours and of bellman's.

use std::sync::Arc;
use std::time::Instant;

use bellman::multicore::Worker;
use bellman::multiexp::{multiexp, Exponent, FullDensity};
use bls12_381::{G1Projective, G2Projective, Scalar};
use ff::Field;
use gpu_msm::{CpuMsm, MsmBackend};
use group::prime::PrimeCurve;
use group::Curve;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

const RUNS: usize = 3;

fn points<G: Curve>(rng: &mut StdRng, n: usize) -> Vec<G::Affine> {
    let seeds: Vec<G> = (0..16).map(|_| G::random(&mut *rng)).collect();
    let mut acc = G::random(&mut *rng);
    let proj: Vec<G> = (0..n)
        .map(|_| {
            acc += seeds[rng.random_range(0..seeds.len())];
            acc
        })
        .collect();
    let mut out = vec![G::identity().to_affine(); n];
    G::batch_normalize(&proj, &mut out);
    out
}

fn scalars(rng: &mut StdRng, n: usize, groth16_shaped: bool) -> Vec<Scalar> {
    (0..n)
        .map(|_| {
            if groth16_shaped {
                match rng.random_range(0..10u32) {
                    0..3 => return Scalar::ZERO,
                    3..6 => return Scalar::ONE,
                    _ => {}
                }
            }
            Scalar::random(&mut *rng)
        })
        .collect()
}

fn median_ms(mut f: impl FnMut()) -> f64 {
    let mut times: Vec<f64> = (0..RUNS)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[RUNS / 2]
}

fn case<G>(
    label: &str,
    log_n: u32,
    groth16_shaped: bool,
    rng: &mut StdRng,
    ours: impl Fn(&[G::Affine], &[Scalar]) -> G,
) where
    G: PrimeCurve<Scalar = Scalar> + Curve,
    G::Affine: group::prime::PrimeCurveAffine<Curve = G>,
{
    let n = 1usize << log_n;
    let bases = points::<G>(rng, n);
    let s = scalars(rng, n, groth16_shaped);
    let ours_ms = median_ms(|| {
        std::hint::black_box(ours(&bases, &s));
    });
    let worker = Worker::new();
    let bases_arc = Arc::new(bases.clone());
    let exps: Arc<Vec<Exponent<Scalar>>> = Arc::new(s.iter().map(Exponent::from).collect());
    let mut theirs = G::identity();
    let bellman_ms = median_ms(|| {
        theirs = multiexp::<_, _, G, _>(&worker, (bases_arc.clone(), 0), FullDensity, exps.clone())
            .wait()
            .expect("bellman multiexp");
    });
    assert_eq!(ours(&bases, &s), theirs, "results differ");
    let mix = if groth16_shaped {
        "groth16 (30% 0, 30% 1)"
    } else {
        "uniform"
    };
    println!(
        "{label} n=2^{log_n:<2} {mix:<22} ours {ours_ms:>9.1} ms   bellman {bellman_ms:>9.1} ms   speedup {:>5.2}x",
        bellman_ms / ours_ms
    );
}

fn main() {
    let max_log_n: u32 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(18);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    println!(
        "seed = {seed}; threads = {}; median of {RUNS}; bellman multiexp with FullDensity",
        rayon::current_num_threads()
    );
    let mut rng = StdRng::seed_from_u64(seed);
    let msm = CpuMsm::new();
    for log_n in (12..=max_log_n).step_by(2) {
        for shaped in [false, true] {
            case::<G1Projective>("G1", log_n, shaped, &mut rng, |b, s| {
                msm.msm_g1(b, s, None).expect("msm")
            });
        }
    }
    for shaped in [false, true] {
        case::<G2Projective>("G2", 14, shaped, &mut rng, |b, s| {
            msm.msm_g2(b, s, None).expect("msm")
        });
    }
}
