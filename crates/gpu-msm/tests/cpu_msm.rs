//! CPU Pippenger against the naive sum, on random inputs and edge cases.

use bls12_381::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use bls_repr::{G1AffineRepr, G2AffineRepr};
use ff::Field;
use gpu_msm::reference::naive_msm;
use gpu_msm::{BucketArith, CpuMsm, CpuMsmConfig, DensityMask, MsmBackend, MsmError};
use group::Curve;
use rand::rngs::StdRng;
use rand::RngExt;

mod common;

use common::rng;

/// Random points cheaply: a few random points, then running sums of them.
fn points<G: Curve>(rng: &mut StdRng, n: usize) -> Vec<G::Affine> {
    let seeds: Vec<G> = (0..8).map(|_| G::random(&mut *rng)).collect();
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

fn random_scalars(rng: &mut StdRng, n: usize) -> Vec<Scalar> {
    (0..n).map(|_| Scalar::random(&mut *rng)).collect()
}

/// 30% zeros, 30% ones, a few small and r-1 values, the rest uniform.
fn groth16_shaped(rng: &mut StdRng, n: usize) -> Vec<Scalar> {
    (0..n)
        .map(|_| match rng.random_range(0..100u32) {
            0..30 => Scalar::ZERO,
            30..60 => Scalar::ONE,
            60..65 => Scalar::from(rng.random_range(2..1000u64)),
            65..68 => -Scalar::ONE,
            _ => Scalar::random(&mut *rng),
        })
        .collect()
}

fn backends() -> Vec<CpuMsm> {
    let mut v = vec![CpuMsm::new()];
    let fixed = [
        (1, BucketArith::Projective),
        (2, BucketArith::BatchAffine),
        (5, BucketArith::BatchAffine),
        (8, BucketArith::Projective),
        (11, BucketArith::BatchAffine),
        (13, BucketArith::Projective),
    ];
    for (c, buckets) in fixed {
        v.push(
            CpuMsm::with_config(CpuMsmConfig {
                window_bits: Some(c),
                buckets,
                ..Default::default()
            })
            .unwrap(),
        );
    }
    v
}

/// Every backend, on `bls12_381` bases and on the same bases in bls-repr's layout (what
/// srs-store loads), against the naive sum.
fn check_g1(bases: &[G1Affine], scalars: &[Scalar], density: Option<&DensityMask>) {
    let want: G1Projective = naive_msm(bases, scalars, density);
    let reprs: Vec<G1AffineRepr> = bases.iter().map(G1AffineRepr::from_affine).collect();
    for b in backends() {
        let got = b.msm_g1(bases, scalars, density).unwrap();
        assert_eq!(got, want, "{:?}, n = {}", b.config(), scalars.len());
        let got = b.msm(&reprs, scalars, density).unwrap();
        assert_eq!(
            got,
            want,
            "repr bases, {:?}, n = {}",
            b.config(),
            scalars.len()
        );
    }
}

fn check_g2(bases: &[G2Affine], scalars: &[Scalar], density: Option<&DensityMask>) {
    let want: G2Projective = naive_msm(bases, scalars, density);
    let reprs: Vec<G2AffineRepr> = bases.iter().map(G2AffineRepr::from_affine).collect();
    for b in backends() {
        let got = b.msm_g2(bases, scalars, density).unwrap();
        assert_eq!(got, want, "{:?}, n = {}", b.config(), scalars.len());
        let got = b.msm(&reprs, scalars, density).unwrap();
        assert_eq!(
            got,
            want,
            "repr bases, {:?}, n = {}",
            b.config(),
            scalars.len()
        );
    }
}

#[test]
fn unreduced_repr_base_is_an_error() {
    let mut rng = rng();
    let n = 40;
    let bases = points::<G1Projective>(&mut rng, n);
    let mut reprs: Vec<G1AffineRepr> = bases.iter().map(G1AffineRepr::from_affine).collect();
    let bad = rng.random_range(0..n);
    reprs[bad].y.limbs = [u64::MAX; 6];
    let err = CpuMsm::new()
        .msm(&reprs, &random_scalars(&mut rng, n), None)
        .unwrap_err();
    assert_eq!(err, MsmError::BaseNotReduced { index: bad });
}

#[test]
fn random_sizes_g1() {
    let mut rng = rng();
    for n in [0usize, 1, 2, 3, 7, 31, 64, 100, 257, 1000] {
        let bases = points::<G1Projective>(&mut rng, n);
        check_g1(&bases, &random_scalars(&mut rng, n), None);
        check_g1(&bases, &groth16_shaped(&mut rng, n), None);
    }
}

#[test]
fn pools_of_any_width_give_the_same_sum() {
    // The plan cuts windows into chunks by the pool's thread count: every width must sum
    // the same (widths that make 1, several and many chunks per window).
    let mut rng = rng();
    let n = rng.random_range(1000..2000);
    let bases = points::<G1Projective>(&mut rng, n);
    let scalars = groth16_shaped(&mut rng, n);
    let want: G1Projective = naive_msm(&bases, &scalars, None);
    for threads in [1, 4, 16] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("pool");
        for b in backends() {
            let got = pool.install(|| b.msm_g1(&bases, &scalars, None).unwrap());
            assert_eq!(got, want, "{threads} threads, {:?}, n = {n}", b.config());
        }
    }
}

