//! GPU field arithmetic (Fp, Fr, Fp2) checked element by element against host oracles:
//! an independent big-integer reference (schoolbook products, bit-serial remainders; no
//! Montgomery code shared with the kernels) for every field, and `bls12_381::Scalar` for
//! Fr. Random inputs (seed printed; `PINION_SEED` replays), edge values first, outputs
//! poisoned before each launch so an unwritten element cannot pass.

use gpu_device::field::{self, BinaryOp, ChainKernel, FieldKind, UnaryOp};
use gpu_device::testing::gpu_or_skip;
use gpu_device::{DeviceBuffer, Gpu, GpuError};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const GROUP: &str = "field";
/// Random elements per op, after the edge-value pairs.
const N_RANDOM: usize = 2000;
/// Not a reduced element in any of the fields (top word above both moduli's).
const POISON: u32 = 0xa5a5_a5a5;

fn seed() -> u64 {
    let seed = std::env::var("PINION_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0)
        });
    eprintln!("seed = {seed}");
    seed
}

/// Little-endian u64 big integers, the host oracle.
mod big {
    use std::cmp::Ordering;

    pub fn cmp(a: &[u64], b: &[u64]) -> Ordering {
        let n = a.len().max(b.len());
        for i in (0..n).rev() {
            let x = a.get(i).copied().unwrap_or(0);
            let y = b.get(i).copied().unwrap_or(0);
            match x.cmp(&y) {
                Ordering::Equal => continue,
                o => return o,
            }
        }
        Ordering::Equal
    }

    /// a - b for a >= b (same length as a).
    pub fn sub(a: &[u64], b: &[u64]) -> Vec<u64> {
        let mut out = vec![0u64; a.len()];
        let mut borrow = 0u64;
        for i in 0..a.len() {
            let y = b.get(i).copied().unwrap_or(0);
            let (d1, b1) = a[i].overflowing_sub(y);
            let (d2, b2) = d1.overflowing_sub(borrow);
            out[i] = d2;
            borrow = u64::from(b1 || b2);
        }
        assert_eq!(borrow, 0, "big::sub underflow");
        out
    }

    pub fn add(a: &[u64], b: &[u64]) -> Vec<u64> {
        let n = a.len().max(b.len()) + 1;
        let mut out = vec![0u64; n];
        let mut carry = 0u128;
        for (i, o) in out.iter_mut().enumerate() {
            let s = u128::from(a.get(i).copied().unwrap_or(0))
                + u128::from(b.get(i).copied().unwrap_or(0))
                + carry;
            *o = s as u64;
            carry = s >> 64;
        }
        out
    }

    pub fn mul(a: &[u64], b: &[u64]) -> Vec<u64> {
        let mut out = vec![0u64; a.len() + b.len()];
        for (i, &x) in a.iter().enumerate() {
            let mut carry = 0u128;
            for (j, &y) in b.iter().enumerate() {
                let t = u128::from(x) * u128::from(y) + u128::from(out[i + j]) + carry;
                out[i + j] = t as u64;
                carry = t >> 64;
            }
            out[i + b.len()] = carry as u64;
        }
        out
    }

    /// x mod m by shift-and-subtract, one bit at a time (slow, obviously right).
    pub fn rem(x: &[u64], m: &[u64]) -> Vec<u64> {
        let mut r = vec![0u64; m.len() + 1];
        for i in (0..x.len() * 64).rev() {
            // r = 2r + bit
            let mut carry = (x[i / 64] >> (i % 64)) & 1;
            for w in r.iter_mut() {
                let next = *w >> 63;
                *w = (*w << 1) | carry;
                carry = next;
            }
            if cmp(&r, m) != Ordering::Less {
                r = sub(&r, m);
            }
        }
        r.truncate(m.len());
        r
    }

    pub fn is_zero(a: &[u64]) -> bool {
        a.iter().all(|&w| w == 0)
    }
}

