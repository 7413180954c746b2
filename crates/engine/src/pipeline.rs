//! The engine's threads: admission (priority order, key then working set, through the
//! budget's waiting reservations), synthesis (one thread per admitted partition, as many
//! as the budget admits up to a ceiling), one worker per device (H and the MSMs), and
//! assembly (proof and self-check). Hand-offs are bounded channels, so a synthesized
//! partition waits for its device holding only its own working set, and keeps its
//! synthesis slot until the hand-off takes it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam::channel::{Receiver, Sender};
use groth16_prover::{
    Computed, GpuPlacement, KeyHold, Prover, ProverConfig, ProverError, SelfCheck, Synthesized,
};
use memory_budget::{BudgetError, Category, Reservation};
use pce_cache::PceHandle;

use crate::engine::{InFlight, JobRt, Queued, Shared, Stage};
use crate::job::PartitionTrace;
use crate::metrics;

/// How often a partition waiting for its working set looks for a higher priority queued
/// behind it (and for its own cancellation).
const ADMISSION_POLL: Duration = Duration::from_millis(20);

/// A partition on its way through the pipeline, with everything it holds: its key's
/// store entry, its PCE and (inside `synthesized`) its working set.
pub(crate) struct Work {
    job: Arc<JobRt>,
    index: usize,
    attempt: usize,
    device: usize,
    prover: Prover,
    _pce: PceHandle,
    hold: KeyHold,
    synthesized: Option<Synthesized>,
    /// Synthesized alone (`Partition::synthesized_alone`): counted in
    /// `Shared::synthesizing_alone` until its synthesis slot ends.
    alone: bool,
    /// When its phases ran (offsets from the job's submission).
    trace: PartitionTrace,
    _in_flight: InFlight,
    /// Its a, b and c were copied to its device ahead of its turn (`Prover::prefetch`):
    /// one of the device's slots for that, given back when the worker takes it (or it is
    /// dropped).
    prefetched: Option<PrefetchSlot>,
}

/// One of the device's slots for a partition copied to it ahead of its turn.
struct PrefetchSlot(Arc<AtomicUsize>);

impl PrefetchSlot {
    /// A slot if fewer than `limit` are held.
    fn take(held: &Arc<AtomicUsize>, limit: usize) -> Option<PrefetchSlot> {
        held.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < limit).then_some(n + 1)
        })
        .ok()
        .map(|_| PrefetchSlot(Arc::clone(held)))
    }
}

impl Drop for PrefetchSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Work {
    /// Now, as an offset from the job's submission.
    fn at(&self, t: Instant) -> Duration {
        t.saturating_duration_since(self.job.submitted)
    }
}

/// A thread [`spawn_with`] could not start, with the ones it had started (stopped by the
/// engine's shutdown, which they all follow).
pub(crate) struct SpawnFailed {
    pub(crate) started: Vec<JoinHandle<()>>,
    pub(crate) thread: String,
    pub(crate) source: std::io::Error,
}

/// A thread's body, as [`spawn_with`]'s spawner takes it.
pub(crate) type ThreadBody = Box<dyn FnOnce() + Send + 'static>;

/// Starts admission, the device workers and assembly, each thread through `spawner`
/// (the OS's thread creation; a test's can refuse).
pub(crate) fn spawn_with(
    shared: &Arc<Shared>,
    receivers: Vec<Receiver<Work>>,
    mut spawner: impl FnMut(std::thread::Builder, ThreadBody) -> std::io::Result<JoinHandle<()>>,
) -> Result<Vec<JoinHandle<()>>, SpawnFailed> {
    let mut started = Vec::new();
    let mut start = |name: String, body: ThreadBody| {
        let handle = spawner(std::thread::Builder::new().name(name.clone()), body)
            .map_err(|source| (name, source))?;
        started.push(handle);
        Ok::<(), (String, std::io::Error)>(())
    };
    let start_all = || {
        let (asm_tx, asm_rx) = crossbeam::channel::unbounded::<(Work, Computed)>();
        for (i, rx) in receivers.into_iter().enumerate() {
            let (s, tx) = (Arc::clone(shared), asm_tx.clone());
            start(
                format!("pinion-device-{i}"),
                Box::new(move || device_worker(&s, i, &rx, &tx)),
            )?;
        }
        drop(asm_tx);
        let s = Arc::clone(shared);
        start(
            "pinion-assembly".into(),
            Box::new(move || {
                for (work, computed) in asm_rx {
                    assemble(&s, work, computed);
                }
            }),
        )?;
        let s = Arc::clone(shared);
        start("pinion-admission".into(), Box::new(move || admission(&s)))
    };
    match start_all() {
        Ok(()) => Ok(started),
        Err((thread, source)) => Err(SpawnFailed {
            started,
            thread,
            source,
        }),
    }
}

