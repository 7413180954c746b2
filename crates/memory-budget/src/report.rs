//! The memory report shared by `memprobe` and `pinion memprobe`: the limit sources, the winner,
//! the margin and budget derived from it, and charged vs measured usage, as JSON or text.

use std::io::{self, Write};

use serde_json::{json, Value};

use crate::{
    format_bytes, Budget, BudgetError, Detection, KernelProbe, MeasuredUsage, SourceStatus,
    UsageProbe, UsageScope,
};

/// A snapshot of what bounds the process and what it uses, taken from a detected budget.
#[derive(Debug)]
pub struct MemoryReport {
    detection: Detection,
    charged_bytes: u64,
    admission_cap_bytes: u64,
    measured: Result<MeasuredUsage, BudgetError>,
    real_headroom_bytes: Option<i128>,
}

impl MemoryReport {
    /// Reads the kernel's usage numbers now. `None` when the budget was not made by
    /// detection (`Budget::fixed`): then there are no limit sources to report.
    pub fn of(budget: &Budget) -> Option<MemoryReport> {
        let detection = budget.detection()?.clone();
        let limits = &detection.limits;
        let measured = KernelProbe::new(limits.root.clone(), limits.usage_scope.clone()).measure();
        // The drift check compares the probe's numbers with this limit.
        let drift_limit = match limits.usage_scope {
            UsageScope::System => limits.mem_total_bytes.unwrap_or(limits.limit_bytes),
            _ => limits.limit_bytes,
        };
        let real_headroom_bytes = measured.as_ref().ok().map(|m| {
            drift_limit as i128 - m.hard_bytes as i128 - detection.safety_margin_bytes as i128
        });
        Some(MemoryReport {
            charged_bytes: budget.used_bytes(),
            admission_cap_bytes: budget.snapshot().cap_bytes,
            detection,
            measured,
            real_headroom_bytes,
        })
    }

    /// What detection found and derived.
    pub fn detection(&self) -> &Detection {
        &self.detection
    }

    /// The kernel's numbers, or why they could not be read.
    pub fn measured(&self) -> Result<&MeasuredUsage, &BudgetError> {
        self.measured.as_ref()
    }

    /// The report as a JSON object: `limit_bytes`, `limit_source`, `limit_path`,
    /// `safety_margin_bytes`, `budget_bytes`, `budget_rule`, `admission_cap_bytes`, `root`,
    /// `sources` (objects with `kind`, `path`, `limit_bytes`, `soft`, `status`, `note`),
    /// `notes` and `usage`.
    pub fn to_json(&self) -> Value {
        let det = &self.detection;
        let limits = &det.limits;
        let win = limits.winning_source();
        let sources: Vec<Value> = limits
            .sources
            .iter()
            .map(|s| {
                json!({
                    "kind": s.kind.as_str(),
                    "path": s.path.display().to_string(),
                    "limit_bytes": s.limit_bytes(),
                    "soft": s.kind.is_soft(),
                    "status": status_json(&s.status),
                    "note": s.note,
                })
            })
            .collect();
        json!({
            "root": limits.root.display().to_string(),
            "limit_bytes": limits.limit_bytes,
            "limit_source": win.kind.as_str(),
            "limit_path": win.path.display().to_string(),
            "safety_margin_bytes": det.safety_margin_bytes,
            "budget_bytes": det.budget_bytes,
            "budget_rule": det.budget_rule,
            "admission_cap_bytes": self.admission_cap_bytes,
            "sources": sources,
            "notes": limits.notes,
            "usage": self.usage_json(),
        })
    }

    fn usage_json(&self) -> Value {
        let charged = self.charged_bytes;
        match &self.measured {
            Err(e) => json!({ "error": e.to_string(), "charged_bytes": charged }),
            Ok(m) => {
                let breakdown: serde_json::Map<String, Value> = m
                    .breakdown
                    .iter()
                    .map(|(k, v)| (k.clone(), json!(v)))
                    .collect();
                let process = m.process.as_ref().map(|p| {
                    json!({
                        "vm_rss_bytes": p.vm_rss_bytes,
                        "rss_anon_bytes": p.rss_anon_bytes,
                        "rss_file_bytes": p.rss_file_bytes,
                        "rss_shmem_bytes": p.rss_shmem_bytes,
                        "vm_lck_bytes": p.vm_lck_bytes,
                        "vm_pin_bytes": p.vm_pin_bytes,
                        "vm_pte_bytes": p.vm_pte_bytes,
                        "hard_bytes": p.hard_bytes(),
                    })
                });
                json!({
                    "scope": scope_text(&m.scope),
                    "charged_bytes": charged,
                    "current_bytes": m.current_bytes,
                    "hard_bytes": m.hard_bytes,
                    "reclaimable_bytes": m.reclaimable_bytes,
                    "own_hard_bytes": m.own_hard_bytes(),
                    "drift_bytes": m.own_hard_bytes() as i128 - charged as i128,
                    "real_headroom_bytes": self.real_headroom_bytes,
                    "breakdown": breakdown,
                    "process": process,
                })
            }
        }
    }

