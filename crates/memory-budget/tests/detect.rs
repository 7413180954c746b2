//! Limits detection on copied kernel-file trees.

mod common;

use std::path::Path;

use common::{assert_path_ends, pages, seeded_rng, Tree};
use memory_budget::{
    default_safety_margin, detect_limits_with, Budget, BudgetError, DetectOptions, ProcessLimits,
    Rlimit, SizeSpec, SourceKind, SourceStatus, UsageProbe, UsageScope, V1_UNLIMITED,
};

const GIB: u64 = 1 << 30;

/// Detection with no rlimits: the trees decide, whatever limits this test process has.
fn detect(root: &Path) -> Result<memory_budget::Limits, BudgetError> {
    detect_limits_with(root, &ProcessLimits::UNLIMITED)
}

/// Checks the winner's kind, limit and path suffix.
fn check_winner(
    tree: &Tree,
    kind: SourceKind,
    limit_bytes: u64,
    path_suffix: &str,
) -> memory_budget::Limits {
    let limits = detect(&tree.root).expect("a limit is found");
    let w = limits.winning_source();
    assert_eq!(w.kind, kind, "sources: {:#?}", limits.sources);
    assert_eq!(limits.limit_bytes, limit_bytes);
    assert_eq!(w.limit_bytes(), Some(limit_bytes));
    assert_path_ends(&w.path, path_suffix);
    // Every other source carries a reason it was skipped.
    for (i, s) in limits.sources.iter().enumerate() {
        assert!(!s.note.is_empty(), "source {i} has no note: {s:?}");
    }
    limits
}

#[test]
fn cgroup_v1_limit_wins_over_meminfo() {
    let mut rng = seeded_rng("cgroup_v1_limit_wins_over_meminfo");
    let limit = pages(&mut rng, GIB, 8 * GIB);
    let memsw = limit + pages(&mut rng, 4096, GIB);
    let t = Tree::new("v1");
    t.cgroup_v1("/docker/abc", "/")
        .write(
            "/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes",
            &format!("{limit}\n"),
        )
        .write(
            "/sys/fs/cgroup/memory/docker/abc/memory.memsw.limit_in_bytes",
            &format!("{memsw}\n"),
        )
        .write(
            "/sys/fs/cgroup/memory/docker/memory.limit_in_bytes",
            &format!("{V1_UNLIMITED}\n"),
        )
        .write(
            "/sys/fs/cgroup/memory/memory.limit_in_bytes",
            &format!("{V1_UNLIMITED}\n"),
        )
        .meminfo(64 * GIB, 60 * GIB, 50 * GIB);
    let limits = check_winner(
        &t,
        SourceKind::CgroupV1Limit,
        limit,
        "/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes",
    );
    let memsw_src = limits
        .sources
        .iter()
        .find(|s| s.kind == SourceKind::CgroupV1MemswLimit)
        .expect("memsw listed");
    assert_eq!(memsw_src.limit_bytes(), Some(memsw));
    let parent = limits
        .sources
        .iter()
        .find(|s| s.path == Path::new("/sys/fs/cgroup/memory/docker/memory.limit_in_bytes"))
        .expect("parent listed");
    assert_eq!(parent.status, SourceStatus::Unlimited);
    assert_eq!(
        limits.usage_scope,
        UsageScope::CgroupV1 {
            dir: "/sys/fs/cgroup/memory/docker/abc".into()
        }
    );
}

#[test]
fn cgroup_v1_namespaced_mount_root() {
    // Inside a container the memory mount's root is the container's own cgroup.
    let mut rng = seeded_rng("cgroup_v1_namespaced_mount_root");
    let limit = pages(&mut rng, GIB, 8 * GIB);
    let t = Tree::new("v1ns");
    t.cgroup_v1("/docker/abc", "/docker/abc")
        .write(
            "/sys/fs/cgroup/memory/memory.limit_in_bytes",
            &format!("{limit}\n"),
        )
        .meminfo(64 * GIB, 60 * GIB, 50 * GIB);
    check_winner(
        &t,
        SourceKind::CgroupV1Limit,
        limit,
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    );
}