/// Takes partitions in priority order and admits each: synthesis slot, key, working set.
fn admission(shared: &Arc<Shared>) {
    loop {
        // Counted in flight before the queue's lock is let go: an abort removes a
        // cancelled job's queued partitions under that lock and then waits for the
        // partitions in flight, so one taken just before it (and whatever admission
        // charges for it) is waited for, not left running after shutdown returns.
        let (key, q, in_admission) = {
            let mut queue = shared.queue();
            loop {
                if shared.stopping.load(Ordering::Acquire) {
                    return;
                }
                if let Some((key, q)) = queue.items.pop_first() {
                    break (key, q, shared.in_admission());
                }
                queue = shared
                    .queue_cv
                    .wait(queue)
                    .unwrap_or_else(|e| e.into_inner());
            }
        };
        if q.job.is_stopped() {
            continue;
        }
        // An admitted partition's own `InFlight` exists before `admit` returns.
        admit(shared, key, q);
        drop(in_admission);
    }
}

/// What a partition waiting in admission should do after a poll.
enum Waited {
    /// Keep waiting.
    Stay,
    /// Its job ended, or the engine stops: drop it.
    Leave,
    /// A more urgent partition is queued: step back.
    Yield,
}

fn after_poll(shared: &Shared, key: &crate::engine::QueueKey, job: &JobRt) -> Waited {
    if job.is_stopped() || shared.stopping.load(Ordering::Acquire) {
        return Waited::Leave;
    }
    let more_urgent = shared
        .queue()
        .items
        .first_key_value()
        .is_some_and(|(k, _)| (k.0).0 > (key.0).0);
    if more_urgent {
        Waited::Yield
    } else {
        Waited::Stay
    }
}

/// The device for a partition: a retry keeps its device; otherwise one that proved this
/// circuit recently and has room in its hand-off (its key is likely resident there), else
/// the least loaded.
fn choose_device(shared: &Shared, q: &Queued) -> usize {
    if let Some(d) = q.device {
        return d;
    }
    let circuit = &q.job.circuit.id;
    let load = |i: usize| shared.devices[i].in_flight.load(Ordering::Acquire);
    let least = (0..shared.devices.len())
        .min_by_key(|&i| load(i))
        .unwrap_or(0);
    let affine = (0..shared.devices.len())
        .filter(|&i| {
            shared.devices[i]
                .recent
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .back()
                .is_some_and(|c| c == circuit)
        })
        .min_by_key(|&i| load(i));
    match affine {
        // Affinity unless that device is clearly busier than another.
        Some(i) if load(i) <= load(least) + 1 => i,
        _ => least,
    }
}

