//! The supervisor: parameters once, a run unconstrained to measure the workload's peak,
//! then one run per share of that peak inside a cgroup limited to it; the table and the
//! JSON of all of them.

use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::cgroup::{CgroupEvents, ChildCgroup, MemoryCgroup};
use crate::error::{Result, StressError};
use crate::workload::{read_report, RunReport};

/// Bytes of the largest under-charge a run may show at any sample (the target).
pub const MAX_UNDERCHARGE_TARGET_BYTES: u64 = 64 << 20;
/// The most peak charged may exceed peak measured by (the target: 1.15×).
pub const MAX_OVERCHARGE_RATIO_TARGET: f64 = 1.15;

/// Settings of a supervised stress run.
#[derive(Clone, Debug)]
pub struct SuperviseConfig {
    /// The program that runs the workload (`pinion-stress`; its `run` subcommand).
    pub exe: PathBuf,
    /// Arguments of every `run` (workload, devices, seed, parameters), without the
    /// per-run ones (cgroup, report and sample files), which the supervisor adds.
    pub run_args: Vec<String>,
    /// Extra environment of every run.
    pub run_env: Vec<(String, String)>,
    /// Shares of the unconstrained peak, in percent, one constrained run each.
    pub shares: Vec<u32>,
    /// Fail when no cgroup can be made (else: the unconstrained run alone, measured from
    /// the process, and the reason).
    pub require_cgroup: bool,
    /// The run folder: each run's report (`<label>.json`) and samples (`<label>.csv`).
    pub out: PathBuf,
    /// A run still going after this long is killed (and reported as such).
    pub run_timeout: Duration,
}

/// One run's row.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ShareRun {
    /// `unconstrained`, or the share (`60%`).
    pub label: String,
    /// The share of the unconstrained peak (`None` for the unconstrained run).
    pub share_percent: Option<u32>,
    /// The cgroup's `memory.max` / `memory.limit_in_bytes` (`None`: no limit).
    pub limit_bytes: Option<u64>,
    /// How the run's process ended (`exit 0`, `killed by signal 9`, `timed out`).
    pub exit: String,
    /// Processes the OOM killer killed in the run's cgroup.
    pub oom_kills: u64,
    /// OOM events of the cgroup (reclaim failed at the limit).
    pub oom_events: u64,
    /// Times usage reached the limit (reclaim ran).
    pub limit_hits: u64,
    /// The kernel's own peak of `current` (page cache included), where it keeps one.
    pub kernel_peak_current_bytes: Option<u64>,
    /// Jobs completed with a proof that verified.
    pub proofs_completed: u64,
    /// Jobs that failed, by reason.
    pub proofs_failed: std::collections::BTreeMap<String, u64>,
    /// Jobs never finished (the run died or timed out first).
    pub proofs_lost: u64,
    /// max over samples of `measured − charged`.
    pub max_undercharge_bytes: u64,
    /// max over samples of `charged − measured`.
    pub max_overcharge_bytes: u64,
    /// The most measured (`anon + kernel + shmem`) at any sample.
    pub peak_measured_bytes: u64,
    /// The most charged at any sample.
    pub peak_charged_bytes: u64,
    /// The most `current` at any sample.
    pub peak_current_bytes: u64,
    /// Proofs a second.
    pub proofs_per_s: f64,
    /// Key loads and evictions.
    pub key_loads: u64,
    /// Keys evicted to make room.
    pub key_evictions: u64,
    /// The budget's total in the run.
    pub budget_bytes: u64,
    /// The run's full report (`None` when it left none).
    pub report: Option<RunReport>,
}

impl ShareRun {
    /// Whether nothing broke: the process finished, nobody was OOM-killed, every job
    /// completed with a valid proof, and `current` stayed within the limit.
    pub fn clean(&self) -> bool {
        self.exit == "exit 0"
            && self.oom_kills == 0
            && self.proofs_failed.is_empty()
            && self.proofs_lost == 0
            && self
                .limit_bytes
                .is_none_or(|l| self.peak_current_bytes <= l)
    }

