//! The engine on simulated devices (CPU backends behind the device interface): proofs
//! equal the reference's, priority order and FIFO within one, cancellation in every
//! state, device faults retried, and a randomized run of over a thousand jobs that checks
//! the budget is never exceeded, every job ends once and no byte leaks.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bellman::{Circuit, ConstraintSystem, SynthesisError};
use bls12_381::Scalar;
use engine::{
    CircuitSpec, Engine, EngineError, JobId, JobOutcome, JobSpec, JobStatus, Partition, PceSource,
    Priority, Shutdown,
};
use ff::Field;
use groth16_prover::testing::{MimcChain, RandomR1cs};
use groth16_prover::{Prover, ProverConfig, Randomness};
use memory_budget::{Budget, Category};
use rand::{Rng, RngExt};

use common::*;

/// MiMC chains of one shape (same rounds and constants, another start value).
fn chain_like(base: &MimcChain, rng: &mut impl Rng) -> MimcChain {
    MimcChain {
        x0: Scalar::random(&mut *rng),
        ..base.clone()
    }
}

/// Bytes a partition of `reg` charges as its working set on the CPU backend.
fn working_set(budget: &Budget, engine: &Engine, reg: &Registered, pce: &pce_cache::Pce) -> u64 {
    let key = groth16_prover::ProvingKey::from_store(
        engine.store(),
        srs_store::SrsSpec::new(&reg.id, &reg.path),
    )
    .unwrap();
    let p = Prover::new(
        Arc::new(key),
        budget.clone(),
        ProverConfig {
            backend: groth16_prover::BackendChoice::Cpu,
            ..ProverConfig::default()
        },
    )
    .unwrap();
    p.working_set_bytes(pce).unwrap()
}

/// Why job `id` failed (it must fail within a minute).
fn failure(engine: &Engine, id: JobId) -> String {
    match engine
        .await_job(id, Some(Duration::from_secs(60)))
        .unwrap()
        .status
    {
        JobStatus::Failed(reason) => reason,
        other => panic!("job {id}: expected a failure, got {other:?}"),
    }
}

/// A completed job's timeline: one trace a partition, in order, each phase after the
/// previous one and inside the job's time, with the prover's own total inside it.
fn check_timeline(out: &JobOutcome, seed: u64) {
    assert_eq!(out.partitions.len(), out.proofs.len(), "seed {seed}");
    for (i, t) in out.partitions.iter().enumerate() {
        let at = format!("seed {seed}: job {} partition {i}: {t:?}", out.id);
        assert_eq!(t.index, i, "{at}");
        let points = [
            t.admitted,
            t.synthesis.0,
            t.synthesis.1,
            t.device.0,
            t.device.1,
            t.assembly.0,
            t.assembly.1,
            out.timings.total,
        ];
        assert!(points.windows(2).all(|w| w[0] <= w[1]), "{at}");
        assert!(t.proof.total > Duration::ZERO, "{at}");
        assert!(t.proof.synthesis <= t.synthesis.1 - t.synthesis.0, "{at}");
    }
}

#[test]
fn proofs_equal_the_reference_on_two_devices() {
    let seed = seed();
    let mut rng = rng(seed);
    let budget = Budget::fixed(1 << 30);
    let devices = vec![
        device("sim0", Arc::new(TestDevice::new(&budget, 1))),
        device("sim1", Arc::new(TestDevice::new(&budget, 2))),
    ];
    let engine = Engine::start(config(&budget, devices)).unwrap();
    let dir = TempDir::new("reference");
    let pces = pce_cache();
    let bases = [
        MimcChain::new(40, rng.random()),
        MimcChain::new(70, rng.random()),
    ];
    let regs = [
        register(&engine, &pces, &dir, "mimc-40", bases[0].clone(), &mut rng),
        register(&engine, &pces, &dir, "mimc-70", bases[1].clone(), &mut rng),
    ];
    let mut jobs = Vec::new();
    for j in 0..8 {
        let which = j % 2;
        let n = 1 + j % 3;
        let circuits: Vec<MimcChain> = (0..n)
            .map(|_| chain_like(&bases[which], &mut rng))
            .collect();
        let rs: Vec<Randomness> = (0..n).map(|_| Randomness::random(&mut rng)).collect();
        let id = engine
            .submit(JobSpec {
                circuit: regs[which].id.clone(),
                partitions: circuits.iter().cloned().map(Partition::circuit).collect(),
                priority: Priority::Normal,
                randomness: Some(rs.clone()),
            })
            .unwrap();
        jobs.push((id, which, circuits, rs));
    }
    for (id, which, circuits, rs) in jobs {
        let out = engine
            .await_job(id, Some(Duration::from_secs(120)))
            .unwrap();
        assert_eq!(out.status, JobStatus::Completed, "seed {seed}: {id}");
        assert_eq!(out.proofs.len(), circuits.len());
        assert_eq!(out.proof_bytes().len(), 192 * circuits.len());
        check_timeline(&out, seed);
        for (i, (c, r)) in circuits.iter().zip(&rs).enumerate() {
            let want = groth16::create_proof(c.clone(), &regs[which].params, r.r, r.s).unwrap();
            assert_eq!(
                proof_bytes(&out.proofs[i]),
                proof_bytes(&want),
                "seed {seed}: {id} partition {i}"
            );
        }
    }
    let status = engine.status();
    assert_eq!(status.jobs_completed, 8);
    assert!(
        status.devices.iter().all(|d| d.partitions_done > 0),
        "both devices used"
    );
    engine.shutdown(Shutdown::Graceful);
    let s = budget.snapshot();
    assert_eq!(s.used_in(Category::WorkingSet), 0);
    assert_eq!(s.used_in(Category::Transient), 0);
    assert!(matches!(
        engine.submit(JobSpec::single(
            "mimc-40",
            Partition::circuit(bases[0].clone())
        )),
        Err(EngineError::ShuttingDown)
    ));
}

