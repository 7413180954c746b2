//! CPU NTT timings: ours (`CpuNtt`) against bellman's `EvaluationDomain`, the code that
//! `groth16::create_proof` runs for the H polynomial.
//!
//! `cargo run --release -p gpu-ntt --example ntt_bench [-- max_log_n]` (default 22).
//! Prints, after one warm-up (which also builds the twiddle table), the best wall time of
//! RUNS runs and the process CPU time (user + system, all threads) of that run. On a
//! shared machine other processes only add wall time; compare CPU times when it is busy.
//!
//! `PINION_BENCH_QUICK=1` (`cargo xtask bench --quick`): 2^16 and 2^18. `PINION_BENCH` lines
//! carry the CPU times for `cargo xtask bench`.

use pinion_bench::{quick, BenchLine};
use std::time::Instant;

use bellman::domain::{EvaluationDomain, Scalar as DomainScalar};
use bellman::multicore::Worker;
use bls12_381::Scalar;
use ff::Field;
use gpu_ntt::{AbcEvaluations, CpuNtt, NttBackend, NttSpec, Order};
use rand::rngs::StdRng;
use rand::SeedableRng;

const RUNS: usize = 3;

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

/// (best wall ms, CPU ms of that run) after one warm-up.
fn best(mut f: impl FnMut()) -> (f64, f64) {
    f();
    let (wall, cpu) = (0..RUNS)
        .map(|_| {
            let c = cpu_ms();
            let s = Instant::now();
            f();
            (s.elapsed().as_secs_f64() * 1e3, cpu_ms() - c)
        })
        .fold((f64::INFINITY, 0.0), |a, b| if b.0 < a.0 { b } else { a });
    (wall, cpu)
}

fn show((wall, cpu): (f64, f64)) -> String {
    format!("{wall:>8.1} ms wall {cpu:>8.1} ms cpu")
}

/// Ours against bellman, in CPU ms.
fn emit(what: &str, log_n: u32, ours: (f64, f64), peer: (f64, f64)) {
    BenchLine {
        what,
        size: format!("2^{log_n}"),
        ours: ours.1,
        peer: Some(peer.1),
        unit: "ms cpu",
        lower_is_better: true,
        target: Some("<= 1.0x peer (bellman)"),
        pass: Some(ours.1 <= peer.1),
    }
    .emit();
}

fn bellman_h(a: &[Scalar], b: &[Scalar], c: &[Scalar], worker: &Worker) -> Vec<Scalar> {
    let wrap = |v: &[Scalar]| v.iter().map(|x| DomainScalar(*x)).collect::<Vec<_>>();
    let mut a = EvaluationDomain::from_coeffs(wrap(a)).expect("domain");
    let mut b = EvaluationDomain::from_coeffs(wrap(b)).expect("domain");
    let mut c = EvaluationDomain::from_coeffs(wrap(c)).expect("domain");
    a.ifft(worker);
    a.coset_fft(worker);
    b.ifft(worker);
    b.coset_fft(worker);
    c.ifft(worker);
    c.coset_fft(worker);
    a.mul_assign(worker, &b);
    a.sub_assign(worker, &c);
    a.divide_by_z_on_coset(worker);
    a.icoset_fft(worker);
    let mut a = a.into_coeffs();
    let keep = a.len() - 1;
    a.truncate(keep);
    a.into_iter().map(|s| s.0).collect()
}

fn main() {
    let max_log_n: u32 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(if quick() { 18 } else { 22 });
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    println!(
        "seed = {seed}; threads = {}; best wall of {RUNS} after a warm-up",
        rayon::current_num_threads()
    );
    let mut rng = StdRng::seed_from_u64(seed);
    let ntt = CpuNtt::new();
    let worker = Worker::new();
    for log_n in (16..=max_log_n).step_by(2) {
        let n = 1usize << log_n;
        let x: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();

        let mut buf = x.clone();
        let fwd_nbr = best(|| {
            buf.copy_from_slice(&x);
            ntt.forward(&mut buf, Order::Natural, Order::BitReversed)
                .expect("ntt");
        });
        let fwd_nn = best(|| {
            buf.copy_from_slice(&x);
            ntt.transform(&mut buf, NttSpec::FORWARD).expect("ntt");
        });
        let bellman_fft = best(|| {
            let mut d = EvaluationDomain::from_coeffs(x.iter().map(|v| DomainScalar(*v)).collect())
                .expect("domain");
            d.fft(&worker);
        });
        println!(
            "forward 2^{log_n:<2} | ours nat->bitrev {} | ours nat->nat {} | bellman fft (incl. its copy) {}",
            show(fwd_nbr),
            show(fwd_nn),
            show(bellman_fft)
        );
        emit(
            "ntt forward, natural -> bit-reversed",
            log_n,
            fwd_nbr,
            bellman_fft,
        );

        // H step: a, b, c as for a circuit of n − 1 rows (pads to n, like groth16).
        let rows = n - 1;
        let a: Vec<Scalar> = x[..rows].to_vec();
        let b: Vec<Scalar> = (0..rows).map(|_| Scalar::random(&mut rng)).collect();
        let c: Vec<Scalar> = a.iter().zip(&b).map(|(p, q)| p * q).collect();
        let mut ours = Vec::new();
        let h_ms = best(|| {
            let abc = AbcEvaluations {
                a: a.clone(),
                b: b.clone(),
                c: c.clone(),
            };
            ours = ntt.h_poly(abc).expect("h");
        });
        let mut theirs = Vec::new();
        let bellman_ms = best(|| theirs = bellman_h(&a, &b, &c, &worker));
        assert_eq!(ours, theirs, "h differs from bellman's at 2^{log_n}");
        println!(
            "H step  2^{log_n:<2} | ours {} | bellman/groth16 {} | both incl. copying a, b, c",
            show(h_ms),
            show(bellman_ms)
        );
        emit("h step (6 ntts)", log_n, h_ms, bellman_ms);
    }
}
