//! A store of loaded parameter sets keyed by circuit id, with single-flight loads, tiers and
//! budget-driven LRU eviction.
//!
//! Tiers, fastest first: `Device` > `Pinned` > `Host` > `Mapped` > `Disk`. `Device`, `Pinned`
//! and `Host` entries hold converted bases and their reservation. A `Mapped` entry keeps only
//! the open, header-validated mapping (its pages were dropped behind the load, so it holds no
//! resident memory and no charge; a reload converts from the page cache). `Disk` keeps nothing
//! but the path. Eviction moves an entry down: resident -> `Mapped` -> `Disk`.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Duration;

use lru::LruCache;
use memory_budget::{Budget, Category, EntryHold, EntryUse, Evictor, EvictorRegistration};

use crate::error::{Result, SrsError};
use crate::layout::ParamsLayout;
use crate::load::{Destination, LoadOptions, LoadedParams, ParamsFile, VerifyingKeyRepr};

/// Where an entry's data lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tier {
    /// Device memory (VRAM).
    Device,
    /// Page-locked host memory.
    Pinned,
    /// Ordinary host memory.
    Host,
    /// An open mapping with validated headers; nothing converted or charged.
    Mapped,
    /// Known path only.
    Disk,
}

impl Tier {
    /// All tiers, fastest first.
    pub const ALL: [Tier; 5] = [
        Tier::Device,
        Tier::Pinned,
        Tier::Host,
        Tier::Mapped,
        Tier::Disk,
    ];

    /// Lowercase name (metrics label).
    pub fn name(self) -> &'static str {
        match self {
            Tier::Device => "device",
            Tier::Pinned => "pinned",
            Tier::Host => "host",
            Tier::Mapped => "mapped",
            Tier::Disk => "disk",
        }
    }

    fn index(self) -> usize {
        self as usize
    }

    fn of(destination: &Destination) -> Tier {
        match destination {
            Destination::Host => Tier::Host,
            Destination::Pinned(_) => Tier::Pinned,
            Destination::Device(_) => Tier::Device,
        }
    }
}

/// Whether two destinations are the same memory: the same tier, and for the device tier
/// the same device.
fn same_place(a: &Destination, b: &Destination) -> bool {
    match (a, b) {
        (Destination::Host, Destination::Host) => true,
        (Destination::Pinned(_), Destination::Pinned(_)) => true,
        (Destination::Device(x), Destination::Device(y)) => x.info().ordinal == y.info().ordinal,
        _ => false,
    }
}

/// What to load for a circuit.
#[derive(Clone, Debug)]
pub struct SrsSpec {
    /// Key of the entry.
    pub circuit_id: String,
    /// Parameter file.
    pub path: PathBuf,
    /// Checks, expected sizes, destination.
    pub options: LoadOptions,
}

impl SrsSpec {
    /// A spec with default options (host memory, encoding and curve checks).
    pub fn new(circuit_id: impl Into<String>, path: impl Into<PathBuf>) -> Self {
        SrsSpec {
            circuit_id: circuit_id.into(),
            path: path.into(),
            options: LoadOptions::default(),
        }
    }
}

/// Store settings.
#[derive(Clone, Debug)]
pub struct StoreConfig {
    /// An unheld entry must be idle this long before the budget's evictor may drop it.
    pub min_idle: Duration,
    /// How long a load waits for the budget (`None`: forever; zero: evict but do not wait).
    pub reserve_timeout: Option<Duration>,
    /// Most `Mapped` entries kept; beyond it the least recently used falls to `Disk`.
    pub max_mapped_entries: usize,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            min_idle: memory_budget::DEFAULT_MIN_IDLE,
            reserve_timeout: Some(Duration::ZERO),
            max_mapped_entries: 16,
        }
    }
}

/// Identity of the file an entry was loaded from; a change means the entry is stale.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Fingerprint {
    dev: u64,
    ino: u64,
    len: u64,
    mtime_ns: i128,
}

