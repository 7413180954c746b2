//! `cargo xtask stress [--quick] [--shares 100,80,60] [--require-cgroup] [--json] ...`:
//! builds the `pinion-stress` binary (dev profile: dependencies optimised, as the tests
//! build them) and runs it; every argument is passed on (`cargo xtask stress --help`
//! lists them). Fails when a run is not clean (an OOM kill, a failed or invalid proof),
//! and, under `--require-cgroup`, when no memory cgroup can be made.

use anyhow::Result;
use std::path::Path;
use std::process::Command;

pub fn run(root: &Path, args: &[String]) -> Result<()> {
    let mut cmd = Command::new("cargo");
    cmd.current_dir(root)
        .args(["run", "--quiet", "-p", "pinion-stress", "--"]);
    // Parameters and runs under the workspace's target/, wherever xtask was started.
    if !args.iter().any(|a| a == "--dir" || a.starts_with("--dir=")) {
        cmd.arg("--dir").arg(root.join("target").join("stress"));
    }
    crate::run_cmd(cmd.args(args))
}