#[test]
fn cgroup_v2_max_wins() {
    let mut rng = seeded_rng("cgroup_v2_max_wins");
    let limit = pages(&mut rng, GIB, 16 * GIB);
    let t = Tree::new("v2");
    t.cgroup_v2("/app.slice/job")
        .write(
            "/sys/fs/cgroup/app.slice/job/memory.max",
            &format!("{limit}\n"),
        )
        .write("/sys/fs/cgroup/app.slice/job/memory.high", "max\n")
        .write("/sys/fs/cgroup/app.slice/memory.max", "max\n")
        .meminfo(64 * GIB, 60 * GIB, 50 * GIB);
    let limits = check_winner(
        &t,
        SourceKind::CgroupV2Max,
        limit,
        "/sys/fs/cgroup/app.slice/job/memory.max",
    );
    assert_eq!(
        limits.usage_scope,
        UsageScope::CgroupV2 {
            dir: "/sys/fs/cgroup/app.slice/job".into()
        }
    );
    let high = limits
        .sources
        .iter()
        .find(|s| s.kind == SourceKind::CgroupV2High)
        .expect("high listed");
    assert_eq!(high.status, SourceStatus::Unlimited);
    assert_eq!(high.note, "no limit (max)");
}

#[test]
fn nested_v2_tighter_parent_wins() {
    let mut rng = seeded_rng("nested_v2_tighter_parent_wins");
    let parent = pages(&mut rng, GIB, 4 * GIB);
    let leaf = parent + pages(&mut rng, GIB, 4 * GIB);
    let t = Tree::new("v2nested");
    t.cgroup_v2("/a/b/c")
        .write("/sys/fs/cgroup/a/b/c/memory.max", &format!("{leaf}\n"))
        .write("/sys/fs/cgroup/a/b/memory.max", "max\n")
        .write("/sys/fs/cgroup/a/memory.max", &format!("{parent}\n"))
        .meminfo(64 * GIB, 60 * GIB, 50 * GIB);
    let limits = check_winner(
        &t,
        SourceKind::CgroupV2Max,
        parent,
        "/sys/fs/cgroup/a/memory.max",
    );
    // Usage is measured where the winning limit applies: the parent sees the siblings too.
    assert_eq!(
        limits.usage_scope,
        UsageScope::CgroupV2 {
            dir: "/sys/fs/cgroup/a".into()
        }
    );
    let leaf_src = limits
        .sources
        .iter()
        .find(|s| s.limit_bytes() == Some(leaf))
        .expect("leaf listed");
    assert!(
        leaf_src.note.starts_with("larger than the winning limit"),
        "{}",
        leaf_src.note
    );
}

#[test]
fn v2_soft_high_below_max_wins() {
    let mut rng = seeded_rng("v2_soft_high_below_max_wins");
    let high = pages(&mut rng, GIB, 4 * GIB);
    let max = high + pages(&mut rng, GIB, 4 * GIB);
    let t = Tree::new("v2high");
    t.cgroup_v2("/job")
        .write("/sys/fs/cgroup/job/memory.max", &format!("{max}\n"))
        .write("/sys/fs/cgroup/job/memory.high", &format!("{high}\n"))
        .meminfo(64 * GIB, 60 * GIB, 50 * GIB);
    let limits = check_winner(
        &t,
        SourceKind::CgroupV2High,
        high,
        "/sys/fs/cgroup/job/memory.high",
    );
    assert_eq!(limits.winning_source().note, "smallest bound (soft)");
}

#[test]
fn v2_max_everywhere_falls_back_to_meminfo() {
    let mut rng = seeded_rng("v2_max_everywhere_falls_back_to_meminfo");
    let total = pages(&mut rng, 8 * GIB, 64 * GIB);
    let avail = pages(&mut rng, GIB, total);
    let t = Tree::new("v2max");
    t.cgroup_v2("/a/b")
        .write("/sys/fs/cgroup/a/b/memory.max", "max\n")
        .write("/sys/fs/cgroup/a/b/memory.high", "max\n")
        .write("/sys/fs/cgroup/a/memory.max", "max\n")
        .meminfo(total, avail, avail / 2);
    let limits = check_winner(&t, SourceKind::MemAvailable, avail, "/proc/meminfo");
    assert_eq!(limits.usage_scope, UsageScope::System);
    assert!(limits
        .sources
        .iter()
        .filter(|s| s.kind == SourceKind::CgroupV2Max)
        .all(|s| s.status == SourceStatus::Unlimited));
}

