//! `pinion-stress`: the Pinion engine under load inside memory cgroups it makes (see the
//! library docs). `cargo xtask stress` builds and runs it; `bundle/run.sh stress` runs it
//! on the GPU machine.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Args, Parser, Subcommand};
use memory_budget::SizeSpec;
use pinion_stress::cgroup::{CgroupVersion, MemoryCgroup};
use pinion_stress::counters::Counters;
use pinion_stress::sample::MemorySource;
use pinion_stress::supervise::{self, SuperviseConfig};
use pinion_stress::workload::{self, Preset, RunConfig};

const AFTER_HELP: &str = "\
What it does: makes each circuit's parameters once (real ones: every proof is verified),
runs the workload unconstrained in a cgroup without a limit to measure its peak
(anon + kernel + shmem), then once per share inside a cgroup whose memory limit is that
share of the peak, swap off. Each run samples the cgroup and the budget every 50 ms.

Exit status 1 when a run is not clean (an OOM kill, a failed, invalid or lost proof, a
stall, a crash or a timeout), when --require-cgroup is given and no cgroup can be made, or
when --strict is given and an accuracy target is missed in a constrained run (under-charge
> 64 MiB at a sample, or peak charged > 1.15x peak measured).

Examples:
  cargo xtask stress --quick                       # CI: CPU, about 2 minutes on 2 cores
  bundle/run.sh stress                             # GPU machine: 100 proofs per run
  pinion-stress --shares 100,80,60,40 --proofs 200 --json";

#[derive(Parser, Debug)]
#[command(
    name = "pinion-stress",
    about = "The Pinion engine under load inside memory cgroups: charged against measured",
    after_help = AFTER_HELP,
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    stress: StressArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// One run of the workload in this process (what the supervisor starts).
    #[command(hide = true)]
    Run(Box<RunArgs>),
    /// Runs a command alone in a new memory cgroup without a limit and prints the peaks of
    /// what the kernel charged it (`anon + kernel + shmem`, sampled every 50 ms), e.g.
    /// `pinion-stress measure -- pinion demo --json`, to set beside the charged peak the
    /// command reports.
    Measure {
        /// Print the figures as JSON.
        #[arg(long)]
        json: bool,
        /// The command and its arguments.
        #[arg(required = true, last = true)]
        command: Vec<String>,
    },
}

/// The workload, shared by the supervisor and its runs.
#[derive(Args, Debug, Clone)]
struct WorkloadArgs {
    /// Circuit sizes: quick (2^14 rows, CI) or full (2^16 rows).
    #[arg(long, value_enum)]
    preset: Option<Preset>,
    /// Jobs per run (default: 24 with --quick, else 100).
    #[arg(long)]
    proofs: Option<usize>,
    /// Submitter threads (each submits a job and awaits it, then the next): enough that
    /// the unconstrained run holds many working sets and keys at once (default: 12; with
    /// --quick every job at once, so that the unconstrained peak is well above what one
    /// job needs beside the process's own baseline and the margin, and 60% of it still
    /// holds the largest key's load).
    #[arg(long)]
    submitters: Option<usize>,
    /// CPU devices beside the GPU (default: 2 with --quick, which has no GPU, so that
    /// the unconstrained run holds working sets of two devices at once; else 1).
    #[arg(long)]
    cpu_devices: Option<usize>,
    /// Leave GPU 0 out even when it opens.
    #[arg(long)]
    no_gpu: bool,
    /// Seed of witnesses, circuit choice and priorities (default: the clock; printed).
    #[arg(long)]
    seed: Option<u64>,
    /// The budget's safety margin below the detected limit ("32MiB", "5%"; default: 4MiB
    /// with --quick and 5% otherwise: both workloads peak far below what
    /// memory-budget's default margin (at least 256 MiB, at most half the limit) leaves
    /// room for at 60%).
    #[arg(long)]
    margin: Option<String>,
    /// Give a run up when no job has ended for this many seconds while jobs are
    /// outstanding, and report what the budget waited on (default: 30 with the quick
    /// preset, else 300).
    #[arg(long)]
    stall_s: Option<u64>,
    /// Leave glibc's allocator as it is (by default the runs fix its mmap threshold, as
    /// the `pinion` binary does: see memory_budget::tune_allocator).
    #[arg(long)]
    default_allocator: bool,
    /// Work folder: parameters under `params/`, each supervised run's files under
    /// `run-<seed>/`.
    #[arg(long, default_value = "target/stress")]
    dir: PathBuf,
}

