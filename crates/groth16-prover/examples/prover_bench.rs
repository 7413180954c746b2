//! Prover benchmark: SHA-256 circuits of about 2^k constraints (k = 16 by default; pass
//! another k, e.g. `20`, as the first argument), our CPU backend against
//! `groth16::create_proof` on the same machine, side by side, with our breakdown.
//!
//! `cargo run --release -p groth16-prover --example prover_bench -- [k] [--reps N]`
//!
//! With `PINION_BENCH_QUICK=1` (`cargo xtask bench --quick`) the circuit is a MiMC-style chain
//! of about 8,000 constraints (domain 2^13) instead, so a first run generates its parameters in
//! seconds; `PINION_BENCH` lines carry the medians for `cargo xtask bench`.
//!
//! Parameters are generated once (slow: groth16's generator) and cached under
//! `$CARGO_TARGET_DIR/pinion-bench/` (or `target/pinion-bench/`); later runs reuse the
//! file. Both provers get the same (r, s) and the bench fails if the proofs differ.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bellman::Circuit;
use bls12_381::{Bls12, Scalar};
use groth16::Parameters;
use groth16_prover::testing::{MimcChain, Sha256Circuit};
use groth16_prover::{
    ProofOutput, Prover, ProverConfig, ProvingKey, Randomness, SelfCheck, Synthesis,
};
use memory_budget::Budget;
use pce_cache::Pce;
use rand::rngs::StdRng;
use rand::SeedableRng;
use srs_store::LoadOptions;

const CIRCUIT_SEED: u64 = 0x5eed_0001;
const PARAMS_SEED: u64 = 0x5eed_0002;
/// Rounds of the quick-mode chain: 2 constraints each, rows fit in 2^13.
const QUICK_MIMC_ROUNDS: usize = 4000;

fn main() {
    let mut log_size = 16u32;
    let mut reps = 3usize;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--reps" => reps = args.next().and_then(|v| v.parse().ok()).unwrap_or(reps),
            other => {
                log_size = other
                    .parse()
                    .unwrap_or_else(|_| panic!("bad argument {other:?}: expected k or --reps N"))
            }
        }
    }
    let reps = reps.max(1);
    if quick() {
        let circuit = MimcChain::new(QUICK_MIMC_ROUNDS, CIRCUIT_SEED);
        let name = format!("mimc-{QUICK_MIMC_ROUNDS}r-{CIRCUIT_SEED:x}-{PARAMS_SEED:x}");
        bench(circuit, "mimc chain", &name, reps.min(3));
        return;
    }

    // Rows grow by a fixed amount per block: the most blocks whose rows fit in 2^k.
    let rows = |n: usize| {
        Pce::record(Sha256Circuit::with_blocks(n, CIRCUIT_SEED))
            .expect("record")
            .shape()
            .n_rows
    };
    let (r1, r2) = (rows(1), rows(2));
    let per_block = r2 - r1;
    let target = 1u64 << log_size;
    let n_blocks = (target.saturating_sub(r1) / per_block + 1) as usize;
    let circuit = Sha256Circuit::with_blocks(n_blocks, CIRCUIT_SEED);

    let name = format!("sha256-{n_blocks}b-{CIRCUIT_SEED:x}-{PARAMS_SEED:x}");
    bench(circuit, &format!("sha256, {n_blocks} blocks"), &name, reps);
}

