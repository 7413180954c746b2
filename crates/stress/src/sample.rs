//! What the kernel charges against what the budget charged, sampled on a thread.
//!
//! **Measured** is what the kernel cannot hand back on its own: `anon + kernel + shmem` of
//! the cgroup (page cache, `file`, is reclaimable and left out). From `memory.stat`:
//!
//! | figure | cgroup v2 | cgroup v1 |
//! |---|---|---|
//! | current | `memory.current` | `memory.usage_in_bytes` |
//! | anon | `anon` | `total_rss` (anonymous and swap cache, huge pages included) |
//! | file | `file` − `shmem` | `total_cache` − `total_shmem` |
//! | kernel | `kernel` (≥ 5.18), else `kernel_stack + pagetables + percpu + slab` | `memory.kmem.usage_in_bytes` (0 where absent) |
//! | shmem | `shmem` | `total_shmem` |
//!
//! Outside a cgroup the process's own `RssAnon + RssShmem + VmPTE` (`/proc/self/status`)
//! stand in for measured (kernel = page tables only).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use memory_budget::{Budget, Category};
use serde::{Deserialize, Serialize};

use crate::cgroup::{get, parse_key_values, CgroupVersion, MemoryCgroup};
use crate::error::{Result, StressError};

pub(crate) fn read_text(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(StressError::io("read", path))
}

/// One reading of a cgroup's (or, outside one, the process's) memory, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CgroupMemory {
    /// What the limit is compared with: `memory.current` / `memory.usage_in_bytes`
    /// (page cache included).
    pub current_bytes: u64,
    /// Anonymous memory.
    pub anon_bytes: u64,
    /// Page cache, shared memory excluded.
    pub file_bytes: u64,
    /// Kernel memory charged to the cgroup (stacks, page tables, slab, ...).
    pub kernel_bytes: u64,
    /// Shared memory (tmpfs, shared anonymous mappings).
    pub shmem_bytes: u64,
}

impl CgroupMemory {
    /// `anon + kernel + shmem`: what the budget's charges are compared with.
    pub fn measured_bytes(&self) -> u64 {
        self.anon_bytes + self.kernel_bytes + self.shmem_bytes
    }

    /// From cgroup v2 `memory.current` and `memory.stat` text.
    pub fn parse_v2(current: &str, stat: &str) -> Result<CgroupMemory, (&'static str, String)> {
        let current = parse_count(current)?;
        let kv = parse_key_values(stat);
        let need = |k: &'static str| get(&kv, k).ok_or(("a memory.stat line", k.to_string()));
        let shmem = get(&kv, "shmem").unwrap_or(0);
        let kernel = match get(&kv, "kernel") {
            Some(k) => k,
            // Before 5.18 there is no total; its parts.
            None => ["kernel_stack", "pagetables", "percpu", "slab"]
                .iter()
                .filter_map(|k| get(&kv, k))
                .sum(),
        };
        Ok(CgroupMemory {
            current_bytes: current,
            anon_bytes: need("anon")?,
            file_bytes: need("file")?.saturating_sub(shmem),
            kernel_bytes: kernel,
            shmem_bytes: shmem,
        })
    }

    /// From cgroup v1 `memory.usage_in_bytes`, `memory.stat` and
    /// `memory.kmem.usage_in_bytes` text (the last absent on kernels without it).
    pub fn parse_v1(
        usage: &str,
        stat: &str,
        kmem_usage: Option<&str>,
    ) -> Result<CgroupMemory, (&'static str, String)> {
        let current = parse_count(usage)?;
        let kv = parse_key_values(stat);
        // Hierarchical totals (`total_*`) include children; a leaf has none, so they equal
        // the local figures there. Older kernels without them: the local ones.
        let g = |k: &'static str| get(&kv, &format!("total_{k}")).or_else(|| get(&kv, k));
        let rss = g("rss").ok_or(("a memory.stat line", "rss".to_string()))?;
        let cache = g("cache").ok_or(("a memory.stat line", "cache".to_string()))?;
        let shmem = g("shmem").unwrap_or(0);
        let kernel = match kmem_usage {
            Some(t) => parse_count(t)?,
            None => 0,
        };
        Ok(CgroupMemory {
            current_bytes: current,
            anon_bytes: rss,
            file_bytes: cache.saturating_sub(shmem),
            kernel_bytes: kernel,
            shmem_bytes: shmem,
        })
    }

