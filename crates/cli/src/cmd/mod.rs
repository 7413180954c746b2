//! The subcommands, one module each, and what they share: reading inputs with the path in
//! every error, the host budget, atomic writes.

pub mod client;
pub mod demo;
pub mod filecoin;
pub mod memory;
pub mod memprobe;
pub mod pce;
pub mod prove;
pub mod serve;
pub mod setup;
pub mod srs;
pub mod verify;
pub mod zkey;

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use bls12_381::Scalar;
use memory_budget::{Budget, Category, DetectOptions, Reservation, SizeSpec};
use pinion::circom::{parse_wtns, R1cs};

use crate::ui;

/// Charges `bytes` for `what` (a refusal names both sizes).
fn charge(
    budget: &Budget,
    bytes: u64,
    category: Category,
    what: &'static str,
) -> anyhow::Result<Reservation> {
    budget
        .try_reserve(bytes, category, what)
        .with_context(|| format!("the memory budget refuses {} for {what}", ui::bytes(bytes)))
}

/// Reads a whole file, its size charged first.
fn read_charged(
    path: &Path,
    budget: &Budget,
    what: &'static str,
) -> anyhow::Result<(Vec<u8>, Reservation)> {
    let len = std::fs::metadata(path)
        .with_context(|| format!("cannot read {what} {}", path.display()))?
        .len();
    let reservation = charge(budget, len, Category::Transient, what)?;
    let bytes =
        std::fs::read(path).with_context(|| format!("cannot read {what} {}", path.display()))?;
    Ok((bytes, reservation))
}

/// Reads and parses a `.r1cs` file. Charged: the file, then the parse's upper bound (from
/// the headers) before parsing; afterwards the parsed value's real size, for as long as
/// the returned reservation lives.
pub fn read_r1cs(path: &Path, budget: &Budget) -> anyhow::Result<(R1cs, Reservation)> {
    let (bytes, mut reservation) = read_charged(path, budget, "circuit")?;
    let unusable = || format!("circuit {} is not usable", path.display());
    let bound = R1cs::parsed_bytes_bound(&bytes).with_context(unusable)?;
    reservation.try_grow(bound).with_context(|| {
        format!(
            "the memory budget refuses {} to parse the circuit",
            ui::bytes(bound)
        )
    })?;
    let r1cs = R1cs::parse(&bytes).with_context(unusable)?;
    drop(bytes);
    reservation.shrink_to(r1cs.heap_bytes());
    Ok((r1cs, reservation))
}

/// Reads and parses a `.wtns` file (charged like [`read_r1cs`]; values take at most the
/// file's size).
pub fn read_wtns(path: &Path, budget: &Budget) -> anyhow::Result<(Vec<Scalar>, Reservation)> {
    let (bytes, mut reservation) = read_charged(path, budget, "witness")?;
    reservation
        .try_grow(bytes.len() as u64)
        .context("the memory budget refuses to parse the witness")?;
    let values =
        parse_wtns(&bytes).with_context(|| format!("witness {} is not usable", path.display()))?;
    drop(bytes);
    reservation.shrink_to(values.capacity() as u64 * 32);
    Ok((values, reservation))
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

/// What a file is, from its first bytes, when it is one of the formats people mix up.
pub fn sniff(path: &Path) -> Option<&'static str> {
    use std::io::Read;
    let mut head = [0u8; 64];
    let n = std::fs::File::open(path).ok()?.read(&mut head).ok()?;
    let head = &head[..n];
    let text = head.iter().position(|b| !b.is_ascii_whitespace());
    Some(match head.get(..4)? {
        b"zkey" => "a snarkjs proving key (.zkey): give it with --zkey",
        b"r1cs" => "a circom constraint system (.r1cs): give it with --r1cs",
        b"wtns" => "a circom witness (.wtns): give it with --witness",
        b"ptau" => "a snarkjs powers of tau (.ptau), not a circuit's parameters",
        _ if text.is_some_and(|i| head[i] == b'{' || head[i] == b'[') => {
            "json (a snarkjs proof, public values or verification key?), not a binary parameter file"
        }
        _ => return None,
    })
}

/// Adds what the file really is to an error about reading it as `expected`, when its
/// magic says it is something else.
pub fn name_format(err: anyhow::Error, path: &Path, expected: &str) -> anyhow::Error {
    match sniff(path) {
        // The sniffed format replaces the size or magic error it caused.
        Some(what) if !(expected == "zkey" && what.starts_with("a snarkjs proving key")) => {
            anyhow::anyhow!("{} is {what}, not {expected}", path.display())
        }
        _ => err,
    }
}

/// Prints a JSON value on stdout.
pub fn print_json(v: &serde_json::Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
    );
}