/// Proves `circuit` `reps` times with groth16 and with ours (PCE and plain synthesis).
fn bench<C: Circuit<Scalar> + Clone>(circuit: C, label: &str, params_name: &str, reps: usize) {
    let t = Instant::now();
    let pce = Pce::record(circuit.clone()).expect("record pce");
    let record_time = t.elapsed();
    let shape = pce.shape();
    println!(
        "circuit: {label}, {} constraints, {} rows (domain 2^{}), {} inputs, {} aux",
        shape.n_constraints,
        shape.n_rows,
        shape.n_rows.next_power_of_two().trailing_zeros(),
        shape.n_inputs,
        shape.n_aux
    );
    println!("machine: {} threads (rayon)", rayon::current_num_threads());

    let path = params_path(params_name);
    if !path.exists() {
        println!("generating parameters (once) into {} ...", path.display());
        let t = Instant::now();
        let mut rng = StdRng::seed_from_u64(PARAMS_SEED);
        let params = groth16::generate_random_parameters::<Bls12, _, _>(circuit.clone(), &mut rng)
            .expect("parameter generation");
        let tmp = path.with_extension("tmp");
        let mut file =
            std::io::BufWriter::new(std::fs::File::create(&tmp).expect("create params file"));
        params.write(&mut file).expect("write params");
        drop(file);
        std::fs::rename(&tmp, &path).expect("rename params file");
        println!("  generated in {:.1} s", t.elapsed().as_secs_f64());
    }

    let budget = Budget::fixed(16 << 30);
    let t = Instant::now();
    let key =
        ProvingKey::load(&path, &budget, &LoadOptions::default()).expect("load through srs-store");
    let load_ours = t.elapsed();
    let t = Instant::now();
    let file = std::fs::read(&path).expect("read params");
    let params = Parameters::<Bls12>::read(&file[..], false).expect("groth16 read");
    drop(file);
    let load_ref = t.elapsed();
    println!(
        "one-time: pce record {:.3} s; key load (srs-store + conversion) {:.3} s; groth16 Parameters::read {:.3} s",
        record_time.as_secs_f64(),
        load_ours.as_secs_f64(),
        load_ref.as_secs_f64()
    );

    let config = ProverConfig {
        self_check: SelfCheck::Never,
        ..ProverConfig::default()
    };
    let prover = Prover::new(Arc::new(key), budget.clone(), config).expect("cpu prover");
    let mut rng = StdRng::seed_from_u64(PARAMS_SEED ^ 1);

    let mut reference = Vec::new();
    let mut ours_pce: Vec<ProofOutput> = Vec::new();
    let mut ours_plain: Vec<ProofOutput> = Vec::new();
    for rep in 0..reps {
        let rs = Randomness::random(&mut rng);
        let t = Instant::now();
        let want =
            groth16::create_proof(circuit.clone(), &params, rs.r, rs.s).expect("reference proof");
        reference.push(t.elapsed());
        let got = prover
            .prove(Synthesis::Pce(&pce), circuit.clone(), rs)
            .expect("our proof (pce)");
        assert!(
            got.proof == want,
            "rep {rep}: pce proof differs from groth16::create_proof"
        );
        ours_pce.push(got);
        let got = prover
            .prove(Synthesis::Plain, circuit.clone(), rs)
            .expect("our proof (plain)");
        assert!(
            got.proof == want,
            "rep {rep}: plain proof differs from groth16::create_proof"
        );
        ours_plain.push(got);
        println!(
            "rep {rep}: groth16 {:.3} s | ours pce {:.3} s | ours plain {:.3} s (proofs identical)",
            reference[rep].as_secs_f64(),
            ours_pce[rep].timings.total.as_secs_f64(),
            ours_plain[rep].timings.total.as_secs_f64()
        );
    }

    let ref_med = median(reference.clone());
    let pce_med = median(ours_pce.iter().map(|o| o.timings.total).collect());
    let plain_med = median(ours_plain.iter().map(|o| o.timings.total).collect());
    println!();
    println!(
        "{:<34} {:>10} {:>10}",
        "median of reps", "seconds", "vs groth16"
    );
    for (name, d) in [
        ("groth16::create_proof", ref_med),
        ("ours, cpu, pce path", pce_med),
        ("ours, cpu, plain synthesis", plain_med),
    ] {
        println!(
            "{:<34} {:>10.3} {:>9.2}x",
            name,
            d.as_secs_f64(),
            ref_med.as_secs_f64() / d.as_secs_f64()
        );
    }
    let size = format!(
        "2^{} ({} constraints)",
        shape.n_rows.next_power_of_two().trailing_zeros(),
        shape.n_constraints
    );
    for (what, d) in [
        ("prove cpu, pce path", pce_med),
        ("prove cpu, plain synthesis", plain_med),
    ] {
        let (ours, peer) = (d.as_secs_f64() * 1e3, ref_med.as_secs_f64() * 1e3);
        BenchLine {
            what: &format!("{what} ({})", label.split(',').next().unwrap_or(label)),
            size: size.clone(),
            ours,
            peer: Some(peer),
            unit: "ms",
            lower_is_better: true,
            target: Some("<= 1.0x peer (groth16::create_proof)"),
            pass: Some(ours <= peer),
        }
        .emit();
    }
    for (path_label, runs) in [("pce path", &ours_pce), ("plain synthesis", &ours_plain)] {
        let best = runs
            .iter()
            .min_by_key(|o| o.timings.total)
            .expect("at least one rep");
        let t = best.timings;
        println!();
        println!(
            "breakdown, ours ({path_label}, fastest rep), peak charged {:.1} MiB:",
            best.peak_charged_bytes as f64 / (1u64 << 20) as f64
        );
        for (phase, d) in [
            ("synthesis", t.synthesis),
            ("a/b/c evaluation", t.abc_evaluation),
            ("witness check", t.witness_check),
            ("h (7 ntts)", t.h),
            ("msm h", t.msm_h),
            ("msm l", t.msm_l),
            ("msm a", t.msm_a),
            ("msm b_g1", t.msm_b_g1),
            ("msm b_g2", t.msm_b_g2),
            ("assembly", t.assembly),
            ("total", t.total),
        ] {
            println!("  {:<18} {:>9.3} s", phase, d.as_secs_f64());
        }
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn params_path(name: &str) -> PathBuf {
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| PathBuf::from("target"), PathBuf::from);
    let dir = target.join("pinion-bench");
    std::fs::create_dir_all(&dir).expect("create bench dir");
    dir.join(format!("{name}.params"))
}

/// True when `cargo xtask bench --quick` asks for the small sizes.
fn quick() -> bool {
    std::env::var("PINION_BENCH_QUICK").is_ok_and(|v| v == "1")
}

/// One machine-readable result for `cargo xtask bench`: a stdout line `PINION_BENCH {json}`.
/// (Each bench example carries these few lines: examples share no crate.)
struct BenchLine<'a> {
    what: &'a str,
    size: String,
    ours: f64,
    peer: Option<f64>,
    unit: &'a str,
    lower_is_better: bool,
    target: Option<&'a str>,
    pass: Option<bool>,
}

impl BenchLine<'_> {
    fn emit(&self) {
        let s = |x: &str| format!("\"{}\"", x.replace('\\', "\\\\").replace('"', "\\\""));
        let n = |x: f64| {
            if x.is_finite() {
                format!("{x}")
            } else {
                "null".into()
            }
        };
        println!(
            "PINION_BENCH {{\"what\":{},\"size\":{},\"ours\":{},\"peer\":{},\"unit\":{},\"lower_is_better\":{},\"target\":{},\"pass\":{}}}",
            s(self.what),
            s(&self.size),
            n(self.ours),
            self.peer.map_or("null".into(), n),
            s(self.unit),
            self.lower_is_better,
            self.target.map_or("null".into(), s),
            self.pass.map_or("null".into(), |b| b.to_string())
        );
    }
}
