//! Admission: sizes, reservation operations, FIFO and priority order, timeouts, cancellation,
//! shrinking totals and the drift ceiling.

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use common::seeded_rng;
use memory_budget::{
    Budget, BudgetConfig, BudgetError, Category, DriftConfig, MeasuredUsage, Priority, Reservation,
    ReserveFuture, UsageProbe, UsageScope,
};
use rand::RngExt;

/// Counts wakes, so tests can check that a release wakes exactly the admitted waiters.
#[derive(Default)]
struct CountingWaker(AtomicUsize);
impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

struct Polled {
    fut: Pin<Box<ReserveFuture>>,
    wakes: Arc<CountingWaker>,
}

impl Polled {
    fn new(fut: ReserveFuture) -> Polled {
        Polled {
            fut: Box::pin(fut),
            wakes: Arc::new(CountingWaker::default()),
        }
    }
    fn poll(&mut self) -> Poll<Result<Reservation, BudgetError>> {
        let waker = Waker::from(Arc::clone(&self.wakes));
        self.fut.as_mut().poll(&mut Context::from_waker(&waker))
    }
    fn woken(&self) -> usize {
        self.wakes.0.load(Ordering::SeqCst)
    }
    fn expect_pending(&mut self, what: &str) {
        assert!(self.poll().is_pending(), "{what} should still wait");
    }
    fn expect_ready(&mut self, what: &str) -> Reservation {
        match self.poll() {
            Poll::Ready(Ok(r)) => r,
            Poll::Ready(Err(e)) => panic!("{what}: {e}"),
            Poll::Pending => panic!("{what} should have been admitted"),
        }
    }
}

#[test]
fn try_reserve_accounts_by_category_and_releases_on_drop() {
    let mut rng = seeded_rng("try_reserve_accounts_by_category_and_releases_on_drop");
    let total: u64 = rng.random_range(1_000..1_000_000);
    let b = Budget::fixed(total);
    let a_bytes = rng.random_range(1..total / 2);
    let c_bytes = total - a_bytes;
    let a = b.try_reserve(a_bytes, Category::Srs, "srs").expect("fits");
    let c = b
        .try_reserve(c_bytes, Category::Pce, String::from("pce"))
        .expect("fits exactly");
    let s = b.snapshot();
    assert_eq!(s.used_bytes, total);
    assert_eq!(s.used_in(Category::Srs), a_bytes);
    assert_eq!(s.used_in(Category::Pce), c_bytes);
    assert_eq!(
        (a.label(), a.category(), a.bytes()),
        ("srs", Category::Srs, a_bytes)
    );
    match b.try_reserve(1, Category::Transient, "one more") {
        Err(BudgetError::WouldBlock {
            requested_bytes: 1,
            available_bytes: 0,
            n_waiting: 0,
        }) => {}
        other => panic!("expected WouldBlock, got {other:?}"),
    }
    drop(a);
    assert_eq!(b.used_bytes(), c_bytes);
    assert_eq!(b.snapshot().used_in(Category::Srs), 0);
    drop(c);
    assert_eq!(b.used_bytes(), 0);
}

#[test]
fn too_large_fails_at_once_naming_both_sizes() {
    let b = Budget::fixed(1000);
    for res in [
        b.try_reserve(1001, Category::Other, "x"),
        b.reserve(1001, Category::Other, "x", None), // must not block forever
        pollster::block_on(b.reserve_async(5000, Category::Other, "x")),
    ] {
        match res {
            Err(
                e @ BudgetError::TooLarge {
                    requested_bytes,
                    total_bytes: 1000,
                },
            ) => {
                assert!(requested_bytes > 1000);
                let msg = e.to_string();
                assert!(
                    msg.contains(&requested_bytes.to_string()) && msg.contains("1000"),
                    "{msg}"
                );
            }
            other => panic!("expected TooLarge, got {other:?}"),
        }
    }
}

