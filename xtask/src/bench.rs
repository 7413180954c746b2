//! `cargo xtask bench [--quick] [--record | --record-to FILE] [--only TEXT]`: runs the
//! workspace's benchmark programs (`crates/*/examples/*_bench.rs`) and prints one table.
//!
//! The programs are built once in release mode (`cargo build --message-format=json` names the
//! binaries, so any target dir works), then each runs in its own child process: a crash, an
//! OOM kill or a GPU fault in one is reported in the table (with the child's peak RSS from
//! `wait4` and the memory limit in force from `memprobe --json`) and the rest still run. GPU
//! programs run only when a CUDA driver is present, and get a "skipped" row otherwise.
//!
//! Protocol: a program reports each result as one stdout line
//! `PINION_BENCH {"what":..,"size":..,"ours":N,"peer":N|null,"unit":..,"lower_is_better":B,
//! "target":S|null,"pass":B|null}`; every other line is its human output, passed through.
//! `PINION_BENCH_QUICK=1` in the environment asks for small sizes (the `--quick` subset).
//! The table's ratio is ours / peer (so a target reads "<= 1.0x peer" whether lower or higher
//! is better, with the direction from `lower_is_better`).
//!
//! Results go to `<target dir>/bench/results.json`; `--record` appends a dated section with the
//! table in Markdown to `docs/benchmarks.md` (`--record-to FILE` to another file).

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

const USAGE: &str =
    "usage: cargo xtask bench [--quick] [--record | --record-to FILE] [--only TEXT] \
     [--from-logs DIR]";
const LINE_PREFIX: &str = "PINION_BENCH ";

/// Benchmark programs that need a GPU besides those named `gpu_*`.
const GPU_BENCHES: &[&str] = &["field_bench"];

/// One result line of a benchmark program.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchRecord {
    pub what: String,
    pub size: String,
    pub ours: f64,
    pub peer: Option<f64>,
    pub unit: String,
    pub lower_is_better: bool,
    pub target: Option<String>,
    pub pass: Option<bool>,
}

impl BenchRecord {
    /// ours / peer, when a finite, non-zero peer figure exists.
    fn ratio(&self) -> Option<f64> {
        self.peer
            .filter(|p| *p != 0.0 && p.is_finite())
            .map(|p| self.ours / p)
    }
}

/// `None` when `line` is not a protocol line; otherwise the record or why it is malformed.
pub fn parse_bench_line(line: &str) -> Option<Result<BenchRecord, String>> {
    let body = line.trim_end().strip_prefix(LINE_PREFIX)?;
    Some(parse_record(body))
}

fn parse_record(body: &str) -> Result<BenchRecord, String> {
    let v: Value = serde_json::from_str(body).map_err(|e| format!("not json: {e}"))?;
    let obj = v.as_object().ok_or("not a json object")?;
    let field = |k: &str| obj.get(k).filter(|v| !v.is_null());
    let string = |k: &str| -> Result<String, String> {
        field(k)
            .ok_or(format!("missing `{k}`"))?
            .as_str()
            .map(str::to_string)
            .ok_or(format!("`{k}` is not a string"))
    };
    let opt = |k: &str, want: &str, ok: bool| -> Result<(), String> {
        if field(k).is_none() || ok {
            Ok(())
        } else {
            Err(format!("`{k}` is not {want} or null"))
        }
    };
    let ours = field("ours")
        .ok_or("missing `ours`")?
        .as_f64()
        .ok_or("`ours` is not a number")?;
    let peer = field("peer").and_then(Value::as_f64);
    opt("peer", "a number", peer.is_some())?;
    let target = field("target").and_then(Value::as_str).map(str::to_string);
    opt("target", "a string", target.is_some())?;
    let pass = field("pass").and_then(Value::as_bool);
    opt("pass", "a bool", pass.is_some())?;
    let lower_is_better = field("lower_is_better")
        .ok_or("missing `lower_is_better`")?
        .as_bool()
        .ok_or("`lower_is_better` is not a bool")?;
    Ok(BenchRecord {
        what: string("what")?,
        size: string("size")?,
        ours,
        peer,
        unit: string("unit")?,
        lower_is_better,
        target,
        pass,
    })
}

