//! The engine: shared state, the public calls, and job bookkeeping. The threads live in
//! `pipeline.rs`.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bls12_381::Bls12;
use gpu_device::Gpu;
use groth16_prover::{CpuBackend, GpuBackend, ProverBackend, ProvingKey, QueryLens, Randomness};
use memory_budget::{Budget, BudgetSnapshot, Category};
use pce_cache::{PceError, PceHandle};
use srs_store::{SrsSpec, SrsStore, StoreConfig, Tier};

use crate::error::EngineError;
use crate::job::{
    JobId, JobOutcome, JobSpec, JobStatus, JobTimings, Partition, PartitionTrace, Priority,
};
use crate::metrics;
use crate::pipeline;

/// A device the engine proves on.
pub enum DeviceConfig {
    /// A CUDA device: the GPU backend (bases on the device tier when they fit), then, for
    /// a partition whose device work failed, the same device with the key streamed from
    /// pinned memory, then the CPU.
    Gpu(Gpu),
    /// Any backend behind the device interface (a CPU backend on a machine without a GPU,
    /// or a simulated device in tests); a failed partition is retried on the CPU.
    Backend {
        /// Its name in status and outcomes.
        name: String,
        /// The backend.
        backend: Arc<dyn ProverBackend>,
    },
}

impl std::fmt::Debug for DeviceConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeviceConfig::Gpu(g) => write!(f, "Gpu({})", g.info().ordinal),
            DeviceConfig::Backend { name, .. } => write!(f, "Backend({name})"),
        }
    }
}

/// How a job is stopped by [`Engine::shutdown`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shutdown {
    /// Accept nothing new; let every submitted job finish.
    Graceful,
    /// Accept nothing new; cancel every unfinished job.
    Abort,
}

/// How long one attempt to load a key or a PCE in admission should wait for the budget
/// (the `reserve_timeout` to give an [`SrsStore`] shared with an engine, and the
/// `admission_timeout` to give a `pce_cache::PceCache` behind a [`PceSource::OnDemand`]):
/// admission polls between attempts.
pub const KEY_LOAD_WAIT: Duration = Duration::from_millis(20);

/// Engine settings.
pub struct EngineConfig {
    /// The host memory budget every large allocation is charged to.
    pub budget: Budget,
    /// The devices, one worker each.
    pub devices: Vec<DeviceConfig>,
    /// The parameter store (`None`: one on `budget` whose loads wait for room, one
    /// [`KEY_LOAD_WAIT`] per attempt). Its `reserve_timeout` is how long one attempt to
    /// load a key waits for the budget; admission tries again at each poll, so a waiting
    /// load can still step back for a more urgent job, end with its job, or be found
    /// never to fit. `None` there waits inside the store, where none of that happens.
    pub store: Option<SrsStore>,
    /// Synthesized partitions queued for a busy device, per device (the hand-off; each
    /// holds its working set while it waits).
    pub handoff_depth: usize,
    /// Most partitions synthesizing at once (or synthesized and blocked on a full
    /// hand-off), a ceiling on top of the budget (which admits them by their working
    /// sets); `None`: the number of cores.
    pub max_synthesis: Option<usize>,
    /// Verify every proof against the key before it is returned.
    pub self_check: bool,
    /// Finished jobs remembered for `await` (the oldest are forgotten first).
    pub keep_finished: usize,
    /// Called once per job when it ends, after its outcome is recorded (from an engine
    /// thread, under the job's lock: it must return quickly and must not call the engine;
    /// a daemon forwards the id to a channel).
    pub on_job_end: Option<JobEndHook>,
    /// How long a partition waits in admission while it can never fit before its job
    /// fails (default 10 s): no other partition runs, so none will free memory, and what
    /// stays charged plus what it asks for is above the budget's ceiling (lowered by
    /// what the kernel charges beyond the charges). The wait lets that untracked usage
    /// fall back; the job's error gives the sizes.
    pub never_fits_after: Duration,
    /// Pin each device's staging buffers for a circuit's proofs when it is registered
    /// (default true; [`Engine::prewarm_staging`]): as many as the proofs a device holds
    /// at once (the one on it and the hand-off's), within the budget's room. Pinning
    /// while proofs run slows them (the driver's locks); a fresh engine's first job then
    /// runs as fast as the next.
    pub prewarm_staging: bool,
    /// Whether a CUDA device evaluates a, b and c itself from each partition's witness,
    /// the circuit's PCE kept in its VRAM (default true; `GpuBackend::with_device_abc`):
    /// synthesis then computes only the witness. Off: the host evaluates them into
    /// pinned buffers that are copied to the device.
    pub device_abc: bool,
}

/// See [`EngineConfig::on_job_end`].
pub type JobEndHook = Arc<dyn Fn(JobId) + Send + Sync>;

impl EngineConfig {
    /// Defaults on `budget` and `devices`.
    pub fn new(budget: Budget, devices: Vec<DeviceConfig>) -> EngineConfig {
        EngineConfig {
            budget,
            devices,
            store: None,
            handoff_depth: 1,
            max_synthesis: None,
            self_check: true,
            keep_finished: 4096,
            on_job_end: None,
            never_fits_after: Duration::from_secs(10),
            prewarm_staging: true,
            device_abc: true,
        }
    }
}