#[test]
fn bad_jobs_are_refused_or_fail_with_the_reason() {
    let mut rng = rng(seed());
    let budget = Budget::fixed(1 << 30);
    let engine = Engine::start(config(
        &budget,
        vec![device("sim0", Arc::new(TestDevice::new(&budget, 3)))],
    ))
    .unwrap();
    let dir = TempDir::new("bad");
    let pces = pce_cache();
    let base = RandomR1cs {
        n_inputs: 2,
        n_constraints: 60,
        shape_seed: rng.random(),
        value_seed: rng.random(),
        corrupt: false,
    };
    let reg = register(&engine, &pces, &dir, "r1cs", base.clone(), &mut rng);
    assert!(matches!(
        engine.submit(JobSpec::single("nope", Partition::circuit(base.clone()))),
        Err(EngineError::UnknownCircuit { .. })
    ));
    assert!(matches!(
        engine.submit(JobSpec {
            circuit: "r1cs".into(),
            partitions: vec![],
            priority: Priority::Low,
            randomness: None
        }),
        Err(EngineError::NoPartitions)
    ));
    assert!(matches!(
        engine.submit(JobSpec {
            circuit: "r1cs".into(),
            partitions: vec![Partition::circuit(base.clone())],
            priority: Priority::Low,
            randomness: Some(vec![]),
        }),
        Err(EngineError::RandomnessCount { .. })
    ));
    assert!(matches!(
        engine.await_job(JobId(999), Some(Duration::ZERO)),
        Err(EngineError::UnknownJob { .. })
    ));
    // An unsatisfied witness in the second partition fails the whole job, naming it.
    let bad = RandomR1cs {
        corrupt: true,
        ..base.clone()
    };
    let id = engine
        .submit(JobSpec {
            circuit: "r1cs".into(),
            partitions: vec![Partition::circuit(base.clone()), Partition::circuit(bad)],
            priority: Priority::High,
            randomness: None,
        })
        .unwrap();
    let reason = failure(&engine, id);
    assert!(
        reason.contains("partition 1") && reason.contains("does not satisfy"),
        "{reason}"
    );
    // A working set larger than the whole budget fails at once, naming both sizes.
    let pce = pces
        .get_or_extract(&pce_cache::CircuitKey::new("r1cs"), || base.clone())
        .unwrap();
    let ws = working_set(&budget, &engine, &reg, &pce);
    budget.set_total_bytes(ws - 1);
    let id = engine
        .submit(JobSpec::single("r1cs", Partition::circuit(base.clone())))
        .unwrap();
    let reason = failure(&engine, id);
    assert!(reason.contains("can never fit"), "{reason}");
    assert!(reason.contains("bytes"), "{reason}");
    engine.shutdown(Shutdown::Graceful);
    assert_eq!(budget.snapshot().used_in(Category::WorkingSet), 0);
}

/// Proves `c` as a one-partition job of `circuit` with fresh (r, s) and checks that the
/// proof is byte-identical to the reference's for the same parameters and randomness.
fn proves_like_the_reference<C>(
    engine: &Engine,
    reg: &Registered,
    c: C,
    rng: &mut impl Rng,
    seed: u64,
) where
    C: Circuit<Scalar> + Clone + Send + Sync + 'static,
{
    let rs = Randomness::random(rng);
    let id = engine
        .submit(JobSpec {
            circuit: reg.id.clone(),
            partitions: vec![Partition::circuit(c.clone())],
            priority: Priority::Normal,
            randomness: Some(vec![rs]),
        })
        .unwrap();
    let out = engine.await_job(id, Some(Duration::from_secs(60))).unwrap();
    assert_eq!(out.status, JobStatus::Completed, "seed {seed}: {id}");
    let want = groth16::create_proof(c, &reg.params, rs.r, rs.s).unwrap();
    assert_eq!(
        proof_bytes(&out.proofs[0]),
        proof_bytes(&want),
        "seed {seed}: {id}"
    );
}

/// An engine on one simulated device whose never-fits grace is `never_fits_after`.
fn engine_judging_after(budget: &Budget, seed: u64, never_fits_after: Duration) -> Engine {
    let mut cfg = config(
        budget,
        vec![device("sim0", Arc::new(TestDevice::new(budget, seed)))],
    );
    cfg.never_fits_after = never_fits_after;
    Engine::start(cfg).unwrap()
}

/// A PCE nobody holds is memory that can go, even before it has idled long enough to be
/// evicted: a partition that fits only once another circuit's idle PCE is evicted waits
/// for that (the PCE cache's `min_idle`, longer than the engine's `never_fits_after`)
/// and proves, instead of being judged never to fit.
#[test]
fn an_idle_pce_of_another_circuit_is_waited_for_not_counted_as_staying() {
    let seed = seed();
    let mut rng = rng(seed);
    let budget = Budget::fixed(1 << 30);
    let never_fits_after = Duration::from_millis(200);
    let engine = engine_judging_after(&budget, seed, never_fits_after);
    let dir = TempDir::new("idle-pce");
    let min_idle = never_fits_after * 8;
    let pces = Arc::new(
        pce_cache::PceCache::new(
            budget.clone(),
            pce_cache::CacheConfig {
                min_idle,
                ..pce_cache::CacheConfig::in_memory()
            },
        )
        .unwrap(),
    );
    let small = MimcChain::new(rng.random_range(20..40), rng.random());
    let large = MimcChain::new(rng.random_range(300..400), rng.random());
    let reg_a = register_on_demand(&engine, &pces, &dir, "a", small.clone(), &mut rng);
    let reg_b = register_on_demand(&engine, &pces, &dir, "b", large.clone(), &mut rng);
    // Both proved once with room: both keys and both PCEs resident, the tables charged.
    for (id, base) in [("b", &large), ("a", &small)] {
        let job = engine
            .submit(JobSpec::single(
                id,
                Partition::circuit(chain_like(base, &mut rng)),
            ))
            .unwrap();
        let out = engine
            .await_job(job, Some(Duration::from_secs(60)))
            .unwrap();
        assert_eq!(out.status, JobStatus::Completed, "seed {seed}");
    }
    let pce_b = pces
        .get_or_extract(&pce_cache::CircuitKey::new("b"), || large.clone())
        .unwrap();
    let pce_b_bytes = pce_b.charged_bytes();
    let pce_a = pces
        .get_or_extract(&pce_cache::CircuitKey::new("a"), || small.clone())
        .unwrap();
    let ws = working_set(&budget, &engine, &reg_a, &pce_a);
    drop((pce_a, pce_b));
    assert_eq!(budget.snapshot().used_in(Category::WorkingSet), 0);
    // b's key is held, so b's PCE (just used: not evictable for `min_idle`) is all that
    // can make room; room for a's working set once half of it is gone.
    let _key_b = engine
        .store()
        .get_or_load(&srs_store::SrsSpec::new(&reg_b.id, &reg_b.path))
        .unwrap();
    budget.set_total_bytes(budget.used_bytes() + ws - pce_b_bytes / 2);
    let t = std::time::Instant::now();
    proves_like_the_reference(
        &engine,
        &reg_a,
        chain_like(&small, &mut rng),
        &mut rng,
        seed,
    );
    assert!(!pces.contains("b"), "b's PCE made the room");
    assert!(
        t.elapsed() > never_fits_after,
        "it waited past never_fits_after ({:?})",
        t.elapsed()
    );
    engine.shutdown(Shutdown::Graceful);
}

