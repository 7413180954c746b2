//! The device PCEs a backend keeps, as LRU-evicted residents: a short list of shared
//! entries, most recently used last, each stamped when a proof last took it. An entry no
//! proof holds (the list's `Arc` is its only one) is idle; idle entries give their VRAM back
//! when the device's VRAM budget runs short (the backend registers an evictor for them),
//! and at once when the backend itself needs the room for a proof.
//!
//! Generic over the entry so that the policy is tested without a device.

use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use memory_budget::Evictor;

/// How long a device PCE stays unused before the VRAM budget's evictor may drop it. Short
/// next to srs-store's keys: a dropped PCE is uploaded again from the host's copy (a copy of
/// a few GiB), a key is read again from its file.
pub(super) const DEVICE_PCE_MIN_IDLE: Duration = Duration::from_secs(30);

/// Device bytes an entry holds.
pub(super) trait DeviceBytes {
    fn device_bytes(&self) -> u64;
}

/// A list of at most `max` shared entries, least recently used first.
pub(super) struct Resident<T> {
    entries: Vec<(Arc<T>, Instant)>,
    max: usize,
}

impl<T: DeviceBytes> Resident<T> {
    pub(super) fn new(max: usize) -> Resident<T> {
        Resident {
            entries: Vec::new(),
            max: max.max(1),
        }
    }

    /// The entry `is` picks, made the most recently used and stamped `now`.
    pub(super) fn take(&mut self, is: impl Fn(&T) -> bool, now: Instant) -> Option<Arc<T>> {
        let i = self.entries.iter().position(|(e, _)| is(e))?;
        let (e, _) = self.entries.remove(i);
        self.entries.push((e.clone(), now));
        Some(e)
    }

    /// Adds `e` as the most recently used, stamped `now`; beyond `max` entries the least
    /// recently used ones leave the list (one a proof holds lives on with that proof).
    pub(super) fn push(&mut self, e: Arc<T>, now: Instant) {
        self.entries.push((e, now));
        while self.entries.len() > self.max {
            self.entries.remove(0);
        }
    }

    /// Device bytes of the entries in the list.
    pub(super) fn bytes(&self) -> u64 {
        self.entries.iter().map(|(e, _)| e.device_bytes()).sum()
    }

    /// Drops every idle entry now (no proof holds it), whenever it was last taken; returns
    /// the bytes freed.
    pub(super) fn drop_idle(&mut self) -> u64 {
        self.evict_idle(u64::MAX, Duration::ZERO, Instant::now())
    }

    /// Drops idle entries (no proof holds them) last taken at least `min_idle` before
    /// `now`, least recently used first, until `at_least_bytes` are freed; returns the
    /// bytes freed (their VRAM is returned as the entries drop).
    pub(super) fn evict_idle(
        &mut self,
        at_least_bytes: u64,
        min_idle: Duration,
        now: Instant,
    ) -> u64 {
        let mut freed = 0u64;
        let mut i = 0;
        while i < self.entries.len() && freed < at_least_bytes {
            let (e, used) = &self.entries[i];
            if Arc::strong_count(e) == 1 && now.saturating_duration_since(*used) >= min_idle {
                freed += e.device_bytes();
                self.entries.remove(i);
            } else {
                i += 1;
            }
        }
        freed
    }
}

/// The VRAM budget's evictor for a backend's idle device PCEs (idle for
/// [`DEVICE_PCE_MIN_IDLE`] at least). Gives up (frees nothing) when the list is busy:
/// the thread asking may be the one that holds it.
pub(super) struct IdleEvictor<T> {
    pub(super) list: Weak<Mutex<Resident<T>>>,
    pub(super) min_idle: Duration,
}

impl<T: DeviceBytes + Send + Sync> Evictor for IdleEvictor<T> {
    fn name(&self) -> &str {
        "groth16-prover-device-pce"
    }

    /// A device PCE comes back by a copy of the host's PCE: the VRAM budget asks this
    /// evictor before srs-store's, whose keys come back from their files.
    fn refill_cost(&self) -> memory_budget::RefillCost {
        memory_budget::RefillCost::Cheap
    }

