//! The process-wide PCE cache: memory, then disk, then extraction; single flight per circuit;
//! budget-charged and evictable.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use bellman::Circuit;
use bls12_381::Scalar;
use memory_budget::{
    Budget, Category, EntryHold, EntryUse, Evictor, EvictorRegistration, Reservation,
};

use crate::file::file_name_for;
use crate::{Fingerprint, Pce, PceError, Recorder};

/// How the cache behaves.
#[derive(Clone, Debug)]
pub struct CacheConfig {
    /// Directory of `<id>.pce` files; `None` keeps PCEs in memory only.
    pub dir: Option<PathBuf>,
    /// Verify every section checksum on load ([`Pce::load`]); `false` uses
    /// [`Pce::load_unchecked`] (header checksum and structure are still verified).
    pub verify_on_load: bool,
    /// An entry nobody holds becomes evictable after this long idle.
    pub min_idle: Duration,
    /// First reservation for an extraction; it grows as recording proceeds.
    pub extraction_initial_bytes: u64,
    /// How long to wait for budget admission (`None`: forever).
    pub admission_timeout: Option<Duration>,
}

impl CacheConfig {
    /// In-memory cache with checked loads and the budget's default idle time.
    pub fn in_memory() -> Self {
        CacheConfig {
            dir: None,
            verify_on_load: true,
            min_idle: memory_budget::DEFAULT_MIN_IDLE,
            extraction_initial_bytes: 1 << 20,
            admission_timeout: None,
        }
    }

    /// Cache backed by files in `dir`.
    pub fn with_dir(dir: impl Into<PathBuf>) -> Self {
        CacheConfig {
            dir: Some(dir.into()),
            ..Self::in_memory()
        }
    }
}

/// Cache key: a circuit id (also the file name stem, `[A-Za-z0-9._-]`) and, when known, the
/// fingerprint its matrices must have. With `fingerprint: None` whatever is cached under the
/// id is used (its file must still be internally consistent): put the circuit's version in
/// the id, or pin the fingerprint, so a changed circuit cannot pick up an old file. (Witness
/// synthesis catches a changed shape, not changed coefficients.)
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CircuitKey {
    /// Stable circuit name, for example `porep-32g-partition-v1`.
    pub id: String,
    /// Required fingerprint, if any.
    pub fingerprint: Option<Fingerprint>,
}

impl CircuitKey {
    /// Key without a pinned fingerprint.
    pub fn new(id: impl Into<String>) -> Self {
        CircuitKey {
            id: id.into(),
            fingerprint: None,
        }
    }
}

/// Where a [`PceHandle`] came from on this call.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum PceSource {
    /// Already in memory.
    Memory,
    /// Loaded (mapped) from the cache directory.
    Disk,
    /// Recorded from the circuit.
    Extracted,
}

struct Entry {
    pce: Pce,
    use_: Arc<EntryUse>,
    /// Holds the entry's bytes; released when the last `Arc<Entry>` goes.
    reservation: Reservation,
}

/// A held PCE: not evictable while any handle exists. Derefs to [`Pce`].
pub struct PceHandle {
    entry: Arc<Entry>,
    _hold: EntryHold,
    source: PceSource,
}

impl PceHandle {
    /// How this call obtained the PCE.
    pub fn source(&self) -> PceSource {
        self.source
    }

    /// Bytes charged to the budget for this entry.
    pub fn charged_bytes(&self) -> u64 {
        self.entry.reservation.bytes()
    }
}

impl Clone for PceHandle {
    /// Another hold on the same entry.
    fn clone(&self) -> Self {
        PceHandle {
            _hold: self.entry.use_.hold(),
            entry: self.entry.clone(),
            source: self.source,
        }
    }
}

impl std::ops::Deref for PceHandle {
    type Target = Pce;
    fn deref(&self) -> &Pce {
        &self.entry.pce
    }
}

enum Slot {
    Loading,
    Ready(Arc<Entry>),
}

struct Inner {
    budget: Budget,
    config: CacheConfig,
    slots: Mutex<HashMap<String, Slot>>,
    changed: Condvar,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Slot>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn publish_gauge(&self, slots: &HashMap<String, Slot>) {
        let bytes: u64 = slots
            .values()
            .map(|s| match s {
                Slot::Ready(e) => e.reservation.bytes(),
                Slot::Loading => 0,
            })
            .sum();
        metrics::gauge!("pinion_pce_cached_bytes").set(bytes as f64);
    }

    /// Bytes of the ready entries nobody holds: evictable now or once idle long enough.
    fn unheld_bytes(&self) -> u64 {
        self.lock()
            .values()
            .map(|s| match s {
                Slot::Ready(e) if e.use_.n_holders() == 0 => e.reservation.bytes(),
                _ => 0,
            })
            .sum()
    }

