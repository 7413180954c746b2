//! PoRep C2 benchmark: one partition of Filecoin's PoRep circuit at a real sector size,
//! **TIMING ONLY** (its parameters and witness are synthetic: no proof it makes verifies).
//!
//! `porep_bench [--sector-size 32GiB|512MiB|8MiB|2KiB] [--gpu] [--gpu-wait MODE]
//!  [--vram-pool POLICY] [--feeders high|normal] [--reps N] [--engine-partitions N] [--engine-jobs J] [--no-prewarm] [--host-abc]
//!  [--max-synthesis K[,K...]] [--side-by-side] [--budget-gib G]
//!  [--pce FILE.pce | --pce-out FILE.pce] [--record-only | --witness-only] [--seed N] [--json]`
//!
//! 1. **Circuit**: filecoin-proofs' blank partition circuit of the sector size's latest
//!    `StackedDrg*V1_1` proof type, recorded into a PCE by pinion-filecoin's recording
//!    constraint system (`job::record`, what `job::prove` and the daemon do), or loaded
//!    from `--pce` (a pce-cache file `--pce-out` wrote; `--record-only` stops after
//!    writing it, so a 10-minute device call can record and the next one prove;
//!    `--witness-only` stops after timing `--reps` witness syntheses of partition 0, on
//!    the rayon pool's threads: `RAYON_NUM_THREADS=1` gives the one-thread figure).
//! 2. **Parameters**: made in memory with the PCE's exact shape (`ic` = inputs, `h` =
//!    domain − 1, `l` = aux, `a`/`b` from the densities), each point one of a pool of
//!    random multiples of the generators (2^16 in G1, 2^12 in G2) tiled in a scrambled
//!    order; an srs-store entry (`SrsStore::insert_in_memory`) on the GPU (`--gpu`) or in
//!    host memory, charged to the budget as a load of the same file would be.
//! 3. **Witness**: witness-only synthesis (pinion-filecoin's witness constraint system) of
//!    filecoin-proofs' partition circuit fed a synthetic vanilla proof of the right shape
//!    (`porep::synthetic_job`: random leaves, columns and paths), so the aux values mix
//!    bits and field elements as a real proof's do; the equalities tying its roots
//!    together fail, so the prover's witness check is told to let it through
//!    (`groth16_prover::timing_only`, this example only).
//! 4. **Measure**: `--reps` proofs of partition 0 on the chosen backend (median, with the
//!    prover's per-step times), then (`--engine-partitions N`) one job of N partitions
//!    (`--engine-jobs J`: J such jobs one after another on one engine, as a daemon runs
//!    them; each prints its timeline, one line a partition) through `engine::Engine`
//!    (what `pinion serve` runs; its staging pinned at registration unless
//!    `--no-prewarm`; a, b and c evaluated on the device from the PCE in VRAM unless
//!    `--host-abc`), each synthesized by the engine
//!    as the daemon does (`--max-synthesis`: the engine's ceiling on partitions
//!    synthesizing at once, default its own, the number of cores; a list runs the job once
//!    per value, so one recording compares them; the partitions are synthesized alone,
//!    as the daemon's are, unless `--side-by-side`); memory: charged baseline (SRS + PCE),
//!    per-partition working set, peak charged vs `VmHWM`, and the cgroup's `memory.current`/`memory.peak`.
//!
//! Everything large is charged to one budget (`--budget-gib`, default 90% of
//! MemAvailable). `--json` ends the output with one line of JSON; `PINION_BENCH` lines
//! carry the median proof time and the engine's proofs/s. Without any argument (as
//! `bundle/run.sh bench` runs it) it is a smoke run: 2 KiB, one rep, the GPU when one opens.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bls12_381::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use bls_repr::{G1AffineRepr, G2AffineRepr};
use engine::{
    CircuitSpec, DeviceConfig, Engine, EngineConfig, JobSpec, JobStatus, Partition, PartitionTrace,
    PceSource, Priority, Shutdown,
};
use filecoin_proofs_api::RegisteredSealProof;
use gpu_device::{FeederPriority, Gpu, GpuConfig, VramPool, WaitMode};
use groth16_prover::testing::ParamShape;
use groth16_prover::{
    CpuBackend, GpuBackend, ProofOutput, ProofTimings, Prover, ProverBackend, ProverConfig,
    ProverError, ProvingKey, Randomness, SelfCheck,
};
use memory_budget::{Budget, Category, DetectOptions, Reservation, SizeSpec};
use pce_cache::{CacheConfig, CircuitKey, MatrixId, Pce, PceCache, PceHandle, Shape, Witness};
use pinion_bench::BenchLine;
use pinion_filecoin::{porep, PartitionJob};
use srs_store::{
    Destination, InMemoryFill, LoadedParams, Section, SrsSpec, SrsStore, StoreConfig,
    VerifyingKeyRepr,
};

const USAGE: &str = "usage: porep_bench [--sector-size 32GiB|512MiB|8MiB|2KiB] [--gpu] \
[--gpu-wait blocking|yield|spin] [--vram-pool driver|keep|keep-no-waits|no-waits] [--feeders high|normal] [--reps N] [--engine-partitions N] [--engine-jobs J] [--no-prewarm] [--host-abc] [--max-synthesis K[,K...]] [--side-by-side] [--budget-gib G] \
[--pce FILE.pce | --pce-out FILE.pce] [--record-only | --witness-only] [--seed N] [--json]";

const GIB: f64 = (1u64 << 30) as f64;
const MIB: f64 = (1u64 << 20) as f64;
/// Pool sizes of the timing-only parameters' points.
const POOL_G1: usize = 1 << 16;
const POOL_G2: usize = 1 << 12;

