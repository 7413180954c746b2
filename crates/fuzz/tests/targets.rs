//! What each target calls a refusal, an acceptance and a finding, on hand-made inputs;
//! the known findings of issue 22 as regressions; and every saved input under
//! `crates/fuzz/regressions/` replayed.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ff::Field;
use groth16_prover::testing::test_seed;
use pce_cache::{Pce, PceError};
use pinion_fuzz::fixtures::{pce_layout, pce_reseal};
use pinion_fuzz::{canaries, registry, run_input, Fixtures, Target, Verdict};

struct Env {
    dir: PathBuf,
    fx: Arc<Fixtures>,
    targets: Vec<Box<dyn Target>>,
}

impl Env {
    fn new(name: &str, seed: u64) -> Env {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!(
            "pinion-fuzz-targets-{name}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let fx = Arc::new(Fixtures::new(seed, &dir).expect("fixtures"));
        let targets = registry(&fx);
        Env { dir, fx, targets }
    }

    fn run(&self, target: &str, bytes: &[u8]) -> Verdict {
        let t = self
            .targets
            .iter()
            .find(|t| t.name() == target)
            .unwrap_or_else(|| panic!("no target {target}"));
        run_input(&**t, bytes, &self.dir.join("input"), 256 << 20).expect("scratch file")
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn proofs_accepted_only_as_themselves_or_with_a_and_b_negated() {
    let env = Env::new("proof", test_seed());
    let good = env.fx.files.proof.clone();
    assert_eq!(env.run("proof", &good), Verdict::Accepted);
    // (-A, -B, C): the sign flags of A and B flipped. Groth16's malleability: excluded.
    let mut b = good.clone();
    b[0] ^= 0x20;
    b[48] ^= 0x20;
    assert_eq!(env.run("proof", &b), Verdict::Malleable);
    // One sign alone, or C's, breaks the pairing equation.
    for at in [0, 48, 144] {
        let mut b = good.clone();
        b[at] ^= 0x20;
        assert_eq!(env.run("proof", &b), Verdict::Rejected, "sign of byte {at}");
    }
    // A and C swapped, and the identity for A.
    let mut b = good.clone();
    b.copy_within(144..192, 0);
    b[144..192].copy_from_slice(&good[..48]);
    assert_eq!(env.run("proof", &b), Verdict::Rejected);
    let mut b = good.clone();
    b[..48].fill(0);
    b[0] = 0xc0;
    assert_eq!(env.run("proof", &b), Verdict::Rejected);
}

#[test]
fn public_values_are_compared_as_scalars() {
    let env = Env::new("public", test_seed());
    let values: Vec<String> = env
        .fx
        .public
        .iter()
        .map(pinion::decimal::scalar_to_decimal)
        .collect();
    let json = |items: &[String]| format!("[{}]", items.join(",")).into_bytes();
    let quoted: Vec<String> = values.iter().map(|v| format!("\"{v}\"")).collect();
    assert_eq!(env.run("public-json", &json(&quoted)), Verdict::Accepted);
    // Decimal text is read strictly (one spelling per value): leading zeros are refused
    // with a typed error, never read as another statement.
    let padded: Vec<String> = values.iter().map(|v| format!("\"000{v}\"")).collect();
    assert_eq!(env.run("public-json", &json(&padded)), Verdict::Rejected);
    // Another statement: refused by verification.
    let mut swapped = quoted.clone();
    swapped.swap(0, 1);
    assert_eq!(env.run("public-json", &json(&swapped)), Verdict::Rejected);
    assert_eq!(
        env.run("public-json", &json(&quoted[..1])),
        Verdict::Rejected
    );
}

/// Issue 22's findings: `pinion verify` read a key whose beta_g1 or delta_g1 was the
/// identity (and an identity delta_g2 only failed the proof). The `verifying-key` target
/// asserts that no key read holds the identity; each of the six is refused now, and the
/// `params` target refuses them too.
#[test]
fn identity_points_in_the_key_are_refused() {
    let env = Env::new("vk-identity", test_seed());
    let good = env.fx.files.params.clone();
    assert_eq!(env.run("verifying-key", &good), Verdict::Accepted);
    for (section, at) in srs_store::layout::VK_FIXED {
        let (at, len) = (at as usize, section.point_bytes() as usize);
        let mut b = good.clone();
        b[at..at + len].fill(0);
        b[at] = 0x40;
        assert_eq!(env.run("verifying-key", &b), Verdict::Rejected, "{section}");
        assert_eq!(env.run("params", &b), Verdict::Rejected, "{section}");
    }
}

/// Seed 1796473754802756226's fixture proves with k = 0 (public values [out, 0]), so a
/// key whose `ic[2]` is any other point still verifies that proof, rightly: the oracle
/// compares `ic` only through its combination with the public values (CI's run of
/// 2026-12-05 called such a key a wrong acceptance). `ic[1]` (out ≠ 0) still counts.
#[test]
fn an_ic_point_of_a_zero_public_value_is_free() {
    let env = Env::new("vk-ic", 1_796_473_754_802_756_226);
    assert_eq!(env.fx.public.len(), 2);
    assert!(
        bool::from(env.fx.public[1].is_zero()),
        "k is 0 for this seed"
    );
    assert!(!bool::from(env.fx.public[0].is_zero()));
    let good = env.fx.files.params.clone();
    let ic = srs_store::ParamsLayout::parse(&good)
        .expect("fixture layout")
        .ic();
    let g1 = srs_store::layout::G1_BYTES as usize;
    let at = |i: u64| ic.point_offset(i) as usize..ic.point_offset(i) as usize + g1;
    // ic[i] := ic[0].
    let with_ic0_at = |i: u64| {
        let mut b = good.clone();
        b.copy_within(at(0), at(i).start);
        b
    };
    // ic[2]: a different key, and the same statement for k = 0.
    assert_eq!(env.run("verifying-key", &with_ic0_at(2)), Verdict::Accepted);
    // ic[1]: out's point changed, the proof must fail.
    assert_eq!(env.run("verifying-key", &with_ic0_at(1)), Verdict::Rejected);
}

#[test]
fn resealed_pce_reaches_the_structure_checks() {
    let env = Env::new("pce", test_seed());
    for bytes in [&env.fx.files.pce_cubic, &env.fx.files.pce_wide] {
        let mut same = bytes.clone();
        pce_reseal(&mut same, true);
        assert!(same == *bytes, "resealing an unmutated file changes it");
        // Break the first column index of matrix a: with its checksum resealed, the
        // checked load reaches the structure check and names the section.
        let layout = pce_layout(bytes);
        assert!(layout.boundaries.len() > 30, "{:?}", layout.boundaries);
        let entry = 128 + 64 * 5; // a.cols
        let off = u64::from_le_bytes(bytes[entry + 8..entry + 16].try_into().unwrap()) as usize;
        let mut bad = bytes.clone();
        bad[off..off + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        let path = env.dir.join("bad.pce");
        std::fs::write(&path, &bad).unwrap();
        assert!(matches!(
            Pce::load(&path, None),
            Err(PceError::ChecksumMismatch { .. })
        ));
        pce_reseal(&mut bad, true);
        std::fs::write(&path, &bad).unwrap();
        match Pce::load(&path, None) {
            Err(PceError::Malformed { section, .. }) => assert_eq!(section, "a.cols"),
            other => panic!("{:?}", other.err()),
        }
        assert_eq!(env.run("pce", &bad), Verdict::Rejected);
    }
}

#[test]
fn every_seed_is_accepted_and_canaries_stay_out_of_the_registry() {
    let env = Env::new("seeds", test_seed());
    for t in &env.targets {
        for seed in t.seeds() {
            assert!(
                !seed.layout.boundaries.is_empty(),
                "{} {}",
                t.name(),
                seed.name
            );
            assert_eq!(
                env.run(t.name(), &seed.bytes),
                Verdict::Accepted,
                "{} {}",
                t.name(),
                seed.name
            );
        }
    }
    let names: Vec<&str> = env.targets.iter().map(|t| t.name()).collect();
    for c in canaries() {
        assert!(!names.contains(&c.name()), "{}", c.name());
    }
}

/// Saved inputs: `crates/fuzz/regressions/<target>-<seed>-<what>.bin`, each replayed with
/// the fixtures of its seed: no panic, no wrong acceptance.
#[test]
fn saved_regressions_replay_clean() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("regressions");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("crates/fuzz/regressions exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "bin"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no saved inputs in {}", dir.display());
    let names: Vec<&'static str> = Env::new("names", 1)
        .targets
        .iter()
        .map(|t| t.name())
        .collect();
    let mut envs: Vec<(u64, Env)> = Vec::new();
    for f in &files {
        let name = f.file_stem().unwrap().to_string_lossy().into_owned();
        let target = names
            .iter()
            .filter(|t| name.starts_with(&format!("{t}-")))
            .max_by_key(|t| t.len())
            .unwrap_or_else(|| panic!("{name}: no target prefix"));
        let seed: u64 = name[target.len() + 1..]
            .split('-')
            .next()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("{name}: no seed after the target"));
        if !envs.iter().any(|(s, _)| *s == seed) {
            envs.push((seed, Env::new("regression", seed)));
        }
        let env = &envs.iter().find(|(s, _)| *s == seed).unwrap().1;
        let bytes = std::fs::read(f).unwrap();
        let verdict = env.run(target, &bytes);
        assert!(
            !matches!(verdict, Verdict::WronglyAccepted(_)),
            "{}: {verdict:?}",
            f.display()
        );
        eprintln!("{}: {verdict:?}", f.display());
    }
    eprintln!("{} saved inputs replayed", files.len());
}