fn fingerprint(path: &Path) -> Result<Fingerprint> {
    let m = std::fs::metadata(path).map_err(|source| SrsError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(Fingerprint {
        dev: m.dev(),
        ino: m.ino(),
        len: m.len(),
        mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
    })
}

/// A loaded entry shared by the store and its handles.
#[derive(Debug)]
struct Resident {
    params: LoadedParams,
    /// The file it was loaded from; `None` for parameters made in memory, which have no
    /// lower tier to fall back to and are never demoted by the budget.
    file: Option<Arc<ParamsFile>>,
    usage: Arc<EntryUse>,
    tier: Tier,
}

/// A shared, held reference to loaded parameters. While any handle exists the entry is
/// never evicted by the budget; dropping the last handle of an explicitly evicted entry frees
/// its memory and its reservation.
#[derive(Debug)]
pub struct SrsHandle {
    resident: Arc<Resident>,
    _hold: EntryHold,
}

impl SrsHandle {
    /// The tier the data lives in.
    pub fn tier(&self) -> Tier {
        self.resident.tier
    }
}

impl std::ops::Deref for SrsHandle {
    type Target = LoadedParams;
    fn deref(&self) -> &LoadedParams {
        &self.resident.params
    }
}

impl Clone for SrsHandle {
    fn clone(&self) -> Self {
        SrsHandle {
            resident: Arc::clone(&self.resident),
            _hold: self.resident.usage.hold(),
        }
    }
}

/// One load in progress that others may wait on.
#[derive(Debug, Default)]
struct Flight {
    done: Mutex<Option<std::result::Result<Arc<Resident>, String>>>,
    cv: Condvar,
}

impl Flight {
    fn finish(&self, outcome: std::result::Result<Arc<Resident>, String>) {
        *self.done.lock().unwrap_or_else(|e| e.into_inner()) = Some(outcome);
        self.cv.notify_all();
    }

    fn wait(&self) -> std::result::Result<Arc<Resident>, String> {
        let mut g = self.done.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(outcome) = g.as_ref() {
                return outcome.clone();
            }
            g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// Finishes a flight whose leader unwound, so waiters do not wait forever.
struct LeaderGuard<'a> {
    inner: &'a Inner,
    id: &'a str,
    flight: &'a Arc<Flight>,
    armed: bool,
}

impl Drop for LeaderGuard<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        {
            let mut st = self.inner.lock();
            let ours = matches!(st.entries.get(self.id), Some(Entry { slot: Slot::Loading(f), .. }) if Arc::ptr_eq(f, self.flight));
            if ours {
                st.entries.remove(self.id);
                st.set_tier(self.id, None);
            }
        }
        self.flight
            .finish(Err("the loading thread panicked".to_string()));
    }
}

#[derive(Debug)]
enum Slot {
    Loading(Arc<Flight>),
    Resident(Arc<Resident>),
    Mapped(Arc<ParamsFile>),
    Disk,
}

#[derive(Debug)]
struct Entry {
    path: PathBuf,
    /// `None` for an entry made in memory (no file).
    fingerprint: Option<Fingerprint>,
    slot: Slot,
}

struct State {
    entries: HashMap<String, Entry>,
    /// One LRU order per tier (keys only; the entries map owns the data).
    lru: [LruCache<String, ()>; 5],
}

impl State {
    fn set_tier(&mut self, id: &str, tier: Option<Tier>) {
        for (i, l) in self.lru.iter_mut().enumerate() {
            if Some(i) == tier.map(Tier::index) {
                l.put(id.to_string(), ());
            } else {
                l.pop(id);
            }
        }
    }

    fn tier_bytes(&self) -> [u64; 5] {
        let mut out = [0u64; 5];
        for e in self.entries.values() {
            match &e.slot {
                Slot::Resident(r) if r.tier == Tier::Device => {
                    out[r.tier.index()] += r.params.device_bytes()
                }
                Slot::Resident(r) => out[r.tier.index()] += r.params.charged_bytes(),
                Slot::Mapped(f) => out[Tier::Mapped.index()] += f.layout().file_bytes(),
                Slot::Loading(_) | Slot::Disk => {}
            }
        }
        out
    }
}

