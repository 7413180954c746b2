//! Metric names and handles (through the `metrics` facade).
//!
//! Handles are taken when a budget is created, so install the recorder before creating
//! budgets. Every metric carries a `budget` label (the budget's name).

use metrics::{Counter, Gauge, Unit};

use crate::budget::Category;

/// Total bytes of the budget (gauge).
pub const TOTAL_BYTES: &str = "pinion_budget_total_bytes";
/// Current admission ceiling after the drift check (gauge).
pub const CAP_BYTES: &str = "pinion_budget_cap_bytes";
/// Bytes charged, all categories (gauge).
pub const USED_BYTES: &str = "pinion_budget_used_bytes";
/// Bytes charged per category (gauge, label `category`).
pub const USED_BY_CATEGORY_BYTES: &str = "pinion_budget_category_used_bytes";
/// Requests waiting now (gauge).
pub const WAITING: &str = "pinion_budget_waiting";
/// Requests that had to wait (counter).
pub const WAITS_TOTAL: &str = "pinion_budget_waits_total";
/// Requests refused (too large, would block) (counter).
pub const REFUSALS_TOTAL: &str = "pinion_budget_refusals_total";
/// Bytes freed by evictors (counter, label `evictor`).
pub const EVICTED_BYTES_TOTAL: &str = "pinion_budget_evicted_bytes_total";
/// Evictor calls that freed something (counter, label `evictor`).
pub const EVICTIONS_TOTAL: &str = "pinion_budget_evictions_total";
/// Hard usage measured by the kernel (gauge).
pub const MEASURED_HARD_BYTES: &str = "pinion_budget_measured_hard_bytes";
/// Measured hard bytes minus charged bytes (gauge, may be negative).
pub const DRIFT_BYTES: &str = "pinion_budget_drift_bytes";
/// Failed kernel readings (counter).
pub const PROBE_ERRORS_TOTAL: &str = "pinion_budget_probe_errors_total";

/// Describes every metric to the installed recorder (call once after installing it).
pub fn describe() {
    metrics::describe_gauge!(TOTAL_BYTES, Unit::Bytes, "bytes the budget hands out");
    metrics::describe_gauge!(
        CAP_BYTES,
        Unit::Bytes,
        "admission ceiling after the drift check"
    );
    metrics::describe_gauge!(
        USED_BYTES,
        Unit::Bytes,
        "bytes charged to live reservations"
    );
    metrics::describe_gauge!(
        USED_BY_CATEGORY_BYTES,
        Unit::Bytes,
        "bytes charged per category"
    );
    metrics::describe_gauge!(WAITING, Unit::Count, "requests waiting for admission");
    metrics::describe_counter!(WAITS_TOTAL, Unit::Count, "requests that had to wait");
    metrics::describe_counter!(REFUSALS_TOTAL, Unit::Count, "requests refused");
    metrics::describe_counter!(EVICTED_BYTES_TOTAL, Unit::Bytes, "bytes freed by evictors");
    metrics::describe_counter!(
        EVICTIONS_TOTAL,
        Unit::Count,
        "evictor calls that freed bytes"
    );
    metrics::describe_gauge!(
        MEASURED_HARD_BYTES,
        Unit::Bytes,
        "hard usage the kernel reports"
    );
    metrics::describe_gauge!(
        DRIFT_BYTES,
        Unit::Bytes,
        "measured hard bytes minus charged bytes"
    );
    metrics::describe_counter!(PROBE_ERRORS_TOTAL, Unit::Count, "failed kernel readings");
}

pub(crate) struct BudgetMetrics {
    name: String,
    total: Gauge,
    cap: Gauge,
    used: Gauge,
    by_category: [Gauge; Category::N],
    waiting: Gauge,
    waits: Counter,
    refusals: Counter,
    measured_hard: Gauge,
    drift: Gauge,
    probe_errors: Counter,
}

impl BudgetMetrics {
    pub(crate) fn new(name: &str) -> Self {
        let l = || [("budget", name.to_string())];
        BudgetMetrics {
            name: name.to_string(),
            total: metrics::gauge!(TOTAL_BYTES, &l()),
            cap: metrics::gauge!(CAP_BYTES, &l()),
            used: metrics::gauge!(USED_BYTES, &l()),
            by_category: Category::ALL.map(|c| {
                metrics::gauge!(USED_BY_CATEGORY_BYTES, "budget" => name.to_string(), "category" => c.as_str())
            }),
            waiting: metrics::gauge!(WAITING, &l()),
            waits: metrics::counter!(WAITS_TOTAL, &l()),
            refusals: metrics::counter!(REFUSALS_TOTAL, &l()),
            measured_hard: metrics::gauge!(MEASURED_HARD_BYTES, &l()),
            drift: metrics::gauge!(DRIFT_BYTES, &l()),
            probe_errors: metrics::counter!(PROBE_ERRORS_TOTAL, &l()),
        }
    }

    pub(crate) fn total(&self, total: u64) {
        self.total.set(total as f64);
    }

    #[inline]
    pub(crate) fn publish(
        &self,
        used: u64,
        cap: u64,
        by_category: &[u64; Category::N],
        n_waiting: usize,
    ) {
        self.used.set(used as f64);
        self.cap.set(cap as f64);
        for (g, v) in self.by_category.iter().zip(by_category) {
            g.set(*v as f64);
        }
        self.waiting.set(n_waiting as f64);
    }

    /// The common path: one category changed, the queue did not.
    #[inline]
    pub(crate) fn publish_one(&self, used: u64, category: Category, category_used: u64) {
        self.used.set(used as f64);
        self.by_category[category.index()].set(category_used as f64);
    }

    pub(crate) fn waited(&self) {
        self.waits.increment(1);
    }

    pub(crate) fn refused(&self) {
        self.refusals.increment(1);
    }

    pub(crate) fn evictor(&self, evictor: &str) -> EvictorMetrics {
        let labels = [
            ("budget", self.name.clone()),
            ("evictor", evictor.to_string()),
        ];
        EvictorMetrics {
            bytes: metrics::counter!(EVICTED_BYTES_TOTAL, &labels),
            calls: metrics::counter!(EVICTIONS_TOTAL, &labels),
        }
    }

    pub(crate) fn measured(&self, hard: u64, drift: i64) {
        self.measured_hard.set(hard as f64);
        self.drift.set(drift as f64);
    }

    pub(crate) fn probe_error(&self) {
        self.probe_errors.increment(1);
    }
}

/// Handles for one registered evictor.
#[derive(Clone)]
pub(crate) struct EvictorMetrics {
    bytes: Counter,
    calls: Counter,
}

impl EvictorMetrics {
    pub(crate) fn record(&self, freed_bytes: u64) {
        if freed_bytes > 0 {
            self.bytes.increment(freed_bytes);
            self.calls.increment(1);
        }
    }
}