/// Random operations on reservations checked against a shadow count.
#[test]
fn reservation_operations_match_a_model() {
    let mut rng = seeded_rng("reservation_operations_match_a_model");
    let total: u64 = rng.random_range(100..10_000);
    let b = Budget::fixed(total);
    let mut held: Vec<Reservation> = Vec::new();
    for _ in 0..5_000 {
        match rng.random_range(0..8) {
            0 | 1 => {
                let n = rng.random_range(0..=total / 4);
                let cat = Category::ALL[rng.random_range(0..Category::N)];
                let fits = b.used_bytes() + n <= total;
                match b.try_reserve(n, cat, "r") {
                    Ok(r) => {
                        assert!(fits);
                        held.push(r)
                    }
                    Err(BudgetError::WouldBlock { .. }) => assert!(!fits),
                    Err(e) => panic!("{e}"),
                }
            }
            _ if held.is_empty() => {}
            2 => {
                let i = rng.random_range(0..held.len());
                let n = rng.random_range(0..=held[i].bytes() + 5);
                let before = held[i].bytes();
                let got = held[i].release(n);
                assert_eq!(got, n.min(before));
                assert_eq!(held[i].bytes(), before - got);
            }
            3 => {
                let i = rng.random_range(0..held.len());
                let n = rng.random_range(0..=held[i].bytes() + 5);
                let before = held[i].bytes();
                held[i].shrink_to(n);
                assert_eq!(held[i].bytes(), before.min(n));
            }
            4 => {
                let i = rng.random_range(0..held.len());
                let n = rng.random_range(0..=total / 8);
                let fits = b.used_bytes() + n <= total;
                let before = held[i].bytes();
                assert_eq!(held[i].try_grow(n).is_ok(), fits);
                assert_eq!(held[i].bytes(), if fits { before + n } else { before });
            }
            5 => {
                let i = rng.random_range(0..held.len());
                let n = rng.random_range(0..=held[i].bytes() + 5);
                let before = held[i].bytes();
                let part = held[i].split(n);
                assert_eq!(part.bytes() + held[i].bytes(), before);
                assert_eq!(part.category(), held[i].category());
                held.push(part);
            }
            6 if held.len() >= 2 => {
                let other = held.swap_remove(rng.random_range(0..held.len()));
                let i = rng.random_range(0..held.len());
                let sum = held[i].bytes() + other.bytes();
                held[i].merge(other).expect("same budget");
                assert_eq!(held[i].bytes(), sum);
            }
            _ => {
                let i = rng.random_range(0..held.len());
                if rng.random_bool(0.5) {
                    drop(held.swap_remove(i));
                } else {
                    held[i].set_category(Category::ALL[rng.random_range(0..Category::N)]);
                }
            }
        }
        let s = b.snapshot();
        let sum: u64 = held.iter().map(Reservation::bytes).sum();
        assert_eq!(s.used_bytes, sum);
        assert!(s.used_bytes <= total);
        for c in Category::ALL {
            let in_c: u64 = held
                .iter()
                .filter(|r| r.category() == c)
                .map(Reservation::bytes)
                .sum();
            assert_eq!(s.used_in(c), in_c, "category {c}");
        }
    }
    held.clear();
    assert_eq!(b.used_bytes(), 0);
}

#[test]
fn merge_across_budgets_is_refused() {
    let a = Budget::fixed_named("a", 10);
    let b = Budget::fixed_named("b", 10);
    let mut ra = a.try_reserve(5, Category::Other, "x").expect("fits");
    let rb = b.try_reserve(5, Category::Other, "y").expect("fits");
    match ra.merge(rb) {
        Err(BudgetError::ForeignReservation { left, right }) => {
            assert_eq!((left.as_str(), right.as_str()), ("a", "b"))
        }
        other => panic!("expected ForeignReservation, got {other:?}"),
    }
    assert_eq!(
        b.used_bytes(),
        0,
        "the refused reservation was dropped and released"
    );
    assert_eq!(ra.bytes(), 5);
}

