//! Byte sizes with units ("256GiB", "1.5G", "4096") and relative sizes ("80%").

use crate::error::BudgetError;

/// A size given by a user: absolute bytes or a percentage of a detected limit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SizeSpec {
    /// Exactly this many bytes.
    Bytes(u64),
    /// This percentage (0 < p <= 100) of the limit.
    Percent(f64),
}

impl SizeSpec {
    /// Parses `"80%"` or anything [`parse_bytes`] accepts.
    pub fn parse(text: &str) -> Result<SizeSpec, BudgetError> {
        let t = text.trim();
        if let Some(num) = t.strip_suffix('%') {
            let bad = |reason| BudgetError::InvalidSize {
                text: text.to_string(),
                reason,
            };
            let p: f64 = num
                .trim()
                .parse()
                .map_err(|_| bad("percentage is not a number"))?;
            if !p.is_finite() || p <= 0.0 || p > 100.0 {
                return Err(bad("percentage must be in (0, 100]"));
            }
            return Ok(SizeSpec::Percent(p));
        }
        parse_bytes(t).map(SizeSpec::Bytes)
    }

    /// The size in bytes, given the limit a percentage refers to.
    pub fn resolve(self, limit_bytes: u64) -> u64 {
        match self {
            SizeSpec::Bytes(b) => b,
            SizeSpec::Percent(p) => ((limit_bytes as f64) * p / 100.0) as u64,
        }
    }
}

impl std::str::FromStr for SizeSpec {
    type Err = BudgetError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SizeSpec::parse(s)
    }
}

/// Parses a byte count with an optional unit. `K M G T P` and `KiB MiB GiB TiB PiB` are binary
/// (powers of 1024, as cgroup tools write them); `KB MB GB TB PB` are decimal (powers of 1000).
/// Fractions are allowed with a unit ("1.5GiB"); whitespace between number and unit is allowed.
/// Anything else is an error naming the text (never a silent default).
pub fn parse_bytes(text: &str) -> Result<u64, BudgetError> {
    let bad = |reason| BudgetError::InvalidSize {
        text: text.to_string(),
        reason,
    };
    let t = text.trim();
    if t.is_empty() {
        return Err(bad("empty"));
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(bad("no number"));
    }
    let mult: u64 = match unit.trim() {
        "" | "B" | "b" => 1,
        "K" | "k" | "KiB" | "kiB" => 1 << 10,
        "M" | "MiB" => 1 << 20,
        "G" | "GiB" => 1 << 30,
        "T" | "TiB" => 1 << 40,
        "P" | "PiB" => 1 << 50,
        "KB" | "kB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        "PB" => 1_000_000_000_000_000,
        _ => {
            return Err(bad(
                "unknown unit (use B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)",
            ))
        }
    };
    if let Ok(n) = num.parse::<u64>() {
        return n
            .checked_mul(mult)
            .ok_or_else(|| bad("too large for 64 bits"));
    }
    if num.bytes().all(|c| c.is_ascii_digit()) {
        return Err(bad("too large for 64 bits"));
    }
    if mult == 1 {
        return Err(bad("a byte count must be a whole number"));
    }
    let x: f64 = num.parse().map_err(|_| bad("malformed number"))?;
    let bytes = x * mult as f64;
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return Err(bad("too large for 64 bits"));
    }
    Ok(bytes.round() as u64)
}

/// Formats bytes for humans with a binary unit ("1.50 GiB").
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = bytes as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < UNITS.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.2} {}", UNITS[i])
    }
}
