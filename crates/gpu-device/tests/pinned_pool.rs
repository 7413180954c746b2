//! The pinned staging pool's logic on a fake allocator (no GPU): charging before
//! allocating, reuse by size class, eviction of idle buffers only, refusal without
//! allocation, waiting for in-flight copies before reuse or free, and drop order.
//! Sizes are random (seed printed; `PINION_SEED` replays).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use gpu_device::{size_class, GpuError, PinnedPool, PoolError, StagingAllocator};
use memory_budget::{Budget, Category, Reservation};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

fn seed() -> u64 {
    let seed = std::env::var("PINION_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    eprintln!("seed = {seed}");
    seed
}

/// What happened to fake buffers, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Event {
    Alloc { id: u64, len: usize, charged: u64 },
    Wait { id: u64, had_copy: bool },
    Free { id: u64, pending_copy: bool },
}

#[derive(Default)]
struct Log {
    events: Mutex<Vec<Event>>,
}

impl Log {
    fn push(&self, e: Event) {
        self.events.lock().unwrap().push(e);
    }
    fn take(&self) -> Vec<Event> {
        std::mem::take(&mut *self.events.lock().unwrap())
    }
}

/// A fake buffer: a `copy_in_flight` flag stands for an asynchronous copy not yet done.
struct FakeBuffer {
    id: u64,
    data: Vec<u64>,
    copy_in_flight: bool,
    log: Arc<Log>,
    _charge: Reservation,
}

impl Drop for FakeBuffer {
    fn drop(&mut self) {
        self.log.push(Event::Free {
            id: self.id,
            pending_copy: self.copy_in_flight,
        });
    }
}

struct FakeAlloc {
    next: AtomicU64,
    log: Arc<Log>,
    fail: bool,
}

impl StagingAllocator for FakeAlloc {
    type Buffer = FakeBuffer;
    const ELEMENT_BYTES: u64 = 8;

