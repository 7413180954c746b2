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
//! [`PeerRuns`] reads the reference library's figures measured in the same run (the CSV
//! of peer-bench's drivers), so that ratios compare two programs on one card.
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

/// Figures of the reference CUDA library measured on this machine in the same run, from the
/// CSV that peer-bench's drivers print (`../shared/tools/peer-bench`): `ntt_bench` writes
/// `lg_n,ntt_fwd_nr_ms,intt_coset_rn_ms` and one row a size, `msm_bench` writes
/// `lg_n,shape,resident_ms_median` and rows such as `24,uniform,172.47`. Several runs may be
/// concatenated (the reference before and after ours): a figure is then the median of its
/// runs. Other lines (setup times, `check ... EQUAL`) are skipped, but a failed check
/// (`DIFFERENT`) makes the whole file an error: its timings are not of a correct MSM.
///
/// Keys: without a `shape` column, each further column's header less a trailing `_ms`
/// (`ntt_fwd_nr`, `intt_coset_rn`); with one, the shape (`uniform`, `groth16`).
///
/// ```
/// use pinion_bench::PeerRuns;
///
/// let csv = "setup 5.0 s\ncheck 2^12 vs blst CPU: EQUAL\nlg_n,shape,resident_ms_median\n\
///            24,uniform,172.47\n24,uniform,172.51\n24,groth16,94.30\n";
/// let peer = PeerRuns::parse(csv).unwrap();
/// assert_eq!(peer.get("uniform", 24), Some((172.47 + 172.51) / 2.0));
/// assert_eq!(peer.get("groth16", 24), Some(94.30));
/// assert_eq!(peer.get("uniform", 26), None);
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PeerRuns {
    /// (key, log2 size, milliseconds), in file order.
    rows: Vec<(String, u32, f64)>,
}

/// Why a reference CSV was refused (lines are numbered from 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeerCsvError {
    /// The file could not be read.
    Read(String),
    /// No `lg_n,...` header with at least one row under it.
    Empty,
    /// The reference library's own check failed (`DIFFERENT`): its timings are void.
    CheckFailed {
        /// Line number.
        line: usize,
    },
    /// A row under a header that does not have the header's shape.
    BadRow {
        /// Line number.
        line: usize,
        /// What the row should have been.
        expected: String,
        /// The line as found.
        found: String,
    },
}

impl std::fmt::Display for PeerCsvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PeerCsvError::Read(e) => write!(f, "reference CSV: {e}"),
            PeerCsvError::Empty => {
                write!(f, "reference CSV: no `lg_n,...` header with rows under it")
            }
            PeerCsvError::CheckFailed { line } => write!(
                f,
                "reference CSV line {line}: the reference's own check failed (DIFFERENT): its timings are void"
            ),
            PeerCsvError::BadRow {
                line,
                expected,
                found,
            } => write!(
                f,
                "reference CSV line {line}: expected {expected}, found {found:?}"
            ),
        }
    }
}

impl std::error::Error for PeerCsvError {}

/// Largest log2 size a reference row may name.
const PEER_MAX_LOG: u32 = 40;

