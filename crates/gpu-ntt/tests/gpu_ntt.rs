//! GPU NTT against the CPU backend and the naive O(n²) transform, round trips, and the H
//! step against the CPU H step. Every test skips loudly without a CUDA driver.

use bls12_381::Scalar;
use bls_repr::FrRepr;
use ff::Field;
use gpu_device::testing::gpu_or_skip;
use gpu_ntt::reference::naive_transform;
use gpu_ntt::{
    download_reprs, upload_reprs, AbcEvaluations, AbcSource, CpuNtt, Direction, Domain, GpuNtt,
    GpuNttConfig, GpuNttError, NttBackend, NttError, NttSpec, Order, WORDS_PER_ELEMENT,
};
use memory_budget::{Budget, Category};
use rand::rngs::StdRng;
use rand::SeedableRng;

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

fn max_log() -> u32 {
    20
}

/// The tile configurations under test: the default, those `GpuNtt::new` picks at 2^24
/// and 2^26 (2 and 1 columns), and small tiles so that sizes up to 2^20 run through many
/// passes with column tiles (exercises every pass shape).
fn configs() -> [GpuNttConfig; 5] {
    [
        GpuNttConfig::default(),
        GpuNttConfig::for_size(24),
        GpuNttConfig::for_size(26),
        GpuNttConfig {
            tile_log: 11,
            max_clog: 2,
        },
        GpuNttConfig {
            tile_log: 4,
            max_clog: 3,
        },
    ]
}

#[test]
fn every_variant_matches_cpu_and_naive() {
    let Some(gpu) = gpu_or_skip("gpu-ntt") else {
        return;
    };
    let mut rng = rng();
    let cpu = CpuNtt::new();
    let ntts = configs().map(|c| GpuNtt::with_config(gpu.clone(), c));
    // Descending sizes: the first builds the largest twiddle table, the rest read it with
    // a stride.
    for log_n in (1..=max_log()).rev() {
        let x = random_vec(&mut rng, 1 << log_n);
        for spec in all_specs() {
            let mut want = x.clone();
            cpu.transform(&mut want, spec).unwrap();
            if log_n <= 7 {
                assert_eq!(want, naive_transform(&x, spec), "cpu 2^{log_n} {spec:?}");
            }
            for ntt in &ntts {
                let mut got = x.clone();
                ntt.transform(&mut got, spec).unwrap();
                assert!(
                    got == want,
                    "gpu 2^{log_n} {spec:?} {:?}: first difference at {:?}",
                    ntt.config(),
                    got.iter().zip(&want).position(|(g, w)| g != w)
                );
            }
        }
    }
}

#[test]
fn ascending_sizes_regrow_the_twiddle_table() {
    let Some(gpu) = gpu_or_skip("gpu-ntt") else {
        return;
    };
    let mut rng = rng();
    let cpu = CpuNtt::new();
    let ntt = GpuNtt::new(gpu);
    let spec = NttSpec::FORWARD.with_orders(Order::Natural, Order::BitReversed);
    for log_n in [1u32, 3, 12, 5, 16] {
        let x = random_vec(&mut rng, 1 << log_n);
        let mut want = x.clone();
        cpu.transform(&mut want, spec).unwrap();
        let mut got = x;
        ntt.transform(&mut got, spec).unwrap();
        assert_eq!(got, want, "2^{log_n}");
        assert!(ntt.twiddle_bytes() >= 32 << (log_n - 1));
    }
}

#[test]
fn inverse_of_forward_is_identity_on_device() {
    let Some(gpu) = gpu_or_skip("gpu-ntt") else {
        return;
    };
    let mut rng = rng();
    let ntt = GpuNtt::new(gpu.clone());
    let stream = gpu.stream().clone();
    for log_n in 0..=max_log() {
        let x: Vec<FrRepr> = random_vec(&mut rng, 1 << log_n)
            .iter()
            .map(FrRepr::from_scalar)
            .collect();
        for domain in [Domain::Subgroup, Domain::Coset] {
            for (i, o) in [
                (Order::Natural, Order::BitReversed),
                (Order::BitReversed, Order::Natural),
                (Order::Natural, Order::Natural),
                (Order::BitReversed, Order::BitReversed),
            ] {
                let mut buf = upload_reprs(&gpu, &x, "round trip").unwrap();
                let fwd = NttSpec::new(Direction::Forward, domain).with_orders(i, o);
                let inv = NttSpec::new(Direction::Inverse, domain).with_orders(o, i);
                ntt.transform_device(&mut buf, fwd, &stream).unwrap();
                if log_n >= 2 {
                    assert_ne!(download_reprs(&gpu, &buf).unwrap(), x, "2^{log_n} moved");
                }
                ntt.transform_device(&mut buf, inv, &stream).unwrap();
                assert_eq!(download_reprs(&gpu, &buf).unwrap(), x, "2^{log_n} {fwd:?}");
            }
        }
    }
}

fn random_abc(rng: &mut StdRng, n: usize) -> AbcEvaluations {
    AbcEvaluations {
        a: random_vec(rng, n),
        b: random_vec(rng, n),
        c: random_vec(rng, n),
    }
}

