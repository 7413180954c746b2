//! The load: circuits with real parameters, an engine on every device, K submitter threads
//! proving N mixed jobs, every proof verified.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bellman::{Circuit, ConstraintSystem, SynthesisError};
use bls12_381::{Bls12, Scalar};
use engine::{
    CircuitSpec, DeviceConfig, Engine, EngineConfig, JobSpec, JobStatus, Partition, PceSource,
    Priority,
};
use groth16_prover::testing::{MimcChain, RandomR1cs, Sha256Circuit, SplitMix};
use groth16_prover::{CpuBackend, Prover, ProverBackend, ProverConfig, ProvingKey};
use memory_budget::{Budget, DetectOptions, SizeSpec};
use pce_cache::{CacheConfig, CircuitKey, PceCache, PceHandle};
use rand::SeedableRng;
use serde::{Deserialize, Serialize};
use srs_store::{ParamsFile, SrsSpec, SrsStore, StoreConfig};

use crate::counters::Counters;
use crate::error::{Result, StressError};
use crate::sample::{MemorySource, SampleStats, Sampler};

/// Seed of every circuit's shape (round constants, random R1CS structure): fixed, so the
/// parameters made once fit every run.
const SHAPE_SEED: u64 = 0x5eed_0019;
/// Seed of the parameters' toxic waste (fixed, so the files are made once per shape).
const PARAMS_SEED: u64 = 0x5eed_0119;

/// A circuit family of the workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CircuitKind {
    /// `MimcChain` with this many rounds (two constraints each); fresh secret start value
    /// per proof.
    Mimc {
        /// Rounds.
        rounds: usize,
    },
    /// `RandomR1cs`: fixed structure, fresh values per proof.
    Random {
        /// Product constraints.
        n_constraints: usize,
    },
    /// SHA-256 of a fresh message of this many padded blocks per proof.
    Sha256 {
        /// Blocks.
        blocks: usize,
    },
}

/// One circuit of the workload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CircuitDef {
    /// Its id in the engine.
    pub id: String,
    /// What it is.
    pub kind: CircuitKind,
}

/// A circuit value with its witness: any of the workload's kinds.
#[derive(Clone, Debug)]
pub enum AnyCircuit {
    /// MiMC chain.
    Mimc(MimcChain),
    /// Random R1CS.
    Random(RandomR1cs),
    /// SHA-256.
    Sha256(Sha256Circuit),
}

impl Circuit<Scalar> for AnyCircuit {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        match self {
            AnyCircuit::Mimc(c) => c.synthesize(cs),
            AnyCircuit::Random(c) => c.synthesize(cs),
            AnyCircuit::Sha256(c) => c.synthesize(cs),
        }
    }
}

impl AnyCircuit {
    /// The public inputs a proof of it is verified against (ONE excluded).
    pub fn public_inputs(&self) -> Vec<Scalar> {
        match self {
            AnyCircuit::Mimc(c) => vec![c.output()],
            AnyCircuit::Random(c) => c.public_inputs(),
            AnyCircuit::Sha256(c) => c.public_inputs(),
        }
    }
}

impl CircuitDef {
    /// An instance with a witness drawn from `g` (the shape never changes).
    pub fn instance(&self, g: &mut SplitMix) -> AnyCircuit {
        match self.kind {
            CircuitKind::Mimc { rounds } => {
                let mut c = MimcChain::new(rounds, SHAPE_SEED);
                c.x0 = g.scalar();
                AnyCircuit::Mimc(c)
            }
            CircuitKind::Random { n_constraints } => AnyCircuit::Random(RandomR1cs {
                n_inputs: 4,
                n_constraints,
                shape_seed: SHAPE_SEED,
                value_seed: g.next_u64(),
                corrupt: false,
            }),
            CircuitKind::Sha256 { blocks } => {
                let mut c = Sha256Circuit::with_blocks(blocks, SHAPE_SEED);
                for b in &mut c.preimage {
                    *b = g.next_u64() as u8;
                }
                AnyCircuit::Sha256(c)
            }
        }
    }

