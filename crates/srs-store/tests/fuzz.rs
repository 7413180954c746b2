//! Fuzz-style robustness: random byte flips, count rewrites, truncations and extensions of
//! a valid file never panic, and never leave anything charged. Iterations scale with
//! `PINION_FUZZ_ITERS` (default 300; `PINION_SLOW_TESTS=1` runs 5000).

mod common;

use std::process::Command;

use common::*;
use memory_budget::Budget;
use rand::{Rng, RngExt};
use srs_store::{LoadOptions, ParamsFile, PointCheck};

fn iterations() -> usize {
    if let Some(n) = std::env::var("PINION_FUZZ_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return n;
    }
    if std::env::var("PINION_SLOW_TESTS").as_deref() == Ok("1") {
        5000
    } else {
        300
    }
}

fn mutate(rng: &mut impl Rng, valid: &[u8]) -> Vec<u8> {
    let mut b = valid.to_vec();
    for _ in 0..rng.random_range(1..4) {
        match rng.random_range(0..6) {
            // Flip random bits anywhere.
            0 => {
                let i = rng.random_range(0..b.len().max(1));
                if let Some(x) = b.get_mut(i) {
                    *x ^= 1 << rng.random_range(0..8);
                }
            }
            // Overwrite a random 4-byte word (often a count) with a random or extreme value.
            1 => {
                if b.len() >= 4 {
                    let i = rng.random_range(0..b.len() - 3);
                    let v: u32 = match rng.random_range(0..3) {
                        0 => u32::MAX,
                        1 => rng.random_range(0..64),
                        _ => rng.random(),
                    };
                    b[i..i + 4].copy_from_slice(&v.to_be_bytes());
                }
            }
            // Truncate.
            2 => {
                let n = rng.random_range(0..b.len().max(1));
                b.truncate(n);
            }
            // Extend with junk.
            3 => {
                let n = rng.random_range(1..400);
                b.extend((0..n).map(|_| rng.random::<u8>()));
            }
            // Flag bits on a random byte.
            4 => {
                let i = rng.random_range(0..b.len().max(1));
                if let Some(x) = b.get_mut(i) {
                    *x |= [0x80, 0x40, 0x20][rng.random_range(0..3)];
                }
            }
            // Randomise a whole 96-byte run.
            _ => {
                if b.len() > 96 {
                    let i = rng.random_range(0..b.len() - 96);
                    rng.fill_bytes(&mut b[i..i + 96]);
                }
            }
        }
    }
    b
}

#[test]
fn mutated_files_never_panic_or_leak_charges() {
    let seed = seed();
    let mut rng = rng(seed);
    let valid = to_bytes(&generate(rng.random(), 2, rng.random_range(4..20)));
    let dir = TempDir::new("fuzz");
    let budget = Budget::fixed(1 << 30);
    let n = iterations();
    let mut n_ok = 0;
    for iter in 0..n {
        let bytes = mutate(&mut rng, &valid);
        let path = dir.write("f.params", &bytes);
        let check = [PointCheck::None, PointCheck::Curve, PointCheck::Full][iter % 3];
        let options = LoadOptions {
            check,
            chunk_bytes: rng.random_range(1..2000),
            ..LoadOptions::default()
        };
        let outcome = ParamsFile::open(&path).and_then(|f| {
            f.check_points(check, &options)?;
            f.load(&budget, &options)
        });
        match outcome {
            Ok(loaded) => {
                n_ok += 1;
                // Whatever loads must also be accepted by the reference reader, identically.
                if check == PointCheck::Full {
                    assert_same(&loaded, &bytes);
                }
            }
            Err(e) => assert!(!e.to_string().is_empty()),
        }
        assert_eq!(
            budget.used_bytes(),
            0,
            "iteration {iter}: charge left behind"
        );
        // The binary on a sample of the inputs: exit 0 or 1, never a panic (101).
        if iter % 50 == 0 {
            let out = Command::new(env!("CARGO_BIN_EXE_srs-inspect"))
                .arg(&path)
                .args(["--check", "full"])
                .output()
                .unwrap();
            assert!(
                matches!(out.status.code(), Some(0 | 1)),
                "iteration {iter}: status {:?}",
                out.status
            );
        }
    }
    eprintln!("{n} mutated files, {n_ok} still valid");
}