struct Options {
    quick: bool,
    record_to: Option<PathBuf>,
    only: Option<String>,
    from_logs: Option<PathBuf>,
}

fn parse_args(root: &Path, args: &[String]) -> Result<Options> {
    let mut o = Options {
        quick: false,
        record_to: None,
        only: None,
        from_logs: None,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--quick" => o.quick = true,
            "--record" => o.record_to = Some(root.join("docs/benchmarks.md")),
            "--record-to" => {
                o.record_to = Some(it.next().context("--record-to needs a file")?.into())
            }
            "--only" => o.only = Some(it.next().context("--only needs a value")?.clone()),
            "--from-logs" => {
                o.from_logs = Some(it.next().context("--from-logs needs a directory")?.into())
            }
            other => bail!("unknown argument `{other}`\n{USAGE}"),
        }
    }
    Ok(o)
}

#[derive(Clone, Debug)]
struct Bench {
    krate: String,
    name: String,
    gpu: bool,
}

/// How one program ended.
#[derive(Debug, PartialEq)]
enum Status {
    Ok,
    Skipped(String),
    NotBuilt,
    CannotStart(String),
    Exited(i32),
    Signalled(i32),
}

impl Status {
    fn failed(&self) -> bool {
        !matches!(self, Status::Ok | Status::Skipped(_))
    }
}

/// What one child process did.
#[derive(Debug)]
struct ProgramRun {
    status: Status,
    records: Vec<BenchRecord>,
    bad_lines: Vec<String>,
    peak_rss_bytes: Option<u64>,
    seconds: f64,
}

impl ProgramRun {
    fn without_run(status: Status) -> ProgramRun {
        ProgramRun {
            status,
            records: Vec::new(),
            bad_lines: Vec::new(),
            peak_rss_bytes: None,
            seconds: 0.0,
        }
    }
}

/// The host memory limit in force, as memory-budget's detection sees it.
#[derive(Debug)]
struct MemLimit {
    limit_bytes: Option<u64>,
    source: String,
}

