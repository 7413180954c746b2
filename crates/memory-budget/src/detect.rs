//! Limits detection: every source that can bound the process, smallest wins.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::budget::{Budget, BudgetConfig, DriftConfig};
use crate::error::BudgetError;
use crate::procfs::{self, Mount};
use crate::rlimit::{ProcessLimits, Rlimit};
use crate::size::{format_bytes, SizeSpec};
use crate::usage::{KernelProbe, UsageScope};

/// Where a limit came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SourceKind {
    /// cgroup v2 `memory.max` (hard: the OOM killer acts at it).
    CgroupV2Max,
    /// cgroup v2 `memory.high` (soft: the kernel throttles and reclaims above it).
    CgroupV2High,
    /// cgroup v1 `memory.limit_in_bytes`.
    CgroupV1Limit,
    /// cgroup v1 `memory.memsw.limit_in_bytes` (memory + swap).
    CgroupV1MemswLimit,
    /// `/proc/meminfo` `MemTotal`.
    MemTotal,
    /// `/proc/meminfo` `MemAvailable` (a snapshot: what the host can give without swapping).
    MemAvailable,
    /// The process's `RLIMIT_AS` (address space: every mapping counts, resident or not).
    RlimitAs,
    /// The process's `RLIMIT_DATA` (heap and private writable mappings).
    RlimitData,
}

impl SourceKind {
    /// Stable name (used in `memprobe --json`).
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::CgroupV2Max => "cgroup2.memory.max",
            SourceKind::CgroupV2High => "cgroup2.memory.high",
            SourceKind::CgroupV1Limit => "cgroup1.memory.limit_in_bytes",
            SourceKind::CgroupV1MemswLimit => "cgroup1.memory.memsw.limit_in_bytes",
            SourceKind::MemTotal => "meminfo.MemTotal",
            SourceKind::MemAvailable => "meminfo.MemAvailable",
            SourceKind::RlimitAs => "rlimit.as",
            SourceKind::RlimitData => "rlimit.data",
        }
    }

    /// Soft bounds throttle rather than kill; they still bound the budget.
    pub fn is_soft(self) -> bool {
        matches!(self, SourceKind::CgroupV2High | SourceKind::MemAvailable)
    }
}

/// What reading one source gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceStatus {
    /// A finite limit.
    Limit(u64),
    /// Explicitly unlimited (`max`, or the v1 "unlimited" value).
    Unlimited,
    /// The file does not exist.
    Missing,
    /// The file exists but could not be read.
    Unreadable(String),
    /// The file was read but did not parse.
    Malformed(String),
}

/// One source of a limit, as found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitSource {
    /// Which kind of source.
    pub kind: SourceKind,
    /// The file, as a path inside the root (`/sys/fs/cgroup/a/memory.max`); for an rlimit,
    /// the call that read it (`getrlimit(RLIMIT_AS)`).
    pub path: PathBuf,
    /// What reading it gave.
    pub status: SourceStatus,
    /// Why it won or was skipped.
    pub note: String,
}

impl LimitSource {
    /// The finite limit, if this source has one.
    pub fn limit_bytes(&self) -> Option<u64> {
        match self.status {
            SourceStatus::Limit(b) => Some(b),
            _ => None,
        }
    }
}

/// All sources found under a root and the winning (smallest) limit.
#[derive(Debug, Clone)]
pub struct Limits {
    /// The root every path was read under.
    pub root: PathBuf,
    /// Every source looked at, in order: cgroup v2 (leaf to top), cgroup v1, the process's
    /// rlimits, meminfo.
    pub sources: Vec<LimitSource>,
    /// Index of the winner in `sources`.
    pub winner: usize,
    /// The winning limit.
    pub limit_bytes: u64,
    /// Findings that are not one source (no cgroup mount, controller not enabled, ...).
    pub notes: Vec<String>,
    /// Where the drift check should measure usage (the winner's scope).
    pub usage_scope: UsageScope,
    /// `MemTotal`, when readable (the host's size).
    pub mem_total_bytes: Option<u64>,
}

