//! The budget itself: admission, reservations, waiters, eviction.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;
use std::time::{Duration, Instant};

use crate::error::BudgetError;
use crate::evict::{Evictor, EvictorRegistration};
use crate::metrics_names::BudgetMetrics;
use crate::usage::UsageProbe;

/// What a reservation is for, so usage can be broken down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Category {
    /// Structured reference string (parameter) bases.
    Srs,
    /// Pre-compiled constraint systems.
    Pce,
    /// Per-proof working set (a/b/c vectors, witness).
    WorkingSet,
    /// Pinned (page-locked) host buffer pool.
    PinnedPool,
    /// Short-lived scratch.
    Transient,
    /// Device (VRAM) allocations.
    Device,
    /// Anything else.
    Other,
}

impl Category {
    /// Every category, in index order.
    pub const ALL: [Category; 7] = [
        Category::Srs,
        Category::Pce,
        Category::WorkingSet,
        Category::PinnedPool,
        Category::Transient,
        Category::Device,
        Category::Other,
    ];
    /// Number of categories.
    pub const N: usize = Self::ALL.len();

    /// Dense index in `0..Category::N`.
    pub fn index(self) -> usize {
        self as usize
    }

    /// Short lowercase name (used as a metrics label).
    pub fn as_str(self) -> &'static str {
        match self {
            Category::Srs => "srs",
            Category::Pce => "pce",
            Category::WorkingSet => "working_set",
            Category::PinnedPool => "pinned_pool",
            Category::Transient => "transient",
            Category::Device => "device",
            Category::Other => "other",
        }
    }
}

impl std::fmt::Display for Category {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Admission priority: higher is admitted first; FIFO within one priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Priority(u8);

impl Priority {
    /// Background work (prefetch, cache warm-up).
    pub const LOW: Priority = Priority(64);
    /// The default.
    pub const NORMAL: Priority = Priority(128);
    /// Work that others wait on.
    pub const HIGH: Priority = Priority(192);

    /// A priority from its raw level (0 lowest, 255 highest).
    pub const fn new(level: u8) -> Priority {
        Priority(level)
    }

    /// The raw level.
    pub const fn level(self) -> u8 {
        self.0
    }
}

impl Default for Priority {
    fn default() -> Self {
        Priority::NORMAL
    }
}

/// How a budget is built (see [`Budget::new`]).
#[derive(Debug, Clone)]
pub struct BudgetConfig {
    /// Name used in metrics labels and errors (`host`, `gpu0`, ...).
    pub name: String,
    /// Bytes the budget hands out.
    pub total_bytes: u64,
    /// Drift check: the limit the kernel enforces and the margin kept below it. `None` for
    /// budgets the kernel does not police (fixed test budgets, VRAM).
    pub drift: Option<DriftConfig>,
}

/// Settings for the drift check against what the kernel measures.
#[derive(Clone)]
pub struct DriftConfig {
    /// The limit the kernel enforces (bytes).
    pub limit_bytes: u64,
    /// Headroom kept below the limit (bytes).
    pub safety_margin_bytes: u64,
    /// Where measurements come from.
    pub probe: Arc<dyn UsageProbe>,
    /// Minimum time between two kernel reads on the admission path.
    pub refresh_interval: Duration,
    /// Half-life of the untracked estimate. A reading shows `hard − charged`, which
    /// understates untracked memory whenever reservations are charged before they are
    /// touched (a working set charged at its peak): the ceiling therefore keeps the largest
    /// recent reading, decaying by half every `untracked_half_life`, unless a new reading
    /// shows more. `Duration::ZERO` uses each reading as it is.
    pub untracked_half_life: Duration,
}

/// Default [`DriftConfig::untracked_half_life`].
pub const DEFAULT_UNTRACKED_HALF_LIFE: Duration = Duration::from_secs(60);

impl std::fmt::Debug for DriftConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DriftConfig")
            .field("limit_bytes", &self.limit_bytes)
            .field("safety_margin_bytes", &self.safety_margin_bytes)
            .field("refresh_interval", &self.refresh_interval)
            .field("untracked_half_life", &self.untracked_half_life)
            .finish_non_exhaustive()
    }
}

/// `bytes` after `elapsed` of halving every `half_life` (zero half-life: gone at once).
fn decayed(bytes: u64, elapsed: Duration, half_life: Duration) -> u64 {
    if half_life.is_zero() || bytes == 0 {
        return 0;
    }
    let halvings = elapsed.as_secs_f64() / half_life.as_secs_f64();
    if halvings >= 64.0 {
        return 0;
    }
    (bytes as f64 * (-halvings).exp2()) as u64
}

/// Waiter outcome codes (stored in an `AtomicU8` shared by the queue and the waiting future).
const PENDING: u8 = 0;
const GRANTED: u8 = 1;
const TOO_LARGE: u8 = 2;

/// How many small admissions pass between two looks at the clock for a drift refresh; keeps
/// the clock read (and the rare kernel read) off the common path.
const OPS_PER_CLOCK_CHECK: u32 = 256;

/// Admissions of at least this many bytes look at the clock every time, and a drift reading
/// older than the refresh interval is renewed *before* they are admitted: memory no
/// reservation covers (threads starting, a caller's buffers) may have grown since, and a large
/// admission on a stale ceiling is how a process crosses its cgroup limit.
pub(crate) const LARGE_ADMISSION_BYTES: u64 = 1 << 20;

/// Most eligibility deadlines remembered at once.
const MAX_DEADLINES: usize = 4096;

struct Waiter {
    bytes: u64,
    category: Category,
    outcome: Arc<AtomicU8>,
    waker: Option<Waker>,
}

type WaitKey = (std::cmp::Reverse<u8>, u64);

