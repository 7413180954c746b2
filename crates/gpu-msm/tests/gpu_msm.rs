//! CUDA MSM (G1 and G2) against the CPU Pippenger and the naive sum, on random inputs and
//! edge cases. Each check is written once, generic over the curve, and run as a G1 test
//! and a `gpu_g2_*` test. Every test skips loudly without a GPU (and fails under
//! PINION_REQUIRE_GPU=1).

use bls12_381::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::Field;
use gpu_device::testing::gpu_or_skip;
use gpu_msm::reference::naive_msm;
use gpu_msm::{
    AccumulateKernel, CpuMsm, DensityMask, G1Curve, G2Curve, GpuCurve, GpuMsm, GpuMsmConfig,
    GpuMsmError, MsmBackend, MsmError, OnesScatter, PinnedBases, ReduceKernel, SortKind,
    TwoLevelParams, GPU_MAX_WINDOW_BITS,
};
use group::{Curve, Group};
use rand::rngs::StdRng;
use rand::RngExt;

mod common;

use common::rng;

/// What the generic checks need of a curve besides [`GpuCurve`]: the CPU oracle.
trait TestCurve: GpuCurve<Projective = Self::P, Affine = <Self::P as Curve>::Affine> {
    type P: Curve<Scalar = Scalar> + std::fmt::Debug;
    fn cpu(
        bases: &[Self::Affine],
        scalars: &[Scalar],
        mask: Option<&DensityMask>,
    ) -> Result<Self::P, MsmError>;
    fn cpu_batch(bases: &[Self::Affine], sets: &[&[Scalar]]) -> Result<Vec<Self::P>, MsmError>;
}

impl TestCurve for G1Curve {
    type P = G1Projective;
    fn cpu(b: &[G1Affine], s: &[Scalar], m: Option<&DensityMask>) -> Result<Self::P, MsmError> {
        CpuMsm::new().msm_g1(b, s, m)
    }
    fn cpu_batch(b: &[G1Affine], sets: &[&[Scalar]]) -> Result<Vec<Self::P>, MsmError> {
        CpuMsm::new().msm_g1_batch(b, sets, None)
    }
}

impl TestCurve for G2Curve {
    type P = G2Projective;
    fn cpu(b: &[G2Affine], s: &[Scalar], m: Option<&DensityMask>) -> Result<Self::P, MsmError> {
        CpuMsm::new().msm_g2(b, s, m)
    }
    fn cpu_batch(b: &[G2Affine], sets: &[&[Scalar]]) -> Result<Vec<Self::P>, MsmError> {
        CpuMsm::new().msm_g2_batch(b, sets, None)
    }
}

fn identity<C: TestCurve>() -> C::Affine {
    C::P::identity().to_affine()
}

/// Random points cheaply: running sums of a few random points.
fn points<C: TestCurve>(rng: &mut StdRng, n: usize) -> Vec<C::Affine> {
    let seeds: Vec<C::P> = (0..8).map(|_| C::P::random(&mut *rng)).collect();
    let mut acc = C::P::random(&mut *rng);
    let proj: Vec<C::P> = (0..n)
        .map(|_| {
            acc += seeds[rng.random_range(0..seeds.len())];
            acc
        })
        .collect();
    let mut out = vec![identity::<C>(); n];
    C::P::batch_normalize(&proj, &mut out);
    out
}

fn random_scalars(rng: &mut StdRng, n: usize) -> Vec<Scalar> {
    (0..n).map(|_| Scalar::random(&mut *rng)).collect()
}

/// GPU = CPU = naive (naive only when `naive` is set: it costs a full scalar
/// multiplication per term).
fn check<C: TestCurve>(
    gpu: &GpuMsm,
    bases: &[C::Affine],
    scalars: &[Scalar],
    mask: Option<&DensityMask>,
    naive: bool,
    what: &str,
) {
    let what = format!("{}: {what}", C::NAME);
    let got = gpu.msm::<C>(bases, scalars, mask).expect("gpu msm");
    let cpu = C::cpu(bases, scalars, mask).expect("cpu msm");
    assert_eq!(got.to_affine(), cpu.to_affine(), "gpu != cpu: {what}");
    if naive {
        let want: C::P = naive_msm(bases, scalars, mask);
        assert_eq!(got.to_affine(), want.to_affine(), "gpu != naive: {what}");
    }
}

/// Random sizes, powers of two and not; the naive sum up to 1000 terms.
fn random_sizes<C: TestCurve>(engine: &GpuMsm, rng: &mut StdRng) {
    for n in [1usize, 2, 3, 31, 100, 1000, 4097] {
        let bases = points::<C>(rng, n);
        let scalars = random_scalars(rng, n);
        let what = format!("random n = {n}");
        check::<C>(engine, &bases, &scalars, None, n <= 1000, &what);
    }
}

/// Larger Groth16-shaped inputs (60% zeros and ones) against the CPU.
fn larger_mixed<C: TestCurve>(engine: &GpuMsm, rng: &mut StdRng, sizes: &[usize]) {
    for &n in sizes {
        let bases = points::<C>(rng, n);
        let mut scalars = random_scalars(rng, n);
        for s in scalars.iter_mut() {
            match rng.random_range(0..10) {
                0..=2 => *s = Scalar::ZERO,
                3..=5 => *s = Scalar::ONE,
                _ => {}
            }
        }
        check::<C>(
            engine,
            &bases,
            &scalars,
            None,
            false,
            &format!("mixed n = {n}"),
        );
    }
}