    /// The parameter file's name: the shape and the parameters' seed.
    fn file_name(&self) -> String {
        let shape = match self.kind {
            CircuitKind::Mimc { rounds } => format!("mimc-{rounds}"),
            CircuitKind::Random { n_constraints } => format!("random-{n_constraints}"),
            CircuitKind::Sha256 { blocks } => format!("sha256-{blocks}"),
        };
        format!("stress-{shape}-{SHAPE_SEED:x}-{PARAMS_SEED:x}.params")
    }

    /// Where its parameters live under `dir`.
    pub fn params_path(&self, dir: &Path) -> PathBuf {
        dir.join(self.file_name())
    }

    /// Its PCE's key in the cache: the parameter file's name, which names the shape.
    fn pce_key(&self) -> CircuitKey {
        let name = self.file_name();
        CircuitKey::new(name.strip_suffix(".params").unwrap_or(&name))
    }
}

/// The workload's size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Preset {
    /// CI on 2 cores: circuits of 2^14 rows, large enough beside the process's own 5–7 MiB
    /// and the 4 MiB margin that 60% of the unconstrained peak holds the largest key, its
    /// working set, the PCEs and the tables (at 2^13 rows it did not always).
    Quick,
    /// The GPU machine: circuits of 2^15–2^16 rows.
    Full,
}

impl Preset {
    /// The circuits: three keys of different sizes.
    pub fn circuits(self) -> Vec<CircuitDef> {
        let def = |id: &str, kind| CircuitDef {
            id: id.into(),
            kind,
        };
        match self {
            // Parameter generation for all three takes about 7 s on 2 cores.
            Preset::Quick => vec![
                def("mimc-a", CircuitKind::Mimc { rounds: 12_000 }),
                def("mimc-b", CircuitKind::Mimc { rounds: 9_000 }),
                def(
                    "random",
                    CircuitKind::Random {
                        n_constraints: 15_000,
                    },
                ),
            ],
            Preset::Full => vec![
                def("mimc", CircuitKind::Mimc { rounds: 32_000 }),
                def(
                    "random",
                    CircuitKind::Random {
                        n_constraints: 60_000,
                    },
                ),
                def("sha256", CircuitKind::Sha256 { blocks: 2 }),
            ],
        }
    }
}

/// Makes each circuit's parameters under `dir` once, in this process
/// (`groth16_prover::setup::generate`: real parameters, so proofs verify, the bytes
/// `groth16::generate_random_parameters` would write for the same seed, on all cores and
/// charged to `budget`); runs only read them. Returns the paths in circuit order.
pub fn prepare_parameters(
    circuits: &[CircuitDef],
    dir: &Path,
    budget: &Budget,
) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(StressError::io("create", dir))?;
    let mut paths = Vec::new();
    for (i, c) in circuits.iter().enumerate() {
        let path = c.params_path(dir);
        if !path.exists() {
            let t = Instant::now();
            let setup = |reason: String| StressError::Setup {
                circuit: c.id.clone(),
                reason,
            };
            let pce = pce_cache::Pce::record(c.instance(&mut SplitMix::new(SHAPE_SEED)))
                .map_err(|e| setup(format!("recording the circuit: {e}")))?;
            let mut rng = rand::rngs::StdRng::seed_from_u64(PARAMS_SEED.wrapping_add(i as u64));
            let tmp = path.with_extension(format!("tmp{}", std::process::id()));
            let file = std::fs::File::create(&tmp).map_err(StressError::io("create", &tmp))?;
            let mut w = std::io::BufWriter::new(file);
            groth16_prover::setup::generate(&pce, &mut rng, budget, &mut w)
                .map_err(|e| setup(format!("parameter generation: {e}")))?;
            std::io::Write::flush(&mut w).map_err(StressError::io("write", &tmp))?;
            drop(w);
            std::fs::rename(&tmp, &path).map_err(StressError::io("write", &path))?;
            eprintln!(
                "stress: parameters of {} made in {:.1} s: {}",
                c.id,
                t.elapsed().as_secs_f64(),
                path.display()
            );
        }
        paths.push(path);
    }
    Ok(paths)
}