    /// The report for people, one fact per line.
    pub fn write_text(&self, out: &mut dyn Write) -> io::Result<()> {
        let det = &self.detection;
        let limits = &det.limits;
        let win = limits.winning_source();
        writeln!(out, "root: {}", limits.root.display())?;
        writeln!(out, "sources:")?;
        for s in &limits.sources {
            let v = match &s.status {
                SourceStatus::Limit(b) => format_bytes(*b),
                SourceStatus::Unlimited => "max".into(),
                SourceStatus::Missing => "absent".into(),
                SourceStatus::Unreadable(_) => "unreadable".into(),
                SourceStatus::Malformed(_) => "malformed".into(),
            };
            writeln!(
                out,
                "  {:<38} {:<12} {}  ({})",
                s.kind.as_str(),
                v,
                s.path.display(),
                s.note
            )?;
        }
        for n in &limits.notes {
            writeln!(out, "  note: {n}")?;
        }
        writeln!(
            out,
            "limit: {} ({} bytes) from {} {}",
            format_bytes(limits.limit_bytes),
            limits.limit_bytes,
            win.kind.as_str(),
            win.path.display()
        )?;
        writeln!(
            out,
            "safety margin: {} ({} bytes)",
            format_bytes(det.safety_margin_bytes),
            det.safety_margin_bytes
        )?;
        writeln!(
            out,
            "budget: {} ({} bytes): {}",
            format_bytes(det.budget_bytes),
            det.budget_bytes,
            det.budget_rule
        )?;
        match &self.measured {
            Ok(m) => {
                writeln!(out, "usage ({}):", scope_text(&m.scope))?;
                writeln!(out, "  charged:     {}", format_bytes(self.charged_bytes))?;
                writeln!(out, "  current:     {}", format_bytes(m.current_bytes))?;
                writeln!(out, "  hard:        {}", format_bytes(m.hard_bytes))?;
                writeln!(out, "  reclaimable: {}", format_bytes(m.reclaimable_bytes))?;
                if let Some(h) = self.real_headroom_bytes {
                    writeln!(out, "  real headroom: {h} bytes (limit - hard - margin)")?;
                }
                for (k, v) in &m.breakdown {
                    writeln!(out, "    {k:<14} {}", format_bytes(*v))?;
                }
                if let Some(p) = &m.process {
                    writeln!(
                        out,
                        "  this process: VmRSS {:?} RssAnon {:?} RssFile {:?} RssShmem {:?} VmLck {:?} VmPin {:?}",
                        p.vm_rss_bytes, p.rss_anon_bytes, p.rss_file_bytes, p.rss_shmem_bytes, p.vm_lck_bytes, p.vm_pin_bytes
                    )?;
                }
            }
            Err(e) => writeln!(out, "usage: unavailable: {e}")?,
        }
        Ok(())
    }
}

fn status_json(s: &SourceStatus) -> String {
    match s {
        SourceStatus::Limit(_) => "limit".to_string(),
        SourceStatus::Unlimited => "unlimited".to_string(),
        SourceStatus::Missing => "missing".to_string(),
        SourceStatus::Unreadable(e) => format!("unreadable: {e}"),
        SourceStatus::Malformed(e) => format!("malformed: {e}"),
    }
}

/// `cgroup2:<dir>`, `cgroup1:<dir>`, `system:/proc/meminfo`, `process:VmSize` or
/// `process:VmData`.
pub fn scope_text(s: &UsageScope) -> String {
    match s {
        UsageScope::CgroupV2 { dir } => format!("cgroup2:{}", dir.display()),
        UsageScope::CgroupV1 { dir } => format!("cgroup1:{}", dir.display()),
        UsageScope::System => "system:/proc/meminfo".into(),
        UsageScope::AddressSpace => "process:VmSize".into(),
        UsageScope::DataSegment => "process:VmData".into(),
    }
}