pub fn run(root: &Path, args: &[String]) -> Result<()> {
    let opts = parse_args(root, args)?;
    if let Some(dir) = &opts.from_logs {
        return from_logs(root, dir, &opts);
    }
    let started = Instant::now();
    let mut benches = find_benches(root)?;
    if let Some(only) = &opts.only {
        benches.retain(|b| b.name.contains(only.as_str()) || b.krate.contains(only.as_str()));
    }
    let gpu = crate::cuda_driver_present();
    let to_build: Vec<&Bench> = benches.iter().filter(|b| gpu || !b.gpu).collect();
    println!(
        "bench: building {} program(s) in release mode{}",
        to_build.len(),
        if gpu {
            ""
        } else {
            " (no CUDA driver: GPU programs skipped)"
        }
    );
    let t = Instant::now();
    let (exes, build_ok) = build(root, &to_build)?;
    let build_s = t.elapsed().as_secs_f64();
    let target_dir = target_dir(root);
    let mem = exes
        .get("memprobe")
        .and_then(|p| memprobe_limit(p))
        .unwrap_or_else(meminfo_limit);

    let mut runs = Vec::new();
    for b in &benches {
        let run = if b.gpu && !gpu {
            ProgramRun::without_run(Status::Skipped("skipped: no CUDA driver".into()))
        } else if let Some(exe) = exes.get(&b.name) {
            println!("=== bench {}/{}", b.krate, b.name);
            let mut cmd = Command::new(exe);
            cmd.current_dir(root).env("CARGO_TARGET_DIR", &target_dir);
            if opts.quick {
                cmd.env("PINION_BENCH_QUICK", "1");
            }
            run_program(&mut cmd)
        } else {
            ProgramRun::without_run(Status::NotBuilt)
        };
        runs.push((b.clone(), run));
    }
    let total_s = started.elapsed().as_secs_f64();

    let machine = machine_description(gpu, &mem);
    let date = utc_now();
    let results = results_json(&runs, &machine, &date, opts.quick, build_s, total_s, &mem);
    let out_dir = target_dir.join("bench");
    std::fs::create_dir_all(&out_dir).with_context(|| format!("create {}", out_dir.display()))?;
    let out = out_dir.join("results.json");
    std::fs::write(&out, serde_json::to_string_pretty(&results)? + "\n")
        .with_context(|| format!("write {}", out.display()))?;
    if let Some(path) = &opts.record_to {
        record(
            path,
            &markdown_section(&runs, &machine, &date, opts.quick, &mem, root),
        )?;
    }

    let rows = table_rows(&runs, &mem);
    println!();
    println!("bench: results in {}", out.display());
    println!(
        "bench: {machine}; {}; build {build_s:.0} s, total {total_s:.0} s",
        if opts.quick { "quick" } else { "full" }
    );
    println!("bench: {}", summary(&runs));
    print!("{}", text_table(&rows));
    let failed: Vec<String> = runs
        .iter()
        .filter(|(_, r)| r.status.failed())
        .map(|(b, _)| format!("{}/{}", b.krate, b.name))
        .collect();
    if !build_ok && failed.is_empty() {
        eprintln!("bench: the release build reported errors (see above)");
    }
    if !failed.is_empty() {
        bail!("benchmark program(s) failed: {}", failed.join(", "));
    }
    Ok(())
}

/// Appends a Markdown section to `path` (created if missing).
fn record(path: &Path, section: &str) -> Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .with_context(|| format!("open {}", path.display()))?;
    f.write_all(section.as_bytes())
        .with_context(|| format!("append to {}", path.display()))?;
    println!("bench: recorded in {}", path.display());
    Ok(())
}

