//! `cargo xtask bench`: runs the workspace's benchmark programs (`examples/*_bench.rs`).
//!
//! Each program runs in its own child process and prints its own figures; this task builds them
//! in release mode and runs them one after another, noting any that fail or are killed, so one
//! crash does not hide the others.

use anyhow::{bail, Result};
use std::path::Path;
use std::process::Command;

pub fn run(root: &Path, args: &[String]) -> Result<()> {
    let quick = match args {
        [] => false,
        [a] if a == "--quick" => true,
        _ => bail!("usage: cargo xtask bench [--quick]"),
    };
    let mut benches = Vec::new();
    for e in std::fs::read_dir(root.join("crates"))? {
        let dir = e?.path();
        let Ok(rd) = std::fs::read_dir(dir.join("examples")) else {
            continue;
        };
        for f in rd {
            let p = f?.path();
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            if name.ends_with("_bench") {
                benches.push((
                    dir.file_name().unwrap().to_string_lossy().into_owned(),
                    name,
                ));
            }
        }
    }
    benches.sort();
    let mut failed = Vec::new();
    for (krate, name) in &benches {
        println!("=== bench {krate}/{name}");
        let mut cmd = Command::new("cargo");
        cmd.current_dir(root).args([
            "run",
            "--release",
            "--quiet",
            "-p",
            krate,
            "--example",
            name,
        ]);
        if quick {
            cmd.env("PINION_BENCH_QUICK", "1");
        }
        match cmd.status() {
            Ok(s) if s.success() => {}
            Ok(s) => failed.push(format!("{krate}/{name} ({s})")),
            Err(e) => failed.push(format!("{krate}/{name} (cannot start: {e})")),
        }
    }
    println!(
        "bench: {} program(s) run, {} failed",
        benches.len(),
        failed.len()
    );
    if !failed.is_empty() {
        bail!("failed benchmarks: {}", failed.join(", "));
    }
    Ok(())
}
