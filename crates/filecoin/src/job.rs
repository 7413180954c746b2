//! One proof request as partitions of one circuit, and the driver that proves them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bls12_381::Scalar;
use groth16_prover::testing::ParamShape;
use groth16_prover::{Prover, ProverConfig, ProvingKey, Randomness};
use memory_budget::{Budget, Category, Reservation};
use pce_cache::{Pce, Shape, Witness};
use srs_store::{ExpectedSizes, LoadOptions, ParamsFile};
use storage_proofs_core::parameter_cache::VERSION;

use crate::bridge::{RecordingCs, WitnessCs};
use crate::FilecoinError;

/// Bytes of one partition proof (compressed A, B, C).
pub const PARTITION_PROOF_BYTES: usize = 192;

/// The four kinds of Filecoin proofs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProofKind {
    /// PoRep commit phase 2 (cuzk's POREP_SEAL_COMMIT).
    PorepC2,
    /// Window PoSt (cuzk's WINDOW_POST_PARTITION).
    WindowPost,
    /// Winning PoSt (cuzk's WINNING_POST).
    WinningPost,
    /// SnapDeals empty-sector update (cuzk's SNAP_DEALS_UPDATE).
    SnapDeals,
}

impl ProofKind {
    /// Short name (`porep-c2`, `window-post`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ProofKind::PorepC2 => "porep-c2",
            ProofKind::WindowPost => "window-post",
            ProofKind::WinningPost => "winning-post",
            ProofKind::SnapDeals => "snap-deals",
        }
    }
}

/// A circuit: its kind, sector size and the identifier filecoin-proofs names its
/// parameter files by (`v28-<cache_id>.params` / `.vk`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CircuitId {
    /// The proof kind.
    pub kind: ProofKind,
    /// Sector size in bytes.
    pub sector_size: u64,
    /// filecoin-proofs' cache identifier (`<prefix>-<sha256 of the public parameters>`).
    pub cache_id: String,
}

impl CircuitId {
    /// The parameter file's name in a Filecoin parameter folder.
    pub fn params_file_name(&self) -> String {
        format!("v{VERSION}-{}.params", self.cache_id)
    }

    /// The verifying key's file name.
    pub fn vk_file_name(&self) -> String {
        format!("v{VERSION}-{}.vk", self.cache_id)
    }
}

impl std::fmt::Display for CircuitId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} of a {} sector",
            self.kind.name(),
            crate::sector_size_name(self.sector_size)
        )
    }
}

/// A request as partitions of one circuit: what the engine schedules. Every partition has
/// the shape of the blank circuit, so one recording serves all of them.
pub trait PartitionJob: Send + Sync {
    /// The circuit.
    fn circuit_id(&self) -> &CircuitId;
    /// Partitions to prove (the output is their proofs in this order).
    fn n_partitions(&self) -> usize;
    /// Records the blank circuit into a PCE, charging `reservation` if given.
    fn record(
        &self,
        reservation: Option<Reservation>,
    ) -> Result<(Pce, Option<Reservation>), FilecoinError>;
    /// Witness-only synthesis of partition `k` (`shape` sizes the buffers).
    fn witness(&self, k: usize, shape: Shape) -> Result<Witness, FilecoinError>;
    /// Partition `k`'s public inputs as filecoin-proofs' verifier computes them (ONE
    /// excluded).
    fn public_inputs(&self, k: usize) -> Result<Vec<Scalar>, FilecoinError>;
    /// Whether [`PartitionJob::witness`] computes a partition on all cores (rayon's pool):
    /// an engine then synthesizes these partitions one at a time
    /// (`engine::Partition::synthesized_alone`), as two beside each other only compete
    /// for the same cores and hold two working sets.
    fn parallel_witness(&self) -> bool {
        false
    }
}

/// A partition's bellperson circuit and how its witness is computed: by default one
/// witness-only pass in allocation order; a circuit made of independent pieces (PoRep's
/// challenges) computes them on all cores instead, into the same witness.
pub(crate) trait PartitionCircuit: bellperson::Circuit<blstrs::Scalar> + Sized {
    /// Whether [`PartitionCircuit::witness`] runs on all cores.
    const PARALLEL_WITNESS: bool = false;
    /// Witness-only synthesis of partition `k` (`shape` sizes the buffers).
    fn witness(self, k: usize, shape: Shape) -> Result<Witness, FilecoinError> {
        one_pass(self, k, shape)
    }
}