/// The table of a run made elsewhere: the GPU bundle's `run.sh bench` with `PINION_BENCH_LOGS`
/// set writes each program's output to `DIR/<program>.log` and the machine to
/// `DIR/machine.txt` (the device has no Rust toolchain, so the table is assembled here).
fn from_logs(root: &Path, dir: &Path, opts: &Options) -> Result<()> {
    let machine_file = dir.join("machine.txt");
    let machine_text = std::fs::read_to_string(&machine_file)
        .with_context(|| format!("read {}", machine_file.display()))?;
    let mut lines = machine_text.lines();
    let date = lines.next().unwrap_or("?").trim().to_string();
    let machine = lines.collect::<Vec<_>>().join("; ");
    let known = find_benches(root)?;
    let mut runs = Vec::new();
    let mut logs: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("read {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    logs.sort();
    for log in logs {
        let name = log.file_stem().unwrap().to_string_lossy().into_owned();
        let Some(bench) = known.iter().find(|b| b.name == name) else {
            continue;
        };
        if opts
            .only
            .as_ref()
            .is_some_and(|o| !name.contains(o.as_str()))
        {
            continue;
        }
        let text = std::fs::read_to_string(&log)?;
        let mut run = ProgramRun::without_run(Status::Ok);
        for line in text.lines() {
            match parse_bench_line(line) {
                Some(Ok(rec)) => run.records.push(rec),
                Some(Err(e)) => run.bad_lines.push(format!("{e}: {line}")),
                None => {}
            }
        }
        runs.push((bench.clone(), run));
    }
    if runs.is_empty() {
        bail!(
            "no <bench>.log with a known benchmark name in {}",
            dir.display()
        );
    }
    let mem = MemLimit {
        limit_bytes: None,
        source: "from the logs' machine".into(),
    };
    if let Some(path) = &opts.record_to {
        record(
            path,
            &markdown_section(&runs, &machine, &date, opts.quick, &mem, root),
        )?;
    }
    println!("bench: from {} ({date}; {machine})", dir.display());
    print!("{}", text_table(&table_rows(&runs, &mem)));
    Ok(())
}

fn find_benches(root: &Path) -> Result<Vec<Bench>> {
    let mut benches = Vec::new();
    for e in std::fs::read_dir(root.join("crates"))? {
        let dir = e?.path();
        let Ok(rd) = std::fs::read_dir(dir.join("examples")) else {
            continue;
        };
        let krate = dir
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        for f in rd {
            let p = f?.path();
            if p.extension().is_none_or(|x| x != "rs") {
                continue;
            }
            let name = p
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            if name.ends_with("_bench") {
                let gpu = name.starts_with("gpu_") || GPU_BENCHES.contains(&name.as_str());
                benches.push(Bench {
                    krate: krate.clone(),
                    name,
                    gpu,
                });
            }
        }
    }
    benches.sort_by(|a, b| (&a.krate, &a.name).cmp(&(&b.krate, &b.name)));
    Ok(benches)
}

/// Builds every bench program (and `memprobe`) in one cargo call; `--keep-going` so one
/// program that does not compile does not stop the others. Returns example/bin name →
/// executable, and whether cargo succeeded.
fn build(root: &Path, benches: &[&Bench]) -> Result<(BTreeMap<String, PathBuf>, bool)> {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(root).args([
        "build",
        "--release",
        "--keep-going",
        "--message-format=json-render-diagnostics",
        "-p",
        "memory-budget",
        "--bin",
        "memprobe",
    ]);
    let mut krates: Vec<&str> = benches.iter().map(|b| b.krate.as_str()).collect();
    krates.dedup();
    for k in krates {
        cmd.args(["-p", k]);
    }
    for b in benches {
        cmd.args(["--example", &b.name]);
    }
    let out = cmd
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("cannot start {cmd:?}"))?;
    Ok((
        executables(&String::from_utf8_lossy(&out.stdout)),
        out.status.success(),
    ))
}

/// Target name → executable from cargo's JSON messages (examples and binaries only).
fn executables(messages: &str) -> BTreeMap<String, PathBuf> {
    crate::cargo_json::executables(messages)
        .into_iter()
        .filter(|e| e.is("example") || e.is("bin"))
        .map(|e| (e.name, e.path))
        .collect()
}

fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|p| if p.is_absolute() { p } else { root.join(p) })
        .unwrap_or_else(|| root.join("target"))
}

/// Runs one program: its stdout passes through (protocol lines are collected instead of
/// printed), stderr is inherited. `wait4` gives the exit status and this child's own peak RSS.
fn run_program(cmd: &mut Command) -> ProgramRun {
    let started = Instant::now();
    let mut child = match cmd.stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn() {
        Ok(c) => c,
        Err(e) => return ProgramRun::without_run(Status::CannotStart(e.to_string())),
    };
    let stdout = child.stdout.take();
    let reader = std::thread::spawn(move || {
        let (mut records, mut bad) = (Vec::new(), Vec::new());
        let Some(stdout) = stdout else {
            return (records, bad);
        };
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            match parse_bench_line(&line) {
                Some(Ok(r)) => records.push(r),
                Some(Err(e)) => {
                    println!("{line}");
                    bad.push(e);
                }
                None => println!("{line}"),
            }
        }
        (records, bad)
    });
    let pid = child.id() as libc::pid_t;
    let mut wstatus: libc::c_int = 0;
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    let rc = loop {
        // SAFETY: `pid` is our own unreaped child (std never waits for it: we do not call
        // `Child::wait`), `wstatus` and `usage` are valid for writes of their types, and
        // `usage` starts zeroed so it is initialised whatever wait4 writes.
        let rc = unsafe { libc::wait4(pid, &mut wstatus, 0, usage.as_mut_ptr()) };
        if rc == -1 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        break rc;
    };
    // SAFETY: zero-initialised above, and a rusage is plain integers.
    let usage = unsafe { usage.assume_init() };
    let (records, bad_lines) = reader.join().unwrap_or_default();
    let status = if rc != pid {
        Status::CannotStart(format!("wait4: {}", std::io::Error::last_os_error()))
    } else if libc::WIFSIGNALED(wstatus) {
        Status::Signalled(libc::WTERMSIG(wstatus))
    } else {
        match libc::WEXITSTATUS(wstatus) {
            0 => Status::Ok,
            code => Status::Exited(code),
        }
    };
    ProgramRun {
        status,
        records,
        bad_lines,
        // Linux reports ru_maxrss in KiB.
        peak_rss_bytes: (rc == pid).then_some(usage.ru_maxrss as u64 * 1024),
        seconds: started.elapsed().as_secs_f64(),
    }
}