    /// Whether the accuracy targets hold: under-charge at most 64 MiB at every
    /// sample, peak charged at most 1.15× peak measured.
    pub fn accurate(&self) -> bool {
        self.max_undercharge_bytes <= MAX_UNDERCHARGE_TARGET_BYTES
            && (self.peak_charged_bytes as f64)
                <= MAX_OVERCHARGE_RATIO_TARGET * self.peak_measured_bytes as f64
    }
}

/// Everything a supervised run found.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StressReport {
    /// The cgroup the runs' cgroups were made under (`v1 DIR`, `v2 DIR`), or why none.
    pub cgroup: String,
    /// Whether runs were constrained (false: no cgroup could be made).
    pub constrained: bool,
    /// The runs: unconstrained first, then each share.
    pub runs: Vec<ShareRun>,
    /// Every run clean (see [`ShareRun::clean`]).
    pub clean: bool,
    /// Every run the targets are about within them (see [`ShareRun::accurate`]): the
    /// constrained runs (the issue states its targets per share), or the unconstrained one
    /// when there are none. The unconstrained run only measures the peak: with no limit,
    /// the engine admits every job's working set ahead of the device, so its over-charge
    /// is reported but not judged.
    pub accurate: bool,
}

fn describe_exit(status: Option<ExitStatus>) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status {
        None => "timed out (killed)".into(),
        Some(s) => match (s.code(), s.signal()) {
            (Some(c), _) => format!("exit {c}"),
            (None, Some(sig)) => format!("killed by signal {sig}"),
            _ => "ended".into(),
        },
    }
}

fn wait_with_timeout(child: &mut Child, timeout: Duration) -> Result<Option<ExitStatus>> {
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(s)) => return Ok(Some(s)),
            Ok(None) if start.elapsed() >= timeout => {
                let _ = child.kill();
                let _ = child.wait();
                return Ok(None);
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(100)),
            Err(source) => {
                return Err(StressError::Spawn {
                    program: PathBuf::from("(wait)"),
                    source,
                })
            }
        }
    }
}

/// One run: its process (in `cgroup` when given), its report and the cgroup's events.
fn one_run(
    config: &SuperviseConfig,
    label: &str,
    share_percent: Option<u32>,
    cgroup: Option<ChildCgroup>,
    proofs: u64,
) -> Result<ShareRun> {
    let report_path = config.out.join(format!("{label}.json"));
    let samples_path = config.out.join(format!("{label}.csv"));
    let _ = std::fs::remove_file(&report_path);
    let mut args = vec!["run".to_string()];
    args.extend(config.run_args.iter().cloned());
    args.extend([
        "--report".into(),
        report_path.display().to_string(),
        "--samples".into(),
        samples_path.display().to_string(),
    ]);
    if let Some(cg) = &cgroup {
        args.extend([
            "--cgroup".into(),
            cg.cgroup().dir.display().to_string(),
            "--cgroup-version".into(),
            cg.cgroup().version.name().into(),
        ]);
    }
    let mut cmd = match &cgroup {
        Some(cg) => cg.command(&config.exe, &args),
        None => {
            let mut c = Command::new(&config.exe);
            c.args(&args);
            c
        }
    };
    cmd.envs(config.run_env.iter().map(|(k, v)| (k, v)));
    let limit = cgroup.as_ref().and_then(ChildCgroup::limit_bytes);
    eprintln!(
        "stress: run {label}{}",
        limit.map_or(String::new(), |l| format!(
            ", limit {}",
            memory_budget::format_bytes(l)
        ))
    );
    let mut child = cmd.spawn().map_err(|source| StressError::Spawn {
        program: config.exe.clone(),
        source,
    })?;
    let status = wait_with_timeout(&mut child, config.run_timeout)?;
    let events = match &cgroup {
        Some(cg) => cg.events()?,
        None => CgroupEvents::default(),
    };
    if let Some(cg) = cgroup {
        cg.remove()?;
    }
    let report = read_report(&report_path).ok();
    let mut row = ShareRun {
        label: label.to_string(),
        share_percent,
        limit_bytes: limit,
        exit: describe_exit(status),
        oom_kills: events.oom_kills,
        oom_events: events.oom,
        limit_hits: events.limit_hits,
        kernel_peak_current_bytes: events.peak_current_bytes,
        ..ShareRun::default()
    };
    match &report {
        Some(r) => {
            let s = &r.samples;
            row.proofs_completed = r.proofs_completed;
            row.proofs_failed = r.proofs_failed.by_reason.clone();
            row.proofs_lost = proofs.saturating_sub(r.proofs_completed + r.proofs_failed.total());
            row.max_undercharge_bytes = s.max_undercharge_bytes;
            row.max_overcharge_bytes = s.max_overcharge_bytes;
            row.peak_measured_bytes = s.peak_measured_bytes;
            row.peak_charged_bytes = s.peak_charged_bytes;
            row.peak_current_bytes = s.peak_current_bytes;
            row.proofs_per_s = r.proofs_per_s;
            row.key_loads = r.key_loads;
            row.key_evictions = r.key_evictions;
            row.budget_bytes = r.budget_bytes;
        }
        None => row.proofs_lost = proofs,
    }
    row.report = report;
    Ok(row)
}

