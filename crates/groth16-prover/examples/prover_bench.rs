//! Prover benchmark: SHA-256 circuits of about 2^k constraints (k = 16 by default; pass
//! another k, e.g. `20`, as the first argument), our CPU backend against
//! `groth16::create_proof` on the same machine, side by side, with our breakdown; when a
//! GPU is present (device 0 opens), our GPU backend too.
//!
//! `cargo run --release -p groth16-prover --example prover_bench -- [k] [--reps N]
//!  [--gpu-reps N] [--fast-params] [--synthetic] [--streamed]`
//!
//! - `--fast-params`: parameters from `groth16_prover::testing::insecure_bench_parameters`
//!   (known discrete logs, seconds instead of minutes to make; **proofs do not verify**),
//!   in memory, instead of `groth16::generate_random_parameters` cached on disk. Both
//!   provers still compute the same function of them, and the proofs are still compared
//!   byte for byte.
//! - `--streamed`: the key stays in the store's pinned tier (`GpuPlacement::Pinned`): every
//!   query is streamed from pinned host memory by each MSM (the path for parameters larger
//!   than the card).
//! - `--synthetic`: the circuit is `testing::KeyedChain` with 2^k − 1 constraints (domain
//!   2^k; uniform aux values, B touches 16 keys only) and fast parameters; only the GPU
//!   backend runs (the CPU and the reference would take minutes at 2^24), and its proofs
//!   are compared with each other across repetitions of the same (r, s) only.
//!
//! With `PINION_BENCH_QUICK=1` (`cargo xtask bench --quick`) the circuit is a MiMC-style chain
//! of about 8,000 constraints (domain 2^13) instead, so a first run generates its parameters in
//! seconds; `PINION_BENCH` lines carry the medians for `cargo xtask bench`.
//!
//! Real parameters are generated once (slow: groth16's generator) and cached under
//! `$CARGO_TARGET_DIR/pinion-bench/` (or `target/pinion-bench/`); later runs reuse the
//! file; fast parameters are written there too. Our CPU provers read the key through one
//! `SrsStore` and the GPU prover through another (each as one `pinion prove` process does):
//! the GPU backend moves its copy to the store's device tier on its first proof. (One store
//! shared by CPU and GPU provers keeps the key in pinned memory for a minute after each host
//! read, the engine's policy for mixed devices, and the GPU then streams its bases.) Every
//! prover gets the same (r, s) and the bench fails if the proofs differ.

use pinion_bench::{quick, BenchLine};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bellman::Circuit;
use bls12_381::{Bls12, Scalar};
use gpu_device::Gpu;
use groth16::Parameters;
use groth16_prover::testing::{
    insecure_bench_parameters, KeyedChain, MimcChain, ParamShape, Sha256Circuit,
};
use groth16_prover::{
    GpuBackend, GpuPlacement, ProofOutput, ProofTimings, Prover, ProverConfig, ProvingKey,
    Randomness, SelfCheck, Synthesis,
};
use memory_budget::Budget;
use pce_cache::Pce;
use rand::rngs::StdRng;
use rand::SeedableRng;
use srs_store::{SrsSpec, SrsStore, StoreConfig};

const CIRCUIT_SEED: u64 = 0x5eed_0001;
const PARAMS_SEED: u64 = 0x5eed_0002;
/// Rounds of the quick-mode chain: 2 constraints each, rows fit in 2^13.
const QUICK_MIMC_ROUNDS: usize = 4000;
/// Keys of the synthetic chain's B side.
const SYNTHETIC_KEYS: usize = 16;

/// What to run.
#[derive(Clone, Copy, Debug)]
struct Opts {
    reps: usize,
    gpu_reps: usize,
    fast_params: bool,
    /// Run our CPU backend and groth16 (false for the synthetic circuit).
    cpu: bool,
    /// GPU backend with no resident bases: every query streamed from pinned memory.
    streamed: bool,
}