#[test]
fn fifo_with_strict_head_of_line() {
    let b = Budget::fixed(100);
    let mut hold = b.try_reserve(100, Category::Other, "hold").expect("fits");
    let mut big = Polled::new(b.reserve_async(60, Category::Other, "big"));
    let mut small1 = Polled::new(b.reserve_async(10, Category::Other, "small1"));
    let mut small2 = Polled::new(b.reserve_async(30, Category::Other, "small2"));
    big.expect_pending("big");
    small1.expect_pending("small1");
    small2.expect_pending("small2");
    assert_eq!(b.snapshot().n_waiting, 3);

    // 10 free: small1 would fit but must not overtake big.
    hold.release(10);
    small1.expect_pending("small1 behind big");
    assert_eq!(small1.woken(), 0);
    // A new request of the same priority does not overtake either.
    assert!(matches!(
        b.try_reserve(5, Category::Other, "late"),
        Err(BudgetError::WouldBlock { n_waiting: 3, .. })
    ));

    // 60 free: big goes in (and only big), the rest still wait.
    hold.release(50);
    assert_eq!(big.woken(), 1);
    assert_eq!((small1.woken(), small2.woken()), (0, 0));
    let big_r = big.expect_ready("big");
    assert_eq!(big_r.bytes(), 60);
    small1.expect_pending("small1");

    // 40 free: both small ones fit, in order.
    hold.release(40);
    assert_eq!((small1.woken(), small2.woken()), (1, 1));
    let s1 = small1.expect_ready("small1");
    let s2 = small2.expect_ready("small2");
    assert_eq!(b.used_bytes(), 100);
    drop((s1, s2, big_r, hold));
    assert_eq!(b.used_bytes(), 0);
}

#[test]
fn higher_priority_goes_first() {
    let b = Budget::fixed(100);
    let hold = b.try_reserve(100, Category::Other, "hold").expect("fits");
    let mut low = Polled::new(
        b.request(50, Category::Other)
            .priority(Priority::LOW)
            .label("low")
            .reserve_async(),
    );
    let mut normal = Polled::new(b.reserve_async(50, Category::Other, "normal"));
    let mut high = Polled::new(
        b.request(50, Category::Other)
            .priority(Priority::HIGH)
            .label("high")
            .reserve_async(),
    );
    let mut high2 = Polled::new(
        b.request(50, Category::Other)
            .priority(Priority::HIGH)
            .label("high2")
            .reserve_async(),
    );
    for p in [&mut low, &mut normal, &mut high, &mut high2] {
        p.expect_pending("all wait");
    }
    drop(hold);
    // 100 free: the two high ones, FIFO among themselves.
    let h = high.expect_ready("high");
    let h2 = high2.expect_ready("high2");
    assert_eq!((h.label(), h2.label()), ("high", "high2"));
    normal.expect_pending("normal");
    low.expect_pending("low");
    assert_eq!((normal.woken(), low.woken()), (0, 0));
    drop(h);
    assert_eq!((normal.woken(), low.woken()), (1, 0));
    let n = normal.expect_ready("normal");
    low.expect_pending("low");
    drop(h2);
    let l = low.expect_ready("low");
    drop((n, l));

    // Higher priorities overtake a queued lower one when they fit; equal priority does not.
    let hold = b.try_reserve(40, Category::Other, "hold").expect("fits");
    let mut low = Polled::new(
        b.request(70, Category::Other)
            .priority(Priority::LOW)
            .reserve_async(),
    );
    low.expect_pending("low");
    let n = b
        .try_reserve(10, Category::Other, "normal")
        .expect("normal overtakes low");
    let hi = b
        .request(40, Category::Other)
        .priority(Priority::HIGH)
        .try_reserve()
        .expect("high overtakes low");
    assert_eq!(b.available_bytes(), 10);
    assert!(matches!(
        b.request(1, Category::Other)
            .priority(Priority::LOW)
            .try_reserve(),
        Err(BudgetError::WouldBlock {
            n_waiting: 1,
            available_bytes: 10,
            ..
        })
    ));
    drop((n, hi, hold));
    assert_eq!(low.expect_ready("low").bytes(), 70);
}