    /// Drops evictable entries, oldest idle first, until `at_least` bytes are freed. The
    /// reservations are dropped after the lock is released.
    fn evict(&self, at_least: u64) -> u64 {
        let victims: Vec<Arc<Entry>> = {
            let mut slots = self.lock();
            let mut cands: Vec<(Duration, String)> = slots
                .iter()
                .filter_map(|(id, s)| match s {
                    Slot::Ready(e) if e.use_.is_evictable() => {
                        Some((e.use_.idle_for(), id.clone()))
                    }
                    _ => None,
                })
                .collect();
            cands.sort_by_key(|c| std::cmp::Reverse(c.0));
            let mut freed = 0;
            let mut out = Vec::new();
            for (_, id) in cands {
                if freed >= at_least {
                    break;
                }
                if let Some(Slot::Ready(e)) = slots.remove(&id) {
                    freed += e.reservation.bytes();
                    out.push(e);
                }
            }
            self.publish_gauge(&slots);
            out
        };
        let mut freed = 0;
        for e in victims {
            let bytes = e.reservation.bytes();
            // A handle can only be created under the lock, and the entry had no hold, so
            // this is normally the last reference; if not, its bytes go when that one does.
            if Arc::strong_count(&e) == 1 {
                freed += bytes;
            }
            metrics::counter!("pinion_pce_evictions_total").increment(1);
            drop(e);
        }
        metrics::counter!("pinion_pce_evicted_bytes_total").increment(freed);
        freed
    }
}

struct CacheEvictor {
    inner: Weak<Inner>,
}

impl Evictor for CacheEvictor {
    fn name(&self) -> &str {
        "pce-cache"
    }

    fn evict(&self, at_least_bytes: u64) -> u64 {
        self.inner.upgrade().map_or(0, |i| i.evict(at_least_bytes))
    }

    fn reclaimable_bytes(&self) -> u64 {
        self.inner.upgrade().map_or(0, |i| i.unheld_bytes())
    }
}

/// Clears a `Loading` slot if the loader fails or panics, so waiters retry instead of
/// waiting forever.
struct LoadingGuard<'a> {
    inner: &'a Inner,
    id: &'a str,
    armed: bool,
}

impl Drop for LoadingGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            let mut slots = self.inner.lock();
            if matches!(slots.get(self.id), Some(Slot::Loading)) {
                slots.remove(self.id);
            }
            drop(slots);
            self.inner.changed.notify_all();
        }
    }
}

/// PCEs by circuit id: memory first, then the cache directory, then extraction.
///
/// Single flight: concurrent first calls for one id extract (or load) once; the others wait
/// and share the result. Every entry holds a `Category::Pce` reservation of its resident
/// bytes; extraction is charged at its transient peak while it runs. Entries nobody holds
/// that have been idle for [`CacheConfig::min_idle`] are dropped when the budget's evictor
/// asks; a later call reloads the file rather than re-extracting.
pub struct PceCache {
    inner: Arc<Inner>,
    _registration: EvictorRegistration,
}

impl PceCache {
    /// Creates the cache and registers its evictor with `budget`.
    pub fn new(budget: Budget, config: CacheConfig) -> Result<Self, PceError> {
        if let Some(dir) = &config.dir {
            std::fs::create_dir_all(dir).map_err(|e| PceError::io(dir, e))?;
        }
        let inner = Arc::new(Inner {
            budget: budget.clone(),
            config,
            slots: Mutex::new(HashMap::new()),
            changed: Condvar::new(),
        });
        let registration = budget.register_evictor(Arc::new(CacheEvictor {
            inner: Arc::downgrade(&inner),
        }));
        Ok(PceCache {
            inner,
            _registration: registration,
        })
    }

    /// The file a circuit id is stored in (when the cache has a directory).
    pub fn path_for(&self, id: &str) -> Result<Option<PathBuf>, PceError> {
        let name = file_name_for(id)?;
        Ok(self.inner.config.dir.as_ref().map(|d| d.join(name)))
    }

    /// Returns the PCE for `key`, loading it from disk or recording `make_circuit()` (called
    /// at most once, only when extraction is needed) as required.
    pub fn get_or_extract<C, F>(
        &self,
        key: &CircuitKey,
        make_circuit: F,
    ) -> Result<PceHandle, PceError>
    where
        C: Circuit<Scalar>,
        F: FnOnce() -> C,
    {
        let path = self.path_for(&key.id)?;
        let inner = &*self.inner;
        let mut slots = inner.lock();
        loop {
            match slots.get(&key.id) {
                Some(Slot::Ready(e)) => {
                    if key.fingerprint.is_none_or(|f| f == e.pce.fingerprint()) {
                        metrics::counter!("pinion_pce_cache_hits_total").increment(1);
                        return Ok(PceHandle {
                            _hold: e.use_.hold(),
                            entry: e.clone(),
                            source: PceSource::Memory,
                        });
                    }
                    // Another version of the circuit: replace it (holders keep theirs). The
                    // old entry is dropped after the lock, since that may release bytes.
                    let old = slots.insert(key.id.clone(), Slot::Loading);
                    drop(slots);
                    drop(old);
                    break;
                }
                Some(Slot::Loading) => {
                    slots = inner.changed.wait(slots).unwrap_or_else(|e| e.into_inner());
                }
                None => {
                    slots.insert(key.id.clone(), Slot::Loading);
                    drop(slots);
                    break;
                }
            }
        }
        metrics::counter!("pinion_pce_cache_misses_total").increment(1);
        let mut guard = LoadingGuard {
            inner,
            id: &key.id,
            armed: true,
        };
        let (entry, source) = self.load_or_extract(key, path, make_circuit)?;
        let entry = Arc::new(entry);
        let handle = PceHandle {
            _hold: entry.use_.hold(),
            entry: entry.clone(),
            source,
        };
        {
            let mut slots = inner.lock();
            slots.insert(key.id.clone(), Slot::Ready(entry));
            inner.publish_gauge(&slots);
        }
        guard.armed = false;
        inner.changed.notify_all();
        Ok(handle)
    }

