//! Eviction while waiting: evictors run with no budget lock held, never drop held or
//! too-recently-used entries, and waiters re-run them when an entry becomes eligible.

mod common;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use common::seeded_rng;
use memory_budget::{
    Budget, BudgetError, Category, EntryHold, EntryUse, Evictor, RefillCost, Reservation,
};
use rand::RngExt;

struct Entry {
    use_: Arc<EntryUse>,
    _res: Reservation,
}

/// A minimal cache: entries hold reservations; eviction drops evictable ones, oldest first.
struct TestCache {
    budget: Budget,
    entries: Mutex<Vec<Entry>>,
    calls: AtomicUsize,
    asked: Mutex<Vec<u64>>,
    freed: AtomicU64,
    cost: RefillCost,
}

impl TestCache {
    fn new(budget: &Budget) -> Arc<TestCache> {
        TestCache::with_cost(budget, RefillCost::Normal)
    }

    fn with_cost(budget: &Budget, cost: RefillCost) -> Arc<TestCache> {
        Arc::new(TestCache {
            budget: budget.clone(),
            entries: Mutex::new(Vec::new()),
            calls: AtomicUsize::new(0),
            asked: Mutex::new(Vec::new()),
            freed: AtomicU64::new(0),
            cost,
        })
    }

    fn insert(&self, bytes: u64, min_idle: Duration) -> Arc<EntryUse> {
        let res = self
            .budget
            .try_reserve(bytes, Category::Pce, "entry")
            .expect("fits while filling");
        let use_ = EntryUse::with_budget(min_idle, self.budget.clone());
        self.entries.lock().unwrap().push(Entry {
            use_: Arc::clone(&use_),
            _res: res,
        });
        use_
    }

    fn len(&self) -> usize {
        self.entries.lock().unwrap().len()
    }
}

impl Evictor for TestCache {
    fn name(&self) -> &str {
        "test-cache"
    }

    fn evict(&self, at_least_bytes: u64) -> u64 {
        // Would deadlock if the budget called us with its lock held (the watchdog catches it).
        let _ = self.budget.snapshot();
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.asked.lock().unwrap().push(at_least_bytes);
        let mut entries = self.entries.lock().unwrap();
        let mut freed = 0;
        let mut i = 0;
        while i < entries.len() && freed < at_least_bytes {
            if entries[i].use_.is_evictable() {
                let e = entries.remove(i);
                freed += e._res.bytes();
                drop(e); // releases its bytes (and may admit a waiter)
            } else {
                i += 1;
            }
        }
        self.freed.fetch_add(freed, Ordering::SeqCst);
        freed
    }

    fn refill_cost(&self) -> RefillCost {
        self.cost
    }

    fn reclaimable_bytes(&self) -> u64 {
        self.entries
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e.use_.n_holders() == 0)
            .map(|e| e._res.bytes())
            .sum()
    }
}

/// An evictor that frees nothing and claims nothing (the trait's default).
struct Silent;

impl Evictor for Silent {
    fn name(&self) -> &str {
        "silent"
    }

    fn evict(&self, _at_least_bytes: u64) -> u64 {
        0
    }
}

/// Runs `f` on a thread and fails (instead of hanging) if it does not finish in time.
fn with_watchdog<F: FnOnce() + Send + 'static>(secs: u64, f: F) {
    let (tx, rx) = mpsc::channel();
    let t = std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(()) => t.join().expect("test body"),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            t.join().expect("test body panicked");
        }
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("deadlock: test did not finish in {secs} s"),
    }
}