/// A PCE fetched on demand that the budget cannot hold is polled like a key load: with
/// nothing else running the partition is found never to fit (the message names its PCE)
/// instead of waiting inside the cache and holding up admission, and with room again the
/// circuit proves.
#[test]
fn a_pce_that_cannot_be_loaded_is_polled_and_found_never_to_fit() {
    let seed = seed();
    let mut rng = rng(seed);
    let budget = Budget::fixed(1 << 30);
    let engine = engine_judging_after(&budget, seed, Duration::from_millis(200));
    let dir = TempDir::new("pce-never");
    let pces = Arc::new(
        pce_cache::PceCache::new(
            budget.clone(),
            pce_cache::CacheConfig {
                min_idle: Duration::ZERO,
                admission_timeout: Some(engine::KEY_LOAD_WAIT),
                ..pce_cache::CacheConfig::in_memory()
            },
        )
        .unwrap(),
    );
    let base = MimcChain::new(rng.random_range(20..60), rng.random());
    let reg = register_on_demand(&engine, &pces, &dir, "m", base.clone(), &mut rng);
    let job = engine
        .submit(JobSpec::single(
            "m",
            Partition::circuit(chain_like(&base, &mut rng)),
        ))
        .unwrap();
    let out = engine
        .await_job(job, Some(Duration::from_secs(60)))
        .unwrap();
    assert_eq!(out.status, JobStatus::Completed, "seed {seed}");
    // The PCE gone: the next partition records it again, charging its first reservation
    // (1 MiB), which fits the budget's total but not beside what the test holds.
    assert!(pces.evict(u64::MAX) > 0);
    let total = 4 << 20;
    budget.set_total_bytes(total);
    let held = budget
        .try_reserve(
            total - budget.used_bytes() - (512 << 10),
            Category::Other,
            "the test",
        )
        .unwrap();
    let job = engine
        .submit(JobSpec::single(
            "m",
            Partition::circuit(chain_like(&base, &mut rng)),
        ))
        .unwrap();
    let reason = failure(&engine, job);
    assert!(
        reason.contains("can never be admitted") && reason.contains("its PCE"),
        "seed {seed}: {reason}"
    );
    assert!(!pces.contains("m"));
    drop(held);
    budget.set_total_bytes(1 << 30);
    proves_like_the_reference(&engine, &reg, chain_like(&base, &mut rng), &mut rng, seed);
    engine.shutdown(Shutdown::Graceful);
}

/// A partition whose key and working set fit the budget each alone but never together,
/// with no other partition running to free memory, fails after the engine's
/// `never_fits_after` with the sizes, instead of waiting for good; the engine is not
/// wedged: with room again the same job proves.
#[test]
fn a_partition_that_can_never_fit_fails_instead_of_waiting() {
    let seed = seed();
    let mut rng = rng(seed);
    let budget = Budget::fixed(1 << 30);
    let engine = engine_judging_after(&budget, 5, Duration::from_millis(300));
    let dir = TempDir::new("never-fits");
    let pces = pce_cache();
    let base = MimcChain::new(200, rng.random());
    let reg = register(&engine, &pces, &dir, "mimc", base.clone(), &mut rng);
    // One proof with room: the key is loaded (then idle in the store), tables charged.
    let id = engine
        .submit(JobSpec::single(
            "mimc",
            Partition::circuit(chain_like(&base, &mut rng)),
        ))
        .unwrap();
    let out = engine.await_job(id, Some(Duration::from_secs(60))).unwrap();
    assert_eq!(out.status, JobStatus::Completed, "seed {seed}");
    let pce = pces
        .get_or_extract(&pce_cache::CircuitKey::new("mimc"), || base.clone())
        .unwrap();
    let ws = working_set(&budget, &engine, &reg, &pce);
    let key = groth16_prover::ProvingKey::from_store(
        engine.store(),
        srs_store::SrsSpec::new(&reg.id, &reg.path),
    )
    .unwrap();
    let key_bytes = key.load_bytes();
    let resident: u64 = engine.store().entries().iter().map(|e| e.bytes).sum();
    let others = budget.used_bytes() - resident;
    // Room for the working set and half the key beside everything else charged.
    budget.set_total_bytes(others + ws + key_bytes / 2);
    let t = std::time::Instant::now();
    let id = engine
        .submit(JobSpec::single(
            "mimc",
            Partition::circuit(chain_like(&base, &mut rng)),
        ))
        .unwrap();
    let reason = failure(&engine, id);
    assert!(
        reason.contains("can never be admitted"),
        "seed {seed}: {reason}"
    );
    assert!(
        reason.contains("no other partition"),
        "seed {seed}: {reason}"
    );
    assert!(t.elapsed() >= Duration::from_millis(300), "it waited first");
    assert_eq!(budget.snapshot().used_in(Category::WorkingSet), 0);
    budget.set_total_bytes(1 << 30);
    proves_like_the_reference(&engine, &reg, chain_like(&base, &mut rng), &mut rng, seed);
    engine.shutdown(Shutdown::Graceful);
}

/// Setup for the ordering and cancellation tests: one gated device, a budget that holds
/// the circuit's key and exactly one working set beyond what is charged when it starts.
struct Tight {
    engine: Engine,
    budget: Budget,
    gate: Arc<Gate>,
    base: MimcChain,
    _dir: TempDir,
}

impl Drop for Tight {
    /// A failed assertion must not leave partitions stuck at the gate (the engine's drop
    /// waits for them).
    fn drop(&mut self) {
        self.gate.open();
    }
}

/// Opens a gate when dropped (the same, for gates a test owns).
struct OpenOnDrop(Arc<Gate>);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.open();
    }
}