fn admit(shared: &Arc<Shared>, key: crate::engine::QueueKey, q: Queued) {
    let _stage = shared.enter(Stage::Admitting);
    let job = Arc::clone(&q.job);
    let _admitting = Admitting::new(&job.circuit);
    let alone = job
        .partition(q.index)
        .is_some_and(|p| p.is_synthesized_alone());
    // A synthesis slot first (the ceiling on top of the budget): none beside a partition
    // synthesized alone. Only this thread starts syntheses, so the room found here stays
    // until this partition's starts.
    {
        let (lock, cv) = &shared.stage_cv;
        let mut g = lock.lock().unwrap_or_else(|e| e.into_inner());
        let busy = || {
            let n = shared.stage_count(Stage::Synthesizing);
            n >= shared.max_synthesis
                || (alone && n > 0)
                || shared.synthesizing_alone.load(Ordering::Acquire) > 0
        };
        while busy() {
            g = cv
                .wait_timeout(g, ADMISSION_POLL)
                .unwrap_or_else(|e| e.into_inner())
                .0;
            match after_poll(shared, &key, &job) {
                Waited::Stay => {}
                Waited::Leave => return,
                Waited::Yield => {
                    drop(g);
                    return shared.requeue(key, q);
                }
            }
        }
    }
    let circuit = Arc::clone(&job.circuit);
    let device = choose_device(shared, &q);
    let dev = &shared.devices[device];
    let attempt = q.attempt.min(dev.backends.len() - 1);
    let prover = Prover::with_shared_backend(
        Arc::clone(&circuit.key),
        shared.budget.clone(),
        ProverConfig {
            self_check: SelfCheck::Never,
            ..ProverConfig::default()
        },
        Arc::clone(&dev.backends[attempt]),
    );
    // The key first, held for the partition's life: its load is charged (and waits) like
    // any other, and the working sets admitted after it can never evict it mid-proof.
    // A load the budget cannot admit yet is tried again at each poll (as long as the
    // store's `reserve_timeout` lets one attempt wait), so the partition can still step
    // back, leave, or be found never to fit.
    let t = Instant::now();
    // What the last refused load asked for (its peak: the bases and its read windows); set
    // by every refusal before `never_fits` reads it.
    let key_need = std::cell::Cell::new(0);
    let hold = poll_budget(shared, &key, &job, &key_need, "its key", |_| {
        let view = match (&dev.gpu, attempt) {
            (Some(gpu), 0) => circuit.key.view_for_gpu(
                gpu,
                GpuPlacement::Auto,
                dev.backends[0].device_headroom_bytes(&circuit.lens()),
            ),
            (Some(gpu), 1) => circuit.key.view_for_gpu(gpu, GpuPlacement::Pinned, 0),
            _ => circuit.key.view_host(),
        };
        match view {
            Ok(v) => Ok(v.into_hold()),
            Err(ProverError::Srs(srs_store::SrsError::Budget {
                source,
                requested_bytes,
                ..
            })) if waits_out(&source) => {
                key_need.set(requested_bytes);
                Err(Polled::Budget(source))
            }
            Err(e) => Err(Polled::Other(format!("key: {e}"))),
        }
    });
    job.progress().timings.key_load += t.elapsed();
    let hold = match hold {
        Ok(h) => h,
        Err(outcome) => return not_admitted(shared, key, q, "its key", outcome),
    };
    // The PCE next, polled like the key: one fetched on demand may load (or be recorded)
    // under the budget, and a cache whose `admission_timeout` is short lets each attempt
    // give up, so the partition can still step back, leave, or be found never to fit.
    let pce_need = std::cell::Cell::new(0);
    let pce = poll_budget(
        shared,
        &key,
        &job,
        &pce_need,
        "its PCE",
        |_| match circuit.pce() {
            Ok(p) => Ok(p),
            Err(pce_cache::PceError::Budget {
                source,
                requested_bytes,
                ..
            }) if waits_out(&source) => {
                pce_need.set(requested_bytes);
                Err(Polled::Budget(source))
            }
            Err(e) => Err(Polled::Other(format!("pce: {e}"))),
        },
    );
    let pce = match pce {
        Ok(p) => p,
        Err(outcome) => {
            drop(hold);
            return not_admitted(shared, key, q, "its PCE", outcome);
        }
    };
    let bytes = match prover.working_set_bytes(&pce) {
        Ok(b) => b,
        Err(e) => return shared.fail(&job, format!("partition {}: {e}", q.index)),
    };
    let t = Instant::now();
    // The backend's long-lived tables for this circuit's domain (the CPU backend's
    // twiddles), then the working set: each waits in the budget's queue at the job's
    // priority, and a request that can never fit fails the job at once.
    let ws_need = std::cell::Cell::new(bytes);
    let prepared = poll_budget(
        shared,
        &key,
        &job,
        &ws_need,
        "its working set",
        |wait| match prover.prepare_backend(&pce, Some(wait)) {
            Ok(()) => Ok(()),
            Err(ProverError::Budget { source, .. }) => Err(Polled::Budget(source)),
            Err(e) => Err(Polled::Other(e.to_string())),
        },
    );
    let label = format!("{} partition {}", job.id, q.index);
    let admitted = prepared.and_then(|()| {
        poll_budget(shared, &key, &job, &ws_need, "its working set", |wait| {
            shared
                .budget
                .request(bytes, Category::WorkingSet)
                .priority(job.priority.budget())
                .label(label.clone())
                .reserve(Some(wait))
                .map_err(Polled::Budget)
        })
    });
    let reservation = match admitted {
        Ok(r) => r,
        Err(outcome) => {
            // The key is let go before the partition steps back or its job fails.
            drop(hold);
            return not_admitted(shared, key, q, "its working set", outcome);
        }
    };
    metrics::admitted(bytes, t.elapsed());
    shared.admitted(&job, device);
    dev.in_flight.fetch_add(1, Ordering::AcqRel);
    let mut work = Work {
        job,
        index: q.index,
        attempt,
        device,
        prover,
        _pce: pce,
        hold,
        synthesized: None,
        alone,
        trace: PartitionTrace {
            index: q.index,
            attempt,
            ..PartitionTrace::default()
        },
        _in_flight: shared.in_flight(&circuit),
        prefetched: None,
    };
    work.trace.admitted = work.at(Instant::now());
    let s = Arc::clone(shared);
    let job = Arc::clone(&work.job);
    // The slot is counted before the thread starts, so admission's ceiling holds; the
    // thread's `StageSlot` ends it (and the alone count with it).
    if alone {
        shared.synthesizing_alone.fetch_add(1, Ordering::AcqRel);
    }
    std::mem::forget(shared.enter(Stage::Synthesizing));
    let spawned = std::thread::Builder::new()
        .name("pinion-synthesis".into())
        .spawn(move || synthesize(&s, work, reservation));
    if let Err(e) = spawned {
        // The closure, and with it the work and its charge, was dropped.
        if alone {
            shared.synthesizing_alone.fetch_sub(1, Ordering::AcqRel);
        }
        shared.leave(Stage::Synthesizing);
        shared.devices[device]
            .in_flight
            .fetch_sub(1, Ordering::AcqRel);
        shared.fail(&job, format!("cannot start a synthesis thread: {e}"));
    }
}

