//! The supervisor: one worker process per job, a watchdog on each input, restarts after a
//! hang or a death, findings saved, and the summary.
//!
//! Each worker announces an input before running it. When an input runs past the time
//! cap the worker is killed (`SIGKILL`) and the input, still in the worker's input file,
//! is saved as a hang; when a worker dies mid-input (a signal, an abort after the heap cap
//! or the address-space limit refused an allocation) the input is saved as a crash or a
//! memory-cap overrun. Either way a fresh worker continues after that input.

use std::collections::{BTreeMap, VecDeque};
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};

use crate::caps::HEAP_CAP_MARKER;
use crate::worker::{input_path, save_finding};

/// How long a worker may take to build its fixtures and say `ready`.
const STARTUP_CAP: Duration = Duration::from_secs(120);
/// Lines of a worker's stderr kept for the crash report (backtrace frames left out).
const STDERR_TAIL: usize = 20;

/// One run's settings.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// The worker binary (this program).
    pub exe: PathBuf,
    /// Seed of fixtures and mutations.
    pub seed: u64,
    /// Worker processes.
    pub jobs: usize,
    /// Stop after this many inputs.
    pub inputs: Option<u64>,
    /// Stop starting inputs after this long.
    pub seconds: Option<u64>,
    /// Target names (empty: all).
    pub targets: Vec<String>,
    /// Time cap of one input.
    pub time_cap: Duration,
    /// Address-space limit of a worker (`RLIMIT_AS`).
    pub address_space_bytes: u64,
    /// Heap cap of one input.
    pub heap_cap_bytes: u64,
    /// Budget of one input.
    pub budget_bytes: u64,
    /// Run folder: `work/` (scratch) and `findings/`.
    pub out: PathBuf,
    /// Print a progress line this often (none when zero).
    pub progress_every: Duration,
}

/// What one finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum FindingKind {
    /// A panic (a failed assertion included: a broken guarantee).
    Panic,
    /// The worker died of a signal or exited mid-input.
    Crash,
    /// An allocation refused by the heap cap or the address-space limit.
    MemoryCap,
    /// The input ran past the time cap.
    Hang,
    /// A mutated proof or statement accepted as valid.
    Accepted,
}

impl FindingKind {
    fn name(self) -> &'static str {
        match self {
            FindingKind::Panic => "panic",
            FindingKind::Crash => "crash",
            FindingKind::MemoryCap => "memcap",
            FindingKind::Hang => "hang",
            FindingKind::Accepted => "accepted",
        }
    }
}

/// One finding.
#[derive(Clone, Debug)]
pub struct Finding {
    /// Kind.
    pub kind: FindingKind,
    /// Target.
    pub target: String,
    /// Input index.
    pub index: u64,
    /// What happened.
    pub message: String,
    /// The saved input (when it could be saved).
    pub file: Option<PathBuf>,
}

/// Per-target counts.
#[derive(Clone, Copy, Debug, Default)]
pub struct TargetStats {
    /// Inputs run.
    pub inputs: u64,
    /// Refused with a typed error.
    pub rejected: u64,
    /// Rightly accepted.
    pub accepted: u64,
    /// Accepted as Groth16's known malleability.
    pub malleable: u64,
    /// Findings.
    pub findings: u64,
}

/// The outcome of a run.
#[derive(Debug)]
pub struct Summary {
    /// Seed.
    pub seed: u64,
    /// Workers.
    pub jobs: usize,
    /// Wall time.
    pub elapsed: Duration,
    /// Counts by target name.
    pub targets: BTreeMap<String, TargetStats>,
    /// Every finding.
    pub findings: Vec<Finding>,
    /// Workers started (restarts included).
    pub workers_started: u64,
}

impl Summary {
    /// Inputs run, every target.
    pub fn inputs(&self) -> u64 {
        self.targets.values().map(|t| t.inputs).sum()
    }

    /// Findings of one kind.
    pub fn count(&self, kind: FindingKind) -> u64 {
        self.findings.iter().filter(|f| f.kind == kind).count() as u64
    }

    /// The "panics" of the summary line: panics, crashes and memory-cap overruns.
    pub fn panics(&self) -> u64 {
        self.count(FindingKind::Panic)
            + self.count(FindingKind::Crash)
            + self.count(FindingKind::MemoryCap)
    }

    /// The last line: `fuzz: N inputs, P panics, H hangs, A accepted`.
    pub fn last_line(&self) -> String {
        format!(
            "fuzz: {} inputs, {} panics, {} hangs, {} accepted",
            self.inputs(),
            self.panics(),
            self.count(FindingKind::Hang),
            self.count(FindingKind::Accepted)
        )
    }

