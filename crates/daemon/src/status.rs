//! What the daemon reports about itself: the JSON document of `/status` (and of
//! `pinion.v1` GetStatus) and cuzk's `GetStatusResponse`, both from one snapshot.

use memory_budget::{Category, MemoryReport};
use serde_json::{json, Value};
use srs_store::{EntryStatus, Tier};

use crate::daemon::Daemon;
use crate::proto::cuzk::v1 as cuzk;

/// Budget categories in report order, with their names.
const CATEGORIES: [(Category, &str); 6] = [
    (Category::Srs, "srs"),
    (Category::Pce, "pce"),
    (Category::WorkingSet, "working_set"),
    (Category::PinnedPool, "pinned_pool"),
    (Category::Transient, "transient"),
    (Category::Other, "other"),
];

/// cuzk's tiers: HOT (ready to prove: device, pinned or host memory), WARM (mapped, needs
/// a load from the page cache), COLD (on disk).
pub fn cuzk_tier(tier: Tier) -> cuzk::srs_status::Tier {
    match tier {
        Tier::Device | Tier::Pinned | Tier::Host => cuzk::srs_status::Tier::Hot,
        Tier::Mapped => cuzk::srs_status::Tier::Warm,
        Tier::Disk => cuzk::srs_status::Tier::Cold,
    }
}

struct Device {
    name: String,
    ordinal: u32,
    cuda: bool,
    vram_total_bytes: u64,
    vram_free_bytes: u64,
    /// What the device's VRAM budget charges now (live allocations and local memory).
    vram_charged_bytes: u64,
    /// Freed memory the device's pool keeps mapped (`VramPool::KEEP`): used by
    /// `cuMemGetInfo`'s count, charged to no budget.
    vram_pool_kept_bytes: u64,
    current_job: Option<(String, String)>,
    in_flight: usize,
    partitions_done: u64,
}

fn devices(d: &Daemon) -> Vec<Device> {
    let status = d.engine.status();
    status
        .devices
        .iter()
        .enumerate()
        .map(|(i, dev)| {
            let gpu = dev
                .ordinal
                .and_then(|o| d.gpus.iter().find(|g| g.info().ordinal == o));
            let (total, free) = gpu
                .and_then(|g| g.mem_info().ok())
                .map_or((0, 0), |m| (m.total_bytes, m.free_bytes));
            let charged = gpu.map_or(0, |g| g.vram_budget().snapshot().used_bytes);
            let kept = gpu
                .and_then(|g| g.pool_bytes().ok())
                .map_or(0, |p| p.reserved_bytes.saturating_sub(p.used_bytes));
            Device {
                name: match gpu {
                    Some(g) => format!("{} ({})", dev.name, g.info().name),
                    None => dev.name.clone(),
                },
                ordinal: dev.ordinal.unwrap_or(i) as u32,
                cuda: gpu.is_some(),
                vram_total_bytes: total,
                vram_free_bytes: free,
                vram_charged_bytes: charged,
                vram_pool_kept_bytes: kept,
                current_job: dev.current_job.and_then(|id| d.job_kind(id)),
                in_flight: dev.in_flight,
                partitions_done: dev.partitions_done,
            }
        })
        .collect()
}

fn pinned_bytes(d: &Daemon) -> u64 {
    d.budget.snapshot().used_in(Category::PinnedPool) + d.engine.store().tier_bytes(Tier::Pinned)
}

/// cuzk's GetStatus answer. Every device is listed (a CPU device with ordinal = its index
/// and no VRAM); queues are per registered circuit.
pub fn cuzk_status(d: &Daemon) -> cuzk::GetStatusResponse {
    let status = d.engine.status();
    let gpus = devices(d)
        .into_iter()
        .map(|dev| {
            let (job, kind) = dev.current_job.unwrap_or_default();
            cuzk::GpuStatus {
                ordinal: dev.ordinal,
                name: dev.name,
                vram_total_bytes: dev.vram_total_bytes,
                vram_free_bytes: dev.vram_free_bytes,
                current_job_id: job,
                current_proof_kind: kind,
            }
        })
        .collect();
    let loaded_srs = d
        .engine
        .store()
        .entries()
        .into_iter()
        .map(|e| cuzk::SrsStatus {
            circuit_id: e.circuit_id,
            tier: cuzk_tier(e.tier) as i32,
            size_bytes: e.bytes,
            ref_count: e.n_holders as u32,
        })
        .collect();
    let queues = status
        .circuits
        .iter()
        .map(|c| cuzk::QueueStatus {
            proof_kind: c.id.clone(),
            pending: c.queued as u32,
            in_progress: c.in_progress as u32,
        })
        .collect();
    cuzk::GetStatusResponse {
        gpus,
        loaded_srs,
        queues,
        total_proofs_completed: status.jobs_completed,
        total_proofs_failed: status.jobs_failed,
        uptime_seconds: d.started.elapsed().as_secs(),
        pinned_memory_bytes: pinned_bytes(d),
        pinned_memory_limit_bytes: d.budget.total_bytes(),
    }
}

