//! What the kernel charges: the drift check's measurements.

use std::path::{Path, PathBuf};

use crate::error::BudgetError;
use crate::procfs;

/// Where usage is measured: the scope whose limit won detection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UsageScope {
    /// A cgroup v2 directory (in-tree path).
    CgroupV2 {
        /// The cgroup directory.
        dir: PathBuf,
    },
    /// A cgroup v1 memory-controller directory (in-tree path).
    CgroupV1 {
        /// The cgroup directory.
        dir: PathBuf,
    },
    /// The whole host (`/proc/meminfo`).
    System,
    /// This process's address space (`VmSize` in `/proc/self/status`): what `RLIMIT_AS`
    /// counts. Every mapping is hard here: the kernel refuses a mapping past the limit
    /// whether or not its pages are resident.
    AddressSpace,
    /// This process's data segment (`VmData` in `/proc/self/status`): what `RLIMIT_DATA`
    /// counts.
    DataSegment,
}

/// Per-process figures from `/proc/self/status` (bytes; `None` when the line is absent).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcessUsage {
    /// `VmRSS`: resident set.
    pub vm_rss_bytes: Option<u64>,
    /// `RssAnon`: resident anonymous memory (hard).
    pub rss_anon_bytes: Option<u64>,
    /// `RssFile`: resident file mappings (mostly reclaimable).
    pub rss_file_bytes: Option<u64>,
    /// `RssShmem`: resident shared memory (hard without swap).
    pub rss_shmem_bytes: Option<u64>,
    /// `VmLck`: locked memory (hard).
    pub vm_lck_bytes: Option<u64>,
    /// `VmPin`: pinned memory (hard).
    pub vm_pin_bytes: Option<u64>,
    /// `VmPTE`: page tables (kernel, hard).
    pub vm_pte_bytes: Option<u64>,
}

impl ProcessUsage {
    /// Parses `/proc/self/status` text.
    pub fn parse(text: &str) -> ProcessUsage {
        let f = procfs::parse_kb_fields(text);
        let g = |k| procfs::stat_get(&f, k);
        ProcessUsage {
            vm_rss_bytes: g("VmRSS"),
            rss_anon_bytes: g("RssAnon"),
            rss_file_bytes: g("RssFile"),
            rss_shmem_bytes: g("RssShmem"),
            vm_lck_bytes: g("VmLck"),
            vm_pin_bytes: g("VmPin"),
            vm_pte_bytes: g("VmPTE"),
        }
    }

    /// This process's hard bytes: anonymous + shared + page tables (locked and pinned pages
    /// are already inside those). Falls back to `VmRSS` when the split is unavailable.
    pub fn hard_bytes(&self) -> Option<u64> {
        match (self.rss_anon_bytes, self.rss_shmem_bytes) {
            (Some(a), s) => Some(a + s.unwrap_or(0) + self.vm_pte_bytes.unwrap_or(0)),
            (None, _) => self.vm_rss_bytes,
        }
    }
}

/// One reading of what the kernel charges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeasuredUsage {
    /// Where it was measured.
    pub scope: UsageScope,
    /// What the limit is compared against (`memory.current`, `usage_in_bytes`, or
    /// `MemTotal - MemFree` for the host).
    pub current_bytes: u64,
    /// Memory the kernel cannot give back quickly: anonymous, shared, locked, kernel.
    pub hard_bytes: u64,
    /// Clean file cache the kernel reclaims under pressure.
    pub reclaimable_bytes: u64,
    /// Named components (`anon`, `file`, `kernel`, `sock`, `shmem`, `unevictable`, ...).
    pub breakdown: Vec<(String, u64)>,
    /// This process's own figures, when `/proc/self/status` is readable.
    pub process: Option<ProcessUsage>,
}

impl MeasuredUsage {
    /// Hard bytes attributable to this budget's owner: the cgroup's for a cgroup scope, this
    /// process's (`/proc/self/status`) for the host scope, where `hard_bytes` counts every
    /// process. Used for the charged-vs-measured gap (drift).
    pub fn own_hard_bytes(&self) -> u64 {
        match self.scope {
            UsageScope::System => self
                .process
                .as_ref()
                .and_then(ProcessUsage::hard_bytes)
                .unwrap_or(self.hard_bytes),
            _ => self.hard_bytes,
        }
    }
}

/// A source of usage readings. The kernel one is [`KernelProbe`]; tests inject their own.
pub trait UsageProbe: Send + Sync {
    /// Reads current usage.
    fn measure(&self) -> Result<MeasuredUsage, BudgetError>;
}

/// Reads cgroup and proc files under a root.
#[derive(Debug, Clone)]
pub struct KernelProbe {
    root: PathBuf,
    scope: UsageScope,
}

impl KernelProbe {
    /// A probe of `scope` with files read under `root`.
    pub fn new(root: PathBuf, scope: UsageScope) -> KernelProbe {
        KernelProbe { root, scope }
    }
}

const V2_KEYS: [&str; 10] = [
    "anon",
    "file",
    "kernel",
    "sock",
    "shmem",
    "unevictable",
    "active_file",
    "inactive_file",
    "file_dirty",
    "file_writeback",
];

