//! The daemon's state behind both services: the engine, its budget and devices, the
//! registered circuits, and the job table that maps the names clients see to engine jobs.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use engine::{
    CircuitSpec, DeviceConfig, Engine, EngineConfig, EngineError, JobId, JobOutcome, JobSpec,
    JobStatus, PceSource, Priority, Shutdown,
};
use gpu_device::Gpu;
use groth16_prover::CpuBackend;
use memory_budget::{Budget, Category, DetectOptions, EvictorRegistration, Reservation};
use metrics_exporter_prometheus::PrometheusHandle;
use pce_cache::{CacheConfig, CircuitKey, PceCache};
use sha2::{Digest, Sha256};
use srs_store::{SrsSpec, SrsStore, StoreConfig, Tier};
use tokio::sync::watch;

use crate::config::{Config, Devices};
use crate::frontend::{Frontend, WitnessCharge, WitnessReader};
use crate::{metrics, DaemonError};

/// A registered circuit.
pub(crate) struct Circuit {
    pub(crate) id: String,
    pub(crate) params: SrsSpec,
    pub(crate) reader: Arc<dyn WitnessReader>,
    pub(crate) n_public: u32,
    pub(crate) n_constraints: u64,
}

/// What the daemon remembers of a job besides the engine's outcome.
pub(crate) struct JobEntry {
    pub(crate) id: JobId,
    /// The circuit (or proof kind) the job proves, for status.
    pub(crate) kind: String,
    pub(crate) priority: Priority,
    pub(crate) public_values: Vec<String>,
    pub(crate) submitted: Instant,
    /// Set once the job has ended.
    done: watch::Sender<bool>,
    /// The name was the client's request id.
    from_request_id: bool,
}

#[derive(Default)]
struct Jobs {
    by_name: HashMap<String, JobEntry>,
    names: HashMap<JobId, String>,
    /// Ended jobs, oldest first: forgotten beyond `keep_finished`.
    ended: VecDeque<String>,
}

/// Where a waited-for job is.
pub(crate) enum Waited {
    /// It ended (boxed: an outcome carries its partitions' timeline).
    Ended(Box<JobOutcome>),
    /// The wait ran out first.
    TimedOut,
}

/// A job's place now.
pub(crate) enum JobState {
    /// No partition admitted yet; partitions queued ahead of it.
    Queued(usize),
    /// At least one partition admitted, on these devices.
    Running(Vec<String>),
    /// Ended.
    Ended(JobOutcome),
}

/// A folder for uploaded files, removed at exit when the daemon made it.
struct StateDir {
    path: PathBuf,
    remove: bool,
}