/// Runs everything (see the module docs). `proofs` is the jobs of each run (to count the
/// ones a dead run never finished).
pub fn supervise(config: &SuperviseConfig, proofs: u64) -> Result<StressReport> {
    std::fs::create_dir_all(&config.out).map_err(StressError::io("create", &config.out))?;
    let tag = format!("pinion-stress-{}", std::process::id());
    // A cgroup for the unconstrained run too, so its peak is measured the way the
    // constrained runs' limits are enforced.
    let parent = MemoryCgroup::of_this_process();
    let (parent, unconstrained_cg, why_not) = match parent {
        Ok(p) => match p.create_child(&format!("{tag}-unconstrained"), None) {
            Ok(cg) => (Some(p), Some(cg), String::new()),
            Err(e) => (None, None, e.to_string()),
        },
        Err(e) => (None, None, e.to_string()),
    };
    if parent.is_none() && config.require_cgroup {
        return Err(StressError::NoCgroup { reason: why_not });
    }
    let mut report = StressReport {
        cgroup: match &parent {
            Some(p) => format!("{} {}", p.version.name(), p.dir.display()),
            None => format!("none: {why_not}"),
        },
        constrained: parent.is_some(),
        ..StressReport::default()
    };
    if parent.is_none() {
        eprintln!("stress: {why_not}; the unconstrained run alone, measured from the process");
    }
    let first = one_run(config, "unconstrained", None, unconstrained_cg, proofs)?;
    let peak = first.peak_measured_bytes;
    let measured = first.clean() && peak > 0;
    report.runs.push(first);
    if !measured {
        eprintln!(
            "stress: the unconstrained run did not finish cleanly; no share of its peak to run"
        );
    }
    if let (Some(parent), true) = (&parent, measured) {
        for &share in &config.shares {
            // Page-aligned, as the kernel rounds it anyway.
            let limit = (peak * u64::from(share) / 100) & !4095;
            let cg = parent.create_child(&format!("{tag}-{share}"), Some(limit))?;
            report.runs.push(one_run(
                config,
                &format!("{share}%"),
                Some(share),
                Some(cg),
                proofs,
            )?);
        }
    }
    report.clean = report.runs.iter().all(ShareRun::clean);
    report.accurate = judged(&report.runs).all(ShareRun::accurate);
    let json = config.out.join("report.json");
    let text = serde_json::to_string_pretty(&report).map_err(|e| StressError::Report {
        path: json.clone(),
        reason: e.to_string(),
    })?;
    std::fs::write(&json, text).map_err(StressError::io("write", &json))?;
    Ok(report)
}

/// The runs the accuracy targets apply to (see [`StressReport::accurate`]).
fn judged(runs: &[ShareRun]) -> impl Iterator<Item = &ShareRun> {
    let constrained = runs.iter().any(|r| r.share_percent.is_some());
    runs.iter()
        .filter(move |r| !constrained || r.share_percent.is_some())
}

fn mib(b: u64) -> String {
    format!("{:.1}", b as f64 / (1u64 << 20) as f64)
}

