//! Pinion's build tasks, run as `cargo xtask <task>`.
//!
//! - `kernels [--check]`: compile every `cuda-kernels/*.cu` to PTX for sm_90 with a pinned nvcc
//!   13.0.x, or check (with no nvcc) that the committed PTX matches the sources.
//! - `test`: all workspace tests; GPU test groups (`tests/gpu_*.rs`) run when a CUDA driver is
//!   present, and each skipped group is named otherwise.
//! - `gpu-bundle`: release GPU test and bench binaries plus a runner script in `bundle/`, to copy
//!   to a GPU machine that has no Rust toolchain.
//! - `bench`: runs the workspace's benchmark programs.
//! - `fuzz`: mutation fuzzing of every parser and entry point that reads outside data
//!   (`pinion-fuzz`; `--quick` is the CI run).
//! - `stress`: the engine under load inside memory cgroups, charged against measured
//!   (`pinion-stress`; `--quick` is the CI run).

mod bench;
mod bundle;
mod cargo_json;
mod fuzz;
mod kernels;
mod layers;
mod stress;
mod testing;

use anyhow::{bail, Result};
use std::path::{Path, PathBuf};

const USAGE: &str = "\
usage: cargo xtask <task>

tasks:
  kernels [--check]   build cuda-kernels/*.cu to PTX (sm_90, nvcc 13.0.x); --check: fail if stale
  test                run all workspace tests (GPU groups when a CUDA driver is present)
  gpu-bundle          build release GPU test + bench binaries and a runner into bundle/
  bench [--quick] [--record | --record-to FILE] [--only TEXT]
                      run the benchmark programs; one table; --record appends it to docs/benchmarks.md
  fuzz [--quick] [--seconds N] [--target NAME] [--help]
                      mutation-fuzz every parser and entry point under time and memory caps
                      (--quick: the CI run, 12,000 inputs); fails on any finding
  stress [--quick] [--shares 100,80,60] [--require-cgroup] [--json] [--strict] [--help]
                      the engine under load, unconstrained then in memory cgroups limited to
                      shares of its peak; charged against measured; fails on an OOM kill or
                      a failed or invalid proof
";

fn main() {
    // One line per cause, no backtrace: xtask's errors name the command that failed.
    if let Err(e) = real_main() {
        eprintln!("xtask: error: {e:#}");
        std::process::exit(1);
    }
}

fn real_main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = workspace_root();
    let (task, rest) = match args.split_first() {
        Some((t, r)) => (t.as_str(), r),
        None => {
            print!("{USAGE}");
            bail!("no task given");
        }
    };
    match task {
        "kernels" => kernels::run(&root, rest),
        "test" => testing::run(&root, rest),
        "gpu-bundle" => bundle::run(&root, rest),
        "bench" => bench::run(&root, rest),
        "fuzz" => fuzz::run(&root, rest),
        "stress" => stress::run(&root, rest),
        "help" | "--help" | "-h" => {
            print!("{USAGE}");
            Ok(())
        }
        other => {
            print!("{USAGE}");
            bail!("unknown task `{other}`")
        }
    }
}

/// The workspace root: the parent of this crate's manifest directory.
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the workspace root")
        .to_path_buf()
}

/// Runs a command, failing with its command line when it exits non-zero.
fn run_cmd(cmd: &mut std::process::Command) -> Result<()> {
    let status = cmd
        .status()
        .map_err(|e| anyhow::anyhow!("cannot start {cmd:?}: {e}"))?;
    if !status.success() {
        bail!("command failed ({status}): {cmd:?}");
    }
    Ok(())
}

/// True when a CUDA driver library can be loaded on this machine.
///
/// The probe is a file search, not a `dlopen`: xtask stays free of CUDA bindings, and the GPU
/// test binaries themselves check again (and say so) when they run.
fn cuda_driver_present() -> bool {
    if let Ok(v) = std::env::var("PINION_ASSUME_NO_GPU") {
        if v == "1" {
            return false;
        }
    }
    let names = ["libcuda.so.1", "libcuda.so"];
    let mut dirs: Vec<PathBuf> = vec![
        "/usr/lib/x86_64-linux-gnu".into(),
        "/usr/lib64".into(),
        "/usr/lib".into(),
        "/usr/local/nvidia/lib64".into(),
        "/usr/local/nvidia/lib".into(),
        "/usr/local/cuda/lib64/stubs".into(),
        "/usr/lib/wsl/lib".into(),
    ];
    if let Ok(p) = std::env::var("LD_LIBRARY_PATH") {
        dirs.extend(p.split(':').filter(|s| !s.is_empty()).map(PathBuf::from));
    }
    dirs.iter()
        .filter(|d| !d.ends_with("stubs"))
        .any(|d| names.iter().any(|n| d.join(n).exists()))
}
