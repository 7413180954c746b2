//! Metrics through the `metrics` facade: names, labels and values.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::TestRecorder;
use memory_budget::metrics_names as m;
use memory_budget::{Budget, Category, Evictor};

struct FreeNothing;
impl Evictor for FreeNothing {
    fn name(&self) -> &str {
        "nothing"
    }
    fn evict(&self, _: u64) -> u64 {
        0
    }
}

struct Giver(std::sync::Mutex<Vec<memory_budget::Reservation>>);
impl Evictor for Giver {
    fn name(&self) -> &str {
        "giver"
    }
    fn evict(&self, _: u64) -> u64 {
        let mut v = self.0.lock().unwrap();
        v.pop().map_or(0, |r| r.bytes())
    }
}

#[test]
fn counters_and_gauges_follow_the_budget() {
    let rec = TestRecorder::default();
    let (b, _regs, giver) = metrics::with_local_recorder(&rec, || {
        m::describe();
        let b = Budget::fixed_named("t", 1000);
        let giver = Arc::new(Giver(std::sync::Mutex::new(Vec::new())));
        let regs = (
            b.register_evictor(Arc::new(FreeNothing)),
            b.register_evictor(giver.clone()),
        );
        (b, regs, giver)
    });
    for name in [
        m::TOTAL_BYTES,
        m::USED_BYTES,
        m::WAITING,
        m::WAITS_TOTAL,
        m::REFUSALS_TOTAL,
        m::EVICTED_BYTES_TOTAL,
        m::DRIFT_BYTES,
    ] {
        assert!(
            rec.described.lock().unwrap().iter().any(|d| d == name),
            "{name} not described"
        );
        assert!(name.starts_with("pinion_budget_"));
    }
    assert_eq!(
        rec.gauge("pinion_budget_total_bytes{budget=t}"),
        Some(1000.0)
    );

    let r = b.try_reserve(300, Category::Srs, "srs").expect("fits");
    let cached = b.try_reserve(600, Category::Pce, "pce").expect("fits");
    giver.0.lock().unwrap().push(cached);
    assert_eq!(rec.gauge("pinion_budget_used_bytes{budget=t}"), Some(900.0));
    assert_eq!(
        rec.gauge("pinion_budget_category_used_bytes{budget=t,category=srs}"),
        Some(300.0)
    );
    assert_eq!(
        rec.gauge("pinion_budget_category_used_bytes{budget=t,category=pce}"),
        Some(600.0)
    );

    assert!(b.try_reserve(2000, Category::Other, "huge").is_err());
    assert!(b.try_reserve(200, Category::Other, "no room").is_err());
    assert_eq!(
        rec.counter("pinion_budget_refusals_total{budget=t}"),
        Some(2)
    );

    // Waits, then the giver evicts its 600 bytes.
    let w = b
        .reserve(
            500,
            Category::WorkingSet,
            "w",
            Some(Duration::from_secs(10)),
        )
        .expect("evicted");
    assert_eq!(rec.counter("pinion_budget_waits_total{budget=t}"), Some(1));
    assert_eq!(
        rec.counter("pinion_budget_evicted_bytes_total{budget=t,evictor=giver}"),
        Some(600)
    );
    assert_eq!(
        rec.counter("pinion_budget_evictions_total{budget=t,evictor=giver}"),
        Some(1)
    );
    assert_eq!(
        rec.counter("pinion_budget_evicted_bytes_total{budget=t,evictor=nothing}"),
        Some(0)
    );
    assert_eq!(
        rec.gauge("pinion_budget_category_used_bytes{budget=t,category=pce}"),
        Some(0.0)
    );
    assert_eq!(
        rec.gauge("pinion_budget_category_used_bytes{budget=t,category=working_set}"),
        Some(500.0)
    );
    assert_eq!(rec.gauge("pinion_budget_waiting{budget=t}"), Some(0.0));
    drop((r, w));
    assert_eq!(rec.gauge("pinion_budget_used_bytes{budget=t}"), Some(0.0));
    assert!(
        rec.keys().iter().all(|k| k.starts_with("pinion_budget_")),
        "{:?}",
        rec.keys()
    );
}
