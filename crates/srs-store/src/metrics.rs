//! Metric names (all prefixed `pinion_srs_`) and the few places that record them.

use crate::load::LoadStats;
use crate::store::Tier;

/// Counter: completed loads.
pub const LOADS_TOTAL: &str = "pinion_srs_loads_total";
/// Histogram: load wall time in seconds.
pub const LOAD_SECONDS: &str = "pinion_srs_load_seconds";
/// Gauge: throughput of the last load, file bytes per second.
pub const LOAD_BYTES_PER_SECOND: &str = "pinion_srs_load_bytes_per_second";
/// Gauge: the highest reservation a load has held (its peak charge).
pub const PEAK_CHARGED_BYTES: &str = "pinion_srs_peak_charged_bytes";
/// Gauge (label `tier`): bytes held per tier.
pub const TIER_BYTES: &str = "pinion_srs_tier_bytes";
/// Counter: `get_or_load` served from memory.
pub const HITS_TOTAL: &str = "pinion_srs_hits_total";
/// Counter: `get_or_load` that had to load (or wait for another caller's load).
pub const MISSES_TOTAL: &str = "pinion_srs_misses_total";
/// Counter: entries evicted (label `reason`: `budget` or `explicit`).
pub const EVICTIONS_TOTAL: &str = "pinion_srs_evictions_total";

pub(crate) fn record_load(stats: &LoadStats) {
    metrics::counter!(LOADS_TOTAL).increment(1);
    metrics::histogram!(LOAD_SECONDS).record(stats.seconds);
    metrics::gauge!(LOAD_BYTES_PER_SECOND).set(stats.bytes_per_second());
    metrics::gauge!(PEAK_CHARGED_BYTES).set(stats.peak_charged_bytes as f64);
}

pub(crate) fn tier_bytes(tier: Tier, bytes: u64) {
    metrics::gauge!(TIER_BYTES, "tier" => tier.name()).set(bytes as f64);
}

pub(crate) fn hit() {
    metrics::counter!(HITS_TOTAL).increment(1);
}

pub(crate) fn miss() {
    metrics::counter!(MISSES_TOTAL).increment(1);
}

pub(crate) fn evicted(reason: &'static str) {
    metrics::counter!(EVICTIONS_TOTAL, "reason" => reason).increment(1);
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_are_prefixed() {
        let names = [
            super::LOADS_TOTAL,
            super::LOAD_SECONDS,
            super::LOAD_BYTES_PER_SECOND,
            super::PEAK_CHARGED_BYTES,
            super::TIER_BYTES,
            super::HITS_TOTAL,
            super::MISSES_TOTAL,
            super::EVICTIONS_TOTAL,
        ];
        for n in names {
            assert!(n.starts_with("pinion_srs_"), "{n}");
        }
    }
}
