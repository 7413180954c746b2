//! `pinion.v1.Pinion`: register a circuit (by path or bytes), submit witnesses as jobs,
//! await, inspect and cancel them.

use std::path::PathBuf;
use std::sync::Arc;

use engine::{JobSpec, JobStatus, Priority};
use memory_budget::Category;
use tonic::{Request, Response, Status};

use crate::cuzk::timeout_of;
use crate::daemon::{Daemon, Input, JobState, Waited};
use crate::metrics::answer;
use crate::proto::pinion::v1 as pb;
use crate::proto::pinion::v1::pinion_server::Pinion;
use crate::DaemonError;

/// The engine priority of a wire priority (unspecified: normal).
pub fn priority_of(value: i32) -> Result<Priority, DaemonError> {
    match pb::Priority::try_from(value) {
        Ok(pb::Priority::Unspecified | pb::Priority::Normal) => Ok(Priority::Normal),
        Ok(pb::Priority::Low) => Ok(Priority::Low),
        Ok(pb::Priority::High) => Ok(Priority::High),
        Ok(pb::Priority::Critical) => Ok(Priority::Critical),
        Err(_) => Err(DaemonError::invalid(
            "priority",
            format!("unknown priority {value} (expected 0..=4)"),
        )),
    }
}

/// The wire priority of an engine priority.
pub fn wire_priority(p: Priority) -> pb::Priority {
    match p {
        Priority::Low => pb::Priority::Low,
        Priority::Normal => pb::Priority::Normal,
        Priority::High => pb::Priority::High,
        Priority::Critical => pb::Priority::Critical,
    }
}