/// Counts a partition in its circuit's admission while it lives.
struct Admitting(Arc<crate::engine::CircuitRt>);

impl Admitting {
    fn new(circuit: &Arc<crate::engine::CircuitRt>) -> Admitting {
        circuit.admitting.fetch_add(1, Ordering::AcqRel);
        Admitting(Arc::clone(circuit))
    }
}

impl Drop for Admitting {
    fn drop(&mut self) {
        self.0.admitting.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Why a wait in admission ended without what it waited for.
enum Polled {
    /// The budget refused for another reason than the poll's timeout.
    Budget(BudgetError),
    /// Something else failed.
    Other(String),
    /// The job ended or the engine stops.
    Leave,
    /// A more urgent partition is queued: step back.
    Yield,
    /// It can never be admitted (see [`never_fits`]); why.
    Never(String),
}

/// Ends the admission of a partition whose wait for `what` ("its key", "its working set")
/// ended without a grant: it leaves (its job ended), steps back into the queue (a more
/// urgent partition came), or fails its job saying why.
fn not_admitted(
    shared: &Arc<Shared>,
    key: crate::engine::QueueKey,
    q: Queued,
    what: &str,
    outcome: Polled,
) {
    let why = match outcome {
        Polled::Leave => return,
        Polled::Yield => return shared.requeue(key, q),
        Polled::Budget(BudgetError::TooLarge {
            requested_bytes,
            total_bytes,
        }) => format!(
            "{what} of {requested_bytes} bytes can never fit the memory budget of {total_bytes} bytes"
        ),
        Polled::Budget(e) => format!("{what}: {e}"),
        Polled::Other(e) | Polled::Never(e) => e,
    };
    shared.fail(&q.job, format!("partition {}: {why}", q.index));
}

/// Whether a budget refusal is one admission waits out, polling again (the attempt's wait
/// ran out, or it did not wait), rather than a failure.
fn waits_out(refusal: &BudgetError) -> bool {
    matches!(
        refusal,
        BudgetError::Timeout { .. } | BudgetError::WouldBlock { .. }
    )
}

/// Retries `attempt` (a budget request waiting at most the poll interval) until it
/// succeeds, fails for good, or the partition should leave or step back. `need` bytes
/// (`what`) are what the attempt asks for (the attempt may update them); a partition
/// that can never get them (see
/// [`never_fits`]) for the engine's `never_fits_after` gives up with [`Polled::Never`].
fn poll_budget<T>(
    shared: &Shared,
    key: &crate::engine::QueueKey,
    job: &JobRt,
    need: &std::cell::Cell<u64>,
    what: &str,
    mut attempt: impl FnMut(Duration) -> Result<T, Polled>,
) -> Result<T, Polled> {
    let mut never_since: Option<Instant> = None;
    loop {
        let t = Instant::now();
        match attempt(ADMISSION_POLL) {
            Err(Polled::Budget(e)) if waits_out(&e) => {
                // An attempt that does not wait (a store whose loads never wait) must
                // not make this a busy loop.
                if let Some(rest) = ADMISSION_POLL.checked_sub(t.elapsed()) {
                    std::thread::sleep(rest);
                }
                match never_fits(shared, need.get(), what) {
                    None => never_since = None,
                    Some(why) => {
                        let since = *never_since.get_or_insert_with(Instant::now);
                        if since.elapsed() >= shared.never_fits_after {
                            return Err(Polled::Never(why));
                        }
                    }
                }
                match after_poll(shared, key, job) {
                    Waited::Stay => {}
                    Waited::Leave => return Err(Polled::Leave),
                    Waited::Yield => return Err(Polled::Yield),
                }
            }
            other => return other,
        }
    }
}

/// Why `need` more bytes can never be admitted now, or `None` while they might be: no
/// other partition is anywhere in the pipeline (so none will release memory), and what
/// stays charged (keys and PCEs that a partition holds, backend tables, this partition's
/// own key; what the budget's evictors could free is left out, see
/// [`memory_budget::Budget::reclaimable_bytes`]) plus
/// `need` is above the budget's ceiling (its total, lowered by what the kernel charges
/// beyond the charges, read afresh: see [`memory_budget::Budget::refresh_settled`]). Only
/// the kernel's untracked usage falling could change that.
fn never_fits(shared: &Shared, need: u64, what: &str) -> Option<String> {
    let busy = [
        Stage::Synthesizing,
        Stage::WaitingDevice,
        Stage::OnDevice,
        Stage::Assembling,
    ]
    .into_iter()
    .any(|s| shared.stage_count(s) > 0);
    if busy {
        return None;
    }
    // Idle keys, PCEs nobody holds, free staging buffers: the budget's evictors free
    // them when a request waits, so they do not stay.
    let idle = shared.budget.reclaimable_bytes();
    let fits = |snap: &memory_budget::BudgetSnapshot| {
        snap.used_bytes.saturating_sub(idle).saturating_add(need) <= snap.cap_bytes
    };
    let mut snap = shared.budget.snapshot();
    if fits(&snap) {
        return None;
    }
    // The ceiling keeps recent larger readings of untracked memory while they decay, in
    // case a charged working set not yet touched hides some; with nothing in the pipeline
    // none is, so the kernel's reading now is the whole truth. Without this, a peak that
    // has passed would hold the ceiling down for minutes and fail a partition that fits.
    if shared.budget.refresh_settled().is_ok() {
        snap = shared.budget.snapshot();
        if fits(&snap) {
            return None;
        }
    }
    let fixed = snap.used_bytes.saturating_sub(idle);
    let lowered = snap.total_bytes.saturating_sub(snap.cap_bytes);
    Some(format!(
        "can never be admitted: it needs {need} bytes for {what} while {fixed} bytes stay \
         charged (keys and PCEs held, backend tables), under a ceiling of {} bytes (the \
         budget's {} bytes lowered by {lowered} for what the kernel charges beyond the \
         charges), and no other partition is running to free memory",
        snap.cap_bytes, snap.total_bytes
    ))
}

/// Synthesis of one admitted partition on its own thread.
fn synthesize(shared: &Arc<Shared>, mut work: Work, reservation: Reservation) {
    // Adopt the slot admission counted.
    let _stage = StageSlot {
        shared,
        stage: Stage::Synthesizing,
        alone: work.alone,
    };
    let device = work.device;
    let _routed = Routed {
        shared,
        device,
        armed: true,
    };
    if work.job.is_stopped() {
        return;
    }
    let t = Instant::now();
    let Some(partition) = work.job.partition(work.index) else {
        return;
    };
    let circuit = Arc::clone(&work.job.circuit);
    let pce = work._pce.clone();
    let result = partition.run(&work.prover, &pce, reservation);
    drop(partition);
    let elapsed = t.elapsed();
    work.trace.synthesis = (work.at(t), work.at(t + elapsed));
    work.job.progress().timings.synthesis += elapsed;
    metrics::phase("synthesis", elapsed);
    let synthesized = match result {
        Ok(s) => s,
        Err(e) => return failed(shared, work, e),
    };
    if work.job.is_stopped() {
        return;
    }
    drop(circuit);
    work.synthesized = Some(synthesized);
    if work.attempt > 0 {
        drop(_stage);
        // A retry: computed here, off the device worker (which stays on its queue).
        let _on = shared.enter(Stage::OnDevice);
        return compute_and_assemble(shared, work);
    }
    // While the device works on another partition, this one's a, b and c go to it now,
    // beside that work, instead of at the start of its own turn (as many partitions a
    // device as can wait for it: each holds them in device memory until its turn).
    let dev = &shared.devices[device];
    let busy = dev
        .current_job
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .is_some();
    if busy {
        if let (Some(slot), Some(s)) = (
            PrefetchSlot::take(&dev.prefetched, shared.handoff_depth + 1),
            work.synthesized.as_mut(),
        ) {
            match work.prover.prefetch(s) {
                Ok(true) => {
                    work.prefetched = Some(slot);
                    work.trace.prefetched = true;
                }
                Ok(false) => drop(slot),
                Err(e) => return failed(shared, work, e),
            }
        }
    }
    // The synthesis slot is kept until the hand-off takes the partition: a partition
    // blocked on a full hand-off still counts against the synthesis ceiling, so no more
    // working sets are admitted ahead of the device than the ceiling plus the hand-off
    // depth (each holds its whole working set charged while it waits).
    let waiting = shared.enter(Stage::WaitingDevice);
    let tx = shared.devices[device]
        .tx
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let Some(tx) = tx else { return };
    // Ownership of the device count passes to the worker.
    std::mem::forget(_routed);
    std::mem::forget(waiting);
    let sent = tx.send(work);
    drop(_stage);
    if let Err(crossbeam::channel::SendError(work)) = sent {
        shared.leave(Stage::WaitingDevice);
        shared.devices[device]
            .in_flight
            .fetch_sub(1, Ordering::AcqRel);
        drop(work);
    }
}

/// A stage count taken over from another thread (with the alone count of a partition
/// synthesized alone, for its synthesis slot).
struct StageSlot<'a> {
    shared: &'a Shared,
    stage: Stage,
    alone: bool,
}

impl Drop for StageSlot<'_> {
    fn drop(&mut self) {
        if self.alone {
            self.shared
                .synthesizing_alone
                .fetch_sub(1, Ordering::AcqRel);
        }
        // After the alone count: `leave` wakes admission.
        self.shared.leave(self.stage);
    }
}

