//! What a caller submits and what it gets back.

use std::sync::Arc;
use std::time::Duration;

use bellman::Circuit;
use bls12_381::{Bls12, Scalar};
use groth16_prover::{Prover, ProverError, Randomness, Synthesis, Synthesized};
use memory_budget::Reservation;
use pce_cache::{Pce, Witness};

/// A job's priority: critical > high > normal > low; FIFO within one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Priority {
    /// Background work.
    Low,
    /// The default.
    #[default]
    Normal,
    /// Work others wait on (Filecoin: Window PoSt).
    High,
    /// Deadlines (Filecoin: Winning PoSt).
    Critical,
}

impl Priority {
    /// All, lowest first.
    pub const ALL: [Priority; 4] = [
        Priority::Low,
        Priority::Normal,
        Priority::High,
        Priority::Critical,
    ];

    /// Lowercase name (metrics label).
    pub fn name(self) -> &'static str {
        match self {
            Priority::Low => "low",
            Priority::Normal => "normal",
            Priority::High => "high",
            Priority::Critical => "critical",
        }
    }

    /// The memory budget's priority for this one (waiters are admitted in this order).
    pub fn budget(self) -> memory_budget::Priority {
        match self {
            Priority::Low => memory_budget::Priority::LOW,
            Priority::Normal => memory_budget::Priority::NORMAL,
            Priority::High => memory_budget::Priority::HIGH,
            Priority::Critical => memory_budget::Priority::new(255),
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// A job's id, unique in one engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobId(pub u64);

impl std::fmt::Display for JobId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "job-{}", self.0)
    }
}

/// Runs one partition's synthesis with a prover, the circuit's PCE and the admitted
/// working set.
type SynthesizeFn =
    dyn Fn(&Prover, &Pce, Reservation) -> Result<Synthesized, ProverError> + Send + Sync;

/// One partition's witness source: a bellman circuit value with its witness, synthesized
/// witness-only through the circuit's PCE. Kept until the partition is done, so a
/// partition whose device failed can be synthesized again for its retry.
#[derive(Clone)]
pub struct Partition {
    synthesize: Arc<SynthesizeFn>,
    alone: bool,
}

impl std::fmt::Debug for Partition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Partition")
    }
}

impl Partition {
    /// A partition from a circuit value (cloned for each attempt).
    pub fn circuit<C>(circuit: C) -> Partition
    where
        C: Circuit<Scalar> + Clone + Send + Sync + 'static,
    {
        Partition {
            synthesize: Arc::new(move |prover, pce, admitted| {
                prover.synthesize(Synthesis::Pce(pce), circuit.clone(), Some(admitted))
            }),
            alone: false,
        }
    }

    /// A partition whose witness `witness` computes (inputs with ONE first, then aux, each
    /// in allocation order, as `pce_cache::WitnessCs` gives them), for a front end that
    /// computes witnesses by its own means: it runs while the partition's admitted working
    /// set is held, which covers the witness (so it allocates nothing else large
    /// uncharged); the witness is moved into the proof and a, b and c are evaluated from
    /// it on all cores ([`Prover::synthesize_witness`]): no circuit runs and no copy is
    /// made. Called again for a retry.
    pub fn witness<F>(witness: F) -> Partition
    where
        F: Fn() -> Result<Witness, ProverError> + Send + Sync + 'static,
    {
        Partition {
            synthesize: Arc::new(move |prover, pce, admitted| {
                prover.synthesize_witness(pce, witness()?, Some(admitted))
            }),
            alone: false,
        }
    }

    /// The same partition, synthesized alone: for a circuit whose witness synthesis
    /// already keeps every core busy (a thread pool of its own, as a Filecoin PoRep
    /// partition's challenges), so that a second synthesis beside it only competes for
    /// the same cores and holds a second working set. The engine starts it once no other
    /// synthesis runs, and starts no other while it runs (its device phase still overlaps
    /// the next synthesis).
    pub fn synthesized_alone(mut self) -> Partition {
        self.alone = true;
        self
    }

