//! The memory report every proving command prints: what the budget charged at its peak,
//! per category, next to what the kernel measured for the whole process (`VmHWM`).

use memory_budget::{Budget, Category};
use serde_json::json;

use crate::ui;

/// Highest resident set of this process so far (`VmHWM`), when the kernel says.
pub fn vm_hwm_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Charged peaks (the whole budget's, and each category's own) and the measured peak.
#[derive(Clone, Copy, Debug)]
pub struct MemoryReport {
    /// The most the budget held charged at once.
    pub peak_charged_bytes: u64,
    /// `VmHWM` of this process.
    pub peak_measured_bytes: Option<u64>,
    /// Each category's own peak (they need not coincide): srs, pce, working_set,
    /// pinned_pool, transient (short-lived copies: files being parsed, upload copies),
    /// other (tables that live with a backend).
    pub by_category: [(&'static str, u64); 6],
}

impl MemoryReport {
    /// Reads the budget's high-water marks and the process's `VmHWM` now.
    pub fn now(budget: &Budget) -> MemoryReport {
        let s = budget.snapshot();
        MemoryReport {
            peak_charged_bytes: s.peak_used_bytes,
            peak_measured_bytes: vm_hwm_bytes(),
            by_category: [
                ("srs", s.peak_in(Category::Srs)),
                ("pce", s.peak_in(Category::Pce)),
                ("working_set", s.peak_in(Category::WorkingSet)),
                ("pinned_pool", s.peak_in(Category::PinnedPool)),
                ("transient", s.peak_in(Category::Transient)),
                ("other", s.peak_in(Category::Other)),
            ],
        }
    }

    /// The `"memory"` object of `--json` output.
    pub fn json(&self) -> serde_json::Value {
        let by: serde_json::Map<String, serde_json::Value> = self
            .by_category
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect();
        json!({
            "peak_charged_bytes": self.peak_charged_bytes,
            "peak_measured_bytes": self.peak_measured_bytes,
            "charged_by_category": by,
        })
    }

    /// The text lines (under a `memory:` heading).
    pub fn print(&self) {
        println!("memory:");
        match self.peak_measured_bytes {
            Some(h) => println!(
                "  peak charged {} / measured {} (VmHWM)",
                ui::bytes(self.peak_charged_bytes),
                ui::bytes(h)
            ),
            None => println!(
                "  peak charged {} / measured unavailable (no /proc/self/status)",
                ui::bytes(self.peak_charged_bytes)
            ),
        }
        let parts: Vec<String> = self
            .by_category
            .iter()
            .map(|(k, v)| format!("{k} {}", memory_budget::format_bytes(*v)))
            .collect();
        println!("  peak by category: {}", parts.join(", "));
    }
}