type Error = Box<dyn std::error::Error>;

#[derive(Debug)]
struct Args {
    proof: RegisteredSealProof,
    size_name: &'static str,
    gpu: bool,
    /// How host threads wait for the device (gpu-device's default: blocking).
    gpu_wait: WaitMode,
    vram_pool: VramPool,
    feeders: FeederPriority,
    engine_jobs: usize,
    /// The engine pins no staging at registration (`EngineConfig::prewarm_staging`).
    no_prewarm: bool,
    host_abc: bool,
    reps: usize,
    engine_partitions: usize,
    /// One engine run per entry (`None`: the engine's default ceiling).
    max_synthesis: Vec<Option<usize>>,
    /// Engine partitions not marked `synthesized_alone`.
    side_by_side: bool,
    budget_gib: Option<f64>,
    pce_in: Option<PathBuf>,
    pce_out: Option<PathBuf>,
    record_only: bool,
    witness_only: bool,
    seed: u64,
    json: bool,
}

fn parse_args(mut it: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut a = Args {
        proof: RegisteredSealProof::StackedDrg32GiBV1_1,
        size_name: "32GiB",
        gpu: false,
        gpu_wait: WaitMode::default(),
        vram_pool: VramPool::default(),
        feeders: FeederPriority::default(),
        engine_jobs: 1,
        no_prewarm: false,
        host_abc: false,
        reps: 3,
        engine_partitions: 0,
        max_synthesis: vec![None],
        side_by_side: false,
        budget_gib: None,
        pce_in: None,
        pce_out: None,
        record_only: false,
        witness_only: false,
        seed: 0x005e_ed17,
        json: false,
    };
    fn value(flag: &str, v: Option<String>) -> Result<String, String> {
        v.ok_or_else(|| format!("{flag} needs a value"))
    }
    fn number<T: std::str::FromStr>(flag: &str, v: Option<String>) -> Result<T, String> {
        let v = value(flag, v)?;
        v.parse()
            .map_err(|_| format!("{flag}: {v:?} is not a valid number"))
    }
    fn pce_path(flag: &str, v: Option<String>) -> Result<PathBuf, String> {
        let p = PathBuf::from(value(flag, v)?);
        let stem_ok = p.file_stem().and_then(|s| s.to_str()).is_some_and(|s| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        });
        if p.extension().and_then(|e| e.to_str()) != Some("pce") || !stem_ok {
            return Err(format!(
                "{flag}: {} must be a file name <[A-Za-z0-9._-]+>.pce (pce-cache's naming)",
                p.display()
            ));
        }
        Ok(p)
    }
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--sector-size" => {
                let v = value(&flag, it.next())?;
                (a.proof, a.size_name) = match v.to_ascii_lowercase().as_str() {
                    "32gib" => (RegisteredSealProof::StackedDrg32GiBV1_1, "32GiB"),
                    "512mib" => (RegisteredSealProof::StackedDrg512MiBV1_1, "512MiB"),
                    "8mib" => (RegisteredSealProof::StackedDrg8MiBV1_1, "8MiB"),
                    "2kib" => (RegisteredSealProof::StackedDrg2KiBV1_1, "2KiB"),
                    _ => {
                        return Err(format!(
                            "--sector-size: {v:?} is not 32GiB, 512MiB, 8MiB or 2KiB"
                        ))
                    }
                }
            }
            "--gpu" => a.gpu = true,
            "--gpu-wait" => {
                let v = value(&flag, it.next())?;
                a.gpu_wait = match v.as_str() {
                    "blocking" => WaitMode::Blocking,
                    "yield" => WaitMode::Yield,
                    "spin" => WaitMode::Spin,
                    _ => return Err(format!("--gpu-wait: {v:?} is not blocking, yield or spin")),
                };
            }
            "--vram-pool" => {
                let v = value(&flag, it.next())?;
                a.vram_pool = match v.as_str() {
                    "driver" => VramPool::DRIVER,
                    "keep" => VramPool {
                        keep_bytes: None,
                        cross_stream_waits: true,
                    },
                    "keep-no-waits" => VramPool {
                        keep_bytes: None,
                        cross_stream_waits: false,
                    },
                    "no-waits" => VramPool {
                        keep_bytes: Some(0),
                        cross_stream_waits: false,
                    },
                    _ => {
                        return Err(format!(
                            "--vram-pool: {v:?} is not driver, keep, keep-no-waits or no-waits"
                        ))
                    }
                };
            }
            "--feeders" => {
                let v = value(&flag, it.next())?;
                a.feeders = match v.as_str() {
                    "high" => FeederPriority::High,
                    "normal" => FeederPriority::Normal,
                    _ => return Err(format!("--feeders: {v:?} is not high or normal")),
                };
            }
            "--reps" => a.reps = number(&flag, it.next())?,
            "--engine-partitions" => a.engine_partitions = number(&flag, it.next())?,
            "--engine-jobs" => a.engine_jobs = number(&flag, it.next())?,
            "--no-prewarm" => a.no_prewarm = true,
            "--host-abc" => a.host_abc = true,
            "--side-by-side" => a.side_by_side = true,
            "--max-synthesis" => {
                let v = value(&flag, it.next())?;
                a.max_synthesis = v
                    .split(',')
                    .map(|k| match k.parse::<usize>() {
                        Ok(k) if k > 0 => Ok(Some(k)),
                        _ => Err(format!("--max-synthesis: {k:?} is not a positive number")),
                    })
                    .collect::<Result<_, _>>()?;
            }
            "--budget-gib" => {
                let g: f64 = number(&flag, it.next())?;
                if !(g.is_finite() && g > 0.0) {
                    return Err(format!("--budget-gib: {g} is not a positive size"));
                }
                a.budget_gib = Some(g);
            }
            "--pce" => a.pce_in = Some(pce_path(&flag, it.next())?),
            "--pce-out" => a.pce_out = Some(pce_path(&flag, it.next())?),
            "--record-only" => a.record_only = true,
            "--witness-only" => a.witness_only = true,
            "--seed" => a.seed = number(&flag, it.next())?,
            "--json" => a.json = true,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if a.reps == 0 {
        return Err("--reps must be at least 1".into());
    }
    if a.pce_in.is_some() && a.pce_out.is_some() {
        return Err("--pce and --pce-out exclude each other".into());
    }
    if a.record_only && a.witness_only {
        return Err("--record-only and --witness-only exclude each other".into());
    }
    if a.record_only && a.pce_out.is_none() {
        return Err("--record-only needs --pce-out".into());
    }
    Ok(a)
}