/// Where a registered circuit's PCE comes from.
pub enum PceSource {
    /// A PCE the caller holds (kept as long as the circuit is registered).
    Held(PceHandle),
    /// Fetched per partition from a `pce_cache::PceCache` (recorded or loaded on demand,
    /// evicted when idle). Admission tries again at each poll when the budget refused a
    /// fetch, so give the cache `admission_timeout: Some(KEY_LOAD_WAIT)`: with `None` a
    /// load that does not fit waits inside the cache, holding up admission.
    OnDemand(Arc<dyn Fn() -> Result<PceHandle, PceError> + Send + Sync>),
}

impl std::fmt::Debug for PceSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PceSource::Held(_) => f.write_str("Held"),
            PceSource::OnDemand(_) => f.write_str("OnDemand"),
        }
    }
}

/// A circuit the engine can prove: its parameter file and its PCE.
#[derive(Debug)]
pub struct CircuitSpec {
    /// Its name in jobs.
    pub id: String,
    /// The parameter file (read through the engine's store; loaded on demand).
    pub params: SrsSpec,
    /// The PCE.
    pub pce: PceSource,
}

pub(crate) struct CircuitRt {
    pub(crate) id: String,
    pub(crate) key: Arc<ProvingKey>,
    pce: PceSource,
    /// Partitions admitted and not yet done.
    in_progress: AtomicUsize,
    /// Partitions taken from the queue and waiting in admission.
    pub(crate) admitting: AtomicUsize,
}

impl CircuitRt {
    pub(crate) fn pce(&self) -> Result<PceHandle, PceError> {
        match &self.pce {
            PceSource::Held(h) => Ok(h.clone()),
            PceSource::OnDemand(f) => f(),
        }
    }

    pub(crate) fn lens(&self) -> QueryLens {
        self.key.lens()
    }
}

/// A device at run time.
pub(crate) struct DeviceRt {
    pub(crate) name: String,
    pub(crate) gpu: Option<Gpu>,
    /// Backends by attempt: the device's own first, the fallbacks after it.
    pub(crate) backends: Vec<Arc<dyn ProverBackend>>,
    pub(crate) tx: Mutex<Option<crossbeam::channel::Sender<pipeline::Work>>>,
    /// Partitions routed here and not yet off the device.
    pub(crate) in_flight: AtomicUsize,
    pub(crate) current_job: Mutex<Option<JobId>>,
    pub(crate) partitions_done: AtomicU64,
    /// Circuits proved here recently, most recent last (affinity).
    pub(crate) recent: Mutex<VecDeque<String>>,
    /// Partitions whose a, b and c were copied to it ahead of their turn and are not yet
    /// on it: at most one per place a synthesized partition can wait for the device (the
    /// hand-off's depth, and the one blocked on entering it), each holding its a, b, c in
    /// device memory, each copied only when the device has room for them beside another
    /// proof's MSM scratch (`Prover::prefetch`).
    pub(crate) prefetched: Arc<AtomicUsize>,
}

/// One queued partition.
pub(crate) struct Queued {
    pub(crate) job: Arc<JobRt>,
    pub(crate) index: usize,
    /// 0: the device's own backend; then its fallbacks.
    pub(crate) attempt: usize,
    /// The device of a retry (the failed partition's device).
    pub(crate) device: Option<usize>,
}

/// Queue order: priority (highest first), then FIFO (retries first).
pub(crate) type QueueKey = (std::cmp::Reverse<Priority>, i64);

pub(crate) struct JobRt {
    pub(crate) id: JobId,
    pub(crate) circuit: Arc<CircuitRt>,
    /// The partitions' witness sources, dropped when the job ends (a finished job is
    /// remembered for `await` without its witnesses).
    partitions: Mutex<Vec<Partition>>,
    pub(crate) n_partitions: usize,
    pub(crate) priority: Priority,
    pub(crate) randomness: Vec<Randomness>,
    pub(crate) submitted: Instant,
    pub(crate) cancelled: AtomicBool,
    /// Set once the outcome is recorded, before the job table's lock is taken to announce
    /// it: waiters holding that lock read this flag, never the progress lock (which
    /// `finish` holds while it takes the table's: the other order would deadlock).
    pub(crate) ended: AtomicBool,
    pub(crate) progress: Mutex<Progress>,
}

#[derive(Default)]
pub(crate) struct Progress {
    proofs: Vec<Option<groth16::Proof<Bls12>>>,
    devices: Vec<String>,
    /// The device each admitted partition went to (in admission order, once each).
    assigned: Vec<usize>,
    remaining: usize,
    pub(crate) timings: JobTimings,
    /// Each completed partition's timeline (by index).
    traces: Vec<PartitionTrace>,
    first_admitted: Option<Instant>,
    outcome: Option<JobOutcome>,
}

impl JobRt {
    /// Partition `index`'s witness source, `None` once the job has ended.
    pub(crate) fn partition(&self, index: usize) -> Option<Partition> {
        self.partitions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(index)
            .cloned()
    }

    /// Whether the job has ended or been cancelled (its partitions stop).
    pub(crate) fn is_stopped(&self) -> bool {
        self.cancelled.load(Ordering::Acquire)
    }

    /// Whether the outcome is recorded (safe under the job table's lock).
    pub(crate) fn has_ended(&self) -> bool {
        self.ended.load(Ordering::Acquire)
    }