    /// Reads a cgroup's files.
    pub fn read(cg: &MemoryCgroup) -> Result<CgroupMemory> {
        let d = &cg.dir;
        let stat_path = d.join("memory.stat");
        let stat = read_text(&stat_path)?;
        let (current_path, parsed) = match cg.version {
            CgroupVersion::V2 => {
                let p = d.join("memory.current");
                let current = read_text(&p)?;
                (p, CgroupMemory::parse_v2(&current, &stat))
            }
            CgroupVersion::V1 => {
                let p = d.join("memory.usage_in_bytes");
                let usage = read_text(&p)?;
                let kmem = std::fs::read_to_string(d.join("memory.kmem.usage_in_bytes")).ok();
                (p, CgroupMemory::parse_v1(&usage, &stat, kmem.as_deref()))
            }
        };
        parsed.map_err(|(reason, found)| StressError::Malformed {
            path: if reason == "a memory.stat line" {
                stat_path
            } else {
                current_path
            },
            reason,
            found,
        })
    }
}

fn parse_count(text: &str) -> Result<u64, (&'static str, String)> {
    let t = text.trim();
    t.parse()
        .map_err(|_| ("a byte count", t.chars().take(64).collect()))
}

/// The process's own figures from `/proc/self/status`, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessMemory {
    /// `VmRSS`.
    pub vm_rss_bytes: u64,
    /// `RssAnon`.
    pub rss_anon_bytes: u64,
    /// `RssShmem`.
    pub rss_shmem_bytes: u64,
    /// `VmPTE` (page tables).
    pub vm_pte_bytes: u64,
}

impl ProcessMemory {
    /// Parses `/proc/self/status` text (missing lines read as 0).
    pub fn parse(status: &str) -> ProcessMemory {
        let kb = |key: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
                .map_or(0, |v| v * 1024)
        };
        ProcessMemory {
            vm_rss_bytes: kb("VmRSS"),
            rss_anon_bytes: kb("RssAnon"),
            rss_shmem_bytes: kb("RssShmem"),
            vm_pte_bytes: kb("VmPTE"),
        }
    }

    /// Reads this process's.
    pub fn of_self() -> Result<ProcessMemory> {
        Ok(ProcessMemory::parse(&read_text(Path::new(
            "/proc/self/status",
        ))?))
    }

    /// The process's stand-in for a cgroup reading (no page cache, kernel = page tables).
    pub fn as_cgroup_memory(&self) -> CgroupMemory {
        CgroupMemory {
            current_bytes: self.vm_rss_bytes,
            anon_bytes: self.rss_anon_bytes,
            file_bytes: 0,
            kernel_bytes: self.vm_pte_bytes,
            shmem_bytes: self.rss_shmem_bytes,
        }
    }
}

/// Where measured figures come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemorySource {
    /// A cgroup the process runs in (alone).
    Cgroup(MemoryCgroup),
    /// The process's own status (no cgroup to read).
    Process,
}

impl MemorySource {
    /// One reading.
    pub fn read(&self) -> Result<CgroupMemory> {
        match self {
            MemorySource::Cgroup(cg) => CgroupMemory::read(cg),
            MemorySource::Process => Ok(ProcessMemory::of_self()?.as_cgroup_memory()),
        }
    }

    /// `cgroup v1 DIR`, `cgroup v2 DIR` or `process`.
    pub fn describe(&self) -> String {
        match self {
            MemorySource::Cgroup(cg) => {
                format!("cgroup {} {}", cg.version.name(), cg.dir.display())
            }
            MemorySource::Process => "process (/proc/self/status)".into(),
        }
    }
}

/// One sample: the kernel's figures and the budget's charges at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sample {
    /// Milliseconds since sampling started.
    pub t_ms: u64,
    /// The kernel's figures.
    pub memory: CgroupMemory,
    /// `anon + kernel + shmem`.
    pub measured_bytes: u64,
    /// The process's resident set.
    pub vm_rss_bytes: u64,
    /// Bytes charged to the budget.
    pub charged_bytes: u64,
    /// Charged bytes per category (`srs`, `pce`, `working_set`, ...), non-zero ones.
    pub charged_by_category: BTreeMap<String, u64>,
    /// The budget's admission ceiling: its total, lowered by the drift check to the limit
    /// minus the margin minus `untracked_bytes`.
    pub ceiling_bytes: u64,
    /// Bytes the budget's queued requests ask for (a request that stays queued while
    /// `ceiling − charged` is below it is what a stalled run waits on).
    pub waiting_bytes: u64,
    /// What the kernel charged beyond the charges at the budget's last drift reading.
    pub untracked_bytes: u64,
}

impl Sample {
    /// `measured − charged`, 0 when charged is larger.
    pub fn undercharge_bytes(&self) -> u64 {
        self.measured_bytes.saturating_sub(self.charged_bytes)
    }

