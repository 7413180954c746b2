//! `cuzk.v1.ProvingEngine`: Curio's proving protocol, served by the engine.
//!
//! Differences from cuzk, all in the direction of doing what the protocol says:
//! CancelProof cancels (queued partitions leave, running ones stop at their next phase),
//! EvictSRS evicts, AwaitProof honours `timeout_ms`, `assigned_gpu` names the device.
//! A Prove whose client goes away cancels its job.
//!
//! A request is checked here (kind, priority, sector size, the fields its kind needs, a
//! C1 output that is JSON), then by pinion-filecoin (`filecoin.rs`: the inputs parsed and
//! verified with filecoin-proofs' own code): bad fields are INVALID_ARGUMENT naming the
//! field and the reason; missing parameters FAILED_PRECONDITION. Jobs of `pinion.v1` can
//! be awaited and cancelled here too: job ids are shared.

use std::sync::Arc;
use std::time::Duration;

use engine::{JobOutcome, JobStatus, Priority};
use tonic::{Request, Response, Status};

use crate::daemon::{Daemon, Waited};
use crate::metrics::{self, answer};
use crate::proto::cuzk::v1 as pb;
use crate::proto::cuzk::v1::proving_engine_server::ProvingEngine;
use crate::DaemonError;

/// Filecoin's sector sizes.
const SECTOR_SIZES: [u64; 5] = [2 << 10, 8 << 20, 512 << 20, 32 << 30, 64 << 30];

/// A submission that passed the checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckedSubmit {
    /// The proof kind.
    pub kind: pb::ProofKind,
    /// The engine priority (the kind's default when unspecified).
    pub priority: Priority,
}

/// cuzk's defaults: WinningPoSt critical, WindowPoSt high, the others normal.
pub fn default_priority(kind: pb::ProofKind) -> Priority {
    match kind {
        pb::ProofKind::WinningPost => Priority::Critical,
        pb::ProofKind::WindowPostPartition => Priority::High,
        _ => Priority::Normal,
    }
}

/// The engine priority of a wire priority (`None`: unspecified).
pub fn priority_of(value: i32, field: &'static str) -> Result<Option<Priority>, DaemonError> {
    match pb::Priority::try_from(value) {
        Ok(pb::Priority::Unspecified) => Ok(None),
        Ok(pb::Priority::Low) => Ok(Some(Priority::Low)),
        Ok(pb::Priority::Normal) => Ok(Some(Priority::Normal)),
        Ok(pb::Priority::High) => Ok(Some(Priority::High)),
        Ok(pb::Priority::Critical) => Ok(Some(Priority::Critical)),
        Err(_) => Err(DaemonError::invalid(
            field,
            format!("unknown priority {value} (expected 0..=4)"),
        )),
    }
}

fn require_32(field: &'static str, bytes: &[u8]) -> Result<(), DaemonError> {
    if bytes.len() != 32 {
        return Err(DaemonError::invalid(
            field,
            format!("expected 32 bytes, found {}", bytes.len()),
        ));
    }
    Ok(())
}

fn require_some(field: &'static str, proofs: &[Vec<u8>]) -> Result<(), DaemonError> {
    if proofs.is_empty() {
        return Err(DaemonError::invalid(field, "no vanilla proofs given"));
    }
    if let Some(i) = proofs.iter().position(Vec::is_empty) {
        return Err(DaemonError::invalid(
            field,
            format!("vanilla proof {i} is empty"),
        ));
    }
    Ok(())
}

