//! `cargo xtask gpu-bundle`: everything the GPU machine needs, with no Rust toolchain there.
//!
//! `bundle/tests/` holds the release builds of every GPU test group (`tests/gpu_*.rs`),
//! `bundle/bench/` every benchmark example (`examples/*_bench.rs`), `bundle/bin/` the workspace's
//! binaries (memprobe, srs-inspect, pinion-stress, ...), and `bundle/run.sh` runs
//! them: `run.sh` (tests), `run.sh bench`, `run.sh all`, `run.sh stress` (the engine
//! under load inside memory cgroups: `pinion-stress --require-cgroup`). `bundle.tar.gz` holds the same folder,
//! compressed, for copying. It ends with one line,
//! `gpu-bundle: N passed, M failed`, counting test cases (and bench programs in bench mode).

use crate::cargo_json::{package_name, Executable};
use anyhow::{bail, Context, Result};
use std::path::Path;
use std::process::{Command, Stdio};

pub fn run(root: &Path, args: &[String]) -> Result<()> {
    if !args.is_empty() {
        bail!("usage: cargo xtask gpu-bundle");
    }
    let out = root.join("bundle");
    if out.exists() {
        std::fs::remove_dir_all(&out).with_context(|| format!("clearing {}", out.display()))?;
    }
    std::fs::create_dir_all(out.join("tests"))?;
    std::fs::create_dir_all(out.join("bench"))?;
    std::fs::create_dir_all(out.join("bin"))?;
    std::fs::create_dir_all(out.join("ptx"))?;

    let groups = crate::testing::gpu_groups(root)?;
    let mut cmd = Command::new("cargo");
    cmd.current_dir(root).args([
        "test",
        "--release",
        "--no-run",
        "--features",
        EXTERNAL_PTX,
        "--message-format=json-render-diagnostics",
    ]);
    for g in &groups {
        let (krate, test) = g.split_once('/').unwrap();
        cmd.args(["-p", &package_of(root, krate)?, "--test", test]);
    }
    let tests = if groups.is_empty() {
        Vec::new()
    } else {
        executables(cmd)?.into_iter().filter(|e| e.test).collect()
    };

    let mut cmd = Command::new("cargo");
    cmd.current_dir(root).args([
        "build",
        "--release",
        "--workspace",
        "--exclude",
        "xtask",
        "--examples",
        "--bins",
        "--features",
        EXTERNAL_PTX,
        "--message-format=json-render-diagnostics",
    ]);
    let built: Vec<Executable> = executables(cmd)?.into_iter().filter(|e| !e.test).collect();
    let benches: Vec<&Executable> = built
        .iter()
        .filter(|e| e.is("example") && e.name.ends_with("_bench"))
        .collect();
    let bins: Vec<&Executable> = built.iter().filter(|e| e.is("bin")).collect();

    // Each copy is named after its target (`gpu_field`, not `gpu_field-0123abcd`).
    let copy_into = |dir: &str, e: &Executable| std::fs::copy(&e.path, out.join(dir).join(&e.name));
    for e in &tests {
        copy_into("tests", e)?;
    }
    for e in &benches {
        copy_into("bench", e)?;
    }
    for e in &bins {
        copy_into("bin", e)?;
    }
    // One copy of the (compressed) PTX and cubins for all binaries; run.sh points
    // PINION_PTX_DIR at it.
    for e in std::fs::read_dir(root.join("cuda-kernels/ptx"))? {
        let p = e?.path();
        if p.to_string_lossy().ends_with(".zlib") {
            std::fs::copy(&p, out.join("ptx").join(p.file_name().unwrap()))?;
        }
    }
    let script = out.join("run.sh");
    std::fs::write(&script, RUNNER)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))?;
    }
    let size: u64 = walk_size(&out)?;
    // The binaries are built with `external-ptx`: they read the PTX from bundle/ptx at run
    // time instead of each embedding it, which keeps the archive small (the device tool
    // carries at most 64 MiB with the working tree).
    let archive = root.join("bundle.tar.gz");
    crate::run_cmd(Command::new("tar").current_dir(root).args([
        "-czf",
        "bundle.tar.gz",
        "bundle",
    ]))?;
    let archive_size = std::fs::metadata(&archive)?.len();
    println!(
        "gpu-bundle: {} test group(s), {} bench program(s), {} tool(s), {:.1} MiB in {}",
        tests.len(),
        benches.len(),
        bins.len(),
        size as f64 / (1 << 20) as f64,
        out.display()
    );
    println!(
        "archive: {} ({:.1} MiB)",
        archive.display(),
        archive_size as f64 / (1 << 20) as f64
    );
    println!("run there: tar xzf bundle.tar.gz && bash bundle/run.sh [test|bench|all]");
    Ok(())
}

/// Builds the bundle's binaries without embedded PTX (see `pinion-kernels`).
const EXTERNAL_PTX: &str = "pinion-kernels/external-ptx";

/// Package name of the crate in `crates/<dir>` (or `cuda-kernels`).
fn package_of(root: &Path, dir: &str) -> Result<String> {
    let manifest = if dir == "cuda-kernels" {
        root.join("cuda-kernels/Cargo.toml")
    } else {
        root.join("crates").join(dir).join("Cargo.toml")
    };
    let text = std::fs::read_to_string(&manifest)?;
    package_name(&text).with_context(|| format!("no package name in {}", manifest.display()))
}