    /// `charged − measured`, 0 when measured is larger.
    pub fn overcharge_bytes(&self) -> u64 {
        self.charged_bytes.saturating_sub(self.measured_bytes)
    }
}

/// What the samples of a run add up to.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SampleStats {
    /// Samples taken.
    pub n_samples: u64,
    /// Readings that failed (the kernel file vanished or did not parse).
    pub n_failed_readings: u64,
    /// max over samples of `measured − charged` (0 when charged was never below).
    pub max_undercharge_bytes: u64,
    /// max over samples of `charged − measured` (0 when charged was never above).
    pub max_overcharge_bytes: u64,
    /// The most measured (`anon + kernel + shmem`) in any sample.
    pub peak_measured_bytes: u64,
    /// The most charged in any sample.
    pub peak_charged_bytes: u64,
    /// The most `current` (page cache included) in any sample.
    pub peak_current_bytes: u64,
    /// The most `VmRSS` in any sample.
    pub peak_vm_rss_bytes: u64,
    /// The most charged per category in any sample.
    pub peak_charged_by_category: BTreeMap<String, u64>,
    /// The first sample (before the workload charged anything but its setup).
    pub first: Option<Sample>,
    /// The sample with the largest under-charge.
    pub at_max_undercharge: Option<Sample>,
    /// The sample with the largest over-charge.
    pub at_max_overcharge: Option<Sample>,
}

impl SampleStats {
    /// Adds one sample.
    pub fn add(&mut self, s: &Sample) {
        self.n_samples += 1;
        if self.first.is_none() {
            self.first = Some(s.clone());
        }
        let under = s.undercharge_bytes();
        if under > self.max_undercharge_bytes || self.at_max_undercharge.is_none() {
            self.max_undercharge_bytes = self.max_undercharge_bytes.max(under);
            self.at_max_undercharge = Some(s.clone());
        }
        let over = s.overcharge_bytes();
        if over > self.max_overcharge_bytes || self.at_max_overcharge.is_none() {
            self.max_overcharge_bytes = self.max_overcharge_bytes.max(over);
            self.at_max_overcharge = Some(s.clone());
        }
        self.peak_measured_bytes = self.peak_measured_bytes.max(s.measured_bytes);
        self.peak_charged_bytes = self.peak_charged_bytes.max(s.charged_bytes);
        self.peak_current_bytes = self.peak_current_bytes.max(s.memory.current_bytes);
        self.peak_vm_rss_bytes = self.peak_vm_rss_bytes.max(s.vm_rss_bytes);
        for (k, v) in &s.charged_by_category {
            let p = self.peak_charged_by_category.entry(k.clone()).or_default();
            *p = (*p).max(*v);
        }
    }
}

/// Takes one sample now.
pub fn take_sample(source: &MemorySource, budget: &Budget, t0: Instant) -> Result<Sample> {
    // Budget first, kernel after: charges come before allocations, so this order never
    // shows an allocation whose charge is not yet visible.
    let snap = budget.snapshot();
    let memory = source.read()?;
    let vm_rss_bytes = match source {
        MemorySource::Process => memory.current_bytes,
        MemorySource::Cgroup(_) => ProcessMemory::of_self().map_or(0, |p| p.vm_rss_bytes),
    };
    let charged_by_category = Category::ALL
        .iter()
        .filter(|c| snap.used_in(**c) > 0)
        .map(|c| (c.as_str().to_string(), snap.used_in(*c)))
        .collect();
    Ok(Sample {
        t_ms: t0.elapsed().as_millis() as u64,
        measured_bytes: memory.measured_bytes(),
        memory,
        vm_rss_bytes,
        charged_bytes: snap.used_bytes,
        charged_by_category,
        ceiling_bytes: snap.cap_bytes,
        waiting_bytes: snap.waiting_bytes,
        untracked_bytes: snap.untracked_bytes,
    })
}

/// The CSV header of [`Sampler`]'s sample file.
pub const CSV_HEADER: &str = "t_ms,current,anon,file,kernel,shmem,measured,vm_rss,charged,srs,pce,working_set,pinned_pool,transient,other,ceiling,waiting,untracked";

fn csv_line(s: &Sample) -> String {
    let c = |k: &str| s.charged_by_category.get(k).copied().unwrap_or(0);
    format!(
        "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
        s.t_ms,
        s.memory.current_bytes,
        s.memory.anon_bytes,
        s.memory.file_bytes,
        s.memory.kernel_bytes,
        s.memory.shmem_bytes,
        s.measured_bytes,
        s.vm_rss_bytes,
        s.charged_bytes,
        c("srs"),
        c("pce"),
        c("working_set"),
        c("pinned_pool"),
        c("transient"),
        c("other"),
        s.ceiling_bytes,
        s.waiting_bytes,
        s.untracked_bytes
    )
}