impl Limits {
    /// The winning source.
    pub fn winning_source(&self) -> &LimitSource {
        &self.sources[self.winner]
    }
}

/// The default safety margin for a limit: 5% of it, at least 256 MiB and at most 8 GiB, and
/// never more than half the limit. Small limits need proportionally more slack (allocator
/// arenas, thread stacks, page tables); very large ones do not need 5%.
pub fn default_safety_margin(limit_bytes: u64) -> u64 {
    const MIN: u64 = 256 << 20;
    const MAX: u64 = 8 << 30;
    (limit_bytes / 20).clamp(MIN, MAX).min(limit_bytes / 2)
}

/// Options for [`Budget::detect`].
#[derive(Debug, Clone)]
pub struct DetectOptions {
    /// Directory the kernel files are read under (default `/`).
    pub root: PathBuf,
    /// Explicit budget ("256GiB", "80%" of the limit); default: limit minus margin.
    pub budget: Option<SizeSpec>,
    /// Explicit safety margin ("2GiB", "10%"); default [`default_safety_margin`].
    pub safety_margin: Option<SizeSpec>,
    /// Minimum time between kernel reads for the drift check (default 100 ms).
    pub refresh_interval: Duration,
    /// Half-life of the drift check's untracked estimate (default
    /// [`DEFAULT_UNTRACKED_HALF_LIFE`](crate::DEFAULT_UNTRACKED_HALF_LIFE), 60 s; see
    /// [`DriftConfig::untracked_half_life`](crate::DriftConfig::untracked_half_life)).
    pub untracked_half_life: Duration,
    /// Whether to run the drift check (default true).
    pub drift_check: bool,
    /// Budget name for metrics (default `host`).
    pub name: String,
    /// The process's `RLIMIT_AS` and `RLIMIT_DATA`: `None` (the default) reads this
    /// process's with `getrlimit`; tests give their own (rlimits are process state, not
    /// files under `root`).
    pub rlimits: Option<ProcessLimits>,
}

impl Default for DetectOptions {
    fn default() -> Self {
        DetectOptions {
            root: PathBuf::from("/"),
            budget: None,
            safety_margin: None,
            refresh_interval: Duration::from_millis(100),
            untracked_half_life: crate::budget::DEFAULT_UNTRACKED_HALF_LIFE,
            drift_check: true,
            name: "host".into(),
            rlimits: None,
        }
    }
}

impl DetectOptions {
    /// Default options reading under `root`.
    pub fn with_root(root: impl Into<PathBuf>) -> Self {
        DetectOptions {
            root: root.into(),
            ..Default::default()
        }
    }
}

/// Detection result: limits plus the sizes derived from them.
#[derive(Debug, Clone)]
pub struct Detection {
    /// What was found.
    pub limits: Limits,
    /// Margin kept below the limit.
    pub safety_margin_bytes: u64,
    /// The budget's total.
    pub budget_bytes: u64,
    /// How the budget was chosen (for humans).
    pub budget_rule: String,
}

impl Detection {
    /// Derives margin and budget from limits and the options' sizes.
    pub fn from_limits(
        limits: Limits,
        budget: Option<SizeSpec>,
        safety_margin: Option<SizeSpec>,
    ) -> Result<Detection, BudgetError> {
        let limit = limits.limit_bytes;
        let safety_margin_bytes = match safety_margin {
            Some(m) => m.resolve(limit),
            None => default_safety_margin(limit),
        };
        if safety_margin_bytes >= limit {
            return Err(BudgetError::MarginTooLarge {
                margin_bytes: safety_margin_bytes,
                limit_bytes: limit,
            });
        }
        let (budget_bytes, budget_rule) = match budget {
            None => (
                limit - safety_margin_bytes,
                format!(
                    "limit {} minus safety margin {}",
                    format_bytes(limit),
                    format_bytes(safety_margin_bytes)
                ),
            ),
            Some(spec @ SizeSpec::Percent(p)) => {
                let b = spec.resolve(limit);
                (b, format!("{p}% of limit {}", format_bytes(limit)))
            }
            Some(SizeSpec::Bytes(b)) => {
                if b > limit - safety_margin_bytes {
                    return Err(BudgetError::BudgetExceedsLimit {
                        budget_bytes: b,
                        limit_bytes: limit,
                        margin_bytes: safety_margin_bytes,
                    });
                }
                (b, format!("explicit {}", format_bytes(b)))
            }
        };
        if budget_bytes == 0 {
            return Err(BudgetError::ZeroBudget { what: budget_rule });
        }
        Ok(Detection {
            limits,
            safety_margin_bytes,
            budget_bytes,
            budget_rule,
        })
    }
}

