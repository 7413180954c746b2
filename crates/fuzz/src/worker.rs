//! A worker process: builds the fixtures, then runs inputs `first`, `first + stride`, ...
//! in-process, each under the heap cap, and tells the supervisor about each one on stdout
//! before and after it runs (so a hang or a death names its input).
//!
//! Protocol, one line each: `ready`; `run <index> <target>`; `end <index> <target> <code>
//! [message]` with code `rej` (refused), `ok` (rightly accepted), `mal` (malleable, see
//! the proof target), `acc` (wrongly accepted) or `pan` (panic or broken guarantee);
//! `done`. Messages have their newlines replaced.

use std::io::Write;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use groth16_prover::testing::SplitMix;
use memory_budget::Budget;

use crate::caps;
use crate::fixtures::Fixtures;
use crate::mutate::{mutate, Seed};
use crate::targets::{select, Input, Target, Verdict};

/// What one worker runs.
#[derive(Clone, Debug)]
pub struct WorkerPlan {
    /// The run's seed (fixtures and mutations).
    pub seed: u64,
    /// First input index.
    pub first: u64,
    /// Distance between this worker's indices.
    pub stride: u64,
    /// Indices stop before this one.
    pub end: u64,
    /// No input starts after this time (milliseconds since the Unix epoch).
    pub deadline_ms: Option<u64>,
    /// Target names (empty: all).
    pub targets: Vec<String>,
    /// Scratch folder: the current input's file, the PCE writer's files.
    pub work_dir: PathBuf,
    /// Where panicking and wrongly accepted inputs are saved.
    pub findings_dir: PathBuf,
    /// Which worker this is (file names).
    pub slot: usize,
    /// Heap cap per input.
    pub heap_cap_bytes: u64,
    /// The process's address-space limit.
    pub address_space_bytes: u64,
    /// Budget handed to each input.
    pub budget_bytes: u64,
}

/// The file a worker writes its current input to.
pub fn input_path(work_dir: &Path, slot: usize) -> PathBuf {
    work_dir.join(format!("worker{slot}.input"))
}

/// Mixes the run seed and an input index into the input's own seed.
fn input_seed(seed: u64, index: u64) -> u64 {
    let mut g = SplitMix::new(seed ^ index.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    g.next_u64()
}

/// Input `index` of a run: which target, and the bytes (mutated, then fixed up). A pure
/// function of the seed, the index and the target list.
pub fn make_input(
    seed: u64,
    index: u64,
    targets: &[Box<dyn Target>],
    seeds: &[Vec<Seed>],
) -> (usize, Vec<u8>) {
    let mut rng = SplitMix::new(input_seed(seed, index));
    let t = rng.below(targets.len());
    let s = &seeds[t][rng.below(seeds[t].len())];
    let mut bytes = mutate(s, &mut rng, None);
    targets[t].fixup(&mut bytes, rng.next_u64());
    (t, bytes)
}

/// The target's knob for an input: a hash of its bytes, so a saved input replays with the
/// same choices (FNV-1a).
pub fn knob_of(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Runs one input: writes it to `path`, hands the target a fresh budget of `budget_bytes`,
/// and checks afterwards that nothing stays charged (a charge left behind panics).
pub fn run_input(
    target: &dyn Target,
    bytes: &[u8],
    path: &Path,
    budget_bytes: u64,
) -> std::io::Result<Verdict> {
    std::fs::write(path, bytes)?;
    let budget = Budget::fixed(budget_bytes);
    let verdict = target.run(&Input {
        bytes,
        path,
        budget: &budget,
        knob: knob_of(bytes),
    });
    assert_eq!(
        budget.used_bytes(),
        0,
        "{} bytes left charged to the budget after the input",
        budget.used_bytes()
    );
    Ok(verdict)
}

/// The message of the last panic (the hook keeps it; nothing is printed).
static LAST_PANIC: Mutex<String> = Mutex::new(String::new());

fn install_quiet_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "non-string panic payload".into());
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        if let Ok(mut last) = LAST_PANIC.lock() {
            *last = format!("{msg}{at}");
        }
    }));
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " | ")
}