#[test]
fn timeout_leaves_the_queue_and_lets_the_next_in() {
    let b = Budget::fixed(100);
    let hold = b.try_reserve(70, Category::Other, "hold").expect("fits");
    let b2 = b.clone();
    let t = std::thread::spawn(move || {
        b2.reserve(
            80,
            Category::Other,
            "slow",
            Some(Duration::from_millis(100)),
        )
    });
    // Queue a small one behind the big one: it is blocked by head-of-line.
    while b.snapshot().n_waiting < 1 {
        std::thread::yield_now();
    }
    let mut small = Polled::new(b.reserve_async(20, Category::Other, "small"));
    small.expect_pending("small behind the big one");
    match t.join().expect("no panic") {
        Err(BudgetError::Timeout {
            requested_bytes: 80,
            waited,
            available_bytes: 30,
        }) => {
            assert!(waited >= Duration::from_millis(100))
        }
        other => panic!("expected Timeout, got {other:?}"),
    }
    // The big one left the head: the small one was admitted and woken.
    assert_eq!(small.woken(), 1);
    let s = small.expect_ready("small");
    assert_eq!(b.used_bytes(), 90);
    drop((s, hold));
    assert_eq!(b.snapshot().n_waiting, 0);
}

#[test]
fn blocking_reserve_is_woken_by_release() {
    let mut rng = seeded_rng("blocking_reserve_is_woken_by_release");
    let total: u64 = rng.random_range(10..1000);
    let b = Budget::fixed(total);
    let hold = b.try_reserve(total, Category::Other, "hold").expect("fits");
    let want = rng.random_range(1..=total);
    let b2 = b.clone();
    let t = std::thread::spawn(move || {
        b2.reserve(want, Category::WorkingSet, "w", None)
            .map(|r| r.bytes())
    });
    while b.snapshot().n_waiting < 1 {
        std::thread::yield_now();
    }
    drop(hold);
    assert_eq!(t.join().expect("no panic").expect("admitted"), want);
    assert_eq!(b.used_bytes(), 0);
}

#[test]
fn cancelled_waiter_returns_bytes_granted_in_the_race() {
    let b = Budget::fixed(100);
    let hold = b.try_reserve(100, Category::Other, "hold").expect("fits");
    let mut w = Polled::new(b.reserve_async(40, Category::Pce, "w"));
    w.expect_pending("w");
    drop(hold); // grants 40 to w under the lock
    assert_eq!(b.used_bytes(), 40);
    assert_eq!(w.woken(), 1);
    drop(w); // never polled again: the grant goes back
    assert_eq!(b.used_bytes(), 0);
    assert_eq!(b.snapshot().used_in(Category::Pce), 0);
    assert_eq!(b.snapshot().n_waiting, 0);
}

#[test]
fn cancelled_head_lets_the_next_waiter_in() {
    let b = Budget::fixed(100);
    let hold = b.try_reserve(50, Category::Other, "hold").expect("fits");
    let mut big = Polled::new(b.reserve_async(80, Category::Other, "big"));
    let mut small = Polled::new(b.reserve_async(30, Category::Other, "small"));
    big.expect_pending("big");
    small.expect_pending("small");
    drop(big);
    assert_eq!(small.woken(), 1);
    let s = small.expect_ready("small");
    drop((s, hold));
}

#[test]
fn shrinking_the_total_fails_waiters_that_can_never_fit() {
    let b = Budget::fixed(100);
    let hold = b.try_reserve(100, Category::Other, "hold").expect("fits");
    let mut big = Polled::new(b.reserve_async(90, Category::Other, "big"));
    let mut small = Polled::new(b.reserve_async(10, Category::Other, "small"));
    big.expect_pending("big");
    small.expect_pending("small");
    b.set_total_bytes(50);
    assert!(matches!(
        big.poll(),
        Poll::Ready(Err(BudgetError::TooLarge {
            requested_bytes: 90,
            total_bytes: 50
        }))
    ));
    small.expect_pending("used 100 > total 50");
    drop(hold);
    assert_eq!(small.expect_ready("small").bytes(), 10);
}