/// A partition counted on its device until it leaves it.
struct Routed<'a> {
    shared: &'a Shared,
    device: usize,
    armed: bool,
}

impl Drop for Routed<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.shared.devices[self.device]
                .in_flight
                .fetch_sub(1, Ordering::AcqRel);
        }
    }
}

fn device_worker(
    shared: &Arc<Shared>,
    device: usize,
    rx: &Receiver<Work>,
    asm: &Sender<(Work, Computed)>,
) {
    let dev = &shared.devices[device];
    for work in rx.iter() {
        let _waited = StageSlot {
            shared,
            stage: Stage::WaitingDevice,
            alone: false,
        };
        let _routed = Routed {
            shared,
            device,
            armed: true,
        };
        drop(_waited);
        if work.job.is_stopped() {
            continue;
        }
        *dev.current_job.lock().unwrap_or_else(|e| e.into_inner()) = Some(work.job.id);
        let on = shared.enter(Stage::OnDevice);
        let mut work = work;
        // Its turn: the slot for the next partition's copies ahead is free again.
        work.prefetched = None;
        let Some(s) = work.synthesized.take() else {
            continue;
        };
        let t = Instant::now();
        let result = work.prover.compute_held(s, &work.hold);
        let elapsed = t.elapsed();
        work.trace.device = (work.at(t), work.at(t + elapsed));
        drop(on);
        *dev.current_job.lock().unwrap_or_else(|e| e.into_inner()) = None;
        work.job.progress().timings.gpu += elapsed;
        metrics::phase("gpu", elapsed);
        {
            let mut recent = dev.recent.lock().unwrap_or_else(|e| e.into_inner());
            let id = &work.job.circuit.id;
            recent.retain(|c| c != id);
            recent.push_back(id.clone());
            while recent.len() > 4 {
                recent.pop_front();
            }
        }
        dev.partitions_done.fetch_add(1, Ordering::Relaxed);
        match result {
            Ok(c) => {
                std::mem::forget(shared.enter(Stage::Assembling));
                if let Err(crossbeam::channel::SendError((w, _))) = asm.send((work, c)) {
                    shared.leave(Stage::Assembling);
                    drop(w);
                }
            }
            Err(e) => failed(shared, work, e),
        }
    }
}

