//! CPU NTT against naive transforms, round trips, and the H step against bellman.

use bellman::domain::{EvaluationDomain, Scalar as DomainScalar};
use bellman::multicore::Worker;
use bls12_381::Scalar;
use ff::Field;
use gpu_ntt::reference::{eval_poly, naive_transform};
use gpu_ntt::{
    AbcEvaluations, CpuNtt, Direction, Domain, NttBackend, NttError, NttSpec, Order, MAX_LOG_N,
};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

fn rng() -> StdRng {
    let seed = std::env::var("PINION_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
        });
    eprintln!("seed = {seed}");
    StdRng::seed_from_u64(seed)
}

fn slow() -> bool {
    std::env::var("PINION_SLOW_TESTS").is_ok_and(|v| v == "1")
}

fn random_vec(rng: &mut StdRng, n: usize) -> Vec<Scalar> {
    (0..n).map(|_| Scalar::random(&mut *rng)).collect()
}

fn all_specs() -> Vec<NttSpec> {
    let mut v = Vec::new();
    for direction in [Direction::Forward, Direction::Inverse] {
        for domain in [Domain::Subgroup, Domain::Coset] {
            for input in [Order::Natural, Order::BitReversed] {
                for output in [Order::Natural, Order::BitReversed] {
                    v.push(NttSpec::new(direction, domain).with_orders(input, output));
                }
            }
        }
    }
    v
}

#[test]
fn matches_naive_dft() {
    let mut rng = rng();
    let ntt = CpuNtt::new();
    for log_n in 0..=6 {
        let x = random_vec(&mut rng, 1 << log_n);
        for spec in all_specs() {
            let mut got = x.clone();
            ntt.transform(&mut got, spec).unwrap();
            assert_eq!(got, naive_transform(&x, spec), "2^{log_n}, {spec:?}");
        }
    }
}

#[test]
fn naive_at_block_boundary() {
    // 2^14 crosses the cache-block size, so both global and blocked stages run; checked
    // at a few outputs against direct evaluation.
    let mut rng = rng();
    let ntt = CpuNtt::new();
    let n = 1 << 14;
    let x = random_vec(&mut rng, n);
    for spec in [NttSpec::FORWARD, NttSpec::COSET_FORWARD] {
        let mut y = x.clone();
        ntt.transform(&mut y, spec).unwrap();
        let w = gpu_ntt::omega(14);
        let s = if spec.domain == Domain::Coset {
            gpu_ntt::coset_shift()
        } else {
            Scalar::ONE
        };
        for _ in 0..4 {
            let i = rng.random_range(0..n);
            assert_eq!(
                y[i],
                eval_poly(&x, s * w.pow_vartime(&[i as u64, 0, 0, 0])),
                "{spec:?} at {i}"
            );
        }
    }
}

#[test]
fn round_trips() {
    let mut rng = rng();
    let ntt = CpuNtt::new();
    let max_log = if slow() { 22 } else { 16 };
    for log_n in (0..=max_log).step_by(1) {
        let x = random_vec(&mut rng, 1 << log_n);
        for domain in [Domain::Subgroup, Domain::Coset] {
            for (a, b) in [
                (Order::Natural, Order::BitReversed),
                (Order::BitReversed, Order::Natural),
                (Order::Natural, Order::Natural),
            ] {
                let mut y = x.clone();
                ntt.transform(
                    &mut y,
                    NttSpec::new(Direction::Forward, domain).with_orders(a, b),
                )
                .unwrap();
                ntt.transform(
                    &mut y,
                    NttSpec::new(Direction::Inverse, domain).with_orders(b, a),
                )
                .unwrap();
                assert_eq!(y, x, "2^{log_n} {domain:?} {a:?}->{b:?}");
            }
        }
    }
}

#[test]
fn coset_matches_direct_evaluation() {
    let mut rng = rng();
    let ntt = CpuNtt::new();
    let log_n = 9;
    let n = 1 << log_n;
    let coeffs = random_vec(&mut rng, n);
    let mut evals = coeffs.clone();
    ntt.coset_forward(&mut evals, Order::Natural, Order::BitReversed)
        .unwrap();
    let g = gpu_ntt::coset_shift();
    let w = gpu_ntt::omega(log_n);
    for (p, e) in evals.iter().enumerate() {
        let i = gpu_ntt::bit_reverse(p, log_n);
        assert_eq!(
            *e,
            eval_poly(&coeffs, g * w.pow_vartime(&[i as u64, 0, 0, 0])),
            "position {p}"
        );
    }
    ntt.coset_inverse(&mut evals, Order::BitReversed, Order::Natural)
        .unwrap();
    assert_eq!(evals, coeffs);
}