#[test]
fn eviction_frees_the_shortfall_while_waiting() {
    let mut rng = seeded_rng("eviction_frees_the_shortfall_while_waiting");
    let entry: u64 = rng.random_range(10..1000);
    let n_entries: u64 = rng.random_range(4..20);
    let want = rng.random_range(entry..entry * n_entries);
    with_watchdog(60, move || {
        let b = Budget::fixed(entry * n_entries);
        let cache = TestCache::new(&b);
        let _reg = b.register_evictor(cache.clone());
        for _ in 0..n_entries {
            cache.insert(entry, Duration::ZERO);
        }
        let r = b
            .reserve(
                want,
                Category::WorkingSet,
                "proof",
                Some(Duration::from_secs(30)),
            )
            .expect("evicted");
        assert_eq!(r.bytes(), want);
        let asked = cache.asked.lock().unwrap().clone();
        assert_eq!(asked[0], want, "first call asks for exactly the shortfall");
        let n_evicted = want.div_ceil(entry);
        assert_eq!(
            cache.len() as u64,
            n_entries - n_evicted,
            "evicts no more entries than needed"
        );
        assert_eq!(b.used_bytes(), (n_entries - n_evicted) * entry + want);
        assert!(b.used_bytes() <= b.total_bytes());
    });
}

#[test]
fn held_entries_are_never_evicted() {
    with_watchdog(60, || {
        let b = Budget::fixed(1000);
        let cache = TestCache::new(&b);
        let _reg = b.register_evictor(cache.clone());
        let holds: Vec<EntryHold> = (0..10)
            .map(|_| cache.insert(100, Duration::ZERO).hold())
            .collect();
        match b.reserve(
            100,
            Category::Transient,
            "x",
            Some(Duration::from_millis(50)),
        ) {
            Err(BudgetError::Timeout {
                requested_bytes: 100,
                available_bytes: 0,
                ..
            }) => {}
            other => panic!("expected Timeout, got {other:?}"),
        }
        assert!(cache.calls.load(Ordering::SeqCst) >= 1, "evictor was asked");
        assert_eq!(cache.len(), 10, "nothing held was evicted");
        assert_eq!(cache.freed.load(Ordering::SeqCst), 0);
        drop(holds);
    });
}

#[test]
fn waiter_rechecks_when_an_entry_becomes_eligible() {
    with_watchdog(60, || {
        let b = Budget::fixed(1000);
        let cache = TestCache::new(&b);
        let _reg = b.register_evictor(cache.clone());
        let holds: Vec<EntryHold> = (0..10)
            .map(|_| cache.insert(100, Duration::ZERO).hold())
            .collect();
        let b2 = b.clone();
        let start = Instant::now();
        let t = std::thread::spawn(move || {
            b2.reserve(
                250,
                Category::WorkingSet,
                "w",
                Some(Duration::from_secs(30)),
            )
        });
        while b.snapshot().n_waiting < 1 {
            std::thread::yield_now();
        }
        let calls_before = cache.calls.load(Ordering::SeqCst);
        // Nothing is released; entries only become evictable. The last hold on each entry
        // tells the budget, which wakes the waiter to run the evictors again.
        drop(holds);
        let r = t
            .join()
            .expect("no panic")
            .expect("admitted after entries became eligible");
        assert!(start.elapsed() < Duration::from_secs(20));
        assert_eq!(r.bytes(), 250);
        assert!(cache.calls.load(Ordering::SeqCst) > calls_before);
        assert_eq!(cache.len(), 7);
    });
}

#[test]
fn minimum_idle_time_is_honoured() {
    let min_idle = Duration::from_millis(300);
    with_watchdog(60, move || {
        let b = Budget::fixed(1000);
        let cache = TestCache::new(&b);
        let _reg = b.register_evictor(cache.clone());
        let uses: Vec<Arc<EntryUse>> = (0..10).map(|_| cache.insert(100, min_idle)).collect();
        let used_at = Instant::now();
        for u in &uses {
            drop(u.hold()); // a use just now; eligible after min_idle
        }
        let r = b
            .reserve(
                100,
                Category::WorkingSet,
                "w",
                Some(Duration::from_secs(30)),
            )
            .expect("admitted");
        let waited = used_at.elapsed();
        assert!(
            waited >= min_idle,
            "evicted after {waited:?}, before the {min_idle:?} minimum"
        );
        assert!(waited < Duration::from_secs(20), "woken late: {waited:?}");
        assert_eq!(cache.len(), 9);
        drop(r);
    });
}