/// Runs a cargo build with JSON messages and returns the executables it produced.
fn executables(mut cmd: Command) -> Result<Vec<Executable>> {
    let out = cmd
        .stderr(Stdio::inherit())
        .output()
        .context("running cargo")?;
    if !out.status.success() {
        bail!("cargo failed: {cmd:?}");
    }
    Ok(crate::cargo_json::executables(&String::from_utf8_lossy(
        &out.stdout,
    )))
}

fn walk_size(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        total += if p.is_dir() {
            walk_size(&p)?
        } else {
            std::fs::metadata(&p)?.len()
        };
    }
    Ok(total)
}

const RUNNER: &str = r#"#!/usr/bin/env bash
# generated by `cargo xtask gpu-bundle`; runs Pinion's GPU tests and benchmarks with no Rust
# toolchain. usage: run.sh [test|bench|all|stress]   (extra arguments go to every bench
# program, or to pinion-stress; PINION_BENCH_ONLY="a b" runs only those bench programs,
# PINION_BENCH_LOGS=DIR keeps logs, PINION_PEER_BIN=DIR times the reference library first)
set -u
here="$(cd "$(dirname "$0")" && pwd)"
mode="${1:-test}"; shift || true
export PINION_REQUIRE_GPU=1
export PINION_PTX_DIR="$here/ptx"
if [ "$mode" = stress ]; then
  # The engine under load, unconstrained then inside memory cgroups limited to 100%, 80%
  # and 60% of its peak (needs root). Parameters and each run's report, samples and
  # report.json go under PINION_STRESS_DIR (default bundle/stress).
  exec "$here/bin/pinion-stress" --require-cgroup --dir "${PINION_STRESS_DIR:-$here/stress}" "$@"
fi
pass=0; fail=0; failed=""
if [ "$mode" = test ] || [ "$mode" = all ]; then
  for t in "$here"/tests/*; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    echo "=== test group $name"
    log=$(mktemp)
    "$t" --test-threads=1 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    p=$(grep -Eo '^test result: .* ([0-9]+) passed' "$log" | grep -Eo '[0-9]+ passed' | awk '{s+=$1} END {print s+0}')
    f=$(grep -Eo '[0-9]+ failed' "$log" | tail -1 | awk '{print $1+0}')
    f=${f:-0}
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
    pass=$((pass + p)); fail=$((fail + f))
    [ "$f" -gt 0 ] && failed="$failed $name"
    rm -f "$log"
  done
fi
if [ "$mode" = bench ] || [ "$mode" = all ]; then
  # PINION_BENCH_LOGS=DIR keeps each program's output (DIR/<name>.log) and the machine
  # (DIR/machine.txt) for `cargo xtask bench --from-logs DIR` on a machine with Rust.
  logs="${PINION_BENCH_LOGS:-}"
  if [ -n "$logs" ]; then
    mkdir -p "$logs"
    { date -u '+%Y-%m-%d %H:%M UTC'
      echo "$(nproc) cores, $(awk '/MemTotal/ {printf "%.2f GiB", $2/1048576}' /proc/meminfo) memory"
      nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | sed 's/^/GPU: /'
    } > "$logs/machine.txt"
  fi
  # wanted NAME: whether PINION_BENCH_ONLY (unset: every program) names bench NAME.
  wanted() { case " ${PINION_BENCH_ONLY:-$1} " in *" $1 "*) return 0 ;; esac; return 1; }
  # PINION_PEER_BIN=DIR: peer-bench's built drivers (the reference CUDA library's
  # ntt_bench and msm_bench, ../shared/tools/peer-bench): each timed first, in this run,
  # where the bench it stands beside will run, and set beside ours through
  # PINION_PEER_NTT_CSV / PINION_PEER_MSM_CSV (their CSVs are kept with the logs). A driver
  # that fails counts as a failed bench and sets nothing.
  if [ -n "${PINION_PEER_BIN:-}" ]; then
    pdir="${logs:-$(mktemp -d)}"
    if [ "${PINION_BENCH_QUICK:-}" = 1 ]; then nsz="20 22"; msz="16 18"; gsz=""; else nsz="20 27"; msz="16 26"; gsz="24 26"; fi
    if wanted gpu_ntt_bench; then
      echo "=== peer ntt_bench $nsz"
      if "$PINION_PEER_BIN/ntt_bench" $nsz > "$pdir/peer_ntt.csv"; then
        cat "$pdir/peer_ntt.csv"; export PINION_PEER_NTT_CSV="$pdir/peer_ntt.csv"
      else fail=$((fail + 1)); failed="$failed peer-ntt_bench"; fi
    fi
    if wanted gpu_msm_bench; then
      echo "=== peer msm_bench $msz${gsz:+, $gsz groth16}"
      if { "$PINION_PEER_BIN/msm_bench" $msz && { [ -z "$gsz" ] || "$PINION_PEER_BIN/msm_bench" $gsz groth16; }; } > "$pdir/peer_msm.csv"; then
        cat "$pdir/peer_msm.csv"; export PINION_PEER_MSM_CSV="$pdir/peer_msm.csv"
      else fail=$((fail + 1)); failed="$failed peer-msm_bench"; fi
    fi
  fi
  for b in "$here"/bench/*; do
    [ -x "$b" ] || continue
    name=$(basename "$b")
    wanted "$name" || continue
    echo "=== bench $name"
    if [ -n "$logs" ]; then
      "$b" "$@" 2>&1 | tee "$logs/$name.log"; rc=${PIPESTATUS[0]}
    else
      "$b" "$@"; rc=$?
    fi
    if [ "$rc" -eq 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); failed="$failed $name"; fi
  done
fi
if [ -n "$failed" ]; then echo "failed:$failed"; fi
echo "gpu-bundle: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
"#;