    fn allocate(&self, len: usize, charge: Reservation) -> Result<FakeBuffer, GpuError> {
        if self.fail {
            return Err(GpuError::OutOfMemory {
                requested_bytes: charge.bytes(),
                free_bytes: 0,
            });
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        assert_eq!(charge.category(), Category::PinnedPool);
        self.log.push(Event::Alloc {
            id,
            len,
            charged: charge.bytes(),
        });
        Ok(FakeBuffer {
            id,
            data: vec![0; len],
            copy_in_flight: false,
            log: self.log.clone(),
            _charge: charge,
        })
    }

    fn capacity(buffer: &FakeBuffer) -> usize {
        buffer.data.len()
    }

    fn copies_done(&self, buffer: &FakeBuffer) -> bool {
        !buffer.copy_in_flight
    }

    fn wait_idle(&self, buffer: &mut FakeBuffer) -> Result<(), GpuError> {
        self.log.push(Event::Wait {
            id: buffer.id,
            had_copy: buffer.copy_in_flight,
        });
        buffer.copy_in_flight = false;
        Ok(())
    }
}

fn pool(budget: &Budget) -> (PinnedPool<FakeAlloc>, Arc<Log>) {
    let log = Arc::new(Log::default());
    let alloc = FakeAlloc {
        next: AtomicU64::new(0),
        log: log.clone(),
        fail: false,
    };
    (
        PinnedPool::with_allocator(alloc, budget.clone(), "test staging"),
        log,
    )
}

fn pinned_bytes(budget: &Budget) -> u64 {
    budget.snapshot().used_in(Category::PinnedPool)
}

#[test]
fn charges_before_allocating_and_keeps_idle_buffers_charged() {
    let mut rng = StdRng::seed_from_u64(seed());
    let budget = Budget::fixed(1 << 30);
    let (pool, log) = pool(&budget);
    let len = rng.random_range(1..100_000usize);
    let class = size_class(len);
    let g = pool.acquire(len).unwrap();
    assert_eq!((g.len(), g.capacity()), (len, class));
    assert_eq!(g.data.len(), class);
    let bytes = 8 * class as u64;
    assert_eq!(
        log.take(),
        vec![Event::Alloc {
            id: 0,
            len: class,
            charged: bytes
        }]
    );
    assert_eq!(pinned_bytes(&budget), bytes);
    drop(g);
    // Idle, still charged: it has not been returned to the OS.
    assert_eq!(pinned_bytes(&budget), bytes);
    let s = pool.stats();
    assert_eq!((s.charged_bytes, s.idle_bytes), (bytes, bytes));
    assert!(log.take().is_empty(), "returning frees nothing");
    drop(pool);
    assert_eq!(
        pinned_bytes(&budget),
        0,
        "dropping the pool frees idle buffers"
    );
    assert_eq!(
        log.take(),
        vec![
            Event::Wait {
                id: 0,
                had_copy: false
            },
            Event::Free {
                id: 0,
                pending_copy: false
            }
        ]
    );
}

#[test]
fn reuses_only_the_same_class_and_waits_for_copies_first() {
    let mut rng = StdRng::seed_from_u64(seed());
    let budget = Budget::fixed(1 << 30);
    let (pool, log) = pool(&budget);
    let len = rng.random_range(9..50_000usize);
    let mut g = pool.acquire(len).unwrap();
    let class = g.capacity();
    g.copy_in_flight = true; // a copy from it was queued, then the guard dropped
    drop(g);
    log.take();
    // Another length of the same class gets the same buffer, after the wait.
    let same_class = rng.random_range(class / 2 + 1..=class);
    let same_class = if size_class(same_class) == class {
        same_class
    } else {
        class
    };
    let g = pool.acquire(same_class).unwrap();
    assert!(
        !g.copy_in_flight,
        "handed out with its copy still in flight"
    );
    assert_eq!(
        log.take(),
        vec![Event::Wait {
            id: 0,
            had_copy: true
        }]
    );
    assert_eq!(pool.stats().n_reuses, 1);
    // A different class is a new allocation, not the idle one.
    drop(g);
    let other = pool.acquire(class + 1).unwrap();
    assert_ne!(other.capacity(), class);
    assert!(matches!(log.take()[..], [Event::Alloc { id: 1, .. }]));
    assert_eq!(pool.stats().n_allocations, 2);
    assert_eq!(pinned_bytes(&budget), 8 * (class + other.capacity()) as u64);
}

#[test]
fn eviction_frees_idle_buffers_only_and_waits_for_their_copies() {
    let budget = Budget::fixed(1 << 20);
    let (pool, log) = pool(&budget);
    // Three buffers of 256 KiB: two handed out, one idle with a copy in flight.
    let held_a = pool.acquire(1 << 15).unwrap();
    let held_b = pool.acquire(1 << 15).unwrap();
    let mut idle = pool.acquire(1 << 15).unwrap();
    idle.copy_in_flight = true;
    drop(idle);
    log.take();
    assert_eq!(pinned_bytes(&budget), 3 << 18);
    // 512 KiB elsewhere does not fit in the 256 KiB left: the idle buffer goes.
    let other = budget
        .reserve(
            512 << 10,
            Category::WorkingSet,
            "elsewhere",
            Some(std::time::Duration::ZERO),
        )
        .unwrap();
    assert_eq!(
        log.take(),
        vec![
            Event::Wait {
                id: 2,
                had_copy: true
            },
            Event::Free {
                id: 2,
                pending_copy: false
            }
        ]
    );
    assert_eq!(pinned_bytes(&budget), 2 << 18);
    // Nothing idle is left: a further request cannot take the held buffers.
    let refused = budget.reserve(
        300 << 10,
        Category::WorkingSet,
        "more",
        Some(std::time::Duration::ZERO),
    );
    assert!(refused.is_err());
    assert!(log.take().is_empty(), "held buffers are never evicted");
    assert_eq!((held_a.capacity(), held_b.capacity()), (1 << 15, 1 << 15));
    drop(other);
    drop((held_a, held_b));
    assert_eq!(pool.stats().idle_bytes, 2 << 18);
}

#[test]
fn refusal_is_typed_and_allocates_nothing() {
    let budget = Budget::fixed(1 << 20);
    let (pool, log) = pool(&budget);
    let held = pool.acquire(100_000).unwrap(); // class 1.75 * 2^16: 896 KiB
    log.take();
    match pool.acquire(1 << 16) {
        Err(PoolError::Budget {
            requested_bytes,
            class_len,
            ..
        }) => assert_eq!((requested_bytes, class_len), (8 << 16, 1 << 16)),
        other => panic!("expected a budget refusal, got {other:?}"),
    }
    assert!(log.take().is_empty(), "no allocation after a refusal");
    assert_eq!(pinned_bytes(&budget), 8 * held.capacity() as u64);
    // Larger than the whole budget: refused the same way.
    assert!(matches!(
        pool.acquire(1 << 30),
        Err(PoolError::Budget { .. })
    ));
    // The pool's own idle buffers of another class make room for a miss.
    drop(held);
    let g = pool.acquire(1 << 16).unwrap();
    let events = log.take();
    assert!(
        matches!(
            events[..],
            [
                Event::Wait { id: 0, .. },
                Event::Free { id: 0, .. },
                Event::Alloc { id: 1, .. }
            ]
        ),
        "{events:?}"
    );
    assert_eq!(pinned_bytes(&budget), 8 * g.capacity() as u64);

    // An allocator failure returns the charge.
    let failing = PinnedPool::with_allocator(
        FakeAlloc {
            next: AtomicU64::new(0),
            log: Arc::new(Log::default()),
            fail: true,
        },
        budget.clone(),
        "failing",
    );
    assert!(matches!(
        failing.acquire(10),
        Err(PoolError::Gpu(GpuError::OutOfMemory { .. }))
    ));
    assert_eq!(pinned_bytes(&budget), 8 * g.capacity() as u64);
}

#[test]
fn buffers_outlive_the_pool_and_are_freed_when_returned() {
    let mut rng = StdRng::seed_from_u64(seed());
    let budget = Budget::fixed(1 << 30);
    let (pool, log) = pool(&budget);
    let mut lens: Vec<usize> = (0..6).map(|_| rng.random_range(1..20_000)).collect();
    lens.sort();
    let guards: Vec<_> = lens.iter().map(|&n| pool.acquire(n).unwrap()).collect();
    let held: u64 = guards.iter().map(|g| g.charged_bytes()).sum();
    assert_eq!(pool.stats().peak_charged_bytes, held);
    let mut guards = guards.into_iter();
    let mut first = guards.next().unwrap();
    first.copy_in_flight = true;
    drop(first); // idle when the pool goes
    drop(pool);
    assert_eq!(
        pinned_bytes(&budget),
        held - 8 * size_class(lens[0]) as u64,
        "the idle buffer is freed with the pool, held ones stay charged"
    );
    let events = log.take();
    assert!(events.contains(&Event::Free {
        id: 0,
        pending_copy: false
    }));
    assert!(!events
        .iter()
        .any(|e| matches!(e, Event::Free { id, .. } if *id != 0)));
    drop(guards);
    assert_eq!(pinned_bytes(&budget), 0, "returned after the pool: freed");
    let frees = log
        .take()
        .into_iter()
        .filter(|e| matches!(e, Event::Free { .. }))
        .count();
    assert_eq!(frees, 5);
}

#[test]
fn trim_and_peak() {
    let budget = Budget::fixed(1 << 30);
    let (pool, _log) = pool(&budget);
    let a = pool.acquire(1 << 10).unwrap();
    let b = pool.acquire(1 << 12).unwrap();
    drop((a, b));
    assert_eq!(pool.stats().peak_charged_bytes, 8 * (5 << 10));
    assert_eq!(
        pool.trim(8 << 12),
        8 << 10,
        "oldest idle first, down to the keep"
    );
    assert_eq!(pool.charged_bytes(), 8 << 12);
    pool.reset_peak();
    assert_eq!(pool.stats().peak_charged_bytes, 8 << 12);
    assert_eq!(pool.trim(0), 8 << 12);
    assert_eq!(pinned_bytes(&budget), 0);
    assert_eq!(pool.stats().n_frees, 2);
}

#[test]
fn prefers_an_idle_buffer_whose_copies_are_done() {
    let budget = Budget::fixed(1 << 30);
    let (pool, log) = pool(&budget);
    let mut busy = pool.acquire(1000).unwrap();
    let done = pool.acquire(1000).unwrap();
    busy.copy_in_flight = true;
    drop(busy); // idle first, copy pending
    drop(done); // idle second, nothing pending
    log.take();
    let g = pool.acquire(1000).unwrap();
    assert!(!g.copy_in_flight);
    assert_eq!(
        log.take(),
        vec![Event::Wait {
            id: 1,
            had_copy: false
        }],
        "the finished buffer is taken, the busy one left alone"
    );
    // With only the busy one left, it is taken after waiting.
    let g2 = pool.acquire(1000).unwrap();
    assert!(!g2.copy_in_flight);
    assert_eq!(
        log.take(),
        vec![Event::Wait {
            id: 0,
            had_copy: true
        }]
    );
    assert_eq!(pool.stats().n_allocations, 2);
}

/// `acquire_from` pays a new buffer from the caller's reservation (no second request, so
/// it works in a full budget), gives the caller's bytes back when it reuses an idle
/// buffer, and asks the budget itself when the reservation is short or of another budget.
#[test]
fn acquire_from_takes_the_bytes_from_the_callers_reservation() {
    let mut rng = StdRng::seed_from_u64(seed());
    let len = rng.random_range(1..50_000usize);
    let bytes = 8 * size_class(len) as u64;
    let budget = Budget::fixed(2 * bytes);
    let (pool, _log) = pool(&budget);
    // The caller holds the whole budget: a plain acquire is refused, acquire_from is not.
    let mut admitted = budget
        .try_reserve(2 * bytes, Category::WorkingSet, "admitted")
        .unwrap();
    assert!(matches!(pool.acquire(len), Err(PoolError::Budget { .. })));
    let g = pool.acquire_from(len, &mut admitted).unwrap();
    assert_eq!(
        admitted.bytes(),
        bytes,
        "the buffer's bytes moved to the pool"
    );
    assert_eq!(pinned_bytes(&budget), bytes);
    assert_eq!(budget.used_bytes(), 2 * bytes, "moved, not charged twice");
    drop(g);
    // Reuse: the idle buffer is charged already, so the caller's bytes go back.
    let g = pool.acquire_from(len, &mut admitted).unwrap();
    assert_eq!(admitted.bytes(), 0);
    assert_eq!(budget.used_bytes(), bytes);
    drop(g);
    // A reservation of another budget is not split: the pool asks its own budget.
    let other = Budget::fixed(1 << 30);
    let mut foreign = other
        .try_reserve(bytes, Category::WorkingSet, "foreign")
        .unwrap();
    let a = pool.acquire_from(len, &mut foreign).unwrap();
    let b = pool.acquire_from(len, &mut foreign).unwrap();
    assert_eq!(foreign.bytes(), bytes, "untouched");
    assert_eq!(pinned_bytes(&budget), 2 * bytes);
    drop((a, b, pool));
    assert_eq!(budget.used_bytes(), 0);
}

#[test]
fn prewarm_pins_ahead_within_the_budget_and_evicts_nothing() {
    let mut rng = StdRng::seed_from_u64(seed());
    let len = rng.random_range(9..50_000usize);
    let bytes = 8 * size_class(len) as u64;
    // Room for four buffers, one of them held by another pool's idle buffer (an
    // evictor the prewarm must not run).
    let budget = Budget::fixed(4 * bytes);
    let (other, other_log) = pool(&budget);
    let (pool, log) = pool(&budget);
    drop(other.acquire(len).unwrap());
    other_log.take();
    assert_eq!(pool.prewarm(len, 2).unwrap(), 2);
    let events = log.take();
    assert_eq!(events.len(), 2, "{events:?}");
    for e in &events {
        assert!(
            matches!(e, Event::Alloc { len: l, charged, .. } if *l == size_class(len) && *charged == bytes),
            "{e:?}"
        );
    }
    let s = pool.stats();
    assert_eq!(
        (s.charged_bytes, s.idle_bytes, s.n_allocations),
        (2 * bytes, 2 * bytes, 2)
    );
    assert_eq!(pinned_bytes(&budget), 3 * bytes);
    // Already there: nothing new.
    assert_eq!(pool.prewarm(len, 2).unwrap(), 2);
    assert_eq!(pool.prewarm(len, 1).unwrap(), 1);
    assert!(log.take().is_empty());
    // More than fits: stops at the budget, evicting nothing, no error.
    assert_eq!(pool.prewarm(len, 5).unwrap(), 3);
    assert_eq!(log.take().len(), 1);
    assert!(
        other_log.take().is_empty(),
        "the other pool's idle buffer stayed"
    );
    assert_eq!(other.stats().idle_bytes, bytes);
    // The prewarmed buffers serve requests of their class: reuses, and a caller's
    // reservation gets its bytes back.
    let g1 = pool.acquire(len).unwrap();
    drop(other);
    let mut admitted = budget
        .try_reserve(bytes, Category::WorkingSet, "admitted")
        .unwrap();
    let g2 = pool.acquire_from(len, &mut admitted).unwrap();
    assert_eq!(admitted.bytes(), 0);
    let s = pool.stats();
    assert_eq!((s.n_allocations, s.n_reuses), (3, 2));
    // Idle buffers of another class do not count: a small class is pinned anew.
    let small = rng.random_range(1..=8usize);
    log.take();
    assert_eq!(pool.prewarm(small, 1).unwrap(), 1);
    assert!(matches!(log.take()[..], [Event::Alloc { len: l, .. }] if l == size_class(small)),);
    drop((g1, g2, pool));
    assert_eq!(budget.used_bytes(), 0);
}