/// A thread that samples every `interval` until stopped.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    stats: Arc<Mutex<SampleStats>>,
    thread: Option<JoinHandle<()>>,
}

impl Sampler {
    /// Starts sampling `source` against `budget`; every sample is appended to `csv` when
    /// given.
    pub fn start(
        source: MemorySource,
        budget: Budget,
        interval: Duration,
        csv: Option<PathBuf>,
    ) -> Result<Sampler> {
        let mut out = match &csv {
            Some(p) => {
                let mut f = std::io::BufWriter::new(
                    std::fs::File::create(p).map_err(StressError::io("create", p))?,
                );
                writeln!(f, "{CSV_HEADER}").map_err(StressError::io("write", p))?;
                Some(f)
            }
            None => None,
        };
        // One reading now, so a source that cannot be read fails the run at once.
        source.read()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(Mutex::new(SampleStats::default()));
        let (stop2, stats2) = (Arc::clone(&stop), Arc::clone(&stats));
        let thread = std::thread::Builder::new()
            .name("pinion-stress-sampler".into())
            .spawn(move || {
                let t0 = Instant::now();
                let mut next = t0;
                loop {
                    let done = stop2.load(Ordering::Acquire);
                    match take_sample(&source, &budget, t0) {
                        Ok(s) => {
                            if let Some(f) = out.as_mut() {
                                let _ = writeln!(f, "{}", csv_line(&s));
                            }
                            stats2.lock().unwrap_or_else(|e| e.into_inner()).add(&s);
                        }
                        Err(_) => {
                            stats2
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .n_failed_readings += 1
                        }
                    }
                    if done {
                        break;
                    }
                    next += interval;
                    let now = Instant::now();
                    if next > now {
                        std::thread::sleep(next - now);
                    } else {
                        // Fell behind (a loaded machine): no burst of catch-up samples.
                        next = now;
                    }
                }
                if let Some(mut f) = out {
                    let _ = f.flush();
                }
            })
            .map_err(|source| StressError::Spawn {
                program: PathBuf::from("sampler thread"),
                source,
            })?;
        Ok(Sampler {
            stop,
            stats,
            thread: Some(thread),
        })
    }

