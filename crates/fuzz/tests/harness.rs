//! The harness's detectors, each shown to fire on a canary target through the real binary:
//! a panic, a hang, the heap cap, the address-space limit, a signal death and a wrong
//! acceptance are each counted, saved, and make the run fail; a clean run passes.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use groth16_prover::testing::test_seed;

/// A fresh folder, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir =
            std::env::temp_dir().join(format!("pinion-fuzz-{name}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn fuzz(out: &Path, seed: u64, args: &[&str]) -> (Output, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_pinion-fuzz"))
        .arg("run")
        .args(["--seed", &seed.to_string(), "--out"])
        .arg(out)
        .args(args)
        .output()
        .expect("run pinion-fuzz");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    (out, stdout)
}

/// `(panics, hangs, accepted)` from the last line, which must be the summary line.
fn last_line(stdout: &str, n_inputs: u64) -> (u64, u64, u64) {
    let last = stdout.lines().last().unwrap_or("");
    let nums: Vec<u64> = last
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    assert!(
        last.starts_with("fuzz: ") && last.contains(" inputs, ") && nums.len() == 4,
        "last line {last:?}"
    );
    assert_eq!(nums[0], n_inputs, "{last}");
    (nums[1], nums[2], nums[3])
}

fn saved(out: &Path, seed: u64) -> Vec<PathBuf> {
    let dir = out.join(format!("run-{seed}")).join("findings");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|e| e == "bin"));
    files.sort();
    files
}

/// Runs a canary over 12 inputs; about three in four misbehave. Returns the summary counts, the
/// saved inputs (in a folder that lives as long as the returned guard) and stdout, after
/// checking that the run failed.
fn canary(
    name: &str,
    extra: &[&str],
    jobs: &str,
) -> ((u64, u64, u64), Vec<PathBuf>, String, TempDir) {
    let seed = test_seed();
    let dir = TempDir::new(name);
    let mut args = vec!["--target", name, "--inputs", "12", "--jobs", jobs];
    args.extend_from_slice(extra);
    let (out, stdout) = fuzz(&dir.0, seed, &args);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let counts = last_line(&stdout, 12);
    let files = saved(&dir.0, seed);
    // Each saved input comes with a note naming its kind and how to replay it.
    for f in &files {
        let note = std::fs::read_to_string(f.with_extension("txt")).unwrap();
        assert!(
            note.contains("replay: cargo run -p pinion-fuzz -- replay"),
            "{note}"
        );
    }
    (counts, files, stdout, dir)
}

#[test]
fn a_panic_is_counted_saved_and_replays() {
    let ((panics, hangs, accepted), files, stdout, _dir) = canary("canary-panic", &[], "2");
    assert!(panics >= 1 && hangs == 0 && accepted == 0, "{stdout}");
    assert_eq!(files.len() as u64, panics);
    assert!(stdout.contains("canary: a misbehaving input"), "{stdout}");
    // The saved input panics again when replayed.
    let replay = Command::new(env!("CARGO_BIN_EXE_pinion-fuzz"))
        .args(["replay", "--target", "canary-panic", "--seed", "1"])
        .arg(&files[0])
        .output()
        .unwrap();
    assert_eq!(replay.status.code(), Some(101));
}

#[test]
fn a_hang_is_killed_at_the_time_cap() {
    let started = std::time::Instant::now();
    let ((panics, hangs, accepted), files, stdout, _dir) =
        canary("canary-hang", &["--time-cap", "1"], "2");
    assert!(hangs >= 1 && panics == 0 && accepted == 0, "{stdout}");
    assert_eq!(files.len() as u64, hangs);
    assert!(stdout.contains("ran past the 1s time cap"), "{stdout}");
    // The canary never returns: the run ends only because each hang was killed (a restart
    // costs the time cap plus a worker's start, slower on a loaded machine).
    assert!(
        started.elapsed().as_secs() < 60 + 10 * hangs,
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn the_heap_cap_refuses_an_uncharged_allocation() {
    let ((panics, _, _), files, stdout, _dir) = canary("canary-alloc", &[], "1");
    assert!(panics >= 1, "{stdout}");
    assert_eq!(files.len() as u64, panics);
    assert!(
        stdout.contains("memcap in canary-alloc") && stdout.contains("heap cap exceeded"),
        "{stdout}"
    );
}

#[test]
fn the_address_space_limit_refuses_what_the_heap_cap_allows() {
    let ((panics, _, _), _, stdout, _dir) = canary(
        "canary-alloc",
        &["--heap-cap", "64GiB", "--address-space", "2GiB"],
        "1",
    );
    assert!(panics >= 1, "{stdout}");
    assert!(
        stdout.contains("address-space limit: memory allocation of"),
        "{stdout}"
    );
}

#[test]
fn a_signal_death_is_a_crash() {
    let ((panics, _, _), files, stdout, _dir) = canary("canary-abort", &[], "2");
    assert!(panics >= 1, "{stdout}");
    assert_eq!(files.len() as u64, panics);
    assert!(stdout.contains("crash in canary-abort"), "{stdout}");
    assert!(stdout.contains("signal 6"), "{stdout}");
}

#[test]
fn a_wrong_acceptance_is_counted() {
    let ((panics, hangs, accepted), files, stdout, _dir) = canary("canary-accept", &[], "2");
    assert!(accepted >= 1 && panics == 0 && hangs == 0, "{stdout}");
    assert_eq!(files.len() as u64, accepted);
}

#[test]
fn a_clean_run_passes_and_covers_every_target() {
    let seed = test_seed();
    let dir = TempDir::new("clean");
    let (out, stdout) = fuzz(&dir.0, seed, &["--inputs", "1400", "--jobs", "2"]);
    assert!(out.status.success(), "{stdout}");
    assert_eq!(last_line(&stdout, 1400), (0, 0, 0));
    for target in [
        "params",
        "verifying-key",
        "r1cs",
        "wtns",
        "pce",
        "proof",
        "public-json",
    ] {
        let row = stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(target))
            .unwrap_or_else(|| panic!("no row for {target}: {stdout}"));
        let inputs: u64 = row.split_whitespace().nth(1).unwrap().parse().unwrap();
        assert!(inputs >= 100, "{target} ran {inputs} of 1400 inputs");
    }
    // The scratch folder goes; nothing was found, so nothing was saved.
    assert!(!dir.0.join(format!("run-{seed}/work")).exists());
    assert!(saved(&dir.0, seed).is_empty());
}

#[test]
fn unknown_targets_are_refused_before_any_work() {
    let dir = TempDir::new("unknown");
    let (out, _) = fuzz(&dir.0, 1, &["--target", "zkey", "--inputs", "1"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("unknown target \"zkey\"") && stderr.contains("public-json"),
        "{stderr}"
    );
}