fn main() {
    let mut log_size = 16u32;
    let mut opts = Opts {
        reps: 3,
        gpu_reps: 5,
        fast_params: false,
        cpu: true,
        streamed: false,
    };
    let mut synthetic = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut count =
            |default: usize| args.next().and_then(|v| v.parse().ok()).unwrap_or(default);
        match a.as_str() {
            "--reps" => opts.reps = count(opts.reps),
            "--gpu-reps" => opts.gpu_reps = count(opts.gpu_reps),
            "--fast-params" => opts.fast_params = true,
            "--synthetic" => synthetic = true,
            "--streamed" => opts.streamed = true,
            other => {
                log_size = other.parse().unwrap_or_else(|_| {
                    panic!("bad argument {other:?}: expected k, --reps N, --gpu-reps N, --fast-params, --synthetic or --streamed")
                })
            }
        }
    }
    opts.reps = opts.reps.max(1);
    opts.gpu_reps = opts.gpu_reps.max(1);
    let gpu = match Gpu::open(0) {
        Ok(g) => {
            println!("gpu: {:?}", g.info());
            Some(g)
        }
        Err(e) => {
            println!("gpu: none ({e}); cpu columns only");
            None
        }
    };
    if quick() {
        let circuit = MimcChain::new(QUICK_MIMC_ROUNDS, CIRCUIT_SEED);
        let name = format!("mimc-{QUICK_MIMC_ROUNDS}r-{CIRCUIT_SEED:x}-{PARAMS_SEED:x}");
        opts.reps = opts.reps.min(3);
        bench(circuit, "mimc chain", &name, opts, gpu);
        return;
    }
    if synthetic {
        let circuit = KeyedChain {
            n_constraints: (1usize << log_size) - 1,
            n_keys: SYNTHETIC_KEYS,
            seed: CIRCUIT_SEED,
        };
        opts.fast_params = true;
        opts.cpu = false;
        // The size in the name: the parameter file is cached under it (a 2^20 run's file
        // must not be taken for a 2^24 run's).
        let name = format!("synthetic-2e{log_size}-{CIRCUIT_SEED:x}-{PARAMS_SEED:x}");
        bench(circuit, "synthetic keyed chain", &name, opts, gpu);
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
    bench(
        circuit,
        &format!("sha256, {n_blocks} blocks"),
        &name,
        opts,
        gpu,
    );
}

/// Real parameters from the file cache (generated once), or fast insecure ones.
fn parameters<C: Circuit<Scalar> + Clone>(
    circuit: &C,
    pce: &Pce,
    params_name: &str,
    opts: Opts,
    budget: &Budget,
) -> (ProvingKey, Parameters<Bls12>, std::path::PathBuf) {
    if opts.fast_params {
        let t = Instant::now();
        let params = insecure_bench_parameters(ParamShape::of(pce), PARAMS_SEED);
        println!(
            "parameters: INSECURE bench-only points (proofs do not verify), made in {:.1} s",
            t.elapsed().as_secs_f64()
        );
        let path = params_path(&format!("{params_name}-fast"));
        write_params(&params, &path);
        return (stored_key(&path, params_name, budget), params, path);
    }
    let path = params_path(params_name);
    if !path.exists() {
        println!("generating parameters (once) into {} ...", path.display());
        let t = Instant::now();
        let mut rng = StdRng::seed_from_u64(PARAMS_SEED);
        let params = groth16::generate_random_parameters::<Bls12, _, _>(circuit.clone(), &mut rng)
            .expect("parameter generation");
        write_params(&params, &path);
        println!("  generated in {:.1} s", t.elapsed().as_secs_f64());
    }
    let t = Instant::now();
    let key = stored_key(&path, params_name, budget);
    let load_ours = t.elapsed();
    let t = Instant::now();
    let file = std::fs::read(&path).expect("read params");
    let params = Parameters::<Bls12>::read(&file[..], false).expect("groth16 read");
    drop(file);
    println!(
        "one-time: key load (srs-store, host tier, curve check) {:.3} s; groth16 Parameters::read {:.3} s",
        load_ours.as_secs_f64(),
        t.elapsed().as_secs_f64()
    );
    (key, params, path)
}