/// Clean file cache from a stat table; `prefix` is "" for v2 and v1 local, "total_" for v1
/// hierarchical. Dirty and writeback pages need I/O before they can go, so they count as hard.
fn clean_file(stat: &[(String, u64)], prefix: &str, dirty: &str, writeback: &str) -> Option<u64> {
    let g = |k: &str| procfs::stat_get(stat, &format!("{prefix}{k}"));
    let lru = g("active_file")? + g("inactive_file")?;
    let unclean = g(dirty).unwrap_or(0) + g(writeback).unwrap_or(0);
    Some(lru.saturating_sub(unclean))
}

impl UsageProbe for KernelProbe {
    fn measure(&self) -> Result<MeasuredUsage, BudgetError> {
        let root = &self.root;
        let process = procfs::read(root, Path::new("/proc/self/status"))
            .ok()
            .map(|t| ProcessUsage::parse(&t));
        match &self.scope {
            UsageScope::CgroupV2 { dir } => {
                let current = procfs::read_u64(root, &dir.join("memory.current"))?;
                let stat = procfs::parse_stat(&procfs::read(root, &dir.join("memory.stat"))?);
                let reclaimable = clean_file(&stat, "", "file_dirty", "file_writeback")
                    .or_else(|| {
                        let file = procfs::stat_get(&stat, "file")?;
                        Some(file.saturating_sub(procfs::stat_get(&stat, "shmem").unwrap_or(0)))
                    })
                    .unwrap_or(0)
                    .min(current);
                let breakdown = V2_KEYS
                    .iter()
                    .filter_map(|k| procfs::stat_get(&stat, k).map(|v| (k.to_string(), v)))
                    .collect();
                Ok(MeasuredUsage {
                    scope: self.scope.clone(),
                    current_bytes: current,
                    hard_bytes: current - reclaimable,
                    reclaimable_bytes: reclaimable,
                    breakdown,
                    process,
                })
            }
            UsageScope::CgroupV1 { dir } => {
                let current = procfs::read_u64(root, &dir.join("memory.usage_in_bytes"))?;
                let stat = procfs::parse_stat(&procfs::read(root, &dir.join("memory.stat"))?);
                let reclaimable = clean_file(&stat, "total_", "dirty", "writeback")
                    .or_else(|| clean_file(&stat, "", "dirty", "writeback"))
                    .unwrap_or(0)
                    .min(current);
                let breakdown = [
                    "rss",
                    "cache",
                    "shmem",
                    "mapped_file",
                    "unevictable",
                    "active_file",
                    "inactive_file",
                ]
                .iter()
                .filter_map(|k| {
                    procfs::stat_get(&stat, &format!("total_{k}"))
                        .or_else(|| procfs::stat_get(&stat, k))
                        .map(|v| (k.to_string(), v))
                })
                .collect();
                Ok(MeasuredUsage {
                    scope: self.scope.clone(),
                    current_bytes: current,
                    hard_bytes: current - reclaimable,
                    reclaimable_bytes: reclaimable,
                    breakdown,
                    process,
                })
            }
            UsageScope::AddressSpace | UsageScope::DataSegment => {
                let path = Path::new("/proc/self/status");
                let f = procfs::parse_kb_fields(&procfs::read(root, path)?);
                let key = if self.scope == UsageScope::AddressSpace {
                    "VmSize"
                } else {
                    "VmData"
                };
                let used = procfs::stat_get(&f, key).ok_or_else(|| BudgetError::Malformed {
                    path: path.to_path_buf(),
                    reason: "missing field",
                    found: key.to_string(),
                })?;
                let breakdown = ["VmSize", "VmData", "VmStk", "VmRSS", "VmLck", "VmPin"]
                    .iter()
                    .filter_map(|k| procfs::stat_get(&f, k).map(|v| (k.to_string(), v)))
                    .collect();
                Ok(MeasuredUsage {
                    scope: self.scope.clone(),
                    current_bytes: used,
                    hard_bytes: used,
                    reclaimable_bytes: 0,
                    breakdown,
                    process,
                })
            }
            UsageScope::System => {
                let path = Path::new("/proc/meminfo");
                let f = procfs::parse_kb_fields(&procfs::read(root, path)?);
                let need = |k: &'static str| {
                    procfs::stat_get(&f, k).ok_or_else(|| BudgetError::Malformed {
                        path: path.to_path_buf(),
                        reason: "missing field",
                        found: k.to_string(),
                    })
                };
                let total = need("MemTotal")?;
                let available = need("MemAvailable")?.min(total);
                let free = need("MemFree")?.min(total);
                let breakdown = [
                    "MemFree",
                    "MemAvailable",
                    "Cached",
                    "Shmem",
                    "AnonPages",
                    "Mlocked",
                    "Unevictable",
                ]
                .iter()
                .filter_map(|k| procfs::stat_get(&f, k).map(|v| (k.to_string(), v)))
                .collect();
                Ok(MeasuredUsage {
                    scope: self.scope.clone(),
                    current_bytes: total - free,
                    // Host-wide: everything the kernel cannot hand back, other processes included.
                    hard_bytes: total - available,
                    reclaimable_bytes: available.saturating_sub(free),
                    breakdown,
                    process,
                })
            }
        }
    }
}