    /// The report: settings, a table by target, exclusions, findings, the last line.
    pub fn print(&self, cfg: &RunConfig) {
        let secs = self.elapsed.as_secs_f64();
        println!(
            "fuzz: seed {}, {} worker(s), {} inputs in {:.1} s ({:.0} inputs/s); caps per input: {} s, heap {} MiB, address space {} MiB per worker, budget {} MiB",
            self.seed,
            self.jobs,
            self.inputs(),
            secs,
            self.inputs() as f64 / secs.max(1e-9),
            cfg.time_cap.as_secs_f64(),
            cfg.heap_cap_bytes >> 20,
            cfg.address_space_bytes >> 20,
            cfg.budget_bytes >> 20,
        );
        println!(
            "{:<15} {:>10} {:>10} {:>10} {:>10} {:>9}",
            "target", "inputs", "rejected", "accepted", "malleable", "findings"
        );
        for (name, t) in &self.targets {
            println!(
                "{:<15} {:>10} {:>10} {:>10} {:>10} {:>9}",
                name, t.inputs, t.rejected, t.accepted, t.malleable, t.findings
            );
        }
        let malleable: u64 = self.targets.values().map(|t| t.malleable).sum();
        if malleable > 0 {
            println!(
                "excluded: {malleable} proof(s) accepted as (-A, -B, C), Groth16's known malleability (not findings)"
            );
        }
        for f in &self.findings {
            println!(
                "finding: {} in {} (input {}): {}{}",
                f.kind.name(),
                f.target,
                f.index,
                f.message,
                f.file
                    .as_ref()
                    .map(|p| format!(" [saved: {}]", p.display()))
                    .unwrap_or_default()
            );
        }
        println!(
            "findings: {} panics, {} crashes, {} memory-cap overruns, {} hangs, {} accepted; workers started: {}",
            self.count(FindingKind::Panic),
            self.count(FindingKind::Crash),
            self.count(FindingKind::MemoryCap),
            self.count(FindingKind::Hang),
            self.count(FindingKind::Accepted),
            self.workers_started
        );
        println!("{}", self.last_line());
    }
}

enum Event {
    Line { slot: usize, gen: u64, line: String },
    Eof { slot: usize, gen: u64 },
}

struct Slot {
    gen: u64,
    child: Child,
    stderr: Arc<Mutex<VecDeque<String>>>,
    spawned: Instant,
    ready: bool,
    /// (index, target, started) of the input running now.
    in_flight: Option<(u64, String, Instant)>,
    next_first: u64,
    done: bool,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

struct Supervisor<'a> {
    cfg: &'a RunConfig,
    work: PathBuf,
    findings_dir: PathBuf,
    deadline_ms: Option<u64>,
    end: u64,
    tx: Sender<Event>,
    summary: Summary,
}