#[test]
fn v2_missing_memory_controller_is_reported() {
    let mut rng = seeded_rng("v2_missing_memory_controller_is_reported");
    let total = pages(&mut rng, 8 * GIB, 64 * GIB);
    let t = Tree::new("v2nomem");
    t.cgroup_v2("/job")
        .write("/sys/fs/cgroup/cgroup.controllers", "cpu io pids\n")
        .meminfo(total, total, total / 2);
    let limits = check_winner(&t, SourceKind::MemTotal, total, "/proc/meminfo");
    let v2 = limits
        .sources
        .iter()
        .find(|s| s.kind == SourceKind::CgroupV2Max)
        .expect("reported");
    assert_eq!(v2.status, SourceStatus::Missing);
    assert!(
        v2.note.contains("memory controller not available"),
        "{}",
        v2.note
    );

    // Controller present at the top but not delegated to the subtree.
    let t = Tree::new("v2nodeleg");
    t.cgroup_v2("/job").meminfo(total, total, total / 2);
    let limits = detect(&t.root).expect("meminfo");
    let v2 = limits
        .sources
        .iter()
        .find(|s| s.kind == SourceKind::CgroupV2Max)
        .expect("reported");
    assert!(v2.note.contains("not enabled"), "{}", v2.note);
}

#[test]
fn meminfo_only() {
    let mut rng = seeded_rng("meminfo_only");
    let total = pages(&mut rng, 8 * GIB, 64 * GIB);
    let avail = pages(&mut rng, GIB, total);
    let t = Tree::new("meminfo");
    t.meminfo(total, avail, avail / 3);
    let limits = check_winner(&t, SourceKind::MemAvailable, avail, "/proc/meminfo");
    assert_eq!(limits.mem_total_bytes, Some(total));
    assert!(
        limits.notes.iter().any(|n| n.contains("cgroups skipped")),
        "{:?}",
        limits.notes
    );
}

#[test]
fn malformed_and_unreadable_sources_are_skipped() {
    let t = Tree::new("malformed");
    t.cgroup_v2("/job")
        .write("/sys/fs/cgroup/job/memory.max", "lots\n")
        .mkdir("/sys/fs/cgroup/job/memory.high") // a directory: exists but unreadable as a file
        .meminfo(32 * GIB, 30 * GIB, 20 * GIB);
    let limits = check_winner(&t, SourceKind::MemAvailable, 30 * GIB, "/proc/meminfo");
    let max = limits
        .sources
        .iter()
        .find(|s| s.kind == SourceKind::CgroupV2Max)
        .expect("listed");
    assert!(
        matches!(&max.status, SourceStatus::Malformed(m) if m.contains("lots")),
        "{max:?}"
    );
    let high = limits
        .sources
        .iter()
        .find(|s| s.kind == SourceKind::CgroupV2High)
        .expect("listed");
    assert!(
        matches!(high.status, SourceStatus::Unreadable(_)),
        "{high:?}"
    );
    assert!(high.note.starts_with("unreadable"), "{}", high.note);
}

#[test]
fn nothing_readable_is_an_error() {
    let t = Tree::new("empty");
    match detect(&t.root) {
        Err(BudgetError::NoLimitFound { root, .. }) => assert_eq!(root, t.root),
        other => panic!("expected NoLimitFound, got {other:?}"),
    }
    t.write("/proc/meminfo", "MemTotal: banana kB\n");
    assert!(matches!(
        detect(&t.root),
        Err(BudgetError::NoLimitFound { .. })
    ));
}