/// Reference arithmetic on stored (Montgomery) integers modulo `m`, R = 2^(64 * n64).
struct RefField {
    m: Vec<u64>,
    /// R^-1 mod m.
    rinv: Vec<u64>,
    /// R mod m: the stored form of 1.
    one: Vec<u64>,
}

impl RefField {
    fn new(m: &[u64]) -> RefField {
        let n = m.len();
        let mut r = vec![0u64; n + 1];
        r[n] = 1;
        let one = big::rem(&r, m);
        // R^-1 = R^(m-2) mod m (Fermat), square-and-multiply from the top bit.
        let e = big::sub(m, &[2]);
        let mut acc = vec![1u64];
        for i in (0..n * 64).rev() {
            acc = big::rem(&big::mul(&acc, &acc), m);
            if (e[i / 64] >> (i % 64)) & 1 == 1 {
                acc = big::rem(&big::mul(&acc, &one), m);
            }
        }
        let f = RefField {
            m: m.to_vec(),
            rinv: acc,
            one,
        };
        // R * R^-1 = 1.
        assert_eq!(big::rem(&big::mul(&f.one, &f.rinv), m)[0], 1);
        f
    }
    fn add(&self, a: &[u64], b: &[u64]) -> Vec<u64> {
        big::rem(&big::add(a, b), &self.m)
    }
    fn sub(&self, a: &[u64], b: &[u64]) -> Vec<u64> {
        self.add(a, &self.neg(b))
    }
    fn neg(&self, a: &[u64]) -> Vec<u64> {
        if big::is_zero(a) {
            vec![0; self.m.len()]
        } else {
            big::sub(&self.m, a)
        }
    }
    /// Montgomery product: a * b * R^-1 mod m.
    fn mont_mul(&self, a: &[u64], b: &[u64]) -> Vec<u64> {
        let ab = big::rem(&big::mul(a, b), &self.m);
        big::rem(&big::mul(&ab, &self.rinv), &self.m)
    }
    fn random(&self, rng: &mut StdRng) -> Vec<u64> {
        let x: Vec<u64> = (0..self.m.len() + 1).map(|_| rng.next_u64()).collect();
        big::rem(&x, &self.m)
    }
    /// 0, stored 1, the value 1, m - 1 (the value -R^-1), the value -1.
    fn edges(&self) -> Vec<Vec<u64>> {
        let n = self.m.len();
        let mut stored_one = vec![0u64; n];
        stored_one[0] = 1;
        vec![
            vec![0; n],
            stored_one,
            self.one.clone(),
            big::sub(&self.m, &[1]),
            self.neg(&self.one),
        ]
    }
}

const FP_P: [u64; 6] = [
    0xb9fe_ffff_ffff_aaab,
    0x1eab_fffe_b153_ffff,
    0x6730_d2a0_f6b0_f624,
    0x6477_4b84_f385_12bf,
    0x4b1b_a7b6_434b_acd7,
    0x1a01_11ea_397f_e69a,
];
const FR_R: [u64; 4] = [
    0xffff_ffff_0000_0001,
    0x53bd_a402_fffe_5bfe,
    0x3339_d808_09a1_d805,
    0x73ed_a753_299d_7d48,
];

/// Host elements (u64 limbs per coordinate; Fp2 has two coordinates) -> u32 words.
fn to_words(elems: &[Vec<Vec<u64>>]) -> Vec<u32> {
    elems
        .iter()
        .flat_map(|e| {
            e.iter()
                .flat_map(|c| c.iter().flat_map(|&l| [l as u32, (l >> 32) as u32]))
        })
        .collect()
}

fn from_words(words: &[u32], n_coords: usize, n64: usize) -> Vec<Vec<Vec<u64>>> {
    words
        .chunks(n_coords * n64 * 2)
        .map(|e| {
            e.chunks(n64 * 2)
                .map(|c| {
                    c.chunks(2)
                        .map(|w| u64::from(w[0]) | (u64::from(w[1]) << 32))
                        .collect()
                })
                .collect()
        })
        .collect()
}