impl Drop for StateDir {
    fn drop(&mut self) {
        if self.remove {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// The daemon. Shared by the gRPC services and the HTTP status server.
pub struct Daemon {
    pub(crate) engine: Engine,
    pub(crate) budget: Budget,
    pub(crate) gpus: Vec<Gpu>,
    pub(crate) config: Config,
    pub(crate) started: Instant,
    pub(crate) metrics: PrometheusHandle,
    frontend: Arc<dyn Frontend>,
    pces: PceCache,
    jobs: Mutex<Jobs>,
    circuits: Mutex<HashMap<String, Arc<Circuit>>>,
    registering: tokio::sync::Mutex<()>,
    /// Filecoin circuits' PCEs, recorded once into the state folder and loaded on demand.
    pub(crate) filecoin_pces: Arc<PceCache>,
    /// One Filecoin circuit registration at a time (held while a circuit is recorded:
    /// only blocking threads take it).
    pub(crate) filecoin_registering: Mutex<()>,
    /// The registered Filecoin circuits' parameters, by circuit id.
    pub(crate) filecoin_circuits: Mutex<HashMap<String, SrsSpec>>,
    /// Room for queued witnesses, in KiB (`[daemon] max_queued_bytes`).
    queue_room: Arc<tokio::sync::Semaphore>,
    queue_room_kib: u64,
    accepting: AtomicBool,
    state_dir: StateDir,
    _device_evictors: Vec<EvictorRegistration>,
    /// Refreshes the drift reading (the measured series of /metrics) and wakes waiters
    /// whose evictable entries came due, for as long as the daemon lives.
    _monitor: memory_budget::MonitorHandle,
}

impl std::fmt::Debug for Daemon {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Daemon")
            .field("listen", &self.config.listen)
            .finish_non_exhaustive()
    }
}

/// The daemon's host budget: the configured size, or the detected limit minus the margin.
pub fn detect_budget(config: &Config) -> Result<Budget, DaemonError> {
    Budget::detect(&DetectOptions {
        budget: config.total_budget,
        safety_margin: config.safety_margin,
        ..DetectOptions::default()
    })
    .map_err(|e| DaemonError::Config {
        key: "memory.total_budget".into(),
        reason: e.to_string(),
    })
}

fn open_devices(config: &Config) -> Result<Vec<Gpu>, DaemonError> {
    if config.devices == Devices::Cpu {
        return Ok(Vec::new());
    }
    let gpus = if !gpu_device::driver_present() {
        Vec::new()
    } else if config.gpu_ordinals.is_empty() {
        Gpu::open_all().unwrap_or_default()
    } else {
        config
            .gpu_ordinals
            .iter()
            .map(|&o| {
                Gpu::open(o).map_err(|e| DaemonError::Config {
                    key: "gpus.devices".into(),
                    reason: format!("gpu {o}: {e}"),
                })
            })
            .collect::<Result<Vec<_>, _>>()?
    };
    if gpus.is_empty() && config.devices == Devices::Gpu {
        return Err(DaemonError::Start(
            "--gpu: no CUDA device could be opened".into(),
        ));
    }
    Ok(gpus)
}

impl Daemon {
    /// Starts the engine on `budget` (see [`detect_budget`]) with the configured devices:
    /// the GPUs, else the CPU. Must run inside a tokio runtime (a task forwards the
    /// engine's job ends). Install the metrics recorder first ([`crate::metrics::install`])
    /// so the budget's series are recorded.
    pub fn start(
        config: Config,
        frontend: Arc<dyn Frontend>,
        budget: Budget,
        metrics: PrometheusHandle,
    ) -> Result<Arc<Daemon>, DaemonError> {
        if config.synthesis_threads > 0 {
            // Fails only when the global pool exists already (a second daemon in one
            // process): the first setting stays.
            let _ = rayon::ThreadPoolBuilder::new()
                .num_threads(config.synthesis_threads)
                .build_global();
        }
        let gpus = open_devices(&config)?;
        let store = SrsStore::new(
            budget.clone(),
            StoreConfig {
                min_idle: config.eviction_min_idle,
                // Loads wait for room like every other charge, one short attempt at a
                // time, so admission can poll between them.
                reserve_timeout: Some(engine::KEY_LOAD_WAIT),
                ..StoreConfig::default()
            },
        );
        let device_evictors = gpus
            .iter()
            .map(|g| store.register_device_budget(g))
            .collect();
        let devices = if gpus.is_empty() {
            vec![DeviceConfig::Backend {
                name: "cpu0".into(),
                backend: Arc::new(CpuBackend::new(budget.clone())),
            }]
        } else {
            gpus.iter().cloned().map(DeviceConfig::Gpu).collect()
        };
        let (ended_tx, ended_rx) = tokio::sync::mpsc::unbounded_channel::<JobId>();
        let mut engine_config = EngineConfig::new(budget.clone(), devices);
        engine_config.store = Some(store);
        engine_config.handoff_depth = config.synthesis_lookahead;
        engine_config.max_synthesis =
            (config.synthesis_concurrency > 0).then_some(config.synthesis_concurrency);
        engine_config.keep_finished = config.keep_finished;
        engine_config.on_job_end = Some(Arc::new(move |id| {
            // The receiver is gone only when the daemon is: nothing to tell then.
            let _ = ended_tx.send(id);
        }));
        let engine = Engine::start(engine_config).map_err(|e| DaemonError::Start(e.to_string()))?;
        let pces = PceCache::new(
            budget.clone(),
            CacheConfig {
                min_idle: config.eviction_min_idle,
                ..CacheConfig::in_memory()
            },
        )
        .map_err(|e| DaemonError::Start(e.to_string()))?;
        let state_dir = match &config.state_dir {
            Some(p) => StateDir {
                path: p.clone(),
                remove: false,
            },
            None => StateDir {
                path: std::env::temp_dir().join(format!(
                    "pinion-daemon-{}-{:x}",
                    std::process::id(),
                    rand_suffix()
                )),
                remove: true,
            },
        };
        std::fs::create_dir_all(state_dir.path.join("params")).map_err(|e| {
            DaemonError::Start(format!(
                "cannot create state folder {}: {e}",
                state_dir.path.display()
            ))
        })?;
        let filecoin_pces = Arc::new(
            PceCache::new(
                budget.clone(),
                CacheConfig {
                    min_idle: config.eviction_min_idle,
                    // Fetched in the engine's admission, which polls.
                    admission_timeout: Some(engine::KEY_LOAD_WAIT),
                    ..CacheConfig::with_dir(state_dir.path.join("pce"))
                },
            )
            .map_err(|e| DaemonError::Start(e.to_string()))?,
        );
        let budget_monitor = budget.spawn_monitor(Duration::from_secs(1));
        let queue_room_kib =
            (config.max_queued.resolve(budget.total_bytes()) / 1024).clamp(1, u64::from(u32::MAX));
        let daemon = Arc::new(Daemon {
            engine,
            budget,
            gpus,
            config,
            started: Instant::now(),
            metrics,
            frontend,
            pces,
            jobs: Mutex::new(Jobs::default()),
            circuits: Mutex::new(HashMap::new()),
            registering: tokio::sync::Mutex::new(()),
            filecoin_pces,
            filecoin_registering: Mutex::new(()),
            filecoin_circuits: Mutex::new(HashMap::new()),
            queue_room: Arc::new(tokio::sync::Semaphore::new(queue_room_kib as usize)),
            queue_room_kib,
            accepting: AtomicBool::new(true),
            state_dir,
            _device_evictors: device_evictors,
            _monitor: budget_monitor,
        });
        let weak = Arc::downgrade(&daemon);
        tokio::spawn(forward_job_ends(weak, ended_rx));
        Ok(daemon)
    }

    fn jobs(&self) -> MutexGuard<'_, Jobs> {
        self.jobs.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn circuits(&self) -> MutexGuard<'_, HashMap<String, Arc<Circuit>>> {
        self.circuits.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The engine (status, store).
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The host budget.
    pub fn budget(&self) -> &Budget {
        &self.budget
    }

    /// The settings it runs with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Whether new jobs are taken.
    pub fn is_accepting(&self) -> bool {
        self.accepting.load(Ordering::Acquire)
    }

    /// Charges a request's bytes while it is handled (they are already in memory: tonic
    /// decoded them, so the charge makes the budget count them). Waits for room like the
    /// engine's own charges (a client that goes away cancels the wait); a request that can
    /// never fit is refused at once.
    pub(crate) async fn charge(
        &self,
        bytes: u64,
        category: Category,
        what: &'static str,
    ) -> Result<Reservation, DaemonError> {
        self.budget
            .reserve_async(bytes, category, what)
            .await
            .map_err(|e| DaemonError::Budget {
                what: what.to_string(),
                requested_bytes: bytes,
                reason: e.to_string(),
            })
    }

    /// Room for a queued job's witness of `bytes`: first its share of
    /// `[daemon] max_queued_bytes` (waiting while queued witnesses fill it), then its
    /// charge, at low priority so the engine's own waiting charges go first.
    pub(crate) async fn witness_charge(&self, bytes: u64) -> Result<WitnessCharge, DaemonError> {
        let kib = bytes.div_ceil(1024).max(1);
        if kib > self.queue_room_kib {
            return Err(DaemonError::Budget {
                what: "a job's witness".into(),
                requested_bytes: bytes,
                reason: format!(
                    "more than [daemon] max_queued_bytes ({} bytes) can ever hold",
                    self.queue_room_kib * 1024
                ),
            });
        }
        let permit = Arc::clone(&self.queue_room)
            .acquire_many_owned(kib as u32)
            .await
            .map_err(|_| DaemonError::ShuttingDown)?;
        let reservation = self
            .budget
            .request(bytes, Category::WorkingSet)
            .priority(memory_budget::Priority::LOW)
            .label("a job's witness")
            .reserve_async()
            .await
            .map_err(|e| DaemonError::Budget {
                what: "a job's witness".into(),
                requested_bytes: bytes,
                reason: e.to_string(),
            })?;
        Ok(WitnessCharge::new(reservation, permit))
    }

    /// Queues a job under a name: the client's request id (a second submission with the
    /// same id gets the first job: `Ok((name, false))`), else the engine's id.
    pub(crate) fn submit(
        &self,
        spec: JobSpec,
        kind: String,
        public_values: Vec<String>,
        request_id: &str,
    ) -> Result<(String, bool), DaemonError> {
        if !self.is_accepting() {
            return Err(DaemonError::ShuttingDown);
        }
        if !request_id.is_empty() {
            if let Some(e) = self.jobs().by_name.get(request_id) {
                if e.from_request_id {
                    return Ok((request_id.to_string(), false));
                }
                return Err(DaemonError::invalid(
                    "request_id",
                    format!("{request_id:?} is the name of another job"),
                ));
            }
        }
        let priority = spec.priority;
        let id = self.engine.submit(spec).map_err(|e| match e {
            EngineError::ShuttingDown => DaemonError::ShuttingDown,
            EngineError::UnknownCircuit { circuit } => DaemonError::UnknownCircuit { circuit },
            other => DaemonError::Internal(other.to_string()),
        })?;
        metrics::job_submitted(&kind);
        let name = if request_id.is_empty() {
            id.to_string()
        } else {
            request_id.to_string()
        };
        let mut jobs = self.jobs();
        if jobs.by_name.contains_key(&name) {
            // Two submissions with one new request id raced: keep the first, drop ours.
            drop(jobs);
            let _ = self.engine.cancel(id);
            return Ok((name, false));
        }
        let (done, _) = watch::channel(false);
        jobs.by_name.insert(
            name.clone(),
            JobEntry {
                id,
                kind,
                priority,
                public_values,
                submitted: Instant::now(),
                done,
                from_request_id: !request_id.is_empty(),
            },
        );
        jobs.names.insert(id, name.clone());
        // The job may have ended before it was in the table (its end went unnoticed).
        if !matches!(self.engine.outcome(id), Ok(None)) {
            ended(&mut jobs, id, self.config.keep_finished);
        }
        Ok((name, true))
    }

    /// The job a client's request id names, if it was submitted before.
    pub(crate) fn by_request_id(&self, request_id: &str) -> Option<String> {
        if request_id.is_empty() {
            return None;
        }
        let jobs = self.jobs();
        let e = jobs.by_name.get(request_id)?;
        e.from_request_id.then(|| request_id.to_string())
    }

    /// The engine id of a job name.
    pub(crate) fn job_id(&self, name: &str) -> Result<JobId, DaemonError> {
        self.jobs()
            .by_name
            .get(name)
            .map(|e| e.id)
            .ok_or_else(|| DaemonError::UnknownJob {
                job: name.to_string(),
            })
    }

    /// A job's public values, kind and priority.
    pub(crate) fn job_meta(&self, name: &str) -> Option<(Vec<String>, String, Priority, Instant)> {
        self.jobs().by_name.get(name).map(|e| {
            (
                e.public_values.clone(),
                e.kind.clone(),
                e.priority,
                e.submitted,
            )
        })
    }

    /// The kind of the job with engine id `id` (for device status).
    pub(crate) fn job_kind(&self, id: JobId) -> Option<(String, String)> {
        let jobs = self.jobs();
        let name = jobs.names.get(&id)?;
        Some((name.clone(), jobs.by_name.get(name)?.kind.clone()))
    }

    /// Waits for a job to end, at most `timeout` (`None`: forever). Holds no thread while
    /// it waits; a caller that goes away just drops the wait.
    pub(crate) async fn wait(
        &self,
        name: &str,
        timeout: Option<Duration>,
    ) -> Result<Waited, DaemonError> {
        let unknown = || DaemonError::UnknownJob {
            job: name.to_string(),
        };
        let (id, mut rx) = {
            let jobs = self.jobs();
            let e = jobs.by_name.get(name).ok_or_else(unknown)?;
            (e.id, e.done.subscribe())
        };
        let until_end = async {
            loop {
                match self.engine.outcome(id) {
                    Ok(Some(o)) => return Ok(o),
                    Ok(None) => {}
                    Err(_) => return Err(unknown()),
                }
                if rx.changed().await.is_err() {
                    // The entry was forgotten: the job ended long ago.
                    return match self.engine.outcome(id) {
                        Ok(Some(o)) => Ok(o),
                        _ => Err(unknown()),
                    };
                }
            }
        };
        match timeout {
            None => until_end.await.map(|o| Waited::Ended(Box::new(o))),
            Some(t) => match tokio::time::timeout(t, until_end).await {
                Ok(r) => r.map(|o| Waited::Ended(Box::new(o))),
                Err(_) => Ok(Waited::TimedOut),
            },
        }
    }

    /// Cancels a job; whether it was still running.
    pub(crate) fn cancel(&self, name: &str) -> Result<bool, DaemonError> {
        let id = self.job_id(name)?;
        self.engine.cancel(id).map_err(|_| DaemonError::UnknownJob {
            job: name.to_string(),
        })
    }

    /// Where a job is now.
    pub(crate) fn state(&self, name: &str) -> Result<JobState, DaemonError> {
        let id = self.job_id(name)?;
        let unknown = |_| DaemonError::UnknownJob {
            job: name.to_string(),
        };
        if let Some(o) = self.engine.outcome(id).map_err(unknown)? {
            return Ok(JobState::Ended(o));
        }
        let devices = self.engine.job_devices(id).map_err(unknown)?;
        if devices.is_empty() {
            Ok(JobState::Queued(self.engine.queue_position(id)))
        } else {
            Ok(JobState::Running(devices))
        }
    }

    /// The device a newly submitted job goes to, when the engine has decided (or has one
    /// device only, so there is nothing to decide).
    pub(crate) fn assigned_device(&self, name: &str) -> String {
        let Ok(id) = self.job_id(name) else {
            return String::new();
        };
        let devices = self.engine.job_devices(id).unwrap_or_default();
        if let Some(d) = devices.first() {
            return d.clone();
        }
        let all = self.engine.status().devices;
        match all.as_slice() {
            [only] => only.name.clone(),
            _ => String::new(),
        }
    }

    /// A registered circuit.
    pub(crate) fn circuit(&self, id: &str) -> Result<Arc<Circuit>, DaemonError> {
        self.circuits()
            .get(id)
            .cloned()
            .ok_or_else(|| DaemonError::UnknownCircuit {
                circuit: id.to_string(),
            })
    }

    /// Registered circuits, by id.
    pub(crate) fn circuit_list(&self) -> Vec<Arc<Circuit>> {
        let mut v: Vec<Arc<Circuit>> = self.circuits().values().cloned().collect();
        v.sort_by(|a, b| a.id.cmp(&b.id));
        v
    }

    /// The front end's name.
    pub(crate) fn frontend_name(&self) -> &'static str {
        self.frontend.name()
    }

    /// Registers a circuit: parses it, checks its parameters fit, records its PCE, and
    /// registers both with the engine. Idempotent: the same circuit bytes and parameters
    /// give the same id. Runs on a blocking thread (parsing and recording take seconds for
    /// large circuits); registrations run one at a time.
    pub(crate) async fn register(
        self: &Arc<Self>,
        r1cs: Input,
        params: Input,
    ) -> Result<(Arc<Circuit>, bool), DaemonError> {
        if !self.is_accepting() {
            return Err(DaemonError::ShuttingDown);
        }
        let _one = self.registering.lock().await;
        let me = Arc::clone(self);
        tokio::task::spawn_blocking(move || me.register_blocking(r1cs, params))
            .await
            .map_err(|e| DaemonError::Internal(format!("registration task: {e}")))?
    }

    fn register_blocking(
        &self,
        r1cs: Input,
        params: Input,
    ) -> Result<(Arc<Circuit>, bool), DaemonError> {
        let (r1cs_bytes, _r1cs_charge) = match r1cs {
            Input::Bytes(b, charge) => (b, charge),
            Input::Path(p) => self.read_charged(&p, "circuit")?,
        };
        let r1cs_hash = Sha256::digest(&r1cs_bytes);
        let (params_path, params_ident) = match params {
            Input::Path(p) => {
                let p = if p.is_relative() {
                    self.config.param_cache.join(p)
                } else {
                    p
                };
                let meta = std::fs::metadata(&p).map_err(|source| DaemonError::Read {
                    what: "parameters",
                    path: p.clone(),
                    source,
                })?;
                let canonical = std::fs::canonicalize(&p).unwrap_or(p);
                let mtime = meta
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_nanos());
                let ident = format!("{}:{}:{mtime}", canonical.display(), meta.len());
                (canonical, Sha256::digest(ident.as_bytes()))
            }
            Input::Bytes(b, _charge) => {
                let hash = Sha256::digest(&b);
                let path = self
                    .state_dir
                    .path
                    .join("params")
                    .join(format!("{}.params", hex::encode(hash)));
                if !path.exists() {
                    write_atomic(&path, &b)?;
                }
                (path, hash)
            }
        };
        let mut h = Sha256::new();
        h.update(r1cs_hash);
        h.update(params_ident);
        let id = format!(
            "{}-{}-{}",
            self.frontend.name(),
            &hex::encode(r1cs_hash)[..12],
            &hex::encode(h.finalize())[..12]
        );
        if let Ok(c) = self.circuit(&id) {
            return Ok((c, false));
        }
        let circuit = self.frontend.load_circuit(&r1cs_bytes, &self.budget)?;
        drop(r1cs_bytes);
        let file =
            srs_store::ParamsFile::open(&params_path).map_err(|e| DaemonError::Unusable {
                what: format!("parameters {}", params_path.display()),
                reason: e.to_string(),
            })?;
        let n_ic = u64::from(file.layout().ic().n_points());
        let n_expected = u64::from(circuit.n_public()) + 1;
        if n_ic != n_expected {
            return Err(DaemonError::Unusable {
                what: format!("parameters {}", params_path.display()),
                reason: format!(
                    "their verifying key has {n_ic} ic points, the circuit needs {n_expected} (one per public value, plus one)"
                ),
            });
        }
        drop(file);
        let pce = circuit.record(&self.pces, &CircuitKey::new(id.clone()))?;
        let mut spec = SrsSpec::new(id.clone(), &params_path);
        spec.options.check = self.config.check;
        self.engine
            .register(CircuitSpec {
                id: id.clone(),
                params: spec.clone(),
                pce: PceSource::Held(pce),
            })
            .map_err(|e| DaemonError::Unusable {
                what: format!("parameters {}", params_path.display()),
                reason: e.to_string(),
            })?;
        let c = Arc::new(Circuit {
            id: id.clone(),
            params: spec,
            reader: circuit.witness_reader(),
            n_public: circuit.n_public(),
            n_constraints: circuit.n_constraints(),
        });
        self.circuits().insert(id, Arc::clone(&c));
        Ok((c, true))
    }

