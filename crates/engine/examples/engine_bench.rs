//! Engine benchmark: a stream of proofs of one circuit through the engine against the same
//! proofs made one after another with `Prover`, on one device (the GPU when device 0
//! opens, else a CPU backend behind the device interface).
//!
//! `cargo run --release -p pinion-engine --example engine_bench -- [k] [--synthetic]
//!  [--jobs N] [--cpu]`
//!
//! - default: SHA-256 circuit of about 2^k constraints (k = 20);
//! - `--synthetic`: `testing::KeyedChain` of 2^k − 1 constraints;
//! - `--jobs N`: proofs in the stream (32 by default);
//! - `--cpu`: a CPU backend even when a GPU is present.
//!
//! Parameters are insecure bench parameters (`testing::insecure_bench_parameters`: fast to
//! make, **proofs do not verify**, so nothing is self-checked), written once under
//! `$CARGO_TARGET_DIR/pinion-bench/` and read through the store as `pinion prove` does.
//! Each measurement runs in a child process of its own, so each one's `VmHWM` is its own:
//! 1. sequential: `Prover::prove` N times; its synthesis time Ts and device time Tg
//!    (H + MSMs) per proof;
//! 2. engine, unconstrained budget: N jobs submitted at once; throughput against the
//!    target 0.9 / max(Ts, Tg);
//! 3. engine, a budget of half the unconstrained run's charged peak: the same stream, no
//!    refusal allowed; charged and measured peaks side by side.
//!
//! With `PINION_BENCH_QUICK=1` (`cargo xtask bench --quick`): a MiMC chain of about 2^13
//! constraints, 8 jobs, the CPU backend (under a minute on 2 cores).

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bellman::Circuit;
use bls12_381::Scalar;
use engine::{
    CircuitSpec, DeviceConfig, Engine, EngineConfig, JobSpec, JobStatus, Partition, PceSource,
};
use gpu_device::Gpu;
use groth16_prover::testing::{
    insecure_bench_parameters, KeyedChain, MimcChain, ParamShape, Sha256Circuit,
};
use groth16_prover::{
    CpuBackend, GpuBackend, Prover, ProverBackend, ProverConfig, ProvingKey, Randomness, SelfCheck,
    Synthesis,
};
use memory_budget::{Budget, DetectOptions};
use pce_cache::{CacheConfig, CircuitKey, PceCache};
use pinion_bench::{quick, BenchLine};
use rand::SeedableRng;
use srs_store::{SrsSpec, SrsStore, StoreConfig};

const CIRCUIT_SEED: u64 = 0x5eed_0003;
const PARAMS_SEED: u64 = 0x5eed_0004;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Mimc,
    Sha256,
    Synthetic,
}

#[derive(Clone, Debug)]
struct Opts {
    kind: Kind,
    log_size: u32,
    jobs: usize,
    cpu: bool,
}

impl Opts {
    fn args(&self) -> Vec<String> {
        let mut v = vec![
            self.log_size.to_string(),
            "--jobs".into(),
            self.jobs.to_string(),
        ];
        match self.kind {
            Kind::Synthetic => v.push("--synthetic".into()),
            Kind::Mimc => v.push("--mimc".into()),
            Kind::Sha256 => {}
        }
        if self.cpu {
            v.push("--cpu".into());
        }
        v
    }
}

fn main() {
    let mut opts = Opts {
        kind: Kind::Sha256,
        log_size: 20,
        jobs: 32,
        cpu: false,
    };
    let mut child = None;
    let mut budget_bytes = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--synthetic" => opts.kind = Kind::Synthetic,
            "--mimc" => opts.kind = Kind::Mimc,
            "--cpu" => opts.cpu = true,
            "--jobs" => opts.jobs = args.next().and_then(|v| v.parse().ok()).unwrap_or(32),
            "--child" => child = args.next(),
            "--budget" => budget_bytes = args.next().and_then(|v| v.parse().ok()),
            other => {
                opts.log_size = other.parse().unwrap_or_else(|_| {
                    panic!("bad argument {other:?}: expected k, --synthetic, --jobs N or --cpu")
                })
            }
        }
    }
    if quick() && child.is_none() {
        opts.kind = Kind::Mimc;
        opts.log_size = 13;
        opts.jobs = 8;
        opts.cpu = true;
    }
    opts.jobs = opts.jobs.max(2);
    match child.as_deref() {
        Some(mode) => run_child(mode, &opts, budget_bytes),
        None => parent(&opts),
    }
}

