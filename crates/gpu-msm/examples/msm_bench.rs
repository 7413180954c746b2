//! CPU MSM timings: ours (`CpuMsm`) against bellman's `multiexp`, the routine that
//! `groth16::create_proof` calls for every query.
//!
//! `cargo run --release -p gpu-msm --example msm_bench [-- max_log_n | --sweep log_n]`
//! Prints one line per case: curve, n, scalar mix, then for ours with the default
//! (batch-affine) buckets, ours with projective buckets, and bellman's: the best wall
//! time of RUNS runs and the process CPU time (user + system, all threads) of that run.
//! On a shared machine other processes only ever add wall time, and CPU time measures
//! the work itself, so compare CPU times when the machine is busy.
//!
//! `PINION_BENCH_QUICK=1` (`cargo xtask bench --quick`): G1 at 2^14 and 2^16, G2 at 2^12,
//! best of 3. `PINION_BENCH` lines carry the CPU times for `cargo xtask bench`.

use pinion_bench::{quick, BenchLine};
use std::sync::Arc;
use std::time::Instant;

use bellman::multicore::Worker;
use bellman::multiexp::{multiexp, Exponent, FullDensity};
use bls12_381::{G1Projective, G2Projective, Scalar};
use ff::Field;
use gpu_msm::{BucketArith, CpuMsm, CpuMsmConfig, MsmBackend};
use group::prime::PrimeCurve;
use group::Curve;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

/// Runs per measurement (the best is kept).
fn runs() -> usize {
    if quick() {
        3
    } else {
        5
    }
}

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

/// Process CPU time (user + system, all threads) in ms.
fn cpu_ms() -> f64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes one rusage struct into the pointer it is given, which
    // points at a zeroed, properly aligned rusage that lives across the call.
    let usage = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr());
        usage.assume_init()
    };
    let ms = |t: libc::timeval| t.tv_sec as f64 * 1e3 + t.tv_usec as f64 / 1e3;
    ms(usage.ru_utime) + ms(usage.ru_stime)
}

/// (best wall ms, CPU ms of that run).
fn best_ms(mut f: impl FnMut()) -> (f64, f64) {
    (0..runs())
        .map(|_| {
            let c = cpu_ms();
            let t = Instant::now();
            f();
            (t.elapsed().as_secs_f64() * 1e3, cpu_ms() - c)
        })
        .fold((f64::INFINITY, 0.0), |a, b| if b.0 < a.0 { b } else { a })
}

fn case<G>(
    label: &str,
    log_n: u32,
    groth16_shaped: bool,
    rng: &mut StdRng,
    ours: impl Fn(&CpuMsm, &[G::Affine], &[Scalar]) -> G,
) where
    G: PrimeCurve<Scalar = Scalar> + Curve,
    G::Affine: group::prime::PrimeCurveAffine<Curve = G>,
{
    let n = 1usize << log_n;
    let bases = points::<G>(rng, n);
    let s = scalars(rng, n, groth16_shaped);
    let auto = CpuMsm::new();
    let projective = CpuMsm::with_config(CpuMsmConfig {
        buckets: BucketArith::Projective,
        ..Default::default()
    })
    .expect("config");
    let auto_ms = best_ms(|| {
        std::hint::black_box(ours(&auto, &bases, &s));
    });
    let proj_ms = best_ms(|| {
        std::hint::black_box(ours(&projective, &bases, &s));
    });
    let worker = Worker::new();
    let bases_arc = Arc::new(bases.clone());
    let exps: Arc<Vec<Exponent<Scalar>>> = Arc::new(s.iter().map(Exponent::from).collect());
    let mut theirs = G::identity();
    let bellman_ms = best_ms(|| {
        theirs = multiexp::<_, _, G, _>(&worker, (bases_arc.clone(), 0), FullDensity, exps.clone())
            .wait()
            .expect("bellman multiexp");
    });
    assert_eq!(ours(&auto, &bases, &s), theirs, "results differ");
    assert_eq!(ours(&projective, &bases, &s), theirs, "results differ");
    let mix = if groth16_shaped { "groth16" } else { "uniform" };
    println!(
        "{label} 2^{log_n:<2} {mix:<8} | ours {:>8.1} ms wall {:>8.1} ms cpu | projective {:>8.1} wall {:>8.1} cpu | bellman {:>8.1} wall {:>8.1} cpu | cpu ratio bellman/ours {:>4.2}",
        auto_ms.0, auto_ms.1, proj_ms.0, proj_ms.1, bellman_ms.0, bellman_ms.1, bellman_ms.1 / auto_ms.1
    );
    BenchLine {
        what: &format!("msm {} {mix}", label.to_lowercase()),
        size: format!("2^{log_n}"),
        ours: auto_ms.1,
        peer: Some(bellman_ms.1),
        unit: "ms cpu",
        lower_is_better: true,
        target: Some("<= 1.0x peer (bellman multiexp)"),
        pass: Some(auto_ms.1 <= bellman_ms.1),
    }
    .emit();
}

/// `--sweep LOG_N`: G1 uniform at 2^LOG_N with every fixed window 10..=17 and both bucket
/// kinds beside the automatic plan, to see what the plan leaves on this machine's cores.
fn sweep(log_n: u32, rng: &mut StdRng) {
    let n = 1usize << log_n;
    let bases = points::<G1Projective>(rng, n);
    let s = scalars(rng, n, false);
    let run = |m: &CpuMsm| {
        best_ms(|| {
            std::hint::black_box(m.msm_g1(&bases, &s, None).expect("msm"));
        })
    };
    let auto = run(&CpuMsm::new());
    println!(
        "sweep G1 2^{log_n} uniform | auto {:>8.1} ms wall {:>8.1} ms cpu",
        auto.0, auto.1
    );
    for buckets in [BucketArith::BatchAffine, BucketArith::Projective] {
        for c in 10..=17u32 {
            let m = CpuMsm::with_config(CpuMsmConfig {
                window_bits: Some(c),
                buckets,
                ..Default::default()
            })
            .expect("config");
            let t = run(&m);
            println!(
                "sweep G1 2^{log_n} uniform | {buckets:?} c={c:<2} {:>8.1} ms wall {:>8.1} ms cpu",
                t.0, t.1
            );
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    if args.get(1).map(String::as_str) == Some("--sweep") {
        let log_n: u32 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(20);
        println!(
            "seed = {seed}; threads = {}; best wall of {}",
            rayon::current_num_threads(),
            runs()
        );
        sweep(log_n, &mut StdRng::seed_from_u64(seed));
        return;
    }
    let max_log_n: u32 = args
        .get(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(if quick() { 16 } else { 18 });
    let (min_log_n, g2_log_n) = if quick() { (14, 12) } else { (12, 14) };
    println!(
        "seed = {seed}; threads = {}; best wall of {}; groth16 mix = 30% zeros, 30% ones, rest uniform; bellman multiexp with FullDensity",
        rayon::current_num_threads(),
        runs()
    );
    let mut rng = StdRng::seed_from_u64(seed);
    for log_n in (min_log_n..=max_log_n).step_by(2) {
        for shaped in [false, true] {
            case::<G1Projective>("G1", log_n, shaped, &mut rng, |m, b, s| {
                m.msm_g1(b, s, None).expect("msm")
            });
        }
    }
    for shaped in [false, true] {
        case::<G2Projective>("G2", g2_log_n, shaped, &mut rng, |m, b, s| {
            m.msm_g2(b, s, None).expect("msm")
        });
    }
}
