//! Evictors (caches that give bytes back on demand) and a helper to track entry idleness.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use crate::budget::{unregister_evictor, Budget, Inner};

/// Default minimum idle time before a cache entry may be evicted.
pub const DEFAULT_MIN_IDLE: Duration = Duration::from_secs(5 * 60);

/// What bringing an evicted entry back costs, next to a budget's other caches. A budget asks
/// its evictors cheapest first (in registration order among equals), so a request is served
/// from what is cheapest to refill: say a device copy of data the host still holds
/// ([`RefillCost::Cheap`]) before parameters read again from a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum RefillCost {
    /// A copy from memory that stays (seconds at most).
    Cheap,
    /// The default.
    #[default]
    Normal,
    /// A read from disk or a recomputation.
    Costly,
}

/// A cache that can give bytes back. Called by the budget with no budget lock held, from the
/// thread (or task) of a request that does not fit.
///
/// Contract: only drop entries that nobody holds and that have been idle for at least the
/// cache's minimum idle time (see [`EntryUse`]); return the bytes actually released (by
/// dropping the entries' [`crate::Reservation`]s). May free more or less than asked.
pub trait Evictor: Send + Sync {
    /// Name used in metrics and logs.
    fn name(&self) -> &str;
    /// Frees at least `at_least_bytes` if it can; returns the bytes freed.
    fn evict(&self, at_least_bytes: u64) -> u64;
    /// What refilling an evicted entry costs (default [`RefillCost::Normal`]): the budget
    /// asks cheaper evictors first.
    fn refill_cost(&self) -> RefillCost {
        RefillCost::Normal
    }
    /// Bytes it could free if asked, now or once its idle rules allow (entries nobody
    /// holds), for callers judging whether a request can ever fit
    /// ([`Budget::reclaimable_bytes`](crate::Budget::reclaimable_bytes)). The default, 0,
    /// claims nothing: a caller then treats everything it holds as staying.
    fn reclaimable_bytes(&self) -> u64 {
        0
    }
}

/// Keeps an evictor registered; unregisters it when dropped.
#[must_use = "the evictor is unregistered when this is dropped"]
pub struct EvictorRegistration {
    inner: Weak<Inner>,
    id: u64,
}

impl EvictorRegistration {
    pub(crate) fn new(inner: Weak<Inner>, id: u64) -> Self {
        EvictorRegistration { inner, id }
    }
}

impl std::fmt::Debug for EvictorRegistration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EvictorRegistration")
            .field("id", &self.id)
            .finish()
    }
}

impl Drop for EvictorRegistration {
    fn drop(&mut self) {
        unregister_evictor(&self.inner, self.id);
    }
}

fn clock_origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

fn now_nanos() -> u64 {
    clock_origin().elapsed().as_nanos() as u64
}

/// Use tracking for one cache entry: who holds it and when it was last released. Lock-free;
/// shared through an `Arc` between the cache and the handles it gives out.
///
/// An entry is evictable when no [`EntryHold`] exists and the last release is at least the
/// minimum idle time ago. When the last hold is dropped, the budget (if attached) is told when
/// the entry will become evictable, so waiters re-run the evictors then.
#[derive(Debug)]
pub struct EntryUse {
    holders: AtomicUsize,
    last_used_nanos: AtomicU64,
    min_idle: Duration,
    budget: Option<Budget>,
}

impl EntryUse {
    /// A fresh, unheld entry, last used now.
    pub fn new(min_idle: Duration) -> Arc<EntryUse> {
        Arc::new(EntryUse {
            holders: AtomicUsize::new(0),
            last_used_nanos: AtomicU64::new(now_nanos()),
            min_idle,
            budget: None,
        })
    }

    /// Like [`EntryUse::new`], and notifies `budget` when the entry becomes evictable.
    pub fn with_budget(min_idle: Duration, budget: Budget) -> Arc<EntryUse> {
        Arc::new(EntryUse {
            holders: AtomicUsize::new(0),
            last_used_nanos: AtomicU64::new(now_nanos()),
            min_idle,
            budget: Some(budget),
        })
    }

    /// Marks the entry held until the returned guard is dropped.
    pub fn hold(self: &Arc<Self>) -> EntryHold {
        self.holders.fetch_add(1, Ordering::AcqRel);
        self.touch();
        EntryHold {
            entry: Arc::clone(self),
        }
    }

    /// Records a use now (restarts the idle clock).
    pub fn touch(&self) {
        self.last_used_nanos.store(now_nanos(), Ordering::Release);
    }

    /// Number of live holds.
    pub fn n_holders(&self) -> usize {
        self.holders.load(Ordering::Acquire)
    }

    /// Time since the last use (zero while held).
    pub fn idle_for(&self) -> Duration {
        if self.n_holders() > 0 {
            return Duration::ZERO;
        }
        let last = self.last_used_nanos.load(Ordering::Acquire);
        Duration::from_nanos(now_nanos().saturating_sub(last))
    }

    /// The configured minimum idle time.
    pub fn min_idle(&self) -> Duration {
        self.min_idle
    }

    /// True when nobody holds the entry and it has been idle long enough.
    pub fn is_evictable(&self) -> bool {
        self.n_holders() == 0 && self.idle_for() >= self.min_idle
    }
}

/// A hold on a cache entry (see [`EntryUse::hold`]); the entry is not evictable while any exists.
#[must_use = "the entry is released when the hold is dropped"]
#[derive(Debug)]
pub struct EntryHold {
    entry: Arc<EntryUse>,
}

impl Drop for EntryHold {
    fn drop(&mut self) {
        self.entry.touch();
        let was = self.entry.holders.fetch_sub(1, Ordering::AcqRel);
        if was == 1 {
            if let Some(b) = &self.entry.budget {
                if self.entry.min_idle.is_zero() {
                    b.notify_eligible();
                } else {
                    b.notify_eligible_at(Instant::now() + self.entry.min_idle);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_entries_are_not_evictable_and_idle_restarts_on_release() {
        let e = EntryUse::new(Duration::ZERO);
        assert!(e.is_evictable());
        let h1 = e.hold();
        let h2 = e.hold();
        assert_eq!(e.n_holders(), 2);
        assert!(!e.is_evictable());
        assert_eq!(e.idle_for(), Duration::ZERO);
        drop(h1);
        assert!(!e.is_evictable(), "one hold left");
        drop(h2);
        assert!(e.is_evictable());

        let slow = EntryUse::new(Duration::from_secs(3600));
        assert!(!slow.is_evictable(), "just used");
        assert_eq!(slow.min_idle(), Duration::from_secs(3600));
    }
}