/// Partition `k`'s witness in one witness-only pass in allocation order.
pub(crate) fn one_pass<C: bellperson::Circuit<blstrs::Scalar>>(
    circuit: C,
    k: usize,
    shape: Shape,
) -> Result<Witness, FilecoinError> {
    WitnessCs::synthesize(circuit, shape.n_inputs as usize, shape.n_aux as usize)
        .map_err(|source| witness_error(k, source))
}

/// A witness synthesis of partition `k` that failed.
pub(crate) fn witness_error(k: usize, source: bellperson::SynthesisError) -> FilecoinError {
    FilecoinError::Synthesis {
        phase: "witness",
        partition: Some(k),
        source: Box::new(source),
    }
}

/// A [`PartitionJob`] from three closures over a bellperson circuit type.
pub(crate) struct Job<C, B, P, I> {
    pub(crate) id: CircuitId,
    pub(crate) n_partitions: usize,
    pub(crate) blank: B,
    pub(crate) partition: P,
    pub(crate) inputs: I,
    pub(crate) _circuit: std::marker::PhantomData<fn() -> C>,
}

impl<C, B, P, I> PartitionJob for Job<C, B, P, I>
where
    C: PartitionCircuit,
    B: Fn() -> Result<C, FilecoinError> + Send + Sync,
    P: Fn(usize) -> Result<C, FilecoinError> + Send + Sync,
    I: Fn(usize) -> Result<Vec<blstrs::Scalar>, FilecoinError> + Send + Sync,
{
    fn circuit_id(&self) -> &CircuitId {
        &self.id
    }

    fn n_partitions(&self) -> usize {
        self.n_partitions
    }

    fn record(
        &self,
        reservation: Option<Reservation>,
    ) -> Result<(Pce, Option<Reservation>), FilecoinError> {
        RecordingCs::record((self.blank)()?, reservation)
    }

    fn witness(&self, k: usize, shape: Shape) -> Result<Witness, FilecoinError> {
        (self.partition)(k)?.witness(k, shape)
    }

    fn public_inputs(&self, k: usize) -> Result<Vec<Scalar>, FilecoinError> {
        Ok((self.inputs)(k)?
            .iter()
            .map(crate::bridge::to_bls)
            .collect())
    }

    fn parallel_witness(&self) -> bool {
        C::PARALLEL_WITNESS
    }
}

/// Where the parameters are and how to prove.
#[derive(Clone, Debug)]
pub struct ProveOptions {
    /// The Filecoin parameter folder (`v28-...params` files).
    pub params_dir: PathBuf,
    /// Every large allocation is charged here.
    pub budget: Budget,
    /// Backend and self-check of the prover.
    pub config: ProverConfig,
    /// One (r, s) per partition; drawn from the operating system when `None`.
    pub randomness: Option<Vec<Randomness>>,
}

impl ProveOptions {
    /// Parameters from `params_dir`, the default prover settings, fresh randomness.
    pub fn new(params_dir: impl Into<PathBuf>, budget: Budget) -> Self {
        ProveOptions {
            params_dir: params_dir.into(),
            budget,
            config: ProverConfig::default(),
            randomness: None,
        }
    }
}

/// Records `job`'s circuit, charged to `budget` (`Category::Pce`) at its recording peak,
/// then at what stays resident.
pub fn record(
    job: &dyn PartitionJob,
    budget: &Budget,
) -> Result<(Pce, Reservation), FilecoinError> {
    let reservation = budget
        .try_reserve(0, Category::Pce, "filecoin circuit recording")
        .map_err(|source| FilecoinError::Prover {
            partition: 0,
            source: Box::new(groth16_prover::ProverError::Budget {
                what: "pce recording",
                requested_bytes: 0,
                source,
            }),
        })?;
    let (pce, reservation) = job.record(Some(reservation))?;
    let mut reservation = reservation
        .ok_or_else(|| FilecoinError::Unsupported("recording lost its reservation".into()))?;
    reservation.shrink_to(pce.resident_bytes());
    Ok((pce, reservation))
}

/// The parameter file of `id` in `dir`, checked to exist and to hold exactly the query
/// sizes `pce` needs (the parameters of another circuit are refused before any load).
pub fn params_for(dir: &Path, id: &CircuitId, pce: &Pce) -> Result<PathBuf, FilecoinError> {
    let path = dir.join(id.params_file_name());
    if !path.is_file() {
        return Err(FilecoinError::ParamsMissing {
            circuit: id.to_string(),
            path,
        });
    }
    let shape = ParamShape::of(pce);
    let n = |x: usize| Some(u32::try_from(x).unwrap_or(u32::MAX));
    let expected = ExpectedSizes {
        n_ic: n(shape.n_inputs),
        n_h: n(shape.n_h),
        n_l: n(shape.n_l),
        n_a: n(shape.n_a),
        n_b_g1: n(shape.n_b),
        n_b_g2: n(shape.n_b),
    };
    ParamsFile::open(&path)?
        .layout()
        .check_expected(&expected)
        .map_err(|source| FilecoinError::ParamsMismatch {
            circuit: id.to_string(),
            path: path.clone(),
            source: Box::new(source),
        })?;
    Ok(path)
}

