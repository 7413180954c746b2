//! Prints the cost of the conversions on the parameter-loading path and of the host
//! field arithmetic. Run in release:
//! `cargo run --release -p bls-repr --example convert_bench [n_points]`.
//!
//! Single-threaded. Each line gives nanoseconds per operation measured two ways: on-CPU
//! time of this thread (from `/proc/thread-self/schedstat`, so time spent descheduled on
//! a busy machine is not counted) and wall time. The G1/G2 parses run over buffers
//! larger than the caches (random points tiled), so they include the memory traffic
//! srs-store will see. Lines marked `(ref)` time `bls12_381` doing the same job.
//!
//! `PINION_BENCH_QUICK=1` shrinks every count (`cargo xtask bench --quick`); `PINION_BENCH`
//! lines carry the on-CPU ns/op for `cargo xtask bench`.

use pinion_bench::{quick, BenchLine};
use std::hint::black_box;
use std::time::Instant;

use bls12_381::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use bls_repr::{
    g1_from_uncompressed_slice, g2_from_uncompressed_slice, FpRepr, FrRepr, G1AffineRepr,
    G2AffineRepr,
};

/// A small deterministic generator (keeps the example free of RNG dependencies).
struct SplitMix(u64);
impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn scalar(&mut self) -> Scalar {
        Scalar::from_raw([self.next(), self.next(), self.next(), self.next() >> 2])
    }
}

/// On-CPU nanoseconds of the current thread, where Linux exposes them.
fn thread_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

struct Timer {
    wall: Instant,
    cpu_ns: Option<u64>,
}

impl Timer {
    fn start() -> Timer {
        Timer {
            cpu_ns: thread_cpu_ns(),
            wall: Instant::now(),
        }
    }

    /// Prints one line: ns/op on CPU and wall, and MiB/s (on-CPU) when `bytes` is given.
    /// Returns the on-CPU ns/op, or the wall ns/op when the run took under 100 ms of CPU:
    /// the kernel updates the schedstat counter at scheduler ticks, so short runs read as
    /// whole ticks (quick mode's sizes are that short).
    fn report(self, name: &str, n_ops: usize, bytes: Option<usize>) -> f64 {
        let wall_ns = self.wall.elapsed().as_nanos() as f64;
        let cpu_ns = match (self.cpu_ns, thread_cpu_ns()) {
            (Some(a), Some(b)) => (b - a) as f64,
            _ => wall_ns,
        };
        let n = n_ops.max(1) as f64;
        let rate = bytes
            .map(|b| format!("  {:>6.0} MiB/s", b as f64 / (cpu_ns * 1e-9) / 1048576.0))
            .unwrap_or_default();
        println!(
            "{name:<38} {:>9.1} ns/op cpu  {:>9.1} ns/op wall{rate}  ({n_ops} ops)",
            cpu_ns / n,
            wall_ns / n
        );
        if cpu_ns >= 1e8 {
            cpu_ns / n
        } else {
            wall_ns / n
        }
    }
}

