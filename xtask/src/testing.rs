//! `cargo xtask test`: every workspace test, with GPU groups run or named as skipped.
//!
//! A GPU group is an integration test file `crates/<crate>/tests/gpu_*.rs`. On a machine with
//! no CUDA driver the CPU tests run and each GPU group is listed as `skipped: no CUDA driver`,
//! so a missing GPU is never a silent pass. With a driver, GPU groups run with
//! `PINION_REQUIRE_GPU=1`, which turns "no usable device" from a skip into a failure.

use anyhow::{bail, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The GPU test groups, as a nextest filter: integration-test binaries named `gpu_*`. Not
/// `binary(/^gpu_/)` alone: the unit tests of `gpu-device`, `gpu-msm` and `gpu-ntt` live in
/// binaries named after their crates (`gpu_msm`, ...), are CPU tests, and must run in CI.
const GPU_GROUPS: &str = "kind(test) and binary(/^gpu_/)";
/// Every other test binary.
const NOT_GPU_GROUPS: &str = "not (kind(test) and binary(/^gpu_/))";

pub fn run(root: &Path, args: &[String]) -> Result<()> {
    if !args.is_empty() {
        bail!("usage: cargo xtask test");
    }
    let groups = gpu_groups(root)?;
    let nextest = has_nextest();
    if nextest {
        crate::run_cmd(
            Command::new("cargo")
                .current_dir(root)
                .args(["nextest", "run", "--workspace", "--no-tests=pass", "-E"])
                .arg(NOT_GPU_GROUPS),
        )?;
        crate::run_cmd(Command::new("cargo").current_dir(root).args([
            "test",
            "--workspace",
            "--doc",
        ]))?;
    } else {
        println!("xtask test: cargo-nextest not found, using cargo test");
        crate::run_cmd(
            Command::new("cargo")
                .current_dir(root)
                .args(["test", "--workspace"]),
        )?;
    }
    if groups.is_empty() {
        println!("xtask test: no GPU test groups");
        return Ok(());
    }
    if crate::cuda_driver_present() {
        println!(
            "xtask test: CUDA driver found, running {} GPU group(s)",
            groups.len()
        );
        if nextest {
            crate::run_cmd(
                Command::new("cargo")
                    .current_dir(root)
                    .args(["nextest", "run", "--workspace", "--no-tests=pass", "-E"])
                    .arg(GPU_GROUPS)
                    .env("PINION_REQUIRE_GPU", "1"),
            )?;
        } else {
            crate::run_cmd(
                Command::new("cargo")
                    .current_dir(root)
                    .args(["test", "--workspace"])
                    .env("PINION_REQUIRE_GPU", "1"),
            )?;
        }
    } else {
        for g in &groups {
            println!("skipped: no CUDA driver ({g})");
        }
        println!(
            "xtask test: {} GPU group(s) skipped; run them on a GPU machine with `cargo xtask gpu-bundle`",
            groups.len()
        );
    }
    Ok(())
}

fn has_nextest() -> bool {
    Command::new("cargo")
        .args(["nextest", "--version"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// `<crate>/<test>` for every `tests/gpu_*.rs` in the workspace's crates, sorted.
pub fn gpu_groups(root: &Path) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let mut dirs: Vec<PathBuf> = Vec::new();
    for e in std::fs::read_dir(root.join("crates"))? {
        dirs.push(e?.path());
    }
    dirs.push(root.join("cuda-kernels"));
    for d in dirs {
        let tests = d.join("tests");
        let Ok(rd) = std::fs::read_dir(&tests) else {
            continue;
        };
        for e in rd {
            let p = e?.path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if name.starts_with("gpu_") && name.ends_with(".rs") {
                let krate = d.file_name().unwrap().to_string_lossy().into_owned();
                out.push(format!("{krate}/{}", name.trim_end_matches(".rs")));
            }
        }
    }
    out.sort();
    Ok(out)
}