pub(crate) struct State {
    total: u64,
    /// Admission ceiling: `min(total, real ceiling from the drift check)`.
    cap: u64,
    used: u64,
    by_category: [u64; Category::N],
    /// High-water marks since creation or [`Budget::reset_peaks`].
    peak_used: u64,
    peak_by_category: [u64; Category::N],
    waiters: BTreeMap<WaitKey, Waiter>,
    waiting_bytes: u64,
    next_seq: u64,
    evicting: bool,
    evict_again: bool,
    eligible_epoch: u64,
    /// When cache entries become evictable (earliest first), bounded by `MAX_DEADLINES`.
    eligible_at: std::collections::BTreeSet<Instant>,
    ops_since_clock: u32,
    // drift check
    /// The untracked estimate the ceiling uses (see `DriftConfig::untracked_half_life`).
    untracked_bytes: u64,
    /// `hard − charged` at the last reading.
    untracked_reading_bytes: u64,
    /// When `untracked_bytes` was last set.
    untracked_at: Option<Instant>,
    measured_hard_bytes: Option<u64>,
    measured_own_hard_bytes: Option<u64>,
    charged_at_measure: u64,
    next_refresh: Option<Instant>,
}

impl State {
    fn available(&self) -> u64 {
        self.cap.saturating_sub(self.used)
    }

    /// True when a new request of `priority` may be admitted ahead of the queue.
    fn queue_allows(&self, priority: Priority) -> bool {
        match self.waiters.first_key_value() {
            None => true,
            Some(((std::cmp::Reverse(p), _), _)) => *p < priority.0,
        }
    }

    fn n_waiting_at_or_above(&self, priority: Priority) -> usize {
        self.waiters
            .keys()
            .take_while(|(std::cmp::Reverse(p), _)| *p >= priority.0)
            .count()
    }

    fn charge(&mut self, bytes: u64, category: Category) {
        self.used += bytes;
        self.by_category[category.index()] += bytes;
        self.note_peaks(category);
    }

    fn note_peaks(&mut self, category: Category) {
        let i = category.index();
        self.peak_used = self.peak_used.max(self.used);
        self.peak_by_category[i] = self.peak_by_category[i].max(self.by_category[i]);
    }

    fn uncharge(&mut self, bytes: u64, category: Category) {
        self.used -= bytes;
        self.by_category[category.index()] -= bytes;
    }

    /// Admits waiters from the head while they fit. Strict head-of-line: the first waiter that
    /// does not fit stops the scan, so a large request is never overtaken by smaller ones.
    fn grant_waiters(&mut self, wake: &mut Vec<Waker>) {
        while let Some(entry) = self.waiters.first_entry() {
            let w = entry.get();
            let outcome = if w.bytes > self.total {
                TOO_LARGE
            } else if self.used + w.bytes <= self.cap {
                GRANTED
            } else {
                break;
            };
            let mut w = entry.remove();
            self.waiting_bytes -= w.bytes;
            if outcome == GRANTED {
                self.charge(w.bytes, w.category);
            }
            w.outcome.store(outcome, Ordering::Release);
            if let Some(k) = w.waker.take() {
                wake.push(k);
            }
        }
    }

    /// Records an eligibility deadline; true when it is the new earliest one.
    fn add_deadline(&mut self, at: Instant) -> bool {
        let earliest = self.eligible_at.first().is_none_or(|t| at < *t);
        self.eligible_at.insert(at);
        if self.eligible_at.len() > MAX_DEADLINES {
            // Keep the earliest; a dropped late deadline is found by a later eviction run
            // (every release, notification or earlier deadline re-runs the evictors).
            self.eligible_at.pop_last();
        }
        earliest
    }

    /// Removes deadlines that have passed; when any did, bumps the eligibility epoch so waiters
    /// re-run the evictors. Returns whether any did.
    fn fire_due(&mut self, now: Instant) -> bool {
        let mut fired = false;
        while self.eligible_at.first().is_some_and(|t| *t <= now) {
            self.eligible_at.pop_first();
            fired = true;
        }
        if fired {
            self.eligible_epoch += 1;
        }
        fired
    }

    fn recompute_cap(&mut self, drift: Option<&DriftConfig>) {
        self.cap = match drift {
            None => self.total,
            Some(d) => {
                let real = d
                    .limit_bytes
                    .saturating_sub(d.safety_margin_bytes)
                    .saturating_sub(self.untracked_bytes);
                self.total.min(real)
            }
        };
    }
}

struct RegisteredEvictor {
    id: u64,
    evictor: Arc<dyn Evictor>,
    metrics: crate::metrics_names::EvictorMetrics,
}

pub(crate) struct Inner {
    name: String,
    state: Mutex<State>,
    evictors: Mutex<Vec<RegisteredEvictor>>,
    next_evictor_id: AtomicU64,
    drift: Option<DriftConfig>,
    metrics: BudgetMetrics,
    detection: Option<crate::detect::Detection>,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the counters half-updated (every
        // critical section is a few arithmetic steps), so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn publish(&self, st: &State) {
        self.metrics
            .publish(st.used, st.cap, &st.by_category, st.waiters.len());
    }

    #[inline]
    fn publish_one(&self, st: &State, category: Category) {
        self.metrics
            .publish_one(st.used, category, st.by_category[category.index()]);
    }

    fn release(&self, bytes: u64, category: Category) {
        if bytes == 0 {
            return;
        }
        let mut wake = Vec::new();
        {
            let mut st = self.lock();
            st.uncharge(bytes, category);
            if st.waiters.is_empty() {
                self.publish_one(&st, category);
            } else {
                st.grant_waiters(&mut wake);
                self.publish(&st);
            }
        }
        // Wake after the lock is released so woken threads do not block on it at once.
        for w in wake {
            w.wake();
        }
    }

    /// Reads the kernel (outside the lock) when the last reading is older than the refresh
    /// interval, or unconditionally with `force`.
    fn refresh(&self, force: bool) -> Result<(), BudgetError> {
        self.read_kernel(force, false)
    }