fn memprobe_limit(exe: &Path) -> Option<MemLimit> {
    let out = Command::new(exe).arg("--json").output().ok()?;
    let v: Value = serde_json::from_slice(&out.stdout).ok()?;
    Some(MemLimit {
        limit_bytes: v["limit_bytes"].as_u64(),
        source: format!(
            "{} {}",
            v["limit_source"].as_str().unwrap_or("?"),
            v["limit_path"].as_str().unwrap_or("")
        )
        .trim()
        .to_string(),
    })
}

/// Fallback when memprobe did not build or run: MemTotal.
fn meminfo_limit() -> MemLimit {
    let total = std::fs::read_to_string("/proc/meminfo").ok().and_then(|s| {
        s.lines()
            .find(|l| l.starts_with("MemTotal:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|k| k.parse::<u64>().ok())
            .map(|k| k * 1024)
    });
    MemLimit {
        limit_bytes: total,
        source: "/proc/meminfo MemTotal (memprobe unavailable)".into(),
    }
}

fn gib(bytes: u64) -> String {
    if bytes < 1 << 30 {
        format!("{:.0} MiB", bytes as f64 / (1u64 << 20) as f64)
    } else {
        format!("{:.2} GiB", bytes as f64 / (1u64 << 30) as f64)
    }
}

fn machine_description(gpu: bool, mem: &MemLimit) -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let total = meminfo_limit().limit_bytes.map_or("? GiB".into(), gib);
    let limit = mem.limit_bytes.map_or("no limit found".into(), |l| {
        format!("limit {} ({})", gib(l), mem.source)
    });
    let gpu = if !gpu {
        "no GPU (no CUDA driver)".to_string()
    } else {
        Command::new("nvidia-smi")
            .args([
                "--query-gpu=name,memory.total,driver_version",
                "--format=csv,noheader",
            ])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| {
                let s = String::from_utf8_lossy(&o.stdout);
                format!("GPU: {}", s.trim().replace('\n', "; "))
            })
            .unwrap_or_else(|| "CUDA driver present (nvidia-smi unavailable)".into())
    };
    format!("{cores} cores, {total} memory, {limit}, {gpu}")
}

/// "YYYY-MM-DD HH:MM UTC" from the system clock (days-to-civil, proleptic Gregorian).
fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    utc_string(secs)
}

fn utc_string(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60
    )
}