fn edge_cases<C: TestCurve>(engine: &GpuMsm, rng: &mut StdRng)
where
    C::Affine: std::ops::Neg<Output = C::Affine>,
{
    // n = 0
    let none: Vec<C::Affine> = Vec::new();
    assert_eq!(engine.msm::<C>(&none, &[], None).unwrap(), C::P::identity());
    let n = 777;
    let bases = points::<C>(rng, n);
    check::<C>(
        engine,
        &bases,
        &vec![Scalar::ZERO; n],
        None,
        true,
        "all zero",
    );
    check::<C>(engine, &bases, &vec![Scalar::ONE; n], None, true, "all one");
    check::<C>(
        engine,
        &bases,
        &vec![-Scalar::ONE; n],
        None,
        true,
        "all r - 1",
    );
    let small: Vec<Scalar> = (0..n)
        .map(|_| Scalar::from(rng.random_range(0..20u64)))
        .collect();
    check::<C>(engine, &bases, &small, None, true, "small scalars");
    // The same base many times: buckets meet equal points and must double.
    let same = vec![bases[0]; 3000];
    let ones = vec![Scalar::ONE; 3000];
    check::<C>(engine, &same, &ones, None, true, "same base, ones");
    let fives = vec![Scalar::from(5u64); 3000];
    check::<C>(engine, &same, &fives, None, true, "same base, 5");
    let random = random_scalars(rng, 3000);
    check::<C>(engine, &same, &random, None, true, "same base, random");
    // P and -P in one bucket cancel.
    let mut pm = vec![bases[1]; 64];
    pm.extend(vec![-bases[1]; 64]);
    let threes = vec![Scalar::from(3u64); 128];
    check::<C>(engine, &pm, &threes, None, true, "p and -p");
    // Bases at infinity.
    let mut with_inf = bases.clone();
    for i in (0..n).step_by(3) {
        with_inf[i] = identity::<C>();
    }
    let random = random_scalars(rng, n);
    check::<C>(engine, &with_inf, &random, None, true, "bases at infinity");
    let all_inf = vec![identity::<C>(); 50];
    let random = random_scalars(rng, 50);
    check::<C>(
        engine,
        &all_inf,
        &random,
        None,
        true,
        "all bases at infinity",
    );
    // Shape errors are typed.
    let err = engine.msm::<C>(&bases[..3], &small[..4], None).unwrap_err();
    assert!(
        matches!(err, GpuMsmError::Shape(MsmError::LengthMismatch { .. })),
        "{err}"
    );
}

/// [`edge_cases`] on every accumulation kernel the curve has: the affine one meets
/// doublings, P + (-P) and bases at infinity inside its batches there (Auto runs it only on
/// large inputs).
fn edge_cases_every_kernel<C: TestCurve>(gpu: &gpu_device::Gpu)
where
    C::Affine: std::ops::Neg<Output = C::Affine>,
{
    for accumulate in AccumulateKernel::ALL
        .into_iter()
        .filter(|k| k.resolve::<C>() == *k)
    {
        eprintln!("edge cases, {accumulate:?}");
        let config = GpuMsmConfig {
            accumulate,
            ..GpuMsmConfig::default()
        };
        let engine = GpuMsm::with_config(gpu.clone(), config).expect("valid config");
        edge_cases::<C>(&engine, &mut rng());
    }
}

fn window_sizes_and_density_mask<C: TestCurve>(gpu: &gpu_device::Gpu, rng: &mut StdRng) {
    let n = 1500;
    let bases = points::<C>(rng, n);
    let scalars = random_scalars(rng, n);
    for c in [2u32, 3, 5, 8, 11, 13, 16, 20, 22] {
        for accumulate in AccumulateKernel::ALL
            .into_iter()
            .filter(|k| k.resolve::<C>() == *k)
        {
            let config = GpuMsmConfig {
                window_bits: Some(c),
                accumulate,
                ..GpuMsmConfig::default()
            };
            let engine = GpuMsm::with_config(gpu.clone(), config).expect("window in range");
            let what = format!("window {c}, {accumulate:?}");
            check::<C>(&engine, &bases, &scalars, None, c == 5, &what);
        }
        // Both reduction kernels (their segment counts differ once a window has more
        // than 1024 buckets).
        if c >= 13 {
            for reduce in [ReduceKernel::Uncapped, ReduceKernel::Capped] {
                let config = GpuMsmConfig {
                    window_bits: Some(c),
                    reduce,
                    ..GpuMsmConfig::default()
                };
                let engine = GpuMsm::with_config(gpu.clone(), config).expect("window in range");
                let what = format!("window {c}, {reduce:?}");
                check::<C>(&engine, &bases, &scalars, None, false, &what);
            }
        }
    }
    let bad = GpuMsmConfig {
        window_bits: Some(1),
        ..GpuMsmConfig::default()
    };
    assert!(GpuMsm::with_config(gpu.clone(), bad).is_err());
    // Density mask: every third bit unset.
    let engine = GpuMsm::new(gpu.clone());
    let mask = DensityMask::from_bools((0..n).map(|i| i % 3 != 1));
    let k = mask.count_ones();
    check::<C>(
        &engine,
        &bases[..k],
        &scalars,
        Some(&mask),
        true,
        "density mask",
    );
    // Batch over shared bases.
    let s2 = random_scalars(rng, n);
    let got = engine
        .msm_batch::<C>(&bases, &[&scalars, &s2], None)
        .expect("batch");
    let cpu = C::cpu_batch(&bases, &[&scalars, &s2]).expect("cpu batch");
    assert_eq!(got, cpu);
}

/// Chunked accumulation with short chunks (so that buckets cross many chunk boundaries and
/// fix-up runs of several groups) on scalar sets that make buckets very unequal: all
/// equal, few distinct values, long runs of one value among random ones, zeros and ones.
fn chunked_skewed_scalars<C: TestCurve>(gpu: &gpu_device::Gpu, rng: &mut StdRng) {
    let n = 3000;
    let bases = points::<C>(rng, n);
    let two = Scalar::from(2u64);
    let big = Scalar::random(&mut *rng);
    let sets: Vec<(&str, Vec<Scalar>)> = vec![
        ("all equal (2)", vec![two; n]),
        ("all equal (random)", vec![big; n]),
        (
            "three values",
            (0..n).map(|i| [two, big, -big][i % 3]).collect(),
        ),
        (
            "a run of 2000 equal among random",
            (0..n)
                .map(|i| {
                    if (500..2500).contains(&i) {
                        big
                    } else {
                        Scalar::random(&mut *rng)
                    }
                })
                .collect(),
        ),
        (
            "zeros, ones and r - 1",
            (0..n)
                .map(|_| [Scalar::ZERO, Scalar::ONE, -Scalar::ONE][rng.random_range(0..3usize)])
                .collect(),
        ),
        ("uniform", random_scalars(rng, n)),
    ];
    for (what, scalars) in &sets {
        // The chunked kernels this curve has (G2 runs its one for every chunked choice).
        for accumulate in AccumulateKernel::ALL
            .into_iter()
            .filter(|k| k.is_chunked() && k.resolve::<C>() == *k)
        {
            for (c, chunk_len) in [(16u32, 1u32), (8, 3), (13, 7), (16, 64), (20, 256)] {
                let config = GpuMsmConfig {
                    window_bits: Some(c),
                    accumulate,
                    chunk_len: Some(chunk_len),
                    ..GpuMsmConfig::default()
                };
                let engine = GpuMsm::with_config(gpu.clone(), config).expect("valid config");
                let label = format!("{what}: window {c}, {accumulate:?}, chunks of {chunk_len}");
                check::<C>(&engine, &bases, scalars, None, false, &label);
            }
        }
    }
    let bad = GpuMsmConfig {
        chunk_len: Some(0),
        ..GpuMsmConfig::default()
    };
    assert!(matches!(
        GpuMsm::with_config(gpu.clone(), bad),
        Err(GpuMsmError::BadChunkLen { chunk_len: 0, .. })
    ));
}