fn status_of(res: Result<Option<u64>, BudgetError>) -> SourceStatus {
    match res {
        Ok(Some(b)) => SourceStatus::Limit(b),
        Ok(None) => SourceStatus::Unlimited,
        Err(BudgetError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            SourceStatus::Missing
        }
        Err(BudgetError::Io { source, .. }) => SourceStatus::Unreadable(source.to_string()),
        Err(e) => SourceStatus::Malformed(e.to_string()),
    }
}

/// Joins a cgroup path onto a mount: `/sys/fs/cgroup` + (`/a/b` relative to the mount root).
fn cgroup_dir(mount: &Mount, cgroup_path: &str) -> (PathBuf, Option<String>) {
    let rel = if mount.root == "/" {
        Some(cgroup_path)
    } else {
        cgroup_path
            .strip_prefix(mount.root.as_str())
            .filter(|r| r.is_empty() || r.starts_with('/'))
    };
    match rel {
        Some(r) => (
            Path::new(&mount.mount_point).join(r.trim_start_matches('/')),
            None,
        ),
        // The process's cgroup is outside what is mounted (a namespaced view): the mount
        // point itself is the closest directory we can read.
        None => (
            PathBuf::from(&mount.mount_point),
            Some(format!(
                "cgroup path {cgroup_path} is outside the mount root {}; reading {} instead",
                mount.root, mount.mount_point
            )),
        ),
    }
}

/// The mount of the right type whose root contains `cgroup_path` (the longest such root);
/// else the first of the right type. Containers can show several mounts of one hierarchy.
fn pick_mount<'a>(
    mounts: &'a [Mount],
    cgroup_path: &str,
    kind: impl Fn(&Mount) -> bool,
) -> Option<&'a Mount> {
    let contains = |m: &&Mount| {
        m.root == "/"
            || cgroup_path
                .strip_prefix(m.root.as_str())
                .is_some_and(|r| r.is_empty() || r.starts_with('/'))
    };
    mounts
        .iter()
        .filter(|m| kind(m))
        .filter(contains)
        .max_by_key(|m| m.root.len())
        .or_else(|| mounts.iter().find(|m| kind(m)))
}

/// Directories from `leaf` up to and including `top`.
fn chain(leaf: &Path, top: &Path) -> Vec<PathBuf> {
    let mut out = vec![leaf.to_path_buf()];
    let mut cur = leaf;
    while cur != top {
        match cur.parent() {
            Some(p) if p.starts_with(top) => {
                out.push(p.to_path_buf());
                cur = p;
            }
            _ => break,
        }
    }
    out
}

/// A cgroup directory of this process and the mount it lies under (in-tree paths).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupDir {
    /// The process's own cgroup.
    pub leaf: PathBuf,
    /// Where the hierarchy is mounted (the top of what can be read).
    pub mount_point: PathBuf,
}

/// This process's memory cgroups, as [`detect_limits`] finds them from
/// `/proc/self/cgroup` and `/proc/self/mountinfo` under a root.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OwnCgroups {
    /// The unified (v2) hierarchy's directory, when listed and mounted. Whether its memory
    /// controller is enabled is not checked here.
    pub v2: Option<CgroupDir>,
    /// The v1 memory controller's directory, when listed and mounted.
    pub v1_memory: Option<CgroupDir>,
    /// What was missing or guessed, for humans.
    pub notes: Vec<String>,
}