    pub(crate) fn progress(&self) -> MutexGuard<'_, Progress> {
        self.progress.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Partitions in each pipeline stage now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StageCounts {
    /// Waiting for their key and working set to be admitted.
    pub admitting: usize,
    /// Synthesizing on the CPU.
    pub synthesizing: usize,
    /// Synthesized, waiting for their device.
    pub waiting_device: usize,
    /// On a device (H and the MSMs).
    pub on_device: usize,
    /// Being assembled and checked.
    pub assembling: usize,
}

/// One device's state.
#[derive(Clone, Debug)]
pub struct DeviceStatus {
    /// Its name.
    pub name: String,
    /// The CUDA ordinal of a GPU device.
    pub ordinal: Option<usize>,
    /// The job on it now.
    pub current_job: Option<JobId>,
    /// Partitions routed to it and not yet off it.
    pub in_flight: usize,
    /// Partitions it finished.
    pub partitions_done: u64,
}

/// A registered circuit's state.
#[derive(Clone, Debug)]
pub struct CircuitStatus {
    /// Its id.
    pub id: String,
    /// Where its parameters are (`None`: not loaded yet).
    pub tier: Option<Tier>,
    /// Its partitions not yet admitted (queued, or waiting in admission for a synthesis
    /// slot, the key or memory).
    pub queued: usize,
    /// Its partitions admitted and not yet done.
    pub in_progress: usize,
}

/// A snapshot of the engine.
#[derive(Clone, Debug)]
pub struct EngineStatus {
    /// Queued partitions by priority (low, normal, high, critical).
    pub queued: [usize; 4],
    /// Partitions per stage.
    pub stages: StageCounts,
    /// The devices.
    pub devices: Vec<DeviceStatus>,
    /// Registered circuits.
    pub circuits: Vec<CircuitStatus>,
    /// Jobs that completed.
    pub jobs_completed: u64,
    /// Jobs that failed.
    pub jobs_failed: u64,
    /// Jobs that were cancelled.
    pub jobs_cancelled: u64,
    /// The host budget now.
    pub budget: BudgetSnapshot,
}

pub(crate) struct Queue {
    pub(crate) items: BTreeMap<QueueKey, Queued>,
    next_seq: i64,
    next_retry_seq: i64,
}

pub(crate) struct Shared {
    pub(crate) budget: Budget,
    pub(crate) store: SrsStore,
    pub(crate) devices: Vec<DeviceRt>,
    pub(crate) circuits: RwLock<HashMap<String, Arc<CircuitRt>>>,
    pub(crate) queue: Mutex<Queue>,
    pub(crate) queue_cv: Condvar,
    jobs: Mutex<JobTable>,
    jobs_cv: Condvar,
    next_id: AtomicU64,
    accepting: AtomicBool,
    pub(crate) stopping: AtomicBool,
    pub(crate) self_check: bool,
    pub(crate) max_synthesis: usize,
    /// Partitions synthesizing that asked to be alone (`Partition::synthesized_alone`):
    /// 0 or 1, counted from their admission until their synthesis slot ends.
    pub(crate) synthesizing_alone: AtomicUsize,
    pub(crate) never_fits_after: Duration,
    keep_finished: usize,
    pub(crate) handoff_depth: usize,
    prewarm_staging: bool,
    /// Partitions admitted whose resources are not yet returned.
    in_flight: Mutex<usize>,
    in_flight_cv: Condvar,
    /// Stage gauges: admitting, synthesizing, waiting_device, on_device, assembling.
    pub(crate) stages: [AtomicI64; 5],
    pub(crate) stage_cv: (Mutex<()>, Condvar),
    on_job_end: Option<JobEndHook>,
    completed: AtomicU64,
    failed: AtomicU64,
    cancelled: AtomicU64,
    finished_seq: AtomicU64,
}

#[derive(Default)]
struct JobTable {
    jobs: HashMap<JobId, Arc<JobRt>>,
    finished: VecDeque<JobId>,
}

/// Indices of [`Shared::stages`].
#[derive(Clone, Copy, Debug)]
pub(crate) enum Stage {
    Admitting = 0,
    Synthesizing = 1,
    WaitingDevice = 2,
    OnDevice = 3,
    Assembling = 4,
}

impl Stage {
    fn name(self) -> &'static str {
        match self {
            Stage::Admitting => "admitting",
            Stage::Synthesizing => "synthesizing",
            Stage::WaitingDevice => "waiting_device",
            Stage::OnDevice => "on_device",
            Stage::Assembling => "assembling",
        }
    }
}

/// Counts a partition in a stage while it lives.
pub(crate) struct InStage<'a> {
    shared: &'a Shared,
    stage: Stage,
}

impl Drop for InStage<'_> {
    fn drop(&mut self) {
        self.shared.leave(self.stage);
    }
}

/// A partition's claim on the engine's resources: while it lives the partition counts as
/// in flight (shutdown waits for it) and, once admitted, in progress for its circuit.
pub(crate) struct InFlight {
    shared: Arc<Shared>,
    circuit: Option<Arc<CircuitRt>>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(c) = &self.circuit {
            c.in_progress.fetch_sub(1, Ordering::AcqRel);
        }
        let mut n = self
            .shared
            .in_flight
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        *n -= 1;
        self.shared.in_flight_cv.notify_all();
    }
}