fn resident_and_montgomery_scalars<C: TestCurve>(engine: &GpuMsm, rng: &mut StdRng) {
    let n = 2049;
    let bases = points::<C>(rng, n);
    let scalars = random_scalars(rng, n);
    let d_bases = engine.upload_bases::<C>(&bases).expect("bases");
    // The bls-repr upload path gives the same bases.
    let reprs: Vec<C::Repr> = bases.iter().map(C::to_repr).collect();
    let d_reprs = engine.upload_bases_repr::<C>(&reprs).expect("repr bases");
    let canonical = engine.upload_scalars(&scalars).expect("scalars");
    let mont: Vec<bls_repr::FrRepr> = scalars.iter().map(bls_repr::FrRepr::from_scalar).collect();
    let montgomery = engine
        .upload_scalars_montgomery(&mont)
        .expect("montgomery scalars");
    let want = C::cpu(&bases, &scalars, None).expect("cpu");
    let a = engine.msm_resident(&d_bases, &canonical).expect("resident");
    let (b, phases) = engine
        .msm_resident_profiled(&d_bases, &montgomery)
        .expect("profiled");
    let c = engine
        .msm_resident(&d_reprs, &canonical)
        .expect("repr resident");
    assert_eq!(a, want);
    assert_eq!(b, want);
    assert_eq!(c, want);
    assert!(!phases.is_empty());
    let short = engine.upload_scalars(&scalars[..5]).expect("short");
    assert!(matches!(
        engine.msm_resident(&d_bases, &short),
        Err(GpuMsmError::LengthMismatch { .. })
    ));
}

/// Witness-shaped scalars: zeros and ones most of the time.
fn witness_scalars(rng: &mut StdRng, n: usize) -> Vec<Scalar> {
    (0..n)
        .map(|_| match rng.random_range(0..4) {
            0 => Scalar::ZERO,
            1 => Scalar::ONE,
            2 => -Scalar::ONE,
            _ => Scalar::random(&mut *rng),
        })
        .collect()
}

/// A witness copied in Montgomery form, converted on the device and compacted by masks
/// (what the prover does with one upload) gives the words the host selection gives, and
/// the same MSMs; writes stay inside their range (the rest of the buffer keeps its
/// poison); bad ranges and masks are typed errors.
#[test]
fn gpu_select_scalars_matches_host_selection() {
    let Some(gpu) = gpu_or_skip("gpu-msm") else {
        return;
    };
    let engine = GpuMsm::new(gpu.clone());
    let mut rng = rng();
    const POISON: u32 = 0xdead_beef;
    let pool = gpu_device::PinnedStagingPool::<u64>::cuda(
        gpu.clone(),
        memory_budget::Budget::fixed(1 << 30),
        "gpu-msm test staging",
    );
    for n in [0usize, 1, 63, 64, 65, 1000, 4097, 70_001] {
        let scalars = witness_scalars(&mut rng, n);
        let mont: Vec<bls_repr::FrRepr> =
            scalars.iter().map(bls_repr::FrRepr::from_scalar).collect();
        let mut w = engine
            .upload_scalar_words(bytemuck::cast_slice(&mont))
            .expect("witness upload");
        engine
            .montgomery_to_canonical(&mut w)
            .expect("to canonical");
        let density = rng.random_range(0..=100);
        let mask = DensityMask::from_bools((0..n).map(|_| rng.random_range(0..100) < density));
        // The selected scalars after a prefix written from the first 3 scalars (as the
        // prover puts the inputs before the aux), with two poisoned scalars beyond.
        let head = n.min(3);
        let k = mask.count_ones();
        let total = head + k;
        let mut dst = engine
            .upload_scalar_words(&vec![POISON; 8 * (total + 2)])
            .expect("poisoned destination");
        let d_mask = engine.upload_mask(&mask, n).expect("mask");
        assert_eq!((d_mask.len(), d_mask.count_ones()), (n, k));
        let wrote_head = engine
            .select_scalars((&w, 0, head), None, &mut dst, 0)
            .expect("copy");
        let wrote = engine
            .select_scalars((&w, 0, n), Some(&d_mask), &mut dst, head)
            .expect("select");
        assert_eq!((wrote_head, wrote), (head, k), "n = {n}");
        let got = gpu.download(dst.words()).expect("download");
        let mut want = vec![0u32; 8 * total];
        let mut at = gpu_msm::select_scalar_words_into(&mut want, &scalars[..head], None);
        at += gpu_msm::select_scalar_words_into(&mut want[8 * at..], &scalars, Some(&mask));
        assert_eq!(at, total);
        assert_eq!(&got[..8 * total], &want[..], "n = {n}, density {density}%");
        assert!(
            got[8 * total..].iter().all(|&x| x == POISON),
            "n = {n}: wrote past its range"
        );
        // The canonical witness itself, and an MSM over the selection.
        let all = gpu.download(w.words()).expect("download witness");
        assert_eq!(all, gpu_msm::scalars_to_words(&scalars), "n = {n}");
        if k > 0 {
            let bases = points::<G1Curve>(&mut rng, k);
            let d_bases = engine.upload_bases::<G1Curve>(&bases).expect("bases");
            let mut sel = engine.alloc_scalars(k).expect("alloc");
            engine
                .select_scalars((&w, 0, n), Some(&d_mask), &mut sel, 0)
                .expect("select");
            let picked: Vec<Scalar> = (0..n)
                .filter(|&i| mask.get(i))
                .map(|i| scalars[i])
                .collect();
            assert_eq!(
                engine.msm_resident(&d_bases, &sel).expect("msm"),
                G1Curve::cpu(&bases, &picked, None).expect("cpu"),
                "n = {n}"
            );
        }
        // A mask limited to a prefix selects from that prefix only.
        let half = n / 2;
        let d_half = engine.upload_mask(&mask, half).expect("half mask");
        let k_half = (0..half).filter(|&i| mask.get(i)).count();
        assert_eq!((d_half.len(), d_half.count_ones()), (half, k_half));
        let mut sel = engine.alloc_scalars(k_half).expect("alloc");
        assert_eq!(
            engine
                .select_scalars((&w, 0, half), Some(&d_half), &mut sel, 0)
                .expect("select prefix"),
            k_half
        );
        let mut want = vec![0u32; 8 * k_half];
        gpu_msm::select_scalar_words_into(&mut want, &scalars[..half], Some(&mask));
        assert_eq!(
            gpu.download(sel.words()).expect("download"),
            want,
            "n = {n}"
        );
        // The same prefix mask through a poisoned pinned staging buffer, past an offset:
        // the same selection.
        let at = 5;
        let need = GpuMsm::mask_staging_words(&mask, half);
        let mut staging = pool.acquire(at + need + 3).expect("staging");
        staging.as_mut_slice().expect("host").fill(u64::MAX);
        let d_staged = engine
            .upload_mask_staged(&mask, half, &mut staging, at)
            .expect("staged mask");
        assert_eq!((d_staged.len(), d_staged.count_ones()), (half, k_half));
        let mut sel = engine.alloc_scalars(k_half).expect("alloc");
        engine
            .select_scalars((&w, 0, half), Some(&d_staged), &mut sel, 0)
            .expect("select staged prefix");
        assert_eq!(
            gpu.download(sel.words()).expect("download"),
            want,
            "n = {n}, staged mask"
        );
        let found = staging.capacity();
        assert!(matches!(
            engine.upload_mask_staged(&mask, half, &mut staging, found - need + 1),
            Err(GpuMsmError::Gpu(
                gpu_device::GpuError::LengthMismatch { .. }
            ))
        ));
    }
    // Out of range: the source, the destination, a mask of another length.
    let w = engine.alloc_scalars(10).expect("alloc");
    let mut dst = engine.alloc_scalars(4).expect("alloc");
    let bad = |r: Result<usize, GpuMsmError>| matches!(r, Err(GpuMsmError::ScalarRange { .. }));
    assert!(bad(engine.select_scalars((&w, 8, 3), None, &mut dst, 0)));
    assert!(bad(engine.select_scalars((&w, 0, 5), None, &mut dst, 0)));
    assert!(bad(engine.select_scalars(
        (&w, usize::MAX, 2),
        None,
        &mut dst,
        0
    )));
    let full = engine
        .upload_mask(&DensityMask::full(10), 10)
        .expect("mask");
    assert!(bad(engine.select_scalars(
        (&w, 0, 9),
        Some(&full),
        &mut dst,
        0
    )));
    assert!(bad(engine.select_scalars(
        (&w, 0, 10),
        Some(&full),
        &mut dst,
        0
    )));
    let two = engine.upload_mask(&DensityMask::full(10), 2).expect("mask");
    let wrote = engine.select_scalars((&w, 0, 2), Some(&two), &mut dst, 2);
    assert_eq!(wrote.expect("two of a longer mask"), 2);
}

