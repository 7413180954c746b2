//! The subcommands, one module each, and what they share: reading inputs with the path in
//! every error, the host budget, atomic writes.

pub mod demo;
pub mod memprobe;
pub mod pce;
pub mod prove;
pub mod setup;
pub mod srs;
pub mod verify;

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use bls12_381::Scalar;
use memory_budget::{Budget, DetectOptions, SizeSpec};
use pinion::circom::{parse_wtns, R1cs};

/// Reads and parses a `.r1cs` file.
pub fn read_r1cs(path: &Path) -> anyhow::Result<R1cs> {
    let bytes =
        std::fs::read(path).with_context(|| format!("cannot read circuit {}", path.display()))?;
    R1cs::parse(&bytes).with_context(|| format!("circuit {} is not usable", path.display()))
}

/// Reads and parses a `.wtns` file.
pub fn read_wtns(path: &Path) -> anyhow::Result<Vec<Scalar>> {
    let bytes =
        std::fs::read(path).with_context(|| format!("cannot read witness {}", path.display()))?;
    parse_wtns(&bytes).with_context(|| format!("witness {} is not usable", path.display()))
}

/// The process's host budget: detected limits, or the user's size.
pub fn host_budget(spec: Option<&str>) -> anyhow::Result<Budget> {
    let budget = spec
        .map(SizeSpec::parse)
        .transpose()
        .context("bad --memory-budget")?;
    Budget::detect(&DetectOptions {
        budget,
        ..DetectOptions::default()
    })
    .context("cannot size the host memory budget")
}

/// Writes a file through a temporary sibling and a rename, so a reader never sees half
/// a file and a failed write leaves no file behind.
pub fn write_atomic(
    path: &Path,
    write: impl FnOnce(&mut std::io::BufWriter<std::fs::File>) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    let name = path
        .file_name()
        .with_context(|| format!("{} is not a file path", path.display()))?;
    let tmp: PathBuf = path.with_file_name(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = (|| {
        let file = std::fs::File::create(&tmp)?;
        let mut w = std::io::BufWriter::new(file);
        write(&mut w)?;
        w.flush()?;
        w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.with_context(|| format!("cannot write {}", path.display()))
}

/// Prints a JSON value on stdout.
pub fn print_json(v: &serde_json::Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
    );
}