fn main() {
    memory_budget::tune_allocator();
    let mut argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.is_empty() {
        // `bundle/run.sh bench` runs every bench program without arguments: a smoke run
        // that finishes in a minute, not a 32 GiB one.
        println!(
            "porep_bench: no arguments: smoke run (--sector-size 2KiB --reps 1, --gpu when \
             device 0 opens); pass --sector-size 32GiB ... for the real measurement"
        );
        argv = ["--sector-size", "2KiB", "--reps", "1"]
            .map(String::from)
            .to_vec();
        if Gpu::open(0).is_ok() {
            argv.push("--gpu".into());
        }
    }
    let args = match parse_args(argv.into_iter()) {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("porep_bench: {e}");
            }
            eprintln!("{USAGE}");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(&args) {
        eprintln!("porep_bench: error: {e}");
        let mut source = e.source();
        while let Some(s) = source {
            eprintln!("  caused by: {s}");
            source = s.source();
        }
        std::process::exit(1);
    }
}

/// The bench's PCE: recorded here (with its charge) or loaded through a pce-cache.
enum PceHeld {
    Recorded(Box<Pce>, Reservation),
    Cached(PceHandle),
}

impl PceHeld {
    fn pce(&self) -> &Pce {
        match self {
            PceHeld::Recorded(p, _) => p,
            PceHeld::Cached(h) => h,
        }
    }
    fn charged(&self) -> u64 {
        match self {
            PceHeld::Recorded(_, r) => r.bytes(),
            PceHeld::Cached(h) => h.charged_bytes(),
        }
    }
}

/// A PoRep partition as the engine proves it (what the daemon's Filecoin partitions do):
/// witness-only synthesis of filecoin-proofs' circuit into the admitted working set, moved
/// into the proof ([`Partition::witness`]). No public-input check: synthetic.
struct EnginePartition {
    job: Arc<dyn PartitionJob>,
    k: usize,
    shape: Shape,
}

impl EnginePartition {
    fn witness(&self) -> Result<Witness, ProverError> {
        self.job
            .witness(self.k, self.shape)
            .map_err(ProverError::from)
    }
}