    /// [`Inner::refresh`]; `settled` replaces the untracked estimate with this reading
    /// instead of keeping a larger decayed one (see [`Budget::refresh_settled`]).
    fn read_kernel(&self, force: bool, settled: bool) -> Result<(), BudgetError> {
        let Some(drift) = &self.drift else {
            return Ok(());
        };
        let now = Instant::now();
        if !force {
            let mut st = self.lock();
            if st.next_refresh.is_some_and(|t| now < t) {
                return Ok(());
            }
            // Claim this reading so concurrent callers do not all read the kernel.
            st.next_refresh = Some(now + drift.refresh_interval);
        }
        let measured = drift.probe.measure();
        let mut wake = Vec::new();
        {
            let mut st = self.lock();
            st.next_refresh = Some(now + drift.refresh_interval);
            match &measured {
                Ok(m) => {
                    st.measured_hard_bytes = Some(m.hard_bytes);
                    st.measured_own_hard_bytes = Some(m.own_hard_bytes());
                    st.charged_at_measure = st.used;
                    // Memory the kernel charges that no reservation covers. Reservations made
                    // after this reading are counted in `used`, so the ceiling stays right
                    // between readings. Charged-but-untouched reservations hide untracked
                    // memory from a reading, so the estimate keeps recent larger readings.
                    let reading = m.hard_bytes.saturating_sub(st.used);
                    st.untracked_reading_bytes = reading;
                    st.untracked_bytes = if settled {
                        reading
                    } else {
                        reading.max(decayed(
                            st.untracked_bytes,
                            st.untracked_at
                                .map_or(Duration::MAX, |t| now.saturating_duration_since(t)),
                            drift.untracked_half_life,
                        ))
                    };
                    st.untracked_at = Some(now);
                    let own = m.own_hard_bytes();
                    self.metrics
                        .measured(m.hard_bytes, own as i64 - st.used as i64);
                }
                Err(_) => self.metrics.probe_error(),
            }
            st.recompute_cap(Some(drift));
            st.grant_waiters(&mut wake);
            self.publish(&st);
        }
        for w in wake {
            w.wake();
        }
        measured.map(|_| ())
    }

    /// The registered evictors with their metrics, copied out so that they are called with
    /// the registry's lock let go.
    fn registered_evictors(&self) -> Vec<(Arc<dyn Evictor>, crate::metrics_names::EvictorMetrics)> {
        self.evictors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|e| (Arc::clone(&e.evictor), e.metrics.clone()))
            .collect()
    }

    /// Asks evictors (cheapest to refill first, `Evictor::refill_cost`) to free the queue's
    /// shortfall, with no budget lock held. Only one thread evicts at a time; a request that
    /// arrives meanwhile makes that thread run another round.
    fn run_eviction(&self) {
        {
            let mut st = self.lock();
            if st.evicting {
                st.evict_again = true;
                return;
            }
            st.evicting = true;
        }
        loop {
            let shortfall = {
                let mut st = self.lock();
                st.evict_again = false;
                (st.used + st.waiting_bytes).saturating_sub(st.cap)
            };
            if shortfall > 0 {
                let mut evictors = self.registered_evictors();
                // Cheapest to refill first; registration order among equals (a stable sort).
                evictors.sort_by_key(|(ev, _)| ev.refill_cost());
                let mut freed = 0u64;
                for (ev, m) in evictors {
                    if freed >= shortfall {
                        break;
                    }
                    let got = ev.evict(shortfall - freed);
                    m.record(got);
                    freed = freed.saturating_add(got);
                }
            }
            let mut st = self.lock();
            if !st.evict_again {
                st.evicting = false;
                return;
            }
        }
    }
}

/// A shared byte budget. Cloning is cheap (one `Arc`); all clones are the same budget.
#[derive(Clone)]
pub struct Budget {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Budget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = self.inner.lock();
        f.debug_struct("Budget")
            .field("name", &self.inner.name)
            .field("total_bytes", &st.total)
            .field("used_bytes", &st.used)
            .field("cap_bytes", &st.cap)
            .field("n_waiting", &st.waiters.len())
            .finish()
    }
}

/// A point-in-time view of a budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetSnapshot {
    /// Bytes the budget hands out in total.
    pub total_bytes: u64,
    /// Current admission ceiling (`total_bytes` lowered by the drift check).
    pub cap_bytes: u64,
    /// Bytes charged to live reservations.
    pub used_bytes: u64,
    /// Charged bytes per category, indexed by [`Category::index`].
    pub used_by_category: [u64; Category::N],
    /// The most bytes ever charged at once (since creation or [`Budget::reset_peaks`]).
    pub peak_used_bytes: u64,
    /// The most bytes ever charged in each category (each category's own high-water
    /// mark: they need not have coincided, so their sum can exceed `peak_used_bytes`).
    pub peak_by_category: [u64; Category::N],
    /// Requests queued.
    pub n_waiting: usize,
    /// Bytes those requests ask for.
    pub waiting_bytes: u64,
    /// Hard usage measured by the kernel at the last drift reading, in the scope whose limit
    /// won (the cgroup, or the whole host).
    pub measured_hard_bytes: Option<u64>,
    /// The part of it attributable to this budget's owner (the cgroup; for the host scope,
    /// this process).
    pub measured_own_hard_bytes: Option<u64>,
    /// The untracked estimate that lowers the ceiling: the larger of the last reading's
    /// `hard − charged` and earlier readings decayed by the drift check's half-life.
    pub untracked_bytes: u64,
    /// `hard − charged` at the last reading (bytes the kernel charged that no reservation
    /// covered then).
    pub untracked_reading_bytes: u64,
    /// Own measured hard bytes minus charged bytes at the last reading: memory the budget never
    /// saw (positive) or reservations not yet touched (negative).
    pub drift_bytes: Option<i64>,
}