#[test]
fn async_waiter_evicts_too() {
    with_watchdog(60, || {
        let b = Budget::fixed(500);
        let cache = TestCache::new(&b);
        let _reg = b.register_evictor(cache.clone());
        for _ in 0..5 {
            cache.insert(100, Duration::ZERO);
        }
        let r =
            pollster::block_on(b.reserve_async(300, Category::WorkingSet, "w")).expect("evicted");
        assert_eq!((r.bytes(), cache.len()), (300, 2));
    });
}

#[test]
fn zero_timeout_evicts_once_without_waiting() {
    with_watchdog(60, || {
        let b = Budget::fixed(500);
        let cache = TestCache::new(&b);
        let reg = b.register_evictor(cache.clone());
        for _ in 0..5 {
            cache.insert(100, Duration::ZERO);
        }
        let r = b
            .reserve(100, Category::Transient, "x", Some(Duration::ZERO))
            .expect("one entry evicted");
        assert_eq!(cache.len(), 4);
        drop(r);
        // Unregistered evictors are not asked.
        drop(reg);
        let _fill = b
            .try_reserve(100, Category::Transient, "fill")
            .expect("fits");
        let calls = cache.calls.load(Ordering::SeqCst);
        assert!(matches!(
            b.reserve(100, Category::Transient, "y", Some(Duration::ZERO)),
            Err(BudgetError::Timeout { .. })
        ));
        assert_eq!(cache.calls.load(Ordering::SeqCst), calls);
        assert_eq!(cache.len(), 4);
    });
}

#[test]
fn many_waiters_one_evicting_thread_at_a_time() {
    let mut rng = seeded_rng("many_waiters_one_evicting_thread_at_a_time");
    let n_threads: usize = rng.random_range(2..8);
    with_watchdog(60, move || {
        let b = Budget::fixed(100 * 64);
        let cache = TestCache::new(&b);
        let _reg = b.register_evictor(cache.clone());
        for _ in 0..64 {
            cache.insert(100, Duration::ZERO);
        }
        let threads: Vec<_> = (0..n_threads)
            .map(|_| {
                let b = b.clone();
                std::thread::spawn(move || {
                    b.reserve(
                        250,
                        Category::WorkingSet,
                        "w",
                        Some(Duration::from_secs(30)),
                    )
                })
            })
            .collect();
        let held: Vec<Reservation> = threads
            .into_iter()
            .map(|t| t.join().expect("no panic").expect("admitted"))
            .collect();
        assert_eq!(held.len(), n_threads);
        let freed = cache.freed.load(Ordering::SeqCst);
        assert!(freed >= 250 * n_threads as u64);
        assert!(b.used_bytes() <= b.total_bytes());
    });
}

#[test]
fn parked_waiter_learns_of_a_later_eligibility_deadline() {
    let min_idle = Duration::from_millis(200);
    with_watchdog(60, move || {
        let b = Budget::fixed(1000);
        let cache = TestCache::new(&b);
        let _reg = b.register_evictor(cache.clone());
        let holds: Vec<EntryHold> = (0..10)
            .map(|_| cache.insert(100, min_idle).hold())
            .collect();
        let b2 = b.clone();
        let t = std::thread::spawn(move || {
            b2.reserve(
                100,
                Category::WorkingSet,
                "w",
                Some(Duration::from_secs(30)),
            )
        });
        // The waiter parks with no deadline to wait for (everything is held) ...
        while b.snapshot().n_waiting < 1 {
            std::thread::yield_now();
        }
        std::thread::sleep(Duration::from_millis(20));
        // ... then the holds go: the entries become evictable in `min_idle`, and the waiter
        // must wake for that without any release or explicit notification.
        let released_at = Instant::now();
        drop(holds);
        let r = t.join().expect("no panic").expect("admitted");
        let waited = released_at.elapsed();
        assert!(
            waited >= min_idle,
            "evicted after {waited:?}, before the minimum idle time"
        );
        assert!(waited < Duration::from_secs(20), "woken late: {waited:?}");
        assert_eq!((r.bytes(), cache.len()), (100, 9));
    });
}