fn tight(seed: u64) -> Tight {
    let mut rng = rng(seed);
    let budget = Budget::fixed(1 << 30);
    let mut d = TestDevice::new(&budget, 5);
    let gate = Gate::closed();
    d.gate = Some(Arc::clone(&gate));
    let mut cfg = config(&budget, vec![device("gated", Arc::new(d))]);
    cfg.max_synthesis = Some(1);
    let engine = Engine::start(cfg).unwrap();
    let dir = TempDir::new("tight");
    let pces = pce_cache();
    let base = MimcChain::new(60, rng.random());
    let reg = register(&engine, &pces, &dir, "mimc", base.clone(), &mut rng);
    let pce = pces
        .get_or_extract(&pce_cache::CircuitKey::new("mimc"), || base.clone())
        .unwrap();
    // Warm up: the key loads and the CPU backend's tables are charged; then the budget
    // shrinks to what is charged now plus one working set and a little.
    gate.open();
    let w = engine
        .submit(JobSpec::single("mimc", Partition::circuit(base.clone())))
        .unwrap();
    assert_eq!(
        engine
            .await_job(w, Some(Duration::from_secs(60)))
            .unwrap()
            .status,
        JobStatus::Completed
    );
    gate.close();
    let ws = working_set(&budget, &engine, &reg, &pce);
    budget.set_total_bytes(budget.used_bytes() + ws + ws / 10);
    gate.arrived.store(0, Ordering::SeqCst);
    Tight {
        engine,
        budget,
        gate,
        base,
        _dir: dir,
    }
}