struct Inner {
    budget: Budget,
    config: StoreConfig,
    state: Mutex<State>,
    registration: OnceLock<EvictorRegistration>,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Store figures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Bytes per tier, indexed like [`Tier::ALL`] (device: VRAM bytes; pinned and host:
    /// charged host bytes; mapped: file bytes).
    pub tier_bytes: [u64; 5],
    /// Entries known.
    pub n_entries: usize,
}

/// One entry as [`SrsStore::entries`] reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryStatus {
    /// Its key.
    pub circuit_id: String,
    /// Where its data is.
    pub tier: Tier,
    /// Device tier: VRAM bytes; pinned and host: charged host bytes; mapped: file bytes;
    /// disk: 0.
    pub bytes: u64,
    /// Handles holding it now (proofs using it); 0 for mapped and disk entries.
    pub n_holders: usize,
}

/// The store. Cheap to clone; clones share entries.
#[derive(Clone)]
pub struct SrsStore {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for SrsStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SrsStore")
            .field("stats", &self.stats())
            .finish()
    }
}

struct StoreEvictor {
    inner: Weak<Inner>,
}

impl Evictor for StoreEvictor {
    fn name(&self) -> &str {
        "srs-store"
    }

    fn evict(&self, at_least_bytes: u64) -> u64 {
        match self.inner.upgrade() {
            Some(inner) => evict_idle(
                &inner,
                at_least_bytes,
                &HOST_TIERS,
                LoadedParams::charged_bytes,
            ),
            None => 0,
        }
    }

    fn reclaimable_bytes(&self) -> u64 {
        self.inner.upgrade().map_or(0, |inner| {
            unheld_bytes(&inner, &HOST_TIERS, LoadedParams::charged_bytes)
        })
    }
}

/// Bytes (as measured by `bytes_of`) of the resident entries of `tiers` that
/// [`evict_idle`] could demote once idle long enough: nobody holds them and they have a
/// file to come back from.
fn unheld_bytes(inner: &Inner, tiers: &[Tier], bytes_of: fn(&LoadedParams) -> u64) -> u64 {
    let st = inner.lock();
    st.entries
        .values()
        .filter_map(|entry| match &entry.slot {
            Slot::Resident(r)
                if tiers.contains(&r.tier) && r.usage.n_holders() == 0 && r.file.is_some() =>
            {
                Some(bytes_of(&r.params))
            }
            _ => None,
        })
        .sum()
}

/// Demotes idle, unheld resident entries of `tiers` (least recently used first) to
/// `Mapped` until `at_least_bytes` (as measured by `bytes_of`) are freed. Entries are
/// dropped after the store lock is released. Straight to `Mapped`, not one tier down:
/// this runs inside a budget's wait for room, where copying a device entry into pinned or
/// host memory would allocate what the budget is trying to free.
fn evict_idle(
    inner: &Inner,
    at_least_bytes: u64,
    tiers: &[Tier],
    bytes_of: fn(&LoadedParams) -> u64,
) -> u64 {
    let mut victims = Vec::new();
    let mut freed = 0u64;
    {
        let mut st = inner.lock();
        for &tier in tiers {
            let candidates: Vec<String> = st.lru[tier.index()]
                .iter()
                .rev()
                .map(|(k, _)| k.clone())
                .collect();
            for id in candidates {
                if freed >= at_least_bytes {
                    break;
                }
                let Some(entry) = st.entries.get_mut(&id) else {
                    continue;
                };
                let Slot::Resident(r) = &entry.slot else {
                    continue;
                };
                if !r.usage.is_evictable() {
                    continue;
                }
                // Parameters made in memory cannot be brought back: never demoted.
                let Some(file) = r.file.clone() else {
                    continue;
                };
                let Slot::Resident(r) = std::mem::replace(&mut entry.slot, Slot::Mapped(file))
                else {
                    continue;
                };
                freed += bytes_of(&r.params);
                victims.push(r);
                st.set_tier(&id, Some(Tier::Mapped));
                crate::metrics::evicted("budget");
            }
        }
        trim_mapped(&mut st, inner.config.max_mapped_entries);
        publish_tiers(&st);
    }
    drop(victims);
    freed
}

/// Host-budget tiers: pinned and pageable host entries.
const HOST_TIERS: [Tier; 2] = [Tier::Host, Tier::Pinned];

/// Evicts device entries for a GPU's VRAM budget.
struct DeviceEvictor {
    inner: Weak<Inner>,
}