/// Saves a finding's input and a note (kind, target, index, message, how to replay).
pub fn save_finding(
    dir: &Path,
    kind: &str,
    target: &str,
    seed: u64,
    index: u64,
    bytes: &[u8],
    message: &str,
) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let stem = format!("{target}-{seed}-{kind}-{index}");
    let bin = dir.join(format!("{stem}.bin"));
    std::fs::write(&bin, bytes)?;
    let note = format!(
        "kind: {kind}\ntarget: {target}\nseed: {seed}\nindex: {index}\nmessage: {message}\nreplay: cargo run -p pinion-fuzz -- replay --target {target} --seed {seed} {}\nregression test: copy the .bin to crates/fuzz/regressions/{target}-{seed}-<what>.bin\n",
        bin.display()
    );
    std::fs::write(dir.join(format!("{stem}.txt")), note)?;
    Ok(bin)
}

/// The worker's main loop. Needs [`caps::CountingAlloc`] installed as the global allocator.
pub fn run(plan: &WorkerPlan) -> anyhow::Result<()> {
    if !caps::installed() {
        anyhow::bail!("the counting allocator is not installed: the heap cap cannot be enforced");
    }
    caps::limit_address_space(plan.address_space_bytes)?;
    std::fs::create_dir_all(&plan.work_dir)?;
    let scratch = plan.work_dir.join(format!("worker{}-fixtures", plan.slot));
    std::fs::create_dir_all(&scratch)?;
    let fx = Arc::new(Fixtures::new(plan.seed, &scratch)?);
    let targets = select(&fx, &plan.targets)?;
    let seeds: Vec<Vec<Seed>> = targets.iter().map(|t| t.seeds()).collect();
    let path = input_path(&plan.work_dir, plan.slot);
    install_quiet_panic_hook();

    let out = std::io::stdout();
    let mut out = out.lock();
    writeln!(out, "ready")?;
    out.flush()?;
    let mut index = plan.first;
    while index < plan.end {
        if plan.deadline_ms.is_some_and(|d| now_ms() >= d) {
            break;
        }
        let (t, bytes) = make_input(plan.seed, index, &targets, &seeds);
        let target = &*targets[t];
        writeln!(out, "run {index} {}", target.name())?;
        out.flush()?;
        caps::arm(plan.heap_cap_bytes as usize);
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
            run_input(target, &bytes, &path, plan.budget_bytes)
        }));
        caps::disarm();
        let (code, message) = match result {
            Ok(Ok(Verdict::Rejected)) => ("rej", String::new()),
            Ok(Ok(Verdict::Accepted)) => ("ok", String::new()),
            Ok(Ok(Verdict::Malleable)) => ("mal", String::new()),
            Ok(Ok(Verdict::WronglyAccepted(why))) => ("acc", why),
            Ok(Err(e)) => anyhow::bail!("cannot write the input file {}: {e}", path.display()),
            Err(_) => {
                let msg = LAST_PANIC
                    .lock()
                    .map(|m| m.clone())
                    .unwrap_or_else(|_| "panic (message lost)".into());
                ("pan", msg)
            }
        };
        if matches!(code, "acc" | "pan") {
            let kind = if code == "acc" { "accepted" } else { "panic" };
            save_finding(
                &plan.findings_dir,
                kind,
                target.name(),
                plan.seed,
                index,
                &bytes,
                &message,
            )?;
        }
        writeln!(
            out,
            "end {index} {} {code} {}",
            target.name(),
            one_line(&message)
        )?;
        out.flush()?;
        index = index.saturating_add(plan.stride);
    }
    writeln!(out, "done")?;
    out.flush()?;
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(())
}