/// A probe whose hard usage the test sets; counts readings.
struct FakeProbe {
    hard: AtomicU64,
    reads: AtomicUsize,
}
impl UsageProbe for FakeProbe {
    fn measure(&self) -> Result<MeasuredUsage, BudgetError> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        let hard = self.hard.load(Ordering::SeqCst);
        Ok(MeasuredUsage {
            scope: UsageScope::System,
            current_bytes: hard,
            hard_bytes: hard,
            reclaimable_bytes: 0,
            breakdown: Vec::new(),
            process: None,
        })
    }
}

fn drift_budget(
    total: u64,
    limit: u64,
    margin: u64,
    hard: u64,
    interval: Duration,
) -> (Budget, Arc<FakeProbe>) {
    decaying_drift_budget(total, limit, margin, hard, interval, Duration::ZERO)
}

/// [`drift_budget`] whose untracked estimate decays with `half_life`.
fn decaying_drift_budget(
    total: u64,
    limit: u64,
    margin: u64,
    hard: u64,
    interval: Duration,
    half_life: Duration,
) -> (Budget, Arc<FakeProbe>) {
    let probe = Arc::new(FakeProbe {
        hard: AtomicU64::new(hard),
        reads: AtomicUsize::new(0),
    });
    let b = Budget::new(BudgetConfig {
        name: "drift".into(),
        total_bytes: total,
        drift: Some(DriftConfig {
            limit_bytes: limit,
            safety_margin_bytes: margin,
            probe: probe.clone(),
            refresh_interval: interval,
            untracked_half_life: half_life,
        }),
    });
    (b, probe)
}

#[test]
fn drift_lowers_admission_to_real_headroom() {
    let mut rng = seeded_rng("drift_lowers_admission_to_real_headroom");
    let limit: u64 = rng.random_range(10_000..1_000_000);
    let margin = limit / 10;
    let total = limit - margin;
    let untracked = rng.random_range(1..total);
    let (b, probe) = drift_budget(total, limit, margin, untracked, Duration::from_secs(3600));
    let real = limit - untracked - margin;
    let s = b.snapshot();
    assert_eq!(s.cap_bytes, real);
    assert_eq!(s.measured_hard_bytes, Some(untracked));
    assert_eq!(s.drift_bytes, Some(untracked as i64));
    assert!(matches!(
        b.try_reserve(real + 1, Category::Other, "x"),
        Err(BudgetError::WouldBlock { .. })
    ));
    // Charged memory that the kernel also sees is not counted twice.
    let r = b
        .try_reserve(real, Category::Other, "x")
        .expect("fits the real headroom");
    probe.hard.store(untracked + real, Ordering::SeqCst);
    b.refresh_usage().expect("fake probe");
    assert_eq!(b.snapshot().cap_bytes, real);
    assert_eq!(b.snapshot().drift_bytes, Some(untracked as i64));
    drop(r);
    // The untracked memory goes away: the ceiling is the budget again.
    probe.hard.store(0, Ordering::SeqCst);
    b.refresh_usage().expect("fake probe");
    assert_eq!(b.snapshot().cap_bytes, total);
    assert_eq!(
        b.try_reserve(total, Category::Other, "all")
            .expect("fits")
            .bytes(),
        total
    );
}