#[test]
fn priority_order_and_fifo_within_one() {
    let seed = seed();
    let t = tight(seed);
    let job = |p: Priority| {
        t.engine
            .submit(JobSpec::single("mimc", Partition::circuit(t.base.clone())).with_priority(p))
            .unwrap()
    };
    // A runs and holds the one working set at the gate; the rest queue behind it.
    let a = job(Priority::Normal);
    t.gate.wait_arrivals(1);
    let order = [
        ("low-1", job(Priority::Low)),
        ("low-2", job(Priority::Low)),
        ("normal", job(Priority::Normal)),
        ("low-3", job(Priority::Low)),
        ("critical", job(Priority::Critical)),
        ("high", job(Priority::High)),
    ];
    // Everything is queued or waiting for memory before the gate opens.
    let start = std::time::Instant::now();
    loop {
        let s = t.engine.status();
        if s.queued.iter().sum::<usize>() + s.stages.admitting == order.len() {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "{s:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
    t.gate.open();
    let seq = |id: JobId| {
        let o = t
            .engine
            .await_job(id, Some(Duration::from_secs(60)))
            .unwrap();
        assert_eq!(o.status, JobStatus::Completed, "seed {seed}");
        o.sequence
    };
    let a_seq = seq(a);
    let got: HashMap<&str, u64> = order.iter().map(|(n, id)| (*n, seq(*id))).collect();
    let want = ["critical", "high", "normal", "low-1", "low-2", "low-3"];
    for pair in want.windows(2) {
        assert!(
            got[pair[0]] < got[pair[1]],
            "seed {seed}: {} ended after {} ({got:?}, first job {a_seq})",
            pair[0],
            pair[1]
        );
    }
    assert!(a_seq < got["critical"]);
    t.engine.shutdown(Shutdown::Graceful);
}

/// A circuit whose synthesis waits at a gate first (to cancel a job while it synthesizes).
#[derive(Clone)]
struct GatedCircuit {
    inner: MimcChain,
    gate: Arc<Gate>,
}

impl Circuit<Scalar> for GatedCircuit {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        self.gate.pass();
        self.inner.synthesize(cs)
    }
}

#[test]
fn cancellation_in_every_state_returns_every_byte() {
    let seed = seed();
    let t = tight(seed);
    let synth_gate = Gate::closed();
    let _open = OpenOnDrop(Arc::clone(&synth_gate));
    let baseline_ws = t.budget.snapshot().used_in(Category::WorkingSet);
    assert_eq!(baseline_ws, 0);
    // Raise the budget to two working sets so one partition can synthesize while another
    // is on the device.
    let ws = t.budget.total_bytes() - t.budget.used_bytes();
    t.budget.set_total_bytes(t.budget.total_bytes() + ws);
    let job = |p: Partition| {
        t.engine
            .submit(JobSpec::single("mimc", p).with_priority(Priority::Normal))
            .unwrap()
    };
    // On the device (held at the device gate).
    let on_device = job(Partition::circuit(t.base.clone()));
    t.gate.wait_arrivals(1);
    // Synthesizing (held at the synthesis gate), with the second working set.
    let synthesizing = job(Partition::circuit(GatedCircuit {
        inner: t.base.clone(),
        gate: Arc::clone(&synth_gate),
    }));
    synth_gate.wait_arrivals(1);
    // Admitting (no memory left), then queued behind it.
    let admitting = job(Partition::circuit(t.base.clone()));
    let queued = job(Partition::circuit(t.base.clone()));
    let start = std::time::Instant::now();
    while t.engine.status().stages.admitting != 1 {
        assert!(start.elapsed() < Duration::from_secs(30));
        std::thread::sleep(Duration::from_millis(5));
    }
    let cancel = |name: &str, id: JobId| {
        assert!(t.engine.cancel(id).unwrap(), "{name}: was running");
        let o = t
            .engine
            .await_job(id, Some(Duration::from_secs(10)))
            .unwrap();
        assert_eq!(o.status, JobStatus::Cancelled, "{name}");
        assert!(o.proofs.is_empty());
        assert!(!t.engine.cancel(id).unwrap(), "{name}: ends once");
    };
    cancel("queued", queued);
    cancel("admitting", admitting);
    cancel("synthesizing", synthesizing);
    // The cancelled synthesis stops at its next boundary and returns its working set.
    synth_gate.open();
    // Waiting for the device: synthesized while the device is busy.
    let waiting = job(Partition::circuit(t.base.clone()));
    let start = std::time::Instant::now();
    while t.engine.status().stages.waiting_device != 1 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{:?}",
            t.engine.status()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    cancel("waiting for the device", waiting);
    cancel("on the device", on_device);
    t.gate.open();
    // The engine still proves after all that.
    let after = job(Partition::circuit(t.base.clone()));
    assert_eq!(
        t.engine
            .await_job(after, Some(Duration::from_secs(60)))
            .unwrap()
            .status,
        JobStatus::Completed
    );
    t.engine.shutdown(Shutdown::Graceful);
    let s = t.budget.snapshot();
    assert_eq!(
        s.used_in(Category::WorkingSet),
        0,
        "seed {seed}: every byte returned"
    );
    assert_eq!(s.used_in(Category::Transient), 0);
    let status = t.engine.status();
    assert_eq!(status.jobs_cancelled, 5);
    assert_eq!(status.stages, engine::StageCounts::default());
}

#[test]
fn device_faults_are_retried_and_touch_no_other_job() {
    let seed = seed();
    let mut rng = rng(seed);
    let budget = Budget::fixed(1 << 30);
    let mut d = TestDevice::new(&budget, seed);
    d.fault_per_mille = 500;
    // At least one fault whatever the seed (12 draws at 50% all miss 1 time in 4,096).
    d.fault_first = true;
    let d = Arc::new(d);
    let engine = Engine::start(config(&budget, vec![device("flaky", Arc::clone(&d))])).unwrap();
    let dir = TempDir::new("faults");
    let pces = pce_cache();
    let base = MimcChain::new(30, rng.random());
    let reg = register(&engine, &pces, &dir, "mimc", base.clone(), &mut rng);
    let mut jobs = Vec::new();
    for _ in 0..12 {
        let c = chain_like(&base, &mut rng);
        let rs = Randomness::random(&mut rng);
        let id = engine
            .submit(JobSpec {
                circuit: "mimc".into(),
                partitions: vec![Partition::circuit(c.clone())],
                priority: Priority::Normal,
                randomness: Some(vec![rs]),
            })
            .unwrap();
        jobs.push((id, c, rs));
    }
    let mut retried = 0;
    for (id, c, rs) in jobs {
        let o = engine.await_job(id, Some(Duration::from_secs(60))).unwrap();
        assert_eq!(o.status, JobStatus::Completed, "seed {seed}");
        let want = groth16::create_proof(c, &reg.params, rs.r, rs.s).unwrap();
        assert_eq!(proof_bytes(&o.proofs[0]), proof_bytes(&want));
        check_timeline(&o, seed);
        if o.devices[0].contains("retry") {
            assert_eq!(o.partitions[0].attempt, 1, "seed {seed}: {}", o.devices[0]);
            retried += 1;
        } else {
            assert_eq!(o.partitions[0].attempt, 0, "seed {seed}: {}", o.devices[0]);
        }
    }
    let faults = d.faults.load(Ordering::Relaxed);
    assert!(faults > 0, "seed {seed}: no fault injected");
    assert_eq!(
        retried, faults,
        "seed {seed}: every faulted partition retried once"
    );
    engine.shutdown(Shutdown::Graceful);
}

/// Over a thousand jobs with random sizes, priorities, partitions, cancellations, bad
/// witnesses and device faults, three keys of which the budget holds two at once: the
/// charged total never exceeds the budget at any sample, every job ends exactly once with
/// the expected status, completed proofs verify, and nothing stays charged but keys.
#[test]
fn randomized_thousand_jobs() {
    let seed = seed();
    let mut rng = rng(seed);
    let n_jobs: usize = std::env::var("PINION_ENGINE_JOBS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    let budget = Budget::fixed(1 << 30);
    let mut devices = Vec::new();
    let mut sims = Vec::new();
    for i in 0..3 {
        let mut d = TestDevice::new(&budget, seed ^ i);
        d.fault_per_mille = 30;
        let d = Arc::new(d);
        sims.push(Arc::clone(&d));
        devices.push(device(&format!("sim{i}"), d));
    }
    let mut cfg = config(&budget, devices);
    cfg.handoff_depth = 2;
    cfg.store = Some(srs_store::SrsStore::new(
        budget.clone(),
        srs_store::StoreConfig {
            min_idle: Duration::ZERO,
            reserve_timeout: Some(engine::KEY_LOAD_WAIT),
            ..srs_store::StoreConfig::default()
        },
    ));
    let engine = Engine::start(cfg).unwrap();
    let dir = TempDir::new("random");
    let pces = pce_cache();
    let bases = [
        MimcChain::new(24, rng.random()),
        MimcChain::new(48, rng.random()),
        MimcChain::new(96, rng.random()),
    ];
    let regs: Vec<Registered> = bases
        .iter()
        .enumerate()
        .map(|(i, b)| register(&engine, &pces, &dir, &format!("c{i}"), b.clone(), &mut rng))
        .collect();
    // Size the budget: the two largest keys' load peaks, a few working sets and the CPU
    // backend's tables, so all three keys never fit with proofs running.
    let key_bytes: Vec<u64> = regs
        .iter()
        .map(|r| {
            let f = srs_store::ParamsFile::open(&r.path).unwrap();
            f.plan(&srs_store::LoadOptions::default()).peak_bytes()
        })
        .collect();
    let ws_max = regs
        .iter()
        .zip(&bases)
        .map(|(r, b)| {
            let pce = pces
                .get_or_extract(&pce_cache::CircuitKey::new(&r.id), || b.clone())
                .unwrap();
            working_set(&budget, &engine, r, &pce)
        })
        .max()
        .unwrap();
    let mut sorted = key_bytes.clone();
    sorted.sort_unstable();
    let total = sorted[1] + sorted[2] + 4 * ws_max + (1 << 20);
    budget.set_total_bytes(total);
    eprintln!("seed {seed}: budget {total}, keys {key_bytes:?}, working set {ws_max}");

    let stop = Arc::new(AtomicBool::new(false));
    let max_seen = Arc::new(AtomicU64::new(0));
    let sampler = {
        let (b, stop, max_seen) = (budget.clone(), Arc::clone(&stop), Arc::clone(&max_seen));
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let used = b.used_bytes();
                max_seen.fetch_max(used, Ordering::Relaxed);
                assert!(used <= total, "charged {used} > budget {total}");
                std::thread::sleep(Duration::from_micros(500));
            }
        })
    };

    #[derive(Clone, Copy, PartialEq, Eq, Debug)]
    enum Want {
        Complete,
        Fail,
        Cancel,
    }
    let mut jobs: Vec<(JobId, Want)> = Vec::new();
    for j in 0..n_jobs {
        let which = rng.random_range(0..bases.len());
        let n = rng.random_range(1..=3usize);
        let bad = rng.random_range(0..100) < 8;
        let mut partitions: Vec<Partition> = (0..n)
            .map(|_| Partition::circuit(chain_like(&bases[which], &mut rng)))
            .collect();
        if bad {
            // Another circuit's witness: a different shape, refused by the PCE.
            let other = (which + 1) % bases.len();
            partitions[rng.random_range(0..n)] =
                Partition::circuit(chain_like(&bases[other], &mut rng));
        }
        let priority = Priority::ALL[rng.random_range(0..4)];
        let id = engine
            .submit(JobSpec {
                circuit: regs[which].id.clone(),
                partitions,
                priority,
                randomness: None,
            })
            .unwrap();
        let want = if rng.random_range(0..100) < 10 {
            if rng.random_range(0..2) == 0 {
                std::thread::sleep(Duration::from_micros(rng.random_range(0..3000)));
            }
            engine.cancel(id).unwrap();
            Want::Cancel
        } else if bad {
            Want::Fail
        } else {
            Want::Complete
        };
        jobs.push((id, want));
        if j % 50 == 49 {
            // Let the pipeline drain a little so cancellations hit every stage.
            std::thread::sleep(Duration::from_millis(rng.random_range(0..20)));
        }
    }
    let mut seen = HashMap::new();
    for (id, want) in &jobs {
        let o = engine
            .await_job(*id, Some(Duration::from_secs(600)))
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let ok = match (&o.status, want) {
            (JobStatus::Completed, Want::Complete) => true,
            (JobStatus::Failed(_), Want::Fail) => true,
            (JobStatus::Cancelled, Want::Cancel) => true,
            // A cancellation may come after the job ended.
            (JobStatus::Completed | JobStatus::Failed(_), Want::Cancel) => true,
            _ => false,
        };
        assert!(ok, "seed {seed}: {id} wanted {want:?}, got {:?}", o.status);
        assert!(seen.insert(o.sequence, *id).is_none(), "one end per job");
    }
    engine.shutdown(Shutdown::Graceful);
    stop.store(true, Ordering::Relaxed);
    sampler.join().expect("sampler: the budget was exceeded");
    let status = engine.status();
    assert_eq!(
        status.jobs_completed + status.jobs_failed + status.jobs_cancelled,
        n_jobs as u64,
        "seed {seed}"
    );
    let s = budget.snapshot();
    assert!(s.peak_used_bytes <= total, "seed {seed}");
    for c in [
        Category::WorkingSet,
        Category::Transient,
        Category::PinnedPool,
    ] {
        assert_eq!(s.used_in(c), 0, "seed {seed}: {c} leaked");
    }
    let faults: u64 = sims.iter().map(|d| d.faults.load(Ordering::Relaxed)).sum();
    eprintln!(
        "seed {seed}: {} completed, {} failed, {} cancelled, {faults} device faults retried, peak charged {} of {total}",
        status.jobs_completed,
        status.jobs_failed,
        status.jobs_cancelled,
        s.peak_used_bytes
    );
    assert!(faults > 0, "seed {seed}: faults were injected");
    assert!(status.jobs_completed > n_jobs as u64 / 2, "seed {seed}");
}