impl PeerRuns {
    /// Parses peer-bench's output (see [`PeerRuns`]).
    pub fn parse(text: &str) -> Result<Self, PeerCsvError> {
        let mut rows = Vec::new();
        // The current header's value columns (None: a shape column, one value).
        let mut header: Option<Option<Vec<String>>> = None;
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            let no = i + 1;
            if line.contains("DIFFERENT") {
                return Err(PeerCsvError::CheckFailed { line: no });
            }
            if let Some(rest) = line.strip_prefix("lg_n,") {
                let cols: Vec<&str> = rest.split(',').map(str::trim).collect();
                header = Some(if cols.first() == Some(&"shape") {
                    None
                } else {
                    Some(
                        cols.iter()
                            .map(|c| c.strip_suffix("_ms").unwrap_or(c).to_string())
                            .collect(),
                    )
                });
                continue;
            }
            let Some(h) = &header else { continue };
            // Rows start with a digit; anything else (timings' chatter) is skipped.
            if !line.starts_with(|c: char| c.is_ascii_digit()) {
                continue;
            }
            let fields: Vec<&str> = line.split(',').map(str::trim).collect();
            let bad = || PeerCsvError::BadRow {
                line: no,
                expected: match h {
                    None => "lg_n,shape,ms".to_string(),
                    Some(cols) => format!("lg_n,{}", cols.join(",")),
                },
                found: raw.to_string(),
            };
            let log_n: u32 = fields[0].parse().map_err(|_| bad())?;
            if log_n == 0 || log_n > PEER_MAX_LOG {
                return Err(bad());
            }
            let ms = |t: &str| -> Result<f64, PeerCsvError> {
                let v: f64 = t.parse().map_err(|_| bad())?;
                if v.is_finite() && v > 0.0 {
                    Ok(v)
                } else {
                    Err(bad())
                }
            };
            match h {
                None => {
                    if fields.len() != 3 || fields[1].is_empty() {
                        return Err(bad());
                    }
                    rows.push((fields[1].to_string(), log_n, ms(fields[2])?));
                }
                Some(cols) => {
                    if fields.len() != cols.len() + 1 {
                        return Err(bad());
                    }
                    for (c, t) in cols.iter().zip(&fields[1..]) {
                        rows.push((c.clone(), log_n, ms(t)?));
                    }
                }
            }
        }
        if rows.is_empty() {
            return Err(PeerCsvError::Empty);
        }
        Ok(PeerRuns { rows })
    }

    /// The file the environment variable `var` names, parsed; `Ok(None)` where it is unset
    /// or empty.
    pub fn from_env(var: &str) -> Result<Option<Self>, PeerCsvError> {
        match std::env::var(var) {
            Ok(path) if !path.is_empty() => {
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| PeerCsvError::Read(format!("{var}={path}: {e}")))?;
                Self::parse(&text).map(Some)
            }
            _ => Ok(None),
        }
    }

    /// The median of the runs of `key` at 2^`log_n` (the mean of the middle two for an even
    /// count), if any.
    pub fn get(&self, key: &str, log_n: u32) -> Option<f64> {
        let mut v: Vec<f64> = self
            .rows
            .iter()
            .filter(|r| r.0 == key && r.1 == log_n)
            .map(|r| r.2)
            .collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let m = v.len() / 2;
        Some(if v.len() % 2 == 1 {
            v[m]
        } else {
            (v[m - 1] + v[m]) / 2.0
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{recorded_reference_applies, BenchLine, PeerCsvError, PeerRuns};

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

    #[test]
    fn peer_ntt_csv_two_runs() {
        let csv = "lg_n,ntt_fwd_nr_ms,intt_coset_rn_ms\n20,0.261,0.315\n27,41.931,48.587\n\
                   [206s] ref ntt 2\nlg_n,ntt_fwd_nr_ms,intt_coset_rn_ms\n20,0.258,0.312\n\
                   27,41.928,48.597\n";
        let p = PeerRuns::parse(csv).unwrap();
        assert_eq!(p.get("ntt_fwd_nr", 20), Some((0.261 + 0.258) / 2.0));
        assert_eq!(p.get("intt_coset_rn", 27), Some((48.587 + 48.597) / 2.0));
        assert_eq!(p.get("ntt_fwd_nr", 22), None);
        assert_eq!(p.get("uniform", 20), None);
    }

    #[test]
    fn peer_median_of_three() {
        let csv =
            "lg_n,shape,resident_ms_median\n16,uniform,9.5\n16,uniform,30.0\n16,uniform,9.7\n";
        assert_eq!(PeerRuns::parse(csv).unwrap().get("uniform", 16), Some(9.7));
    }

    #[test]
    fn peer_csv_refusals() {
        assert_eq!(PeerRuns::parse(""), Err(PeerCsvError::Empty));
        // Rows before any header are not rows.
        assert_eq!(PeerRuns::parse("20,0.26,0.31\n"), Err(PeerCsvError::Empty));
        assert_eq!(
            PeerRuns::parse("check 2^12 vs blst CPU: DIFFERENT\nlg_n,shape,ms\n16,uniform,9.5\n"),
            Err(PeerCsvError::CheckFailed { line: 1 })
        );
        for (csv, line) in [
            ("lg_n,a_ms,b_ms\n20,0.26\n", 2), // a column short
            ("lg_n,a_ms\n20,0.26,1\n", 2),    // a column long
            ("lg_n,a_ms\n20,-1\n", 2),        // not a duration
            ("lg_n,a_ms\n20,nan\n", 2),       // not finite
            ("lg_n,a_ms\n20,0\n", 2),         // zero
            ("lg_n,a_ms\n99,1.0\n", 2),       // size out of range
            ("lg_n,a_ms\n2x,1.0\n", 2),       // size not a number
            ("lg_n,shape,ms\n16,,9.5\n", 2),  // no shape
            ("lg_n,shape,ms\n16,uniform,9.5\n18,uniform\n", 3),
        ] {
            match PeerRuns::parse(csv) {
                Err(PeerCsvError::BadRow { line: l, .. }) => assert_eq!(l, line, "{csv:?}"),
                other => panic!("{csv:?}: {other:?}"),
            }
        }
        let e = PeerRuns::parse("lg_n,a_ms\n20,x\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("line 2") && e.contains("lg_n,a") && e.contains("\"20,x\""),
            "{e}"
        );
    }

    #[test]
    fn peer_from_env() {
        let var = "PINION_BENCH_TEST_PEER_CSV";
        std::env::remove_var(var);
        assert_eq!(PeerRuns::from_env(var), Ok(None));
        let dir = std::env::temp_dir().join(format!("pinion-bench-peer-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("ntt.csv");
        std::fs::write(&f, "lg_n,ntt_fwd_nr_ms\n24,4.4\n").unwrap();
        std::env::set_var(var, &f);
        assert_eq!(
            PeerRuns::from_env(var)
                .unwrap()
                .unwrap()
                .get("ntt_fwd_nr", 24),
            Some(4.4)
        );
        std::env::set_var(var, dir.join("missing.csv"));
        assert!(matches!(
            PeerRuns::from_env(var),
            Err(PeerCsvError::Read(_))
        ));
        std::env::remove_var(var);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