/// Writes `params` to `path` (through a temporary file) unless it exists.
fn write_params(params: &Parameters<Bls12>, path: &std::path::Path) {
    if path.exists() {
        return;
    }
    let tmp = path.with_extension("tmp");
    let mut file =
        std::io::BufWriter::new(std::fs::File::create(&tmp).expect("create params file"));
    params.write(&mut file).expect("write params");
    drop(file);
    std::fs::rename(&tmp, path).expect("rename params file");
}

/// A key over a process-wide store's entry for `path` (host tier, curve-checked).
fn stored_key(path: &std::path::Path, id: &str, budget: &Budget) -> ProvingKey {
    let store = SrsStore::new(budget.clone(), StoreConfig::default());
    ProvingKey::from_store(&store, SrsSpec::new(id, path)).expect("load through srs-store")
}

/// Proves `circuit` with groth16 and ours (CPU: PCE and plain synthesis; GPU: PCE).
fn bench<C: Circuit<Scalar> + Clone>(
    circuit: C,
    label: &str,
    params_name: &str,
    opts: Opts,
    gpu: Option<Gpu>,
) {
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
    println!(
        "machine: {} threads (rayon); pce record {:.3} s",
        rayon::current_num_threads(),
        record_time.as_secs_f64()
    );
    let budget = Budget::fixed(96 << 30);
    let (key, params, key_path) = parameters(&circuit, &pce, params_name, opts, &budget);
    let key = Arc::new(key);
    let config = ProverConfig {
        self_check: SelfCheck::Never,
        ..ProverConfig::default()
    };
    let short = label.split(',').next().unwrap_or(label).to_string();
    let size = format!(
        "2^{} ({} constraints)",
        shape.n_rows.next_power_of_two().trailing_zeros(),
        shape.n_constraints
    );
    let mut rng = StdRng::seed_from_u64(PARAMS_SEED ^ 1);
    let pairs: Vec<Randomness> = (0..opts.reps.max(opts.gpu_reps))
        .map(|_| Randomness::random(&mut rng))
        .collect();

    // The reference and our CPU backend, rep by rep.
    let mut reference: Vec<(Duration, groth16::Proof<Bls12>)> = Vec::new();
    if opts.cpu {
        let cpu = Prover::with_backend(
            Arc::clone(&key),
            budget.clone(),
            config,
            Box::new(groth16_prover::CpuBackend::new(budget.clone())),
        );
        let mut ours_pce: Vec<ProofOutput> = Vec::new();
        let mut ours_plain: Vec<ProofOutput> = Vec::new();
        for (rep, rs) in pairs.iter().take(opts.reps).enumerate() {
            let t = Instant::now();
            let want = groth16::create_proof(circuit.clone(), &params, rs.r, rs.s)
                .expect("reference proof");
            reference.push((t.elapsed(), want.clone()));
            let got = cpu
                .prove(Synthesis::Pce(&pce), circuit.clone(), *rs)
                .expect("our proof (pce)");
            assert!(
                got.proof == want,
                "rep {rep}: pce proof differs from groth16::create_proof"
            );
            ours_pce.push(got);
            let got = cpu
                .prove(Synthesis::Plain, circuit.clone(), *rs)
                .expect("our proof (plain)");
            assert!(
                got.proof == want,
                "rep {rep}: plain proof differs from groth16::create_proof"
            );
            ours_plain.push(got);
            println!(
                "rep {rep}: groth16 {:.3} s | ours cpu pce {:.3} s | ours cpu plain {:.3} s (proofs identical)",
                reference[rep].0.as_secs_f64(),
                ours_pce[rep].timings.total.as_secs_f64(),
                ours_plain[rep].timings.total.as_secs_f64()
            );
        }
        let ref_med = median(reference.iter().map(|r| r.0).collect());
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
        for (what, d) in [
            ("prove cpu, pce path", pce_med),
            ("prove cpu, plain synthesis", plain_med),
        ] {
            let (ours, peer) = (d.as_secs_f64() * 1e3, ref_med.as_secs_f64() * 1e3);
            BenchLine {
                what: &format!("{what} ({short})"),
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
        for (path_label, runs) in [
            ("cpu, pce path", &ours_pce),
            ("cpu, plain synthesis", &ours_plain),
        ] {
            let best = runs.iter().min_by_key(|o| o.timings.total).expect("a rep");
            breakdown(path_label, best);
        }
    }

    let Some(gpu) = gpu else {
        return;
    };
    // Issue 18's GPU-time targets are an H200's (the machine).
    let on_target_kind = pinion_bench::recorded_reference_applies(&gpu.info().name);
    let mut backend = GpuBackend::with_gpu(gpu, budget.clone());
    if opts.streamed {
        backend = backend.with_placement(GpuPlacement::Pinned);
    }
    let path = if opts.streamed {
        "pce path, bases streamed"
    } else {
        "pce path"
    };
    // The GPU reads the key through its own store, as a `pinion prove --gpu` process does.
    // Sharing the CPU provers' store would keep the key in pinned memory for a minute after
    // their host reads (the policy for engines with CPU and GPU devices), so the GPU would
    // stream its bases instead of reading them from its device tier.
    let gpu_key = if opts.cpu {
        Arc::new(stored_key(&key_path, params_name, &budget))
    } else {
        Arc::clone(&key)
    };
    let gpu_prover = Prover::with_backend(gpu_key, budget.clone(), config, Box::new(backend));
    // First proof: kernel modules, twiddles and the resident bases are set up here.
    let first = gpu_prover
        .prove(Synthesis::Pce(&pce), circuit.clone(), pairs[0])
        .expect("gpu proof (first)");
    if let Some((_, want)) = reference.first() {
        assert!(
            first.proof == *want,
            "first gpu proof differs from groth16::create_proof"
        );
    }
    println!();
    println!(
        "gpu first proof {:.3} s (bases upload {:.3} s, h {:.3} s, msms {:.3} s)",
        first.timings.total.as_secs_f64(),
        first.timings.bases_upload.as_secs_f64(),
        first.timings.h.as_secs_f64(),
        first.timings.msm_wall.as_secs_f64()
    );
    let placed: Vec<String> = first
        .bases
        .iter()
        .map(|p| match p.sorted_with {
            Some(q) => format!("{} {:?} (sorted with {q})", p.query, p.kind),
            None => format!("{} {:?}", p.query, p.kind),
        })
        .collect();
    println!("gpu placement: {}", placed.join(", "));
    let mut runs: Vec<ProofOutput> = Vec::new();
    for (rep, rs) in pairs.iter().take(opts.gpu_reps).enumerate() {
        let got = gpu_prover
            .prove(Synthesis::Pce(&pce), circuit.clone(), *rs)
            .expect("gpu proof");
        match reference.get(rep) {
            Some((_, want)) => {
                assert!(
                    got.proof == *want,
                    "rep {rep}: gpu proof differs from groth16::create_proof"
                )
            }
            None if rep == 0 => assert!(
                got.proof == first.proof,
                "gpu proofs differ for the same (r, s)"
            ),
            None => {}
        }
        println!(
            "gpu rep {rep}: total {:.3} s, h + msms {:.3} s{}",
            got.timings.total.as_secs_f64(),
            gpu_time(&got.timings).as_secs_f64(),
            if rep < reference.len() {
                " (identical to groth16)"
            } else {
                ""
            }
        );
        runs.push(got);
    }
    let total_med = median(runs.iter().map(|o| o.timings.total).collect());
    let gpu_med = median(runs.iter().map(|o| gpu_time(&o.timings)).collect());
    let best = runs.iter().min_by_key(|o| o.timings.total).expect("a rep");
    breakdown(&format!("gpu, {path}"), best);
    if !reference.is_empty() {
        let ref_med = median(reference.iter().map(|r| r.0).collect());
        let speedup = ref_med.as_secs_f64() / total_med.as_secs_f64();
        println!(
            "gpu vs groth16::create_proof: {:.3} s vs {:.3} s = {speedup:.1}x (whole proof, synthesis included)",
            total_med.as_secs_f64(),
            ref_med.as_secs_f64()
        );
        BenchLine {
            what: &format!("prove gpu, {path} ({short})"),
            size: size.clone(),
            ours: total_med.as_secs_f64() * 1e3,
            peer: Some(ref_med.as_secs_f64() * 1e3),
            unit: "ms",
            lower_is_better: true,
            // The target is for resident bases; streamed is reported beside it.
            target: (!opts.streamed).then_some(">= 20x faster than peer (groth16::create_proof)"),
            pass: (!opts.streamed).then_some(speedup >= 20.0),
        }
        .emit();
    }
    // Issue 18: H + MSMs at most 0.30 s for the synthetic 2^24 circuit and 20 ms for
    // SHA-256 at 2^20, bases resident, on an H200 (elsewhere the target is named, not judged).
    let log_rows = shape.n_rows.next_power_of_two().trailing_zeros();
    let target = if opts.streamed {
        None
    } else if label.starts_with("synthetic") && log_rows == 24 {
        Some(("<= 300 ms at 2^24, synthetic (issue 18, H200)", 0.300))
    } else if label.starts_with("sha256") && log_rows == 20 {
        Some(("<= 20 ms at 2^20, SHA-256 (issue 18, H200)", 0.020))
    } else {
        None
    };
    BenchLine {
        what: &format!(
            "gpu h + msms{} ({short})",
            if opts.streamed {
                ", bases streamed"
            } else {
                ""
            }
        ),
        size,
        ours: gpu_med.as_secs_f64() * 1e3,
        peer: None,
        unit: "ms",
        lower_is_better: true,
        target: target.map(|t| t.0),
        pass: target
            .filter(|_| on_target_kind)
            .map(|t| gpu_med.as_secs_f64() <= t.1),
    }
    .emit();
}

/// What the GPU target counts: the H step and the MSM phase (transfers included). On the
/// GPU backend `h` is the host part of H; its device transforms run during `msm_wall`.
fn gpu_time(t: &ProofTimings) -> Duration {
    t.h + t.msm_wall
}

fn breakdown(what: &str, best: &ProofOutput) {
    let t = best.timings;
    println!();
    println!(
        "breakdown, ours ({what}, fastest rep), peak charged {:.1} MiB (of which pinned staging pool {:.1} MiB):",
        best.peak_charged_bytes as f64 / (1u64 << 20) as f64,
        best.pinned_staging_peak_bytes as f64 / (1u64 << 20) as f64
    );
    for (phase, d) in [
        ("synthesis", t.synthesis),
        ("a/b/c evaluation", t.abc_evaluation),
        ("witness check", t.witness_check),
        ("h (6 ntts)", t.h),
        ("  of which transfers", t.h_transfers),
        ("  device transforms (async)", t.h_device),
        ("msm h", t.msm_h),
        ("msm l", t.msm_l),
        ("  of which waiting for its scalars", t.msm_scalars_wait),
        ("msm a", t.msm_a),
        ("msm b_g1", t.msm_b_g1),
        ("msm b_g2", t.msm_b_g2),
        ("msms, wall", t.msm_wall),
        ("  of which scalar transfers", t.msm_transfers),
        ("    of which staging waits", t.msm_staging_wait),
        ("      of which witness device buffers", t.msm_witness_alloc),
        ("      of which witness masks", t.msm_witness_masks),
        ("  of which bases upload", t.bases_upload),
        ("assembly", t.assembly),
        ("total", t.total),
    ] {
        println!("  {:<28} {:>9.3} s", phase, d.as_secs_f64());
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