/// Read window of the runs' key loads (srs-store's `chunk_bytes`).
const LOAD_WINDOW_BYTES: u64 = 256 << 10;

/// Settings of one run (one process).
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// The circuits.
    pub circuits: Vec<CircuitDef>,
    /// Where their parameters are ([`prepare_parameters`]).
    pub params_dir: PathBuf,
    /// Jobs to prove (one partition each).
    pub proofs: usize,
    /// Threads submitting jobs and awaiting them, one job at a time each.
    pub submitters: usize,
    /// CPU devices (a CPU backend behind the device interface each).
    pub cpu_devices: usize,
    /// Also GPU 0, when it opens.
    pub gpu: bool,
    /// Fail when GPU 0 does not open (`PINION_REQUIRE_GPU=1`, as in the GPU bundle).
    pub require_gpu: bool,
    /// Seed of witnesses, circuit choice and priorities.
    pub seed: u64,
    /// The budget's safety margin below the detected limit (`None`: memory-budget's
    /// default).
    pub margin: Option<SizeSpec>,
    /// Where measured figures come from.
    pub source: MemorySource,
    /// Sampling interval.
    pub interval: Duration,
    /// Every sample as CSV.
    pub samples_csv: Option<PathBuf>,
    /// The report, rewritten every `report_every` while the run goes and at its end.
    pub report: Option<PathBuf>,
    /// How often the report file is rewritten.
    pub report_every: Duration,
    /// A job that has not finished after this long counts as failed (and the run stops
    /// waiting for it).
    pub job_timeout: Duration,
    /// The run gives up when no job has ended for this long while jobs are outstanding:
    /// it records the budget's state ([`Stall`]) in its report and returns
    /// [`StressError::Stalled`].
    pub stall_timeout: Duration,
}

/// What the budget looked like when a run stopped making progress: a request queued for
/// more than is free under the ceiling, and nothing charged that would be released.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stall {
    /// Seconds without a job ending before the run gave up.
    pub after_s: u64,
    /// Jobs submitted and not ended.
    pub outstanding_jobs: u64,
    /// The budget's total (the detected limit minus the margin).
    pub total_bytes: u64,
    /// Its admission ceiling: the limit minus the margin minus `untracked_bytes`.
    pub ceiling_bytes: u64,
    /// Bytes charged.
    pub charged_bytes: u64,
    /// Charged bytes per category, non-zero ones.
    pub charged_by_category: BTreeMap<String, u64>,
    /// Requests queued in the budget.
    pub n_waiting: u64,
    /// Bytes they ask for.
    pub waiting_bytes: u64,
    /// What the kernel charged beyond the charges at the last drift reading (the process's
    /// own baseline: binary, libraries, stacks, allocator arenas).
    pub untracked_bytes: u64,
}

impl Stall {
    fn of(budget: &Budget, after: Duration, outstanding_jobs: u64) -> Stall {
        let snap = budget.snapshot();
        Stall {
            after_s: after.as_secs(),
            outstanding_jobs,
            total_bytes: snap.total_bytes,
            ceiling_bytes: snap.cap_bytes,
            charged_bytes: snap.used_bytes,
            charged_by_category: by_category(|c| snap.used_in(c)),
            n_waiting: snap.n_waiting as u64,
            waiting_bytes: snap.waiting_bytes,
            untracked_bytes: snap.untracked_bytes,
        }
    }

    /// Bytes free under the ceiling.
    pub fn free_bytes(&self) -> u64 {
        self.ceiling_bytes.saturating_sub(self.charged_bytes)
    }