#[test]
fn kernel_is_not_read_on_every_admission() {
    let (b, probe) = drift_budget(1000, 2000, 100, 0, Duration::from_secs(3600));
    let after_create = probe.reads.load(Ordering::SeqCst);
    for _ in 0..10_000 {
        let r = b.try_reserve(10, Category::Other, "x").expect("fits");
        drop(r);
    }
    // The interval (an hour) has not passed: no reading beyond the first.
    assert_eq!(probe.reads.load(Ordering::SeqCst), after_create);
    // Large admissions look at the clock every time, but read the kernel only when due.
    let (big, big_probe) = drift_budget(1 << 30, 2 << 30, 1 << 20, 0, Duration::from_secs(3600));
    let after_create = big_probe.reads.load(Ordering::SeqCst);
    for _ in 0..1_000 {
        drop(
            big.try_reserve(1 << 20, Category::Other, "x")
                .expect("fits"),
        );
    }
    assert_eq!(big_probe.reads.load(Ordering::SeqCst), after_create);

    let (b, probe) = drift_budget(1000, 2000, 100, 0, Duration::ZERO);
    let before = probe.reads.load(Ordering::SeqCst);
    for _ in 0..10_000 {
        drop(b.try_reserve(10, Category::Other, "x").expect("fits"));
    }
    let reads = probe.reads.load(Ordering::SeqCst) - before;
    // Even with a zero interval the clock is looked at once per 256 admissions.
    assert!(
        reads <= 10_000 / 256 + 1,
        "{reads} readings for 10000 admissions"
    );
    assert!(reads >= 1);
}

#[test]
fn a_large_admission_renews_a_stale_reading_first() {
    let mut rng = seeded_rng("a_large_admission_renews_a_stale_reading_first");
    const MIB: u64 = 1 << 20;
    let limit = rng.random_range(64..512) * MIB;
    let margin = 4 * MIB;
    let interval = Duration::from_millis(20);
    let (b, probe) = drift_budget(limit - margin, limit, margin, 0, interval);
    assert_eq!(b.snapshot().cap_bytes, limit - margin);
    // Memory no reservation covers grows while requests still fit the old ceiling.
    let untracked = limit - margin - rng.random_range(2..16) * MIB;
    probe.hard.store(untracked, Ordering::SeqCst);
    std::thread::sleep(interval * 2);
    let headroom = limit - margin - untracked;
    // Fits the stale ceiling, not the real one: refused, not admitted on the old reading.
    assert!(matches!(
        b.try_reserve(headroom + MIB, Category::WorkingSet, "large"),
        Err(BudgetError::WouldBlock { .. })
    ));
    assert_eq!(b.snapshot().cap_bytes, headroom);
    let r = b
        .try_reserve(headroom, Category::WorkingSet, "fits")
        .expect("fits the renewed ceiling");
    drop(r);
}

#[test]
fn untracked_memory_hidden_by_untouched_charges_still_lowers_the_ceiling() {
    let mut rng =
        seeded_rng("untracked_memory_hidden_by_untouched_charges_still_lowers_the_ceiling");
    const MIB: u64 = 1 << 20;
    let limit = rng.random_range(256..1024) * MIB;
    let margin = 8 * MIB;
    let untracked = rng.random_range(16..64) * MIB;
    let half_life = Duration::from_millis(500);
    let (b, probe) = decaying_drift_budget(
        limit - margin,
        limit,
        margin,
        untracked,
        Duration::ZERO,
        half_life,
    );
    assert_eq!(b.snapshot().untracked_bytes, untracked);
    // A working set charged at its peak but not yet touched: the kernel sees the untracked
    // memory and only part of the charge, so a reading shows no untracked memory at all.
    let ws = rng.random_range(2 * untracked / MIB..4 * untracked / MIB) * MIB;
    let r = b.try_reserve(ws, Category::WorkingSet, "ws").expect("fits");
    probe
        .hard
        .store(untracked + ws - untracked, Ordering::SeqCst);
    b.refresh_usage().expect("fake probe");
    let s = b.snapshot();
    assert_eq!(s.untracked_reading_bytes, 0);
    // The estimate keeps the earlier reading (decayed by less than half unless this
    // machine stalled for a half-life).
    assert!(s.untracked_bytes > untracked / 2, "{s:?}");
    assert!(s.cap_bytes < limit - margin - untracked / 2);
    // The working set is touched: untracked + ws is resident, and the ceiling never let
    // a second working set in beside it on the hidden reading.
    probe.hard.store(untracked + ws, Ordering::SeqCst);
    assert!(matches!(
        b.try_reserve(
            limit - margin - ws - untracked / 4,
            Category::WorkingSet,
            "second"
        ),
        Err(BudgetError::WouldBlock { .. })
    ));
    drop(r);
    // Untracked memory that is really gone stops counting after a few half-lives.
    probe.hard.store(0, Ordering::SeqCst);
    std::thread::sleep(half_life * 6);
    b.refresh_usage().expect("fake probe");
    let s = b.snapshot();
    assert!(s.untracked_bytes < untracked / 32, "{s:?}");
    assert_eq!(s.cap_bytes, limit - margin - s.untracked_bytes);
}