/// What a registration names: the circuit and the parameters, each by path or bytes.
#[derive(Debug)]
pub enum Named<'a> {
    /// A path the daemon reads.
    Path(&'a str),
    /// The file's bytes.
    Bytes(&'a [u8]),
}

/// Checks a registration's fields; the entry point the fuzz target drives.
pub fn check_register(
    req: &pb::RegisterCircuitRequest,
) -> Result<(Named<'_>, Named<'_>), DaemonError> {
    use pb::register_circuit_request::{Params, R1cs};
    let r1cs = match &req.r1cs {
        None => {
            return Err(DaemonError::invalid(
                "r1cs",
                "missing: give r1cs_path or r1cs_bytes",
            ))
        }
        Some(R1cs::R1csPath(p)) if p.is_empty() => {
            return Err(DaemonError::invalid("r1cs_path", "empty"))
        }
        Some(R1cs::R1csPath(p)) => Named::Path(p),
        Some(R1cs::R1csBytes(b)) if b.is_empty() => {
            return Err(DaemonError::invalid("r1cs_bytes", "empty"))
        }
        Some(R1cs::R1csBytes(b)) => Named::Bytes(b),
    };
    let params = match &req.params {
        None => {
            return Err(DaemonError::invalid(
                "params",
                "missing: give params_path or params_bytes",
            ))
        }
        Some(Params::ParamsPath(p)) if p.is_empty() => {
            return Err(DaemonError::invalid("params_path", "empty"))
        }
        Some(Params::ParamsPath(p)) => Named::Path(p),
        Some(Params::ParamsBytes(b)) if b.is_empty() => {
            return Err(DaemonError::invalid("params_bytes", "empty"))
        }
        Some(Params::ParamsBytes(b)) => Named::Bytes(b),
    };
    Ok((r1cs, params))
}

/// A file named by an owned request field.
enum Owned {
    Path(String),
    Bytes(Vec<u8>),
}

/// Checks a submission's fields (the witness itself is the front end's to judge).
pub fn check_submit(req: &pb::SubmitWitnessRequest) -> Result<Priority, DaemonError> {
    if req.circuit_id.is_empty() {
        return Err(DaemonError::invalid("circuit_id", "empty"));
    }
    if req.witness.is_empty() {
        return Err(DaemonError::invalid("witness", "empty"));
    }
    priority_of(req.priority)
}

/// The service.
#[derive(Clone, Debug)]
pub struct PinionService {
    daemon: Arc<Daemon>,
}

impl PinionService {
    /// The service over a daemon.
    pub fn new(daemon: Arc<Daemon>) -> PinionService {
        PinionService { daemon }
    }

    async fn input(&self, named: Option<Owned>, what: &'static str) -> Result<Input, DaemonError> {
        Ok(match named {
            None => return Err(DaemonError::invalid("r1cs/params", "missing")),
            Some(Owned::Path(p)) => Input::Path(PathBuf::from(p)),
            Some(Owned::Bytes(b)) => {
                let charge = self
                    .daemon
                    .charge(b.len() as u64, Category::Transient, what)
                    .await?;
                Input::Bytes(b, charge)
            }
        })
    }

    async fn register(
        &self,
        req: pb::RegisterCircuitRequest,
    ) -> Result<pb::RegisterCircuitResponse, DaemonError> {
        use pb::register_circuit_request::{Params, R1cs};
        check_register(&req)?;
        // The request's bytes move into the inputs (no second copy).
        let r1cs = req.r1cs.map(|r| match r {
            R1cs::R1csPath(p) => Owned::Path(p),
            R1cs::R1csBytes(b) => Owned::Bytes(b),
        });
        let params = req.params.map(|p| match p {
            Params::ParamsPath(p) => Owned::Path(p),
            Params::ParamsBytes(b) => Owned::Bytes(b),
        });
        let r1cs = self.input(r1cs, "an uploaded circuit").await?;
        let params = self.input(params, "uploaded parameters").await?;
        let (c, new) = self.daemon.register(r1cs, params).await?;
        Ok(pb::RegisterCircuitResponse {
            circuit_id: c.id.clone(),
            already_registered: !new,
            n_constraints: c.n_constraints,
            n_public: c.n_public,
        })
    }

    async fn submit(
        &self,
        req: pb::SubmitWitnessRequest,
    ) -> Result<pb::SubmitWitnessResponse, DaemonError> {
        let priority = check_submit(&req)?;
        let circuit = self.daemon.circuit(&req.circuit_id)?;
        let len = req.witness.len() as u64;
        // The request's bytes while they are parsed, and room for the values (a witness's
        // values take at most its file's bytes; the reader shrinks the charge).
        let request = self
            .daemon
            .charge(len, Category::Transient, "an uploaded witness")
            .await?;
        let values = self.daemon.witness_charge(len).await?;
        // Parsing checks every value: a blocking thread for large witnesses.
        let (witness, req) = tokio::task::spawn_blocking(move || {
            let w = circuit.reader.read(&req.witness, values);
            drop(request);
            (w, req)
        })
        .await
        .map_err(|e| DaemonError::Internal(format!("witness task: {e}")))?;
        let witness = witness?;
        let spec =
            JobSpec::single(req.circuit_id.clone(), witness.partition).with_priority(priority);
        let (name, _) = self.daemon.submit(
            spec,
            req.circuit_id.clone(),
            witness.public_values,
            &req.request_id,
        )?;
        let queue_position = match self.daemon.state(&name) {
            Ok(JobState::Queued(n)) => n as u32,
            _ => 0,
        };
        Ok(pb::SubmitWitnessResponse {
            assigned_device: self.daemon.assigned_device(&name),
            job_id: name,
            queue_position,
        })
    }

    async fn await_job(
        &self,
        req: &pb::AwaitJobRequest,
    ) -> Result<pb::AwaitJobResponse, DaemonError> {
        let name = &req.job_id;
        let public_values = self.daemon.job_meta(name).map(|m| m.0).unwrap_or_default();
        Ok(
            match self.daemon.wait(name, timeout_of(req.timeout_ms)).await? {
                Waited::TimedOut => pb::AwaitJobResponse {
                    job_id: name.clone(),
                    state: pb::JobState::Timeout as i32,
                    error_message: "the job did not end within timeout_ms".into(),
                    ..Default::default()
                },
                Waited::Ended(o) => {
                    let c = crate::cuzk::await_response(name, &o);
                    let (state, public_values) = match o.status {
                        JobStatus::Completed => (pb::JobState::Completed, public_values),
                        JobStatus::Failed(_) => (pb::JobState::Failed, Vec::new()),
                        JobStatus::Cancelled => (pb::JobState::Cancelled, Vec::new()),
                    };
                    pb::AwaitJobResponse {
                        job_id: name.clone(),
                        state: state as i32,
                        proof: c.proof,
                        error_message: c.error_message,
                        public_values,
                        device: o.devices.join(", "),
                        queue_wait_ms: c.queue_wait_ms,
                        srs_load_ms: c.srs_load_ms,
                        synthesis_ms: c.synthesis_ms,
                        gpu_compute_ms: c.gpu_compute_ms,
                        total_ms: c.total_ms,
                    }
                }
            },
        )
    }

    fn get_job(&self, name: &str) -> Result<pb::GetJobResponse, DaemonError> {
        let (_, kind, priority, submitted) =
            self.daemon
                .job_meta(name)
                .ok_or_else(|| DaemonError::UnknownJob {
                    job: name.to_string(),
                })?;
        let mut r = pb::GetJobResponse {
            job_id: name.to_string(),
            circuit_id: kind,
            priority: wire_priority(priority) as i32,
            elapsed_ms: submitted.elapsed().as_millis() as u64,
            ..Default::default()
        };
        match self.daemon.state(name)? {
            JobState::Queued(n) => {
                r.state = pb::JobState::Queued as i32;
                r.queue_position = n as u32;
            }
            JobState::Running(devices) => {
                r.state = pb::JobState::Running as i32;
                r.devices = devices;
            }
            JobState::Ended(o) => {
                r.elapsed_ms = o.timings.total.as_millis() as u64;
                r.devices = o.devices;
                r.state = match o.status {
                    JobStatus::Completed => pb::JobState::Completed,
                    JobStatus::Failed(reason) => {
                        r.error_message = reason;
                        pb::JobState::Failed
                    }
                    JobStatus::Cancelled => pb::JobState::Cancelled,
                } as i32;
            }
        }
        Ok(r)
    }
}

#[tonic::async_trait]
impl Pinion for PinionService {
    async fn register_circuit(
        &self,
        request: Request<pb::RegisterCircuitRequest>,
    ) -> Result<Response<pb::RegisterCircuitResponse>, Status> {
        answer(
            "pinion.RegisterCircuit",
            self.register(request.into_inner()).await,
        )
    }

    async fn submit_witness(
        &self,
        request: Request<pb::SubmitWitnessRequest>,
    ) -> Result<Response<pb::SubmitWitnessResponse>, Status> {
        answer(
            "pinion.SubmitWitness",
            self.submit(request.into_inner()).await,
        )
    }

    async fn await_job(
        &self,
        request: Request<pb::AwaitJobRequest>,
    ) -> Result<Response<pb::AwaitJobResponse>, Status> {
        answer("pinion.AwaitJob", self.await_job(request.get_ref()).await)
    }

    async fn get_job(
        &self,
        request: Request<pb::GetJobRequest>,
    ) -> Result<Response<pb::GetJobResponse>, Status> {
        answer("pinion.GetJob", self.get_job(&request.get_ref().job_id))
    }

    async fn cancel_job(
        &self,
        request: Request<pb::CancelJobRequest>,
    ) -> Result<Response<pb::CancelJobResponse>, Status> {
        let result = self
            .daemon
            .cancel(&request.get_ref().job_id)
            .map(|was_running| pb::CancelJobResponse { was_running });
        answer("pinion.CancelJob", result)
    }

    async fn get_status(
        &self,
        _request: Request<pb::GetStatusRequest>,
    ) -> Result<Response<pb::GetStatusResponse>, Status> {
        let status_json = crate::status::status_json(&self.daemon).to_string();
        answer(
            "pinion.GetStatus",
            Ok(pb::GetStatusResponse { status_json }),
        )
    }
}