    /// The figures so far.
    pub fn stats(&self) -> SampleStats {
        self.stats.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Takes a last sample, stops, and returns the figures.
    pub fn finish(mut self) -> SampleStats {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.stats()
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V2_STAT: &str = "anon 104857600\nfile 52428800\nkernel 8388608\nkernel_stack 1048576\npagetables 2097152\nsec_pagetables 0\npercpu 65536\nsock 0\nvmalloc 0\nshmem 4194304\nslab 5177344\n";

    #[test]
    fn v2_mapping() {
        let m = CgroupMemory::parse_v2("170000000\n", V2_STAT).unwrap();
        assert_eq!(m.current_bytes, 170_000_000);
        assert_eq!(m.anon_bytes, 100 << 20);
        assert_eq!(m.file_bytes, 46 << 20, "file without shmem");
        assert_eq!(m.kernel_bytes, 8 << 20, "the kernel line when present");
        assert_eq!(m.shmem_bytes, 4 << 20);
        assert_eq!(m.measured_bytes(), (100 + 8 + 4) << 20);
    }

    #[test]
    fn v2_kernel_from_parts_on_old_kernels() {
        let stat = V2_STAT.replace("kernel 8388608\n", "");
        let m = CgroupMemory::parse_v2("1", &stat).unwrap();
        assert_eq!(m.kernel_bytes, 1048576 + 2097152 + 65536 + 5177344);
    }

    #[test]
    fn v1_mapping() {
        let stat = "cache 3399680\nrss 1892352\nrss_huge 0\nshmem 4096\nmapped_file 0\n\
                    total_cache 13399680\ntotal_rss 11892352\ntotal_shmem 8192\n";
        let m = CgroupMemory::parse_v1("6443008\n", stat, Some("815104\n")).unwrap();
        assert_eq!(m.current_bytes, 6_443_008);
        assert_eq!(m.anon_bytes, 11_892_352, "hierarchical totals first");
        assert_eq!(m.file_bytes, 13_399_680 - 8192);
        assert_eq!(m.shmem_bytes, 8192);
        assert_eq!(m.kernel_bytes, 815_104);
        let local = "cache 100\nrss 50\n";
        let m = CgroupMemory::parse_v1("200", local, None).unwrap();
        assert_eq!((m.anon_bytes, m.file_bytes, m.kernel_bytes), (50, 100, 0));
    }

    #[test]
    fn malformed_readings_name_what_was_found() {
        assert_eq!(
            CgroupMemory::parse_v2("12 MB", V2_STAT).unwrap_err(),
            ("a byte count", "12 MB".to_string())
        );
        assert_eq!(
            CgroupMemory::parse_v2("1", "file 3\n").unwrap_err(),
            ("a memory.stat line", "anon".to_string())
        );
        assert_eq!(
            CgroupMemory::parse_v1("1", "rss 3\n", None).unwrap_err(),
            ("a memory.stat line", "cache".to_string())
        );
    }

    #[test]
    fn process_status() {
        let p = ProcessMemory::parse(
            "Name:\tx\nVmRSS:\t  2048 kB\nRssAnon:\t 1024 kB\nRssFile:\t 1000 kB\nRssShmem:\t 24 kB\nVmPTE:\t 8 kB\n",
        );
        assert_eq!(p.vm_rss_bytes, 2048 * 1024);
        assert_eq!(
            p.as_cgroup_memory().measured_bytes(),
            (1024 + 24 + 8) * 1024
        );
    }

    /// A sample holds the budget's figures as they are, and its CSV line has one field
    /// per header column.
    #[test]
    fn a_sample_reads_the_budget() {
        let seed = groth16_prover::testing::test_seed();
        let mut g = groth16_prover::testing::SplitMix::new(seed);
        let total = (64 << 20) + g.next_u64() % (64 << 20);
        let budget = Budget::fixed(total);
        let ws = 1 + g.next_u64() % (total / 2);
        let _r = budget
            .try_reserve(ws, Category::WorkingSet, "proof")
            .unwrap();
        let s = take_sample(&MemorySource::Process, &budget, Instant::now()).unwrap();
        assert_eq!(s.charged_bytes, ws, "seed {seed}");
        assert_eq!(s.charged_by_category.get("working_set"), Some(&ws));
        assert_eq!(s.ceiling_bytes, total, "a fixed budget has no drift check");
        assert_eq!((s.waiting_bytes, s.untracked_bytes), (0, 0));
        assert!(s.measured_bytes > 0, "this process uses memory");
        let line = csv_line(&s);
        assert_eq!(
            line.split(',').count(),
            CSV_HEADER.split(',').count(),
            "{line}"
        );
        assert!(line.ends_with(&format!(",{total},0,0")), "{line}");
    }

    #[test]
    fn stats_keep_the_extremes() {
        let seed = groth16_prover::testing::test_seed();
        let mut g = groth16_prover::testing::SplitMix::new(seed);
        let samples: Vec<Sample> = (0..200u64)
            .map(|i| {
                let anon = g.next_u64() % (1 << 30);
                let kernel = g.next_u64() % (1 << 24);
                let memory = CgroupMemory {
                    current_bytes: anon + kernel + g.next_u64() % (1 << 28),
                    anon_bytes: anon,
                    kernel_bytes: kernel,
                    ..CgroupMemory::default()
                };
                Sample {
                    t_ms: 50 * i,
                    measured_bytes: memory.measured_bytes(),
                    memory,
                    charged_bytes: g.next_u64() % (1 << 30),
                    ..Sample::default()
                }
            })
            .collect();
        let mut st = SampleStats::default();
        for s in &samples {
            st.add(s);
        }
        let max_by = |f: &dyn Fn(&Sample) -> u64| samples.iter().map(f).max().unwrap();
        assert_eq!(st.n_samples, 200, "seed {seed}");
        assert_eq!(
            st.max_undercharge_bytes,
            max_by(&|s| s.measured_bytes.saturating_sub(s.charged_bytes))
        );
        assert_eq!(
            st.max_overcharge_bytes,
            max_by(&|s| s.charged_bytes.saturating_sub(s.measured_bytes))
        );
        assert_eq!(st.peak_measured_bytes, max_by(&|s| s.measured_bytes));
        assert_eq!(st.peak_charged_bytes, max_by(&|s| s.charged_bytes));
        assert_eq!(st.peak_current_bytes, max_by(&|s| s.memory.current_bytes));
        let worst = st.at_max_undercharge.as_ref().unwrap();
        assert_eq!(worst.undercharge_bytes(), st.max_undercharge_bytes);
        let worst = st.at_max_overcharge.as_ref().unwrap();
        assert_eq!(worst.overcharge_bytes(), st.max_overcharge_bytes);
        assert_eq!(st.first.as_ref().unwrap().t_ms, 0);
    }
}