/// What a child reports (one line).
#[derive(Clone, Copy, Debug, Default)]
struct Report {
    wall_s: f64,
    synthesis_s: f64,
    device_s: f64,
    peak_charged: u64,
    vm_hwm: u64,
    failed: u64,
}

impl Report {
    fn line(&self) -> String {
        format!(
            "ENGINE_BENCH_RESULT {} {} {} {} {} {}",
            self.wall_s,
            self.synthesis_s,
            self.device_s,
            self.peak_charged,
            self.vm_hwm,
            self.failed
        )
    }

    fn parse(out: &str) -> Option<Report> {
        let line = out
            .lines()
            .find(|l| l.starts_with("ENGINE_BENCH_RESULT "))?;
        let f: Vec<&str> = line.split_whitespace().skip(1).collect();
        Some(Report {
            wall_s: f.first()?.parse().ok()?,
            synthesis_s: f.get(1)?.parse().ok()?,
            device_s: f.get(2)?.parse().ok()?,
            peak_charged: f.get(3)?.parse().ok()?,
            vm_hwm: f.get(4)?.parse().ok()?,
            failed: f.get(5)?.parse().ok()?,
        })
    }
}

fn parent(opts: &Opts) {
    let (name, what) = describe(opts);
    // Parameters once (in this process), so the children only read them.
    let t = Instant::now();
    let path = params_file(opts, &name);
    println!(
        "engine bench: {what}, {} proofs; parameters {} ({:.1} s; INSECURE bench parameters, proofs not self-checked)",
        opts.jobs,
        path.display(),
        t.elapsed().as_secs_f64()
    );
    let exe = std::env::current_exe().expect("own path");
    let run = |mode: &str, budget: Option<u64>| -> Report {
        let mut cmd = Command::new(&exe);
        cmd.args(opts.args()).args(["--child", mode]);
        if let Some(b) = budget {
            cmd.args(["--budget", &b.to_string()]);
        }
        let out = cmd.output().expect("run a child");
        let stdout = String::from_utf8_lossy(&out.stdout);
        print!("{stdout}");
        eprint!("{}", String::from_utf8_lossy(&out.stderr));
        Report::parse(&stdout).unwrap_or_else(|| panic!("child {mode} reported nothing"))
    };
    let seq = run("sequential", None);
    let eng = run("engine", None);
    let half_budget = eng.peak_charged / 2;
    let half = run("engine", Some(half_budget));

    let n = opts.jobs as f64;
    let per_proof_seq = seq.wall_s / n;
    let ts = seq.synthesis_s / n;
    let tg = seq.device_s / n;
    let bound = ts.max(tg);
    let thr = n / eng.wall_s;
    let thr_half = n / half.wall_s;
    let target = 0.9 / bound;
    println!("\n| run | proofs/s | s/proof | charged peak | measured peak (VmHWM) | failed |");
    println!("|---|---|---|---|---|---|");
    for (label, r) in [
        ("sequential Prover", &seq),
        ("engine, unconstrained", &eng),
        ("engine, half the charged peak", &half),
    ] {
        println!(
            "| {label} | {:.3} | {:.3} | {} | {} | {} |",
            n / r.wall_s,
            r.wall_s / n,
            memory_budget::format_bytes(r.peak_charged),
            memory_budget::format_bytes(r.vm_hwm),
            r.failed
        );
    }
    println!(
        "sequential: synthesis {:.3} s + device {:.3} s per proof (sum {:.3}, wall {per_proof_seq:.3}); pipelined bound 1/max = {:.3} proofs/s",
        ts,
        tg,
        ts + tg,
        1.0 / bound
    );
    let size = format!("{what}, {} proofs", opts.jobs);
    BenchLine {
        what: "engine stream throughput",
        size: size.clone(),
        ours: thr,
        peer: Some(1.0 / per_proof_seq),
        unit: "proofs/s",
        lower_is_better: false,
        target: Some(">= 0.9 / max(synthesis, device) per proof"),
        pass: Some(thr >= target),
    }
    .emit();
    BenchLine {
        what: "engine stream throughput, budget 50% of charged peak",
        size: format!(
            "{size}, budget {}",
            memory_budget::format_bytes(half_budget)
        ),
        ours: thr_half,
        peer: Some(thr),
        unit: "proofs/s",
        lower_is_better: false,
        target: Some("completes with no refusal"),
        pass: Some(half.failed == 0),
    }
    .emit();
    BenchLine {
        what: "engine charged peak / measured peak (VmHWM)",
        size,
        ours: eng.peak_charged as f64 / eng.vm_hwm.max(1) as f64,
        peer: Some(half.peak_charged as f64 / half.vm_hwm.max(1) as f64),
        unit: "ratio (unconstrained; half budget as peer)",
        lower_is_better: false,
        target: None,
        pass: None,
    }
    .emit();
}