fn key_json(e: &EntryStatus) -> Value {
    json!({
        "circuit_id": e.circuit_id,
        "tier": e.tier.name(),
        "bytes": e.bytes,
        "holders": e.n_holders,
    })
}

/// The `/status` document: devices, circuits with their keys' tiers, queues, jobs, and
/// the budget (charged now and at its peak per category, next to what the kernel
/// measures).
pub fn status_json(d: &Daemon) -> Value {
    let status = d.engine.status();
    let devices: Vec<Value> = devices(d)
        .into_iter()
        .map(|dev| {
            json!({
                "name": dev.name,
                "ordinal": dev.ordinal,
                "cuda": dev.cuda,
                "vram_total_bytes": dev.vram_total_bytes,
                "vram_free_bytes": dev.vram_free_bytes,
                "vram_charged_bytes": dev.vram_charged_bytes,
                "vram_pool_kept_bytes": dev.vram_pool_kept_bytes,
                "current_job": dev.current_job.map(|(job, _)| job),
                "in_flight": dev.in_flight,
                "partitions_done": dev.partitions_done,
            })
        })
        .collect();
    let keys = d.engine.store().entries();
    let circuits: Vec<Value> = d
        .circuit_list()
        .iter()
        .map(|c| {
            let engine = status.circuits.iter().find(|s| s.id == c.id);
            json!({
                "id": c.id,
                "params": c.params.path.display().to_string(),
                "n_constraints": c.n_constraints,
                "n_public": c.n_public,
                "key": keys.iter().find(|k| k.circuit_id == c.id).map(key_json),
                "queued": engine.map_or(0, |e| e.queued),
                "in_progress": engine.map_or(0, |e| e.in_progress),
            })
        })
        .collect();
    let snap = &status.budget;
    let categories: serde_json::Map<String, Value> = CATEGORIES
        .iter()
        .map(|(c, name)| {
            (
                name.to_string(),
                json!({ "charged_bytes": snap.used_in(*c), "peak_charged_bytes": snap.peak_in(*c) }),
            )
        })
        .collect();
    let measured = MemoryReport::of(&d.budget).map(|r| r.to_json());
    json!({
        "uptime_seconds": d.started.elapsed().as_secs(),
        "accepting": d.is_accepting(),
        "listen": d.config.listen.to_string(),
        "frontend": d.frontend_name(),
        "devices": devices,
        "circuits": circuits,
        "keys": keys.iter().map(key_json).collect::<Vec<_>>(),
        "queues": {
            "queued_by_priority": {
                "low": status.queued[0],
                "normal": status.queued[1],
                "high": status.queued[2],
                "critical": status.queued[3],
            },
            "stages": {
                "admitting": status.stages.admitting,
                "synthesizing": status.stages.synthesizing,
                "waiting_device": status.stages.waiting_device,
                "on_device": status.stages.on_device,
                "assembling": status.stages.assembling,
            },
        },
        "jobs": {
            "completed": status.jobs_completed,
            "failed": status.jobs_failed,
            "cancelled": status.jobs_cancelled,
        },
        "budget": {
            "total_bytes": snap.total_bytes,
            "cap_bytes": snap.cap_bytes,
            "charged_bytes": snap.used_bytes,
            "peak_charged_bytes": snap.peak_used_bytes,
            "by_category": categories,
            "pinned_bytes": pinned_bytes(d),
            // Limit sources and what the kernel measures (absent for a fixed budget).
            "measured": measured,
        },
    })
}