#[derive(Args, Debug)]
struct StressArgs {
    /// The CI run: quick preset, 24 jobs per run, CPU only.
    #[arg(long)]
    quick: bool,
    /// Shares of the unconstrained peak, in percent, one constrained run each.
    #[arg(long, value_delimiter = ',', default_value = "100,80,60")]
    shares: Vec<u32>,
    /// Fail when no memory cgroup can be made (else the unconstrained run alone).
    #[arg(long)]
    require_cgroup: bool,
    /// Print the report as JSON (the table goes to stderr).
    #[arg(long)]
    json: bool,
    /// Fail when an accuracy target is missed, not only when a run is not clean.
    #[arg(long)]
    strict: bool,
    /// Kill a run still going after this many seconds (default: 150 with --quick, else
    /// 900).
    #[arg(long)]
    run_timeout_s: Option<u64>,
    #[command(flatten)]
    workload: WorkloadArgs,
}

#[derive(Args, Debug)]
struct RunArgs {
    #[command(flatten)]
    workload: WorkloadArgs,
    /// The cgroup this process runs in (read for measured figures; default: the process's
    /// own status).
    #[arg(long)]
    cgroup: Option<PathBuf>,
    /// Its version (v1 or v2).
    #[arg(long, requires = "cgroup")]
    cgroup_version: Option<String>,
    /// Report file, rewritten every second and at the end.
    #[arg(long)]
    report: Option<PathBuf>,
    /// Every sample as CSV.
    #[arg(long)]
    samples: Option<PathBuf>,
}

fn seed(w: &WorkloadArgs) -> u64 {
    w.seed.unwrap_or_else(groth16_prover::testing::test_seed)
}

fn params_dir(w: &WorkloadArgs) -> PathBuf {
    w.dir.join("params")
}

/// Parameters of the preset's circuits, made once (charged to a budget of this machine).
fn prepare(preset: Preset, w: &WorkloadArgs) -> anyhow::Result<()> {
    let budget = memory_budget::Budget::detect(&memory_budget::DetectOptions::default())?;
    workload::prepare_parameters(&preset.circuits(), &params_dir(w), &budget)
        .context("parameters")?;
    Ok(())
}

fn main() -> ExitCode {
    match real_main() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("pinion-stress: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn real_main() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Run(args)) => run(*args).map(|()| ExitCode::SUCCESS),
        Some(Command::Measure { json, command }) => measure(json, &command),
        None => stress(cli.stress),
    }
}

fn run(args: RunArgs) -> anyhow::Result<()> {
    let w = &args.workload;
    if !w.default_allocator {
        memory_budget::tune_allocator();
    }
    // Before anything records a metric: handles are taken at first use.
    let counters = Counters::install().map_err(anyhow::Error::msg)?;
    let source = match (&args.cgroup, args.cgroup_version.as_deref()) {
        (None, _) => MemorySource::Process,
        (Some(dir), Some("v1")) => MemorySource::Cgroup(MemoryCgroup {
            version: CgroupVersion::V1,
            dir: dir.clone(),
        }),
        (Some(dir), Some("v2")) => MemorySource::Cgroup(MemoryCgroup {
            version: CgroupVersion::V2,
            dir: dir.clone(),
        }),
        (Some(_), other) => bail!("--cgroup-version must be v1 or v2, got {other:?}"),
    };
    let preset = w.preset.unwrap_or(Preset::Full);
    // Made by the supervisor before any run; here only when this run is started by hand.
    prepare(preset, w)?;
    let config = RunConfig {
        circuits: preset.circuits(),
        params_dir: params_dir(w),
        proofs: w.proofs.unwrap_or(100),
        submitters: w.submitters.unwrap_or(12),
        cpu_devices: w.cpu_devices.unwrap_or(1),
        gpu: !w.no_gpu,
        require_gpu: std::env::var("PINION_REQUIRE_GPU").is_ok_and(|v| v == "1"),
        seed: seed(w),
        margin: w.margin.as_deref().map(SizeSpec::parse).transpose()?,
        source,
        interval: Duration::from_millis(50),
        samples_csv: args.samples,
        report: args.report,
        report_every: Duration::from_secs(1),
        job_timeout: Duration::from_secs(600),
        stall_timeout: Duration::from_secs(w.stall_s.unwrap_or(match preset {
            Preset::Quick => 30,
            Preset::Full => 300,
        })),
    };
    let r = workload::run(&config, &counters).context("stress run")?;
    eprintln!(
        "stress run: {} of {} proofs in {:.1} s ({:.2}/s), {} failed; key loads {}, evictions {}",
        r.proofs_completed,
        r.proofs_submitted,
        r.wall_s,
        r.proofs_per_s,
        r.proofs_failed.total(),
        r.key_loads,
        r.key_evictions
    );
    Ok(())
}

