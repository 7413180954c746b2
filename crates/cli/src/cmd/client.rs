//! `pinion submit | await | status | cancel`: the client of `pinion serve` (pinion.v1).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use daemon::proto::pinion::v1 as pb;
use daemon::proto::pinion::v1::pinion_client::PinionClient;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;
use tonic::transport::Channel;

use crate::{ui, Outcome};

/// Largest message the client sends or takes (the daemon's default limit).
const MAX_MESSAGE_BYTES: usize = 256 << 20;

/// How often a waiting client asks where its job is.
const POLL: Duration = Duration::from_millis(500);

/// Arguments of `pinion submit`.
pub struct SubmitArgs {
    pub addr: String,
    pub params: PathBuf,
    pub r1cs: PathBuf,
    pub witness: PathBuf,
    pub out: Option<PathBuf>,
    pub public_out: Option<PathBuf>,
    pub priority: String,
    pub no_wait: bool,
    pub upload: bool,
    pub json: bool,
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

async fn connect(addr: &str) -> anyhow::Result<PinionClient<Channel>> {
    let channel = daemon::client::connect(addr)
        .await
        .with_context(|| format!("cannot reach the daemon at {addr}"))?;
    Ok(daemon::client::pinion_client(channel, MAX_MESSAGE_BYTES))
}

/// A gRPC error as one line: the code and the daemon's message.
fn rpc_error(what: &str, s: tonic::Status) -> anyhow::Error {
    anyhow::anyhow!("{what}: {:?}: {}", s.code(), s.message())
}

/// `low`, `normal`, `high`, `critical`.
pub fn parse_priority(s: &str) -> Result<pb::Priority, String> {
    match s {
        "low" => Ok(pb::Priority::Low),
        "normal" => Ok(pb::Priority::Normal),
        "high" => Ok(pb::Priority::High),
        "critical" => Ok(pb::Priority::Critical),
        _ => Err(format!(
            "{s:?} is not a priority (low, normal, high, critical)"
        )),
    }
}

/// Clap's check of `--priority` (the name is kept as given).
pub fn parse_priority_name(s: &str) -> Result<String, String> {
    parse_priority(s).map(|_| s.to_string())
}

/// An absolute path (the daemon may run elsewhere in the file system's tree).
fn absolute(p: &Path) -> anyhow::Result<String> {
    let abs = std::fs::canonicalize(p).with_context(|| format!("cannot read {}", p.display()))?;
    Ok(abs.display().to_string())
}

/// Registers the circuit (idempotent), submits the witness, and waits unless `--no-wait`.
pub fn submit(a: SubmitArgs) -> anyhow::Result<Outcome> {
    if !a.no_wait && a.out.is_none() {
        bail!("give --out FILE for the proof, or --no-wait");
    }
    let priority = parse_priority(&a.priority).map_err(anyhow::Error::msg)?;
    let witness = std::fs::read(&a.witness)
        .with_context(|| format!("cannot read witness {}", a.witness.display()))?;
    let register = if a.upload {
        pb::RegisterCircuitRequest {
            r1cs: Some(pb::register_circuit_request::R1cs::R1csBytes(
                std::fs::read(&a.r1cs)
                    .with_context(|| format!("cannot read {}", a.r1cs.display()))?,
            )),
            params: Some(pb::register_circuit_request::Params::ParamsBytes(
                std::fs::read(&a.params)
                    .with_context(|| format!("cannot read {}", a.params.display()))?,
            )),
        }
    } else {
        pb::RegisterCircuitRequest {
            r1cs: Some(pb::register_circuit_request::R1cs::R1csPath(absolute(
                &a.r1cs,
            )?)),
            params: Some(pb::register_circuit_request::Params::ParamsPath(absolute(
                &a.params,
            )?)),
        }
    };
    runtime()?.block_on(async {
        let mut client = connect(&a.addr).await?;
        let circuit = client
            .register_circuit(register)
            .await
            .map_err(|s| rpc_error("registering the circuit", s))?
            .into_inner();
        let submitted = client
            .submit_witness(pb::SubmitWitnessRequest {
                circuit_id: circuit.circuit_id.clone(),
                witness,
                priority: priority as i32,
                request_id: String::new(),
            })
            .await
            .map_err(|s| rpc_error("submitting the witness", s))?
            .into_inner();
        if a.no_wait {
            if a.json {
                super::print_json(&json!({
                    "job_id": submitted.job_id,
                    "circuit_id": circuit.circuit_id,
                    "queue_position": submitted.queue_position,
                    "assigned_device": submitted.assigned_device,
                }));
            } else {
                println!("{}", submitted.job_id);
            }
            return Ok(Outcome::Success);
        }
        ui::note(format!(
            "{} submitted (circuit {}, {} constraints)",
            submitted.job_id, circuit.circuit_id, circuit.n_constraints
        ));
        let out = a.out.as_deref().unwrap_or(Path::new("proof.bin"));
        wait_and_write(
            &mut client,
            &submitted.job_id,
            out,
            a.public_out.as_deref(),
            None,
            a.json,
        )
        .await
    })
}

/// Arguments of `pinion await`.
pub struct AwaitArgs {
    pub addr: String,
    pub job: String,
    pub out: PathBuf,
    pub public_out: Option<PathBuf>,
    pub timeout: Option<u64>,
    pub json: bool,
}

/// Waits for a job and writes its proof.
pub fn await_job(a: AwaitArgs) -> anyhow::Result<Outcome> {
    runtime()?.block_on(async {
        let mut client = connect(&a.addr).await?;
        let timeout = a.timeout.map(Duration::from_secs);
        wait_and_write(
            &mut client,
            &a.job,
            &a.out,
            a.public_out.as_deref(),
            timeout,
            a.json,
        )
        .await
    })
}

/// The job's place as a progress line.
fn describe(j: &pb::GetJobResponse) -> String {
    match pb::JobState::try_from(j.state) {
        Ok(pb::JobState::Queued) => format!(
            "{}: queued, {} partitions ahead",
            j.job_id, j.queue_position
        ),
        Ok(pb::JobState::Running) => format!("{}: proving on {}", j.job_id, j.devices.join(", ")),
        Ok(s) => format!("{}: {}", j.job_id, s.as_str_name().to_lowercase()),
        Err(_) => format!("{}: state {}", j.job_id, j.state),
    }
}

/// Waits (showing where the job is), then writes the proof and public values.
async fn wait_and_write(
    client: &mut PinionClient<Channel>,
    job: &str,
    out: &Path,
    public_out: Option<&Path>,
    timeout: Option<Duration>,
    json: bool,
) -> anyhow::Result<Outcome> {
    let started = std::time::Instant::now();
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::new_spinner();
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} ({elapsed})") {
            bar.set_style(style);
        }
        bar.enable_steady_tick(Duration::from_millis(100));
        bar
    });
    let mut last = String::new();
    let done = loop {
        let step = match timeout {
            Some(t) => t.saturating_sub(started.elapsed()).min(POLL),
            None => POLL,
        };
        let r = client
            .await_job(pb::AwaitJobRequest {
                job_id: job.to_string(),
                timeout_ms: step.as_millis().max(1) as u64,
            })
            .await
            .map_err(|s| rpc_error("waiting for the job", s))?
            .into_inner();
        if r.state != pb::JobState::Timeout as i32 {
            break r;
        }
        if timeout.is_some_and(|t| started.elapsed() >= t) {
            if let Some(b) = &bar {
                b.finish_and_clear();
            }
            bail!("{job} did not end within {} s (it goes on; `pinion await` again or `pinion cancel`)", timeout.unwrap_or_default().as_secs());
        }
        let j = client
            .get_job(pb::GetJobRequest {
                job_id: job.to_string(),
            })
            .await
            .map_err(|s| rpc_error("asking for the job", s))?
            .into_inner();
        let line = describe(&j);
        if line != last {
            match &bar {
                Some(b) => b.set_message(line.clone()),
                None => ui::note(&line),
            }
            last = line;
        }
    };
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    match pb::JobState::try_from(done.state) {
        Ok(pb::JobState::Completed) => {}
        Ok(pb::JobState::Failed) => bail!("{job} failed: {}", done.error_message),
        Ok(pb::JobState::Cancelled) => bail!("{job} was cancelled"),
        _ => bail!(
            "{job} ended in state {}: {}",
            done.state,
            done.error_message
        ),
    }
    if done.proof.len() != pinion::statement::PROOF_BYTES {
        bail!(
            "{job}: the daemon sent {} proof bytes, expected {}",
            done.proof.len(),
            pinion::statement::PROOF_BYTES
        );
    }
    super::write_atomic(out, |w| std::io::Write::write_all(w, &done.proof))?;
    if let Some(p) = public_out {
        let text = serde_json::to_string_pretty(&done.public_values).unwrap_or_default() + "\n";
        super::write_atomic(p, |w| std::io::Write::write_all(w, text.as_bytes()))?;
    }
    if json {
        super::print_json(&json!({
            "job_id": done.job_id,
            "proof": out.display().to_string(),
            "public": done.public_values,
            "device": done.device,
            "queue_wait_ms": done.queue_wait_ms,
            "srs_load_ms": done.srs_load_ms,
            "synthesis_ms": done.synthesis_ms,
            "gpu_compute_ms": done.gpu_compute_ms,
            "total_ms": done.total_ms,
        }));
    } else {
        println!(
            "wrote proof {} (192 bytes): {} on {}, {} ms (queued {} ms, synthesis {} ms, device {} ms)",
            out.display(),
            done.job_id,
            done.device,
            done.total_ms,
            done.queue_wait_ms,
            done.synthesis_ms,
            done.gpu_compute_ms
        );
    }
    Ok(Outcome::Success)
}