/// Proves every partition of `job` with the parameters in `opts.params_dir` and returns
/// the proofs concatenated, 192 bytes each, as filecoin-proofs does. Each proof is checked
/// against filecoin-proofs' public inputs for its partition before it is returned.
pub fn prove(job: &dyn PartitionJob, opts: &ProveOptions) -> Result<Vec<u8>, FilecoinError> {
    let id = job.circuit_id();
    let (pce, _pce_charge) = record(job, &opts.budget)?;
    let path = params_for(&opts.params_dir, id, &pce)?;
    let key = ProvingKey::load(&path, &opts.budget, &LoadOptions::default()).map_err(|source| {
        FilecoinError::Prover {
            partition: 0,
            source: Box::new(source),
        }
    })?;
    let prover =
        Prover::new(Arc::new(key), opts.budget.clone(), opts.config).map_err(|source| {
            FilecoinError::Prover {
                partition: 0,
                source: Box::new(source),
            }
        })?;
    prove_with(job, &prover, &pce, &opts.budget, opts.randomness.as_deref())
}

/// [`prove`] with a prover and a recording the caller keeps (the engine's path).
pub fn prove_with(
    job: &dyn PartitionJob,
    prover: &Prover,
    pce: &Pce,
    budget: &Budget,
    randomness: Option<&[Randomness]>,
) -> Result<Vec<u8>, FilecoinError> {
    let n = job.n_partitions();
    if let Some(rs) = randomness {
        if rs.len() != n {
            return Err(FilecoinError::CountMismatch {
                what: "randomness pairs for the partitions",
                expected: n,
                found: rs.len(),
            });
        }
    }
    let mut out = Vec::with_capacity(n * PARTITION_PROOF_BYTES);
    for k in 0..n {
        let proof = prove_partition(job, prover, pce, budget, k, randomness.map(|rs| rs[k]))?;
        proof.write(&mut out).map_err(|source| FilecoinError::Io {
            what: "writing a proof to memory",
            path: PathBuf::new(),
            source,
        })?;
    }
    Ok(out)
}

/// Proves partition `k` (fresh randomness when `rs` is `None`).
pub fn prove_partition(
    job: &dyn PartitionJob,
    prover: &Prover,
    pce: &Pce,
    budget: &Budget,
    k: usize,
    rs: Option<Randomness>,
) -> Result<groth16::Proof<bls12_381::Bls12>, FilecoinError> {
    let shape = pce.shape();
    let prover_err = |source| FilecoinError::Prover {
        partition: k,
        source: Box::new(source),
    };
    // The proof's whole working set first (it covers the witness, which is moved into
    // the proof and a, b and c evaluated from it: one copy, charged before it exists).
    let bytes = prover.working_set_bytes(pce).map_err(prover_err)?;
    let admitted = budget
        .try_reserve(
            bytes,
            Category::WorkingSet,
            "filecoin partition working set",
        )
        .map_err(|source| {
            prover_err(groth16_prover::ProverError::Budget {
                what: "filecoin partition working set",
                requested_bytes: bytes,
                source,
            })
        })?;
    let witness = job.witness(k, shape)?;
    let inputs = job.public_inputs(k)?;
    let circuit_inputs = witness.inputs.get(1..).unwrap_or(&[]);
    if let Some(index) = (0..inputs.len().max(circuit_inputs.len()))
        .find(|&i| inputs.get(i) != circuit_inputs.get(i))
    {
        return Err(FilecoinError::PublicInputsMismatch {
            partition: k,
            index,
        });
    }
    let rs = rs.unwrap_or_else(|| Randomness::random(&mut rand::rng()));
    let out = prover
        .prove_witness(pce, witness, Some(admitted), rs)
        .map_err(prover_err)?;
    if groth16::verify_proof(prover.key().prepared_vk(), &out.proof, &inputs).is_err() {
        return Err(FilecoinError::ProofRejected { partition: k });
    }
    Ok(out.proof)
}

/// The error of a blank job asked for a witness.
pub(crate) fn no_witness() -> FilecoinError {
    FilecoinError::Unsupported(
        "a blank circuit has no witness (record it or generate parameters)".into(),
    )
}