impl BudgetSnapshot {
    /// Charged bytes in one category.
    pub fn used_in(&self, category: Category) -> u64 {
        self.used_by_category[category.index()]
    }

    /// The most bytes ever charged in one category.
    pub fn peak_in(&self, category: Category) -> u64 {
        self.peak_by_category[category.index()]
    }
}

impl Budget {
    /// A budget of exactly `total_bytes`, with no detection and no drift check (tests, VRAM).
    pub fn fixed(total_bytes: u64) -> Budget {
        Budget::new(BudgetConfig {
            name: "fixed".into(),
            total_bytes,
            drift: None,
        })
    }

    /// A fixed budget with a name (used as the `budget` metrics label).
    pub fn fixed_named(name: impl Into<String>, total_bytes: u64) -> Budget {
        Budget::new(BudgetConfig {
            name: name.into(),
            total_bytes,
            drift: None,
        })
    }

    /// A budget from a full configuration.
    pub fn new(config: BudgetConfig) -> Budget {
        Budget::with_detection(config, None)
    }

    pub(crate) fn with_detection(
        config: BudgetConfig,
        detection: Option<crate::detect::Detection>,
    ) -> Budget {
        let metrics = BudgetMetrics::new(&config.name);
        let mut st = State {
            total: config.total_bytes,
            cap: config.total_bytes,
            used: 0,
            by_category: [0; Category::N],
            peak_used: 0,
            peak_by_category: [0; Category::N],
            waiters: BTreeMap::new(),
            waiting_bytes: 0,
            next_seq: 0,
            evicting: false,
            evict_again: false,
            eligible_epoch: 0,
            eligible_at: std::collections::BTreeSet::new(),
            ops_since_clock: 0,
            untracked_bytes: 0,
            untracked_reading_bytes: 0,
            untracked_at: None,
            measured_hard_bytes: None,
            measured_own_hard_bytes: None,
            charged_at_measure: 0,
            next_refresh: None,
        };
        st.recompute_cap(config.drift.as_ref());
        metrics.total(config.total_bytes);
        let inner = Arc::new(Inner {
            name: config.name,
            state: Mutex::new(st),
            evictors: Mutex::new(Vec::new()),
            next_evictor_id: AtomicU64::new(1),
            drift: config.drift,
            metrics,
            detection,
        });
        let b = Budget { inner };
        // First reading now, so the ceiling is right from the first admission. A failing
        // probe leaves the ceiling at the budget's total and is counted in the metrics.
        let _ = b.inner.refresh(true);
        b
    }

    /// The budget's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// What detection found, for budgets made by [`Budget::detect`].
    pub fn detection(&self) -> Option<&crate::detect::Detection> {
        self.inner.detection.as_ref()
    }

    /// Bytes the budget hands out in total.
    pub fn total_bytes(&self) -> u64 {
        self.inner.lock().total
    }

    /// Bytes charged to live reservations.
    pub fn used_bytes(&self) -> u64 {
        self.inner.lock().used
    }

    /// Bytes a request could get right now (ignoring the queue).
    pub fn available_bytes(&self) -> u64 {
        self.inner.lock().available()
    }

    /// Whether `other` is this budget (a clone of it), not merely one with equal figures.
    pub fn same_as(&self, other: &Budget) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Restarts the high-water marks ([`BudgetSnapshot::peak_used_bytes`] and
    /// [`BudgetSnapshot::peak_by_category`]) from what is charged now.
    pub fn reset_peaks(&self) {
        let mut st = self.inner.lock();
        st.peak_used = st.used;
        st.peak_by_category = st.by_category;
    }

    /// A consistent view of all counters.
    pub fn snapshot(&self) -> BudgetSnapshot {
        let st = self.inner.lock();
        BudgetSnapshot {
            total_bytes: st.total,
            cap_bytes: st.cap,
            used_bytes: st.used,
            used_by_category: st.by_category,
            peak_used_bytes: st.peak_used,
            peak_by_category: st.peak_by_category,
            n_waiting: st.waiters.len(),
            waiting_bytes: st.waiting_bytes,
            measured_hard_bytes: st.measured_hard_bytes,
            measured_own_hard_bytes: st.measured_own_hard_bytes,
            untracked_bytes: st.untracked_bytes,
            untracked_reading_bytes: st.untracked_reading_bytes,
            drift_bytes: st
                .measured_own_hard_bytes
                .map(|h| h as i64 - st.charged_at_measure as i64),
        }
    }

    /// Changes the total. Waiters that no longer can ever fit fail with
    /// [`BudgetError::TooLarge`]; waiters that now fit are admitted. Live reservations are kept
    /// even when they exceed the new total (new admissions wait until they shrink).
    pub fn set_total_bytes(&self, total_bytes: u64) {
        let mut wake = Vec::new();
        {
            let mut st = self.inner.lock();
            st.total = total_bytes;
            st.recompute_cap(self.inner.drift.as_ref());
            self.inner.metrics.total(total_bytes);
            // A shrunk total can make waiters anywhere in the queue impossible; fail them all.
            let too_large: Vec<WaitKey> = st
                .waiters
                .iter()
                .filter(|(_, w)| w.bytes > total_bytes)
                .map(|(k, _)| *k)
                .collect();
            for k in too_large {
                if let Some(mut w) = st.waiters.remove(&k) {
                    st.waiting_bytes -= w.bytes;
                    w.outcome.store(TOO_LARGE, Ordering::Release);
                    wake.extend(w.waker.take());
                }
            }
            st.grant_waiters(&mut wake);
            self.inner.publish(&st);
        }
        for w in wake {
            w.wake();
        }
    }

    /// Reads the kernel now and updates the admission ceiling (the drift check). A no-op for
    /// budgets without a drift check.
    pub fn refresh_usage(&self) -> Result<(), BudgetError> {
        self.inner.refresh(true)
    }

    /// Reads the kernel now and takes that reading as the whole untracked estimate,
    /// dropping the larger recent readings the ceiling otherwise keeps while they decay
    /// (`DriftConfig::untracked_half_life`). Those are kept because a reservation charged
    /// but not yet touched hides untracked memory from a reading; a caller that knows no
    /// such reservation exists (nothing is being built, every charged byte is resident)
    /// calls this so the ceiling reflects the memory in use now rather than a peak that
    /// has passed. A no-op for budgets without a drift check.
    pub fn refresh_settled(&self) -> Result<(), BudgetError> {
        self.inner.read_kernel(true, true)
    }

    /// What the registered evictors could free if asked, now or once their idle rules
    /// allow ([`Evictor::reclaimable_bytes`]): charged bytes that need not stay. A caller
    /// deciding that a request can never fit counts `used − reclaimable` as fixed.
    pub fn reclaimable_bytes(&self) -> u64 {
        self.inner
            .registered_evictors()
            .iter()
            .fold(0u64, |sum, (ev, _)| {
                sum.saturating_add(ev.reclaimable_bytes())
            })
    }

    /// Starts a request with options (priority, static label, eviction).
    pub fn request(&self, bytes: u64, category: Category) -> Request<'_> {
        Request {
            budget: self,
            bytes,
            category,
            label: Cow::Borrowed(""),
            priority: Priority::NORMAL,
            evict: true,
        }
    }