#[test]
fn gpu_random_sizes_match_cpu_and_naive() {
    let Some(gpu) = gpu_or_skip("gpu-msm") else {
        return;
    };
    random_sizes::<G1Curve>(&GpuMsm::new(gpu), &mut rng());
}

#[test]
fn gpu_g2_random_sizes_match_cpu_and_naive() {
    let Some(gpu) = gpu_or_skip("gpu-msm") else {
        return;
    };
    random_sizes::<G2Curve>(&GpuMsm::new(gpu), &mut rng());
}

#[test]
fn gpu_larger_random_matches_cpu() {
    let Some(gpu) = gpu_or_skip("gpu-msm") else {
        return;
    };
    larger_mixed::<G1Curve>(&GpuMsm::new(gpu), &mut rng(), &[65_537, 1 << 18]);
}

#[test]
fn gpu_g2_larger_random_matches_cpu() {
    let Some(gpu) = gpu_or_skip("gpu-msm") else {
        return;
    };
    // The CPU oracle on G2 is ~3x slower than on G1: smaller sizes.
    larger_mixed::<G2Curve>(&GpuMsm::new(gpu), &mut rng(), &[65_537]);
}

#[test]
fn gpu_edge_cases() {
    let Some(gpu) = gpu_or_skip("gpu-msm") else {
        return;
    };
    edge_cases_every_kernel::<G1Curve>(&gpu);
}

#[test]
fn gpu_g2_edge_cases() {
    let Some(gpu) = gpu_or_skip("gpu-msm") else {
        return;
    };
    edge_cases_every_kernel::<G2Curve>(&gpu);
}

#[test]
fn gpu_window_sizes_and_density_mask() {
    let Some(gpu) = gpu_or_skip("gpu-msm") else {
        return;
    };
    window_sizes_and_density_mask::<G1Curve>(&gpu, &mut rng());
}

#[test]
fn gpu_g2_window_sizes_and_density_mask() {
    let Some(gpu) = gpu_or_skip("gpu-msm") else {
        return;
    };
    window_sizes_and_density_mask::<G2Curve>(&gpu, &mut rng());
}

/// The two-level sort (`SortKind::TwoLevel`) with its place pass unstaged (session 32's
/// sizes) gives the same sums as the CPU: random sizes, Groth16-shaped inputs up to 2^18
/// terms, every window size with the accumulation kernels, and scalars whose digits pile
/// into a few bins (one bin then holds every entry of a window).
#[test]
fn gpu_two_level_sort_matches_cpu() {
    let Some(gpu) = gpu_or_skip("gpu-msm") else {
        return;
    };
    let unstaged = TwoLevelParams {
        chunk_log: 14,
        place_bins: 2048,
        staged: false,
        ..TwoLevelParams::default()
    };
    two_level_sort_matches_cpu(&gpu, unstaged);
}

/// The same with the place pass staged in shared memory (`TwoLevelParams::staged`), at the
/// default sizes, with small blocks and wide bins, and with one window a place launch.
#[test]
fn gpu_two_level_staged_sort_matches_cpu() {
    let Some(gpu) = gpu_or_skip("gpu-msm") else {
        return;
    };
    let staged = TwoLevelParams::default();
    assert!(staged.staged, "the default places staged");
    for params in [
        staged,
        TwoLevelParams {
            chunk_log: 8,
            bin_entries_log: 18,
            ..staged
        },
        TwoLevelParams {
            place_bins: 1,
            ..staged
        },
    ] {
        eprintln!("{params:?}");
        two_level_sort_matches_cpu(&gpu, params);
    }
}

