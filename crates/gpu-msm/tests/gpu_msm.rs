//! CUDA MSM (G1) against the CPU Pippenger and the naive sum, on random inputs and edge
//! cases. Every test skips loudly without a GPU (and fails under PINION_REQUIRE_GPU=1).

use bls12_381::{G1Affine, G1Projective, Scalar};
use ff::Field;
use gpu_device::testing::gpu_or_skip;
use gpu_msm::reference::naive_msm;
use gpu_msm::{
    AccumulateKernel, CpuMsm, DensityMask, GpuMsm, GpuMsmConfig, GpuMsmError, MsmBackend, MsmError,
};
use group::{Curve, Group};
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

/// Random points cheaply: running sums of a few random points.
fn points(rng: &mut StdRng, n: usize) -> Vec<G1Affine> {
    let seeds: Vec<G1Projective> = (0..8).map(|_| G1Projective::random(&mut *rng)).collect();
    let mut acc = G1Projective::random(&mut *rng);
    let proj: Vec<G1Projective> = (0..n)
        .map(|_| {
            acc += seeds[rng.random_range(0..seeds.len())];
            acc
        })
        .collect();
    let mut out = vec![G1Affine::identity(); n];
    G1Projective::batch_normalize(&proj, &mut out);
    out
}

fn random_scalars(rng: &mut StdRng, n: usize) -> Vec<Scalar> {
    (0..n).map(|_| Scalar::random(&mut *rng)).collect()
}

/// GPU = CPU = naive (naive only when `naive` is set: it costs a full scalar
/// multiplication per term).
fn check(
    gpu: &GpuMsm,
    bases: &[G1Affine],
    scalars: &[Scalar],
    mask: Option<&DensityMask>,
    naive: bool,
    what: &str,
) {
    let got = gpu.msm_g1(bases, scalars, mask).expect("gpu msm");
    let cpu = CpuMsm::new().msm_g1(bases, scalars, mask).expect("cpu msm");
    assert_eq!(got.to_affine(), cpu.to_affine(), "gpu != cpu: {what}");
    if naive {
        let want: G1Projective = naive_msm(bases, scalars, mask);
        assert_eq!(got.to_affine(), want.to_affine(), "gpu != naive: {what}");
    }
}

#[test]
fn gpu_random_sizes_match_cpu_and_naive() {
    let Some(gpu) = gpu_or_skip("gpu-msm") else {
        return;
    };
    let engine = GpuMsm::new(gpu);
    let mut rng = rng();
    for n in [1usize, 2, 3, 31, 100, 1000, 4097] {
        let bases = points(&mut rng, n);
        let scalars = random_scalars(&mut rng, n);
        check(
            &engine,
            &bases,
            &scalars,
            None,
            n <= 1000,
            &format!("random n = {n}"),
        );
    }
}

#[test]
fn gpu_larger_random_matches_cpu() {
    let Some(gpu) = gpu_or_skip("gpu-msm") else {
        return;
    };
    let engine = GpuMsm::new(gpu);
    let mut rng = rng();
    for n in [65_537usize, 1 << 18] {
        let bases = points(&mut rng, n);
        let mut scalars = random_scalars(&mut rng, n);
        // Groth16-shaped: most scalars 0 or 1.
        for s in scalars.iter_mut() {
            match rng.random_range(0..10) {
                0..=2 => *s = Scalar::ZERO,
                3..=5 => *s = Scalar::ONE,
                _ => {}
            }
        }
        check(
            &engine,
            &bases,
            &scalars,
            None,
            false,
            &format!("mixed n = {n}"),
        );
    }
}

