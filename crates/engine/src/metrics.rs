//! The engine's metrics (through the `metrics` facade; install a recorder to see them).
//!
//! - `pinion_engine_queue_depth{priority}`: partitions queued (gauge)
//! - `pinion_engine_partitions{stage}`: partitions per pipeline stage (gauge)
//! - `pinion_engine_admitted_bytes_total`: working-set bytes admitted (counter)
//! - `pinion_engine_admission_wait_seconds`: a partition's wait for its working set
//! - `pinion_engine_phase_seconds{phase}`: synthesis, gpu, assembly per partition
//! - `pinion_engine_jobs_submitted_total{priority}`
//! - `pinion_engine_jobs_total{circuit, outcome}`: jobs ended (completed, failed, cancelled)
//! - `pinion_engine_proofs_total{circuit, outcome}`: partitions of those jobs
//! - `pinion_engine_job_seconds{circuit}`: submission to end of completed jobs
//! - `pinion_engine_retries_total{device}`: partitions retried after a device fault

use std::time::Duration;

use crate::job::JobTimings;

pub(crate) fn queue_depth(priority: &'static str, n: usize) {
    metrics::gauge!("pinion_engine_queue_depth", "priority" => priority).set(n as f64);
}

pub(crate) fn stage(stage: &'static str, n: i64) {
    metrics::gauge!("pinion_engine_partitions", "stage" => stage).set(n as f64);
}

pub(crate) fn admitted(bytes: u64, waited: Duration) {
    metrics::counter!("pinion_engine_admitted_bytes_total").increment(bytes);
    metrics::histogram!("pinion_engine_admission_wait_seconds").record(waited.as_secs_f64());
}

pub(crate) fn phase(phase: &'static str, d: Duration) {
    metrics::histogram!("pinion_engine_phase_seconds", "phase" => phase).record(d.as_secs_f64());
}

pub(crate) fn job_submitted(priority: &'static str) {
    metrics::counter!("pinion_engine_jobs_submitted_total", "priority" => priority).increment(1);
}

pub(crate) fn job_finished(circuit: &str, outcome: &'static str, n: usize, t: &JobTimings) {
    let circuit = circuit.to_string();
    metrics::counter!("pinion_engine_jobs_total", "circuit" => circuit.clone(), "outcome" => outcome)
        .increment(1);
    metrics::counter!("pinion_engine_proofs_total", "circuit" => circuit.clone(), "outcome" => outcome)
        .increment(n as u64);
    if outcome == "completed" {
        metrics::histogram!("pinion_engine_job_seconds", "circuit" => circuit)
            .record(t.total.as_secs_f64());
    }
}

pub(crate) fn retried(device: &str) {
    metrics::counter!("pinion_engine_retries_total", "device" => device.to_string()).increment(1);
}