    /// Reserves `bytes` now or fails with [`BudgetError::WouldBlock`] (or `TooLarge`). Never
    /// waits and never runs evictors; never jumps ahead of queued requests of equal or higher
    /// priority.
    pub fn try_reserve(
        &self,
        bytes: u64,
        category: Category,
        label: impl Into<String>,
    ) -> Result<Reservation, BudgetError> {
        self.try_reserve_inner(bytes, category, Cow::Owned(label.into()), Priority::NORMAL)
    }

    /// Reserves `bytes`, waiting (FIFO within priority) up to `timeout` (`None`: forever).
    /// When the request does not fit, registered evictors are asked for the shortfall first.
    /// `Some(Duration::ZERO)` means "try, with eviction, but do not wait".
    pub fn reserve(
        &self,
        bytes: u64,
        category: Category,
        label: impl Into<String>,
        timeout: Option<Duration>,
    ) -> Result<Reservation, BudgetError> {
        self.request(bytes, category)
            .label(label.into())
            .reserve(timeout)
    }

    /// Async version of [`Budget::reserve`] without a timeout; works under any executor.
    /// Dropping the future cancels the request (bytes granted in the meantime are returned).
    pub fn reserve_async(
        &self,
        bytes: u64,
        category: Category,
        label: impl Into<String>,
    ) -> ReserveFuture {
        self.request(bytes, category)
            .label(label.into())
            .reserve_async()
    }

    /// Registers a cache's evictor; it stays registered until the returned value is dropped.
    pub fn register_evictor(&self, evictor: Arc<dyn Evictor>) -> EvictorRegistration {
        let id = self.inner.next_evictor_id.fetch_add(1, Ordering::Relaxed);
        let metrics = self.inner.metrics.evictor(evictor.name());
        self.inner
            .evictors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(RegisteredEvictor {
                id,
                evictor,
                metrics,
            });
        EvictorRegistration::new(Arc::downgrade(&self.inner), id)
    }

    /// Tells waiters that some cache entry just became evictable (idle long enough, no
    /// holder), so they run the evictors again. Cheap; runs no evictor on the caller's thread.
    pub fn notify_eligible(&self) {
        let wake: Vec<Waker> = {
            let mut st = self.inner.lock();
            st.eligible_epoch += 1;
            st.waiters
                .values()
                .filter_map(|w| w.waker.clone())
                .collect()
        };
        for w in wake {
            w.wake();
        }
    }

    /// Tells the budget that an entry will become evictable at `at`. Blocking waiters wake by
    /// then and re-run the evictors; async waiters need [`Budget::spawn_monitor`] (or a later
    /// [`Budget::notify_eligible`]) since this crate owns no timer.
    pub fn notify_eligible_at(&self, at: Instant) {
        let wake: Vec<Waker> = {
            let mut st = self.inner.lock();
            if !st.add_deadline(at) {
                return;
            }
            // A new earliest deadline: parked waiters must shorten their sleep.
            st.waiters
                .values()
                .filter_map(|w| w.waker.clone())
                .collect()
        };
        for w in wake {
            w.wake();
        }
    }

    /// Starts a thread that refreshes the drift reading and fires due eligibility deadlines
    /// every `interval`; it stops when the handle is dropped.
    pub fn spawn_monitor(&self, interval: Duration) -> MonitorHandle {
        let stop = Arc::new((Mutex::new(false), std::sync::Condvar::new()));
        let weak = Arc::downgrade(&self.inner);
        let stop2 = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name(format!("budget-monitor-{}", self.inner.name))
            .spawn(move || monitor_loop(weak, stop2, interval))
            .ok();
        MonitorHandle { stop, thread }
    }

    /// The public non-blocking path: counts refusals.
    fn try_reserve_inner(
        &self,
        bytes: u64,
        category: Category,
        label: Cow<'static, str>,
        priority: Priority,
    ) -> Result<Reservation, BudgetError> {
        let r = self.admit(bytes, category, label, priority);
        if r.is_err() {
            self.inner.metrics.refused();
        }
        r
    }