/// Checks a submission's fields: everything that can be judged without Filecoin's
/// circuits. The entry point the fuzz target drives.
pub fn check_submit(req: &pb::SubmitProofRequest) -> Result<CheckedSubmit, DaemonError> {
    let kind = match pb::ProofKind::try_from(req.proof_kind) {
        Ok(pb::ProofKind::Unspecified) => {
            return Err(DaemonError::invalid(
                "proof_kind",
                "PROOF_KIND_UNSPECIFIED: name the proof kind",
            ))
        }
        Ok(k) => k,
        Err(_) => {
            return Err(DaemonError::invalid(
                "proof_kind",
                format!("unknown proof kind {} (expected 1..=4)", req.proof_kind),
            ))
        }
    };
    let priority = priority_of(req.priority, "priority")?.unwrap_or(default_priority(kind));
    if !SECTOR_SIZES.contains(&req.sector_size) {
        return Err(DaemonError::invalid(
            "sector_size",
            format!(
                "{} is not a Filecoin sector size (2KiB, 8MiB, 512MiB, 32GiB or 64GiB in bytes)",
                req.sector_size
            ),
        ));
    }
    match kind {
        pb::ProofKind::PorepSealCommit => {
            if req.vanilla_proof.is_empty() {
                return Err(DaemonError::invalid(
                    "vanilla_proof",
                    "empty: PoRep C2 needs the C1 output",
                ));
            }
            // The C1 output is JSON, bare or in Go's wrapper: check its syntax without
            // building it (it can be tens of megabytes).
            serde_json::from_slice::<serde::de::IgnoredAny>(&req.vanilla_proof).map_err(|e| {
                DaemonError::invalid("vanilla_proof", format!("not a C1 output (JSON): {e}"))
            })?;
        }
        pb::ProofKind::WindowPostPartition | pb::ProofKind::WinningPost => {
            require_some("vanilla_proofs", &req.vanilla_proofs)?;
            require_32("randomness", &req.randomness)?;
        }
        pb::ProofKind::SnapDealsUpdate => {
            require_some("vanilla_proofs", &req.vanilla_proofs)?;
            require_32("comm_r_old", &req.comm_r_old)?;
            require_32("comm_r_new", &req.comm_r_new)?;
            require_32("comm_d_new", &req.comm_d_new)?;
        }
        pb::ProofKind::Unspecified => unreachable!("refused above"),
    }
    Ok(CheckedSubmit { kind, priority })
}

/// Bytes a submission holds (what the daemon charges while it handles it).
pub fn request_bytes(req: &pb::SubmitProofRequest) -> u64 {
    let many: usize = req.vanilla_proofs.iter().map(Vec::len).sum();
    (req.vanilla_proof.len()
        + many
        + req.randomness.len()
        + req.comm_r_old.len()
        + req.comm_r_new.len()
        + req.comm_d_new.len()
        + req.request_id.len()) as u64
}

/// An ended job as cuzk reports it.
pub fn await_response(name: &str, outcome: &JobOutcome) -> pb::AwaitProofResponse {
    use pb::await_proof_response::Status as S;
    let t = outcome.timings;
    let ms = |d: Duration| d.as_millis() as u64;
    let (status, proof, error_message) = match &outcome.status {
        JobStatus::Completed => (S::Completed, outcome.proof_bytes(), String::new()),
        JobStatus::Failed(reason) => (S::Failed, Vec::new(), reason.clone()),
        JobStatus::Cancelled => (S::Cancelled, Vec::new(), "cancelled".to_string()),
    };
    pb::AwaitProofResponse {
        job_id: name.to_string(),
        status: status as i32,
        proof,
        error_message,
        queue_wait_ms: ms(t.queue_wait),
        srs_load_ms: ms(t.key_load),
        synthesis_ms: ms(t.synthesis),
        gpu_compute_ms: ms(t.gpu),
        total_ms: ms(t.total),
    }
}

fn timed_out(name: &str) -> pb::AwaitProofResponse {
    pb::AwaitProofResponse {
        job_id: name.to_string(),
        status: pb::await_proof_response::Status::Timeout as i32,
        error_message: "the job did not end within timeout_ms".into(),
        ..pb::AwaitProofResponse::default()
    }
}

/// `timeout_ms` (0: forever).
pub fn timeout_of(ms: u64) -> Option<Duration> {
    (ms > 0).then(|| Duration::from_millis(ms))
}

/// The service.
#[derive(Clone, Debug)]
pub struct CuzkService {
    daemon: Arc<Daemon>,
}

impl CuzkService {
    /// The service over a daemon.
    pub fn new(daemon: Arc<Daemon>) -> CuzkService {
        CuzkService { daemon }
    }

    async fn submit(
        &self,
        req: pb::SubmitProofRequest,
    ) -> Result<pb::SubmitProofResponse, DaemonError> {
        let checked = check_submit(&req)?;
        if !self.daemon.is_accepting() {
            return Err(DaemonError::ShuttingDown);
        }
        let name = match self.daemon.by_request_id(&req.request_id) {
            Some(name) => name,
            None => {
                // The request's bytes stay charged (as a queued job's input, under
                // `max_queued_bytes`) until its job ends: the parsed inputs live as long.
                let held = self.daemon.witness_charge(request_bytes(&req)).await?;
                let daemon = Arc::clone(&self.daemon);
                let (spec, req) = tokio::task::spawn_blocking(move || {
                    let spec = crate::filecoin::job_spec(&daemon, &req, checked, held);
                    (spec, req)
                })
                .await
                .map_err(|e| DaemonError::Internal(format!("filecoin job task: {e}")))?;
                let kind = format!("{:?}", checked.kind);
                self.daemon
                    .submit(spec?, kind, Vec::new(), &req.request_id)?
                    .0
            }
        };
        let queue_position = match self.daemon.state(&name) {
            Ok(crate::daemon::JobState::Queued(n)) => n as u32,
            _ => 0,
        };
        Ok(pb::SubmitProofResponse {
            assigned_gpu: self.daemon.assigned_device(&name),
            job_id: name,
            queue_position,
        })
    }