/// A circuit that holds a charge, as a daemon's parsed witness does.
#[derive(Clone)]
struct Holding {
    inner: MimcChain,
    _charge: Arc<memory_budget::Reservation>,
}

impl Circuit<Scalar> for Holding {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        self.inner.synthesize(cs)
    }
}

#[test]
fn job_end_hook_devices_counts_and_witnesses_dropped_at_the_end() {
    let seed = seed();
    let mut rng = rng(seed);
    let budget = Budget::fixed(1 << 30);
    let gate = Gate::closed();
    let _open = OpenOnDrop(Arc::clone(&gate));
    let mut dev = TestDevice::new(&budget, 7);
    dev.gate = Some(Arc::clone(&gate));
    let ended = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut cfg = config(&budget, vec![device("sim0", Arc::new(dev))]);
    let seen = Arc::clone(&ended);
    cfg.on_job_end = Some(Arc::new(move |id| seen.lock().unwrap().push(id)));
    // A small memory to keep finished jobs in: the witnesses must go anyway.
    cfg.keep_finished = 1000;
    let engine = Engine::start(cfg).unwrap();
    let dir = TempDir::new("hook");
    let pces = pce_cache();
    let base = MimcChain::new(30, rng.random());
    register(&engine, &pces, &dir, "mimc", base.clone(), &mut rng);
    let witnesses = Budget::fixed(1 << 20);
    let job = |rng: &mut rand::rngs::StdRng| {
        let charge = witnesses
            .try_reserve(1000, Category::WorkingSet, "witness")
            .unwrap();
        engine
            .submit(JobSpec::single(
                "mimc",
                Partition::circuit(Holding {
                    inner: chain_like(&base, rng),
                    _charge: Arc::new(charge),
                }),
            ))
            .unwrap()
    };
    let a = job(&mut rng);
    gate.wait_arrivals(1);
    assert_eq!(engine.job_devices(a).unwrap(), ["sim0"]);
    let b = job(&mut rng);
    let c = job(&mut rng);
    // Every live partition is counted once: not yet admitted, or in progress.
    let start = std::time::Instant::now();
    loop {
        let st = engine.status();
        let m = &st.circuits[0];
        if m.queued + m.in_progress == 3 && m.in_progress >= 1 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "seed {seed}: {m:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(witnesses.used_bytes(), 3000);
    assert!(engine.cancel(c).unwrap());
    gate.open();
    for id in [a, b, c] {
        engine.await_job(id, Some(Duration::from_secs(60))).unwrap();
    }
    // The jobs are remembered, their witnesses are not.
    assert_eq!(
        witnesses.used_bytes(),
        0,
        "seed {seed}: a finished job kept its witness"
    );
    assert!(engine.outcome(a).unwrap().is_some());
    // A partition stops counting when it lets go of its resources, just after its job's
    // outcome is recorded (what await returns on).
    let start = std::time::Instant::now();
    loop {
        let m = &engine.status().circuits[0];
        if (m.queued, m.in_progress) == (0, 0) {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "seed {seed}: {m:?} after every job ended"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    engine.shutdown(Shutdown::Graceful);
    let mut got = ended.lock().unwrap().clone();
    got.sort();
    assert_eq!(got, [a, b, c], "the hook runs once per job");
}

#[test]
fn a_partition_synthesized_alone_never_shares_synthesis() {
    let seed = seed();
    let mut rng = rng(seed);
    let budget = Budget::fixed(1 << 30);
    let mut cfg = config(
        &budget,
        vec![device("sim0", Arc::new(TestDevice::new(&budget, 11)))],
    );
    // Room for four syntheses at once, were it not for `synthesized_alone`.
    cfg.max_synthesis = Some(4);
    let engine = Engine::start(cfg).unwrap();
    let dir = TempDir::new("alone");
    let pces = pce_cache();
    let base = MimcChain::new(30, rng.random());
    register(&engine, &pces, &dir, "mimc", base.clone(), &mut rng);
    let gated = |gate: &Arc<Gate>, rng: &mut rand::rngs::StdRng| {
        Partition::circuit(GatedCircuit {
            inner: chain_like(&base, rng),
            gate: Arc::clone(gate),
        })
    };
    let submit = |p: Partition| engine.submit(JobSpec::single("mimc", p)).unwrap();
    let completes = |ids: &[JobId]| {
        for &id in ids {
            let o = engine.await_job(id, Some(Duration::from_secs(60))).unwrap();
            assert_eq!(o.status, JobStatus::Completed, "seed {seed}");
        }
    };
    // One partition held in synthesis and one held in admission behind it, and they stay
    // so (the second would be through in milliseconds if it were let in).
    let one_waits_behind_one = |what: &str| {
        let start = std::time::Instant::now();
        while engine.status().stages.admitting != 1 {
            assert!(start.elapsed() < Duration::from_secs(30), "{what}");
            std::thread::sleep(Duration::from_millis(2));
        }
        for _ in 0..25 {
            let st = engine.status().stages;
            assert_eq!(
                (st.synthesizing, st.admitting),
                (1, 1),
                "seed {seed}: {what}"
            );
            std::thread::sleep(Duration::from_millis(8));
        }
    };

    // An alone partition synthesizing keeps an ordinary one out of synthesis.
    let g = Gate::closed();
    let _open = OpenOnDrop(Arc::clone(&g));
    assert!(!gated(&g, &mut rng).is_synthesized_alone());
    let a = submit(gated(&g, &mut rng).synthesized_alone());
    g.wait_arrivals(1);
    let b = submit(Partition::circuit(chain_like(&base, &mut rng)));
    one_waits_behind_one("an ordinary partition behind an alone one");
    g.open();
    completes(&[a, b]);

    // An ordinary partition synthesizing keeps an alone one out.
    let g = Gate::closed();
    let _open = OpenOnDrop(Arc::clone(&g));
    let c = submit(gated(&g, &mut rng));
    g.wait_arrivals(1);
    let d = submit(Partition::circuit(chain_like(&base, &mut rng)).synthesized_alone());
    one_waits_behind_one("an alone partition behind an ordinary one");
    g.open();
    completes(&[c, d]);

    // Unmarked, two synthesize at once.
    let g = Gate::closed();
    let _open = OpenOnDrop(Arc::clone(&g));
    let e = submit(gated(&g, &mut rng));
    let f = submit(gated(&g, &mut rng));
    g.wait_arrivals(2);
    g.open();
    completes(&[e, f]);

    engine.shutdown(Shutdown::Graceful);
    assert_eq!(budget.snapshot().used_in(Category::WorkingSet), 0);
    assert_eq!(engine.status().stages, engine::StageCounts::default());
}

#[test]
fn shutdowns_and_awaits_racing_job_ends_never_deadlock() {
    // A job's end records its outcome under the job's lock, then takes the job table;
    // shutdown and await wait holding the table. Both stops at once (graceful, and abort
    // a moment later) and awaiting threads, while jobs end, must all return.
    let seed = seed();
    let mut rng = rng(seed);
    let dir = TempDir::new("stop-race");
    let pces = pce_cache();
    let base = MimcChain::new(8, rng.random());
    for round in 0..24 {
        let budget = Budget::fixed(1 << 30);
        let dev = TestDevice::new(&budget, rng.random());
        let engine = Engine::start(config(&budget, vec![device("sim0", Arc::new(dev))])).unwrap();
        register(&engine, &pces, &dir, "mimc", base.clone(), &mut rng);
        let jobs: Vec<JobId> = (0..6)
            .map(|_| {
                let c = chain_like(&base, &mut rng);
                engine
                    .submit(JobSpec::single("mimc", Partition::circuit(c)))
                    .unwrap()
            })
            .collect();
        let abort_after = Duration::from_micros(rng.random_range(0..3000));
        let (done, finished) = std::sync::mpsc::channel::<&str>();
        std::thread::scope(|s| {
            let engine = &engine;
            let jobs = &jobs;
            let d = done.clone();
            s.spawn(move || {
                for &id in jobs {
                    let _ = engine.await_job(id, None);
                }
                d.send("await").unwrap();
            });
            let d = done.clone();
            s.spawn(move || {
                engine.shutdown(Shutdown::Graceful);
                d.send("graceful").unwrap();
            });
            let d = done.clone();
            s.spawn(move || {
                std::thread::sleep(abort_after);
                engine.shutdown(Shutdown::Abort);
                d.send("abort").unwrap();
            });
            for _ in 0..3 {
                if finished.recv_timeout(Duration::from_secs(60)).is_err() {
                    eprintln!(
                        "seed {seed}, round {round}: deadlocked (abort after {abort_after:?})"
                    );
                    // The stuck threads cannot be joined: end the process with the failure.
                    std::process::exit(101);
                }
            }
        });
        for &id in &jobs {
            let o = engine.outcome(id).unwrap();
            assert!(
                o.is_some_and(|o| matches!(o.status, JobStatus::Completed | JobStatus::Cancelled)),
                "seed {seed}, round {round}: job {id} did not end as it should"
            );
        }
    }
}

/// Registration pins each device's staging for the circuit's proofs (one proving and
/// the hand-off's), over its domain; off by configuration, then asked for by name; a
/// driver failure there is a typed error and leaves the circuit unregistered.
#[test]
fn staging_is_prewarmed_at_registration() {
    let seed = seed();
    let mut rng = rng(seed);
    let budget = Budget::fixed(1 << 30);
    let devs = [
        Arc::new(TestDevice::new(&budget, 5)),
        Arc::new(TestDevice::new(&budget, 6)),
    ];
    let depth = rng.random_range(1..4usize);
    let mut cfg = config(
        &budget,
        devs.iter()
            .enumerate()
            .map(|(i, d)| device(&format!("sim{i}"), d.clone()))
            .collect(),
    );
    cfg.handoff_depth = depth;
    let engine = Engine::start(cfg).unwrap();
    let dir = TempDir::new("prewarm");
    let pces = pce_cache();
    let circuit = RandomR1cs {
        n_inputs: 2,
        n_constraints: rng.random_range(10..200),
        shape_seed: rng.random(),
        value_seed: rng.random(),
        corrupt: false,
    };
    let reg = register(&engine, &pces, &dir, "r1cs", circuit.clone(), &mut rng);
    let m = reg.params.h.len() + 1;
    assert!(m.is_power_of_two(), "seed {seed}: domain {m}");
    for d in &devs {
        assert_eq!(
            *d.prewarms.lock().unwrap(),
            vec![(m, 1 + depth)],
            "seed {seed}"
        );
    }
    // Asked again by name: the same call (the backend's pool makes it idempotent).
    assert_eq!(engine.prewarm_staging("r1cs").unwrap(), 0);
    assert!(matches!(
        engine.prewarm_staging("nope"),
        Err(EngineError::UnknownCircuit { .. })
    ));
    // A driver failure: registration fails naming the device, the circuit is not there.
    devs[1].prewarm_fault.store(true, Ordering::SeqCst);
    let err = engine
        .register(CircuitSpec {
            id: "second".into(),
            params: srs_store::SrsSpec::new("second", &reg.path),
            pce: PceSource::Held(
                pces.get_or_extract(&pce_cache::CircuitKey::new("r1cs"), || circuit.clone())
                    .unwrap(),
            ),
        })
        .unwrap_err();
    assert!(
        matches!(&err, EngineError::Prewarm { circuit, device, .. } if circuit == "second" && device == "sim1"),
        "{err}"
    );
    assert!(matches!(
        engine.submit(JobSpec::single(
            "second",
            Partition::circuit(circuit.clone())
        )),
        Err(EngineError::UnknownCircuit { .. })
    ));
    devs[1].prewarm_fault.store(false, Ordering::SeqCst);
    // The first circuit proves as before.
    let id = engine
        .submit(JobSpec::single("r1cs", Partition::circuit(circuit)))
        .unwrap();
    let out = engine
        .await_job(id, Some(Duration::from_secs(120)))
        .unwrap();
    assert!(
        matches!(out.status, JobStatus::Completed),
        "{:?}",
        out.status
    );
    engine.shutdown(Shutdown::Graceful);

    // Off by configuration: registration pins nothing.
    let quiet = Arc::new(TestDevice::new(&budget, 7));
    let mut cfg = config(&budget, vec![device("sim0", quiet.clone())]);
    cfg.prewarm_staging = false;
    let engine = Engine::start(cfg).unwrap();
    register(
        &engine,
        &pces,
        &dir,
        "other",
        chain_like_r1cs(&mut rng),
        &mut rng,
    );
    assert!(quiet.prewarms.lock().unwrap().is_empty());
    engine.prewarm_staging("other").unwrap();
    assert_eq!(quiet.prewarms.lock().unwrap().len(), 1);
    engine.shutdown(Shutdown::Graceful);
}

fn chain_like_r1cs(rng: &mut impl Rng) -> RandomR1cs {
    RandomR1cs {
        n_inputs: 1,
        n_constraints: rng.random_range(5..50),
        shape_seed: rng.random(),
        value_seed: rng.random(),
        corrupt: false,
    }
}

/// A partition synthesized while its device works on another has its a, b and c copied
/// ahead (`Prover::prefetch`), as many partitions a device as can wait for it (the
/// hand-off's depth and the one blocked on entering it); one synthesized for an idle
/// device is not. Proofs stay the reference's, and every byte is returned.
#[test]
fn a_partition_synthesized_beside_a_busy_device_is_copied_ahead() {
    let seed = seed();
    let mut rng = rng(seed);
    let budget = Budget::fixed(1 << 30);
    let gate = Gate::closed();
    let mut dev = TestDevice::new(&budget, 9);
    dev.staged = true;
    dev.gate = Some(gate.clone());
    let dev = Arc::new(dev);
    let mut cfg = config(&budget, vec![device("sim0", dev.clone())]);
    cfg.max_synthesis = Some(4);
    assert_eq!(cfg.handoff_depth, 1);
    let engine = Engine::start(cfg).unwrap();
    let dir = TempDir::new("prefetch");
    let pces = pce_cache();
    let base = MimcChain::new(rng.random_range(20..80), rng.random());
    let reg = register(&engine, &pces, &dir, "mimc", base.clone(), &mut rng);
    let synth_gate = Gate::closed();
    let circuits = [
        base.clone(),
        chain_like(&base, &mut rng),
        chain_like(&base, &mut rng),
        chain_like(&base, &mut rng),
    ];
    let rs: Vec<Randomness> = (0..4).map(|_| Randomness::random(&mut rng)).collect();
    let id = engine
        .submit(JobSpec {
            circuit: "mimc".into(),
            partitions: vec![
                Partition::circuit(circuits[0].clone()),
                Partition::circuit(GatedCircuit {
                    inner: circuits[1].clone(),
                    gate: synth_gate.clone(),
                }),
                Partition::circuit(GatedCircuit {
                    inner: circuits[2].clone(),
                    gate: synth_gate.clone(),
                }),
                Partition::circuit(GatedCircuit {
                    inner: circuits[3].clone(),
                    gate: synth_gate.clone(),
                }),
            ],
            priority: Priority::Normal,
            randomness: Some(rs.clone()),
        })
        .unwrap();
    // Partition 0 holds the device; then 1, 2 and 3 synthesize: one goes into the
    // hand-off (depth 1), the others wait to enter it, and two of them may hold copies on
    // the device (the hand-off's place and the one waiting to enter it).
    gate.wait_arrivals(1);
    synth_gate.open();
    let start = std::time::Instant::now();
    while engine.status().stages.waiting_device < 3 {
        assert!(start.elapsed() < Duration::from_secs(60), "seed {seed}");
        std::thread::sleep(Duration::from_millis(2));
    }
    gate.open();
    let out = engine
        .await_job(id, Some(Duration::from_secs(120)))
        .unwrap();
    assert_eq!(out.status, JobStatus::Completed, "seed {seed}");
    let flags: Vec<bool> = out.partitions.iter().map(|t| t.prefetched).collect();
    assert!(
        !flags[0],
        "seed {seed}: the first found the device idle: {flags:?}"
    );
    assert_eq!(
        flags.iter().filter(|f| **f).count(),
        2,
        "seed {seed}: depth + 1 slots a device: {flags:?}"
    );
    assert_eq!(dev.prefetches.load(Ordering::SeqCst), 2, "seed {seed}");
    for (k, c) in circuits.iter().enumerate() {
        let want =
            proof_bytes(&groth16::create_proof(c.clone(), &reg.params, rs[k].r, rs[k].s).unwrap());
        assert_eq!(
            proof_bytes(&out.proofs[k]),
            want,
            "seed {seed}: partition {k}"
        );
    }
    engine.shutdown(Shutdown::Graceful);
    assert_eq!(
        budget.snapshot().used_in(Category::WorkingSet),
        0,
        "seed {seed}"
    );
}