    fn load_or_extract<C, F>(
        &self,
        key: &CircuitKey,
        path: Option<PathBuf>,
        make_circuit: F,
    ) -> Result<(Entry, PceSource), PceError>
    where
        C: Circuit<Scalar>,
        F: FnOnce() -> C,
    {
        let inner = &*self.inner;
        let cfg = &inner.config;
        let entry_use = || EntryUse::with_budget(cfg.min_idle, inner.budget.clone());
        if let Some(path) = &path {
            match std::fs::metadata(path) {
                Ok(meta) => {
                    // The mapped sections become page cache as they are read: charge the file.
                    let mut reservation = self.reserve(meta.len(), "pce load", &key.id)?;
                    let loaded = if cfg.verify_on_load {
                        Pce::load(path, key.fingerprint.as_ref())
                    } else {
                        Pce::load_unchecked(path, key.fingerprint.as_ref())
                    };
                    match loaded {
                        Ok(pce) => {
                            reservation.shrink_to(pce.resident_bytes());
                            metrics::counter!("pinion_pce_disk_loads_total").increment(1);
                            return Ok((
                                Entry {
                                    pce,
                                    use_: entry_use(),
                                    reservation,
                                },
                                PceSource::Disk,
                            ));
                        }
                        Err(e) if e.is_stale_file() => {
                            // Never used: drop it and re-extract below.
                            metrics::counter!("pinion_pce_rejected_files_total").increment(1);
                            let _ = std::fs::remove_file(path);
                        }
                        Err(e) => return Err(e),
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(PceError::io(path, e)),
            }
        }

        let start = Instant::now();
        let reservation = self.reserve(cfg.extraction_initial_bytes, "pce extraction", &key.id)?;
        let (pce, reservation) = Recorder::record(make_circuit(), Some(reservation))?;
        let mut reservation = reservation.expect("recorder returns the reservation it was given");
        reservation.shrink_to(pce.resident_bytes());
        pce.record_metrics(start.elapsed());
        metrics::counter!("pinion_pce_extractions_total").increment(1);
        if let Some(want) = key.fingerprint {
            if want != pce.fingerprint() {
                return Err(PceError::FingerprintMismatch {
                    path: path.unwrap_or_default(),
                    expected: want,
                    found: pce.fingerprint(),
                });
            }
        }
        if let Some(path) = &path {
            // A failed write costs a re-extraction later, not this proof.
            if pce.write_to(path).is_err() {
                metrics::counter!("pinion_pce_write_errors_total").increment(1);
            }
        }
        Ok((
            Entry {
                pce,
                use_: entry_use(),
                reservation,
            },
            PceSource::Extracted,
        ))
    }

    fn reserve(&self, bytes: u64, what: &'static str, id: &str) -> Result<Reservation, PceError> {
        self.inner
            .budget
            .reserve(
                bytes,
                Category::Pce,
                format!("{what} {id}"),
                self.inner.config.admission_timeout,
            )
            .map_err(|source| PceError::Budget {
                what,
                requested_bytes: bytes,
                source,
            })
    }

    /// Drops the in-memory entry (holders keep theirs) and deletes the file.
    pub fn invalidate(&self, id: &str) -> Result<(), PceError> {
        let path = self.path_for(id)?;
        let removed = {
            let mut slots = self.inner.lock();
            match slots.get(id) {
                Some(Slot::Ready(_)) => slots.remove(id),
                _ => None,
            }
        };
        drop(removed);
        if let Some(path) = path {
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(PceError::io(path, e)),
            }
        }
        Ok(())
    }

    /// Evicts idle, unheld entries until `at_least_bytes` are freed (what the budget's
    /// evictor does); returns the bytes freed.
    pub fn evict(&self, at_least_bytes: u64) -> u64 {
        self.inner.evict(at_least_bytes)
    }

    /// Whether a PCE for `id` is in memory.
    pub fn contains(&self, id: &str) -> bool {
        matches!(self.inner.lock().get(id), Some(Slot::Ready(_)))
    }
}