/// One field under test: its reference, coordinate count and kernels.
struct Case<'a> {
    kind: FieldKind,
    f: &'a RefField,
    coords: usize,
}

type Elem = Vec<Vec<u64>>;

impl Case<'_> {
    fn random(&self, rng: &mut StdRng) -> Elem {
        (0..self.coords).map(|_| self.f.random(rng)).collect()
    }
    fn edges(&self) -> Vec<Elem> {
        let e = self.f.edges();
        let zero = vec![0u64; self.f.m.len()];
        if self.coords == 1 {
            e.into_iter().map(|x| vec![x]).collect()
        } else {
            // Edge values in each coordinate, the other zero or the same.
            let mut out = Vec::new();
            for x in &e {
                out.push(vec![x.clone(), zero.clone()]);
                out.push(vec![zero.clone(), x.clone()]);
                out.push(vec![x.clone(), x.clone()]);
            }
            out
        }
    }
    fn add(&self, a: &Elem, b: &Elem) -> Elem {
        a.iter().zip(b).map(|(x, y)| self.f.add(x, y)).collect()
    }
    fn sub(&self, a: &Elem, b: &Elem) -> Elem {
        a.iter().zip(b).map(|(x, y)| self.f.sub(x, y)).collect()
    }
    fn neg(&self, a: &Elem) -> Elem {
        a.iter().map(|x| self.f.neg(x)).collect()
    }
    fn mul(&self, a: &Elem, b: &Elem) -> Elem {
        let f = self.f;
        if self.coords == 1 {
            vec![f.mont_mul(&a[0], &b[0])]
        } else {
            // (a0 + a1 u)(b0 + b1 u), u^2 = -1
            vec![
                f.sub(&f.mont_mul(&a[0], &b[0]), &f.mont_mul(&a[1], &b[1])),
                f.add(&f.mont_mul(&a[0], &b[1]), &f.mont_mul(&a[1], &b[0])),
            ]
        }
    }
    fn is_zero(&self, a: &Elem) -> bool {
        a.iter().all(|c| big::is_zero(c))
    }
    fn one(&self) -> Elem {
        let mut e = vec![vec![0u64; self.f.m.len()]; self.coords];
        e[0] = self.f.one.clone();
        e
    }
    fn n64(&self) -> usize {
        self.f.m.len()
    }
}

/// Inputs: all edge pairs first, then random pairs.
fn inputs(case: &Case, rng: &mut StdRng) -> (Vec<Elem>, Vec<Elem>) {
    let edges = case.edges();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for x in &edges {
        for y in &edges {
            a.push(x.clone());
            b.push(y.clone());
        }
    }
    for _ in 0..N_RANDOM {
        a.push(case.random(rng));
        b.push(case.random(rng));
    }
    (a, b)
}

fn poisoned(gpu: &Gpu, n_words: usize) -> DeviceBuffer<u32> {
    gpu.upload(&vec![POISON; n_words], "poisoned output")
        .expect("upload poison")
}

fn check(case: &Case, what: &str, a: &[Elem], got: &[Elem], expected: impl Fn(usize) -> Elem) {
    assert_eq!(
        got.len(),
        a.len(),
        "{} {what}: output length",
        case.kind.name()
    );
    for (i, g) in got.iter().enumerate() {
        let want = expected(i);
        assert_eq!(
            g,
            &want,
            "{} {what}: element {i} (input a = {:x?})",
            case.kind.name(),
            a[i]
        );
    }
}