/// Finds this process's cgroup directories under `root` (see [`OwnCgroups`]).
pub fn own_cgroups(root: &Path) -> OwnCgroups {
    let mut own = OwnCgroups::default();
    let notes = &mut own.notes;
    let cg_lines = match procfs::read(root, Path::new("/proc/self/cgroup")) {
        Ok(t) => procfs::parse_proc_cgroup(&t),
        Err(e) => {
            notes.push(format!("cgroups skipped: {e}"));
            Vec::new()
        }
    };
    let mounts = if cg_lines.is_empty() {
        Vec::new()
    } else {
        match procfs::read(root, Path::new("/proc/self/mountinfo")) {
            Ok(t) => procfs::parse_mountinfo(&t),
            Err(e) => {
                notes.push(format!(
                    "{e}; assuming cgroups are mounted at /sys/fs/cgroup"
                ));
                vec![
                    Mount {
                        root: "/".into(),
                        mount_point: "/sys/fs/cgroup".into(),
                        fstype: "cgroup2".into(),
                        super_options: String::new(),
                    },
                    Mount {
                        root: "/".into(),
                        mount_point: "/sys/fs/cgroup/memory".into(),
                        fstype: "cgroup".into(),
                        super_options: "memory".into(),
                    },
                ]
            }
        }
    };

    // cgroup v2: the unified hierarchy line is "0::/path".
    if let Some(line) = cg_lines
        .iter()
        .find(|l| l.hierarchy_id == "0" && l.controllers.is_empty())
    {
        match pick_mount(&mounts, &line.path, |m| m.fstype == "cgroup2") {
            None => notes.push("cgroup v2 listed in /proc/self/cgroup but not mounted".into()),
            Some(m) => {
                let (leaf, note) = cgroup_dir(m, &line.path);
                notes.extend(note);
                own.v2 = Some(CgroupDir {
                    leaf,
                    mount_point: PathBuf::from(&m.mount_point),
                });
            }
        }
    }

    // cgroup v1: the memory controller's own hierarchy.
    if let Some(line) = cg_lines
        .iter()
        .find(|l| l.controllers.iter().any(|c| c == "memory"))
    {
        let mount = pick_mount(&mounts, &line.path, |m| {
            m.fstype == "cgroup" && m.super_options.split(',').any(|o| o == "memory")
        });
        match mount {
            None => notes.push("cgroup v1 memory controller listed but not mounted".into()),
            Some(m) => {
                let (leaf, note) = cgroup_dir(m, &line.path);
                notes.extend(note);
                own.v1_memory = Some(CgroupDir {
                    leaf,
                    mount_point: PathBuf::from(&m.mount_point),
                });
            }
        }
    } else if !cg_lines.is_empty() && !cg_lines.iter().all(|l| l.hierarchy_id == "0") {
        notes.push("no cgroup v1 memory controller in /proc/self/cgroup".into());
    }
    own
}

/// Reads every source under `root`, and this process's rlimits, and picks the smallest
/// limit.
pub fn detect_limits(root: &Path) -> Result<Limits, BudgetError> {
    detect_limits_with(root, &ProcessLimits::of_this_process())
}