fn describe(opts: &Opts) -> (String, String) {
    match opts.kind {
        Kind::Mimc => (
            format!("mimc-k{}", opts.log_size),
            format!("mimc chain 2^{}", opts.log_size),
        ),
        Kind::Sha256 => (
            format!("sha256-k{}", opts.log_size),
            format!("sha-256 about 2^{} constraints", opts.log_size),
        ),
        Kind::Synthetic => (
            format!("synthetic-k{}", opts.log_size),
            format!("synthetic keyed chain 2^{}", opts.log_size),
        ),
    }
}

/// The circuit of `opts` as a bellman circuit of one type.
#[derive(Clone)]
enum AnyCircuit {
    Mimc(MimcChain),
    Sha(Sha256Circuit),
    Keyed(KeyedChain),
}

impl Circuit<Scalar> for AnyCircuit {
    fn synthesize<CS: bellman::ConstraintSystem<Scalar>>(
        self,
        cs: &mut CS,
    ) -> Result<(), bellman::SynthesisError> {
        match self {
            AnyCircuit::Mimc(c) => c.synthesize(cs),
            AnyCircuit::Sha(c) => c.synthesize(cs),
            AnyCircuit::Keyed(c) => c.synthesize(cs),
        }
    }
}

fn circuit(opts: &Opts) -> AnyCircuit {
    match opts.kind {
        // Two constraints per round.
        Kind::Mimc => AnyCircuit::Mimc(MimcChain::new(
            ((1usize << opts.log_size) / 2).saturating_sub(8).max(1),
            CIRCUIT_SEED,
        )),
        Kind::Synthetic => AnyCircuit::Keyed(KeyedChain {
            n_constraints: (1usize << opts.log_size) - 1,
            n_keys: 16,
            seed: CIRCUIT_SEED,
        }),
        Kind::Sha256 => {
            // The most blocks whose rows fit in 2^k (rows grow by a fixed amount per block).
            let rows = |n: usize| {
                pce_cache::Pce::record(Sha256Circuit::with_blocks(n, CIRCUIT_SEED))
                    .expect("record")
                    .shape()
                    .n_rows
            };
            let (r1, r2) = (rows(1), rows(2));
            let target = 1u64 << opts.log_size;
            let n_blocks = (target.saturating_sub(r1) / (r2 - r1) + 1) as usize;
            AnyCircuit::Sha(Sha256Circuit::with_blocks(n_blocks, CIRCUIT_SEED))
        }
    }
}

fn bench_dir() -> PathBuf {
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| PathBuf::from("target"), PathBuf::from);
    let dir = target.join("pinion-bench");
    std::fs::create_dir_all(&dir).expect("bench dir");
    dir
}

/// The parameter file (made once).
fn params_file(opts: &Opts, name: &str) -> PathBuf {
    let path = bench_dir().join(format!("engine-{name}-{PARAMS_SEED:x}.params"));
    if !path.exists() {
        let pce = pce_cache::Pce::record(circuit(opts)).expect("record");
        let params = insecure_bench_parameters(ParamShape::of(&pce), PARAMS_SEED);
        let tmp = path.with_extension("tmp");
        let mut f = std::io::BufWriter::new(std::fs::File::create(&tmp).expect("create"));
        params.write(&mut f).expect("write params");
        drop(f);
        std::fs::rename(&tmp, &path).expect("rename");
    }
    path
}

fn vm_hwm() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