    /// Admits now or says why not; never waits, never runs evictors.
    fn admit(
        &self,
        bytes: u64,
        category: Category,
        label: Cow<'static, str>,
        priority: Priority,
    ) -> Result<Reservation, BudgetError> {
        let mut result = self.admit_once(bytes, category, priority);
        // Slow path: the drift reading may be stale; re-read (rate-limited) and try once more.
        if matches!(result, Err(BudgetError::WouldBlock { .. })) && self.inner.drift.is_some() {
            let _ = self.inner.refresh(false);
            result = self.admit_once(bytes, category, priority);
        }
        result.map(|()| Reservation {
            budget: Arc::clone(&self.inner),
            bytes,
            category,
            priority,
            label,
        })
    }

    fn admit_once(
        &self,
        bytes: u64,
        category: Category,
        priority: Priority,
    ) -> Result<(), BudgetError> {
        let mut st = self.inner.lock();
        if self.inner.drift.is_some() {
            st.ops_since_clock += 1;
            if bytes >= LARGE_ADMISSION_BYTES || st.ops_since_clock >= OPS_PER_CLOCK_CHECK {
                st.ops_since_clock = 0;
                if st.next_refresh.is_none_or(|t| Instant::now() >= t) {
                    // Stale reading: renew it (outside the lock) before deciding.
                    drop(st);
                    let _ = self.inner.refresh(false);
                    st = self.inner.lock();
                }
            }
        }
        if bytes <= st.cap.saturating_sub(st.used) && st.queue_allows(priority) {
            st.charge(bytes, category);
            self.inner.publish_one(&st, category);
            return Ok(());
        }
        if bytes > st.total {
            return Err(BudgetError::TooLarge {
                requested_bytes: bytes,
                total_bytes: st.total,
            });
        }
        Err(BudgetError::WouldBlock {
            requested_bytes: bytes,
            available_bytes: st.available(),
            n_waiting: st.n_waiting_at_or_above(priority),
        })
    }
}

fn monitor_loop(
    weak: Weak<Inner>,
    stop: Arc<(Mutex<bool>, std::sync::Condvar)>,
    interval: Duration,
) {
    loop {
        {
            let (m, cv) = &*stop;
            let g = m.lock().unwrap_or_else(|e| e.into_inner());
            let (g, _) = cv
                .wait_timeout(g, interval)
                .unwrap_or_else(|e| e.into_inner());
            if *g {
                return;
            }
        }
        let Some(inner) = weak.upgrade() else { return };
        let _ = inner.refresh(true);
        let due = inner.lock().fire_due(Instant::now());
        if due {
            Budget { inner }.notify_eligible();
        }
    }
}

/// Stops the monitor thread of [`Budget::spawn_monitor`] when dropped.
#[must_use = "the monitor stops when this handle is dropped"]
pub struct MonitorHandle {
    stop: Arc<(Mutex<bool>, std::sync::Condvar)>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for MonitorHandle {
    fn drop(&mut self) {
        let (m, cv) = &*self.stop;
        *m.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cv.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A request with options, from [`Budget::request`].
#[must_use = "a request does nothing until reserved"]
pub struct Request<'a> {
    budget: &'a Budget,
    bytes: u64,
    category: Category,
    label: Cow<'static, str>,
    priority: Priority,
    evict: bool,
}

impl Request<'_> {
    /// Sets the label (a `&'static str` costs no allocation).
    pub fn label(mut self, label: impl Into<Cow<'static, str>>) -> Self {
        self.label = label.into();
        self
    }

    /// Sets the priority (default [`Priority::NORMAL`]).
    pub fn priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }

    /// Whether waiting runs the evictors (default true).
    pub fn evict(mut self, evict: bool) -> Self {
        self.evict = evict;
        self
    }

    /// Non-blocking: see [`Budget::try_reserve`].
    pub fn try_reserve(self) -> Result<Reservation, BudgetError> {
        self.budget
            .try_reserve_inner(self.bytes, self.category, self.label, self.priority)
    }

    /// Blocking: see [`Budget::reserve`].
    pub fn reserve(self, timeout: Option<Duration>) -> Result<Reservation, BudgetError> {
        let start = Instant::now();
        let deadline = timeout.map(|t| start + t);
        let mut fut = self.reserve_async();
        let parker = Arc::new(ThreadWaker(std::thread::current()));
        let waker = Waker::from(parker);
        let mut cx = Context::from_waker(&waker);
        loop {
            if let Poll::Ready(r) = Pin::new(&mut fut).poll(&mut cx) {
                return r;
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                // Give up; dropping the future returns anything granted in the race.
                let available_bytes = fut.budget.inner.lock().available();
                let requested_bytes = fut.bytes;
                fut.budget.inner.metrics.refused();
                drop(fut);
                return Err(BudgetError::Timeout {
                    requested_bytes,
                    waited: now - start,
                    available_bytes,
                });
            }
            let mut wait = deadline.map_or(Duration::MAX, |d| d - now);
            // Wake for due eligibility deadlines and drift re-reads even without a release.
            wait = wait.min(fut.wake_hint(now));
            if wait == Duration::MAX {
                std::thread::park();
            } else {
                std::thread::park_timeout(wait);
            }
        }
    }

    /// Async: see [`Budget::reserve_async`].
    pub fn reserve_async(self) -> ReserveFuture {
        ReserveFuture {
            budget: self.budget.clone(),
            bytes: self.bytes,
            category: self.category,
            label: Some(self.label),
            priority: self.priority,
            evict: self.evict,
            queued: None,
            seen_epoch: 0,
            done: false,
        }
    }
}