fn run_case(gpu: &Gpu, case: &Case, rng: &mut StdRng) {
    let (a, b) = inputs(case, rng);
    let n_words = a.len() * case.kind.words();
    let da = gpu.upload(&to_words(&a), "a").expect("upload a");
    let db = gpu.upload(&to_words(&b), "b").expect("upload b");
    let download = |buf: &DeviceBuffer<u32>| {
        from_words(
            &gpu.download(buf).expect("download"),
            case.coords,
            case.n64(),
        )
    };

    for op in BinaryOp::ALL {
        let mut out = poisoned(gpu, n_words);
        field::binary(gpu, case.kind, op, &da, &db, &mut out).expect("launch");
        let got = download(&out);
        match op {
            BinaryOp::Add => check(case, "add", &a, &got, |i| case.add(&a[i], &b[i])),
            BinaryOp::Sub => check(case, "sub", &a, &got, |i| case.sub(&a[i], &b[i])),
            BinaryOp::Mul => check(case, "mul", &a, &got, |i| case.mul(&a[i], &b[i])),
        }
    }
    for op in UnaryOp::ALL {
        let mut out = poisoned(gpu, n_words);
        field::unary(gpu, case.kind, op, &da, &mut out).expect("launch");
        let got = download(&out);
        match op {
            UnaryOp::Neg => check(case, "neg", &a, &got, |i| case.neg(&a[i])),
            UnaryOp::Sqr => check(case, "sqr", &a, &got, |i| case.mul(&a[i], &a[i])),
            UnaryOp::Inv => {
                // The inverse is unique: a * z = 1, and zero maps to zero.
                for (i, z) in got.iter().enumerate() {
                    if case.is_zero(&a[i]) {
                        assert!(case.is_zero(z), "{} inv(0) = {z:x?}", case.kind.name());
                    } else {
                        assert_eq!(
                            case.mul(&a[i], z),
                            case.one(),
                            "{} inv: element {i}",
                            case.kind.name()
                        );
                    }
                }
            }
        }
    }
}

fn fp_ref() -> RefField {
    RefField::new(&FP_P)
}
fn fr_ref() -> RefField {
    RefField::new(&FR_R)
}

#[test]
fn gpu_or_skip_returns_none_without_a_driver() {
    let gpu = gpu_or_skip(GROUP);
    if gpu_device::driver_present() && gpu_device::device_count().unwrap_or(0) > 0 {
        let gpu = gpu.expect("driver and device present");
        let info = gpu.info();
        eprintln!("{info:?}");
        assert!(info.sm_count > 0 && info.total_memory_bytes > 0 && !info.name.is_empty());
    } else {
        assert!(gpu.is_none());
    }
}

#[test]
fn no_driver_is_an_error() {
    if gpu_device::driver_present() {
        assert!(gpu_device::device_count().is_ok());
    } else {
        let err = Gpu::open(0).expect_err("no driver here");
        assert!(matches!(err, GpuError::NoDriver), "{err}");
        assert_eq!(
            err.to_string(),
            "no CUDA driver: libcuda could not be loaded"
        );
    }
}

#[test]
fn fp_ops_match_host() {
    let Some(gpu) = gpu_or_skip(GROUP) else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(seed());
    let f = fp_ref();
    run_case(
        &gpu,
        &Case {
            kind: FieldKind::Fp,
            f: &f,
            coords: 1,
        },
        &mut rng,
    );
}

#[test]
fn fr_ops_match_host() {
    let Some(gpu) = gpu_or_skip(GROUP) else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(seed());
    let f = fr_ref();
    run_case(
        &gpu,
        &Case {
            kind: FieldKind::Fr,
            f: &f,
            coords: 1,
        },
        &mut rng,
    );
}

#[test]
fn fp2_ops_match_host() {
    let Some(gpu) = gpu_or_skip(GROUP) else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(seed());
    let f = fp_ref();
    run_case(
        &gpu,
        &Case {
            kind: FieldKind::Fp2,
            f: &f,
            coords: 2,
        },
        &mut rng,
    );
}