/// [`detect_limits`] with the process limits given (a test's, or ones read earlier).
pub fn detect_limits_with(root: &Path, rlimits: &ProcessLimits) -> Result<Limits, BudgetError> {
    let mut sources = Vec::new();
    let mut notes = Vec::new();
    // (source index, scope) of cgroup sources, to pick where usage is measured.
    let mut scopes: Vec<(usize, UsageScope)> = Vec::new();

    let own = own_cgroups(root);
    notes.extend(own.notes);

    if let Some(CgroupDir {
        leaf,
        mount_point: top,
    }) = own.v2
    {
        let mut any_max = false;
        for dir in chain(&leaf, &top) {
            for (kind, file) in [
                (SourceKind::CgroupV2Max, "memory.max"),
                (SourceKind::CgroupV2High, "memory.high"),
            ] {
                let path = dir.join(file);
                let status = status_of(procfs::read_limit(root, &path));
                if status == SourceStatus::Missing {
                    continue;
                }
                any_max |= kind == SourceKind::CgroupV2Max;
                scopes.push((sources.len(), UsageScope::CgroupV2 { dir: dir.clone() }));
                sources.push(LimitSource {
                    kind,
                    path,
                    status,
                    note: String::new(),
                });
            }
        }
        if !any_max {
            let controllers =
                procfs::read(root, &top.join("cgroup.controllers")).unwrap_or_default();
            let why = if leaf == top {
                "the process is in the root cgroup, which has no memory.max".to_string()
            } else if controllers.split_whitespace().any(|c| c == "memory") {
                "memory controller not enabled for this cgroup's subtree".to_string()
            } else {
                "memory controller not available (missing from cgroup.controllers)".to_string()
            };
            sources.push(LimitSource {
                kind: SourceKind::CgroupV2Max,
                path: leaf.join("memory.max"),
                status: SourceStatus::Missing,
                note: why,
            });
        }
    }

    if let Some(CgroupDir {
        leaf,
        mount_point: top,
    }) = own.v1_memory
    {
        for dir in chain(&leaf, &top) {
            for (kind, file) in [
                (SourceKind::CgroupV1Limit, "memory.limit_in_bytes"),
                (
                    SourceKind::CgroupV1MemswLimit,
                    "memory.memsw.limit_in_bytes",
                ),
            ] {
                let path = dir.join(file);
                let status = status_of(procfs::read_limit(root, &path));
                if status == SourceStatus::Missing && dir != leaf {
                    continue;
                }
                scopes.push((sources.len(), UsageScope::CgroupV1 { dir: dir.clone() }));
                let note =
                    if status == SourceStatus::Missing && kind == SourceKind::CgroupV1MemswLimit {
                        "swap accounting off".to_string()
                    } else {
                        String::new()
                    };
                sources.push(LimitSource {
                    kind,
                    path,
                    status,
                    note,
                });
            }
        }
    }

    // The process's own limits. Unlimited ones are listed, with the reason they do not
    // bound anything.
    for (kind, name, limit) in [
        (SourceKind::RlimitAs, "RLIMIT_AS", rlimits.address_space),
        (SourceKind::RlimitData, "RLIMIT_DATA", rlimits.data),
    ] {
        let (status, note) = match limit {
            Rlimit::Limit(b) => (SourceStatus::Limit(b), String::new()),
            Rlimit::Unlimited => (
                SourceStatus::Unlimited,
                "unlimited (RLIM_INFINITY)".to_string(),
            ),
            Rlimit::Unreadable(errno) => {
                let e = std::io::Error::from_raw_os_error(errno);
                (SourceStatus::Unreadable(e.to_string()), String::new())
            }
        };
        sources.push(LimitSource {
            kind,
            path: PathBuf::from(format!("getrlimit({name})")),
            status,
            note,
        });
    }

    // /proc/meminfo: the host.
    let meminfo_path = PathBuf::from("/proc/meminfo");
    let mut mem_total_bytes = None;
    match procfs::read(root, &meminfo_path) {
        Ok(text) => {
            let fields = procfs::parse_kb_fields(&text);
            for (kind, key) in [
                (SourceKind::MemTotal, "MemTotal"),
                (SourceKind::MemAvailable, "MemAvailable"),
            ] {
                let status = match procfs::stat_get(&fields, key) {
                    Some(0) => SourceStatus::Malformed(format!("{key} is 0")),
                    Some(v) => SourceStatus::Limit(v),
                    None => SourceStatus::Malformed(format!("no {key} line")),
                };
                if kind == SourceKind::MemTotal {
                    mem_total_bytes = match status {
                        SourceStatus::Limit(v) => Some(v),
                        _ => None,
                    };
                }
                sources.push(LimitSource {
                    kind,
                    path: meminfo_path.clone(),
                    status,
                    note: String::new(),
                });
            }
        }
        Err(e) => sources.push(LimitSource {
            kind: SourceKind::MemTotal,
            path: meminfo_path.clone(),
            status: status_of(Err(e)),
            note: String::new(),
        }),
    }

    // Smallest finite limit wins; on a tie the earlier (more specific) source.
    let winner = sources
        .iter()
        .enumerate()
        .filter_map(|(i, s)| s.limit_bytes().map(|b| (b, i)))
        .min();
    let Some((limit_bytes, winner)) = winner else {
        for s in &mut sources {
            fill_skip_note(s, None);
        }
        let details = sources
            .iter()
            .map(|s| format!("{} {}: {}", s.kind.as_str(), s.path.display(), s.note))
            .chain(notes.iter().cloned())
            .collect::<Vec<_>>()
            .join("; ");
        return Err(BudgetError::NoLimitFound {
            root: root.to_path_buf(),
            details: if details.is_empty() {
                "no source found".into()
            } else {
                details
            },
        });
    };
    for (i, s) in sources.iter_mut().enumerate() {
        if i == winner {
            s.note = if s.kind.is_soft() {
                "smallest bound (soft)".into()
            } else {
                "smallest bound".into()
            };
        } else {
            fill_skip_note(s, Some(limit_bytes));
        }
    }
    let usage_scope = match sources[winner].kind {
        SourceKind::MemTotal | SourceKind::MemAvailable => UsageScope::System,
        SourceKind::RlimitAs => UsageScope::AddressSpace,
        SourceKind::RlimitData => UsageScope::DataSegment,
        _ => scopes
            .iter()
            .find(|(i, _)| *i == winner)
            .map(|(_, s)| s.clone())
            .unwrap_or(UsageScope::System),
    };
    Ok(Limits {
        root: root.to_path_buf(),
        sources,
        winner,
        limit_bytes,
        notes,
        usage_scope,
        mem_total_bytes,
    })
}