impl Supervisor<'_> {
    fn spawn(&mut self, slot: usize, gen: u64, first: u64) -> anyhow::Result<Slot> {
        let cfg = self.cfg;
        let mut cmd = Command::new(&cfg.exe);
        cmd.arg("worker")
            .args(["--seed", &cfg.seed.to_string()])
            .args(["--first", &first.to_string()])
            .args(["--stride", &cfg.jobs.to_string()])
            .args(["--end", &self.end.to_string()])
            .args(["--slot", &slot.to_string()])
            .args(["--heap-cap-bytes", &cfg.heap_cap_bytes.to_string()])
            .args([
                "--address-space-bytes",
                &cfg.address_space_bytes.to_string(),
            ])
            .args(["--budget-bytes", &cfg.budget_bytes.to_string()])
            .arg("--work-dir")
            .arg(&self.work)
            .arg("--findings-dir")
            .arg(&self.findings_dir);
        if let Some(d) = self.deadline_ms {
            cmd.args(["--deadline-ms", &d.to_string()]);
        }
        for t in &cfg.targets {
            cmd.args(["--target", t]);
        }
        // One rayon thread per worker: the workers are the parallelism.
        cmd.env("RAYON_NUM_THREADS", "1");
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .with_context(|| format!("cannot start worker {}", cfg.exe.display()))?;
        self.summary.workers_started += 1;
        let stdout = child.stdout.take().context("worker stdout")?;
        let stderr = child.stderr.take().context("worker stderr")?;
        let tx = self.tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(Event::Line { slot, gen, line }).is_err() {
                    return;
                }
            }
            let _ = tx.send(Event::Eof { slot, gen });
        });
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        let tail2 = tail.clone();
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let mut reader = BufReader::new(stderr);
            loop {
                buf.clear();
                match reader.by_ref().take(1 << 16).read_until(b'\n', &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let line = String::from_utf8_lossy(&buf).trim_end().to_string();
                        // Backtrace frames and notes say where, not what: keep the rest.
                        let frame = line.starts_with(' ')
                            || line.starts_with("stack backtrace:")
                            || line.starts_with("note: ");
                        if frame || line.is_empty() {
                            continue;
                        }
                        if let Ok(mut t) = tail2.lock() {
                            if t.len() == STDERR_TAIL {
                                t.pop_front();
                            }
                            t.push_back(line);
                        }
                    }
                }
            }
        });
        Ok(Slot {
            gen,
            child,
            stderr: tail,
            spawned: Instant::now(),
            ready: false,
            in_flight: None,
            next_first: first,
            done: false,
        })
    }

    fn stats(&mut self, target: &str) -> &mut TargetStats {
        self.summary.targets.entry(target.to_string()).or_default()
    }

    /// Records a finding for the input the slot's worker was running when it stopped.
    fn lost_input(&mut self, slot: usize, kind: FindingKind, message: String, s: &Slot) {
        let Some((index, target, _)) = s.in_flight.clone() else {
            return;
        };
        let bytes = std::fs::read(input_path(&self.work, slot)).unwrap_or_default();
        let file = save_finding(
            &self.findings_dir,
            kind.name(),
            &target,
            self.cfg.seed,
            index,
            &bytes,
            &message,
        )
        .ok();
        let st = self.stats(&target);
        st.inputs += 1;
        st.findings += 1;
        self.summary.findings.push(Finding {
            kind,
            target,
            index,
            message,
            file,
        });
    }

    fn handle_line(&mut self, s: &mut Slot, line: &str) -> anyhow::Result<()> {
        let mut parts = line.splitn(5, ' ');
        match parts.next() {
            Some("ready") => s.ready = true,
            Some("done") => s.done = true,
            Some("run") => {
                let index: u64 = parts.next().unwrap_or("").parse()?;
                let target = parts.next().unwrap_or("?").to_string();
                s.in_flight = Some((index, target, Instant::now()));
                s.next_first = index + self.cfg.jobs as u64;
            }
            Some("end") => {
                let index: u64 = parts.next().unwrap_or("").parse()?;
                let target = parts.next().unwrap_or("?").to_string();
                let code = parts.next().unwrap_or("");
                let message = parts.next().unwrap_or("").to_string();
                s.in_flight = None;
                let st = self.stats(&target);
                st.inputs += 1;
                let kind = match code {
                    "rej" => {
                        st.rejected += 1;
                        None
                    }
                    "ok" => {
                        st.accepted += 1;
                        None
                    }
                    "mal" => {
                        st.malleable += 1;
                        None
                    }
                    "acc" => Some(FindingKind::Accepted),
                    "pan" => Some(FindingKind::Panic),
                    other => bail!("worker sent an unknown result {other:?}"),
                };
                if let Some(kind) = kind {
                    st.findings += 1;
                    let file = self.findings_dir.join(format!(
                        "{target}-{}-{}-{index}.bin",
                        self.cfg.seed,
                        kind.name()
                    ));
                    self.summary.findings.push(Finding {
                        kind,
                        target,
                        index,
                        message,
                        file: Some(file),
                    });
                }
            }
            _ => bail!("worker sent {line:?}"),
        }
        Ok(())
    }
}

/// Why a worker ended mid-input, from its exit status and the end of its stderr.
fn classify(status: std::process::ExitStatus, stderr: &[String]) -> (FindingKind, String) {
    let what = match (status.signal(), status.code()) {
        (Some(sig), _) => format!("signal {sig}"),
        (None, Some(code)) => format!("exit status {code}"),
        _ => "unknown status".into(),
    };
    let find = |needle: &str| stderr.iter().find(|l| l.contains(needle)).cloned();
    let last = stderr
        .iter()
        .rev()
        .take(3)
        .rev()
        .cloned()
        .collect::<Vec<_>>()
        .join(" | ");
    if let Some(line) = find(HEAP_CAP_MARKER) {
        (FindingKind::MemoryCap, format!("{line} ({what})"))
    } else if let Some(line) = find("memory allocation of") {
        (
            FindingKind::MemoryCap,
            format!("address-space limit: {line} ({what})"),
        )
    } else if find("has overflowed its stack").is_some() {
        (FindingKind::Crash, format!("stack overflow ({what})"))
    } else {
        let detail = if last.is_empty() {
            String::new()
        } else {
            format!(": {last}")
        };
        (FindingKind::Crash, format!("{what}{detail}"))
    }
}