/// The report as a Markdown table (sizes in MiB) with a verdict line.
pub fn table(report: &StressReport) -> String {
    let mut s = String::new();
    s.push_str("| run | limit | exit | OOM kills | proofs ok | failed | lost | proofs/s | peak measured | peak charged | charged/measured | max under | max over | peak current | key loads / evictions |\n");
    s.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for r in &report.runs {
        let failed: u64 = r.proofs_failed.values().sum();
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {:.2} | {} | {} | {:.2} | {} | {} | {} | {} / {} |\n",
            r.label,
            r.limit_bytes.map_or("none".into(), mib),
            r.exit,
            r.oom_kills,
            r.proofs_completed,
            failed,
            r.proofs_lost,
            r.proofs_per_s,
            mib(r.peak_measured_bytes),
            mib(r.peak_charged_bytes),
            r.peak_charged_bytes as f64 / r.peak_measured_bytes.max(1) as f64,
            mib(r.max_undercharge_bytes),
            mib(r.max_overcharge_bytes),
            mib(r.peak_current_bytes),
            r.key_loads,
            r.key_evictions,
        ));
    }
    s.push_str("(sizes in MiB; measured = anon + kernel + shmem of the run's cgroup)\n");
    for r in &report.runs {
        for (why, n) in &r.proofs_failed {
            s.push_str(&format!("{}: {n} failed: {why}\n", r.label));
        }
        if let Some(stall) = r.report.as_ref().and_then(|x| x.stall.as_ref()) {
            s.push_str(&format!("{}: gave up: {}\n", r.label, stall.describe()));
        }
        if let Some(b) = r.report.as_ref().and_then(|x| x.gpu_context_host_bytes) {
            s.push_str(&format!(
                "{}: opening GPU 0 took {} MiB of host memory (the engine charges what the device measured)\n",
                r.label,
                mib(b)
            ));
        }
    }
    s.push_str(&format!(
        "stress: cgroup {}; {}; {}\n",
        report.cgroup,
        if report.clean {
            "clean (no OOM kill, every proof valid, nothing failed or lost)"
        } else {
            "NOT clean"
        },
        if report.accurate {
            "accuracy targets met (under-charge <= 64 MiB, charged <= 1.15x measured)"
        } else {
            "accuracy targets missed (under-charge <= 64 MiB, charged <= 1.15x measured)"
        }
    ));
    s
}

/// What a command used, measured from outside: the peaks of its cgroup's figures.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandMeasure {
    /// How it ended.
    pub exit: String,
    /// Samples taken.
    pub n_samples: u64,
    /// The most `anon + kernel + shmem` at any sample.
    pub peak_measured_bytes: u64,
    /// The most anonymous memory at any sample.
    pub peak_anon_bytes: u64,
    /// The most kernel memory at any sample.
    pub peak_kernel_bytes: u64,
    /// The most page cache at any sample.
    pub peak_file_bytes: u64,
    /// The most `current` at any sample.
    pub peak_current_bytes: u64,
    /// The kernel's own peak of `current`, where it keeps one.
    pub kernel_peak_current_bytes: Option<u64>,
    /// OOM kills in its cgroup.
    pub oom_kills: u64,
}