impl Evictor for DeviceEvictor {
    fn name(&self) -> &str {
        "srs-store-device"
    }

    fn evict(&self, at_least_bytes: u64) -> u64 {
        match self.inner.upgrade() {
            Some(inner) => evict_idle(
                &inner,
                at_least_bytes,
                &[Tier::Device],
                LoadedParams::device_bytes,
            ),
            None => 0,
        }
    }
}

fn trim_mapped(st: &mut State, max: usize) {
    while st.lru[Tier::Mapped.index()].len() > max {
        let Some((id, ())) = st.lru[Tier::Mapped.index()].pop_lru() else {
            break;
        };
        if let Some(e) = st.entries.get_mut(&id) {
            e.slot = Slot::Disk;
        }
        st.set_tier(&id, Some(Tier::Disk));
    }
}

fn publish_tiers(st: &State) {
    let bytes = st.tier_bytes();
    for t in Tier::ALL {
        crate::metrics::tier_bytes(t, bytes[t.index()]);
    }
}

impl SrsStore {
    /// A store charging `budget` (category `Srs`), whose evictor is registered with it.
    pub fn new(budget: Budget, config: StoreConfig) -> Self {
        let inner = Arc::new(Inner {
            budget: budget.clone(),
            config,
            state: Mutex::new(State {
                entries: HashMap::new(),
                lru: std::array::from_fn(|_| LruCache::unbounded()),
            }),
            registration: OnceLock::new(),
        });
        let evictor: Arc<dyn Evictor> = Arc::new(StoreEvictor {
            inner: Arc::downgrade(&inner),
        });
        let _ = inner.registration.set(budget.register_evictor(evictor));
        SrsStore { inner }
    }

    /// Returns a held handle on the circuit's parameters, loading them if needed. Concurrent
    /// callers for the same id wait for one load; if it fails they get
    /// [`SrsError::ConcurrentLoadFailed`]. A changed file (device, inode, size or mtime)
    /// makes the cached entry stale and triggers a reload.
    pub fn get_or_load(&self, spec: &SrsSpec) -> Result<SrsHandle> {
        if let Some(handle) = self.in_memory_handle(spec)? {
            return Ok(handle);
        }
        let fp = fingerprint(&spec.path)?;
        let id = spec.circuit_id.as_str();
        let (flight, reuse_file) = {
            let mut st = self.inner.lock();
            let mut reuse_file = None;
            if let Some(e) = st.entries.get(id) {
                if e.fingerprint == Some(fp) && e.path == spec.path {
                    match &e.slot {
                        Slot::Resident(r)
                            if same_place(r.params.destination(), &spec.options.destination) =>
                        {
                            let r = Arc::clone(r);
                            let hold = r.usage.hold();
                            st.lru[r.tier.index()].promote(id);
                            crate::metrics::hit();
                            return Ok(SrsHandle {
                                resident: r,
                                _hold: hold,
                            });
                        }
                        Slot::Loading(f) => {
                            let f = Arc::clone(f);
                            drop(st);
                            crate::metrics::miss();
                            return match f.wait() {
                                Ok(r) => {
                                    let hold = r.usage.hold();
                                    Ok(SrsHandle {
                                        resident: r,
                                        _hold: hold,
                                    })
                                }
                                Err(reason) => Err(SrsError::ConcurrentLoadFailed {
                                    circuit_id: id.to_string(),
                                    reason,
                                }),
                            };
                        }
                        Slot::Mapped(f) => reuse_file = Some(Arc::clone(f)),
                        Slot::Resident(_) | Slot::Disk => {}
                    }
                }
            }
            crate::metrics::miss();
            let flight = Arc::new(Flight::default());
            st.entries.insert(
                id.to_string(),
                Entry {
                    path: spec.path.clone(),
                    fingerprint: Some(fp),
                    slot: Slot::Loading(Arc::clone(&flight)),
                },
            );
            st.set_tier(id, None);
            (flight, reuse_file)
        };

        // Load with no store lock held: reserving may run our own evictor. The guard wakes
        // waiters and clears the entry should the load unwind.
        let mut guard = LeaderGuard {
            inner: &self.inner,
            id,
            flight: &flight,
            armed: true,
        };
        let outcome = self.load_entry(spec, reuse_file.clone());
        guard.armed = false;
        let mut st = self.inner.lock();
        let still_ours = matches!(st.entries.get(id), Some(Entry { slot: Slot::Loading(f), .. }) if Arc::ptr_eq(f, &flight));
        let result = match outcome {
            Ok(resident) => {
                let hold = resident.usage.hold();
                if still_ours {
                    if let Some(e) = st.entries.get_mut(id) {
                        e.slot = Slot::Resident(Arc::clone(&resident));
                    }
                    st.set_tier(id, Some(resident.tier));
                }
                flight.finish(Ok(Arc::clone(&resident)));
                Ok(SrsHandle {
                    resident,
                    _hold: hold,
                })
            }
            Err(err) => {
                if still_ours {
                    // A mapped entry keeps its mapping; anything else is forgotten.
                    match reuse_file {
                        Some(file) => {
                            if let Some(e) = st.entries.get_mut(id) {
                                e.slot = Slot::Mapped(file);
                            }
                            st.set_tier(id, Some(Tier::Mapped));
                        }
                        None => {
                            st.entries.remove(id);
                            st.set_tier(id, None);
                        }
                    }
                }
                flight.finish(Err(err.to_string()));
                Err(err)
            }
        };
        publish_tiers(&st);
        result
    }