fn run(args: &Args) -> Result<(), Error> {
    let mut report = serde_json::Map::new();
    let mut put = |k: &str, v: serde_json::Value| {
        report.insert(k.to_string(), v);
    };
    println!("================================================================");
    println!(" porep_bench: TIMING ONLY. Synthetic parameters and witness:");
    println!(" the proofs it makes DO NOT VERIFY and are never written anywhere.");
    println!("================================================================");
    groth16_prover::timing_only::skip_witness_check_for_timing_only();
    put("sector_size", args.size_name.into());
    put("backend", if args.gpu { "gpu" } else { "cpu" }.into());
    put("timing_only", true.into());

    let budget = make_budget(args.budget_gib)?;
    println!(
        "budget: {:.2} GiB ({}); {} rayon threads",
        budget.total_bytes() as f64 / GIB,
        if args.budget_gib.is_some() {
            "--budget-gib"
        } else {
            "90% of MemAvailable"
        },
        rayon_threads()
    );
    put("budget_bytes", budget.total_bytes().into());
    let gpu = if args.gpu {
        let config = GpuConfig {
            wait: args.gpu_wait,
            pool: args.vram_pool,
            feeders_first: args.feeders,
            ..GpuConfig::default()
        };
        let g =
            Gpu::open_with(0, config).map_err(|e| format!("--gpu: device 0 does not open: {e}"))?;
        println!(
            "gpu: {:?}, host threads wait: {:?}, vram pool: {:?}, feeder streams: {:?}",
            g.info(),
            args.gpu_wait,
            args.vram_pool,
            args.feeders
        );
        Some(g)
    } else {
        None
    };

    // 1. The circuit.
    let job: Arc<dyn PartitionJob> = Arc::from(porep::synthetic_job(args.proof, args.seed)?);
    let id = job.circuit_id().clone();
    println!(
        "circuit: {id} ({:?}), {} partitions; parameter file it would need: {}",
        args.proof,
        job.n_partitions(),
        id.params_file_name()
    );
    let t = Instant::now();
    let pce = match &args.pce_in {
        Some(path) => {
            let h = cached_pce(path, &budget)?;
            println!(
                "pce: loaded {} in {:.1} s",
                path.display(),
                t.elapsed().as_secs_f64()
            );
            put("pce_load_s", t.elapsed().as_secs_f64().into());
            PceHeld::Cached(h)
        }
        None => {
            let (p, charge) = pinion_filecoin::job::record(job.as_ref(), &budget)?;
            let secs = t.elapsed().as_secs_f64();
            println!("pce: recorded in {secs:.1} s (VmHWM {})", gib(vm_hwm()));
            put("record_s", secs.into());
            put("record_vm_hwm_bytes", vm_hwm().into());
            PceHeld::Recorded(Box::new(p), charge)
        }
    };
    let shape = pce.pce().shape();
    let nnz = MatrixId::ALL.map(|m| pce.pce().n_nonzeros_of(m));
    println!(
        "  {} constraints, {} rows (domain 2^{}), {} inputs, {} aux",
        shape.n_constraints,
        shape.n_rows,
        (shape.n_rows as usize).next_power_of_two().trailing_zeros(),
        shape.n_inputs,
        shape.n_aux
    );
    println!(
        "  nonzeros: a {} b {} c {}; pce {} resident ({} matrices, {:.2} B/nonzero), charged {}",
        nnz[0],
        nnz[1],
        nnz[2],
        gib(pce.pce().resident_bytes()),
        gib(pce.pce().matrix_bytes()),
        pce.pce().bytes_per_nonzero(),
        gib(pce.charged())
    );
    // Rows of 255 terms or more ("long", listed apart in the PCE): what the device's
    // mat-vec sums a warp a row.
    for m in MatrixId::ALL {
        let p = pce.pce().matrix_parts(m);
        let mut lens: Vec<u64> = p.long_len.to_vec();
        lens.sort_unstable();
        println!(
            "  {m:?}: {} long rows ({} terms), longest {:?}, {} byte codes",
            lens.len(),
            lens.iter().sum::<u64>(),
            &lens[lens.len().saturating_sub(5)..],
            p.code_bytes
        );
    }
    put("constraints", shape.n_constraints.into());
    put("rows", shape.n_rows.into());
    put("inputs", shape.n_inputs.into());
    put("aux", shape.n_aux.into());
    put("nonzeros_abc", serde_json::json!(nnz));
    put("pce_bytes", pce.pce().resident_bytes().into());
    if let Some(out) = &args.pce_out {
        let t = Instant::now();
        pce.pce().write_to(out)?;
        println!(
            "pce: written to {} in {:.1} s",
            out.display(),
            t.elapsed().as_secs_f64()
        );
    }
    if args.record_only {
        println!("--record-only: done (VmHWM {})", gib(vm_hwm()));
        put("vm_hwm_bytes", vm_hwm().into());
        return finish(args, report);
    }
    if args.witness_only {
        let mut times = Vec::with_capacity(args.reps);
        for rep in 0..args.reps {
            let _charge = budget.try_reserve(
                32 * shape.n_columns(),
                Category::WorkingSet,
                "porep bench witness",
            )?;
            let t = Instant::now();
            let w = job.witness(0, shape)?;
            times.push(t.elapsed());
            println!(
                "witness rep {rep}: {:.2} s on {} rayon threads ({} aux values)",
                t.elapsed().as_secs_f64(),
                rayon_threads(),
                w.aux.len()
            );
        }
        let m = median(times).as_secs_f64();
        println!(
            "--witness-only: median {m:.2} s on {} rayon threads (VmHWM {})",
            rayon_threads(),
            gib(vm_hwm())
        );
        put("witness_s", m.into());
        put("rayon_threads", rayon_threads().into());
        put("vm_hwm_bytes", vm_hwm().into());
        return finish(args, report);
    }
    // The engine reads its PCE through a pce-cache: a recorded one is written for it.
    let pce = match (pce, args.engine_partitions > 0) {
        (PceHeld::Recorded(p, charge), true) => {
            let (path, temporary) = match &args.pce_out {
                Some(path) => (path.clone(), false),
                None => {
                    let path = std::env::temp_dir().join(format!(
                        "porep-bench-{}-{}.pce",
                        args.size_name,
                        std::process::id()
                    ));
                    let t = Instant::now();
                    p.write_to(&path)?;
                    println!(
                        "pce: written to {} for the engine in {:.1} s",
                        path.display(),
                        t.elapsed().as_secs_f64()
                    );
                    (path, true)
                }
            };
            drop((p, charge));
            let handle = cached_pce(&path, &budget);
            if temporary {
                // Mapped in place: the mapping outlives the name.
                let _ = std::fs::remove_file(&path);
            }
            PceHeld::Cached(handle?)
        }
        (held, _) => held,
    };

    // 2. Timing-only parameters.
    let ps = ParamShape::of(pce.pce());
    let t = Instant::now();
    let (pool_g1, pool_g2) = point_pools(args.seed);
    let pool_s = t.elapsed().as_secs_f64();
    let counts = [ps.n_h, ps.n_l, ps.n_a, ps.n_b, ps.n_b];
    let vk = VerifyingKeyRepr {
        alpha_g1: pool_g1[1],
        beta_g1: pool_g1[2],
        beta_g2: pool_g2[1],
        gamma_g2: pool_g2[2],
        delta_g1: pool_g1[3],
        delta_g2: pool_g2[3],
        ic: (0..ps.n_inputs)
            .map(|i| pool_g1[(i * 7 + 11) % POOL_G1])
            .collect(),
    };
    let g1 = |section: Section, first: usize, out: &mut [G1AffineRepr]| {
        let salt = section as u64;
        for (i, p) in out.iter_mut().enumerate() {
            *p = pool_g1[scramble(first + i, salt, POOL_G1)];
        }
    };
    let g2 = |first: usize, out: &mut [G2AffineRepr]| {
        for (i, p) in out.iter_mut().enumerate() {
            *p = pool_g2[scramble(first + i, 99, POOL_G2)];
        }
    };
    let destination = match &gpu {
        Some(g) => Destination::Device(g.clone()),
        None => Destination::Host,
    };
    let t = Instant::now();
    let params = LoadedParams::in_memory(
        vk,
        counts,
        destination,
        &budget,
        &InMemoryFill { g1: &g1, g2: &g2 },
    )?;
    let made_s = t.elapsed().as_secs_f64();
    let param_bytes = params.layout().loaded_bulk_bytes();
    println!(
        "parameters: TIMING ONLY (points tiled from {POOL_G1} G1 / {POOL_G2} G2 random multiples \
         of the generators; proofs with them do not verify): h {} l {} a {} b {}; {} in {} memory, \
         made in {made_s:.1} s (pools {pool_s:.2} s); host charged {}, vram {}",
        ps.n_h,
        ps.n_l,
        ps.n_a,
        ps.n_b,
        gib(param_bytes),
        params.destination().name(),
        gib(params.charged_bytes()),
        gib(params.device_bytes())
    );
    put("param_bytes", param_bytes.into());
    put("param_make_s", made_s.into());
    let store = SrsStore::new(
        budget.clone(),
        StoreConfig {
            reserve_timeout: Some(engine::KEY_LOAD_WAIT),
            ..StoreConfig::default()
        },
    );
    let spec: SrsSpec =
        store.insert_in_memory(format!("porep-{}-timing-only", args.size_name), params)?;
    let baseline = budget.used_bytes();
    let snap = budget.snapshot();
    println!(
        "baseline charged (srs + pce + backend tables): {} (srs {}, pce {})",
        gib(baseline),
        gib(snap.used_by_category[Category::Srs.index()]),
        gib(snap.used_by_category[Category::Pce.index()])
    );
    put("baseline_charged_bytes", baseline.into());

    // 3. The synthetic witness (partition 0), a copy of it moved into each rep's proof.
    let t = Instant::now();
    let witness = {
        let _charge = budget.try_reserve(
            32 * shape.n_columns(),
            Category::WorkingSet,
            "porep bench witness",
        )?;
        job.witness(0, shape)?
    };
    let witness_s = t.elapsed().as_secs_f64();
    let (zero, one, other) = fractions(&witness.aux);
    println!(
        "witness: synthetic (random vanilla proof), synthesized in {witness_s:.2} s; aux {} values: \
         0 {:.2}%, 1 {:.2}%, other {:.2}%",
        witness.aux.len(),
        zero * 100.0,
        one * 100.0,
        other * 100.0
    );
    put("witness_s", witness_s.into());
    put(
        "aux_fraction_zero_one_other",
        serde_json::json!([zero, one, other]),
    );
    // Kept charged while held for the reps.
    let _witness_charge = budget.try_reserve(
        32 * shape.n_columns(),
        Category::WorkingSet,
        "porep bench witness (held)",
    )?;

    // 4a. Proofs of partition 0.
    let key = Arc::new(ProvingKey::from_store(&store, spec.clone())?);
    let backend: Box<dyn ProverBackend> = match &gpu {
        Some(g) => Box::new(
            GpuBackend::with_gpu(g.clone(), budget.clone()).with_device_abc(!args.host_abc),
        ),
        None => Box::new(CpuBackend::new(budget.clone())),
    };
    let prover = Prover::with_backend(
        Arc::clone(&key),
        budget.clone(),
        ProverConfig {
            self_check: SelfCheck::Never,
            ..ProverConfig::default()
        },
        backend,
    );
    let mut rng = rand::rng();
    let mut runs: Vec<ProofOutput> = Vec::new();
    budget.reset_peaks();
    for rep in 0..args.reps {
        // As the engine does: the working set first, then the witness (a copy of the
        // held one) moved into the proof.
        let admitted = budget.try_reserve(
            prover.working_set_bytes(pce.pce())?,
            Category::WorkingSet,
            "porep bench proof",
        )?;
        let out = prover.prove_witness(
            pce.pce(),
            witness.clone(),
            Some(admitted),
            Randomness::random(&mut rng),
        )?;
        println!(
            "rep {rep}: {:.3} s (h {:.3}, msms {:.3}), peak charged {} (TIMING ONLY, invalid proof)",
            out.timings.total.as_secs_f64(),
            out.timings.h.as_secs_f64(),
            out.timings.msm_wall.as_secs_f64(),
            gib(out.peak_charged_bytes)
        );
        runs.push(out);
    }
    let peak_direct = budget.snapshot().peak_used_bytes;
    let med = median_timings(&runs);
    breakdown(&med);
    let ws = runs.iter().map(|o| o.peak_charged_bytes).max().unwrap_or(0);
    println!(
        "median proof {:.3} s; per-partition working set charged {}; peak charged {} (baseline {}) vs VmHWM {}",
        med.total.as_secs_f64(),
        gib(ws),
        gib(peak_direct),
        gib(baseline),
        gib(vm_hwm())
    );
    if let Some(b) = runs.first().map(|o| &o.bases) {
        let where_: Vec<String> = b
            .iter()
            .map(|q| format!("{} {:?}", q.query, q.kind))
            .collect();
        println!("bases: {}", where_.join(", "));
    }
    let size = format!("{} ({} constraints)", args.size_name, shape.n_constraints);
    let backend_name = if args.gpu { "gpu" } else { "cpu" };
    BenchLine {
        what: &format!("porep c2 partition, timing only ({backend_name})"),
        size: size.clone(),
        ours: med.total.as_secs_f64() * 1e3,
        peer: None,
        unit: "ms",
        lower_is_better: true,
        target: None,
        pass: None,
    }
    .emit();
    put("proof_median_s", med.total.as_secs_f64().into());
    put("steps_median_s", timings_json(&med));
    put("working_set_bytes", ws.into());
    put("peak_charged_direct_bytes", peak_direct.into());
    put(
        "unsatisfied_proofs",
        groth16_prover::timing_only::unsatisfied_proofs().into(),
    );
    drop(prover);
    drop(witness);
    drop(_witness_charge);

    // 4b. N partitions through the engine, once per synthesis ceiling asked for; alone as
    // the daemon's are, unless told to let them synthesize side by side.
    let alone = job.parallel_witness() && !args.side_by_side;
    for &max_synthesis in args
        .max_synthesis
        .iter()
        .filter(|_| args.engine_partitions > 0)
    {
        let n = args.engine_partitions;
        let PceHeld::Cached(handle) = &pce else {
            return Err("internal: the engine needs a cached pce".into());
        };
        let device = match &gpu {
            Some(g) => DeviceConfig::Gpu(g.clone()),
            None => DeviceConfig::Backend {
                name: "cpu0".into(),
                backend: Arc::new(CpuBackend::new(budget.clone())),
            },
        };
        let mut config = EngineConfig::new(budget.clone(), vec![device]);
        config.store = Some(store.clone());
        config.self_check = false;
        config.max_synthesis = max_synthesis;
        config.prewarm_staging = !args.no_prewarm;
        config.device_abc = !args.host_abc;
        let engine = Engine::start(config)?;
        let circuit = spec.circuit_id.clone();
        let t = Instant::now();
        engine.register(CircuitSpec {
            id: circuit.clone(),
            params: spec.clone(),
            pce: PceSource::Held(handle.clone()),
        })?;
        let registration = t.elapsed().as_secs_f64();
        if args.no_prewarm {
            println!(
                "engine registration: {registration:.2} s, no staging pinned ahead (--no-prewarm)"
            );
        } else {
            println!(
                "engine registration: {registration:.2} s, of which pinning staging ahead: {} idle (budget {} charged)",
                gib(engine.prewarm_staging(&circuit)?),
                gib(budget.used_bytes())
            );
        }
        // Jobs one after another on one engine (`--engine-jobs`): the first pays for the
        // pool's pinned buffers and the device's first allocations, the next ones run as
        // a daemon's jobs after its first do. The last job's figures are the bench line's.
        let jobs = args.engine_jobs.max(1);
        let mut last = None;
        for rep in 0..jobs {
            let partitions = (0..n)
                .map(|k| {
                    let partition = EnginePartition {
                        job: Arc::clone(&job),
                        k: k % job.n_partitions(),
                        shape,
                    };
                    let p = Partition::witness(move || partition.witness());
                    if alone {
                        p.synthesized_alone()
                    } else {
                        p
                    }
                })
                .collect();
            budget.reset_peaks();
            let t = Instant::now();
            let jid = engine.submit(JobSpec {
                circuit: circuit.clone(),
                partitions,
                priority: Priority::Normal,
                randomness: None,
            })?;
            let outcome = engine.await_job(jid, None)?;
            let wall = t.elapsed().as_secs_f64();
            if outcome.status != JobStatus::Completed {
                return Err(format!("engine job: {:?}", outcome.status).into());
            }
            let peak = budget.snapshot().peak_used_bytes;
            let tm = outcome.timings;
            let ceiling = format!(
                "{}{}{}",
                engine.max_synthesis(),
                if max_synthesis.is_none() {
                    " (default)"
                } else {
                    ""
                },
                if alone {
                    ", each partition synthesized alone"
                } else {
                    ""
                }
            );
            println!(
                "engine job {}/{jobs} (max synthesis {ceiling}): {n} partitions in {wall:.2} s = {:.3} proofs/s ({:.2} s/proof); \
                 sums: synthesis {:.1} s, device {:.1} s, assembly {:.1} s; peak charged {} vs VmHWM {} \
                 (TIMING ONLY, invalid proofs)",
                rep + 1,
                n as f64 / wall,
                wall / n as f64,
                tm.synthesis.as_secs_f64(),
                tm.gpu.as_secs_f64(),
                tm.assembly.as_secs_f64(),
                gib(peak),
                gib(vm_hwm())
            );
            print_timeline(&outcome.partitions);
            last = Some((wall, peak, ceiling));
        }
        engine.shutdown(Shutdown::Graceful);
        let Some((wall, peak, ceiling)) = last else {
            return Err("internal: no engine job ran".into());
        };
        BenchLine {
            what: &format!(
                "porep c2 partitions through the engine, timing only ({})",
                if args.gpu { "gpu" } else { "cpu" }
            ),
            size: format!("{} x {n}, max synthesis {ceiling}", args.size_name),
            ours: n as f64 / wall,
            peer: None,
            unit: "proofs/s",
            lower_is_better: false,
            target: None,
            pass: None,
        }
        .emit();
        put("engine_max_synthesis", max_synthesis.into());
        put("engine_partitions", n.into());
        put("engine_wall_s", wall.into());
        put("engine_proofs_per_s", (n as f64 / wall).into());
        put("peak_charged_engine_bytes", peak.into());
    }

    if let Some(g) = &gpu {
        let vram = g.vram_budget().snapshot();
        let local = g.local_memory();
        println!(
            "vram: peak charged {} of a {} budget; kernel local memory {} B a thread, charged {}, \
             cuMemGetInfo's free fell {} when it was reserved",
            gib(vram.peak_used_bytes),
            gib(g.vram_budget().total_bytes()),
            local.per_thread_bytes,
            gib(local.charged_bytes),
            gib(local.measured_bytes)
        );
    }

    // Memory.
    let hwm = vm_hwm();
    let snap = budget.snapshot();
    let (current, peak) = cgroup_memory();
    println!(
        "memory: peak charged {} (categories: srs {}, pce {}, working set {}, pinned {}), VmHWM {}, \
         cgroup memory.current {} memory.peak {}",
        gib(snap.peak_used_bytes),
        gib(snap.peak_by_category[Category::Srs.index()]),
        gib(snap.peak_by_category[Category::Pce.index()]),
        gib(snap.peak_by_category[Category::WorkingSet.index()]),
        gib(snap.peak_by_category[Category::PinnedPool.index()]),
        gib(hwm),
        current.map_or("n/a".into(), gib),
        peak.map_or("n/a".into(), gib)
    );
    put("vm_hwm_bytes", hwm.into());
    put("cgroup_memory_current_bytes", current.into());
    put("cgroup_memory_peak_bytes", peak.into());
    put(
        "unsatisfied_proofs",
        groth16_prover::timing_only::unsatisfied_proofs().into(),
    );
    finish(args, report)
}