#[test]
fn larger_default_window_g1() {
    let mut rng = rng();
    let n = 1 << 12;
    let bases = points::<G1Projective>(&mut rng, n);
    for scalars in [random_scalars(&mut rng, n), groth16_shaped(&mut rng, n)] {
        let want: G1Projective = naive_msm(&bases, &scalars, None);
        assert_eq!(CpuMsm::new().msm_g1(&bases, &scalars, None).unwrap(), want);
    }
}

#[test]
fn edge_scalars_g1() {
    let mut rng = rng();
    let n = 77;
    let bases = points::<G1Projective>(&mut rng, n);
    let minus_one = -Scalar::ONE;
    check_g1(&bases, &vec![Scalar::ZERO; n], None);
    check_g1(&bases, &vec![Scalar::ONE; n], None);
    check_g1(&bases, &vec![minus_one; n], None);
    check_g1(&bases, &vec![Scalar::from(2u64); n], None);
    // Every power of two, so every window position holds a lone digit.
    let pow2: Vec<Scalar> = (0..n)
        .map(|i| Field::pow_vartime(&Scalar::from(2u64), [3 * i as u64]))
        .collect();
    check_g1(&bases, &pow2, None);
}

#[test]
fn repeated_base_and_infinity_g1() {
    let mut rng = rng();
    let p = points::<G1Projective>(&mut rng, 1)[0];
    let n = 300;
    // Equal digits land in one bucket: the bucket must double, not break.
    let same = vec![p; n];
    check_g1(&same, &vec![Scalar::from(5u64); n], None);
    check_g1(&same, &random_scalars(&mut rng, n), None);
    check_g1(&same, &groth16_shaped(&mut rng, n), None);
    // P and -P cancel inside a bucket.
    let mut pm: Vec<G1Affine> = (0..n).map(|i| if i % 2 == 0 { p } else { -p }).collect();
    check_g1(&pm, &vec![Scalar::from(9u64); n], None);
    // Bases at infinity contribute nothing.
    for (i, b) in pm.iter_mut().enumerate() {
        if i % 3 == 0 {
            *b = G1Affine::identity();
        }
    }
    check_g1(&pm, &random_scalars(&mut rng, n), None);
    check_g1(
        &vec![G1Affine::identity(); n],
        &groth16_shaped(&mut rng, n),
        None,
    );
}

