//! `pinion-fuzz`: mutation fuzzing of Pinion's parsers and entry points (see the library
//! docs). `cargo xtask fuzz` builds and runs it.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Args, Parser, Subcommand};
use memory_budget::parse_bytes;
use pinion_fuzz::supervisor::{self, RunConfig};
use pinion_fuzz::worker::{self, WorkerPlan};
use pinion_fuzz::{caps, registry, select, Fixtures, Verdict};

#[global_allocator]
static ALLOC: caps::CountingAlloc = caps::CountingAlloc;

/// Inputs of a quick run (CI), and the least it must reach.
const QUICK_INPUTS: u64 = 12_000;
const QUICK_MIN_INPUTS: u64 = 10_000;
/// A quick run stops starting inputs after this long, so it ends within 3 minutes.
const QUICK_SECONDS: u64 = 165;

const AFTER_HELP: &str = "\
What counts: `P panics` in the last line counts panics (failed assertions of a target's
guarantees included), signal deaths and memory-cap overruns; `A accepted` counts mutated
proofs or statements accepted as valid. Groth16's known malleability, a proof accepted as
(-A, -B, C) for the original statement, is excluded and counted apart. Exit status 1 on
any finding.

Examples:
  cargo xtask fuzz --quick                 # CI: 12,000 inputs, at most ~3 minutes
  cargo xtask fuzz --seconds 3600          # a long run
  cargo xtask fuzz --target proof --target public-json --seconds 60
  pinion-fuzz replay --target proof --seed 42 target/fuzz/run-42/findings/proof-42-accepted-17.bin";

#[derive(Parser, Debug)]
#[command(name = "pinion-fuzz", about = "Mutation fuzzing of Pinion's parsers and entry points", after_help = AFTER_HELP)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Fuzz: one worker process per job, each input under a time and a memory cap.
    #[command(after_help = AFTER_HELP)]
    Run(RunArgs),
    /// The targets and what each one runs.
    List,
    /// Runs saved inputs in this process, without caps (a panic prints its backtrace).
    Replay {
        /// The target the input belongs to.
        #[arg(long)]
        target: String,
        /// The run's seed (it makes the fixtures the input was mutated from).
        #[arg(long)]
        seed: u64,
        /// Input files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// A worker (started by `run`).
    #[command(hide = true)]
    Worker(WorkerArgs),
}

#[derive(Args, Debug)]
struct RunArgs {
    /// The CI run: 12,000 inputs (fails below 10,000, and stops starting inputs after
    /// 165 s).
    #[arg(long, conflicts_with_all = ["seconds", "inputs"])]
    quick: bool,
    /// Run this long (default 300 s when --inputs is not given).
    #[arg(long)]
    seconds: Option<u64>,
    /// Run this many inputs.
    #[arg(long)]
    inputs: Option<u64>,
    /// Only these targets (repeatable; `list` names them).
    #[arg(long = "target", value_name = "NAME")]
    targets: Vec<String>,
    /// Worker processes (default: the available cores).
    #[arg(long)]
    jobs: Option<usize>,
    /// Seed of fixtures and mutations (default: $PINION_SEED, else the clock).
    #[arg(long)]
    seed: Option<u64>,
    /// Time cap of one input, in seconds.
    #[arg(long, default_value_t = 10)]
    time_cap: u64,
    /// Address-space limit of each worker (RLIMIT_AS).
    #[arg(long, default_value = "4GiB")]
    address_space: String,
    /// Live-heap cap of one input.
    #[arg(long, default_value = "1GiB")]
    heap_cap: String,
    /// Memory budget handed to each input.
    #[arg(long, default_value = "256MiB")]
    budget: String,
    /// Folder for the run (`run-<seed>/findings` keeps what was found).
    #[arg(long, default_value = "target/fuzz")]
    out: PathBuf,
}

#[derive(Args, Debug)]
struct WorkerArgs {
    #[arg(long)]
    seed: u64,
    #[arg(long)]
    first: u64,
    #[arg(long)]
    stride: u64,
    #[arg(long)]
    end: u64,
    #[arg(long)]
    deadline_ms: Option<u64>,
    #[arg(long = "target")]
    targets: Vec<String>,
    #[arg(long)]
    work_dir: PathBuf,
    #[arg(long)]
    findings_dir: PathBuf,
    #[arg(long)]
    slot: usize,
    #[arg(long)]
    heap_cap_bytes: u64,
    #[arg(long)]
    address_space_bytes: u64,
    #[arg(long)]
    budget_bytes: u64,
}

