//! cuzk's proof kinds through pinion-filecoin: a request becomes a `PartitionJob` (its
//! inputs parsed and checked with filecoin-proofs' own verifiers), the job's circuit is
//! registered with the engine on first use (its PCE recorded once and kept on disk in the
//! state folder, its parameters from `[srs] param_cache`), and each partition becomes an
//! engine partition that synthesizes its witness through the PCE.

use std::sync::Arc;

use bellman::{Circuit, ConstraintSystem, SynthesisError};
use bls12_381::Scalar;
use engine::{CircuitSpec, JobSpec, Partition, PceSource};
use filecoin_proofs_api::{RegisteredPoStProof, RegisteredUpdateProof};
use groth16_prover::ProverError;
use pce_cache::{CircuitKey, PceCache, Shape, Witness};
use pinion_filecoin::{porep, post, snap, FilecoinError, PartitionJob, ProofKind};
use srs_store::SrsSpec;

use crate::cuzk::CheckedSubmit;
use crate::daemon::Daemon;
use crate::frontend::WitnessCharge;
use crate::proto::cuzk::v1 as pb;
use crate::DaemonError;

/// Go's `abi.RegisteredPoStProof` numbers (what Curio sends in `registered_proof`).
pub fn post_proof(v: u64) -> Result<RegisteredPoStProof, DaemonError> {
    use RegisteredPoStProof::*;
    Ok(match v {
        0 => StackedDrgWinning2KiBV1,
        1 => StackedDrgWinning8MiBV1,
        2 => StackedDrgWinning512MiBV1,
        3 => StackedDrgWinning32GiBV1,
        4 => StackedDrgWinning64GiBV1,
        5 => StackedDrgWindow2KiBV1,
        6 => StackedDrgWindow8MiBV1,
        7 => StackedDrgWindow512MiBV1,
        8 => StackedDrgWindow32GiBV1,
        9 => StackedDrgWindow64GiBV1,
        10 => StackedDrgWindow2KiBV1_2,
        11 => StackedDrgWindow8MiBV1_2,
        12 => StackedDrgWindow512MiBV1_2,
        13 => StackedDrgWindow32GiBV1_2,
        14 => StackedDrgWindow64GiBV1_2,
        _ => {
            return Err(DaemonError::invalid(
                "registered_proof",
                format!("{v} is not a RegisteredPoStProof (0..=14)"),
            ))
        }
    })
}

/// Go's `abi.RegisteredUpdateProof` numbers.
pub fn update_proof(v: u64) -> Result<RegisteredUpdateProof, DaemonError> {
    use RegisteredUpdateProof::*;
    Ok(match v {
        0 => StackedDrg2KiBV1,
        1 => StackedDrg8MiBV1,
        2 => StackedDrg512MiBV1,
        3 => StackedDrg32GiBV1,
        4 => StackedDrg64GiBV1,
        _ => {
            return Err(DaemonError::invalid(
                "registered_proof",
                format!("{v} is not a RegisteredUpdateProof (0..=4)"),
            ))
        }
    })
}

fn array32(field: &'static str, b: &[u8]) -> Result<[u8; 32], DaemonError> {
    b.try_into()
        .map_err(|_| DaemonError::invalid(field, format!("expected 32 bytes, found {}", b.len())))
}

/// A request's inputs refused by pinion-filecoin: the client's fault, with the reason.
fn refused(field: &'static str, e: FilecoinError) -> DaemonError {
    DaemonError::invalid(field, e.to_string())
}

/// The request as partitions (parses and verifies its inputs: run on a blocking thread).
pub fn partition_job(
    req: &pb::SubmitProofRequest,
    checked: CheckedSubmit,
) -> Result<Box<dyn PartitionJob>, DaemonError> {
    let job = kind_job(req, checked)?;
    let found = job.circuit_id().sector_size;
    if found != req.sector_size {
        return Err(DaemonError::invalid(
            "sector_size",
            format!(
                "{} bytes, but the inputs are for {}",
                req.sector_size,
                job.circuit_id()
            ),
        ));
    }
    Ok(job)
}

fn kind_job(
    req: &pb::SubmitProofRequest,
    checked: CheckedSubmit,
) -> Result<Box<dyn PartitionJob>, DaemonError> {
    match checked.kind {
        pb::ProofKind::PorepSealCommit => {
            let c1 =
                porep::parse_c1(&req.vanilla_proof).map_err(|e| refused("vanilla_proof", e))?;
            let target = porep::C2Target {
                miner_id: req.miner_id,
                sector_number: Some(req.sector_number),
                expect: None,
            };
            porep::porep_job(c1, &target).map_err(|e| refused("vanilla_proof", e))
        }
        pb::ProofKind::WindowPostPartition | pb::ProofKind::WinningPost => {
            let (kind, partition) = if checked.kind == pb::ProofKind::WinningPost {
                (ProofKind::WinningPost, None)
            } else {
                (ProofKind::WindowPost, Some(req.partition_index as usize))
            };
            let r = post::PostRequest {
                proof: post_proof(req.registered_proof)?,
                vanilla_proofs: req.vanilla_proofs.clone(),
                randomness: array32("randomness", &req.randomness)?,
                miner_id: req.miner_id,
                partition,
            };
            post::post_job(kind, &r).map_err(|e| refused("vanilla_proofs", e))
        }
        pb::ProofKind::SnapDealsUpdate => {
            let r = snap::SnapRequest {
                proof: update_proof(req.registered_proof)?,
                partition_proofs: req.vanilla_proofs.clone(),
                comm_r_old: array32("comm_r_old", &req.comm_r_old)?,
                comm_r_new: array32("comm_r_new", &req.comm_r_new)?,
                comm_d_new: array32("comm_d_new", &req.comm_d_new)?,
            };
            snap::snap_job(&r).map_err(|e| refused("vanilla_proofs", e))
        }
        pb::ProofKind::Unspecified => Err(DaemonError::invalid("proof_kind", "unspecified")),
    }
}

