//! The result protocol of Pinion's benchmark programs.
//!
//! A benchmark program (`crates/*/examples/*_bench.rs`) prints its human-readable figures as it
//! likes, and one stdout line per result in the form `PINION_BENCH {json}`, which
//! `cargo xtask bench` collects into one table. The JSON object has the keys `what`, `size`,
//! `ours`, `peer` (number or null), `unit`, `lower_is_better`, `target` (string or null) and
//! `pass` (bool or null). The ratio in the table is always ours / peer.
//!
//! # Example
//! ```
//! use pinion_bench::BenchLine;
//!
//! let line = BenchLine {
//!     what: "msm g1 uniform",
//!     size: "2^16".into(),
//!     ours: 6.8,
//!     peer: Some(9.8),
//!     unit: "ms",
//!     lower_is_better: true,
//!     target: Some("<= 0.8x peer"),
//!     pass: Some(6.8 <= 0.8 * 9.8),
//! };
//! assert_eq!(
//!     line.line(),
//!     r#"PINION_BENCH {"what":"msm g1 uniform","size":"2^16","ours":6.8,"peer":9.8,"unit":"ms","lower_is_better":true,"target":"<= 0.8x peer","pass":true}"#
//! );
//! line.emit(); // the same line on stdout, for `cargo xtask bench` to collect
//! ```
//!
//! This crate has no dependencies so that every crate can take it as a dev-dependency.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

/// One machine-readable result.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchLine<'a> {
    /// What was measured ("msm g1 uniform").
    pub what: &'a str,
    /// The problem size ("2^16", "52735 constraints").
    pub size: String,
    /// Our figure.
    pub ours: f64,
    /// The peer's figure on the same machine or from the issue, if any.
    pub peer: Option<f64>,
    /// Unit of `ours` and `peer` ("ms", "GiB/s", "ns", "bytes/nnz").
    pub unit: &'a str,
    /// Whether a smaller figure is better.
    pub lower_is_better: bool,
    /// The target in words ("<= 1.0x peer", "< 100 ns"), if any.
    pub target: Option<&'a str>,
    /// Whether the target was met, where the program knows.
    pub pass: Option<bool>,
}

impl BenchLine<'_> {
    /// The `PINION_BENCH {json}` line (non-finite numbers become `null`).
    pub fn line(&self) -> String {
        let s = |x: &str| format!("\"{}\"", x.replace('\\', "\\\\").replace('"', "\\\""));
        let n = |x: f64| {
            if x.is_finite() {
                format!("{x}")
            } else {
                "null".into()
            }
        };
        format!(
            "PINION_BENCH {{\"what\":{},\"size\":{},\"ours\":{},\"peer\":{},\"unit\":{},\"lower_is_better\":{},\"target\":{},\"pass\":{}}}",
            s(self.what),
            s(&self.size),
            n(self.ours),
            self.peer.map_or("null".into(), n),
            s(self.unit),
            self.lower_is_better,
            self.target.map_or("null".into(), s),
            self.pass.map_or("null".into(), |b| b.to_string())
        )
    }

    /// Prints [`BenchLine::line`] on stdout.
    pub fn emit(&self) {
        println!("{}", self.line());
    }
}

/// True when `cargo xtask bench --quick` asks for the small sizes (`PINION_BENCH_QUICK=1`).
pub fn quick() -> bool {
    std::env::var("PINION_BENCH_QUICK").is_ok_and(|v| v == "1")
}

/// A workspace binary beside the running benchmark: `target/<profile>/<name>` for
/// `target/<profile>/examples/<bench>`, `bundle/bin/<name>` for `bundle/bench/<bench>`.
/// The error says where it looked and how to build it.
pub fn sibling_binary(name: &str) -> Result<std::path::PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let up = exe
        .parent()
        .and_then(std::path::Path::parent)
        .ok_or_else(|| format!("cannot locate the {name} binary beside {}", exe.display()))?;
    [up.join(name), up.join("bin").join(name)]
        .into_iter()
        .find(|c| c.is_file())
        .ok_or_else(|| {
            format!(
                "no {name} binary under {} (build it with `cargo build --release --bin {name}`, or name it)",
                up.display()
            )
        })
}

/// The GPU kind the issues' recorded reference figures were measured on.
pub const RECORDED_REFERENCE_KIND: &str = "H200";

/// Whether figures recorded on [`RECORDED_REFERENCE_KIND`] (the issues' reference library
/// runs) can be set beside a run on `device` (the CUDA device's name): on another GPU kind a
/// ratio to them measures the card, not the code, so a benchmark leaves `peer` and its
/// target out there (reference figures measured in the same run are another matter).
pub fn recorded_reference_applies(device: &str) -> bool {
    device.contains(RECORDED_REFERENCE_KIND)
}

#[cfg(test)]
mod tests {
    use super::{recorded_reference_applies, BenchLine};

    #[test]
    fn recorded_references_only_for_their_gpu_kind() {
        assert!(recorded_reference_applies("NVIDIA H200"));
        assert!(!recorded_reference_applies("NVIDIA H100 80GB HBM3"));
        assert!(!recorded_reference_applies(""));
    }

    fn check(line: BenchLine<'_>, expected: &str) {
        assert_eq!(line.line(), expected);
    }

    #[test]
    fn lines() {
        check(
            BenchLine {
                what: "msm \"g1\"",
                size: "2^16".into(),
                ours: 1.5,
                peer: Some(3.0),
                unit: "ms",
                lower_is_better: true,
                target: Some("<= 1.0x peer"),
                pass: Some(true),
            },
            r#"PINION_BENCH {"what":"msm \"g1\"","size":"2^16","ours":1.5,"peer":3,"unit":"ms","lower_is_better":true,"target":"<= 1.0x peer","pass":true}"#,
        );
        check(
            BenchLine {
                what: "x",
                size: String::new(),
                ours: f64::NAN,
                peer: None,
                unit: "ns",
                lower_is_better: false,
                target: None,
                pass: None,
            },
            r#"PINION_BENCH {"what":"x","size":"","ours":null,"peer":null,"unit":"ns","lower_is_better":false,"target":null,"pass":null}"#,
        );
    }
}