    fn load_entry(
        &self,
        spec: &SrsSpec,
        reuse_file: Option<Arc<ParamsFile>>,
    ) -> Result<Arc<Resident>> {
        let file = match reuse_file {
            Some(f) => f,
            None => Arc::new(ParamsFile::open(&spec.path)?),
        };
        file.layout().check_expected(&spec.options.expected)?;
        let plan = file.plan(&spec.options);
        let label = format!("srs {}", spec.circuit_id);
        let reservation = self
            .inner
            .budget
            .reserve(
                plan.peak_bytes(),
                Category::Srs,
                label.clone(),
                self.inner.config.reserve_timeout,
            )
            .map_err(|source| SrsError::Budget {
                requested_bytes: plan.peak_bytes(),
                label,
                source,
            })?;
        let params = file.load_reserved(reservation, &spec.options)?;
        Ok(Arc::new(Resident {
            tier: Tier::of(params.destination()),
            params,
            file: Some(file),
            usage: EntryUse::with_budget(self.inner.config.min_idle, self.inner.budget.clone()),
        }))
    }

    /// Loads the entry if needed and keeps it resident without holding it.
    pub fn preload(&self, spec: &SrsSpec) -> Result<Tier> {
        self.get_or_load(spec).map(|h| h.tier())
    }

    /// Explicitly demotes an entry to `Mapped` (or `Disk` with `to_disk`), whether or not it
    /// is held: holders keep their data until their last handle drops, which then frees the
    /// memory and its reservation. Returns the bytes released now (zero while held).
    pub fn evict(&self, circuit_id: &str, to_disk: bool) -> Result<u64> {
        let victim = {
            let mut st = self.inner.lock();
            let in_memory = st
                .entries
                .get(circuit_id)
                .ok_or_else(|| SrsError::UnknownCircuit {
                    circuit_id: circuit_id.to_string(),
                })?
                .fingerprint
                .is_none();
            if in_memory {
                // Made in memory: nothing to demote to, so the entry is forgotten.
                let old = st.entries.remove(circuit_id).map(|e| e.slot);
                st.set_tier(circuit_id, None);
                publish_tiers(&st);
                old.unwrap_or(Slot::Disk)
            } else {
                let Some(entry) = st.entries.get_mut(circuit_id) else {
                    return Ok(0);
                };
                let next = match (&entry.slot, to_disk) {
                    (Slot::Loading(_), _) => return Ok(0),
                    (_, true) => Slot::Disk,
                    (Slot::Resident(r), false) => match &r.file {
                        Some(f) => Slot::Mapped(Arc::clone(f)),
                        None => Slot::Disk,
                    },
                    (Slot::Mapped(f), false) => Slot::Mapped(Arc::clone(f)),
                    (Slot::Disk, false) => Slot::Disk,
                };
                let tier = if matches!(next, Slot::Disk) {
                    Tier::Disk
                } else {
                    Tier::Mapped
                };
                let old = std::mem::replace(&mut entry.slot, next);
                st.set_tier(circuit_id, Some(tier));
                trim_mapped(&mut st, self.inner.config.max_mapped_entries);
                publish_tiers(&st);
                old
            }
        };
        let freed = match victim {
            Slot::Resident(r) => {
                crate::metrics::evicted("explicit");
                match Arc::try_unwrap(r) {
                    Ok(r) if r.tier == Tier::Device => r.params.device_bytes(),
                    Ok(r) => r.params.charged_bytes(),
                    Err(_) => 0,
                }
            }
            _ => 0,
        };
        Ok(freed)
    }