impl Shared {
    pub(crate) fn enter(&self, stage: Stage) -> InStage<'_> {
        let n = self.stages[stage as usize].fetch_add(1, Ordering::AcqRel) + 1;
        metrics::stage(stage.name(), n);
        InStage {
            shared: self,
            stage,
        }
    }

    /// Ends a partition's stay in `stage` (the counterpart of [`Shared::enter`], also for
    /// a stay handed from one thread to another).
    pub(crate) fn leave(&self, stage: Stage) {
        let n = self.stages[stage as usize].fetch_sub(1, Ordering::AcqRel) - 1;
        metrics::stage(stage.name(), n);
        let (lock, cv) = &self.stage_cv;
        drop(lock.lock().unwrap_or_else(|e| e.into_inner()));
        cv.notify_all();
    }

    pub(crate) fn in_flight(self: &Arc<Self>, circuit: &Arc<CircuitRt>) -> InFlight {
        *self.in_flight.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        circuit.in_progress.fetch_add(1, Ordering::AcqRel);
        InFlight {
            shared: Arc::clone(self),
            circuit: Some(Arc::clone(circuit)),
        }
    }

    /// A partition taken off the queue and not yet admitted: shutdown waits for it too
    /// (what admission charges for it is let go, or handed to its [`InFlight`], before
    /// this ends), but it is not in progress for its circuit yet.
    pub(crate) fn in_admission(self: &Arc<Self>) -> InFlight {
        *self.in_flight.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        InFlight {
            shared: Arc::clone(self),
            circuit: None,
        }
    }

    pub(crate) fn stage_count(&self, stage: Stage) -> usize {
        self.stages[stage as usize].load(Ordering::Acquire).max(0) as usize
    }

    pub(crate) fn queue(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn jobs(&self) -> MutexGuard<'_, JobTable> {
        self.jobs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a partition (a retry goes ahead of its priority's other partitions).
    pub(crate) fn enqueue(&self, q: Queued) {
        let mut queue = self.queue();
        let seq = if q.attempt > 0 {
            queue.next_retry_seq -= 1;
            queue.next_retry_seq
        } else {
            queue.next_seq += 1;
            queue.next_seq
        };
        let prio = q.job.priority;
        queue.items.insert((std::cmp::Reverse(prio), seq), q);
        publish_queue(&queue);
        drop(queue);
        self.queue_cv.notify_all();
    }

    /// Puts a partition back where it was (admission found a higher priority ahead).
    pub(crate) fn requeue(&self, key: QueueKey, q: Queued) {
        let mut queue = self.queue();
        queue.items.insert(key, q);
        publish_queue(&queue);
        drop(queue);
        self.queue_cv.notify_all();
    }

    /// One partition proved.
    pub(crate) fn partition_done(
        &self,
        job: &JobRt,
        index: usize,
        proof: groth16::Proof<Bls12>,
        device: &str,
        trace: PartitionTrace,
    ) {
        let mut p = job.progress();
        if p.outcome.is_some() {
            return;
        }
        if p.proofs[index].is_none() {
            p.proofs[index] = Some(proof);
            p.devices[index] = device.to_string();
            p.traces[index] = trace;
            p.remaining -= 1;
        }
        if p.remaining == 0 {
            let proofs = p.proofs.iter_mut().filter_map(Option::take).collect();
            let devices = std::mem::take(&mut p.devices);
            self.finish(job, &mut p, JobStatus::Completed, proofs, devices);
        }
    }

    /// The job fails (first failure wins); its other partitions stop at their next phase.
    pub(crate) fn fail(&self, job: &JobRt, reason: String) {
        let mut p = job.progress();
        if p.outcome.is_none() {
            self.finish(
                job,
                &mut p,
                JobStatus::Failed(reason),
                Vec::new(),
                Vec::new(),
            );
        }
    }

    /// Records the admission of a partition of `job` to `device` (the first one's time is
    /// the job's queue wait).
    pub(crate) fn admitted(&self, job: &JobRt, device: usize) {
        let mut p = job.progress();
        if !p.assigned.contains(&device) {
            p.assigned.push(device);
        }
        if p.first_admitted.is_none() {
            p.first_admitted = Some(Instant::now());
            p.timings.queue_wait = job.submitted.elapsed();
        }
    }

    fn finish(
        &self,
        job: &JobRt,
        p: &mut Progress,
        status: JobStatus,
        proofs: Vec<groth16::Proof<Bls12>>,
        devices: Vec<String>,
    ) {
        job.cancelled.store(true, Ordering::Release);
        p.timings.total = job.submitted.elapsed();
        // The timeline of a completed job only (a failed one's is partial).
        let partitions = if matches!(status, JobStatus::Completed) {
            std::mem::take(&mut p.traces)
        } else {
            Vec::new()
        };
        let label = match &status {
            JobStatus::Completed => {
                self.completed.fetch_add(1, Ordering::Relaxed);
                "completed"
            }
            JobStatus::Failed(_) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
                "failed"
            }
            JobStatus::Cancelled => {
                self.cancelled.fetch_add(1, Ordering::Relaxed);
                "cancelled"
            }
        };
        metrics::job_finished(&job.circuit.id, label, job.n_partitions, &p.timings);
        // Partitions still running hold their own clone until their next phase boundary.
        drop(std::mem::take(
            &mut *job.partitions.lock().unwrap_or_else(|e| e.into_inner()),
        ));
        p.outcome = Some(JobOutcome {
            id: job.id,
            status,
            proofs,
            timings: p.timings,
            devices,
            sequence: self.finished_seq.fetch_add(1, Ordering::AcqRel) + 1,
            partitions,
        });
        job.ended.store(true, Ordering::Release);
        let mut table = self.jobs();
        table.finished.push_back(job.id);
        while table.finished.len() > self.keep_finished {
            if let Some(old) = table.finished.pop_front() {
                table.jobs.remove(&old);
            }
        }
        drop(table);
        self.jobs_cv.notify_all();
        if let Some(hook) = &self.on_job_end {
            hook(job.id);
        }
    }

    fn cancel_job(&self, job: &JobRt) -> bool {
        let mut p = job.progress();
        if p.outcome.is_some() {
            return false;
        }
        self.finish(job, &mut p, JobStatus::Cancelled, Vec::new(), Vec::new());
        drop(p);
        let mut queue = self.queue();
        queue.items.retain(|_, q| q.job.id != job.id);
        publish_queue(&queue);
        true
    }
}