fn two_level_sort_matches_cpu(gpu: &gpu_device::Gpu, params: TwoLevelParams) {
    let mut rng = rng();
    let two_level = GpuMsmConfig {
        sort: SortKind::TwoLevel,
        two_level: params,
        ..GpuMsmConfig::default()
    };
    let engine = GpuMsm::with_config(gpu.clone(), two_level).expect("valid config");
    random_sizes::<G1Curve>(&engine, &mut rng);
    random_sizes::<G2Curve>(&engine, &mut rng);
    larger_mixed::<G1Curve>(&engine, &mut rng, &[65_537, 1 << 18]);
    let n = 1500;
    let bases = points::<G1Curve>(&mut rng, n);
    let scalars = random_scalars(&mut rng, n);
    for c in [2u32, 5, 8, 13, 16, 20, 22] {
        for accumulate in [
            AccumulateKernel::ChunkedCapped,
            AccumulateKernel::ChunkedAffine,
        ] {
            let config = GpuMsmConfig {
                window_bits: Some(c),
                accumulate,
                ..two_level
            };
            let engine = GpuMsm::with_config(gpu.clone(), config).expect("window in range");
            let what = format!("two-level sort, window {c}, {accumulate:?}");
            check::<G1Curve>(&engine, &bases, &scalars, None, false, &what);
        }
    }
    let big = Scalar::random(&mut rng);
    for (what, scalars) in [
        ("two-level sort, all equal", vec![big; n]),
        (
            "two-level sort, two values",
            (0..n).map(|i| [big, -big][i % 2]).collect::<Vec<_>>(),
        ),
    ] {
        check::<G1Curve>(&engine, &bases, &scalars, None, true, what);
    }
}

#[test]
fn gpu_chunked_accumulation_on_skewed_scalars() {
    let Some(gpu) = gpu_or_skip("gpu-msm") else {
        return;
    };
    chunked_skewed_scalars::<G1Curve>(&gpu, &mut rng());
}

#[test]
fn gpu_g2_chunked_accumulation_on_skewed_scalars() {
    let Some(gpu) = gpu_or_skip("gpu-msm") else {
        return;
    };
    chunked_skewed_scalars::<G2Curve>(&gpu, &mut rng());
}

#[test]
fn gpu_resident_and_montgomery_scalars() {
    let Some(gpu) = gpu_or_skip("gpu-msm") else {
        return;
    };
    resident_and_montgomery_scalars::<G1Curve>(&GpuMsm::new(gpu), &mut rng());
}

#[test]
fn gpu_g2_resident_and_montgomery_scalars() {
    let Some(gpu) = gpu_or_skip("gpu-msm") else {
        return;
    };
    resident_and_montgomery_scalars::<G2Curve>(&GpuMsm::new(gpu), &mut rng());
}

/// The trait view runs G2 on the GPU too and agrees with the CPU backend.
#[test]
fn gpu_g2_through_msm_backend() {
    let Some(gpu) = gpu_or_skip("gpu-msm") else {
        return;
    };
    let engine = GpuMsm::new(gpu);
    let mut rng = rng();
    let n = 3001;
    let bases = points::<G2Curve>(&mut rng, n);
    let scalars = random_scalars(&mut rng, n);
    let got = MsmBackend::msm_g2(&engine, &bases, &scalars, None).expect("trait g2");
    let want = CpuMsm::new()
        .msm_g2(&bases, &scalars, None)
        .expect("cpu g2");
    assert_eq!(got, want);
    let got = MsmBackend::msm_g2_batch(&engine, &bases, &[&scalars], None).expect("batch");
    assert_eq!(got, vec![want]);
}

/// Pinned host bases of curve `C` holding `bases`.
fn pin<C: TestCurve>(gpu: &gpu_device::Gpu, bases: &[C::Affine]) -> PinnedBases<C> {
    let n_words = bases.len() * C::AFFINE_WORDS;
    let bytes = (n_words * 4) as u64;
    let budget = memory_budget::Budget::fixed(bytes);
    let reservation = budget
        .try_reserve(bytes, memory_budget::Category::PinnedPool, "test bases")
        .expect("reservation");
    let words = gpu
        .alloc_pinned::<u32>(n_words, reservation)
        .expect("pinned");
    let mut pinned = PinnedBases::<C>::from_words(words).expect("whole points");
    for (dst, src) in pinned.reprs_mut().expect("reprs").iter_mut().zip(bases) {
        *dst = C::to_repr(src);
    }
    pinned
}

/// Bases streamed from pinned memory in chunks give the resident result, for chunk
/// sizes that divide n, do not, equal it and exceed it; bad shapes are typed errors.
fn streamed_matches_resident<C: TestCurve>(gpu: &gpu_device::Gpu, rng: &mut StdRng) {
    let engine = GpuMsm::new(gpu.clone());
    for (n, chunks) in [
        (5usize, &[1usize, 2, 5, 8][..]),
        (5000, &[1000, 1024, 4999, 5000]),
    ] {
        let bases = points::<C>(rng, n);
        let mut scalars = random_scalars(rng, n);
        scalars[0] = Scalar::ONE;
        scalars[n - 1] = Scalar::ZERO;
        let d_bases = engine.upload_bases::<C>(&bases).expect("bases");
        let d_scalars = engine.upload_scalars(&scalars).expect("scalars");
        let want = engine.msm_resident(&d_bases, &d_scalars).expect("resident");
        assert_eq!(want, C::cpu(&bases, &scalars, None).expect("cpu"));
        let pinned = pin::<C>(gpu, &bases);
        assert_eq!(pinned.len(), n);
        for &chunk_len in chunks {
            let got = engine
                .msm_streamed(&pinned, &d_scalars, chunk_len)
                .expect("streamed");
            assert_eq!(got, want, "{}: n = {n}, chunks of {chunk_len}", C::NAME);
        }
        assert!(matches!(
            engine.msm_streamed(&pinned, &d_scalars, 0),
            Err(GpuMsmError::BadChunk { chunk_len: 0 })
        ));
        let short = engine.upload_scalars(&scalars[..n - 1]).expect("short");
        assert!(matches!(
            engine.msm_streamed(&pinned, &short, 1000),
            Err(GpuMsmError::LengthMismatch { .. })
        ));
    }
    // A buffer that is not a whole number of points is refused.
    let budget = memory_budget::Budget::fixed(4 * 4096);
    let reservation = budget
        .try_reserve(4 * 4096, memory_budget::Category::PinnedPool, "odd")
        .expect("reservation");
    let odd = gpu
        .alloc_pinned::<u32>(C::AFFINE_WORDS + 1, reservation)
        .expect("pinned");
    assert!(matches!(
        PinnedBases::<C>::from_words(odd),
        Err(GpuMsmError::BadPinnedBases { .. })
    ));
}

#[test]
fn gpu_streamed_from_pinned_matches_resident() {
    let Some(gpu) = gpu_or_skip("gpu-msm") else {
        return;
    };
    streamed_matches_resident::<G1Curve>(&gpu, &mut rng());
}

#[test]
fn gpu_g2_streamed_from_pinned_matches_resident() {
    let Some(gpu) = gpu_or_skip("gpu-msm") else {
        return;
    };
    streamed_matches_resident::<G2Curve>(&gpu, &mut rng());
}