    /// Whether [`Partition::synthesized_alone`] was asked for.
    pub fn is_synthesized_alone(&self) -> bool {
        self.alone
    }

    pub(crate) fn run(
        &self,
        prover: &Prover,
        pce: &Pce,
        admitted: Reservation,
    ) -> Result<Synthesized, ProverError> {
        (self.synthesize)(prover, pce, admitted)
    }
}

/// A proving job: partitions of one registered circuit, proved under one priority.
#[derive(Clone, Debug)]
pub struct JobSpec {
    /// The registered circuit ([`crate::Engine::register`]).
    pub circuit: String,
    /// One or more partitions; the job completes when all have.
    pub partitions: Vec<Partition>,
    /// Admission order.
    pub priority: Priority,
    /// (r, s) per partition; `None`: drawn fresh for each.
    pub randomness: Option<Vec<Randomness>>,
}

impl JobSpec {
    /// A job of one partition at normal priority with fresh (r, s).
    pub fn single(circuit: impl Into<String>, partition: Partition) -> JobSpec {
        JobSpec {
            circuit: circuit.into(),
            partitions: vec![partition],
            priority: Priority::Normal,
            randomness: None,
        }
    }

    /// The same job at `priority`.
    pub fn with_priority(mut self, priority: Priority) -> JobSpec {
        self.priority = priority;
        self
    }
}

/// How a job ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobStatus {
    /// Every partition proved.
    Completed,
    /// A partition failed (the reason; the other partitions were stopped).
    Failed(String),
    /// Cancelled by the caller or by an aborting shutdown.
    Cancelled,
}

/// Where a job's time went (sums over its partitions, except `queue_wait` and `total`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JobTimings {
    /// Submission to the first partition's admission.
    pub queue_wait: Duration,
    /// Loading or moving the key for the job's partitions.
    pub key_load: Duration,
    /// Witness synthesis with a, b, c and the witness check.
    pub synthesis: Duration,
    /// H and the MSMs (the device).
    pub gpu: Duration,
    /// Assembly and self-check.
    pub assembly: Duration,
    /// Submission to the end.
    pub total: Duration,
}

/// When one partition's phases ran, as offsets from its job's submission (a timeline of
/// the engine's pipeline: what overlapped what), and the prover's own step times.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PartitionTrace {
    /// The partition's index in its job.
    pub index: usize,
    /// 0 for the first try; a retry (after a device fault) counts up.
    pub attempt: usize,
    /// Admission (the budget granted its working set).
    pub admitted: Duration,
    /// Witness synthesis with a, b, c: start and end.
    pub synthesis: (Duration, Duration),
    /// H and the MSMs: start (the device worker took it) and end.
    pub device: (Duration, Duration),
    /// Assembly and self-check: start and end.
    pub assembly: (Duration, Duration),
    /// Its a, b and c were copied to the device ahead of its device phase, while the
    /// device worked on the partition before it.
    pub prefetched: bool,
    /// The prover's step times for this partition (H, each MSM, staging waits).
    pub proof: groth16_prover::ProofTimings,
}

/// A finished job.
#[derive(Clone, Debug)]
pub struct JobOutcome {
    /// Which job.
    pub id: JobId,
    /// How it ended.
    pub status: JobStatus,
    /// The partitions' proofs in order (empty unless completed).
    pub proofs: Vec<groth16::Proof<Bls12>>,
    /// Where the time went.
    pub timings: JobTimings,
    /// The devices that computed the partitions (names, in partition order; empty unless
    /// completed).
    pub devices: Vec<String>,
    /// The order in which jobs ended in this engine (1 for the first).
    pub sequence: u64,
    /// Each completed partition's timeline, in partition order (empty unless completed).
    pub partitions: Vec<PartitionTrace>,
}

impl JobOutcome {
    /// The proofs concatenated in `groth16::Proof::write`'s 192-byte encoding.
    pub fn proof_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(192 * self.proofs.len());
        for p in &self.proofs {
            // Writing to a Vec cannot fail.
            let _ = p.write(&mut out);
        }
        out
    }
}
