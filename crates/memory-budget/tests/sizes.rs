//! Size parsing: units, percentages, garbage.

mod common;

use common::seeded_rng;
use memory_budget::{format_bytes, parse_bytes, BudgetError, SizeSpec};
use rand::RngExt;

fn check(text: &str, expected: Result<u64, &str>) {
    match (parse_bytes(text), expected) {
        (Ok(got), Ok(want)) => assert_eq!(got, want, "{text:?}"),
        (Err(BudgetError::InvalidSize { text: t, reason }), Err(why)) => {
            assert_eq!(t, text, "error names the offending text");
            assert!(
                reason.contains(why),
                "{text:?}: reason {reason:?} lacks {why:?}"
            );
        }
        (got, want) => panic!("{text:?}: got {got:?}, want {want:?}"),
    }
}

#[test]
fn units() {
    check("4096", Ok(4096));
    check("4096B", Ok(4096));
    check("1K", Ok(1024));
    check("1KiB", Ok(1024));
    check("1KB", Ok(1000));
    check("2M", Ok(2 << 20));
    check("256GiB", Ok(256 << 30));
    check("256 GiB", Ok(256 << 30));
    check(" 3G ", Ok(3 << 30));
    check("1.5GiB", Ok(3 << 29));
    check("2TB", Ok(2_000_000_000_000));
    check("1TiB", Ok(1 << 40));
}

#[test]
fn garbage_is_rejected_with_the_text() {
    check("", Err("empty"));
    check("GiB", Err("no number"));
    check("12 parsecs", Err("unknown unit"));
    check("1.5", Err("whole number"));
    check("1.2.3G", Err("malformed"));
    check("-5G", Err("no number"));
    check("99999999999999999999", Err("too large"));
    check("20000000PiB", Err("too large"));
    for bad in ["0%", "101%", "abc%", "-3%", "NaN%"] {
        assert!(SizeSpec::parse(bad).is_err(), "{bad:?} accepted");
    }
}

#[test]
fn percent_specs_resolve_against_the_limit() {
    let mut rng = seeded_rng("percent_specs_resolve_against_the_limit");
    for _ in 0..200 {
        let limit: u64 = rng.random_range(1..(1u64 << 48));
        let p: u32 = rng.random_range(1..=100);
        let spec = SizeSpec::parse(&format!("{p}%")).expect("valid");
        let got = spec.resolve(limit);
        let want = (limit as u128 * p as u128 / 100) as u64;
        // f64 rounding may differ by a few bytes on 48-bit limits; never by more than 1 ppm.
        assert!(
            got.abs_diff(want) <= want / 1_000_000 + 1,
            "{p}% of {limit}: {got} vs {want}"
        );
    }
}

#[test]
fn round_trip_through_format() {
    let mut rng = seeded_rng("round_trip_through_format");
    for _ in 0..200 {
        let n: u64 = rng.random_range(0..(1u64 << 50));
        let text = format!("{n}");
        assert_eq!(parse_bytes(&text).expect("plain"), n);
        let human = format_bytes(n);
        let back = parse_bytes(&human.replace(' ', "")).expect("formatted size parses");
        assert!(back.abs_diff(n) <= n / 100 + 1, "{n} -> {human} -> {back}");
    }
}