/// A figure with about three significant digits.
fn num(x: f64) -> String {
    let a = x.abs();
    if !x.is_finite() {
        format!("{x}")
    } else if a >= 1e6 || (a != 0.0 && a < 1e-3) {
        format!("{x:.3e}")
    } else if a >= 100.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

/// One table row: bench, what, size, ours, peer, ratio, target, result.
type Row = [String; 8];

fn table_rows(runs: &[(Bench, ProgramRun)], mem: &MemLimit) -> Vec<Row> {
    let mut rows = Vec::new();
    for (b, r) in runs {
        let bench = b.name.clone();
        for rec in &r.records {
            let unit = |x: f64| format!("{} {}", num(x), rec.unit);
            rows.push([
                bench.clone(),
                rec.what.clone(),
                rec.size.clone(),
                unit(rec.ours),
                rec.peer.map_or("-".into(), unit),
                rec.ratio().map_or("-".into(), |x| format!("{}x", num(x))),
                rec.target.clone().unwrap_or_else(|| "-".into()),
                match rec.pass {
                    Some(true) => "pass".into(),
                    Some(false) => "MISS".into(),
                    None => "-".into(),
                },
            ]);
        }
        let mut note = |what: String| {
            let mut row: Row = Default::default();
            row[0] = bench.clone();
            row[1] = what;
            rows.push(row);
        };
        for e in &r.bad_lines {
            note(format!("malformed PINION_BENCH line: {e}"));
        }
        let peak_and_limit = || {
            format!(
                "; peak RSS {}; limit {}",
                r.peak_rss_bytes.map_or("?".into(), gib),
                mem.limit_bytes.map_or("none found".into(), |l| format!(
                    "{} ({})",
                    gib(l),
                    mem.source
                ))
            )
        };
        match &r.status {
            Status::Ok if r.records.is_empty() => note(format!(
                "no machine-readable results (ran {:.0} s)",
                r.seconds
            )),
            Status::Ok => {}
            Status::Skipped(why) => note(why.clone()),
            Status::NotBuilt => note("not built: the release build failed (see above)".into()),
            Status::CannotStart(e) => note(format!("FAILED: cannot run: {e}")),
            Status::Exited(code) => note(format!(
                "FAILED: exit status {code} after {:.0} s{}",
                r.seconds,
                peak_and_limit()
            )),
            Status::Signalled(sig) => note(format!(
                "KILLED by {} after {:.0} s{}",
                signal_name(*sig),
                r.seconds,
                peak_and_limit()
            )),
        }
    }
    rows
}

/// "N results: P pass, M MISS, K without a target; programs: R ran, S skipped, F failed".
fn summary(runs: &[(Bench, ProgramRun)]) -> String {
    let records = runs.iter().flat_map(|(_, r)| &r.records);
    let count = |want: Option<bool>| records.clone().filter(|r| r.pass == want).count();
    let programs = |f: fn(&Status) -> bool| runs.iter().filter(|(_, r)| f(&r.status)).count();
    format!(
        "{} results: {} pass, {} MISS, {} without a target; programs: {} ran, {} skipped, {} failed",
        records.clone().count(),
        count(Some(true)),
        count(Some(false)),
        count(None),
        programs(|s| *s == Status::Ok),
        programs(|s| matches!(s, Status::Skipped(_))),
        programs(Status::failed),
    )
}

fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGKILL => "SIGKILL (the OOM killer?)",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGILL => "SIGILL",
        libc::SIGFPE => "SIGFPE",
        _ => "",
    };
    format!("signal {sig} {name}").trim().to_string()
}

const HEADER: [&str; 8] = [
    "bench", "what", "size", "ours", "peer", "ratio", "target", "result",
];

