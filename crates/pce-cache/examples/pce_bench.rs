//! PCE benchmark on a SHA-256 circuit of about 2^20 constraints.
//!
//! Reports bytes per non-zero, extraction time, witness-only synthesis time, mat-vec time,
//! full bellman-style synthesis time (building every linear combination and evaluating it,
//! as groth16's prover does) and the speed-up of witness + mat-vec over full synthesis.
//!
//! ```text
//! cargo run --release -p pce-cache --example pce_bench -- [--constraints N | --blocks N] [--reps R] [--dir D]
//! ```
//! Phases are repeated `--reps` times (default 5), interleaved; medians are reported.
//! ```text
//! ```
//! The last line is a JSON object with the same figures.
//!
//! `PINION_BENCH_QUICK=1` (`cargo xtask bench --quick`) defaults to about 2^16 constraints
//! and 3 reps; `PINION_BENCH` lines carry the targets' figures for `cargo xtask bench`.

use pinion_bench::{quick, BenchLine};
use std::time::{Duration, Instant};

use bellman::gadgets::boolean::{AllocatedBit, Boolean};
use bellman::gadgets::multipack;
use bellman::gadgets::sha256::sha256;
use bellman::{Circuit, ConstraintSystem, SynthesisError};
use bls12_381::Scalar;
use ff::Field;
use pce_cache::reference::FullSynthesis;
use pce_cache::{MatrixId, Pce};

/// Constraints added per SHA-256 compression block by bellman's gadget (measured: 2 blocks
/// minus 1 block).
const CONSTRAINTS_PER_BLOCK: u64 = 26_704;

#[derive(Clone)]
struct Sha256Circuit {
    n_blocks: usize,
    message: Vec<u8>,
}

impl Circuit<Scalar> for Sha256Circuit {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let bits = self
            .message
            .iter()
            .flat_map(|&byte| (0..8).rev().map(move |i| (byte >> i) & 1 == 1))
            .enumerate()
            .map(|(i, b)| {
                AllocatedBit::alloc(cs.namespace(|| format!("bit {i}")), Some(b)).map(Boolean::from)
            })
            .collect::<Result<Vec<_>, _>>()?;
        debug_assert_eq!(bits.len(), (64 * self.n_blocks - 9) * 8);
        let digest = sha256(cs.namespace(|| "sha256"), &bits)?;
        multipack::pack_into_inputs(cs.namespace(|| "pack"), &digest)
    }
}

struct Args {
    blocks: usize,
    reps: usize,
    dir: Option<std::path::PathBuf>,
}

fn parse_args() -> Result<Args, String> {
    let mut blocks = None;
    let mut constraints: u64 = if quick() { 1 << 16 } else { 1 << 20 };
    let mut reps = if quick() { 3 } else { 5 };
    let mut dir = None;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut val = || it.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--blocks" => blocks = Some(val()?.parse().map_err(|e| format!("--blocks: {e}"))?),
            "--constraints" => {
                constraints = val()?.parse().map_err(|e| format!("--constraints: {e}"))?
            }
            "--reps" => reps = val()?.parse().map_err(|e| format!("--reps: {e}"))?,
            "--dir" => dir = Some(val()?.into()),
            "--bench" => {}
            other => return Err(format!("unknown argument {other}")),
        }
    }
    let blocks = blocks.unwrap_or(
        (constraints as f64 / CONSTRAINTS_PER_BLOCK as f64)
            .round()
            .max(1.0) as usize,
    );
    Ok(Args {
        blocks,
        reps: reps.max(1),
        dir,
    })
}

fn median(ts: &mut [Duration]) -> Duration {
    ts.sort();
    ts[ts.len() / 2]
}