#[test]
fn evictors_are_asked_cheapest_to_refill_first() {
    with_watchdog(60, || {
        let b = Budget::fixed(600);
        // Registered costliest first: the order asked must not follow registration.
        let costly = TestCache::with_cost(&b, RefillCost::Costly);
        let normal = TestCache::new(&b);
        let cheap = TestCache::with_cost(&b, RefillCost::Cheap);
        let cheap_too = TestCache::with_cost(&b, RefillCost::Cheap);
        let _regs: Vec<_> = [&costly, &normal, &cheap, &cheap_too]
            .into_iter()
            .map(|c| b.register_evictor((*c).clone()))
            .collect();
        for c in [&costly, &normal, &cheap, &cheap_too] {
            c.insert(100, Duration::ZERO);
        }
        costly.insert(100, Duration::ZERO);
        normal.insert(100, Duration::ZERO);
        let lens = || [costly.len(), normal.len(), cheap.len(), cheap_too.len()];
        // 100 bytes: the first cheap cache (registration order among equals) alone.
        let r1 = b
            .reserve(100, Category::Transient, "a", Some(Duration::ZERO))
            .expect("a cheap entry evicted");
        assert_eq!(lens(), [2, 2, 0, 1]);
        assert_eq!(costly.calls.load(Ordering::SeqCst), 0);
        // 300 more: the other cheap entry, then the normal cache's two; the costly one last.
        let r2 = b
            .reserve(300, Category::Transient, "b", Some(Duration::ZERO))
            .expect("cheap and normal entries evicted");
        assert_eq!(lens(), [2, 0, 0, 0]);
        assert_eq!(costly.calls.load(Ordering::SeqCst), 0);
        // Only the costly cache is left to give.
        let _r3 = b
            .reserve(100, Category::Transient, "c", Some(Duration::ZERO))
            .expect("a costly entry evicted");
        assert_eq!(costly.len(), 1);
        drop((r1, r2));
    });
}

#[test]
fn reclaimable_bytes_count_unheld_entries_idle_or_not() {
    let mut rng = seeded_rng("reclaimable_bytes_count_unheld_entries_idle_or_not");
    let b = Budget::fixed(1 << 20);
    let a = TestCache::new(&b);
    let c = TestCache::new(&b);
    let _regs = [
        b.register_evictor(a.clone()),
        b.register_evictor(c.clone()),
        b.register_evictor(Arc::new(Silent)),
    ];
    assert_eq!(b.reclaimable_bytes(), 0);
    let (x, y, z) = (
        rng.random_range(1..1000u64),
        rng.random_range(1..1000u64),
        rng.random_range(1..1000u64),
    );
    // Unheld but not idle long enough: not evictable yet, yet it does not stay.
    let ux = a.insert(x, Duration::from_secs(3600));
    let _uy = a.insert(y, Duration::ZERO);
    let uz = c.insert(z, Duration::ZERO);
    assert_eq!(b.reclaimable_bytes(), x + y + z);
    let hz = uz.hold();
    let hx = ux.hold();
    assert_eq!(b.reclaimable_bytes(), y);
    drop((hx, hz));
    assert_eq!(b.reclaimable_bytes(), x + y + z);
    // Asking for all of it frees what is evictable now; the rest is still claimed.
    assert_eq!(c.evict(u64::MAX) + a.evict(u64::MAX), y + z);
    assert_eq!(b.reclaimable_bytes(), x);
    assert_eq!(b.used_bytes(), x);
}