    async fn await_job(
        &self,
        name: &str,
        timeout: Option<Duration>,
    ) -> Result<pb::AwaitProofResponse, DaemonError> {
        Ok(match self.daemon.wait(name, timeout).await? {
            Waited::Ended(o) => await_response(name, &o),
            Waited::TimedOut => timed_out(name),
        })
    }
}

/// Cancels a job when dropped unless disarmed: a Prove whose client went away.
struct CancelOnDrop {
    daemon: Arc<Daemon>,
    name: Option<String>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(name) = self.name.take() {
            let _ = self.daemon.cancel(&name);
        }
    }
}

#[tonic::async_trait]
impl ProvingEngine for CuzkService {
    async fn submit_proof(
        &self,
        request: Request<pb::SubmitProofRequest>,
    ) -> Result<Response<pb::SubmitProofResponse>, Status> {
        answer("cuzk.SubmitProof", self.submit(request.into_inner()).await)
    }

    async fn await_proof(
        &self,
        request: Request<pb::AwaitProofRequest>,
    ) -> Result<Response<pb::AwaitProofResponse>, Status> {
        let r = request.get_ref();
        let result = self.await_job(&r.job_id, timeout_of(r.timeout_ms)).await;
        answer("cuzk.AwaitProof", result)
    }

    async fn prove(
        &self,
        request: Request<pb::ProveRequest>,
    ) -> Result<Response<pb::ProveResponse>, Status> {
        let result = async {
            let submit = request
                .into_inner()
                .submit
                .ok_or_else(|| DaemonError::invalid("submit", "missing"))?;
            let submitted = self.submit(submit).await?;
            let mut guard = CancelOnDrop {
                daemon: Arc::clone(&self.daemon),
                name: Some(submitted.job_id.clone()),
            };
            let result = self.await_job(&submitted.job_id, None).await?;
            guard.name = None;
            Ok(pb::ProveResponse {
                result: Some(result),
            })
        }
        .await;
        answer("cuzk.Prove", result)
    }

    async fn cancel_proof(
        &self,
        request: Request<pb::CancelProofRequest>,
    ) -> Result<Response<pb::CancelProofResponse>, Status> {
        let result = self
            .daemon
            .cancel(&request.get_ref().job_id)
            .map(|was_running| pb::CancelProofResponse { was_running });
        answer("cuzk.CancelProof", result)
    }

    async fn get_status(
        &self,
        _request: Request<pb::GetStatusRequest>,
    ) -> Result<Response<pb::GetStatusResponse>, Status> {
        answer(
            "cuzk.GetStatus",
            Ok(crate::status::cuzk_status(&self.daemon)),
        )
    }

    async fn get_metrics(
        &self,
        _request: Request<pb::GetMetricsRequest>,
    ) -> Result<Response<pb::GetMetricsResponse>, Status> {
        let prometheus_text = metrics::render(&self.daemon.metrics);
        answer(
            "cuzk.GetMetrics",
            Ok(pb::GetMetricsResponse { prometheus_text }),
        )
    }

    async fn preload_srs(
        &self,
        request: Request<pb::PreloadSrsRequest>,
    ) -> Result<Response<pb::PreloadSrsResponse>, Status> {
        let result = self
            .daemon
            .preload(&request.get_ref().circuit_id)
            .await
            .map(|(already_loaded, took)| pb::PreloadSrsResponse {
                already_loaded,
                load_time_ms: took.as_millis() as u64,
            });
        answer("cuzk.PreloadSRS", result)
    }

    async fn evict_srs(
        &self,
        request: Request<pb::EvictSrsRequest>,
    ) -> Result<Response<pb::EvictSrsResponse>, Status> {
        let result =
            self.daemon
                .evict(&request.get_ref().circuit_id)
                .map(|(was_loaded, freed_bytes)| pb::EvictSrsResponse {
                    was_loaded,
                    freed_bytes,
                });
        answer("cuzk.EvictSRS", result)
    }
}