    /// Asks the store to free `at_least_bytes` from idle, unheld entries, as the budget would.
    pub fn evict_idle(&self, at_least_bytes: u64) -> u64 {
        evict_idle(
            &self.inner,
            at_least_bytes,
            &HOST_TIERS,
            LoadedParams::charged_bytes,
        )
    }

    /// Registers an evictor with `gpu`'s VRAM budget so device-tier entries are demoted
    /// (idle and unheld only) when a VRAM reservation does not fit. Call once per GPU the
    /// store loads onto; dropping the returned registration unregisters it.
    pub fn register_device_budget(&self, gpu: &gpu_device::Gpu) -> EvictorRegistration {
        let evictor: Arc<dyn Evictor> = Arc::new(DeviceEvictor {
            inner: Arc::downgrade(&self.inner),
        });
        gpu.vram_budget().register_evictor(evictor)
    }

    /// The verifying key, without loading the rest: from memory when resident, else read and
    /// fully checked from the file's first bytes.
    pub fn verifying_key(&self, spec: &SrsSpec) -> Result<VerifyingKeyRepr> {
        if let Some(r) = self.in_memory_resident(spec)? {
            return Ok(r.params.vk().clone());
        }
        let fp = fingerprint(&spec.path)?;
        let file = {
            let st = self.inner.lock();
            match st.entries.get(&spec.circuit_id) {
                Some(e) if e.fingerprint == Some(fp) && e.path == spec.path => match &e.slot {
                    Slot::Resident(r) => return Ok(r.params.vk().clone()),
                    Slot::Mapped(f) => Some(Arc::clone(f)),
                    _ => None,
                },
                _ => None,
            }
        };
        match file {
            Some(f) => f.verifying_key(),
            None => read_verifying_key(&spec.path),
        }
    }

    /// The layout of `spec`'s parameters: from memory for an entry made in memory, else
    /// from the file's headers (nothing loaded).
    pub fn layout(&self, spec: &SrsSpec) -> Result<ParamsLayout> {
        match self.in_memory_resident(spec)? {
            Some(r) => Ok(*r.params.layout()),
            None => Ok(*ParamsFile::open(&spec.path)?.layout()),
        }
    }

    /// Adds parameters made in memory ([`LoadedParams::in_memory`]) as the entry
    /// `circuit_id`, and returns the spec that names it (its path is
    /// `memory:<circuit_id>`, no file; its destination is where the bases are). The entry
    /// lives in that one tier: the budget's evictors never demote it (there is no file to
    /// bring it back from), a request for another tier is [`SrsError::InMemory`], and
    /// [`SrsStore::evict`] forgets it (its memory is freed when the last handle drops).
    /// An id the store already knows is refused.
    pub fn insert_in_memory(
        &self,
        circuit_id: impl Into<String>,
        params: LoadedParams,
    ) -> Result<SrsSpec> {
        let circuit_id = circuit_id.into();
        let path = PathBuf::from(format!("memory:{circuit_id}"));
        let mut st = self.inner.lock();
        if st.entries.contains_key(&circuit_id) {
            return Err(SrsError::InMemory {
                circuit_id,
                reason: "the store already has an entry of that id".into(),
            });
        }
        let destination = params.destination().clone();
        let resident = Arc::new(Resident {
            tier: Tier::of(&destination),
            params,
            file: None,
            usage: EntryUse::with_budget(self.inner.config.min_idle, self.inner.budget.clone()),
        });
        let tier = resident.tier;
        st.entries.insert(
            circuit_id.clone(),
            Entry {
                path: path.clone(),
                fingerprint: None,
                slot: Slot::Resident(resident),
            },
        );
        st.set_tier(&circuit_id, Some(tier));
        publish_tiers(&st);
        let mut spec = SrsSpec::new(circuit_id, path);
        spec.options.destination = destination;
        Ok(spec)
    }