/// Runs the workers to the end of the run and collects what they found.
pub fn run(cfg: &RunConfig) -> anyhow::Result<Summary> {
    if cfg.jobs == 0 {
        bail!("--jobs must be at least 1");
    }
    let work = cfg.out.join("work");
    let findings_dir = cfg.out.join("findings");
    std::fs::create_dir_all(&work).with_context(|| format!("cannot create {}", work.display()))?;
    let started = Instant::now();
    let (tx, rx): (Sender<Event>, Receiver<Event>) = channel();
    let mut sup = Supervisor {
        cfg,
        work,
        findings_dir,
        deadline_ms: cfg.seconds.map(|s| now_ms() + s * 1000),
        end: cfg.inputs.unwrap_or(u64::MAX),
        tx,
        summary: Summary {
            seed: cfg.seed,
            jobs: cfg.jobs,
            elapsed: Duration::ZERO,
            targets: BTreeMap::new(),
            findings: Vec::new(),
            workers_started: 0,
        },
    };
    let mut slots: Vec<Option<Slot>> = Vec::new();
    for k in 0..cfg.jobs {
        slots.push(Some(sup.spawn(k, 0, k as u64)?));
    }
    let mut last_progress = Instant::now();
    let result = (|| -> anyhow::Result<()> {
        while slots.iter().any(|s| s.as_ref().is_some_and(|s| !s.done)) {
            let now = Instant::now();
            let mut wait = Duration::from_secs(1);
            for s in slots.iter().flatten() {
                let until = match &s.in_flight {
                    Some((_, _, t)) => *t + cfg.time_cap,
                    None if !s.ready => s.spawned + STARTUP_CAP,
                    None => continue,
                };
                wait = wait.min(until.saturating_duration_since(now));
            }
            match rx.recv_timeout(wait.max(Duration::from_millis(1))) {
                Ok(Event::Line { slot, gen, line }) => {
                    let Some(mut s) = slots[slot].take() else {
                        continue;
                    };
                    if s.gen == gen {
                        let r = sup.handle_line(&mut s, &line);
                        slots[slot] = Some(s);
                        r?;
                    } else {
                        slots[slot] = Some(s);
                    }
                }
                Ok(Event::Eof { slot, gen }) => {
                    let Some(mut s) = slots[slot].take() else {
                        continue;
                    };
                    if s.gen != gen {
                        slots[slot] = Some(s);
                        continue;
                    }
                    let status = s.child.wait()?;
                    // Let the stderr reader drain what the worker wrote last.
                    std::thread::sleep(Duration::from_millis(50));
                    let tail: Vec<String> = s
                        .stderr
                        .lock()
                        .map(|t| t.iter().cloned().collect())
                        .unwrap_or_default();
                    if s.done && status.success() {
                        slots[slot] = Some(s);
                        continue;
                    }
                    if s.in_flight.is_none() {
                        bail!(
                            "worker {slot} stopped outside an input ({status}): {}",
                            tail.join(" | ")
                        );
                    }
                    let (kind, message) = classify(status, &tail);
                    sup.lost_input(slot, kind, message, &s);
                    let first = s.next_first;
                    slots[slot] = Some(sup.spawn(slot, gen + 1, first)?);
                }
                Err(RecvTimeoutError::Timeout) => {
                    let now = Instant::now();
                    let mut hung = Vec::new();
                    for (slot, s) in slots.iter().enumerate() {
                        let Some(s) = s else { continue };
                        if !s.ready && !s.done && now >= s.spawned + STARTUP_CAP {
                            bail!("worker {slot} did not start within {STARTUP_CAP:?}");
                        }
                        if s.in_flight
                            .as_ref()
                            .is_some_and(|(_, _, t)| now >= *t + cfg.time_cap)
                        {
                            hung.push(slot);
                        }
                    }
                    for slot in hung {
                        let Some(mut s) = slots[slot].take() else {
                            continue;
                        };
                        let _ = s.child.kill();
                        let _ = s.child.wait();
                        let message = format!("ran past the {:?} time cap", cfg.time_cap);
                        sup.lost_input(slot, FindingKind::Hang, message, &s);
                        let first = s.next_first;
                        slots[slot] = Some(sup.spawn(slot, s.gen + 1, first)?);
                    }
                }
                Err(RecvTimeoutError::Disconnected) => bail!("every worker pipe closed"),
            }
            if !cfg.progress_every.is_zero() && last_progress.elapsed() >= cfg.progress_every {
                last_progress = Instant::now();
                let n = sup.summary.inputs();
                eprintln!(
                    "fuzz: {n} inputs after {:.0} s ({:.0}/s), {} findings",
                    started.elapsed().as_secs_f64(),
                    n as f64 / started.elapsed().as_secs_f64().max(1e-9),
                    sup.summary.findings.len()
                );
            }
        }
        Ok(())
    })();
    // Whatever happened, no worker outlives the run.
    for s in slots.iter_mut().flatten() {
        let _ = s.child.kill();
        let _ = s.child.wait();
    }
    result?;
    let _ = std::fs::remove_dir_all(&sup.work);
    sup.summary.elapsed = started.elapsed();
    Ok(sup.summary)
}

/// The run folder for a seed under `root`.
pub fn run_dir(root: &Path, seed: u64) -> PathBuf {
    root.join(format!("run-{seed}"))
}