fn run_child(mode: &str, opts: &Opts, budget_bytes: Option<u64>) {
    let (name, _) = describe(opts);
    let path = params_file(opts, &name);
    let budget = match budget_bytes {
        Some(b) => Budget::fixed(b),
        None => Budget::detect(&DetectOptions::default()).expect("detect the machine's budget"),
    };
    let gpu = if opts.cpu { None } else { Gpu::open(0).ok() };
    let backend: Arc<dyn ProverBackend> = match &gpu {
        Some(g) => Arc::new(GpuBackend::with_gpu(g.clone(), budget.clone())),
        None => Arc::new(CpuBackend::new(budget.clone())),
    };
    let c = circuit(opts);
    let pces = PceCache::new(budget.clone(), CacheConfig::in_memory()).expect("pce cache");
    let pce = pces
        .get_or_extract(&CircuitKey::new(name.clone()), || c.clone())
        .expect("record the pce");
    let store = SrsStore::new(
        budget.clone(),
        StoreConfig {
            reserve_timeout: Some(engine::KEY_LOAD_WAIT),
            ..StoreConfig::default()
        },
    );
    let spec = SrsSpec::new(name.clone(), &path);
    let mut rng = rand::rngs::StdRng::seed_from_u64(CIRCUIT_SEED);
    let rs: Vec<Randomness> = (0..opts.jobs)
        .map(|_| Randomness::random(&mut rng))
        .collect();
    budget.reset_peaks();
    let mut report = Report::default();
    match mode {
        "sequential" => {
            let key = ProvingKey::from_store(&store, spec).expect("open the key");
            let prover = Prover::with_shared_backend(
                Arc::new(key),
                budget.clone(),
                ProverConfig {
                    self_check: SelfCheck::Never,
                    ..ProverConfig::default()
                },
                backend,
            );
            // A first proof sets up kernels, twiddles and the key's tier; not timed.
            prover
                .prove(Synthesis::Pce(&pce), c.clone(), rs[0])
                .expect("warm-up proof");
            let start = Instant::now();
            for r in &rs {
                let out = prover
                    .prove(Synthesis::Pce(&pce), c.clone(), *r)
                    .expect("proof");
                let t = out.timings;
                report.synthesis_s +=
                    (t.synthesis + t.abc_evaluation + t.witness_check).as_secs_f64();
                report.device_s += (t.h + t.msm_wall).as_secs_f64();
            }
            report.wall_s = start.elapsed().as_secs_f64();
        }
        "engine" => {
            let device = match gpu {
                Some(g) => DeviceConfig::Gpu(g),
                None => DeviceConfig::Backend {
                    name: "cpu".into(),
                    backend,
                },
            };
            let mut config = EngineConfig::new(budget.clone(), vec![device]);
            config.store = Some(store);
            config.self_check = false;
            let engine = Engine::start(config).expect("engine");
            engine
                .register(CircuitSpec {
                    id: name.clone(),
                    params: spec,
                    pce: PceSource::Held(pce.clone()),
                })
                .expect("register");
            let job = |r: Randomness| JobSpec {
                circuit: name.clone(),
                partitions: vec![Partition::circuit(c.clone())],
                priority: engine::Priority::Normal,
                randomness: Some(vec![r]),
            };
            // Warm-up as above.
            let w = engine.submit(job(rs[0])).expect("submit");
            let o = engine.await_job(w, None).expect("await");
            assert_eq!(o.status, JobStatus::Completed, "warm-up: {:?}", o.status);
            let start = Instant::now();
            let ids: Vec<_> = rs
                .iter()
                .map(|r| engine.submit(job(*r)).expect("submit"))
                .collect();
            for id in ids {
                let o = engine
                    .await_job(id, Some(Duration::from_secs(3600)))
                    .expect("await");
                match o.status {
                    JobStatus::Completed => {
                        report.synthesis_s += o.timings.synthesis.as_secs_f64();
                        report.device_s += o.timings.gpu.as_secs_f64();
                    }
                    other => {
                        eprintln!("{}: {other:?}", o.id);
                        report.failed += 1;
                    }
                }
            }
            report.wall_s = start.elapsed().as_secs_f64();
            engine.shutdown(engine::Shutdown::Graceful);
        }
        other => panic!("unknown child mode {other:?}"),
    }
    report.peak_charged = budget.snapshot().peak_used_bytes;
    report.vm_hwm = vm_hwm();
    println!("{}", report.line());
}