fn finish(args: &Args, report: serde_json::Map<String, serde_json::Value>) -> Result<(), Error> {
    if args.json {
        println!("{}", serde_json::Value::Object(report));
    }
    Ok(())
}

/// The PCE file `path` through a pce-cache over its folder (what the daemon does).
fn cached_pce(path: &Path, budget: &Budget) -> Result<PceHandle, Error> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .ok_or("pce file name")?
        .to_string();
    if !path.is_file() {
        return Err(format!("--pce: {} is not a file", path.display()).into());
    }
    let mut config = CacheConfig::with_dir(dir);
    // The section checksums were verified when it was written by this bench; the
    // structure is still validated.
    config.verify_on_load = false;
    let cache = PceCache::new(budget.clone(), config)?;
    struct Missing;
    impl bellman::Circuit<Scalar> for Missing {
        fn synthesize<CS: bellman::ConstraintSystem<Scalar>>(
            self,
            _: &mut CS,
        ) -> Result<(), bellman::SynthesisError> {
            Err(bellman::SynthesisError::AssignmentMissing)
        }
    }
    Ok(cache.get_or_extract(&CircuitKey::new(stem), || Missing)?)
}

fn make_budget(gib_flag: Option<f64>) -> Result<Budget, Error> {
    let bytes = match gib_flag {
        Some(g) => (g * GIB) as u64,
        None => {
            let meminfo = std::fs::read_to_string("/proc/meminfo")?;
            let kib: u64 = meminfo
                .lines()
                .find_map(|l| l.strip_prefix("MemAvailable:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                .ok_or("no MemAvailable in /proc/meminfo")?;
            kib * 1024 / 10 * 9
        }
    };
    let options = DetectOptions {
        budget: Some(SizeSpec::Bytes(bytes)),
        ..DetectOptions::default()
    };
    match Budget::detect(&options) {
        Ok(b) => Ok(b),
        Err(e) => {
            eprintln!("budget: detection failed ({e}); a fixed budget of {bytes} bytes");
            Ok(Budget::fixed(bytes))
        }
    }
}

/// 2^16 G1 and 2^12 G2 points: runs `a·G + i·b·G` from random `a`, `b` per run of 256
/// (random multiples of the generators; their discrete logs are not kept).
fn point_pools(seed: u64) -> (Vec<G1AffineRepr>, Vec<G2AffineRepr>) {
    let mut s = seed ^ 0xa5a5_5a5a_0f0f_f0f0;
    let mut scalar = move || {
        let mut wide = [0u8; 64];
        for c in wide.chunks_mut(8) {
            s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            c.copy_from_slice(&(z ^ (z >> 31)).to_le_bytes());
        }
        Scalar::from_bytes_wide(&wide)
    };
    const RUN: usize = 256;
    let mut g1 = Vec::with_capacity(POOL_G1);
    let mut proj = Vec::with_capacity(RUN);
    while g1.len() < POOL_G1 {
        let mut acc = G1Projective::generator() * scalar();
        let step = G1Projective::generator() * scalar();
        proj.clear();
        for _ in 0..RUN {
            proj.push(acc);
            acc += step;
        }
        let mut affine = vec![G1Affine::identity(); RUN];
        G1Projective::batch_normalize(&proj, &mut affine);
        g1.extend(affine.iter().map(G1AffineRepr::from_affine));
    }
    let mut g2 = Vec::with_capacity(POOL_G2);
    let mut proj2 = Vec::with_capacity(RUN);
    while g2.len() < POOL_G2 {
        let mut acc = G2Projective::generator() * scalar();
        let step = G2Projective::generator() * scalar();
        proj2.clear();
        for _ in 0..RUN {
            proj2.push(acc);
            acc += step;
        }
        let mut affine = vec![G2Affine::identity(); RUN];
        G2Projective::batch_normalize(&proj2, &mut affine);
        g2.extend(affine.iter().map(G2AffineRepr::from_affine));
    }
    (g1, g2)
}

/// Pool slot of base `i` of a section: a fixed pseudo-random pick, so neighbouring bases
/// (and the same index in two queries) are different points.
fn scramble(i: usize, salt: u64, pool: usize) -> usize {
    let mut z = (i as u64) ^ salt.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 33)).wrapping_mul(0xff51_afd7_ed55_8ccd);
    z ^= z >> 33;
    (z % pool as u64) as usize
}

