//! Shared test helpers: seeds and copied kernel-file trees.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use rand::rngs::StdRng;
use rand::SeedableRng;

/// Seed from `PINION_SEED` or the clock, printed so a failure replays.
pub fn seeded_rng(test: &str) -> StdRng {
    let seed = std::env::var("PINION_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        });
    eprintln!("{test}: seed = {seed}");
    StdRng::seed_from_u64(seed)
}

/// A directory tree standing in for `/` (deleted on drop).
pub struct Tree {
    pub root: PathBuf,
}

impl Tree {
    pub fn new(name: &str) -> Tree {
        static N: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let root = std::env::temp_dir().join(format!(
            "memory-budget-{name}-{}-{}-{nanos}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&root).expect("create temp tree");
        Tree { root }
    }

    /// Writes `text` at in-tree absolute path `abs`.
    pub fn write(&self, abs: &str, text: &str) -> &Tree {
        let p = self.path(abs);
        std::fs::create_dir_all(p.parent().expect("has parent")).expect("mkdir");
        std::fs::write(&p, text).expect("write");
        self
    }

    pub fn mkdir(&self, abs: &str) -> &Tree {
        std::fs::create_dir_all(self.path(abs)).expect("mkdir");
        self
    }

    pub fn path(&self, abs: &str) -> PathBuf {
        self.root.join(abs.trim_start_matches('/'))
    }

    pub fn meminfo(&self, total_bytes: u64, available_bytes: u64, free_bytes: u64) -> &Tree {
        self.write(
            "/proc/meminfo",
            &format!(
                "MemTotal:       {} kB\nMemFree:        {} kB\nMemAvailable:   {} kB\nBuffers:  0 kB\nCached:   0 kB\n",
                total_bytes / 1024,
                free_bytes / 1024,
                available_bytes / 1024
            ),
        )
    }

    /// A cgroup2 mount at /sys/fs/cgroup and the process at `path`.
    pub fn cgroup_v2(&self, path: &str) -> &Tree {
        self.write("/proc/self/cgroup", &format!("0::{path}\n"));
        self.write(
            "/proc/self/mountinfo",
            "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n\
             30 22 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n",
        );
        self.write(
            "/sys/fs/cgroup/cgroup.controllers",
            "cpuset cpu io memory pids\n",
        );
        self.mkdir(&format!("/sys/fs/cgroup{path}"))
    }

    /// A cgroup v1 memory mount whose mount root is `mount_root`, the process at `path`.
    pub fn cgroup_v1(&self, path: &str, mount_root: &str) -> &Tree {
        self.write(
            "/proc/self/cgroup",
            &format!("12:cpu,cpuacct:{path}\n4:memory:{path}\n1:name=systemd:{path}\n"),
        );
        self.write(
            "/proc/self/mountinfo",
            &format!(
                "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n\
                 31 22 0:27 {mount_root} /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:9 - cgroup cgroup rw,memory\n\
                 32 22 0:28 {mount_root} /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:10 - cgroup cgroup rw,cpu,cpuacct\n"
            ),
        )
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// A page-aligned random size in `[lo, hi)`.
pub fn pages(rng: &mut StdRng, lo: u64, hi: u64) -> u64 {
    use rand::RngExt;
    rng.random_range(lo..hi) & !4095
}

pub fn assert_path_ends(p: &Path, suffix: &str) {
    assert!(
        p.ends_with(suffix.trim_start_matches('/')),
        "{} does not end with {suffix}",
        p.display()
    );
}

/// A recorder that keeps every counter and gauge as an atomic, keyed by
/// `name{label=value,...}` (labels sorted).
#[derive(Default)]
pub struct TestRecorder {
    values: std::sync::Mutex<std::collections::BTreeMap<String, Arc<AtomicU64>>>,
    pub described: std::sync::Mutex<Vec<String>>,
}

use std::sync::Arc;

fn key_string(key: &metrics::Key) -> String {
    let mut labels: Vec<String> = key
        .labels()
        .map(|l| format!("{}={}", l.key(), l.value()))
        .collect();
    labels.sort();
    format!("{}{{{}}}", key.name(), labels.join(","))
}

impl TestRecorder {
    fn slot(&self, key: &metrics::Key) -> Arc<AtomicU64> {
        self.values
            .lock()
            .unwrap()
            .entry(key_string(key))
            .or_default()
            .clone()
    }

    pub fn counter(&self, key: &str) -> Option<u64> {
        self.values
            .lock()
            .unwrap()
            .get(key)
            .map(|v| v.load(Ordering::SeqCst))
    }

    pub fn gauge(&self, key: &str) -> Option<f64> {
        self.values
            .lock()
            .unwrap()
            .get(key)
            .map(|v| f64::from_bits(v.load(Ordering::SeqCst)))
    }

    pub fn keys(&self) -> Vec<String> {
        self.values.lock().unwrap().keys().cloned().collect()
    }
}

impl metrics::Recorder for TestRecorder {
    fn describe_counter(
        &self,
        key: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
        self.described
            .lock()
            .unwrap()
            .push(key.as_str().to_string());
    }
    fn describe_gauge(
        &self,
        key: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
        self.described
            .lock()
            .unwrap()
            .push(key.as_str().to_string());
    }
    fn describe_histogram(
        &self,
        key: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
        self.described
            .lock()
            .unwrap()
            .push(key.as_str().to_string());
    }
    fn register_counter(&self, key: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Counter {
        metrics::Counter::from_arc(self.slot(key))
    }
    fn register_gauge(&self, key: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Gauge {
        metrics::Gauge::from_arc(self.slot(key))
    }
    fn register_histogram(
        &self,
        _: &metrics::Key,
        _: &metrics::Metadata<'_>,
    ) -> metrics::Histogram {
        metrics::Histogram::noop()
    }
}