#[test]
fn budget_from_detection_margins_and_sizes() {
    let mut rng = seeded_rng("budget_from_detection_margins_and_sizes");
    let limit = pages(&mut rng, 2 * GIB, 200 * GIB);
    let t = Tree::new("sizes");
    t.cgroup_v2("/job")
        .write("/sys/fs/cgroup/job/memory.max", &format!("{limit}\n"))
        .meminfo(256 * GIB, 250 * GIB, 200 * GIB);
    let opts = |budget: Option<&str>, margin: Option<&str>| DetectOptions {
        budget: budget.map(|s| SizeSpec::parse(s).expect("valid spec")),
        safety_margin: margin.map(|s| SizeSpec::parse(s).expect("valid spec")),
        drift_check: false,
        rlimits: Some(ProcessLimits::UNLIMITED),
        ..DetectOptions::with_root(&t.root)
    };

    let b = Budget::detect(&opts(None, None)).expect("default");
    let margin = default_safety_margin(limit);
    assert_eq!(b.total_bytes(), limit - margin);
    let det = b.detection().expect("kept");
    assert_eq!(det.safety_margin_bytes, margin);
    assert_eq!(det.limits.limit_bytes, limit);

    let b = Budget::detect(&opts(Some("50%"), None)).expect("percent");
    assert_eq!(b.total_bytes(), limit / 2);

    let b = Budget::detect(&opts(Some("1GiB"), Some("512MiB"))).expect("explicit");
    assert_eq!(b.total_bytes(), GIB);

    match Budget::detect(&opts(Some("1TiB"), None)) {
        Err(BudgetError::BudgetExceedsLimit {
            budget_bytes,
            limit_bytes,
            margin_bytes,
        }) => {
            assert_eq!(
                (budget_bytes, limit_bytes, margin_bytes),
                (1 << 40, limit, margin)
            );
        }
        other => panic!("expected BudgetExceedsLimit, got {other:?}"),
    }
    match Budget::detect(&opts(None, Some("100%"))) {
        Err(BudgetError::MarginTooLarge {
            margin_bytes,
            limit_bytes,
        }) => {
            assert_eq!((margin_bytes, limit_bytes), (limit, limit));
        }
        other => panic!("expected MarginTooLarge, got {other:?}"),
    }
    match Budget::detect(&opts(Some("0"), None)) {
        Err(BudgetError::ZeroBudget { what }) => assert!(what.contains("explicit"), "{what}"),
        other => panic!("expected ZeroBudget, got {other:?}"),
    }
}

#[test]
fn default_margin_rule() {
    let mut rng = seeded_rng("default_margin_rule");
    for _ in 0..1000 {
        use rand::RngExt;
        let limit: u64 = rng.random_range(1..(1u64 << 44));
        let m = default_safety_margin(limit);
        assert!(m <= limit / 2, "margin {m} over half of {limit}");
        assert!(m <= 8 * GIB);
        if limit >= 512 << 20 {
            assert!(m >= 256 << 20, "margin {m} under 256 MiB for {limit}");
        }
    }
}

mod usage {
    use super::*;
    use memory_budget::{KernelProbe, UsageProbe};
    use rand::RngExt;

    const STATUS: &str = "Name:\tprover\nVmPeak:\t 9000 kB\nVmLck:\t    64 kB\nVmPin:\t    32 kB\nVmRSS:\t  5000 kB\nRssAnon:\t  3000 kB\nRssFile:\t  1900 kB\nRssShmem:\t   100 kB\nVmPTE:\t    40 kB\n";

    #[test]
    fn cgroup_v2_hard_usage_excludes_clean_file_cache() {
        let mut rng = seeded_rng("cgroup_v2_hard_usage_excludes_clean_file_cache");
        let anon = pages(&mut rng, 4096, 4 * GIB);
        let active_file = pages(&mut rng, 4096, GIB);
        let inactive_file = pages(&mut rng, 4096, GIB);
        let dirty = pages(&mut rng, 0, active_file);
        let kernel = pages(&mut rng, 4096, 256 << 20);
        let shmem = pages(&mut rng, 0, 64 << 20);
        let file = active_file + inactive_file;
        let current = anon + file + kernel + shmem;
        let t = Tree::new("v2usage");
        t.write("/sys/fs/cgroup/job/memory.current", &format!("{current}\n"))
            .write(
                "/sys/fs/cgroup/job/memory.stat",
                &format!(
                    "anon {anon}\nfile {file}\nkernel {kernel}\nsock 0\nshmem {shmem}\nfile_mapped 0\nfile_dirty {dirty}\nfile_writeback 0\nunevictable 0\nactive_file {active_file}\ninactive_file {inactive_file}\nsome_new_key 7\n"
                ),
            )
            .write("/proc/self/status", STATUS);
        let m = KernelProbe::new(
            t.root.clone(),
            UsageScope::CgroupV2 {
                dir: "/sys/fs/cgroup/job".into(),
            },
        )
        .measure()
        .expect("readable");
        let clean = file - dirty;
        assert_eq!(m.current_bytes, current);
        assert_eq!(m.reclaimable_bytes, clean);
        assert_eq!(m.hard_bytes, current - clean);
        assert_eq!(m.own_hard_bytes(), m.hard_bytes);
        assert!(m.breakdown.contains(&("anon".to_string(), anon)));
        assert!(m.breakdown.contains(&("kernel".to_string(), kernel)));
        let p = m.process.expect("status read");
        assert_eq!(
            (
                p.vm_rss_bytes,
                p.rss_anon_bytes,
                p.vm_lck_bytes,
                p.vm_pin_bytes
            ),
            (
                Some(5000 << 10),
                Some(3000 << 10),
                Some(64 << 10),
                Some(32 << 10)
            )
        );
        assert_eq!(p.hard_bytes(), Some((3000 + 100 + 40) << 10));
    }