/// Fr through the real library: canonical values of the GPU's Montgomery results agree
/// with `bls12_381::Scalar` arithmetic.
#[test]
fn fr_matches_bls12_381() {
    use bls12_381::Scalar;
    let Some(gpu) = gpu_or_skip(GROUP) else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(seed());
    let f = fr_ref();
    let case = Case {
        kind: FieldKind::Fr,
        f: &f,
        coords: 1,
    };
    let (a, b) = inputs(&case, &mut rng);
    let to_scalar = |x: &Vec<u64>| {
        let c = f.mont_mul(x, &[1]); // stored -> canonical: x * R^-1
        let mut bytes = [0u8; 32];
        for (k, l) in c.iter().enumerate() {
            bytes[8 * k..8 * k + 8].copy_from_slice(&l.to_le_bytes());
        }
        Option::<Scalar>::from(Scalar::from_bytes(&bytes)).expect("canonical")
    };
    let da = gpu.upload(&to_words(&a), "a").expect("upload");
    let db = gpu.upload(&to_words(&b), "b").expect("upload");
    let mut out = poisoned(&gpu, a.len() * 8);
    field::binary(&gpu, FieldKind::Fr, BinaryOp::Mul, &da, &db, &mut out).expect("launch");
    let mul = from_words(&gpu.download(&out).expect("download"), 1, 4);
    let mut out = poisoned(&gpu, a.len() * 8);
    field::unary(&gpu, FieldKind::Fr, UnaryOp::Inv, &da, &mut out).expect("launch");
    let inv = from_words(&gpu.download(&out).expect("download"), 1, 4);
    for i in 0..a.len() {
        let (sa, sb) = (to_scalar(&a[i][0]), to_scalar(&b[i][0]));
        assert_eq!(
            to_scalar(&mul[i][0]),
            sa * sb,
            "fr mul vs bls12_381: element {i}"
        );
        let want_inv = Option::<Scalar>::from(sa.invert()).unwrap_or(Scalar::zero());
        assert_eq!(
            to_scalar(&inv[i][0]),
            want_inv,
            "fr inv vs bls12_381: element {i}"
        );
    }
}

/// The throughput kernels (every variant) compute what they claim, so the benchmark
/// measures real work.
#[test]
fn mul_chain_matches_host() {
    let Some(gpu) = gpu_or_skip(GROUP) else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(seed());
    let (fp, fr) = (fp_ref(), fr_ref());
    let iters = 5u32;
    for kernel in ChainKernel::ALL {
        let case = match kernel.field() {
            FieldKind::Fp => Case {
                kind: FieldKind::Fp,
                f: &fp,
                coords: 1,
            },
            FieldKind::Fr => Case {
                kind: FieldKind::Fr,
                f: &fr,
                coords: 1,
            },
            FieldKind::Fp2 => Case {
                kind: FieldKind::Fp2,
                f: &fp,
                coords: 2,
            },
        };
        let n = 300;
        let a: Vec<Elem> = (0..n).map(|_| case.random(&mut rng)).collect();
        let b: Vec<Elem> = (0..n).map(|_| case.random(&mut rng)).collect();
        let da = gpu.upload(&to_words(&a), "a").expect("upload");
        let db = gpu.upload(&to_words(&b), "b").expect("upload");
        let mut out = poisoned(&gpu, n * case.kind.words());
        field::mul_chain(&gpu, kernel, &da, &db, &mut out, iters).expect("launch");
        let got = from_words(
            &gpu.download(&out).expect("download"),
            case.coords,
            case.n64(),
        );
        let k = kernel.chains() as usize;
        check(&case, kernel.label(), &a, &got, |i| {
            let mut x = vec![a[i].clone()];
            for j in 1..k {
                x.push(case.mul(&x[j - 1], &b[i]));
            }
            for _ in 0..iters {
                for xj in x.iter_mut() {
                    *xj = if kernel.squares() {
                        case.mul(xj, xj)
                    } else {
                        case.mul(xj, &b[i])
                    };
                }
            }
            let mut acc = x[0].clone();
            for xj in &x[1..] {
                acc = case.mul(&acc, xj);
            }
            acc
        });
    }
}