/// A prefix of bases held elsewhere in bls-repr's layout (srs-store's device tier as u64
/// limbs; its host tier as reprs) gives the sum over that prefix, for prefixes of every
/// kind; a prefix longer than the bases is a typed error.
fn prefixes_match_cpu<C: TestCurve>(gpu: &gpu_device::Gpu, rng: &mut StdRng) {
    let engine = GpuMsm::new(gpu.clone());
    let n = 3000;
    let bases = points::<C>(rng, n);
    let reprs: Vec<C::Repr> = bases.iter().map(C::to_repr).collect();
    let limbs: &[u64] = bytemuck::cast_slice(&reprs);
    let on_device = gpu.upload(limbs, "test bases as limbs").expect("upload");
    let view = gpu_msm::DeviceBasesView::<C>::from_limbs(&on_device, n).expect("view");
    assert_eq!(view.len(), n);
    for k in [0usize, 1, 7, 1024, 2999, 3000] {
        let scalars = random_scalars(rng, k);
        let want = C::cpu(&bases[..k], &scalars, None).expect("cpu");
        let d_scalars = engine.upload_scalars(&scalars).expect("scalars");
        let got = engine
            .msm_resident_prefix(&view, &d_scalars)
            .expect("resident prefix");
        assert_eq!(got, want, "{}: resident prefix of {k}", C::NAME);
        let got = engine
            .msm_streamed_host::<C>(&reprs, &d_scalars, 700)
            .expect("streamed prefix");
        assert_eq!(got, want, "{}: streamed prefix of {k}", C::NAME);
    }
    let too_many = engine
        .upload_scalars(&random_scalars(rng, n + 1))
        .expect("scalars");
    assert!(matches!(
        engine.msm_resident_prefix(&view, &too_many),
        Err(GpuMsmError::LengthMismatch { .. })
    ));
    assert!(matches!(
        engine.msm_streamed_host::<C>(&reprs, &too_many, 700),
        Err(GpuMsmError::LengthMismatch { .. })
    ));
    assert!(matches!(
        gpu_msm::DeviceBasesView::<C>::from_limbs(&on_device, n + 1),
        Err(GpuMsmError::BadDeviceBases { .. })
    ));
}

#[test]
fn gpu_prefix_of_borrowed_bases_matches_cpu() {
    let Some(gpu) = gpu_or_skip("gpu-msm") else {
        return;
    };
    prefixes_match_cpu::<G1Curve>(&gpu, &mut rng());
}

#[test]
fn gpu_g2_prefix_of_borrowed_bases_matches_cpu() {
    let Some(gpu) = gpu_or_skip("gpu-msm") else {
        return;
    };
    prefixes_match_cpu::<G2Curve>(&gpu, &mut rng());
}

/// One sort of the scalars summed over several sets of bases
/// (`msm_resident_prefix_many`: two queries of a proof that read the same scalars) gives
/// each set's own sum: sets of their own and a set that is another's tail
/// (`DeviceBasesView::skip`, a query's aux part after its inputs), longer than the
/// scalars or not, every accumulation kernel, witness-shaped and uniform scalars; a set
/// shorter than the scalars is a typed error, no set gives no sums.
fn one_sort_many_bases<C: TestCurve>(gpu: &gpu_device::Gpu, rng: &mut StdRng) {
    let n = 3000;
    let first = points::<C>(rng, n);
    let mut second = points::<C>(rng, n + 5);
    second[9] = identity::<C>();
    let limbs = |b: &[C::Affine]| {
        let reprs: Vec<C::Repr> = b.iter().map(C::to_repr).collect();
        gpu.upload(bytemuck::cast_slice::<C::Repr, u64>(&reprs), "test bases")
            .expect("upload")
    };
    let (d_first, d_second) = (limbs(&first), limbs(&second));
    let v_first = gpu_msm::DeviceBasesView::<C>::from_limbs(&d_first, n).expect("view");
    let v_second = gpu_msm::DeviceBasesView::<C>::from_limbs(&d_second, n + 5).expect("view");
    // The second set's tail after 5 "inputs", as a prover's a_query after its inputs.
    let tail = v_second.skip(5).expect("skip");
    assert_eq!(tail.len(), n);
    assert_eq!(v_second.skip(n + 5).map(|v| v.len()), Some(0));
    assert!(v_second.skip(n + 6).is_none());
    for kernel in [
        AccumulateKernel::Auto,
        AccumulateKernel::ChunkedAffine,
        AccumulateKernel::ChunkedCapped,
        AccumulateKernel::Capped128,
    ] {
        let engine = GpuMsm::with_config(
            gpu.clone(),
            GpuMsmConfig {
                accumulate: kernel,
                ..GpuMsmConfig::default()
            },
        )
        .expect("config");
        for k in [0usize, 1, 777, n] {
            for uniform in [false, true] {
                let scalars = match uniform {
                    true => random_scalars(rng, k),
                    false => witness_scalars(rng, k),
                };
                let d_scalars = engine.upload_scalars(&scalars).expect("scalars");
                let got = engine
                    .msm_resident_prefix_many(&[&v_first, &tail, &v_second], &d_scalars)
                    .expect("one sort, three sets");
                let want = [
                    C::cpu(&first[..k], &scalars, None).expect("cpu"),
                    C::cpu(&second[5..5 + k], &scalars, None).expect("cpu"),
                    C::cpu(&second[..k], &scalars, None).expect("cpu"),
                ];
                assert_eq!(
                    got,
                    want,
                    "{} {kernel:?}: {k} terms, uniform {uniform}",
                    C::NAME
                );
            }
        }
        let d_scalars = engine
            .upload_scalars(&random_scalars(rng, n + 1))
            .expect("scalars");
        assert!(matches!(
            engine.msm_resident_prefix_many(&[&v_second, &v_first], &d_scalars),
            Err(GpuMsmError::LengthMismatch {
                n_bases: 3000,
                n_scalars: 3001
            })
        ));
        assert!(engine
            .msm_resident_prefix_many::<C>(&[], &d_scalars)
            .expect("no sets")
            .is_empty());
    }
}

#[test]
fn gpu_one_sort_many_bases_matches_cpu() {
    let Some(gpu) = gpu_or_skip("gpu-msm") else {
        return;
    };
    one_sort_many_bases::<G1Curve>(&gpu, &mut rng());
}

#[test]
fn gpu_g2_one_sort_many_bases_matches_cpu() {
    let Some(gpu) = gpu_or_skip("gpu-msm") else {
        return;
    };
    one_sort_many_bases::<G2Curve>(&gpu, &mut rng());
}