    #[test]
    fn cgroup_v1_usage() {
        let mut rng = seeded_rng("cgroup_v1_usage");
        let rss = pages(&mut rng, 4096, 4 * GIB);
        let active_file = pages(&mut rng, 4096, GIB);
        let inactive_file = pages(&mut rng, 4096, GIB);
        let usage = rss + active_file + inactive_file;
        let t = Tree::new("v1usage");
        t.write("/sys/fs/cgroup/memory/job/memory.usage_in_bytes", &format!("{usage}\n")).write(
            "/sys/fs/cgroup/memory/job/memory.stat",
            &format!("cache 1\nrss 2\ntotal_rss {rss}\ntotal_cache {}\ntotal_active_file {active_file}\ntotal_inactive_file {inactive_file}\ntotal_dirty 0\ntotal_writeback 0\n", active_file + inactive_file),
        );
        let m = KernelProbe::new(
            t.root.clone(),
            UsageScope::CgroupV1 {
                dir: "/sys/fs/cgroup/memory/job".into(),
            },
        )
        .measure()
        .expect("readable");
        assert_eq!((m.current_bytes, m.hard_bytes), (usage, rss));
        assert!(m.process.is_none(), "no /proc/self/status in this tree");
    }

    #[test]
    fn host_usage_from_meminfo_and_own_from_status() {
        let mut rng = seeded_rng("host_usage_from_meminfo_and_own_from_status");
        let total = pages(&mut rng, 8 * GIB, 64 * GIB);
        let avail = pages(&mut rng, GIB, total);
        let free = rng.random_range(0..avail) & !1023;
        let t = Tree::new("hostusage");
        t.meminfo(total, avail, free)
            .write("/proc/self/status", STATUS);
        let m = KernelProbe::new(t.root.clone(), UsageScope::System)
            .measure()
            .expect("readable");
        assert_eq!(m.hard_bytes, total - avail);
        assert_eq!(m.current_bytes, total - free);
        assert_eq!(m.own_hard_bytes(), (3000 + 100 + 40) << 10);
    }

    #[test]
    fn missing_or_malformed_usage_files_are_errors_not_panics() {
        let t = Tree::new("badusage");
        let probe = KernelProbe::new(
            t.root.clone(),
            UsageScope::CgroupV2 {
                dir: "/sys/fs/cgroup/x".into(),
            },
        );
        assert!(matches!(probe.measure(), Err(BudgetError::Io { .. })));
        t.write("/sys/fs/cgroup/x/memory.current", "many\n");
        match probe.measure() {
            Err(BudgetError::Malformed { found, .. }) => assert_eq!(found, "many"),
            other => panic!("expected Malformed, got {other:?}"),
        }
        t.write("/proc/meminfo", "MemTotal: 1000 kB\n");
        assert!(matches!(
            KernelProbe::new(t.root.clone(), UsageScope::System).measure(),
            Err(BudgetError::Malformed { .. })
        ));
    }