fn text_table(rows: &[Row]) -> String {
    let mut w: Vec<usize> = HEADER.iter().map(|h| h.len()).collect();
    for r in rows {
        // A status row's message spans the columns after `what`; do not widen for it.
        let cells = if r[2].is_empty() { 1 } else { 8 };
        for (i, c) in r.iter().enumerate().take(cells) {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |cells: &[String]| -> String {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            let pad = w[i].saturating_sub(c.chars().count());
            // Figures right-aligned, text left-aligned.
            if (3..=5).contains(&i) {
                s.push_str(&" ".repeat(pad));
                s.push_str(c);
            } else {
                s.push_str(c);
                s.push_str(&" ".repeat(pad));
            }
            s.push_str("  ");
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(&HEADER.map(String::from));
    out.push_str(&line(&w.iter().map(|n| "-".repeat(*n)).collect::<Vec<_>>()));
    for r in rows {
        if r[2].is_empty() {
            out.push_str(&format!("{:<w0$}  {}\n", r[0], r[1], w0 = w[0]));
        } else {
            out.push_str(&line(r));
        }
    }
    out
}

fn markdown_section(
    runs: &[(Bench, ProgramRun)],
    machine: &str,
    date: &str,
    quick: bool,
    mem: &MemLimit,
    root: &Path,
) -> String {
    let commit = Command::new("git")
        .current_dir(root)
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "?".into());
    let mut s = format!(
        "\n## `cargo xtask bench{}`, {date}\n\nMachine: {machine}. Commit {commit}. \
         Ratio is ours / peer.\n\n| {} |\n|---|---|---|---:|---:|---:|---|---|\n",
        if quick { " --quick" } else { "" },
        HEADER.join(" | ")
    );
    for r in table_rows(runs, mem) {
        let cells: Vec<String> = r.iter().map(|c| c.replace('|', "\\|")).collect();
        s.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    s
}

fn results_json(
    runs: &[(Bench, ProgramRun)],
    machine: &str,
    date: &str,
    quick: bool,
    build_s: f64,
    total_s: f64,
    mem: &MemLimit,
) -> Value {
    let programs: Vec<Value> = runs
        .iter()
        .map(|(b, r)| {
            let (status, detail) = match &r.status {
                Status::Ok => ("ok", Value::Null),
                Status::Skipped(w) => ("skipped", json!(w)),
                Status::NotBuilt => ("not_built", Value::Null),
                Status::CannotStart(e) => ("cannot_start", json!(e)),
                Status::Exited(c) => ("exited", json!(c)),
                Status::Signalled(s) => ("signalled", json!(s)),
            };
            json!({
                "crate": b.krate,
                "program": b.name,
                "gpu": b.gpu,
                "status": status,
                "detail": detail,
                "seconds": r.seconds,
                "peak_rss_bytes": r.peak_rss_bytes,
                "malformed_lines": r.bad_lines,
                "results": r.records.iter().map(|rec| json!({
                    "what": rec.what,
                    "size": rec.size,
                    "ours": rec.ours,
                    "peer": rec.peer,
                    "ratio": rec.ratio(),
                    "unit": rec.unit,
                    "lower_is_better": rec.lower_is_better,
                    "target": rec.target,
                    "pass": rec.pass,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "date": date,
        "machine": machine,
        "quick": quick,
        "memory_limit_bytes": mem.limit_bytes,
        "memory_limit_source": mem.source,
        "build_seconds": build_s,
        "total_seconds": total_s,
        "programs": programs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `expected`: `None` for "not a protocol line", `Some(Ok(..))` for a record, and
    /// `Some(Err(fragment))` for a malformed line whose message contains `fragment`.
    fn check(line: &str, expected: Option<Result<BenchRecord, &str>>) {
        let got = parse_bench_line(line);
        match (got, expected) {
            (None, None) => {}
            (Some(Ok(g)), Some(Ok(e))) => assert_eq!(g, e, "{line}"),
            (Some(Err(g)), Some(Err(e))) => assert!(g.contains(e), "{line}: {g:?} lacks {e:?}"),
            (g, e) => panic!("{line}: got {g:?}, expected {e:?}"),
        }
    }

    fn rec(ours: f64, peer: Option<f64>, target: Option<&str>, pass: Option<bool>) -> BenchRecord {
        BenchRecord {
            what: "msm g1 uniform".into(),
            size: "2^16".into(),
            ours,
            peer,
            unit: "ms".into(),
            lower_is_better: true,
            target: target.map(String::from),
            pass,
        }
    }

    #[test]
    fn parses_protocol_lines() {
        let head = r#"PINION_BENCH {"what":"msm g1 uniform","size":"2^16","unit":"ms","lower_is_better":true"#;
        check(
            &format!(r#"{head},"ours":576,"peer":919.5,"target":"<= 1.0x peer","pass":true}}"#),
            Some(Ok(rec(
                576.0,
                Some(919.5),
                Some("<= 1.0x peer"),
                Some(true),
            ))),
        );
        check(
            &format!(r#"{head},"ours":1.5e2,"peer":null,"target":null,"pass":null}}  "#),
            Some(Ok(rec(150.0, None, None, None))),
        );
        // Optional keys may be left out.
        check(
            &format!(r#"{head},"ours":3}}"#),
            Some(Ok(rec(3.0, None, None, None))),
        );
        check("forward 2^16 | ours 11 ms", None);
        check(r#"  PINION_BENCH {"what":"x"}"#, None);
        check("PINION_BENCH {", Some(Err("not json")));
        check("PINION_BENCH [1]", Some(Err("not a json object")));
        check(
            &format!(r#"{head},"ours":"fast"}}"#),
            Some(Err("`ours` is not a number")),
        );
        check(&format!("{head}}}"), Some(Err("missing `ours`")));
        check(
            &format!(r#"{head},"ours":1,"peer":"x"}}"#),
            Some(Err("`peer` is not a number")),
        );
        check(
            &format!(r#"{head},"ours":1,"pass":"yes"}}"#),
            Some(Err("`pass` is not a bool")),
        );
        check(
            r#"PINION_BENCH {"what":"a","size":"1","unit":"ms","ours":1}"#,
            Some(Err("missing `lower_is_better`")),
        );
    }

    #[test]
    fn ratio_is_ours_over_peer() {
        assert_eq!(rec(50.0, Some(200.0), None, None).ratio(), Some(0.25));
        assert_eq!(rec(50.0, Some(0.0), None, None).ratio(), None);
        assert_eq!(rec(50.0, None, None, None).ratio(), None);
    }

    #[test]
    fn utc_dates() {
        for (secs, want) in [
            (0, "1970-01-01 00:00 UTC"),
            (951_782_400, "2000-02-29 00:00 UTC"),
            (1_796_055_900, "2026-11-30 16:25 UTC"),
        ] {
            assert_eq!(utc_string(secs), want);
        }
    }

    /// A child that reports, then dies: the records survive and the signal is named.
    #[test]
    fn a_killed_child_is_reported_with_its_records() {
        let line =
            r#"PINION_BENCH {"what":"w","size":"1","ours":2,"unit":"ms","lower_is_better":true}"#;
        let mut cmd = Command::new("sh");
        cmd.args([
            "-c",
            &format!("echo '{line}'; echo 'PINION_BENCH x'; kill -9 $$"),
        ]);
        let r = run_program(&mut cmd);
        assert_eq!(r.status, Status::Signalled(libc::SIGKILL));
        assert_eq!(r.records.len(), 1);
        assert_eq!(r.bad_lines.len(), 1);
        assert!(r.peak_rss_bytes.is_some_and(|b| b > 0));
        let mem = MemLimit {
            limit_bytes: Some(1 << 30),
            source: "test".into(),
        };
        let bench = Bench {
            krate: "k".into(),
            name: "b".into(),
            gpu: false,
        };
        let rows = table_rows(&[(bench, r)], &mem);
        assert_eq!(rows.len(), 3, "{rows:?}");
        assert!(rows[2][1].starts_with("KILLED by signal 9"), "{rows:?}");
        assert!(rows[2][1].contains("limit 1.00 GiB (test)"), "{rows:?}");
        assert!(rows[2][1].contains("peak RSS "), "{rows:?}");
    }

    #[test]
    fn a_failing_child_reports_its_exit_status() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "exit 3"]);
        assert_eq!(run_program(&mut cmd).status, Status::Exited(3));
        let mut cmd = Command::new("/nonexistent/bench");
        assert!(matches!(
            run_program(&mut cmd).status,
            Status::CannotStart(_)
        ));
    }
}