#[test]
fn a_settled_reading_replaces_the_decaying_estimate() {
    let mut rng = seeded_rng("a_settled_reading_replaces_the_decaying_estimate");
    const MIB: u64 = 1 << 20;
    let limit = rng.random_range(256..1024) * MIB;
    let margin = 8 * MIB;
    let high = rng.random_range(32..64) * MIB;
    let low = rng.random_range(1..16) * MIB;
    // A half-life far longer than the test: only a settled reading can drop the peak.
    let (b, probe) = decaying_drift_budget(
        limit - margin,
        limit,
        margin,
        high,
        Duration::ZERO,
        Duration::from_secs(3600),
    );
    let held = rng.random_range(1..8) * MIB;
    let r = b.try_reserve(held, Category::Other, "held").expect("fits");
    // The untracked memory falls: an ordinary reading keeps the earlier, larger one.
    probe.hard.store(held + low, Ordering::SeqCst);
    b.refresh_usage().expect("fake probe");
    let s = b.snapshot();
    assert_eq!(s.untracked_reading_bytes, low);
    assert!(s.untracked_bytes > high - MIB, "{s:?}");
    // A settled reading is taken as it is, and the ceiling follows it.
    b.refresh_settled().expect("fake probe");
    let s = b.snapshot();
    assert_eq!(s.untracked_bytes, low, "{s:?}");
    assert_eq!(s.cap_bytes, limit - margin - low);
    // Later ordinary readings decay from the settled one, not the old peak.
    b.refresh_usage().expect("fake probe");
    assert_eq!(b.snapshot().untracked_bytes, low);
    drop(r);
    // Without a drift check it is a no-op.
    let fixed = Budget::fixed(1000);
    fixed.refresh_settled().expect("no-op");
    assert_eq!(fixed.snapshot().cap_bytes, 1000);
}

#[test]
fn blocked_by_drift_waiter_is_admitted_when_the_kernel_frees() {
    let (b, probe) = drift_budget(1000, 1100, 100, 900, Duration::from_millis(10));
    assert_eq!(b.snapshot().cap_bytes, 100);
    let b2 = b.clone();
    let t = std::thread::spawn(move || {
        b2.reserve(500, Category::Other, "w", Some(Duration::from_secs(20)))
            .map(|r| r.bytes())
    });
    while b.snapshot().n_waiting < 1 {
        std::thread::yield_now();
    }
    probe.hard.store(0, Ordering::SeqCst);
    // No release happens: the waiter re-reads the kernel itself.
    assert_eq!(t.join().expect("no panic").expect("admitted"), 500);
}

#[test]
fn monitor_refreshes_for_async_waiters() {
    let (b, probe) = drift_budget(1000, 1100, 100, 900, Duration::from_millis(5));
    let mut w = Polled::new(b.reserve_async(500, Category::Other, "w"));
    w.expect_pending("blocked by drift");
    let _monitor = b.spawn_monitor(Duration::from_millis(5));
    probe.hard.store(0, Ordering::SeqCst);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while w.woken() == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "monitor never admitted the waiter"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(w.expect_ready("w").bytes(), 500);
}

#[test]
fn metrics_labels_do_not_break_without_a_recorder() {
    // No recorder installed: every metric call is a no-op and must not panic.
    memory_budget::metrics_names::describe();
    let b = Budget::fixed_named("m", 10);
    let r = b.try_reserve(10, Category::Device, "x").expect("fits");
    assert!(b.try_reserve(1, Category::Device, "y").is_err());
    drop(r);
    assert_eq!(b.used_bytes(), 0);
}