    /// Reads a whole file with its size charged first.
    pub(crate) fn read_charged(
        &self,
        path: &Path,
        what: &'static str,
    ) -> Result<(Vec<u8>, Reservation), DaemonError> {
        let read_err = |source| DaemonError::Read {
            what,
            path: path.to_path_buf(),
            source,
        };
        let len = std::fs::metadata(path).map_err(read_err)?.len();
        let charge = self
            .budget
            .reserve(len, Category::Transient, what, None)
            .map_err(|e| DaemonError::Budget {
                what: what.to_string(),
                requested_bytes: len,
                reason: e.to_string(),
            })?;
        let bytes = std::fs::read(path).map_err(read_err)?;
        Ok((bytes, charge))
    }

    /// The parameters of a registered Filecoin circuit.
    pub(crate) fn filecoin_params(&self, circuit_id: &str) -> Option<SrsSpec> {
        self.filecoin_circuits
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(circuit_id)
            .cloned()
    }

    /// Loads a registered circuit's parameters now (and pins its staging: see the engine's
    /// `prewarm_staging`); whether they were loaded already and
    /// how long the load took.
    pub(crate) async fn preload(
        self: &Arc<Self>,
        circuit_id: &str,
    ) -> Result<(bool, Duration), DaemonError> {
        let spec = match self.circuit(circuit_id) {
            Ok(c) => c.params.clone(),
            Err(e) => self.filecoin_params(circuit_id).ok_or(e)?,
        };
        let store = self.engine.store().clone();
        let already = matches!(
            store.tier_of(circuit_id),
            Some(Tier::Device | Tier::Pinned | Tier::Host)
        );
        if already {
            return Ok((true, Duration::ZERO));
        }
        let t = Instant::now();
        let me = Arc::clone(self);
        let id = circuit_id.to_string();
        tokio::task::spawn_blocking(move || {
            store.preload(&spec)?;
            // A circuit the engine knows also gets its devices' staging pinned now (done
            // at registration unless the budget had no room then; quick when done).
            // Pinning that fails in the driver shows again, typed, in its first proof.
            let _ = me.engine.prewarm_staging(&id);
            Ok(())
        })
        .await
        .map_err(|e| DaemonError::Internal(format!("preload task: {e}")))?
        .map_err(|e| match e {
            srs_store::SrsError::Budget { .. } => DaemonError::Budget {
                what: format!("parameters of {circuit_id}"),
                requested_bytes: 0,
                reason: e.to_string(),
            },
            other => DaemonError::Unusable {
                what: format!("parameters of {circuit_id}"),
                reason: other.to_string(),
            },
        })?;
        Ok((false, t.elapsed()))
    }

