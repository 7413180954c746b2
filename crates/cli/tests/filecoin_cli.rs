//! `pinion filecoin ...` end to end: insecure parameters under Filecoin's file names, and
//! bad inputs as one error line with exit status 1 (the proving paths themselves are tested
//! in crates/filecoin on sealed 2 KiB sectors).

use std::path::PathBuf;
use std::process::{Command, Output};

fn pinion(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pinion"))
        .args(args)
        .output()
        .expect("run pinion")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Exit status 1, one `pinion: error:` line containing `needle`, no panic.
fn fails_with(out: &Output, needle: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(1), "stderr:\n{err}");
    assert!(!err.contains("panicked"), "{err}");
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("pinion: error:"))
        .collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains(needle), "{:?} lacks {needle:?}", lines[0]);
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn temp(name: &str) -> TempDir {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dir = std::env::temp_dir().join(format!(
        "pinion-fc-cli-{name}-{}-{nanos}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    TempDir(dir)
}

#[test]
fn insecure_params_have_filecoins_names_and_say_insecure() {
    let dir = temp("params");
    let d = dir.0.to_str().unwrap();
    let out = pinion(&[
        "filecoin",
        "params",
        "--insecure",
        "--kind",
        "window-post",
        "--proof-type",
        "StackedDrgWindow2KiBV1_2",
        "--params-dir",
        d,
        "--seed",
        "3",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("INSECURE"), "{stdout}");
    assert!(stderr(&out).contains("INSECURE"));
    let names: Vec<String> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let stem = "v28-proof-of-spacetime-fallback-merkletree-poseidon_hasher-8-0-0-";
    assert!(
        names
            .iter()
            .any(|n| n.starts_with(stem) && n.ends_with(".params")),
        "{names:?}"
    );
    assert!(
        names
            .iter()
            .any(|n| n.starts_with(stem) && n.ends_with(".vk")),
        "{names:?}"
    );
    assert_eq!(names.len(), 2, "no partial files left: {names:?}");
    // The file is a valid parameter file.
    let params = names.iter().find(|n| n.ends_with(".params")).unwrap();
    let inspect = pinion(&[
        "srs",
        "inspect",
        dir.0.join(params).to_str().unwrap(),
        "--json",
    ]);
    assert!(inspect.status.success(), "{}", stderr(&inspect));
}

#[test]
fn bad_inputs_are_one_error_line() {
    let dir = temp("bad");
    let d = dir.0.to_str().unwrap();
    let c1 = dir.0.join("c1.json");
    std::fs::write(
        &c1,
        b"{\"SectorNum\": 1, \"Phase1Out\": \"not base64!\", \"SectorSize\": 2048}",
    )
    .unwrap();
    let out_file = dir.0.join("proof.bin");
    let common = ["--params-dir", d, "--out", out_file.to_str().unwrap()];
    let mut args = vec![
        "filecoin",
        "c2",
        "--c1",
        c1.to_str().unwrap(),
        "--miner-id",
        "1000",
    ];
    args.extend(common);
    fails_with(&pinion(&args), "base64");
    assert!(!out_file.exists(), "no proof written");

    let mut args = vec![
        "filecoin",
        "window-post",
        "--proof-type",
        "StackedDrgWindow2KiBV1_2",
        "--vanilla",
        c1.to_str().unwrap(),
        "--randomness",
        "1234",
        "--miner-id",
        "1000",
    ];
    args.extend(common);
    fails_with(&pinion(&args), "--randomness must be 64 hex digits");

    let zeros = "00".repeat(32);
    let mut args = vec![
        "filecoin",
        "winning-post",
        "--proof-type",
        "StackedDrgWindow2KiBV1_2",
        "--vanilla",
        c1.to_str().unwrap(),
        "--randomness",
        &zeros,
        "--miner-id",
        "1000",
    ];
    args.extend(common);
    fails_with(&pinion(&args), "PoSt inputs are refused");

    fails_with(
        &pinion(&[
            "filecoin",
            "params",
            "--insecure",
            "--kind",
            "porep",
            "--proof-type",
            "StackedDrg3KiBV1",
            "--params-dir",
            d,
        ]),
        "is not a seal proof type",
    );
}