struct ThreadWaker(Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Future of an async reservation. Needs no particular executor: it stores the task's waker
/// in the budget's queue and is woken when it is admitted (or when evictable entries appear).
#[must_use = "futures do nothing unless polled"]
pub struct ReserveFuture {
    budget: Budget,
    bytes: u64,
    category: Category,
    label: Option<Cow<'static, str>>,
    priority: Priority,
    evict: bool,
    queued: Option<(WaitKey, Arc<AtomicU8>)>,
    seen_epoch: u64,
    done: bool,
}

impl ReserveFuture {
    /// Bytes this future asks for.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    fn reservation(&mut self) -> Reservation {
        self.done = true;
        Reservation {
            budget: Arc::clone(&self.budget.inner),
            bytes: self.bytes,
            category: self.category,
            priority: self.priority,
            label: self.label.take().unwrap_or(Cow::Borrowed("")),
        }
    }

    /// How long a blocking waiter may sleep before it must look again without being woken.
    fn wake_hint(&self, now: Instant) -> Duration {
        let st = self.budget.inner.lock();
        let mut d = Duration::MAX;
        if let Some(t) = st.eligible_at.first() {
            d = d.min(t.saturating_duration_since(now));
        }
        if let Some(drift) = &self.budget.inner.drift {
            if st.cap < st.total {
                d = d.min(drift.refresh_interval);
            }
        }
        d
    }

    fn check_outcome(&mut self) -> Option<Result<Reservation, BudgetError>> {
        let (_, outcome) = self.queued.as_ref()?;
        match outcome.load(Ordering::Acquire) {
            GRANTED => {
                self.queued = None;
                Some(Ok(self.reservation()))
            }
            TOO_LARGE => {
                self.queued = None;
                self.done = true;
                let total_bytes = self.budget.inner.lock().total;
                Some(Err(BudgetError::TooLarge {
                    requested_bytes: self.bytes,
                    total_bytes,
                }))
            }
            _ => None,
        }
    }
}

impl Future for ReserveFuture {
    type Output = Result<Reservation, BudgetError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(Err(BudgetError::WouldBlock {
                requested_bytes: this.bytes,
                available_bytes: 0,
                n_waiting: 0,
            }));
        }
        if this.queued.is_none() {
            let (bytes, category, priority) = (this.bytes, this.category, this.priority);
            let mut first = this.budget.admit_once(bytes, category, priority);
            if matches!(first, Err(BudgetError::WouldBlock { .. }))
                && this.budget.inner.drift.is_some()
            {
                let _ = this.budget.inner.refresh(false);
                first = this.budget.admit_once(bytes, category, priority);
            }
            match first {
                Ok(()) => return Poll::Ready(Ok(this.reservation())),
                Err(e @ BudgetError::TooLarge { .. }) => {
                    this.done = true;
                    this.budget.inner.metrics.refused();
                    return Poll::Ready(Err(e));
                }
                Err(_) => {}
            }
            let outcome = Arc::new(AtomicU8::new(PENDING));
            {
                let mut st = this.budget.inner.lock();
                let key = (std::cmp::Reverse(this.priority.0), st.next_seq);
                st.next_seq += 1;
                this.queued = Some((key, Arc::clone(&outcome)));
                st.waiters.insert(
                    key,
                    Waiter {
                        bytes: this.bytes,
                        category: this.category,
                        outcome: Arc::clone(&outcome),
                        waker: Some(cx.waker().clone()),
                    },
                );
                st.waiting_bytes += this.bytes;
                this.seen_epoch = st.eligible_epoch;
                this.budget.inner.metrics.waited();
                // It may fit now (a release between the try and the enqueue).
                let mut wake = Vec::new();
                st.grant_waiters(&mut wake);
                this.budget.inner.publish(&st);
                drop(st);
                for w in wake {
                    w.wake();
                }
            }
            if let Some(r) = this.check_outcome() {
                return Poll::Ready(r);
            }
            if this.evict {
                this.budget.inner.run_eviction();
            }
            return match this.check_outcome() {
                Some(r) => Poll::Ready(r),
                None => Poll::Pending,
            };
        }
        if let Some(r) = this.check_outcome() {
            return Poll::Ready(r);
        }
        // Still queued: refresh the waker; run evictors again if entries became eligible.
        let mut run_evict = false;
        {
            let mut st = this.budget.inner.lock();
            st.fire_due(Instant::now());
            if let Some((key, _)) = &this.queued {
                if let Some(w) = st.waiters.get_mut(key) {
                    if !w
                        .waker
                        .as_ref()
                        .is_some_and(|old| old.will_wake(cx.waker()))
                    {
                        w.waker = Some(cx.waker().clone());
                    }
                }
            }
            if st.eligible_epoch != this.seen_epoch {
                this.seen_epoch = st.eligible_epoch;
                run_evict = this.evict;
            }
        }
        if this.budget.inner.drift.is_some() {
            let _ = this.budget.inner.refresh(false);
        }
        if run_evict {
            this.budget.inner.run_eviction();
        }
        match this.check_outcome() {
            Some(r) => Poll::Ready(r),
            None => Poll::Pending,
        }
    }
}

impl Drop for ReserveFuture {
    fn drop(&mut self) {
        let Some((key, outcome)) = self.queued.take() else {
            return;
        };
        let mut wake = Vec::new();
        {
            let mut st = self.budget.inner.lock();
            // Granting happens under this lock, so the outcome read here is final.
            match outcome.load(Ordering::Acquire) {
                GRANTED => {
                    st.uncharge(self.bytes, self.category);
                }
                PENDING if st.waiters.remove(&key).is_some() => {
                    st.waiting_bytes -= self.bytes;
                }
                _ => {}
            }
            // Leaving the head (or returning bytes) may let the next waiters in.
            st.grant_waiters(&mut wake);
            self.budget.inner.publish(&st);
        }
        for w in wake {
            w.wake();
        }
    }
}

/// Bytes charged to a budget. Returns them when dropped (RAII); can be partly released,
/// shrunk, grown, split and moved into a long-lived owner such as a cache entry (dropping the
/// entry releases the bytes).
#[must_use = "dropping a reservation releases its bytes at once"]
pub struct Reservation {
    budget: Arc<Inner>,
    bytes: u64,
    category: Category,
    priority: Priority,
    label: Cow<'static, str>,
}

