//! The daemon's own metrics, and the Prometheus recorder that renders every crate's.
//!
//! - `pinion_daemon_requests_total{rpc, code}`: gRPC calls by outcome (`ok` or the
//!   gRPC code's name)
//! - `pinion_daemon_jobs_submitted_total{kind}`: jobs taken (kind: the circuit id or the
//!   Filecoin proof kind)
//! - `pinion_daemon_jobs_ended_total{outcome}`: completed, failed, cancelled

use std::sync::{Mutex, OnceLock};

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

use crate::DaemonError;

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the process's Prometheus recorder (once; later calls return the same
/// handle). Call it before creating budgets: their metric handles are taken then.
pub fn install() -> Result<PrometheusHandle, DaemonError> {
    // Two first calls at once (tests starting daemons side by side): one installs, the
    // other waits and gets its handle (a second recorder would be refused).
    static INSTALLING: Mutex<()> = Mutex::new(());
    let _one = INSTALLING.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(h) = HANDLE.get() {
        return Ok(h.clone());
    }
    let handle = PrometheusBuilder::new()
        .install_recorder()
        .map_err(|e| DaemonError::Start(format!("cannot install the metrics recorder: {e}")))?;
    memory_budget::metrics_names::describe();
    Ok(HANDLE.get_or_init(|| handle).clone())
}

/// The Prometheus text of every series recorded so far.
pub fn render(handle: &PrometheusHandle) -> String {
    handle.run_upkeep();
    handle.render()
}

/// A handler's result as tonic wants it, counted under `rpc`.
// tonic's service traits fix the error type: `Status` cannot be boxed here.
#[allow(clippy::result_large_err)]
pub(crate) fn answer<T>(
    rpc: &'static str,
    r: Result<T, DaemonError>,
) -> Result<tonic::Response<T>, tonic::Status> {
    match r {
        Ok(v) => {
            request(rpc, None);
            Ok(tonic::Response::new(v))
        }
        Err(e) => {
            request(rpc, Some(e.code()));
            Err(e.into())
        }
    }
}

fn request(rpc: &'static str, code: Option<tonic::Code>) {
    let code = match code {
        None => "ok".to_string(),
        Some(c) => format!("{c:?}"),
    };
    metrics::counter!("pinion_daemon_requests_total", "rpc" => rpc, "code" => code).increment(1);
}

pub(crate) fn job_submitted(kind: &str) {
    metrics::counter!("pinion_daemon_jobs_submitted_total", "kind" => kind.to_string())
        .increment(1);
}

pub(crate) fn job_ended(outcome: &'static str) {
    metrics::counter!("pinion_daemon_jobs_ended_total", "outcome" => outcome).increment(1);
}