    /// The resident entry `spec` names when it was made in memory (`None` for a file's).
    fn in_memory_resident(&self, spec: &SrsSpec) -> Result<Option<Arc<Resident>>> {
        let st = self.inner.lock();
        match st.entries.get(&spec.circuit_id) {
            Some(e) if e.fingerprint.is_none() && e.path == spec.path => match &e.slot {
                Slot::Resident(r) => Ok(Some(Arc::clone(r))),
                _ => Err(SrsError::InMemory {
                    circuit_id: spec.circuit_id.clone(),
                    reason: "the entry was evicted".into(),
                }),
            },
            _ => Ok(None),
        }
    }

    /// A held handle on an entry made in memory, when `spec` names one: only in the
    /// tier it was made in.
    fn in_memory_handle(&self, spec: &SrsSpec) -> Result<Option<SrsHandle>> {
        let Some(r) = self.in_memory_resident(spec)? else {
            return Ok(None);
        };
        if !same_place(r.params.destination(), &spec.options.destination) {
            return Err(SrsError::InMemory {
                circuit_id: spec.circuit_id.clone(),
                reason: format!(
                    "made in {} memory, asked for {} (no file to load that tier from)",
                    r.params.destination().name(),
                    spec.options.destination.name()
                ),
            });
        }
        let hold = r.usage.hold();
        self.inner.lock().lru[r.tier.index()].promote(&spec.circuit_id);
        crate::metrics::hit();
        Ok(Some(SrsHandle {
            resident: r,
            _hold: hold,
        }))
    }

    /// The tier an entry is in, if known.
    pub fn tier_of(&self, circuit_id: &str) -> Option<Tier> {
        let st = self.inner.lock();
        st.entries.get(circuit_id).and_then(|e| match &e.slot {
            Slot::Resident(r) => Some(r.tier),
            Slot::Mapped(_) => Some(Tier::Mapped),
            Slot::Disk => Some(Tier::Disk),
            Slot::Loading(_) => None,
        })
    }

    /// Every known entry: its tier, bytes and holders (loads in flight are left out).
    pub fn entries(&self) -> Vec<EntryStatus> {
        let st = self.inner.lock();
        let mut out: Vec<EntryStatus> = st
            .entries
            .iter()
            .filter_map(|(id, e)| {
                let (tier, bytes, n_holders) = match &e.slot {
                    Slot::Resident(r) if r.tier == Tier::Device => {
                        (r.tier, r.params.device_bytes(), r.usage.n_holders())
                    }
                    Slot::Resident(r) => (r.tier, r.params.charged_bytes(), r.usage.n_holders()),
                    Slot::Mapped(f) => (Tier::Mapped, f.layout().file_bytes(), 0),
                    Slot::Disk => (Tier::Disk, 0, 0),
                    Slot::Loading(_) => return None,
                };
                Some(EntryStatus {
                    circuit_id: id.clone(),
                    tier,
                    bytes,
                    n_holders,
                })
            })
            .collect();
        out.sort_by(|a, b| a.circuit_id.cmp(&b.circuit_id));
        out
    }

    /// Bytes per tier and entry count.
    pub fn stats(&self) -> StoreStats {
        let st = self.inner.lock();
        StoreStats {
            tier_bytes: st.tier_bytes(),
            n_entries: st.entries.len(),
        }
    }

    /// Bytes held in one tier.
    pub fn tier_bytes(&self, tier: Tier) -> u64 {
        self.stats().tier_bytes[tier.index()]
    }
}

/// Reads and fully checks only the verifying key of a parameter file.
pub fn read_verifying_key(path: impl AsRef<Path>) -> Result<VerifyingKeyRepr> {
    ParamsFile::open(path)?.verifying_key()
}