fn measure(json: bool, command: &[String]) -> anyhow::Result<ExitCode> {
    let (program, args) = command.split_first().context("no command given")?;
    let m = supervise::measure_command(
        std::path::Path::new(program),
        args,
        Duration::from_millis(50),
    )?;
    if json {
        println!("{}", serde_json::to_string_pretty(&m)?);
    } else {
        let mib = |b: u64| format!("{:.1} MiB", b as f64 / f64::from(1u32 << 20));
        eprintln!(
            "measure: {}: peak measured {} (anon {}, kernel {}), page cache {}, current {}{}; {} samples, {} OOM kills",
            m.exit,
            mib(m.peak_measured_bytes),
            mib(m.peak_anon_bytes),
            mib(m.peak_kernel_bytes),
            mib(m.peak_file_bytes),
            mib(m.peak_current_bytes),
            m.kernel_peak_current_bytes
                .map_or(String::new(), |p| format!(" (kernel's peak {})", mib(p))),
            m.n_samples,
            m.oom_kills
        );
    }
    Ok(if m.exit == "exit 0" {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn stress(mut args: StressArgs) -> anyhow::Result<ExitCode> {
    if args.quick {
        args.workload.preset.get_or_insert(Preset::Quick);
        args.workload.proofs.get_or_insert(24);
        args.workload.margin.get_or_insert_with(|| "4MiB".into());
        args.workload.cpu_devices.get_or_insert(2);
        args.workload
            .submitters
            .get_or_insert(args.workload.proofs.unwrap_or(24));
        args.run_timeout_s.get_or_insert(150);
        args.workload.no_gpu = true;
    }
    args.workload.margin.get_or_insert_with(|| "5%".into());
    let w = &args.workload;
    let preset = w.preset.unwrap_or(Preset::Full);
    let proofs = w.proofs.unwrap_or(100);
    let seed = seed(w);
    let dir = params_dir(w);
    let t = std::time::Instant::now();
    prepare(preset, w)?;
    eprintln!(
        "stress: parameters ready in {:.1} s ({})",
        t.elapsed().as_secs_f64(),
        dir.display()
    );
    let mut run_args = vec![
        "--preset".to_string(),
        match preset {
            Preset::Quick => "quick",
            Preset::Full => "full",
        }
        .to_string(),
        "--proofs".into(),
        proofs.to_string(),
        "--submitters".into(),
        w.submitters.unwrap_or(12).to_string(),
        "--cpu-devices".into(),
        w.cpu_devices.unwrap_or(1).to_string(),
        "--seed".into(),
        seed.to_string(),
        "--dir".into(),
        w.dir.display().to_string(),
    ];
    if w.no_gpu {
        run_args.push("--no-gpu".into());
    }
    if w.default_allocator {
        run_args.push("--default-allocator".into());
    }
    if let Some(m) = &w.margin {
        run_args.extend(["--margin".into(), m.clone()]);
    }
    if let Some(s) = w.stall_s {
        run_args.extend(["--stall-s".into(), s.to_string()]);
    }
    let out = w.dir.join(format!("run-{seed}"));
    let config = SuperviseConfig {
        exe: std::env::current_exe().context("own path")?,
        run_args,
        run_env: Vec::new(),
        shares: args.shares.clone(),
        require_cgroup: args.require_cgroup,
        out: out.clone(),
        run_timeout: Duration::from_secs(args.run_timeout_s.unwrap_or(900)),
    };
    let report = supervise::supervise(&config, proofs as u64)?;
    let table = supervise::table(&report);
    if args.json {
        eprint!("{table}");
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{table}");
    }
    eprintln!("stress: runs in {}", out.display());
    let ok = report.clean && (report.accurate || !args.strict);
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
