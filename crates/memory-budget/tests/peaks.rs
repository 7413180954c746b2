//! High-water marks: the most charged at once, and per category, through reserve, grow,
//! merge, re-categorise and release; restarted by `reset_peaks`.

use memory_budget::{Budget, Category};

#[test]
fn peaks_follow_every_way_bytes_are_charged() {
    let budget = Budget::fixed(1 << 20);
    let srs = budget.try_reserve(100, Category::Srs, "srs").unwrap();
    let mut ws = budget.try_reserve(50, Category::WorkingSet, "ws").unwrap();
    ws.try_grow(25).unwrap();
    let s = budget.snapshot();
    assert_eq!(
        (s.peak_used_bytes, s.peak_in(Category::WorkingSet)),
        (175, 75)
    );
    drop(srs);
    ws.shrink_to(10);
    let mut other = budget.try_reserve(30, Category::Other, "other").unwrap();
    let extra = budget.try_reserve(5, Category::Other, "extra").unwrap();
    other.merge(extra).unwrap();
    other.set_category(Category::Srs);
    let s = budget.snapshot();
    assert_eq!(s.peak_used_bytes, 175, "the peak stays");
    assert_eq!(s.peak_in(Category::Srs), 100);
    assert_eq!(s.peak_in(Category::Other), 35);
    assert_eq!(s.used_bytes, 45);
    budget.reset_peaks();
    let s = budget.snapshot();
    assert_eq!(s.peak_used_bytes, 45);
    assert_eq!(s.peak_in(Category::Srs), 35);
    assert_eq!(s.peak_in(Category::WorkingSet), 10);
    assert_eq!(s.peak_in(Category::Other), 0);
}