    /// One line: what waits for what.
    pub fn describe(&self) -> String {
        let mib = |b: u64| format!("{:.1} MiB", b as f64 / f64::from(1u32 << 20));
        format!(
            "no job ended for {} s with {} outstanding: {} request(s) for {} queued in the budget, {} free under its ceiling of {} (total {} less {} the kernel charges beyond the charges), {} charged",
            self.after_s,
            self.outstanding_jobs,
            self.n_waiting,
            mib(self.waiting_bytes),
            mib(self.free_bytes()),
            mib(self.ceiling_bytes),
            mib(self.total_bytes),
            mib(self.untracked_bytes),
            mib(self.charged_bytes),
        )
    }
}

/// Non-zero figures per budget category, by name.
fn by_category(f: impl Fn(memory_budget::Category) -> u64) -> BTreeMap<String, u64> {
    memory_budget::Category::ALL
        .iter()
        .filter(|c| f(**c) > 0)
        .map(|c| (c.as_str().to_string(), f(*c)))
        .collect()
}

/// Failures of one kind.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failures {
    /// Count per reason (job ids and sizes stripped, so equal causes group).
    pub by_reason: BTreeMap<String, u64>,
}

impl Failures {
    fn add(&mut self, reason: String) {
        *self.by_reason.entry(reason).or_default() += 1;
    }

    /// All failures.
    pub fn total(&self) -> u64 {
        self.by_reason.values().sum()
    }
}

/// Everything one run reports (also what a killed run left in its report file).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// Whether the run got to its end (false: a progress snapshot).
    pub finished: bool,
    /// The run's seed.
    pub seed: u64,
    /// Where measured figures came from.
    pub source: String,
    /// The devices proving.
    pub devices: Vec<String>,
    /// What the budget's limit came from.
    pub budget_rule: String,
    /// The budget's total: the detected limit minus the margin (the drift check lowers
    /// its ceiling further by what the kernel charges beyond the charges).
    pub budget_bytes: u64,
    /// Host memory (measured from the cgroup) that opening GPU 0 took: driver, context and
    /// stream; the engine charges the device's own measurement of it
    /// (`Gpu::context_host_bytes`) while it runs (`None` without a GPU).
    pub gpu_context_host_bytes: Option<u64>,
    /// Each circuit's key as loaded in host memory.
    pub key_bytes: BTreeMap<String, u64>,
    /// Each circuit's working set per proof.
    pub working_set_bytes: BTreeMap<String, u64>,
    /// Jobs submitted.
    pub proofs_submitted: u64,
    /// Jobs that completed with a proof that verified.
    pub proofs_completed: u64,
    /// Jobs that failed, by reason (a proof that did not verify is one).
    pub proofs_failed: Failures,
    /// Completed proofs that did not verify (also counted in `proofs_failed`).
    pub proofs_invalid: u64,
    /// Completed proofs per circuit.
    pub completed_by_circuit: BTreeMap<String, u64>,
    /// Completed proofs per device.
    pub completed_by_device: BTreeMap<String, u64>,
    /// Key loads (first loads and reloads after eviction).
    pub key_loads: u64,
    /// Keys evicted to make room.
    pub key_evictions: u64,
    /// Seconds from the first submission to the last job's end.
    pub wall_s: f64,
    /// `proofs_completed / wall_s`.
    pub proofs_per_s: f64,
    /// The budget's own high-water mark (exact, between samples too).
    pub budget_peak_bytes: u64,
    /// The budget's high-water mark per category.
    pub budget_peak_by_category: BTreeMap<String, u64>,
    /// The samples' figures.
    pub samples: SampleStats,
    /// Set when the run gave up for lack of progress.
    #[serde(default)]
    pub stall: Option<Stall>,
}