    /// Demotes a circuit's parameters out of memory; whether they were loaded and the
    /// bytes freed now (a key a proof holds is freed when that proof lets go).
    pub(crate) fn evict(&self, circuit_id: &str) -> Result<(bool, u64), DaemonError> {
        let store = self.engine.store();
        let was_loaded = match store.tier_of(circuit_id) {
            None => {
                // Registered but never loaded, or not a circuit at all.
                if self.filecoin_params(circuit_id).is_none() {
                    self.circuit(circuit_id)?;
                }
                return Ok((false, 0));
            }
            Some(t) => matches!(t, Tier::Device | Tier::Pinned | Tier::Host),
        };
        let freed = store
            .evict(circuit_id, false)
            .map_err(|e| DaemonError::Internal(e.to_string()))?;
        Ok((was_loaded, freed))
    }

    /// Stops taking jobs and waits for the engine: running jobs finish (`Graceful`) or are
    /// cancelled (`Abort`). May be called again with `Abort` while a graceful stop waits.
    pub async fn shutdown(self: &Arc<Self>, how: Shutdown) {
        self.accepting.store(false, Ordering::Release);
        let me = Arc::clone(self);
        let _ = tokio::task::spawn_blocking(move || me.engine.shutdown(how)).await;
    }
}

/// A file given by path or by bytes (already charged).
pub(crate) enum Input {
    Path(PathBuf),
    Bytes(Vec<u8>, Reservation),
}