/// A retry's device phase and assembly, on the retry's own thread.
fn compute_and_assemble(shared: &Arc<Shared>, mut work: Work) {
    let Some(s) = work.synthesized.take() else {
        return;
    };
    let t = Instant::now();
    let result = work.prover.compute_held(s, &work.hold);
    let elapsed = t.elapsed();
    work.trace.device = (work.at(t), work.at(t + elapsed));
    work.job.progress().timings.gpu += elapsed;
    match result {
        Ok(c) => {
            std::mem::forget(shared.enter(Stage::Assembling));
            assemble(shared, work, c);
        }
        Err(e) => failed(shared, work, e),
    }
}

fn assemble(shared: &Arc<Shared>, mut work: Work, computed: Computed) {
    let _stage = StageSlot {
        shared,
        stage: Stage::Assembling,
        alone: false,
    };
    if work.job.is_stopped() {
        return;
    }
    let t = Instant::now();
    let rs = work.job.randomness[work.index];
    let result = work
        .prover
        .assemble(computed, rs, shared.self_check, work.index);
    let elapsed = t.elapsed();
    work.trace.assembly = (work.at(t), work.at(t + elapsed));
    work.job.progress().timings.assembly += elapsed;
    metrics::phase("assembly", elapsed);
    match result {
        Ok(out) => {
            work.trace.proof = out.timings;
            let name = if work.attempt == 0 {
                shared.devices[work.device].name.clone()
            } else {
                format!(
                    "{} (retry {}: {})",
                    shared.devices[work.device].name,
                    work.attempt,
                    work.prover.backend_name()
                )
            };
            // The key and the PCE are let go before the partition is seen to end, so a
            // caller that awaits the job finds them unheld (evictable at once).
            drop(work.hold);
            drop(work._pce);
            shared.partition_done(&work.job, work.index, out.proof, &name, work.trace);
        }
        Err(e) => failed(shared, work, e),
    }
}

/// Whether an error belongs to the device (retry elsewhere) rather than to the job's
/// inputs (the job fails).
fn device_fault(e: &ProverError) -> bool {
    matches!(
        e.root(),
        ProverError::Msm { .. }
            | ProverError::Ntt(_)
            | ProverError::Staging { .. }
            | ProverError::GpuUnavailable { .. }
            | ProverError::BackendUnavailable { .. }
    )
}

/// A partition failed: a device fault is retried on the device's next fallback (the
/// partition synthesized again); anything else fails the job.
fn failed(shared: &Arc<Shared>, work: Work, e: ProverError) {
    let backends = shared.devices[work.device].backends.len();
    if device_fault(&e) && work.attempt + 1 < backends && !work.job.is_stopped() {
        metrics::retried(&shared.devices[work.device].name);
        let q = Queued {
            job: Arc::clone(&work.job),
            index: work.index,
            attempt: work.attempt + 1,
            device: Some(work.device),
        };
        drop(work);
        shared.enqueue(q);
        return;
    }
    let reason = format!("partition {}: {e}", work.index);
    let job = Arc::clone(&work.job);
    drop(work);
    shared.fail(&job, reason);
}