fn best<T>(reps: usize, mut f: impl FnMut() -> T) -> (Duration, T) {
    let mut best = Duration::MAX;
    let mut out = None;
    for _ in 0..reps {
        let t = Instant::now();
        let r = f();
        best = best.min(t.elapsed());
        out = Some(r);
    }
    (best, out.expect("reps >= 1"))
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    // A fixed message: the timings do not depend on it.
    let message: Vec<u8> = (0..64 * args.blocks - 9)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761) as u8)
        .collect();
    let circuit = Sha256Circuit {
        n_blocks: args.blocks,
        message,
    };
    println!(
        "pce_bench: sha256 over {} blocks, {} rayon threads, {} interleaved reps, medians",
        args.blocks,
        rayon::current_num_threads(),
        args.reps
    );

    // Recorded against a budget to report the extraction's charged peak.
    let budget = memory_budget::Budget::fixed(u64::MAX / 4);
    let reservation = budget
        .try_reserve(0, memory_budget::Category::Pce, "bench")
        .expect("reserve");
    let t = Instant::now();
    let (pce, reservation) =
        pce_cache::Recorder::record(circuit.clone(), Some(reservation)).expect("record");
    let extraction = t.elapsed();
    let peak_bytes = reservation.map_or(0, |r| r.bytes());
    let shape = pce.shape();
    println!(
        "shape: {} constraints, {} rows, {} inputs, {} aux",
        shape.n_constraints, shape.n_rows, shape.n_inputs, shape.n_aux
    );
    println!(
        "non-zeros: a {} b {} c {} total {}; coefficients {}; code bytes a/b/c {}/{}/{}",
        pce.n_nonzeros_of(MatrixId::A),
        pce.n_nonzeros_of(MatrixId::B),
        pce.n_nonzeros_of(MatrixId::C),
        pce.n_nonzeros(),
        pce.n_coefficients(),
        pce.code_bytes_of(MatrixId::A),
        pce.code_bytes_of(MatrixId::B),
        pce.code_bytes_of(MatrixId::C),
    );
    println!(
        "matrix_bytes: {} ({:.2} bytes per non-zero; 32-byte coefficients + u64 column would be {:.0})",
        pce.matrix_bytes(),
        pce.bytes_per_nonzero(),
        40.0
    );
    println!(
        "extraction: {:.3} s; charged peak {} bytes, resident after {} bytes",
        extraction.as_secs_f64(),
        peak_bytes,
        pce.resident_bytes()
    );

    // Interleaved repetitions, so a change in machine load hits every phase alike; the
    // figures are medians (minimum in brackets).
    let n = shape.n_rows as usize;
    let (mut a, mut b, mut c) = (
        vec![Scalar::ZERO; n],
        vec![Scalar::ZERO; n],
        vec![Scalar::ZERO; n],
    );
    let (mut full_ts, mut wit_ts, mut mv_ts, mut pipe_ts) = (vec![], vec![], vec![], vec![]);
    let (mut a2, mut b2, mut c2) = (
        vec![Scalar::ZERO; n],
        vec![Scalar::ZERO; n],
        vec![Scalar::ZERO; n],
    );
    let mut full = None;
    let mut w = None;
    for _ in 0..args.reps {
        let t = Instant::now();
        full = Some(FullSynthesis::run(circuit.clone()).expect("full"));
        full_ts.push(t.elapsed());
        let t = Instant::now();
        let wit = pce.synthesize_witness(circuit.clone()).expect("witness");
        wit_ts.push(t.elapsed());
        let t = Instant::now();
        pce.evaluate_into(&wit.inputs, &wit.aux, &mut a, &mut b, &mut c)
            .expect("evaluate");
        mv_ts.push(t.elapsed());
        let t = Instant::now();
        pce.synthesize_and_evaluate(circuit.clone(), &mut a2, &mut b2, &mut c2)
            .expect("synthesize_and_evaluate");
        pipe_ts.push(t.elapsed());
        w = Some(wit);
    }
    let (full, w) = (full.expect("reps >= 1"), w.expect("reps >= 1"));
    let (t_full, t_wit, t_mv, t_pipe) = (
        median(&mut full_ts),
        median(&mut wit_ts),
        median(&mut mv_ts),
        median(&mut pipe_ts),
    );
    let show = |name: &str, t: Duration, ts: &[Duration]| {
        println!(
            "{name}: {:.3} s (min {:.3})",
            t.as_secs_f64(),
            ts.iter().min().copied().unwrap_or_default().as_secs_f64()
        )
    };
    show("full_synthesis", t_full, &full_ts);
    show("witness_only_synthesis", t_wit, &wit_ts);
    show("matvec", t_mv, &mv_ts);
    show("witness_and_matvec_overlapped", t_pipe, &pipe_ts);
    assert!(
        a2 == full.a && b2 == full.b && c2 == full.c,
        "pipelined a/b/c differ"
    );
    for m in MatrixId::ALL {
        let (plus, minus, other) = pce.n_nonzeros_by_kind(m);
        let mut out = vec![Scalar::ZERO; n];
        let (t, ()) = best(args.reps, || {
            pce.evaluate_matrix_into(m, &w.inputs, &w.aux, &mut out)
                .expect("evaluate one")
        });
        println!(
            "  {m:?}: +1 {plus}, -1 {minus}, other {other}; matvec {:.3} s ({:.1} ns per non-zero per thread)",
            t.as_secs_f64(),
            t.as_secs_f64() * 1e9 * rayon::current_num_threads() as f64
                / pce.n_nonzeros_of(m).max(1) as f64
        );
    }
    assert!(
        a == full.a && b == full.b && c == full.c,
        "pce a/b/c differ from full synthesis"
    );
    let speedup = t_full.as_secs_f64() / (t_wit + t_mv).as_secs_f64();
    let speedup_overlapped = t_full.as_secs_f64() / t_pipe.as_secs_f64();
    println!(
        "witness+matvec: {:.3} s; speedup over full synthesis: {:.2}x sequential, {:.2}x overlapped (target >= 2x)",
        (t_wit + t_mv).as_secs_f64(),
        speedup,
        speedup_overlapped
    );

    let size = format!("{} constraints", shape.n_constraints);
    let (ours_ms, full_ms) = (
        (t_wit + t_mv).as_secs_f64() * 1e3,
        t_full.as_secs_f64() * 1e3,
    );
    BenchLine {
        what: "pce witness + mat-vec vs full synthesis",
        size: size.clone(),
        ours: ours_ms,
        peer: Some(full_ms),
        unit: "ms",
        lower_is_better: true,
        target: Some("<= 0.5x peer (>= 2x speed-up)"),
        pass: Some(speedup >= 2.0),
    }
    .emit();
    BenchLine {
        what: "pce witness + mat-vec overlapped",
        size: size.clone(),
        ours: t_pipe.as_secs_f64() * 1e3,
        peer: Some(full_ms),
        unit: "ms",
        lower_is_better: true,
        target: None,
        pass: None,
    }
    .emit();
    // The peer is the plain layout: a 32-byte coefficient and a u64 column per non-zero.
    BenchLine {
        what: "pce storage",
        size: format!("{} non-zeros", pce.n_nonzeros()),
        ours: pce.bytes_per_nonzero(),
        peer: Some(40.0),
        unit: "bytes/nnz",
        lower_is_better: true,
        target: Some("<= 9 bytes/nnz"),
        pass: Some(pce.bytes_per_nonzero() <= 9.0),
    }
    .emit();
    BenchLine {
        what: "pce extraction (record)",
        size,
        ours: extraction.as_secs_f64() * 1e3,
        peer: None,
        unit: "ms",
        lower_is_better: true,
        target: None,
        pass: None,
    }
    .emit();

    // Disk: write, checked mmap load, evaluation from the map.
    let dir = args
        .dir
        .unwrap_or_else(|| std::env::temp_dir().join(format!("pce-bench-{}", std::process::id())));
    std::fs::create_dir_all(&dir).expect("bench dir");
    let path = dir.join("sha256.pce");
    let t = Instant::now();
    pce.write_to(&path).expect("write");
    let t_write = t.elapsed();
    let (t_load, mapped) = best(args.reps, || {
        Pce::load(&path, Some(&pce.fingerprint())).expect("load")
    });
    let (t_mv_mapped, ()) = best(args.reps, || {
        mapped
            .evaluate_into(&w.inputs, &w.aux, &mut a, &mut b, &mut c)
            .expect("evaluate mapped")
    });
    assert!(a == full.a && b == full.b && c == full.c);
    let file_bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    println!(
        "disk: file {} bytes, write {:.3} s, checked load {:.3} s, matvec from map {:.3} s",
        file_bytes,
        t_write.as_secs_f64(),
        t_load.as_secs_f64(),
        t_mv_mapped.as_secs_f64()
    );
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_dir(&dir);
    println!(
        "{{\"bench\":\"pce_sha256\",\"blocks\":{},\"n_constraints\":{},\"n_nonzeros\":{},\"bytes_per_nonzero\":{:.3},\"extraction_s\":{:.4},\"extraction_peak_bytes\":{},\"resident_bytes\":{},\"witness_s\":{:.4},\"matvec_s\":{:.4},\"full_synthesis_s\":{:.4},\"speedup\":{:.3},\"overlapped_s\":{:.4},\"speedup_overlapped\":{:.3},\"file_bytes\":{},\"load_checked_s\":{:.4},\"matvec_mapped_s\":{:.4},\"threads\":{}}}",
        args.blocks,
        shape.n_constraints,
        pce.n_nonzeros(),
        pce.bytes_per_nonzero(),
        extraction.as_secs_f64(),
        peak_bytes,
        pce.resident_bytes(),
        t_wit.as_secs_f64(),
        t_mv.as_secs_f64(),
        t_full.as_secs_f64(),
        speedup,
        t_pipe.as_secs_f64(),
        speedup_overlapped,
        file_bytes,
        t_load.as_secs_f64(),
        t_mv_mapped.as_secs_f64(),
        rayon::current_num_threads()
    );
}