/// Runs `program args` alone in a new cgroup without a limit under this process's, and
/// samples that cgroup every `interval` until the program ends: what a command (`pinion
/// demo`) really used, to set beside the charged peak it reports itself.
pub fn measure_command(
    program: &std::path::Path,
    args: &[String],
    interval: Duration,
) -> Result<CommandMeasure> {
    let parent = MemoryCgroup::of_this_process()?;
    let cg = parent.create_child(
        &format!("pinion-stress-{}-measure", std::process::id()),
        None,
    )?;
    let mut child = cg
        .command(program, args)
        .spawn()
        .map_err(|source| StressError::Spawn {
            program: program.to_path_buf(),
            source,
        })?;
    let mut m = CommandMeasure::default();
    let status = loop {
        if let Ok(r) = cg.memory() {
            m.n_samples += 1;
            m.peak_measured_bytes = m.peak_measured_bytes.max(r.measured_bytes());
            m.peak_anon_bytes = m.peak_anon_bytes.max(r.anon_bytes);
            m.peak_kernel_bytes = m.peak_kernel_bytes.max(r.kernel_bytes);
            m.peak_file_bytes = m.peak_file_bytes.max(r.file_bytes);
            m.peak_current_bytes = m.peak_current_bytes.max(r.current_bytes);
        }
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) => std::thread::sleep(interval),
            Err(source) => {
                return Err(StressError::Spawn {
                    program: program.to_path_buf(),
                    source,
                })
            }
        }
    };
    let events = cg.events()?;
    cg.remove()?;
    m.exit = describe_exit(status);
    m.kernel_peak_current_bytes = events.peak_current_bytes;
    m.oom_kills = events.oom_kills;
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> ShareRun {
        ShareRun {
            label: "60%".into(),
            share_percent: Some(60),
            limit_bytes: Some(100 << 20),
            exit: "exit 0".into(),
            proofs_completed: 100,
            peak_measured_bytes: 80 << 20,
            peak_charged_bytes: 90 << 20,
            peak_current_bytes: 95 << 20,
            max_undercharge_bytes: 10 << 20,
            ..ShareRun::default()
        }
    }

    #[test]
    fn what_makes_a_run_unclean() {
        assert!(row().clean());
        type Spoil = fn(&mut ShareRun);
        let cases: [(&str, Spoil); 6] = [
            ("killed", |r| r.exit = "killed by signal 9".into()),
            ("oom kill", |r| r.oom_kills = 1),
            ("failed", |r| {
                r.proofs_failed.insert("cancelled".into(), 1);
            }),
            ("lost", |r| r.proofs_lost = 3),
            ("above the limit", |r| {
                r.peak_current_bytes = (100 << 20) + 1
            }),
            ("timed out", |r| r.exit = describe_exit(None)),
        ];
        for (what, spoil) in cases {
            let mut r = row();
            spoil(&mut r);
            assert!(!r.clean(), "{what}");
        }
    }

    #[test]
    fn accuracy_targets() {
        let mut unconstrained = row();
        (unconstrained.label, unconstrained.share_percent) = ("unconstrained".into(), None);
        unconstrained.peak_charged_bytes = unconstrained.peak_measured_bytes * 2;
        assert!(!unconstrained.accurate());
        let runs = [unconstrained.clone(), row()];
        assert_eq!(judged(&runs).count(), 1, "only the shares are judged");
        assert_eq!(
            judged(&runs[..1]).count(),
            1,
            "no share: the unconstrained run"
        );
        assert!(row().accurate());
        let mut r = row();
        r.max_undercharge_bytes = MAX_UNDERCHARGE_TARGET_BYTES + 1;
        assert!(!r.accurate());
        let mut r = row();
        r.peak_charged_bytes = (r.peak_measured_bytes as f64 * 1.16) as u64;
        assert!(!r.accurate());
    }

    #[test]
    fn the_table_says_why() {
        let mut r = row();
        r.proofs_failed
            .insert("proof of mimc-a does not verify".into(), 2);
        r.report = Some(crate::workload::RunReport {
            stall: Some(crate::workload::Stall {
                after_s: 30,
                outstanding_jobs: 12,
                total_bytes: 14 << 20,
                ceiling_bytes: 8 << 20,
                charged_bytes: 2 << 20,
                n_waiting: 1,
                waiting_bytes: 7 << 20,
                untracked_bytes: 6 << 20,
                ..Default::default()
            }),
            ..Default::default()
        });
        let report = StressReport {
            cgroup: "v1 /sys/fs/cgroup/memory/x".into(),
            constrained: true,
            runs: vec![r],
            clean: false,
            accurate: true,
        };
        let t = table(&report);
        assert!(t.contains("| 60% | 100.0 | exit 0 | 0 | 100 | 2 |"), "{t}");
        assert!(
            t.contains("60%: 2 failed: proof of mimc-a does not verify"),
            "{t}"
        );
        assert!(
            t.contains("60%: gave up: no job ended for 30 s with 12 outstanding: 1 request(s) for 7.0 MiB queued in the budget, 6.0 MiB free under its ceiling of 8.0 MiB (total 14.0 MiB less 6.0 MiB the kernel charges beyond the charges)"),
            "{t}"
        );
        assert!(t.contains("NOT clean"), "{t}");
    }
}