/// A job's state, or the daemon's status document.
pub fn status(addr: &str, job: Option<&str>, json: bool) -> anyhow::Result<Outcome> {
    runtime()?.block_on(async {
        let mut client = connect(addr).await?;
        match job {
            Some(job) => {
                let j = client
                    .get_job(pb::GetJobRequest {
                        job_id: job.to_string(),
                    })
                    .await
                    .map_err(|s| rpc_error("asking for the job", s))?
                    .into_inner();
                if json {
                    super::print_json(&json!({
                        "job_id": j.job_id,
                        "state": pb::JobState::try_from(j.state).map_or("unknown".to_string(), |s| s.as_str_name().to_lowercase()),
                        "circuit_id": j.circuit_id,
                        "queue_position": j.queue_position,
                        "devices": j.devices,
                        "elapsed_ms": j.elapsed_ms,
                        "error": j.error_message,
                    }));
                } else {
                    println!("{}", describe(&j));
                    if !j.error_message.is_empty() {
                        println!("error: {}", j.error_message);
                    }
                }
            }
            None => {
                let s = client
                    .get_status(pb::GetStatusRequest {})
                    .await
                    .map_err(|s| rpc_error("asking for the status", s))?
                    .into_inner();
                let v: serde_json::Value = serde_json::from_str(&s.status_json)
                    .context("the daemon's status is not JSON")?;
                if json {
                    super::print_json(&v);
                } else {
                    print_status(&v);
                }
            }
        }
        Ok(Outcome::Success)
    })
}