#[test]
fn h_matches_cpu_for_random_abc() {
    let Some(gpu) = gpu_or_skip("gpu-ntt") else {
        return;
    };
    let mut rng = rng();
    let cpu = CpuNtt::new();
    let ntt = GpuNtt::new(gpu);
    for n in [
        1usize,
        2,
        3,
        5,
        64,
        1000,
        (1 << 12) + 3,
        (1 << 16) - 1,
        1 << 18,
    ] {
        let abc = random_abc(&mut rng, n);
        let want = cpu.h_poly(abc.clone()).unwrap();
        let got = ntt.h_poly(abc).unwrap();
        assert_eq!(got.len(), want.len(), "n = {n}");
        assert!(
            got == want,
            "n = {n}: first difference at {:?}",
            got.iter().zip(&want).position(|(g, w)| g != w)
        );
    }
}

#[test]
fn h_coset_evaluations_match_cpu() {
    // snarkjs's H step (a zkey's): a 2m-th root as the shift, and a random one.
    let Some(gpu) = gpu_or_skip("gpu-ntt") else {
        return;
    };
    let mut rng = rng();
    let cpu = CpuNtt::new();
    let ntt = GpuNtt::new(gpu);
    for n in [1usize, 2, 5, 1000, (1 << 16) - 1, 1 << 18] {
        let abc = random_abc(&mut rng, n);
        let m = gpu_ntt::h_domain_size(n).unwrap();
        for shift in [
            gpu_ntt::omega(m.trailing_zeros() + 1),
            Scalar::random(&mut rng),
        ] {
            let want = cpu.h_coset_evaluations(abc.clone(), shift).unwrap();
            let got = ntt.h_coset_evaluations(abc.clone(), shift).unwrap();
            assert_eq!(got.len(), m, "n = {n}");
            assert!(
                got == want,
                "n = {n}: first difference at {:?}",
                got.iter().zip(&want).position(|(g, w)| g != w)
            );
        }
    }
}

#[test]
fn h_from_device_and_pinned_inputs_equals_host() {
    let Some(gpu) = gpu_or_skip("gpu-ntt") else {
        return;
    };
    let mut rng = rng();
    let ntt = GpuNtt::new(gpu.clone());
    let stream = gpu.new_stream().unwrap();
    let host_budget = Budget::fixed(1 << 30);
    for n in [3usize, 1 << 10, (1 << 14) + 1] {
        let abc = random_abc(&mut rng, n);
        let want = CpuNtt::new().h_poly(abc.clone()).unwrap();
        let [a, b, c] =
            [&abc.a, &abc.b, &abc.c].map(|v| v.iter().map(FrRepr::from_scalar).collect::<Vec<_>>());
        let check = |h: gpu_ntt::HPolyDevice, what: &str| {
            h.inputs_uploaded.synchronize().unwrap();
            stream.synchronize().unwrap();
            let got = download_reprs(&gpu, &h.coeffs).unwrap();
            assert_eq!(h.n_coeffs, want.len(), "{what} n = {n}");
            let got: Vec<Scalar> = got[..h.n_coeffs]
                .iter()
                .map(|r| r.to_scalar().unwrap())
                .collect();
            assert_eq!(got, want, "{what} n = {n}");
        };
        let dev = AbcSource::Device {
            a: upload_reprs(&gpu, &a, "a").unwrap(),
            b: upload_reprs(&gpu, &b, "b").unwrap(),
            c: upload_reprs(&gpu, &c, "c").unwrap(),
        };
        check(ntt.h_poly_device(dev, &stream).unwrap(), "device");
        let words = n * WORDS_PER_ELEMENT;
        let pinned = |v: &[FrRepr]| {
            let r = host_budget
                .try_reserve(words as u64 * 8, Category::PinnedPool, "test pinned")
                .unwrap();
            let mut p = gpu.alloc_pinned::<u64>(words, r).unwrap();
            p.as_mut_slice()
                .unwrap()
                .copy_from_slice(bytemuck::cast_slice(v));
            p
        };
        let (pa, pb, pc) = (pinned(&a), pinned(&b), pinned(&c));
        let src = AbcSource::Pinned {
            a: &pa,
            b: &pb,
            c: &pc,
        };
        check(ntt.h_poly_device(src, &stream).unwrap(), "pinned");
    }
}

#[test]
fn bad_inputs_are_typed_errors() {
    let Some(gpu) = gpu_or_skip("gpu-ntt") else {
        return;
    };
    let ntt = GpuNtt::new(gpu.clone());
    let stream = gpu.stream().clone();
    let mut three = vec![Scalar::ONE; 3];
    assert!(matches!(
        ntt.transform(&mut three, NttSpec::FORWARD),
        Err(GpuNttError::Ntt(NttError::NotPowerOfTwo { len: 3 }))
    ));
    let mut ragged = gpu.alloc_zeros::<u64>(6, "ragged").unwrap();
    assert!(matches!(
        ntt.transform_device(&mut ragged, NttSpec::FORWARD, &stream),
        Err(GpuNttError::NotWholeElements { words: 6, .. })
    ));
    let abc = AbcEvaluations {
        a: vec![Scalar::ONE; 4],
        b: vec![Scalar::ONE; 4],
        c: vec![Scalar::ONE; 3],
    };
    assert!(matches!(
        ntt.h_poly(abc),
        Err(GpuNttError::Ntt(NttError::LengthMismatch {
            name: "c",
            expected: 4,
            found: 3
        }))
    ));
}