/// A sparse query's bases laid out one per scalar (`expand_bases_g1`, kernel
/// `g1_expand_bases`): an MSM over them and every scalar is the masked MSM over the compact
/// bases, for empty, full, sparse and random masks of lengths around words, outputs longer
/// than the mask (infinity past it), compact bases longer than the mask's set bits; one
/// sort over the expanded set and another gives both sums; short compact bases or a short
/// output are typed errors.
#[test]
fn gpu_expanded_bases_sum_as_the_mask_selects() {
    let Some(gpu) = gpu_or_skip("gpu-msm") else {
        return;
    };
    let mut rng = rng();
    let engine = GpuMsm::new(gpu);
    for n in [1usize, 63, 64, 65, 1000, 3001] {
        for density in [0u32, 100, 3, 97, 50] {
            let bits: Vec<bool> = (0..n).map(|_| rng.random_range(0..100) < density).collect();
            let mask = DensityMask::from_bools(bits.iter().copied());
            let ones = mask.count_ones();
            let compact = points::<G1Curve>(&mut rng, ones + 2);
            let d_compact = engine.upload_bases_g1(&compact).expect("bases");
            let other = points::<G1Curve>(&mut rng, n + 9);
            let d_other = engine.upload_bases_g1(&other).expect("bases");
            for extra in [0usize, 9] {
                let len = n + extra;
                let expanded = engine
                    .expand_bases_g1(&d_compact.view(), &mask, len)
                    .expect("expand");
                assert_eq!(expanded.len(), len);
                let scalars = witness_scalars(&mut rng, len);
                let d_scalars = engine.upload_scalars(&scalars).expect("scalars");
                let want = CpuMsm::new()
                    .msm_g1(&compact[..ones], &scalars[..n], Some(&mask))
                    .expect("cpu");
                let got = engine
                    .msm_resident(&expanded, &d_scalars)
                    .expect("msm over the expanded bases");
                assert_eq!(
                    got, want,
                    "n {n}, density {density}%, {extra} past the mask"
                );
                let both = engine
                    .msm_resident_prefix_many(&[&d_other.view(), &expanded.view()], &d_scalars)
                    .expect("one sort, two sets");
                let other_sum = CpuMsm::new()
                    .msm_g1(&other[..len], &scalars, None)
                    .expect("cpu");
                assert_eq!(both, vec![other_sum, want], "n {n}, density {density}%");
            }
            if ones > 1 {
                let short = engine.upload_bases_g1(&compact[..ones - 1]).expect("bases");
                assert!(matches!(
                    engine.expand_bases_g1(&short.view(), &mask, n),
                    Err(GpuMsmError::LengthMismatch { .. })
                ));
            }
            assert!(matches!(
                engine.expand_bases_g1(&d_compact.view(), &mask, n - 1),
                Err(GpuMsmError::LengthMismatch { .. })
            ));
        }
    }
}

/// One sort over several tables of precomputed windows (`msm_precomputed_many`) gives
/// each table's own sum, the same as one MSM a table: tables of their own bases and of
/// another query's tail, window sizes 5 to 20 bits, both accumulations, witness-shaped
/// and uniform scalars, and at 2^16 terms (the shared buckets full) against the resident
/// pipeline; tables of other window sizes or row lengths are a typed error.
#[test]
fn gpu_one_sort_many_tables_matches_cpu() {
    let Some(gpu) = gpu_or_skip("gpu-msm") else {
        return;
    };
    let mut rng = rng();
    let n = 3000;
    let first = points::<G1Curve>(&mut rng, n);
    let mut second = points::<G1Curve>(&mut rng, n + 3);
    second[1] = identity::<G1Curve>();
    for kernel in [
        AccumulateKernel::ChunkedAffine,
        AccumulateKernel::ChunkedCapped,
    ] {
        let engine = GpuMsm::with_config(
            gpu.clone(),
            GpuMsmConfig {
                accumulate: kernel,
                ..GpuMsmConfig::default()
            },
        )
        .expect("config");
        let d_first = engine.upload_bases_g1(&first).expect("bases");
        let d_second = engine.upload_bases_g1(&second).expect("bases");
        let tail = d_second.view().skip(3).expect("skip");
        for c in [5u32, 13, 20] {
            let t_first = engine
                .precompute_windows_g1(&d_first.view(), c)
                .expect("precompute");
            let t_tail = engine.precompute_windows_g1(&tail, c).expect("precompute");
            for k in [0usize, 1, 777, n] {
                for uniform in [false, true] {
                    let scalars = match uniform {
                        true => random_scalars(&mut rng, k),
                        false => witness_scalars(&mut rng, k),
                    };
                    let d_scalars = engine.upload_scalars(&scalars).expect("scalars");
                    let got = engine
                        .msm_precomputed_many(&[&t_first, &t_tail], &d_scalars)
                        .expect("one sort, two tables");
                    let want = vec![
                        G1Curve::cpu(&first[..k], &scalars, None).expect("cpu"),
                        G1Curve::cpu(&second[3..3 + k], &scalars, None).expect("cpu"),
                    ];
                    assert_eq!(
                        got, want,
                        "{kernel:?} c = {c}: {k} terms, uniform {uniform}"
                    );
                }
            }
            let other = engine
                .precompute_windows_g1(&d_first.view(), c + 1)
                .expect("precompute");
            let d_scalars = engine
                .upload_scalars(&random_scalars(&mut rng, 10))
                .expect("scalars");
            assert!(matches!(
                engine.msm_precomputed_many(&[&t_first, &other], &d_scalars),
                Err(GpuMsmError::TablesDiffer { window_bits, .. }) if window_bits == [c, c + 1]
            ));
            let longer = engine
                .precompute_windows_g1(&d_second.view(), c)
                .expect("precompute");
            assert!(matches!(
                engine.msm_precomputed_many(&[&t_first, &longer], &d_scalars),
                Err(GpuMsmError::TablesDiffer { n_bases, .. }) if n_bases == [n, n + 3]
            ));
        }
    }
    // 2^16 uniform terms on 16-bit tables (the shared buckets full), against the resident
    // pipeline, with the phases of both tables.
    let n = 1 << 16;
    let engine = GpuMsm::new(gpu);
    let a = engine
        .upload_bases_g1(&points::<G1Curve>(&mut rng, n))
        .expect("bases");
    let b = engine
        .upload_bases_g1(&points::<G1Curve>(&mut rng, n))
        .expect("bases");
    let d_scalars = engine
        .upload_scalars(&random_scalars(&mut rng, n))
        .expect("scalars");
    let (ta, tb) = (
        engine.precompute_windows_g1(&a.view(), 16).expect("table"),
        engine.precompute_windows_g1(&b.view(), 16).expect("table"),
    );
    let (got, phases) = engine
        .msm_precomputed_many_profiled(&[&ta, &tb], &d_scalars)
        .expect("one sort, two tables");
    let want = vec![
        engine.msm_resident(&a, &d_scalars).expect("resident"),
        engine.msm_resident(&b, &d_scalars).expect("resident"),
    ];
    assert_eq!(got, want);
    let accumulations = phases.iter().filter(|(p, _)| *p == "accumulate").count();
    let scatters = phases.iter().filter(|(p, _)| *p == "scatter").count();
    assert_eq!((accumulations, scatters), (2, 1), "{phases:?}");
}