fn print_status(v: &serde_json::Value) {
    let n = |p: &str| v.pointer(p).cloned().unwrap_or_default();
    println!(
        "uptime {} s, jobs completed {}, failed {}, cancelled {}",
        n("/uptime_seconds"),
        n("/jobs/completed"),
        n("/jobs/failed"),
        n("/jobs/cancelled")
    );
    for d in v["devices"].as_array().into_iter().flatten() {
        println!(
            "device {}: {} in flight, {} partitions done, job {}",
            d["name"].as_str().unwrap_or("?"),
            d["in_flight"],
            d["partitions_done"],
            d["current_job"].as_str().unwrap_or("-")
        );
    }
    for c in v["circuits"].as_array().into_iter().flatten() {
        println!(
            "circuit {}: {} constraints, key {}, {} queued, {} in progress",
            c["id"].as_str().unwrap_or("?"),
            c["n_constraints"],
            c.pointer("/key/tier")
                .and_then(|t| t.as_str())
                .unwrap_or("not loaded"),
            c["queued"],
            c["in_progress"]
        );
    }
    let used = n("/budget/charged_bytes").as_u64().unwrap_or(0);
    let total = n("/budget/total_bytes").as_u64().unwrap_or(0);
    println!(
        "budget: {} of {} charged",
        ui::bytes(used),
        ui::bytes(total)
    );
}

/// Cancels a job.
pub fn cancel(addr: &str, job: &str) -> anyhow::Result<Outcome> {
    runtime()?.block_on(async {
        let mut client = connect(addr).await?;
        let r = client
            .cancel_job(pb::CancelJobRequest {
                job_id: job.to_string(),
            })
            .await
            .map_err(|s| rpc_error("cancelling the job", s))?
            .into_inner();
        if r.was_running {
            println!("{job}: cancelled");
        } else {
            println!("{job}: had already ended");
        }
        Ok(Outcome::Success)
    })
}