fn fill_skip_note(s: &mut LimitSource, winning: Option<u64>) {
    if !s.note.is_empty() {
        return;
    }
    s.note = match &s.status {
        SourceStatus::Limit(b) => match winning {
            Some(w) => format!(
                "larger than the winning limit ({} > {})",
                format_bytes(*b),
                format_bytes(w)
            ),
            None => String::new(),
        },
        SourceStatus::Unlimited => "no limit (max)".into(),
        SourceStatus::Missing => "file absent".into(),
        SourceStatus::Unreadable(e) => format!("unreadable: {e}"),
        SourceStatus::Malformed(e) => format!("malformed: {e}"),
    };
}

impl Budget {
    /// A budget sized from the host's limits (see [`detect_limits`] and [`Detection`]), with
    /// the drift check against the winning source's usage unless disabled.
    pub fn detect(options: &DetectOptions) -> Result<Budget, BudgetError> {
        let rlimits = options
            .rlimits
            .unwrap_or_else(ProcessLimits::of_this_process);
        let limits = detect_limits_with(&options.root, &rlimits)?;
        let detection = Detection::from_limits(limits, options.budget, options.safety_margin)?;
        let drift = if options.drift_check {
            let scope = detection.limits.usage_scope.clone();
            // For the host (meminfo) the probe measures MemTotal - MemAvailable, so the drift
            // limit is MemTotal: headroom = MemAvailable - margin, other processes included.
            let limit_bytes = match scope {
                UsageScope::System => detection
                    .limits
                    .mem_total_bytes
                    .unwrap_or(detection.limits.limit_bytes),
                _ => detection.limits.limit_bytes,
            };
            Some(DriftConfig {
                limit_bytes,
                safety_margin_bytes: detection.safety_margin_bytes,
                probe: Arc::new(KernelProbe::new(options.root.clone(), scope)),
                refresh_interval: options.refresh_interval,
                untracked_half_life: options.untracked_half_life,
            })
        } else {
            None
        };
        let config = BudgetConfig {
            name: options.name.clone(),
            total_bytes: detection.budget_bytes,
            drift,
        };
        Ok(Budget::with_detection(config, Some(detection)))
    }
}