#[test]
fn g2_random_and_edges() {
    let mut rng = rng();
    for n in [0usize, 1, 2, 5, 100, 300] {
        let bases = points::<G2Projective>(&mut rng, n);
        check_g2(&bases, &random_scalars(&mut rng, n), None);
        check_g2(&bases, &groth16_shaped(&mut rng, n), None);
        check_g2(&bases, &vec![-Scalar::ONE; n], None);
    }
    let p = points::<G2Projective>(&mut rng, 1)[0];
    let mut same = vec![p; 64];
    check_g2(&same, &vec![Scalar::from(3u64); 64], None);
    same[5] = G2Affine::identity();
    check_g2(&same, &random_scalars(&mut rng, 64), None);
}

#[test]
fn density_masks() {
    let mut rng = rng();
    for n in [0usize, 1, 63, 64, 65, 500, 3000] {
        for density_pct in [0u32, 10, 50, 100] {
            let mask =
                DensityMask::from_bools((0..n).map(|_| rng.random_range(0..100) < density_pct));
            let scalars = groth16_shaped(&mut rng, n);
            let g1 = points::<G1Projective>(&mut rng, mask.count_ones());
            if n <= 500 {
                check_g1(&g1, &scalars, Some(&mask));
            } else {
                let want: G1Projective = naive_msm(&g1, &scalars, Some(&mask));
                assert_eq!(
                    CpuMsm::new().msm_g1(&g1, &scalars, Some(&mask)).unwrap(),
                    want
                );
            }
            if n <= 65 {
                let g2 = points::<G2Projective>(&mut rng, mask.count_ones());
                check_g2(&g2, &scalars, Some(&mask));
            }
        }
    }
    // A full mask is the same as no mask.
    let n = 200;
    let bases = points::<G1Projective>(&mut rng, n);
    let scalars = random_scalars(&mut rng, n);
    let msm = CpuMsm::new();
    assert_eq!(
        msm.msm_g1(&bases, &scalars, Some(&DensityMask::full(n)))
            .unwrap(),
        msm.msm_g1(&bases, &scalars, None).unwrap()
    );
}

#[test]
fn batch_form() {
    let mut rng = rng();
    let n = 300;
    let mask = DensityMask::from_bools((0..n).map(|_| rng.random_range(0..3u32) != 0));
    let g1 = points::<G1Projective>(&mut rng, mask.count_ones());
    let g2 = points::<G2Projective>(&mut rng, mask.count_ones());
    let sets: Vec<Vec<Scalar>> = (0..3).map(|_| groth16_shaped(&mut rng, n)).collect();
    let refs: Vec<&[Scalar]> = sets.iter().map(|s| s.as_slice()).collect();
    let msm = CpuMsm::new();
    let got1 = msm.msm_g1_batch(&g1, &refs, Some(&mask)).unwrap();
    let got2 = msm.msm_g2_batch(&g2, &refs, Some(&mask)).unwrap();
    assert_eq!(got1.len(), 3);
    for (i, s) in sets.iter().enumerate() {
        assert_eq!(
            got1[i],
            naive_msm::<G1Projective>(&g1, s, Some(&mask)),
            "set {i}"
        );
        assert_eq!(
            got2[i],
            naive_msm::<G2Projective>(&g2, s, Some(&mask)),
            "set {i}"
        );
    }
    assert!(msm.msm_g1_batch(&g1, &[], Some(&mask)).unwrap().is_empty());
}