fn main() -> ExitCode {
    caps::mark_installed();
    let cli = Cli::parse();
    match real_main(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("pinion-fuzz: error: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn real_main(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Run(args) => run(args),
        Command::List => {
            let dir = scratch_dir("list")?;
            let fx = Arc::new(Fixtures::new(1, dir.path())?);
            for t in registry(&fx) {
                println!("{:<15} {}", t.name(), t.about());
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Replay {
            target,
            seed,
            files,
        } => replay(&target, seed, &files),
        Command::Worker(a) => {
            worker::run(&WorkerPlan {
                seed: a.seed,
                first: a.first,
                stride: a.stride,
                end: a.end,
                deadline_ms: a.deadline_ms,
                targets: a.targets,
                work_dir: a.work_dir,
                findings_dir: a.findings_dir,
                slot: a.slot,
                heap_cap_bytes: a.heap_cap_bytes,
                address_space_bytes: a.address_space_bytes,
                budget_bytes: a.budget_bytes,
            })?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// A folder of this process's own under the temporary directory, removed when dropped: on
/// every return, an error's included, and when a replayed input panics.
struct ScratchDir(PathBuf);

impl ScratchDir {
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scratch_dir(what: &str) -> anyhow::Result<ScratchDir> {
    let dir = std::env::temp_dir().join(format!("pinion-fuzz-{what}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(ScratchDir(dir))
}

fn run(a: RunArgs) -> anyhow::Result<ExitCode> {
    let seed = a.seed.unwrap_or_else(groth16_prover::testing::test_seed);
    let jobs = a
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let (inputs, seconds) = if a.quick {
        (Some(QUICK_INPUTS), Some(QUICK_SECONDS))
    } else {
        (a.inputs, a.seconds.or(a.inputs.is_none().then_some(300)))
    };
    let size = |s: &str, what: &str| parse_bytes(s).with_context(|| format!("bad {what} {s:?}"));
    let cfg = RunConfig {
        exe: std::env::current_exe().context("cannot find this program's path")?,
        seed,
        jobs,
        inputs,
        seconds,
        targets: a.targets,
        time_cap: Duration::from_secs(a.time_cap.max(1)),
        address_space_bytes: size(&a.address_space, "--address-space")?,
        heap_cap_bytes: size(&a.heap_cap, "--heap-cap")?,
        budget_bytes: size(&a.budget, "--budget")?,
        out: supervisor::run_dir(&a.out, seed),
        progress_every: Duration::from_secs(30),
    };
    // Unknown target names fail here, before any worker starts.
    {
        let dir = scratch_dir("check")?;
        let fx = Arc::new(Fixtures::new(seed, dir.path())?);
        select(&fx, &cfg.targets)?;
    }
    println!(
        "fuzz: seed {seed} (PINION_SEED={seed} or --seed {seed} replays), {jobs} worker(s), {}",
        match (inputs, seconds) {
            (Some(n), Some(s)) => format!("{n} inputs or {s} s"),
            (Some(n), None) => format!("{n} inputs"),
            (None, Some(s)) => format!("{s} s"),
            (None, None) => "until stopped".into(),
        }
    );
    let summary = supervisor::run(&cfg)?;
    summary.print(&cfg);
    if !summary.findings.is_empty() {
        return Ok(ExitCode::from(1));
    }
    if a.quick && summary.inputs() < QUICK_MIN_INPUTS {
        bail!(
            "the quick run reached {} inputs in {} s, fewer than {QUICK_MIN_INPUTS}",
            summary.inputs(),
            QUICK_SECONDS
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn replay(target: &str, seed: u64, files: &[PathBuf]) -> anyhow::Result<ExitCode> {
    let dir = scratch_dir("replay")?;
    let fx = Arc::new(Fixtures::new(seed, dir.path())?);
    let targets = select(&fx, &[target.to_string()])?;
    let mut wrong = 0;
    for f in files {
        let bytes = std::fs::read(f).with_context(|| format!("cannot read {}", f.display()))?;
        let verdict =
            worker::run_input(&*targets[0], &bytes, &dir.path().join("input"), 256 << 20)?;
        println!("{}: {verdict:?}", f.display());
        wrong += usize::from(matches!(verdict, Verdict::WronglyAccepted(_)));
    }
    Ok(if wrong > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