fn fractions(v: &[Scalar]) -> (f64, f64, f64) {
    let (mut zero, mut one) = (0usize, 0usize);
    for x in v {
        if *x == Scalar::zero() {
            zero += 1;
        } else if *x == Scalar::one() {
            one += 1;
        }
    }
    let n = v.len().max(1) as f64;
    let (z, o) = (zero as f64 / n, one as f64 / n);
    (z, o, 1.0 - z - o)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

/// Each step's median over the reps (taken step by step).
fn median_timings(runs: &[ProofOutput]) -> ProofTimings {
    let m = |f: fn(&ProofTimings) -> Duration| median(runs.iter().map(|o| f(&o.timings)).collect());
    ProofTimings {
        synthesis: m(|t| t.synthesis),
        abc_evaluation: m(|t| t.abc_evaluation),
        witness_check: m(|t| t.witness_check),
        abc_by_backend: runs.iter().any(|o| o.timings.abc_by_backend),
        h: m(|t| t.h),
        msm_h: m(|t| t.msm_h),
        msm_l: m(|t| t.msm_l),
        msm_a: m(|t| t.msm_a),
        msm_b_g1: m(|t| t.msm_b_g1),
        msm_b_g2: m(|t| t.msm_b_g2),
        h_transfers: m(|t| t.h_transfers),
        msm_wall: m(|t| t.msm_wall),
        bases_upload: m(|t| t.bases_upload),
        msm_transfers: m(|t| t.msm_transfers),
        msm_staging_wait: m(|t| t.msm_staging_wait),
        msm_witness_alloc: m(|t| t.msm_witness_alloc),
        msm_witness_masks: m(|t| t.msm_witness_masks),
        msm_scalars_wait: m(|t| t.msm_scalars_wait),
        h_device: m(|t| t.h_device),
        abc_device: m(|t| t.abc_device),
        assembly: m(|t| t.assembly),
        self_check: m(|t| t.self_check),
        total: m(|t| t.total),
    }
}

fn steps(t: &ProofTimings) -> [(&'static str, Duration); 21] {
    [
        ("synthesis (circuit run, a/b/c beside)", t.synthesis),
        ("a/b/c evaluation (after it)", t.abc_evaluation),
        ("witness check", t.witness_check),
        ("h (6 ntts)", t.h),
        ("  of which transfers", t.h_transfers),
        ("  device transforms", t.h_device),
        ("    of which a/b/c on device", t.abc_device),
        ("msm h", t.msm_h),
        ("msm l", t.msm_l),
        ("  waiting for its scalars", t.msm_scalars_wait),
        ("msm a", t.msm_a),
        ("msm b_g1", t.msm_b_g1),
        ("msm b_g2", t.msm_b_g2),
        ("msms, wall", t.msm_wall),
        ("  scalar transfers", t.msm_transfers),
        ("    staging waits", t.msm_staging_wait),
        ("      witness device buffers", t.msm_witness_alloc),
        ("      witness masks", t.msm_witness_masks),
        ("  bases upload", t.bases_upload),
        ("assembly", t.assembly),
        ("total", t.total),
    ]
}

fn breakdown(t: &ProofTimings) {
    println!(
        "per-step medians (a, b, c evaluated {}):",
        if t.abc_by_backend {
            "on the device, inside h; a/b/c evaluation = the witness's staging"
        } else {
            "on the host"
        }
    );
    for (name, d) in steps(t) {
        println!("  {name:<28} {:>9.3} s", d.as_secs_f64());
    }
}

fn timings_json(t: &ProofTimings) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    for (name, d) in steps(t) {
        m.insert(name.trim().to_string(), d.as_secs_f64().into());
    }
    serde_json::Value::Object(m)
}

fn rayon_threads() -> usize {
    rayon::current_num_threads()
}

/// `VmHWM` of this process (bytes; 0 when unreadable).
fn vm_hwm() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kib| kib * 1024)
}