#[test]
fn gpu_edge_cases() {
    let Some(gpu) = gpu_or_skip("gpu-msm") else {
        return;
    };
    let engine = GpuMsm::new(gpu);
    let mut rng = rng();
    // n = 0
    let none: Vec<G1Affine> = Vec::new();
    assert_eq!(
        engine.msm_g1(&none, &[], None).unwrap(),
        G1Projective::identity()
    );
    let n = 777;
    let bases = points(&mut rng, n);
    check(
        &engine,
        &bases,
        &vec![Scalar::ZERO; n],
        None,
        true,
        "all zero",
    );
    check(
        &engine,
        &bases,
        &vec![Scalar::ONE; n],
        None,
        true,
        "all one",
    );
    check(
        &engine,
        &bases,
        &vec![-Scalar::ONE; n],
        None,
        true,
        "all r - 1",
    );
    let small: Vec<Scalar> = (0..n)
        .map(|_| Scalar::from(rng.random_range(0..20u64)))
        .collect();
    check(&engine, &bases, &small, None, true, "small scalars");
    // The same base many times: buckets meet equal points and must double.
    let same = vec![bases[0]; 3000];
    check(
        &engine,
        &same,
        &vec![Scalar::ONE; 3000],
        None,
        true,
        "same base, ones",
    );
    check(
        &engine,
        &same,
        &vec![Scalar::from(5u64); 3000],
        None,
        true,
        "same base, 5",
    );
    check(
        &engine,
        &same,
        &random_scalars(&mut rng, 3000),
        None,
        true,
        "same base, random",
    );
    // P and -P in one bucket cancel.
    let mut pm = vec![bases[1]; 64];
    pm.extend(vec![-bases[1]; 64]);
    check(
        &engine,
        &pm,
        &vec![Scalar::from(3u64); 128],
        None,
        true,
        "p and -p",
    );
    // Bases at infinity.
    let mut with_inf = bases.clone();
    for i in (0..n).step_by(3) {
        with_inf[i] = G1Affine::identity();
    }
    check(
        &engine,
        &with_inf,
        &random_scalars(&mut rng, n),
        None,
        true,
        "bases at infinity",
    );
    let all_inf = vec![G1Affine::identity(); 50];
    check(
        &engine,
        &all_inf,
        &random_scalars(&mut rng, 50),
        None,
        true,
        "all bases at infinity",
    );
    // Shape errors are typed.
    let err = engine.msm_g1(&bases[..3], &small[..4], None).unwrap_err();
    assert!(
        matches!(err, GpuMsmError::Shape(MsmError::LengthMismatch { .. })),
        "{err}"
    );
}

#[test]
fn gpu_window_sizes_and_density_mask() {
    let Some(gpu) = gpu_or_skip("gpu-msm") else {
        return;
    };
    let mut rng = rng();
    let n = 1500;
    let bases = points(&mut rng, n);
    let scalars = random_scalars(&mut rng, n);
    for c in [2u32, 3, 5, 8, 11, 13, 16, 20] {
        for accumulate in [AccumulateKernel::Uncapped, AccumulateKernel::Capped128] {
            let config = GpuMsmConfig {
                window_bits: Some(c),
                accumulate,
            };
            let engine = GpuMsm::with_config(gpu.clone(), config).expect("window in range");
            let what = format!("window {c}, {accumulate:?}");
            check(&engine, &bases, &scalars, None, c == 5, &what);
        }
    }
    let bad = GpuMsmConfig {
        window_bits: Some(1),
        ..GpuMsmConfig::default()
    };
    assert!(GpuMsm::with_config(gpu.clone(), bad).is_err());
    // Density mask: every third bit unset.
    let engine = GpuMsm::new(gpu);
    let mask = DensityMask::from_bools((0..n).map(|i| i % 3 != 1));
    let k = mask.count_ones();
    check(
        &engine,
        &bases[..k],
        &scalars,
        Some(&mask),
        true,
        "density mask",
    );
    // Batch over shared bases.
    let s2 = random_scalars(&mut rng, n);
    let got = engine
        .msm_g1_batch(&bases, &[&scalars, &s2], None)
        .expect("batch");
    let cpu = CpuMsm::new()
        .msm_g1_batch(&bases, &[&scalars, &s2], None)
        .expect("cpu batch");
    assert_eq!(got, cpu);
}

#[test]
fn gpu_resident_and_montgomery_scalars() {
    let Some(gpu) = gpu_or_skip("gpu-msm") else {
        return;
    };
    let engine = GpuMsm::new(gpu);
    let mut rng = rng();
    let n = 2049;
    let bases = points(&mut rng, n);
    let scalars = random_scalars(&mut rng, n);
    let d_bases = engine.upload_bases_g1(&bases).expect("bases");
    let canonical = engine.upload_scalars(&scalars).expect("scalars");
    let mont: Vec<bls_repr::FrRepr> = scalars.iter().map(bls_repr::FrRepr::from_scalar).collect();
    let montgomery = engine
        .upload_scalars_montgomery(&mont)
        .expect("montgomery scalars");
    let want = CpuMsm::new().msm_g1(&bases, &scalars, None).expect("cpu");
    let a = engine
        .msm_g1_resident(&d_bases, &canonical)
        .expect("resident");
    let (b, phases) = engine
        .msm_g1_resident_profiled(&d_bases, &montgomery)
        .expect("profiled");
    assert_eq!(a, want);
    assert_eq!(b, want);
    assert!(!phases.is_empty());
    let short = engine.upload_scalars(&scalars[..5]).expect("short");
    assert!(matches!(
        engine.msm_g1_resident(&d_bases, &short),
        Err(GpuMsmError::LengthMismatch { .. })
    ));
}