impl std::fmt::Debug for Reservation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reservation")
            .field("budget", &self.budget.name)
            .field("bytes", &self.bytes)
            .field("category", &self.category)
            .field("label", &self.label)
            .finish()
    }
}

impl Reservation {
    /// Bytes currently held.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The category the bytes are charged to.
    pub fn category(&self) -> Category {
        self.category
    }

    /// The label given at reservation.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The budget this reservation belongs to.
    pub fn budget(&self) -> Budget {
        Budget {
            inner: Arc::clone(&self.budget),
        }
    }

    /// Returns up to `n` bytes to the budget now; returns how many were released (less than
    /// `n` only when the reservation held fewer).
    pub fn release(&mut self, n: u64) -> u64 {
        let n = n.min(self.bytes);
        self.bytes -= n;
        self.budget.release(n, self.category);
        n
    }

    /// Shrinks to `n` bytes (no-op when already at most `n`).
    pub fn shrink_to(&mut self, n: u64) {
        if n < self.bytes {
            self.release(self.bytes - n);
        }
    }

    /// Grows by `additional` bytes if they fit now (same admission rule as
    /// [`Budget::try_reserve`]); never waits.
    pub fn try_grow(&mut self, additional: u64) -> Result<(), BudgetError> {
        let budget = Budget {
            inner: Arc::clone(&self.budget),
        };
        let extra = budget.try_reserve_inner(
            additional,
            self.category,
            Cow::Borrowed(""),
            self.priority,
        )?;
        self.absorb(extra);
        Ok(())
    }

    /// Grows to `n` bytes if they fit now (no-op when already at least `n`).
    pub fn try_grow_to(&mut self, n: u64) -> Result<(), BudgetError> {
        if n > self.bytes {
            self.try_grow(n - self.bytes)
        } else {
            Ok(())
        }
    }

    /// Splits off `n` bytes (at most what is held) into a new reservation with the same
    /// category and label.
    pub fn split(&mut self, n: u64) -> Reservation {
        let n = n.min(self.bytes);
        self.bytes -= n;
        Reservation {
            budget: Arc::clone(&self.budget),
            bytes: n,
            category: self.category,
            priority: self.priority,
            label: self.label.clone(),
        }
    }

    /// Adds another reservation's bytes to this one (re-charged to this one's category).
    pub fn merge(&mut self, other: Reservation) -> Result<(), BudgetError> {
        if !Arc::ptr_eq(&self.budget, &other.budget) {
            return Err(BudgetError::ForeignReservation {
                left: self.budget.name.clone(),
                right: other.budget.name.clone(),
            });
        }
        self.absorb(other);
        Ok(())
    }

    /// Moves the bytes to another category (a working set that becomes a cache entry).
    pub fn set_category(&mut self, category: Category) {
        if category == self.category {
            return;
        }
        let mut st = self.budget.lock();
        st.by_category[self.category.index()] -= self.bytes;
        st.by_category[category.index()] += self.bytes;
        st.note_peaks(category);
        self.budget.publish(&st);
        drop(st);
        self.category = category;
    }

    /// Replaces the label.
    pub fn set_label(&mut self, label: impl Into<Cow<'static, str>>) {
        self.label = label.into();
    }

    fn absorb(&mut self, mut other: Reservation) {
        if other.category != self.category {
            other.set_category(self.category);
        }
        self.bytes += other.bytes;
        other.bytes = 0;
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.release(self.bytes, self.category);
    }
}

pub(crate) fn unregister_evictor(inner: &Weak<Inner>, id: u64) {
    if let Some(inner) = inner.upgrade() {
        inner
            .evictors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|e| e.id != id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}
    fn assert_send<T: Send>() {}

    #[test]
    fn handles_cross_threads() {
        assert_send_sync::<Budget>();
        assert_send_sync::<Reservation>();
        // Async tasks holding a pending reservation can move between executor threads.
        assert_send::<ReserveFuture>();
    }

    #[test]
    fn category_indices_and_names_are_distinct() {
        for (i, c) in Category::ALL.iter().enumerate() {
            assert_eq!(c.index(), i);
        }
        let mut names: Vec<&str> = Category::ALL.iter().map(|c| c.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Category::N);
    }

    #[test]
    fn priorities_order_and_queue_keys_put_high_first() {
        assert!(Priority::LOW < Priority::NORMAL && Priority::NORMAL < Priority::HIGH);
        assert_eq!(Priority::default(), Priority::NORMAL);
        let mut keys: Vec<WaitKey> = vec![
            (std::cmp::Reverse(Priority::LOW.level()), 0),
            (std::cmp::Reverse(Priority::HIGH.level()), 2),
            (std::cmp::Reverse(Priority::HIGH.level()), 1),
        ];
        keys.sort();
        assert_eq!(keys.iter().map(|k| k.1).collect::<Vec<_>>(), vec![1, 2, 0]);
    }

    #[test]
    fn deadlines_fire_in_order_and_are_bounded() {
        let b = Budget::fixed(1);
        let mut st = b.inner.lock();
        let t0 = Instant::now();
        assert!(st.add_deadline(t0 + Duration::from_secs(10)));
        assert!(!st.add_deadline(t0 + Duration::from_secs(20)));
        assert!(st.add_deadline(t0 + Duration::from_secs(5)));
        let epoch = st.eligible_epoch;
        assert!(!st.fire_due(t0));
        assert!(st.fire_due(t0 + Duration::from_secs(11)));
        assert_eq!(st.eligible_epoch, epoch + 1);
        assert_eq!(st.eligible_at.len(), 1);
        for i in 0..(MAX_DEADLINES as u64 + 10) {
            st.add_deadline(t0 + Duration::from_millis(i));
        }
        assert_eq!(st.eligible_at.len(), MAX_DEADLINES);
        assert_eq!(st.eligible_at.first().copied(), Some(t0));
    }
}