/// MSMs over precomputed windows (one shared set of buckets) give the CPU's sums: window
/// sizes from 2 to 22 bits, the full set of bases and a prefix, bases at infinity, scalars
/// 0, 1, −1 and random, the XYZZ and affine accumulations (and a one-thread-a-bucket
/// configuration, which runs the chunked one here), the scatter in one launch or split by
/// keys; a bad window size, too many scalars, an empty table and a zero split are typed
/// results.
#[test]
fn gpu_precomputed_windows_match_cpu() {
    let Some(gpu) = gpu_or_skip("gpu-msm") else {
        return;
    };
    let mut rng = rng();
    let n = 3000;
    let mut bases = points::<G1Curve>(&mut rng, n);
    bases[17] = identity::<G1Curve>();
    bases[n - 1] = identity::<G1Curve>();
    // (Capped128, one thread a bucket, is replaced by the chunked kernel over shared buckets.)
    // Each kernel with a scatter split: one launch, 2^12 keys a launch (1 to 1024
    // launches), 777 (a split that is no power of two: up to 5398 launches at c = 22), the
    // default (SHARED_SCATTER_KEYS: 16 launches at c = 22); the ones' keys split with the
    // rest, in the digits' last launch or in one of their own (OnesScatter).
    for (kernel, split, ones) in [
        (
            AccumulateKernel::ChunkedCapped,
            Some(u32::MAX),
            OnesScatter::Split,
        ),
        (
            AccumulateKernel::ChunkedAffine,
            Some(1u32 << 12),
            OnesScatter::Split,
        ),
        (AccumulateKernel::Capped128, Some(777), OnesScatter::Split),
        (AccumulateKernel::ChunkedAffine, None, OnesScatter::Split),
        (
            AccumulateKernel::ChunkedAffine,
            Some(777),
            OnesScatter::WithLast,
        ),
        (
            AccumulateKernel::ChunkedCapped,
            Some(1u32 << 12),
            OnesScatter::Alone,
        ),
        (
            AccumulateKernel::ChunkedAffine,
            Some(u32::MAX),
            OnesScatter::Alone,
        ),
    ] {
        let engine = GpuMsm::with_config(
            gpu.clone(),
            GpuMsmConfig {
                accumulate: kernel,
                shared_scatter_keys: split,
                shared_scatter_ones: ones,
                ..GpuMsmConfig::default()
            },
        )
        .expect("config");
        let d_bases = engine.upload_bases_g1(&bases).expect("bases");
        for c in [2u32, 5, 8, 13, 16, 20, 22] {
            let table = engine
                .precompute_windows_g1(&d_bases.view(), c)
                .expect("precompute");
            assert_eq!(table.len(), n);
            assert_eq!(table.n_windows(), 256u32.div_ceil(c));
            assert_eq!(
                table.device_bytes(),
                (n * table.n_windows() as usize * 96) as u64
            );
            for m in [n, 1, 777] {
                let scalars = witness_scalars(&mut rng, m);
                let d_scalars = engine.upload_scalars(&scalars).expect("scalars");
                let want = CpuMsm::new()
                    .msm_g1(&bases[..m], &scalars, None)
                    .expect("cpu");
                let got = engine
                    .msm_g1_precomputed(&table, &d_scalars)
                    .expect("precomputed msm");
                assert_eq!(
                    got, want,
                    "{kernel:?} c = {c}, {m} of {n} bases, split {split:?}, ones {ones:?}"
                );
            }
        }
        assert!(matches!(
            engine.precompute_windows_g1(&d_bases.view(), GPU_MAX_WINDOW_BITS + 1),
            Err(GpuMsmError::BadWindow { .. })
        ));
        let table = engine
            .precompute_windows_g1(&d_bases.view(), 16)
            .expect("precompute");
        // No scalars (a prefix of none; zero-length device buffers are not asked for).
        let mut none = engine.upload_scalars(&[Scalar::ONE]).expect("one");
        none.truncate(0);
        let (got, phases) = engine
            .msm_g1_precomputed_profiled(&table, &none)
            .expect("empty msm");
        assert_eq!(got, G1Projective::identity());
        assert!(phases.is_empty());
        let long = random_scalars(&mut rng, n + 1);
        assert!(matches!(
            engine.msm_g1_precomputed(&table, &engine.upload_scalars(&long).expect("long")),
            Err(GpuMsmError::LengthMismatch { .. })
        ));
    }
    // Uniform scalars at a size where the shared buckets fill (2^16 terms, c = 16: 16
    // windows' digits into 2^15 buckets), against the resident pipeline.
    let n = 1 << 16;
    let bases = points::<G1Curve>(&mut rng, n);
    let scalars = random_scalars(&mut rng, n);
    let engine = GpuMsm::new(gpu.clone());
    let d_bases = engine.upload_bases_g1(&bases).expect("bases");
    let d_scalars = engine.upload_scalars(&scalars).expect("scalars");
    let table = engine
        .precompute_windows_g1(&d_bases.view(), 16)
        .expect("precompute");
    let want = engine.msm_resident(&d_bases, &d_scalars).expect("resident");
    assert_eq!(
        engine
            .msm_g1_precomputed(&table, &d_scalars)
            .expect("precomputed"),
        want
    );
    // The same with the scatter split over four launches (2^14 of the 2^16 keys each, the
    // ones group in the last two), over two with the ones in the second, over three with
    // the ones in the third.
    for ones in [
        OnesScatter::Split,
        OnesScatter::WithLast,
        OnesScatter::Alone,
    ] {
        let split = GpuMsm::with_config(
            gpu.clone(),
            GpuMsmConfig {
                shared_scatter_keys: Some(1 << 14),
                shared_scatter_ones: ones,
                ..GpuMsmConfig::default()
            },
        )
        .expect("config");
        assert_eq!(
            split
                .msm_g1_precomputed(&table, &d_scalars)
                .expect("precomputed, split scatter"),
            want,
            "ones {ones:?}"
        );
    }
    assert!(matches!(
        GpuMsm::with_config(
            gpu,
            GpuMsmConfig {
                shared_scatter_keys: Some(0),
                ..GpuMsmConfig::default()
            },
        ),
        Err(GpuMsmError::BadSharedScatterKeys)
    ));
    assert_eq!(
        want,
        CpuMsm::new().msm_g1(&bases, &scalars, None).expect("cpu")
    );
}