/// Device allocations are charged to the VRAM budget and returned on drop; a request
/// larger than the budget fails with a typed error before the driver is asked.
#[test]
fn vram_budget_charges_allocations() {
    let Some(gpu) = gpu_or_skip(GROUP) else {
        return;
    };
    let budget = gpu.vram_budget().clone();
    let before = budget.available_bytes();
    let buf = gpu
        .alloc_zeros::<u32>(1 << 20, "budget test")
        .expect("alloc");
    assert_eq!(buf.reserved_bytes(), 4 << 20);
    assert_eq!(budget.available_bytes(), before - (4 << 20));
    assert_eq!(gpu.download(&buf).expect("download"), vec![0u32; 1 << 20]);
    drop(buf);
    assert_eq!(budget.available_bytes(), before);
    let too_big = (budget.total_bytes() / 4 + 1) as usize;
    let err = gpu
        .alloc_zeros::<u32>(too_big, "too big")
        .expect_err("over budget");
    assert!(matches!(err, GpuError::Budget { .. }), "{err}");
    let mem = gpu.mem_info().expect("mem info");
    assert!(mem.free_bytes <= mem.total_bytes && budget.total_bytes() <= mem.total_bytes);
}

/// The host oracle itself (no GPU needed): its constants agree with bls-repr's, and its
/// Montgomery product agrees with `bls12_381::Scalar` multiplication.
#[test]
fn host_reference_agrees_with_bls_repr_and_bls12_381() {
    use bls12_381::Scalar;
    let mut rng = StdRng::seed_from_u64(seed());
    let (fp, fr) = (fp_ref(), fr_ref());
    assert_eq!(fp.m, bls_repr::FP_MODULUS);
    assert_eq!(fr.m, bls_repr::FR_MODULUS);
    assert_eq!(fp.one, bls_repr::FP_R);
    assert_eq!(fr.one, bls_repr::FR_R);
    for (f, r2) in [(&fp, &bls_repr::FP_R2[..]), (&fr, &bls_repr::FR_R2[..])] {
        let mut r_squared = vec![0u64; 2 * f.m.len() + 1];
        r_squared[2 * f.m.len()] = 1;
        assert_eq!(big::rem(&r_squared, &f.m), r2);
    }
    let scalar = |canonical: &[u64]| {
        let mut bytes = [0u8; 32];
        for (k, l) in canonical.iter().enumerate() {
            bytes[8 * k..8 * k + 8].copy_from_slice(&l.to_le_bytes());
        }
        Option::<Scalar>::from(Scalar::from_bytes(&bytes)).expect("canonical")
    };
    for _ in 0..200 {
        let (a, b) = (fr.random(&mut rng), fr.random(&mut rng));
        // stored -> canonical is a Montgomery product with 1
        let (ca, cb) = (fr.mont_mul(&a, &[1]), fr.mont_mul(&b, &[1]));
        let cab = fr.mont_mul(&fr.mont_mul(&a, &b), &[1]);
        assert_eq!(scalar(&cab), scalar(&ca) * scalar(&cb));
        assert_eq!(
            scalar(&fr.mont_mul(&fr.add(&a, &b), &[1])),
            scalar(&ca) + scalar(&cb)
        );
        assert_eq!(
            scalar(&fr.mont_mul(&fr.sub(&a, &b), &[1])),
            scalar(&ca) - scalar(&cb)
        );
    }
}

/// The word packing used to talk to the kernels round-trips (no GPU needed).
#[test]
fn word_packing_round_trips() {
    let mut rng = StdRng::seed_from_u64(seed());
    let fp = fp_ref();
    let case = Case {
        kind: FieldKind::Fp2,
        f: &fp,
        coords: 2,
    };
    let elems: Vec<Elem> = (0..7).map(|_| case.random(&mut rng)).collect();
    let words = to_words(&elems);
    assert_eq!(words.len(), 7 * FieldKind::Fp2.words());
    // Word 0 is the low half of c0's lowest limb; word 12 starts c1.
    assert_eq!(words[0], elems[0][0][0] as u32);
    assert_eq!(words[12], elems[0][1][0] as u32);
    assert_eq!(from_words(&words, 2, 6), elems);
}