fn rand_suffix() -> u128 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u8(0);
    u128::from(h.finish())
}

fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), DaemonError> {
    let tmp = path.with_extension(format!("tmp-{}", rand_suffix()));
    let result = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(|e| DaemonError::Internal(format!("cannot write {}: {e}", path.display())))
}

/// Marks a job ended: its waiters wake; beyond `keep` ended jobs the oldest are forgotten.
fn ended(jobs: &mut Jobs, id: JobId, keep: usize) {
    let Some(name) = jobs.names.get(&id).cloned() else {
        return;
    };
    let Some(e) = jobs.by_name.get(&name) else {
        return;
    };
    if *e.done.borrow() {
        return;
    }
    e.done.send_replace(true);
    jobs.ended.push_back(name);
    while jobs.ended.len() > keep {
        if let Some(old) = jobs.ended.pop_front() {
            if let Some(e) = jobs.by_name.remove(&old) {
                jobs.names.remove(&e.id);
            }
        }
    }
}

/// Forwards the engine's job ends to the job table (the engine calls its hook under its
/// own lock, so the hook only sends the id here).
async fn forward_job_ends(
    daemon: Weak<Daemon>,
    mut rx: tokio::sync::mpsc::UnboundedReceiver<JobId>,
) {
    while let Some(id) = rx.recv().await {
        let Some(d) = daemon.upgrade() else { return };
        if let Ok(Some(o)) = d.engine.outcome(id) {
            metrics::job_ended(match o.status {
                JobStatus::Completed => "completed",
                JobStatus::Failed(_) => "failed",
                JobStatus::Cancelled => "cancelled",
            });
        }
        let mut jobs = d.jobs();
        ended(&mut jobs, id, d.config.keep_finished);
    }
}