#[test]
fn bad_lengths_are_errors() {
    let ntt = CpuNtt::new();
    let mut v = vec![Scalar::ONE; 3];
    assert_eq!(
        ntt.transform(&mut v, NttSpec::FORWARD),
        Err(NttError::NotPowerOfTwo { len: 3 })
    );
    assert_eq!(
        ntt.transform(&mut [], NttSpec::FORWARD),
        Err(NttError::NotPowerOfTwo { len: 0 })
    );
    assert_eq!(
        gpu_ntt::log2_len(1 << 29),
        Err(NttError::TooLarge {
            len: 1 << 29,
            max_len: 1 << MAX_LOG_N
        })
    );
    let abc = AbcEvaluations {
        a: vec![Scalar::ONE; 4],
        b: vec![Scalar::ONE; 4],
        c: vec![Scalar::ONE; 5],
    };
    assert_eq!(
        ntt.h_poly(abc),
        Err(NttError::LengthMismatch {
            name: "c",
            expected: 4,
            found: 5
        })
    );
    assert_eq!(
        gpu_ntt::h_domain_size((1 << 28) + 1),
        Err(NttError::TooLarge {
            len: 1 << 29,
            max_len: 1 << MAX_LOG_N
        })
    );
}

/// groth16::create_proof's H step, step for step, with bellman's own domain code.
fn bellman_h(a: &[Scalar], b: &[Scalar], c: &[Scalar]) -> Vec<Scalar> {
    let worker = Worker::new();
    let wrap = |v: &[Scalar]| v.iter().map(|x| DomainScalar(*x)).collect::<Vec<_>>();
    let mut a = EvaluationDomain::from_coeffs(wrap(a)).unwrap();
    let mut b = EvaluationDomain::from_coeffs(wrap(b)).unwrap();
    let mut c = EvaluationDomain::from_coeffs(wrap(c)).unwrap();
    a.ifft(&worker);
    a.coset_fft(&worker);
    b.ifft(&worker);
    b.coset_fft(&worker);
    c.ifft(&worker);
    c.coset_fft(&worker);
    a.mul_assign(&worker, &b);
    a.sub_assign(&worker, &c);
    a.divide_by_z_on_coset(&worker);
    a.icoset_fft(&worker);
    let mut a = a.into_coeffs();
    let keep = a.len() - 1;
    a.truncate(keep);
    a.into_iter().map(|s| s.0).collect()
}

#[test]
fn h_equals_bellman_for_any_abc() {
    let mut rng = rng();
    let ntt = CpuNtt::new();
    let mut sizes = vec![0usize, 1, 2, 3, 5, 8, 63, 100, 1000, 4096, (1 << 15) + 3];
    sizes.push(rng.random_range(1..4096));
    if slow() {
        sizes.extend([1 << 18, (1 << 20) + 7]);
    }
    for n in sizes {
        let a = random_vec(&mut rng, n);
        let b = random_vec(&mut rng, n);
        let c = random_vec(&mut rng, n);
        let want = bellman_h(&a, &b, &c);
        let got = ntt.h_poly(AbcEvaluations { a, b, c }).unwrap();
        assert_eq!(got.len(), want.len(), "n = {n}");
        assert_eq!(got, want, "n = {n}");
    }
}

#[test]
fn h_divides_for_satisfied_systems() {
    // c_i = a_i·b_i on every row (a satisfied R1CS): then a(x)b(x) − c(x) = h(x)·Z(x)
    // for the interpolants over the domain, checked at a random point.
    let mut rng = rng();
    let ntt = CpuNtt::new();
    for n in [1usize, 2, 7, 64, 1000, 4000] {
        let a = random_vec(&mut rng, n);
        let b = random_vec(&mut rng, n);
        // Some rows are input rows x·0 = 0, as groth16 appends them.
        let b: Vec<Scalar> = b
            .iter()
            .enumerate()
            .map(|(i, x)| if i % 10 == 9 { Scalar::ZERO } else { *x })
            .collect();
        let c: Vec<Scalar> = a.iter().zip(&b).map(|(x, y)| x * y).collect();
        let m = gpu_ntt::h_domain_size(n).unwrap();
        let interpolate = |v: &[Scalar]| {
            let mut v = v.to_vec();
            v.resize(m, Scalar::ZERO);
            ntt.inverse(&mut v, Order::Natural, Order::Natural).unwrap();
            v
        };
        let (pa, pb, pc) = (interpolate(&a), interpolate(&b), interpolate(&c));
        let h = ntt.h_poly(AbcEvaluations { a, b, c }).unwrap();
        assert_eq!(h.len(), m - 1);
        let x = Scalar::random(&mut rng);
        let z = x.pow_vartime(&[m as u64, 0, 0, 0]) - Scalar::ONE;
        let lhs = eval_poly(&pa, x) * eval_poly(&pb, x) - eval_poly(&pc, x);
        assert_eq!(lhs, eval_poly(&h, x) * z, "n = {n}");
    }
}