/// Strips what differs between equal failures (job ids, numbers) from a reason.
fn reason_class(reason: &str) -> String {
    reason
        .split_whitespace()
        .map(|w| {
            if w.starts_with("job-") || w.chars().any(|c| c.is_ascii_digit()) {
                "N"
            } else {
                w
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

struct Tally {
    report: RunReport,
    first_submit: Option<Instant>,
    last_end: Option<Instant>,
}

/// Runs the workload in this process and returns its report.
pub fn run(config: &RunConfig, counters: &Counters) -> Result<RunReport> {
    let budget = Budget::detect(&DetectOptions {
        safety_margin: config.margin,
        ..DetectOptions::default()
    })?;
    let detection = budget.detection().cloned();
    let sampler = Sampler::start(
        config.source.clone(),
        budget.clone(),
        config.interval,
        config.samples_csv.clone(),
    )?;

    // PCEs: shared residents like the keys. Files beside the parameters, under the
    // parameter file's name (which names the shape), so a PCE the budget evicts is loaded
    // again rather than recorded; the engine fetches one per partition and holds it only
    // while the partition runs, and idle ones may go at once. Held here while the working
    // sets are sized, let go before the run.
    let pce_dir = config.params_dir.join("pce");
    let pces = Arc::new(
        PceCache::new(
            budget.clone(),
            CacheConfig {
                min_idle: Duration::ZERO,
                // Fetched in the engine's admission, which polls.
                admission_timeout: Some(engine::KEY_LOAD_WAIT),
                ..CacheConfig::with_dir(&pce_dir)
            },
        )
        .map_err(|e| StressError::Setup {
            circuit: "(all)".into(),
            reason: format!("pce cache in {}: {e}", pce_dir.display()),
        })?,
    );
    let mut held: Vec<PceHandle> = Vec::new();
    for c in &config.circuits {
        let shape = c.instance(&mut SplitMix::new(SHAPE_SEED));
        let pce = pces
            .get_or_extract(&c.pce_key(), || shape)
            .map_err(|e| StressError::Setup {
                circuit: c.id.clone(),
                reason: format!("pce: {e}"),
            })?;
        held.push(pce);
    }

    // Loads wait for room (admission tries again at every poll) and idle keys may go at
    // once: the point is that keys are evicted and loaded again.
    let store = SrsStore::new(
        budget.clone(),
        StoreConfig {
            min_idle: Duration::ZERO,
            reserve_timeout: Some(engine::KEY_LOAD_WAIT),
            ..StoreConfig::default()
        },
    );
    let mut devices = Vec::new();
    let mut device_names = Vec::new();
    let mut gpu_context_host_bytes = None;
    if config.gpu {
        let before = config.source.read()?.measured_bytes();
        match gpu_device::Gpu::open(0) {
            Ok(g) => {
                // What opening the device (driver, context, modules) costs in host memory,
                // which nothing charges.
                let after = config.source.read()?.measured_bytes();
                gpu_context_host_bytes = Some(after.saturating_sub(before));
                device_names.push(format!("gpu{}", g.info().ordinal));
                devices.push(DeviceConfig::Gpu(g));
            }
            Err(e) if config.require_gpu => {
                return Err(StressError::Setup {
                    circuit: "(devices)".into(),
                    reason: format!("GPU 0 required (PINION_REQUIRE_GPU=1) but unusable: {e}"),
                })
            }
            Err(e) => eprintln!("stress: no GPU ({e}); CPU devices only"),
        }
    }
    // One CPU backend behind every CPU device (and the working sets' sizing): it is shared
    // like the engine's CPU fallback, so its NTT twiddle table is built and charged once.
    let cpu: Arc<dyn ProverBackend> = Arc::new(CpuBackend::new(budget.clone()));
    for i in 0..config.cpu_devices {
        let name = format!("cpu{i}");
        device_names.push(name.clone());
        devices.push(DeviceConfig::Backend {
            name,
            backend: Arc::clone(&cpu),
        });
    }
    let mut engine_config = EngineConfig::new(budget.clone(), devices);
    engine_config.store = Some(store.clone());
    engine_config.self_check = true;
    let engine = Engine::start(engine_config)?;

    let mut key_bytes = BTreeMap::new();
    let mut working_set_bytes = BTreeMap::new();
    let mut vks = BTreeMap::new();
    for (c, pce) in config.circuits.iter().zip(&held) {
        let path = c.params_path(&config.params_dir);
        let mut spec = SrsSpec::new(c.id.clone(), &path);
        // Read windows in proportion to these keys, as 64 MiB windows are to a 44 GiB
        // key: a load's peak is then its bases plus a little, not its whole file twice
        // over (a file smaller than one window is mapped whole while it loads).
        spec.options.chunk_bytes = LOAD_WINDOW_BYTES;
        let setup = |reason: String| StressError::Setup {
            circuit: c.id.clone(),
            reason,
        };
        let plan = ParamsFile::open(&path)
            .map_err(|e| setup(e.to_string()))?
            .plan(&spec.options);
        key_bytes.insert(c.id.clone(), plan.destination_bytes);
        let key = ProvingKey::from_store(&store, spec.clone()).map_err(|e| setup(e.to_string()))?;
        let ws = Prover::with_shared_backend(
            Arc::new(key),
            budget.clone(),
            ProverConfig::default(),
            Arc::clone(&cpu),
        )
        .working_set_bytes(pce)
        .map_err(|e| setup(e.to_string()))?;
        working_set_bytes.insert(c.id.clone(), ws);
        let vk_file = std::fs::File::open(&path).map_err(StressError::io("read", &path))?;
        let vk = groth16::VerifyingKey::<Bls12>::read(std::io::BufReader::new(vk_file))
            .map_err(|e| setup(format!("verifying key: {e}")))?;
        vks.insert(c.id.clone(), groth16::prepare_verifying_key(&vk));
        engine.register(CircuitSpec {
            id: c.id.clone(),
            params: spec,
            pce: {
                let (pces, def) = (Arc::clone(&pces), c.clone());
                // Pinned to the fingerprint recorded above: a file of another shape under
                // this name is a typed error, never used.
                let key = CircuitKey {
                    fingerprint: Some(pce.fingerprint()),
                    ..def.pce_key()
                };
                PceSource::OnDemand(Arc::new(move || {
                    pces.get_or_extract(&key, || def.instance(&mut SplitMix::new(SHAPE_SEED)))
                }))
            },
        })?;
    }
    // From here the engine holds each PCE only while a partition of its circuit runs.
    drop(held);

    budget.reset_peaks();

    let tally = Arc::new(Mutex::new(Tally {
        report: RunReport {
            seed: config.seed,
            source: config.source.describe(),
            devices: device_names,
            gpu_context_host_bytes,
            budget_rule: detection.map(|d| d.budget_rule).unwrap_or_default(),
            budget_bytes: budget.total_bytes(),
            key_bytes,
            working_set_bytes,
            ..RunReport::default()
        },
        first_submit: None,
        last_end: None,
    }));
    let vks = Arc::new(vks);
    let next = Arc::new(AtomicUsize::new(0));
    let engine = Arc::new(engine);
    let circuits = Arc::new(config.circuits.clone());
    let mut threads = Vec::new();
    for t in 0..config.submitters.max(1) {
        let (engine, tally, vks, next, circuits) = (
            Arc::clone(&engine),
            Arc::clone(&tally),
            Arc::clone(&vks),
            Arc::clone(&next),
            Arc::clone(&circuits),
        );
        let (proofs, timeout) = (config.proofs, config.job_timeout);
        let mut g = SplitMix::new(config.seed ^ (t as u64 + 1).wrapping_mul(0x9e37_79b9));
        threads.push(
            std::thread::Builder::new()
                .name(format!("pinion-stress-submitter-{t}"))
                .spawn(move || {
                    while next.fetch_add(1, Ordering::AcqRel) < proofs {
                        submit_one(&engine, &circuits, &vks, &tally, &mut g, timeout);
                    }
                })
                .map_err(|source| StressError::Spawn {
                    program: PathBuf::from("submitter thread"),
                    source,
                })?,
        );
    }

    let snapshot = |finished: bool, stats: SampleStats| -> RunReport {
        let t = tally.lock().unwrap_or_else(|e| e.into_inner());
        let mut r = t.report.clone();
        r.finished = finished;
        if let (Some(a), Some(b)) = (t.first_submit, t.last_end) {
            r.wall_s = b.duration_since(a).as_secs_f64();
        }
        if r.wall_s > 0.0 {
            r.proofs_per_s = r.proofs_completed as f64 / r.wall_s;
        }
        let snap = budget.snapshot();
        r.budget_peak_bytes = snap.peak_used_bytes;
        r.budget_peak_by_category = by_category(|c| snap.peak_in(c));
        r.key_loads = counters.get(srs_store::metrics::LOADS_TOTAL);
        r.key_evictions = counters.get(srs_store::metrics::EVICTIONS_TOTAL);
        r.samples = stats;
        r
    };
    let write = |r: &RunReport| -> Result<()> {
        match &config.report {
            Some(p) => write_report(p, r),
            None => Ok(()),
        }
    };
    let (mut ended_before, mut progress_at) = (0, Instant::now());
    while threads.iter().any(|t| !t.is_finished()) {
        std::thread::sleep(config.report_every.min(Duration::from_millis(200)));
        let (submitted, ended) = {
            let t = tally.lock().unwrap_or_else(|e| e.into_inner());
            let r = &t.report;
            (
                r.proofs_submitted,
                r.proofs_completed + r.proofs_failed.total(),
            )
        };
        if ended != ended_before {
            (ended_before, progress_at) = (ended, Instant::now());
        } else if submitted > ended && progress_at.elapsed() >= config.stall_timeout {
            // Giving up: the blocked threads are left as they are (the process ends
            // after this returns), so nothing waits on them.
            let stall = Stall::of(&budget, progress_at.elapsed(), submitted - ended);
            tally.lock().unwrap_or_else(|e| e.into_inner()).report.stall = Some(stall.clone());
            let report = snapshot(true, sampler.finish());
            write(&report)?;
            return Err(StressError::Stalled {
                description: stall.describe(),
            });
        }
        write(&snapshot(false, sampler.stats()))?;
    }
    for t in threads {
        let _ = t.join();
    }
    if let Ok(e) = Arc::try_unwrap(engine) {
        e.shutdown(engine::Shutdown::Graceful);
    }
    let report = snapshot(true, sampler.finish());
    write(&report)?;
    Ok(report)
}

fn submit_one(
    engine: &Engine,
    circuits: &[CircuitDef],
    vks: &BTreeMap<String, groth16::PreparedVerifyingKey<Bls12>>,
    tally: &Mutex<Tally>,
    g: &mut SplitMix,
    timeout: Duration,
) {
    let def = &circuits[g.below(circuits.len())];
    let circuit = def.instance(g);
    let inputs = circuit.public_inputs();
    let priority = Priority::ALL[g.below(Priority::ALL.len())];
    let spec = JobSpec::single(def.id.clone(), Partition::circuit(circuit)).with_priority(priority);
    let lock = || tally.lock().unwrap_or_else(|e| e.into_inner());
    {
        let mut t = lock();
        t.report.proofs_submitted += 1;
        t.first_submit.get_or_insert_with(Instant::now);
    }
    let outcome = engine
        .submit(spec)
        .and_then(|id| engine.await_job(id, Some(timeout)));
    let mut t = lock();
    t.last_end = Some(Instant::now());
    let r = &mut t.report;
    match outcome {
        Err(e) => r.proofs_failed.add(reason_class(&e.to_string())),
        Ok(o) => match o.status {
            JobStatus::Completed => {
                let valid = o.proofs.len() == 1
                    && vks
                        .get(&def.id)
                        .is_some_and(|vk| groth16::verify_proof(vk, &o.proofs[0], &inputs).is_ok());
                if valid {
                    r.proofs_completed += 1;
                    *r.completed_by_circuit.entry(def.id.clone()).or_default() += 1;
                    for d in &o.devices {
                        *r.completed_by_device.entry(d.clone()).or_default() += 1;
                    }
                } else {
                    r.proofs_invalid += 1;
                    r.proofs_failed
                        .add(format!("proof of {} does not verify", def.id));
                }
            }
            JobStatus::Failed(why) => r.proofs_failed.add(reason_class(&why)),
            JobStatus::Cancelled => r.proofs_failed.add("cancelled".into()),
        },
    }
}

/// Writes a report atomically (a reader never sees half of one).
pub fn write_report(path: &Path, report: &RunReport) -> Result<()> {
    let tmp = path.with_extension("tmp");
    let text = serde_json::to_string_pretty(report).map_err(|e| StressError::Report {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    std::fs::write(&tmp, text).map_err(StressError::io("write", &tmp))?;
    std::fs::rename(&tmp, path).map_err(StressError::io("write", path))
}

/// Reads a report a run wrote.
pub fn read_report(path: &Path) -> Result<RunReport> {
    let text = std::fs::read_to_string(path).map_err(StressError::io("read", path))?;
    serde_json::from_str(&text).map_err(|e| StressError::Report {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use groth16_prover::testing::test_seed;

    #[test]
    fn failure_reasons_group() {
        let a = "partition 0: its working set of 2621440 bytes can never fit the memory budget of 1048576 bytes";
        let b = "partition 0: its working set of 9999 bytes can never fit the memory budget of 77 bytes";
        assert_eq!(reason_class(a), reason_class(b));
        assert_eq!(
            reason_class("job-17 did not finish within 600s"),
            "N did not finish within N"
        );
        assert_ne!(reason_class(a), reason_class("cancelled"));
    }

    /// Fresh witnesses never change a circuit's shape: one PCE and one parameter file
    /// serve every instance, and each instance's public inputs are its own.
    #[test]
    fn instances_share_their_shape() {
        let seed = test_seed();
        let mut g = SplitMix::new(seed);
        for def in Preset::Quick.circuits() {
            let (x, y) = (def.instance(&mut g), def.instance(&mut g));
            let (px, py) = (x.public_inputs(), y.public_inputs());
            let rx = pce_cache::Pce::record(x).expect("record");
            let ry = pce_cache::Pce::record(y).expect("record");
            assert_eq!(rx.shape(), ry.shape(), "{} (seed {seed})", def.id);
            assert_eq!(px.len(), py.len(), "{}", def.id);
            assert_ne!(px, py, "{}: fresh witnesses, fresh public inputs", def.id);
        }
    }

    #[test]
    fn reports_round_trip() {
        let seed = test_seed();
        let mut g = SplitMix::new(seed);
        let mut r = RunReport {
            finished: true,
            seed,
            proofs_completed: g.next_u64() % 1000,
            // A binary fraction: serde_json prints the shortest decimal that reads back.
            wall_s: (g.next_u64() % 10_000) as f64 / 8.0,
            ..RunReport::default()
        };
        r.proofs_failed.add("cancelled".into());
        r.key_bytes.insert("mimc-a".into(), g.next_u64() >> 20);
        let dir = std::env::temp_dir().join(format!(
            "pinion-stress-report-{}-{seed}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("r.json");
        write_report(&path, &r).unwrap();
        assert_eq!(read_report(&path).unwrap(), r);
        std::fs::write(&path, "{ truncated").unwrap();
        let e = read_report(&path).unwrap_err().to_string();
        assert!(e.contains("r.json"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