fn publish_queue(queue: &Queue) {
    let mut depth = [0usize; 4];
    for ((std::cmp::Reverse(p), _), _) in queue.items.iter() {
        depth[p.index()] += 1;
    }
    for p in Priority::ALL {
        metrics::queue_depth(p.name(), depth[p.index()]);
    }
}

/// The proving engine. See the crate docs.
pub struct Engine {
    shared: Arc<Shared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// The host memory of the GPUs' contexts, charged while the engine runs.
    _context_charges: Vec<memory_budget::Reservation>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("devices", &self.shared.devices.len())
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// Starts the engine's threads: admission, one worker per device, assembly. A thread
    /// the OS refuses is [`EngineError::Thread`], the others stopped again.
    pub fn start(config: EngineConfig) -> Result<Engine, EngineError> {
        Engine::start_with(config, |builder, body| builder.spawn(body))
    }

    /// [`Engine::start`] with the OS's thread creation as `spawner`.
    fn start_with(
        config: EngineConfig,
        spawner: impl FnMut(
            std::thread::Builder,
            pipeline::ThreadBody,
        ) -> std::io::Result<JoinHandle<()>>,
    ) -> Result<Engine, EngineError> {
        if config.devices.is_empty() {
            return Err(EngineError::NoDevices);
        }
        let budget = config.budget.clone();
        let store = config.store.clone().unwrap_or_else(|| {
            SrsStore::new(
                budget.clone(),
                StoreConfig {
                    reserve_timeout: Some(KEY_LOAD_WAIT),
                    ..StoreConfig::default()
                },
            )
        });
        let cpu: Arc<dyn ProverBackend> = Arc::new(CpuBackend::new(budget.clone()));
        let mut devices = Vec::new();
        let mut receivers = Vec::new();
        let mut contexts = Vec::new();
        let depth = config.handoff_depth.max(1);
        for d in config.devices {
            let (name, gpu, backends): (String, Option<Gpu>, Vec<Arc<dyn ProverBackend>>) = match d
            {
                DeviceConfig::Gpu(gpu) => {
                    let ordinal = gpu.info().ordinal;
                    // The host memory opening the device took is in use already: charge it
                    // for the engine's life, so what the budget reports matches the kernel.
                    let bytes = gpu.context_host_bytes();
                    if bytes > 0 {
                        let charge = budget
                            .request(bytes, Category::Other)
                            .label(format!("gpu{ordinal} context"))
                            .try_reserve()
                            .map_err(|source| EngineError::ContextMemory {
                                name: format!("gpu{ordinal}"),
                                bytes,
                                source,
                            })?;
                        contexts.push(charge);
                    }
                    let primary = GpuBackend::with_gpu(gpu.clone(), budget.clone())
                        .with_device_abc(config.device_abc);
                    let streamed = GpuBackend::with_gpu(gpu.clone(), budget.clone())
                        .with_placement(groth16_prover::GpuPlacement::Pinned);
                    (
                        format!("gpu{ordinal}"),
                        Some(gpu),
                        vec![Arc::new(primary), Arc::new(streamed), cpu.clone()],
                    )
                }
                DeviceConfig::Backend { name, backend } => (name, None, vec![backend, cpu.clone()]),
            };
            let (tx, rx) = crossbeam::channel::bounded(depth);
            receivers.push(rx);
            devices.push(DeviceRt {
                name,
                gpu,
                backends,
                tx: Mutex::new(Some(tx)),
                in_flight: AtomicUsize::new(0),
                current_job: Mutex::new(None),
                partitions_done: AtomicU64::new(0),
                recent: Mutex::new(VecDeque::new()),
                prefetched: Arc::new(AtomicUsize::new(0)),
            });
        }
        let max_synthesis = config.max_synthesis.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get)
        });
        let shared = Arc::new(Shared {
            budget,
            store,
            devices,
            circuits: RwLock::new(HashMap::new()),
            queue: Mutex::new(Queue {
                items: BTreeMap::new(),
                next_seq: 0,
                next_retry_seq: 0,
            }),
            queue_cv: Condvar::new(),
            jobs: Mutex::new(JobTable::default()),
            jobs_cv: Condvar::new(),
            next_id: AtomicU64::new(1),
            accepting: AtomicBool::new(true),
            stopping: AtomicBool::new(false),
            self_check: config.self_check,
            max_synthesis: max_synthesis.max(1),
            synthesizing_alone: AtomicUsize::new(0),
            keep_finished: config.keep_finished.max(1),
            never_fits_after: config.never_fits_after,
            handoff_depth: depth,
            prewarm_staging: config.prewarm_staging,
            in_flight: Mutex::new(0),
            in_flight_cv: Condvar::new(),
            stages: std::array::from_fn(|_| AtomicI64::new(0)),
            stage_cv: (Mutex::new(()), Condvar::new()),
            on_job_end: config.on_job_end,
            completed: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            cancelled: AtomicU64::new(0),
            finished_seq: AtomicU64::new(0),
        });
        let (threads, failed) = match pipeline::spawn_with(&shared, receivers, spawner) {
            Ok(threads) => (threads, None),
            Err(f) => (f.started, Some((f.thread, f.source))),
        };
        let engine = Engine {
            shared,
            threads: Mutex::new(threads),
            _context_charges: contexts,
        };
        match failed {
            None => Ok(engine),
            // Dropping it shuts it down: no job was accepted yet, so that is only the
            // threads seeing `stopping` and their channels closed, and joining them.
            Some((thread, source)) => Err(EngineError::Thread { thread, source }),
        }
    }

    /// Registers a circuit: reads its verifying key and section headers now (checked);
    /// its bases are loaded through the store by the first partition that needs them.
    /// With [`EngineConfig::prewarm_staging`], then pins the devices' staging buffers
    /// for its proofs ([`Engine::prewarm_staging`]; seconds for a large circuit); a
    /// driver failure there is [`EngineError::Prewarm`] and leaves it unregistered.
    pub fn register(&self, spec: CircuitSpec) -> Result<(), EngineError> {
        let id = spec.id.clone();
        self.register_inner(spec)?;
        if self.shared.prewarm_staging {
            if let Err(e) = self.prewarm_staging(&id) {
                // Not registered after all: no job can have named it yet (registration
                // had not returned), and its buffers stay idle in the pools.
                self.shared
                    .circuits
                    .write()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&id);
                return Err(e);
            }
        }
        Ok(())
    }

    /// Pins, on every device, the staging buffers of as many of `circuit`'s proofs as the
    /// device holds at once (one proving, [`EngineConfig::handoff_depth`] handed off),
    /// charged to the budget as idle pooled buffers, within its room: nothing is
    /// evicted for them and what does not fit is pinned by the proofs as before; the
    /// budget can evict them like any idle staging. Returns the bytes of such buffers
    /// idle on all devices now (0 for backends without staging). Idempotent.
    pub fn prewarm_staging(&self, circuit: &str) -> Result<u64, EngineError> {
        let rt = self
            .shared
            .circuits
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(circuit)
            .cloned()
            .ok_or_else(|| EngineError::UnknownCircuit {
                circuit: circuit.to_string(),
            })?;
        let lens = rt.lens();
        if lens.h == 0 {
            return Ok(0);
        }
        let m = lens.domain_size();
        let mut bytes = 0;
        for d in &self.shared.devices {
            if let Some(backend) = d.backends.first() {
                let err = |source| EngineError::Prewarm {
                    circuit: circuit.to_string(),
                    device: d.name.clone(),
                    source: Box::new(source),
                };
                // A held PCE goes to a device that evaluates a, b and c itself now, not
                // during the first job's admission.
                if let PceSource::Held(pce) = &rt.pce {
                    backend.evaluates_abc(pce, m).map_err(err)?;
                }
                bytes += backend
                    .prewarm_staging(m, 1 + self.shared.handoff_depth)
                    .map_err(err)?;
            }
        }
        Ok(bytes)
    }

    fn register_inner(&self, spec: CircuitSpec) -> Result<(), EngineError> {
        let mut circuits = self
            .shared
            .circuits
            .write()
            .unwrap_or_else(|e| e.into_inner());
        if circuits.contains_key(&spec.id) {
            return Err(EngineError::DuplicateCircuit { circuit: spec.id });
        }
        let key = ProvingKey::from_store(&self.shared.store, spec.params).map_err(|source| {
            EngineError::Key {
                circuit: spec.id.clone(),
                source: Box::new(source),
            }
        })?;
        circuits.insert(
            spec.id.clone(),
            Arc::new(CircuitRt {
                id: spec.id,
                key: Arc::new(key),
                pce: spec.pce,
                in_progress: AtomicUsize::new(0),
                admitting: AtomicUsize::new(0),
            }),
        );
        Ok(())
    }

    /// The store the engine's keys live in.
    pub fn store(&self) -> &SrsStore {
        &self.shared.store
    }

    /// The host budget.
    pub fn budget(&self) -> &Budget {
        &self.shared.budget
    }

    /// The most partitions synthesizing at once ([`EngineConfig::max_synthesis`], or its
    /// default, the number of cores).
    pub fn max_synthesis(&self) -> usize {
        self.shared.max_synthesis
    }

    /// Queues a job; returns its id at once.
    pub fn submit(&self, spec: JobSpec) -> Result<JobId, EngineError> {
        if !self.shared.accepting.load(Ordering::Acquire) {
            return Err(EngineError::ShuttingDown);
        }
        let circuit = self
            .shared
            .circuits
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&spec.circuit)
            .cloned()
            .ok_or_else(|| EngineError::UnknownCircuit {
                circuit: spec.circuit.clone(),
            })?;
        let n = spec.partitions.len();
        if n == 0 {
            return Err(EngineError::NoPartitions);
        }
        let randomness = match spec.randomness {
            Some(rs) if rs.len() != n => {
                return Err(EngineError::RandomnessCount {
                    n_partitions: n,
                    n_randomness: rs.len(),
                })
            }
            Some(rs) => rs,
            // Blinding for zero knowledge: from the thread's CSPRNG (rand's ThreadRng).
            None => (0..n)
                .map(|_| Randomness::random(&mut rand::rng()))
                .collect(),
        };
        let id = JobId(self.shared.next_id.fetch_add(1, Ordering::Relaxed));
        let job = Arc::new(JobRt {
            id,
            circuit,
            partitions: Mutex::new(spec.partitions),
            n_partitions: n,
            priority: spec.priority,
            randomness,
            submitted: Instant::now(),
            cancelled: AtomicBool::new(false),
            ended: AtomicBool::new(false),
            progress: Mutex::new(Progress {
                proofs: vec![None; n],
                devices: vec![String::new(); n],
                traces: vec![PartitionTrace::default(); n],
                remaining: n,
                ..Progress::default()
            }),
        });
        self.shared.jobs().jobs.insert(id, Arc::clone(&job));
        metrics::job_submitted(spec.priority.name());
        for index in 0..n {
            self.shared.enqueue(Queued {
                job: Arc::clone(&job),
                index,
                attempt: 0,
                device: None,
            });
        }
        Ok(id)
    }

    /// Waits for a job to end, at most `timeout` (`None`: forever).
    pub fn await_job(
        &self,
        id: JobId,
        timeout: Option<Duration>,
    ) -> Result<JobOutcome, EngineError> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut table = self.shared.jobs();
        loop {
            let job = table
                .jobs
                .get(&id)
                .cloned()
                .ok_or(EngineError::UnknownJob { id })?;
            if job.has_ended() {
                // The table's lock is let go before the progress lock is taken.
                drop(table);
                let outcome = job.progress().outcome.clone();
                return outcome.ok_or(EngineError::UnknownJob { id });
            }
            table = match deadline {
                None => self
                    .shared
                    .jobs_cv
                    .wait(table)
                    .unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return Err(EngineError::Timeout {
                            id,
                            timeout: timeout.unwrap_or_default(),
                        });
                    }
                    self.shared
                        .jobs_cv
                        .wait_timeout(table, d - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
            };
        }
    }

    /// The outcome of a finished job, `None` while it runs.
    pub fn outcome(&self, id: JobId) -> Result<Option<JobOutcome>, EngineError> {
        let job = self
            .shared
            .jobs()
            .jobs
            .get(&id)
            .cloned()
            .ok_or(EngineError::UnknownJob { id })?;
        let outcome = job.progress().outcome.clone();
        Ok(outcome)
    }

    /// The names of the devices the job's partitions were admitted to so far (admission
    /// order, each once; empty while every partition is queued).
    pub fn job_devices(&self, id: JobId) -> Result<Vec<String>, EngineError> {
        let job = self
            .shared
            .jobs()
            .jobs
            .get(&id)
            .cloned()
            .ok_or(EngineError::UnknownJob { id })?;
        let assigned = job.progress().assigned.clone();
        Ok(assigned
            .into_iter()
            .map(|d| self.shared.devices[d].name.clone())
            .collect())
    }

    /// Partitions queued ahead of the job's first queued partition (0 when it runs or
    /// has ended).
    pub fn queue_position(&self, id: JobId) -> usize {
        let queue = self.shared.queue();
        queue
            .items
            .values()
            .position(|q| q.job.id == id)
            .unwrap_or(0)
    }

    /// Cancels a job: queued partitions leave with nothing charged, running ones stop at
    /// their next phase boundary and return every byte. Returns whether it was still
    /// running (false when it had already ended).
    pub fn cancel(&self, id: JobId) -> Result<bool, EngineError> {
        let job = self
            .shared
            .jobs()
            .jobs
            .get(&id)
            .cloned()
            .ok_or(EngineError::UnknownJob { id })?;
        Ok(self.shared.cancel_job(&job))
    }

    /// A snapshot of queues, stages, devices, circuits, counters and the budget.
    pub fn status(&self) -> EngineStatus {
        let mut queued = [0usize; 4];
        let mut queued_by_circuit: HashMap<String, usize> = HashMap::new();
        for ((std::cmp::Reverse(p), _), q) in self.shared.queue().items.iter() {
            queued[p.index()] += 1;
            *queued_by_circuit
                .entry(q.job.circuit.id.clone())
                .or_default() += 1;
        }
        let s = &self.shared;
        let stages = StageCounts {
            admitting: s.stage_count(Stage::Admitting),
            synthesizing: s.stage_count(Stage::Synthesizing),
            waiting_device: s.stage_count(Stage::WaitingDevice),
            on_device: s.stage_count(Stage::OnDevice),
            assembling: s.stage_count(Stage::Assembling),
        };
        let devices = s
            .devices
            .iter()
            .map(|d| DeviceStatus {
                name: d.name.clone(),
                ordinal: d.gpu.as_ref().map(|g| g.info().ordinal),
                current_job: *d.current_job.lock().unwrap_or_else(|e| e.into_inner()),
                in_flight: d.in_flight.load(Ordering::Acquire),
                partitions_done: d.partitions_done.load(Ordering::Relaxed),
            })
            .collect();
        let mut circuits: Vec<CircuitStatus> = s
            .circuits
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .map(|c| CircuitStatus {
                id: c.id.clone(),
                tier: c.key.tier(),
                queued: queued_by_circuit.get(&c.id).copied().unwrap_or(0)
                    + c.admitting.load(Ordering::Acquire),
                in_progress: c.in_progress.load(Ordering::Acquire),
            })
            .collect();
        circuits.sort_by(|a, b| a.id.cmp(&b.id));
        EngineStatus {
            queued,
            stages,
            devices,
            circuits,
            jobs_completed: s.completed.load(Ordering::Relaxed),
            jobs_failed: s.failed.load(Ordering::Relaxed),
            jobs_cancelled: s.cancelled.load(Ordering::Relaxed),
            budget: s.budget.snapshot(),
        }
    }

    /// Stops accepting jobs, lets them finish (or cancels them), waits until every
    /// partition has returned its resources, and stops the threads. Idempotent.
    pub fn shutdown(&self, how: Shutdown) {
        self.shared.accepting.store(false, Ordering::Release);
        if how == Shutdown::Abort {
            let jobs: Vec<Arc<JobRt>> = self.shared.jobs().jobs.values().cloned().collect();
            for j in jobs {
                self.shared.cancel_job(&j);
            }
        }
        // Every job ends (graceful: by finishing), then every partition lets go.
        {
            let mut table = self.shared.jobs();
            while table.jobs.values().any(|j| !j.has_ended()) {
                table = self
                    .shared
                    .jobs_cv
                    .wait(table)
                    .unwrap_or_else(|e| e.into_inner());
            }
        }
        {
            let mut n = self
                .shared
                .in_flight
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            while *n > 0 {
                n = self
                    .shared
                    .in_flight_cv
                    .wait(n)
                    .unwrap_or_else(|e| e.into_inner());
            }
        }
        self.shared.stopping.store(true, Ordering::Release);
        {
            let _q = self.shared.queue();
            self.shared.queue_cv.notify_all();
        }
        for d in &self.shared.devices {
            d.tx.lock().unwrap_or_else(|e| e.into_inner()).take();
        }
        let threads: Vec<JoinHandle<()>> =
            std::mem::take(&mut *self.threads.lock().unwrap_or_else(|e| e.into_inner()));
        for t in threads {
            let _ = t.join();
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.shutdown(Shutdown::Abort);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// Each of the engine's threads refused in turn at start: a typed error naming it,
    /// and every thread started before it stopped again (joined, none left running).
    #[test]
    fn a_refused_thread_is_a_typed_error_and_the_started_ones_stop() {
        let names = [
            "pinion-device-0",
            "pinion-device-1",
            "pinion-assembly",
            "pinion-admission",
        ];
        for (refuse, want) in names.iter().enumerate() {
            let budget = Budget::fixed(1 << 30);
            let devices = (0..2)
                .map(|i| DeviceConfig::Backend {
                    name: format!("cpu{i}"),
                    backend: Arc::new(CpuBackend::new(budget.clone())),
                })
                .collect();
            let started = Arc::new(AtomicUsize::new(0));
            let ended = Arc::new(AtomicUsize::new(0));
            let mut calls = 0;
            let (s, e) = (Arc::clone(&started), Arc::clone(&ended));
            let (done_tx, done_rx) = mpsc::channel();
            // Start it on a thread of its own so that a shutdown that never returns fails
            // the test instead of hanging it.
            std::thread::spawn(move || {
                let r = Engine::start_with(EngineConfig::new(budget, devices), |builder, body| {
                    calls += 1;
                    if calls == refuse + 1 {
                        return Err(std::io::Error::new(
                            std::io::ErrorKind::WouldBlock,
                            "refused by the test",
                        ));
                    }
                    s.fetch_add(1, Ordering::SeqCst);
                    let e = Arc::clone(&e);
                    builder.spawn(move || {
                        body();
                        e.fetch_add(1, Ordering::SeqCst);
                    })
                });
                let _ = done_tx.send(r.map(|_| ()));
            });
            let r = done_rx
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("refusing {want}: start did not return"));
            match r {
                Err(EngineError::Thread { thread, source }) => {
                    assert_eq!(thread, *want);
                    assert_eq!(source.kind(), std::io::ErrorKind::WouldBlock);
                }
                other => panic!("refusing {want}: {other:?}"),
            }
            assert_eq!(started.load(Ordering::SeqCst), refuse, "refusing {want}");
            assert_eq!(
                ended.load(Ordering::SeqCst),
                refuse,
                "refusing {want}: threads left running"
            );
        }
    }
}