#[test]
fn bad_shapes_are_errors() {
    let mut rng = rng();
    let bases = points::<G1Projective>(&mut rng, 4);
    let s3 = random_scalars(&mut rng, 3);
    let s4 = random_scalars(&mut rng, 4);
    let msm = CpuMsm::new();
    assert_eq!(
        msm.msm_g1(&bases, &s3, None),
        Err(MsmError::LengthMismatch {
            n_bases: 4,
            n_scalars: 3
        })
    );
    let mask = DensityMask::from_bools([true, false, true]);
    assert_eq!(
        msm.msm_g1(&bases, &s4, Some(&mask)),
        Err(MsmError::DensityLengthMismatch {
            mask_len: 3,
            n_scalars: 4
        })
    );
    assert_eq!(
        msm.msm_g1(&bases, &s3, Some(&mask)),
        Err(MsmError::DensityBasesMismatch {
            n_selected: 2,
            n_bases: 4
        })
    );
    assert_eq!(
        msm.msm_g1_batch(&bases, &[&s4, &s3], None),
        Err(MsmError::BatchLengthMismatch {
            index: 1,
            expected: 4,
            found: 3
        })
    );
    assert_eq!(
        CpuMsm::with_config(CpuMsmConfig {
            window_bits: Some(0),
            ..Default::default()
        })
        .err(),
        Some(MsmError::BadWindow {
            window_bits: 0,
            max_bits: gpu_msm::MAX_WINDOW_BITS
        })
    );
    assert!(CpuMsm::with_config(CpuMsmConfig {
        window_bits: Some(25),
        ..Default::default()
    })
    .is_err());
}

#[test]
fn sliced_scalars_equal_one_pass() {
    // Slices of 4096 scalars: offsets of bases and mask bits must carry across slices.
    let mut rng = rng();
    let sliced = CpuMsm::with_config(CpuMsmConfig {
        scalars_in_flight: Some(1),
        ..Default::default()
    })
    .unwrap();
    let n = 4096 + 100;
    let mask = DensityMask::from_bools((0..n).map(|_| rng.random_range(0..4u32) != 0));
    let g1 = points::<G1Projective>(&mut rng, mask.count_ones());
    let scalars = groth16_shaped(&mut rng, n);
    let want: G1Projective = naive_msm(&g1, &scalars, Some(&mask));
    assert_eq!(sliced.msm_g1(&g1, &scalars, Some(&mask)).unwrap(), want);
    let full = points::<G1Projective>(&mut rng, n);
    let want: G1Projective = naive_msm(&full, &scalars, None);
    assert_eq!(sliced.msm_g1(&full, &scalars, None).unwrap(), want);
    assert_eq!(
        CpuMsm::with_config(CpuMsmConfig {
            scalars_in_flight: Some(0),
            ..Default::default()
        })
        .err(),
        Some(MsmError::BadSliceLength {
            scalars_in_flight: 0
        })
    );
}

#[test]
fn skewed_digits_batch_affine() {
    // Equal scalars put every point of a window into one bucket: the batch-affine path
    // must fall back to its projective overflow and still be exact.
    let mut rng = rng();
    let n = 1500;
    let bases = points::<G1Projective>(&mut rng, n);
    let s = Scalar::random(&mut rng);
    let mut scalars = vec![s; n];
    for x in scalars.iter_mut().step_by(7) {
        *x = -s;
    }
    let want: G1Projective = naive_msm(&bases, &scalars, None);
    for c in [11, 13] {
        let msm = CpuMsm::with_config(CpuMsmConfig {
            window_bits: Some(c),
            buckets: BucketArith::BatchAffine,
            ..Default::default()
        })
        .unwrap();
        assert_eq!(msm.msm_g1(&bases, &scalars, None).unwrap(), want, "c = {c}");
    }
}

#[test]
fn usable_as_trait_object() {
    // The prover holds a backend as `Box<dyn MsmBackend>` and picks CPU or GPU at runtime.
    let mut rng = rng();
    let backend: Box<dyn MsmBackend> = Box::new(CpuMsm::new());
    assert_eq!(backend.name(), "cpu-pippenger");
    let bases = points::<G1Projective>(&mut rng, 10);
    let scalars = random_scalars(&mut rng, 10);
    let want: G1Projective = naive_msm(&bases, &scalars, None);
    assert_eq!(backend.msm_g1(&bases, &scalars, None).unwrap(), want);
}