fn main() {
    let n_points: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(if quick() { 1 << 16 } else { 1 << 21 });
    // Quick mode divides the fixed counts by this.
    let shrink = if quick() { 16 } else { 1 };
    let mut rng = SplitMix(0x5eed);

    // Fp from_be_bytes over 1M canonical encodings (48 MiB).
    let n_fp = (1 << 20) / shrink;
    let fp_bytes: Vec<[u8; 48]> = (0..n_fp)
        .map(|_| {
            let mut limbs = [0u64; 6];
            limbs.iter_mut().for_each(|l| *l = rng.next());
            limbs[5] &= (1 << 60) - 1; // below p
            FpRepr::from_canonical_limbs(limbs).map_or([0; 48], |f| f.to_be_bytes())
        })
        .collect();
    let t = Timer::start();
    let mut acc = 0u64;
    for b in &fp_bytes {
        if let Ok(f) = FpRepr::from_be_bytes(black_box(b)) {
            acc ^= f.limbs[0];
        }
    }
    black_box(acc);
    let fp_parse = t.report("fp from_be_bytes", n_fp, Some(n_fp * 48));
    drop(fp_bytes);

    // G1 parse over a large buffer of tiled random points.
    let distinct: Vec<[u8; 96]> = (0..1024)
        .map(|_| G1Affine::from(G1Projective::generator() * rng.scalar()).to_uncompressed())
        .collect();
    let bytes: Vec<u8> = (0..n_points)
        .flat_map(|i| distinct[i % distinct.len()])
        .collect();
    let mut out = vec![G1AffineRepr::default(); n_points];
    let t = Timer::start();
    let r = g1_from_uncompressed_slice(black_box(&bytes), &mut out);
    let g1_parse = t.report("g1 parse (slice)", n_points, Some(bytes.len()));
    assert!(r.is_ok(), "{r:?}");
    let n_ref = n_points.min(1 << 18);
    let t = Timer::start();
    let n_ok = bytes
        .chunks_exact(96)
        .take(n_ref)
        .filter_map(|c| <&[u8; 96]>::try_from(c).ok())
        .filter(|c| bool::from(G1Affine::from_uncompressed_unchecked(black_box(c)).is_some()))
        .count();
    let g1_parse_ref = t.report(
        "g1 from_uncompressed_unchecked (ref)",
        n_ok,
        Some(n_ok * 96),
    );
    drop(bytes);

    let n_curve = n_points.min(1 << 18);
    let t = Timer::start();
    let n_on = out.iter().take(n_curve).filter(|p| p.is_on_curve()).count();
    let on_curve = t.report("g1 is_on_curve", n_on, None);
    let lib_points: Vec<G1Affine> = distinct
        .iter()
        .filter_map(|c| Option::from(G1Affine::from_uncompressed_unchecked(c)))
        .collect();
    let t = Timer::start();
    let n_lib = (0..n_curve)
        .filter(|i| bool::from(black_box(&lib_points[i % lib_points.len()]).is_on_curve()))
        .count();
    let on_curve_ref = t.report("g1 is_on_curve (ref)", n_lib, None);
    // Subgroup checks are left to bls12_381; their cost matters to srs-store.
    let n_torsion = 4096 / shrink;
    let t = Timer::start();
    let n_free = (0..n_torsion)
        .filter(|i| bool::from(black_box(&lib_points[i % lib_points.len()]).is_torsion_free()))
        .count();
    t.report("g1 is_torsion_free (ref)", n_free, None);
    drop(out);

    // G2 parse.
    let n_g2 = n_points / 4;
    let distinct: Vec<[u8; 192]> = (0..256)
        .map(|_| G2Affine::from(G2Projective::generator() * rng.scalar()).to_uncompressed())
        .collect();
    let bytes: Vec<u8> = (0..n_g2)
        .flat_map(|i| distinct[i % distinct.len()])
        .collect();
    let mut out = vec![G2AffineRepr::default(); n_g2];
    let t = Timer::start();
    let r = g2_from_uncompressed_slice(black_box(&bytes), &mut out);
    let g2_parse = t.report("g2 parse (slice)", n_g2, Some(bytes.len()));
    assert!(r.is_ok(), "{r:?}");
    drop((bytes, out));

    // Fr from_scalar / to_scalar.
    let n_fr = (1 << 20) / shrink;
    let scalars: Vec<Scalar> = (0..n_fr).map(|_| rng.scalar()).collect();
    // Into memory already touched: the conversion, not page faults.
    let mut reprs = vec![FrRepr::ONE; n_fr];
    let t = Timer::start();
    for (r, s) in reprs.iter_mut().zip(black_box(&scalars)) {
        *r = FrRepr::from_scalar(s);
    }
    black_box(&reprs);
    let fr_from = t.report("fr from_scalar", n_fr, None);
    let t = Timer::start();
    let back = reprs.iter().filter(|r| r.to_scalar().is_ok()).count();
    t.report("fr to_scalar", back, None);

    // Multiplication: a dependent chain (latency) and four independent lanes.
    let n_mul = (1 << 22) / shrink;
    let a = FpRepr::from_u64(rng.next()).square();
    let mut x = FpRepr::from_u64(rng.next()).square();
    let t = Timer::start();
    for _ in 0..n_mul {
        x = x.mul(black_box(&a));
    }
    black_box(x);
    let fp_mul = t.report("fp mul (dependent chain)", n_mul, None);
    let mut lanes = [x, x.double(), x.square(), x.neg()];
    let t = Timer::start();
    for _ in 0..n_mul / 4 {
        for l in lanes.iter_mut() {
            *l = l.mul(&a);
        }
    }
    black_box(lanes);
    t.report("fp mul (4 independent)", n_mul, None);
    let t = Timer::start();
    for _ in 0..n_mul {
        x = x.add(black_box(&a));
    }
    black_box(x);
    t.report("fp add", n_mul, None);
    let b = FrRepr::from_scalar(&rng.scalar());
    let mut y = FrRepr::from_scalar(&rng.scalar());
    let t = Timer::start();
    for _ in 0..n_mul {
        y = y.mul(black_box(&b));
    }
    black_box(y);
    let fr_mul = t.report("fr mul (dependent chain)", n_mul, None);
    let (sa, mut sy) = (rng.scalar(), rng.scalar());
    let t = Timer::start();
    for _ in 0..n_mul {
        sy *= black_box(&sa);
    }
    black_box(sy);
    let fr_mul_ref = t.report("fr mul (ref: Scalar)", n_mul, None);
    let n_inv = 1000;
    let t = Timer::start();
    for _ in 0..n_inv {
        x = x.inverse().unwrap_or(FpRepr::ONE);
    }
    black_box(x);
    t.report("fp inverse (Fermat)", n_inv, None);

    // Parsing and the curve check sit on the parameter-loading path: not slower than
    // bls12_381 doing the same. The rest have no target (reference helpers for GPU tests).
    let rows = [
        ("fp from_be_bytes", "1 element", fp_parse, None),
        (
            "g1 parse (.params encoding)",
            "1 point",
            g1_parse,
            Some(g1_parse_ref),
        ),
        ("g1 is_on_curve", "1 point", on_curve, Some(on_curve_ref)),
        ("g2 parse (.params encoding)", "1 point", g2_parse, None),
        ("fr from_scalar", "1 element", fr_from, None),
        ("fp mul (dependent chain)", "1 product", fp_mul, None),
        (
            "fr mul (dependent chain)",
            "1 product",
            fr_mul,
            Some(fr_mul_ref),
        ),
    ];
    for (what, size, ours, peer) in rows {
        let target = peer.filter(|_| what.starts_with("g1"));
        BenchLine {
            what,
            size: size.into(),
            ours,
            peer,
            unit: "ns",
            lower_is_better: true,
            target: target.map(|_| "<= 1.0x peer (bls12_381)"),
            pass: target.map(|p| ours <= p),
        }
        .emit();
    }
}