#[test]
fn matches_bellman_domain_transforms() {
    // bellman's fft/ifft/coset_fft/icoset_fft (natural order) as an independent oracle at
    // sizes where the naive O(n²) transform is too slow.
    let mut rng = rng();
    let ntt = CpuNtt::new();
    let worker = Worker::new();
    let max_log = if slow() { 20 } else { 16 };
    for log_n in [1, 2, 10, 13, 14, max_log] {
        let x = random_vec(&mut rng, 1 << log_n);
        type Op = fn(&mut EvaluationDomain<Scalar, DomainScalar<Scalar>>, &Worker);
        let cases: [(NttSpec, Op); 4] = [
            (NttSpec::FORWARD, |d, w| d.fft(w)),
            (NttSpec::INVERSE, |d, w| d.ifft(w)),
            (NttSpec::COSET_FORWARD, |d, w| d.coset_fft(w)),
            (NttSpec::COSET_INVERSE, |d, w| d.icoset_fft(w)),
        ];
        for (spec, op) in cases {
            let mut d = EvaluationDomain::from_coeffs(x.iter().map(|v| DomainScalar(*v)).collect())
                .unwrap();
            op(&mut d, &worker);
            let want: Vec<Scalar> = d.into_coeffs().into_iter().map(|s| s.0).collect();
            let mut got = x.clone();
            ntt.transform(&mut got, spec).unwrap();
            assert_eq!(got, want, "2^{log_n} {spec:?}");
        }
    }
}

#[test]
fn usable_as_trait_object() {
    // The prover holds a backend as `Box<dyn NttBackend>` and picks CPU or GPU at runtime.
    let mut rng = rng();
    let backend: Box<dyn NttBackend> = Box::new(CpuNtt::new());
    assert_eq!(backend.name(), "cpu-radix2");
    let x = random_vec(&mut rng, 8);
    let mut y = x.clone();
    backend
        .forward(&mut y, Order::Natural, Order::Natural)
        .unwrap();
    assert_eq!(y, naive_transform(&x, NttSpec::FORWARD));
}

#[test]
fn h_coset_evaluations_are_the_definition() {
    // snarkjs's H step: value j is (a·b − c)(shift·ω^j) for the interpolants of a, b, c,
    // here with c = a∘b as snarkjs forms it and with an unrelated c too.
    let mut rng = rng();
    let ntt = CpuNtt::new();
    for n in [1usize, 2, 5, 64, 300] {
        let a = random_vec(&mut rng, n);
        let b = random_vec(&mut rng, n);
        let m = gpu_ntt::h_domain_size(n).unwrap();
        let log_m = m.trailing_zeros();
        // A 2m-th root of unity (the odd coset snarkjs uses) and a random shift.
        let root_2m = gpu_ntt::omega(log_m + 1);
        for (c, shift) in [
            (
                a.iter().zip(&b).map(|(x, y)| x * y).collect::<Vec<_>>(),
                root_2m,
            ),
            (random_vec(&mut rng, n), Scalar::random(&mut rng)),
        ] {
            let interpolate = |v: &[Scalar]| {
                let mut v = v.to_vec();
                v.resize(m, Scalar::ZERO);
                naive_transform(&v, NttSpec::INVERSE)
            };
            let (pa, pb, pc) = (interpolate(&a), interpolate(&b), interpolate(&c));
            let got = ntt
                .h_coset_evaluations(
                    AbcEvaluations {
                        a: a.clone(),
                        b: b.clone(),
                        c,
                    },
                    shift,
                )
                .unwrap();
            assert_eq!(got.len(), m);
            let w = gpu_ntt::omega(log_m);
            for (j, v) in got.iter().enumerate() {
                let x = shift * w.pow_vartime(&[j as u64, 0, 0, 0]);
                let want = eval_poly(&pa, x) * eval_poly(&pb, x) - eval_poly(&pc, x);
                assert_eq!(*v, want, "n = {n}, j = {j}");
            }
        }
    }
    let err = ntt
        .h_coset_evaluations(
            AbcEvaluations {
                a: vec![Scalar::ONE; 3],
                b: vec![Scalar::ONE; 2],
                c: vec![Scalar::ONE; 3],
            },
            Scalar::ONE,
        )
        .unwrap_err();
    assert!(matches!(err, NttError::LengthMismatch { name: "b", .. }));
}