/// `memory.current` and `memory.peak` of this process's cgroup (v2), when readable.
fn cgroup_memory() -> (Option<u64>, Option<u64>) {
    let Some(rel) = std::fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("0::"))
                .map(|p| p.trim().to_string())
        })
    else {
        return (None, None);
    };
    let dir = Path::new("/sys/fs/cgroup").join(rel.trim_start_matches('/'));
    let read = |f: &str| {
        std::fs::read_to_string(dir.join(f))
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    (read("memory.current"), read("memory.peak"))
}

fn gib(bytes: u64) -> String {
    if bytes as f64 >= GIB {
        format!("{:.2} GiB", bytes as f64 / GIB)
    } else {
        format!("{:.1} MiB", bytes as f64 / MIB)
    }
}

/// The engine's pipeline, one line a partition: when each phase ran (seconds from the
/// job's submission) and what the device phase spent where.
fn print_timeline(parts: &[PartitionTrace]) {
    let s = |d: Duration| d.as_secs_f64();
    println!("timeline (s from submission): partition: admitted | synthesis | device (+: a, b, c copied ahead) [h, h on the device (of it a, b, c), msm wall, h msm, l (its scalars' wait), a, b_g1, b_g2, witness staging on the host, of it waits (buffers, masks)] | assembly");
    for t in parts {
        let p = &t.proof;
        println!(
            "timeline {:>3}: {:7.3} | {:7.3}-{:7.3} | {:7.3}-{:7.3}{} [{:.3}, {:.3} ({:.3}), {:.3}, {:.3}, {:.3} ({:.3}), {:.3}, {:.3}, {:.3}, {:.3}, {:.3} ({:.3}, {:.3})] | {:7.3}-{:7.3}",
            t.index,
            s(t.admitted),
            s(t.synthesis.0),
            s(t.synthesis.1),
            s(t.device.0),
            s(t.device.1),
            if t.prefetched { "+" } else { " " },
            s(p.h),
            s(p.h_device),
            s(p.abc_device),
            s(p.msm_wall),
            s(p.msm_h),
            s(p.msm_l),
            s(p.msm_scalars_wait),
            s(p.msm_a),
            s(p.msm_b_g1),
            s(p.msm_b_g2),
            s(p.msm_transfers),
            s(p.msm_staging_wait),
            s(p.msm_witness_alloc),
            s(p.msm_witness_masks),
            s(t.assembly.0),
            s(t.assembly.1),
        );
    }
}