    #[test]
    fn detected_budget_admits_within_real_headroom() {
        let mut rng = seeded_rng("detected_budget_admits_within_real_headroom");
        let limit = pages(&mut rng, 4 * GIB, 64 * GIB);
        let t = Tree::new("detectdrift");
        let untracked = pages(&mut rng, GIB, 2 * GIB);
        t.cgroup_v2("/job")
            .write("/sys/fs/cgroup/job/memory.max", &format!("{limit}\n"))
            .write(
                "/sys/fs/cgroup/job/memory.current",
                &format!("{untracked}\n"),
            )
            .write(
                "/sys/fs/cgroup/job/memory.stat",
                &format!("anon {untracked}\nfile 0\nactive_file 0\ninactive_file 0\n"),
            )
            .meminfo(256 * GIB, 250 * GIB, 200 * GIB);
        let b = Budget::detect(&DetectOptions {
            refresh_interval: std::time::Duration::from_secs(3600),
            // Each reading as it is (the decaying estimate is tested in admission.rs).
            untracked_half_life: std::time::Duration::ZERO,
            rlimits: Some(ProcessLimits::UNLIMITED),
            ..DetectOptions::with_root(&t.root)
        })
        .expect("detected");
        let margin = default_safety_margin(limit);
        assert_eq!(b.total_bytes(), limit - margin);
        let s = b.snapshot();
        assert_eq!(s.measured_hard_bytes, Some(untracked));
        assert_eq!(s.cap_bytes, limit - margin - untracked);
        assert!(b
            .try_reserve(s.cap_bytes + 1, memory_budget::Category::Other, "x")
            .is_err());
        let r = b
            .try_reserve(s.cap_bytes, memory_budget::Category::Other, "x")
            .expect("fits real headroom");
        drop(r);
        // The untracked memory is freed; a forced reading lifts the ceiling back to the budget.
        t.write("/sys/fs/cgroup/job/memory.current", "0\n")
            .write("/sys/fs/cgroup/job/memory.stat", "anon 0\nfile 0\n");
        b.refresh_usage().expect("readable");
        assert_eq!(b.snapshot().cap_bytes, limit - margin);
    }
}

#[test]
fn the_mount_containing_the_cgroup_is_chosen() {
    let mut rng = seeded_rng("the_mount_containing_the_cgroup_is_chosen");
    let limit = pages(&mut rng, GIB, 8 * GIB);
    let t = Tree::new("twomounts");
    t.write("/proc/self/cgroup", "0::/pods/p1/c1\n")
        .write(
            "/proc/self/mountinfo",
            "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n\
             30 22 0:26 /other /mnt/other-cgroup rw - cgroup2 cgroup2 rw\n\
             31 22 0:26 /pods/p1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
        )
        .write("/sys/fs/cgroup/c1/memory.max", &format!("{limit}\n"))
        .meminfo(64 * GIB, 60 * GIB, 50 * GIB);
    check_winner(
        &t,
        SourceKind::CgroupV2Max,
        limit,
        "/sys/fs/cgroup/c1/memory.max",
    );
}

fn rlimits(address_space: Rlimit, data: Rlimit) -> ProcessLimits {
    ProcessLimits {
        address_space,
        data,
    }
}

fn source(limits: &memory_budget::Limits, kind: SourceKind) -> &memory_budget::LimitSource {
    limits
        .sources
        .iter()
        .find(|s| s.kind == kind)
        .unwrap_or_else(|| panic!("no {kind:?} in {:#?}", limits.sources))
}

#[test]
fn rlimit_as_wins_when_it_is_the_smallest() {
    let mut rng = seeded_rng("rlimit_as_wins_when_it_is_the_smallest");
    let avail = pages(&mut rng, 8 * GIB, 60 * GIB);
    let as_limit = pages(&mut rng, GIB, avail);
    let t = Tree::new("rlimit-as");
    t.cgroup_v2("/a")
        .write("/sys/fs/cgroup/a/memory.max", "max\n")
        .meminfo(64 * GIB, avail, avail / 2);
    let limits = detect_limits_with(
        &t.root,
        &rlimits(Rlimit::Limit(as_limit), Rlimit::Unlimited),
    )
    .expect("a limit");
    let w = limits.winning_source();
    assert_eq!(w.kind, SourceKind::RlimitAs, "{:#?}", limits.sources);
    assert_eq!(w.kind.as_str(), "rlimit.as");
    assert_eq!(limits.limit_bytes, as_limit);
    assert_eq!(w.path, Path::new("getrlimit(RLIMIT_AS)"));
    assert_eq!(w.note, "smallest bound");
    assert!(!w.kind.is_soft());
    assert_eq!(limits.usage_scope, UsageScope::AddressSpace);
    let data = source(&limits, SourceKind::RlimitData);
    assert_eq!(data.status, SourceStatus::Unlimited);
    assert_eq!(data.note, "unlimited (RLIM_INFINITY)");
    assert_eq!(data.kind.as_str(), "rlimit.data");
    // Unlimited ones are skipped with the reason, as every other source is.
    let limits = detect(&t.root).expect("meminfo");
    assert_eq!(limits.winning_source().kind, SourceKind::MemAvailable);
    assert_eq!(
        source(&limits, SourceKind::RlimitAs).note,
        "unlimited (RLIM_INFINITY)"
    );
}