    fn evict(&self, at_least_bytes: u64) -> u64 {
        let Some(list) = self.list.upgrade() else {
            return 0;
        };
        let Ok(mut list) = list.try_lock() else {
            return 0;
        };
        list.evict_idle(at_least_bytes, self.min_idle, Instant::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Entry {
        id: u32,
        bytes: u64,
    }

    impl DeviceBytes for Entry {
        fn device_bytes(&self) -> u64 {
            self.bytes
        }
    }

    fn ids(r: &Resident<Entry>) -> Vec<u32> {
        r.entries.iter().map(|(e, _)| e.id).collect()
    }

    fn entry(id: u32, bytes: u64) -> Arc<Entry> {
        Arc::new(Entry { id, bytes })
    }

    #[test]
    fn take_moves_to_the_back_and_push_keeps_the_most_recent() {
        let t0 = Instant::now();
        let mut r = Resident::new(3);
        for id in 1..=3 {
            r.push(entry(id, 10 * u64::from(id)), t0);
        }
        assert_eq!(ids(&r), [1, 2, 3]);
        assert_eq!(r.take(|e| e.id == 1, t0).map(|e| e.id), Some(1));
        assert_eq!(ids(&r), [2, 3, 1]);
        assert!(r.take(|e| e.id == 9, t0).is_none());
        r.push(entry(4, 40), t0);
        assert_eq!(ids(&r), [3, 1, 4], "the least recently used left");
        assert_eq!(r.bytes(), 30 + 10 + 40);
        assert_eq!(Resident::<Entry>::new(0).max, 1);
    }

    #[test]
    fn eviction_drops_only_idle_entries_least_recently_used_first() {
        let t0 = Instant::now();
        let later = t0 + Duration::from_secs(60);
        let mut r = Resident::new(4);
        for id in 1..=4 {
            r.push(entry(id, 100), t0);
        }
        // A proof holds 1; 3 was taken again just now.
        let held = r.take(|e| e.id == 1, t0).expect("entry 1");
        r.take(|e| e.id == 3, later).expect("entry 3");
        assert_eq!(ids(&r), [2, 4, 1, 3]);
        // Not idle long enough: nothing.
        assert_eq!(r.evict_idle(u64::MAX, Duration::from_secs(120), later), 0);
        // 150 bytes asked: 2 (least recently used, idle) and 4; 1 is held, 3 too recent.
        assert_eq!(r.evict_idle(150, Duration::from_secs(30), later), 200);
        assert_eq!(ids(&r), [1, 3]);
        // Everything idle, no minimum: 3 goes, the held 1 stays.
        assert_eq!(r.evict_idle(u64::MAX, Duration::ZERO, later), 100);
        assert_eq!(ids(&r), [1]);
        drop(held);
        assert_eq!(r.drop_idle(), 100);
        assert!(ids(&r).is_empty());
        assert_eq!(r.evict_idle(1, Duration::ZERO, later), 0);
    }

    #[test]
    fn the_evictor_frees_idle_entries_and_gives_up_on_a_busy_list() {
        let list = Arc::new(Mutex::new(Resident::new(3)));
        let t0 = Instant::now();
        list.lock().unwrap().push(entry(1, 64), t0);
        list.lock().unwrap().push(entry(2, 32), t0);
        let recent = IdleEvictor {
            list: Arc::downgrade(&list),
            min_idle: DEVICE_PCE_MIN_IDLE,
        };
        assert_eq!(recent.evict(u64::MAX), 0, "used just now");
        let ev = IdleEvictor {
            list: Arc::downgrade(&list),
            min_idle: Duration::ZERO,
        };
        {
            let _busy = list.lock().unwrap();
            assert_eq!(ev.evict(1), 0, "a busy list is left alone");
        }
        assert_eq!(ev.evict(1), 64);
        assert_eq!(ev.evict(u64::MAX), 32);
        assert_eq!(ev.evict(u64::MAX), 0);
        assert_eq!(ev.refill_cost(), memory_budget::RefillCost::Cheap);
        drop(list);
        assert_eq!(ev.evict(1), 0, "the backend is gone");
    }
}
