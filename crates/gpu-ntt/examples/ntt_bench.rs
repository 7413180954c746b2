//! CPU NTT timings: ours (`CpuNtt`) against bellman's `EvaluationDomain`, the code that
//! `groth16::create_proof` runs for the H polynomial.
//!
//! `cargo run --release -p gpu-ntt --example ntt_bench [-- max_log_n]` (default 22).
//! Prints median ms of 3 runs (after one warm-up that also builds the twiddle table).

use std::time::Instant;

use bellman::domain::{EvaluationDomain, Scalar as DomainScalar};
use bellman::multicore::Worker;
use bls12_381::Scalar;
use ff::Field;
use gpu_ntt::{AbcEvaluations, CpuNtt, NttBackend, NttSpec, Order};
use rand::rngs::StdRng;
use rand::SeedableRng;

const RUNS: usize = 3;

fn median_ms(mut f: impl FnMut()) -> f64 {
    f();
    let mut t: Vec<f64> = (0..RUNS)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[RUNS / 2]
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
        .unwrap_or(22);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    println!(
        "seed = {seed}; threads = {}; median of {RUNS} after a warm-up",
        rayon::current_num_threads()
    );
    let mut rng = StdRng::seed_from_u64(seed);
    let ntt = CpuNtt::new();
    let worker = Worker::new();
    for log_n in (16..=max_log_n).step_by(2) {
        let n = 1usize << log_n;
        let x: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();

        let mut buf = x.clone();
        let fwd_nbr = median_ms(|| {
            buf.copy_from_slice(&x);
            ntt.forward(&mut buf, Order::Natural, Order::BitReversed)
                .expect("ntt");
        });
        let fwd_nn = median_ms(|| {
            buf.copy_from_slice(&x);
            ntt.transform(&mut buf, NttSpec::FORWARD).expect("ntt");
        });
        let bellman_fft = median_ms(|| {
            let mut d = EvaluationDomain::from_coeffs(x.iter().map(|v| DomainScalar(*v)).collect())
                .expect("domain");
            d.fft(&worker);
        });
        println!(
            "forward 2^{log_n:<2}: ours nat->bitrev {fwd_nbr:>8.1} ms, nat->nat {fwd_nn:>8.1} ms; bellman fft {bellman_fft:>8.1} ms (incl. its copy)"
        );

        // H step: a, b, c as for a circuit of n − 1 rows (pads to n, like groth16).
        let rows = n - 1;
        let a: Vec<Scalar> = x[..rows].to_vec();
        let b: Vec<Scalar> = (0..rows).map(|_| Scalar::random(&mut rng)).collect();
        let c: Vec<Scalar> = a.iter().zip(&b).map(|(p, q)| p * q).collect();
        let mut ours = Vec::new();
        let h_ms = median_ms(|| {
            let abc = AbcEvaluations {
                a: a.clone(),
                b: b.clone(),
                c: c.clone(),
            };
            ours = ntt.h_poly(abc).expect("h");
        });
        let mut theirs = Vec::new();
        let bellman_ms = median_ms(|| theirs = bellman_h(&a, &b, &c, &worker));
        assert_eq!(ours, theirs, "h differs from bellman's at 2^{log_n}");
        println!(
            "H step  2^{log_n:<2}: ours {h_ms:>8.1} ms; bellman/groth16 {bellman_ms:>8.1} ms; speedup {:>5.2}x (both incl. copying a, b, c)",
            bellman_ms / h_ms
        );
    }
}