#[test]
fn the_smallest_of_rlimits_and_cgroup_wins() {
    let mut rng = seeded_rng("the_smallest_of_rlimits_and_cgroup_wins");
    let cgroup = pages(&mut rng, 2 * GIB, 16 * GIB);
    let t = Tree::new("rlimit-mix");
    t.cgroup_v2("/job")
        .write("/sys/fs/cgroup/job/memory.max", &format!("{cgroup}\n"))
        .meminfo(64 * GIB, 60 * GIB, 50 * GIB);
    // RLIMIT_DATA below the cgroup, RLIMIT_AS above it: data wins.
    let data = pages(&mut rng, GIB, cgroup);
    let as_limit = cgroup + pages(&mut rng, 4096, GIB);
    let limits = detect_limits_with(
        &t.root,
        &rlimits(Rlimit::Limit(as_limit), Rlimit::Limit(data)),
    )
    .expect("a limit");
    assert_eq!(limits.winning_source().kind, SourceKind::RlimitData);
    assert_eq!(limits.limit_bytes, data);
    assert_eq!(limits.usage_scope, UsageScope::DataSegment);
    assert!(source(&limits, SourceKind::RlimitAs)
        .note
        .starts_with("larger than the winning limit"));
    // Both above the cgroup: the cgroup wins and the rlimits say why they lost.
    let limits = detect_limits_with(
        &t.root,
        &rlimits(Rlimit::Limit(as_limit), Rlimit::Limit(as_limit + 1)),
    )
    .expect("a limit");
    assert_eq!(limits.winning_source().kind, SourceKind::CgroupV2Max);
    assert_eq!(limits.limit_bytes, cgroup);
    for kind in [SourceKind::RlimitAs, SourceKind::RlimitData] {
        assert!(source(&limits, kind)
            .note
            .starts_with("larger than the winning limit"));
    }
    // An unreadable one is listed and skipped.
    let limits = detect_limits_with(&t.root, &rlimits(Rlimit::Unreadable(1), Rlimit::Unlimited))
        .expect("a limit");
    let s = source(&limits, SourceKind::RlimitAs);
    assert!(matches!(s.status, SourceStatus::Unreadable(_)), "{s:?}");
    assert!(s.note.starts_with("unreadable"), "{}", s.note);
    // Rlimits alone bound a process that has no other readable source.
    let empty = Tree::new("rlimit-only");
    let limits = detect_limits_with(
        &empty.root,
        &rlimits(Rlimit::Limit(data), Rlimit::Unlimited),
    )
    .expect("the rlimit");
    assert_eq!(limits.winning_source().kind, SourceKind::RlimitAs);
}

#[test]
fn under_rlimit_as_the_drift_check_counts_the_address_space() {
    let mut rng = seeded_rng("under_rlimit_as_the_drift_check_counts_the_address_space");
    let as_limit = pages(&mut rng, 4 * GIB, 32 * GIB);
    let vm_size = pages(&mut rng, 64 << 20, GIB);
    let t = Tree::new("rlimit-drift");
    t.meminfo(256 * GIB, 250 * GIB, 200 * GIB).write(
        "/proc/self/status",
        &format!(
            "VmSize:\t{} kB\nVmData:\t{} kB\nVmRSS:\t{} kB\n",
            vm_size / 1024,
            vm_size / 2048,
            vm_size / 4096
        ),
    );
    let b = Budget::detect(&DetectOptions {
        refresh_interval: std::time::Duration::from_secs(3600),
        rlimits: Some(rlimits(Rlimit::Limit(as_limit), Rlimit::Unlimited)),
        ..DetectOptions::with_root(&t.root)
    })
    .expect("detected");
    let margin = default_safety_margin(as_limit);
    assert_eq!(b.total_bytes(), as_limit - margin);
    // Mappings nobody charged (here all of VmSize) lower the ceiling.
    let s = b.snapshot();
    assert_eq!(s.measured_hard_bytes, Some(vm_size));
    assert_eq!(s.cap_bytes, as_limit - margin - vm_size);
    let m = memory_budget::KernelProbe::new(t.root.clone(), UsageScope::DataSegment)
        .measure()
        .expect("VmData");
    assert_eq!(m.hard_bytes, vm_size / 2048 * 1024);
    assert_eq!(memory_budget::scope_text(&m.scope), "process:VmData");
}