/// A circuit with no constraints: what the PCE cache would record if its file vanished
/// between the write and the load (the load then fails, naming the file).
struct Missing;

impl Circuit<Scalar> for Missing {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, _: &mut CS) -> Result<(), SynthesisError> {
        Err(SynthesisError::AssignmentMissing)
    }
}

/// The engine circuit of `job`, registered on first use: its PCE recorded once and kept
/// in `pces`' folder (loaded on demand, evicted when idle), its parameters from
/// `[srs] param_cache` checked to have the sizes the PCE needs. Returns the circuit id and
/// the PCE's shape.
pub(crate) fn ensure_circuit(
    daemon: &Daemon,
    pces: &Arc<PceCache>,
    job: &dyn PartitionJob,
) -> Result<(String, Shape), DaemonError> {
    // One registration at a time: a circuit is recorded once. Only blocking threads take
    // this lock (a recording can take minutes); status and preload read
    // `filecoin_circuits`, which is held only for a lookup.
    let _registering = daemon
        .filecoin_registering
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let id = job.circuit_id();
    let name = id.cache_id.clone();
    let key = CircuitKey::new(name.clone());
    let pce_error = |e: pce_cache::PceError| DaemonError::Internal(format!("pce of {id}: {e}"));
    let path = pces
        .path_for(&name)
        .map_err(pce_error)?
        .ok_or_else(|| DaemonError::Internal("the filecoin pce cache has no folder".into()))?;
    if !path.exists() {
        // Recorded with its charge, written, and let go: the cache loads the file (and
        // charges it) like any other.
        let (pce, _charge) = pinion_filecoin::job::record(job, daemon.budget())
            .map_err(|e| DaemonError::Internal(format!("recording {id}: {e}")))?;
        pce.write_to(&path).map_err(pce_error)?;
    }
    let pce = pces.get_or_extract(&key, || Missing).map_err(pce_error)?;
    let shape = pce.shape();
    if daemon.filecoin_params(&name).is_some() {
        return Ok((name, shape));
    }
    let params =
        pinion_filecoin::job::params_for(&daemon.config.param_cache, id, &pce).map_err(|e| {
            DaemonError::Unavailable {
                what: format!("parameters of {id}"),
                reason: e.to_string(),
            }
        })?;
    drop(pce);
    let mut spec = SrsSpec::new(name.clone(), params);
    spec.options.check = daemon.config.check;
    let (cache, k) = (Arc::clone(pces), key);
    daemon
        .engine
        .register(CircuitSpec {
            id: name.clone(),
            params: spec.clone(),
            pce: PceSource::OnDemand(Arc::new(move || cache.get_or_extract(&k, || Missing))),
        })
        .map_err(|e| DaemonError::Unavailable {
            what: format!("parameters of {id}"),
            reason: e.to_string(),
        })?;
    daemon
        .filecoin_circuits
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(name.clone(), spec);
    Ok((name, shape))
}

/// One partition of a Filecoin job as the engine proves it: witness-only synthesis of
/// filecoin-proofs' circuit into the partition's admitted working set (which covers the
/// witness: it is moved into the proof, a, b and c evaluated from it), its public inputs
/// checked against what filecoin-proofs' verifier computes. The engine's self-check then
/// verifies the proof with those inputs.
struct FilecoinPartition {
    job: Arc<dyn PartitionJob>,
    k: usize,
    shape: Shape,
    _request: Arc<WitnessCharge>,
}

impl FilecoinPartition {
    fn witness(&self) -> Result<Witness, ProverError> {
        let witness = self.job.witness(self.k, self.shape)?;
        let inputs = self.job.public_inputs(self.k)?;
        let ours = witness.inputs.get(1..).unwrap_or(&[]);
        if let Some(index) =
            (0..inputs.len().max(ours.len())).find(|&i| inputs.get(i) != ours.get(i))
        {
            return Err(FilecoinError::PublicInputsMismatch {
                partition: self.k,
                index,
            }
            .into());
        }
        Ok(witness)
    }
}

/// The engine job of a checked request (blocking: parses, verifies, maybe records).
/// `request` is the request's charge: kept until the job ends, standing for the parsed
/// inputs its partitions hold.
pub(crate) fn job_spec(
    daemon: &Daemon,
    req: &pb::SubmitProofRequest,
    checked: CheckedSubmit,
    request: WitnessCharge,
) -> Result<JobSpec, DaemonError> {
    let job: Arc<dyn PartitionJob> = Arc::from(partition_job(req, checked)?);
    let (circuit, shape) = ensure_circuit(daemon, &daemon.filecoin_pces, job.as_ref())?;
    let request = Arc::new(request);
    let partitions = (0..job.n_partitions())
        .map(|k| {
            let partition = FilecoinPartition {
                job: Arc::clone(&job),
                k,
                shape,
                _request: Arc::clone(&request),
            };
            let p = Partition::witness(move || partition.witness());
            if job.parallel_witness() {
                p.synthesized_alone()
            } else {
                p
            }
        })
        .collect();
    Ok(JobSpec {
        circuit,
        partitions,
        priority: checked.priority,
        randomness: None,
    })
}
