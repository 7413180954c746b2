//! `cargo xtask fuzz [--quick] [--seconds N] [--target NAME] ...`: builds the `pinion-fuzz`
//! binary (dev profile: dependencies optimised, our crates with overflow checks on) and runs
//! it; every argument is passed on (`cargo xtask fuzz --help` lists them). Fails when the
//! run finds anything.

use anyhow::Result;
use std::path::Path;
use std::process::Command;

pub fn run(root: &Path, args: &[String]) -> Result<()> {
    crate::run_cmd(
        Command::new("cargo")
            .current_dir(root)
            .args(["run", "--quiet", "-p", "pinion-fuzz", "--", "run"])
            .arg("--out")
            .arg(root.join("target").join("fuzz"))
            .args(args),
    )
}
