//! A `metrics` recorder that keeps counters, summed over labels: how a run counts the
//! srs-store's key loads and evictions without a metrics exporter.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};

/// One counter name's values, by label set (`reason=budget`).
type ByLabels = BTreeMap<String, Arc<AtomicU64>>;

/// Counters by name (labels summed). Gauges and histograms are dropped.
#[derive(Clone, Default)]
pub struct Counters {
    /// name -> label set -> value. `counter!` registers on every call, so a key's slot is
    /// looked up, not added again.
    values: Arc<Mutex<BTreeMap<String, ByLabels>>>,
}

impl Counters {
    /// Installs a new recorder as the process's global one. Fails when another is
    /// installed already (a process has one).
    pub fn install() -> Result<Counters, String> {
        let c = Counters::default();
        metrics::set_global_recorder(c.clone()).map_err(|e| e.to_string())?;
        Ok(c)
    }

    /// A counter's value, summed over its label sets (0 when never incremented).
    pub fn get(&self, name: &str) -> u64 {
        self.values
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .map_or(0, |v| v.values().map(|a| a.load(Ordering::Relaxed)).sum())
    }
}

impl Recorder for Counters {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        let labels: Vec<String> = key
            .labels()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        let slot = Arc::clone(
            self.values
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(key.name().to_string())
                .or_default()
                .entry(labels.join(","))
                .or_default(),
        );
        Counter::from_arc(slot)
    }

    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }

    fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::noop()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use groth16_prover::testing::{test_seed, SplitMix};

    #[test]
    fn counts_by_name_summed_over_labels() {
        let mut g = SplitMix::new(test_seed());
        let (n, k) = (g.next_u64() % 100, g.next_u64() % 1000);
        let c = Counters::default();
        metrics::with_local_recorder(&c, || {
            for _ in 0..n {
                metrics::counter!("pinion_srs_evictions_total", "reason" => "budget").increment(1);
            }
            metrics::counter!("pinion_srs_evictions_total", "reason" => "explicit").increment(k);
            metrics::gauge!("pinion_srs_tier_bytes").set(7.0);
        });
        assert_eq!(c.get("pinion_srs_evictions_total"), n + k);
        assert_eq!(c.get("pinion_srs_tier_bytes"), 0, "gauges are not counters");
        assert_eq!(c.get("never"), 0);
    }
}
