//! The snarkjs flow end to end (fixtures/snarkjs): `pinion prove --zkey`, `zkey
//! export-vk`, `verify --vk`, and interop both ways with snarkjs itself (`snarkjs groth16
//! verify` on Pinion's proof, `pinion verify` on snarkjs's). snarkjs comes from
//! `.ci/npm` (`npm ci --prefix .ci/npm`, what `.ci/run` does) or `PINION_SNARKJS`; without
//! it the snarkjs half is skipped loudly, and fails under `PINION_REQUIRE_SNARKJS=1`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixture(name: &str) -> PathBuf {
    root().join("fixtures/snarkjs").join(name)
}

fn pinion<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pinion"))
        .args(args)
        .output()
        .expect("run pinion")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn code(out: &Output) -> i32 {
    let stderr = text(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    out.status.code().unwrap_or(-1)
}

/// A temp directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let p = std::env::temp_dir().join(format!(
            "pinion-snarkjs-{tag}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The snarkjs command line, if installed.
fn snarkjs() -> Option<PathBuf> {
    let candidate = std::env::var_os("PINION_SNARKJS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join(".ci/npm/node_modules/.bin/snarkjs"));
    let node_ok = Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if node_ok && candidate.exists() {
        return Some(candidate);
    }
    let why = format!(
        "snarkjs not found ({}{}); run `npm ci --prefix .ci/npm`",
        candidate.display(),
        if node_ok { "" } else { ", and no node" }
    );
    assert!(
        std::env::var("PINION_REQUIRE_SNARKJS").as_deref() != Ok("1"),
        "PINION_REQUIRE_SNARKJS=1 but {why}"
    );
    eprintln!("skipped: {why}");
    None
}

fn snarkjs_verify(snarkjs: &Path, vk: &Path, public: &Path, proof: &Path) -> bool {
    let out = Command::new(snarkjs)
        .args(["groth16", "verify"])
        .args([vk, public, proof])
        .output()
        .expect("run snarkjs");
    let all = text(&out.stdout) + &text(&out.stderr);
    out.status.success() && all.contains("OK")
}

/// Seeds for pinion's (r, s), printed.
fn seed() -> u64 {
    let seed = std::env::var("PINION_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    eprintln!("seed = {seed}");
    seed
}

#[test]
fn pinion_and_snarkjs_accept_each_others_proofs() {
    let dir = TempDir::new("interop");
    let (proof, public, vk) = (
        dir.path("proof.json"),
        dir.path("public.json"),
        dir.path("vk.json"),
    );
    let seed = seed().to_string();
    let out = pinion(&[
        "prove".as_ref(),
        "--zkey".as_ref(),
        fixture("example.zkey").as_os_str(),
        "--witness".as_ref(),
        fixture("example.wtns").as_os_str(),
        "--out".as_ref(),
        proof.as_os_str(),
        "--public-out".as_ref(),
        public.as_os_str(),
        "--seed".as_ref(),
        seed.as_ref(),
        "--cpu".as_ref(),
        "--json".as_ref(),
    ]);
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    // The memory report of every proving command: the key and the working set charged.
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json output");
    let memory = &report["memory"];
    assert!(
        memory["peak_charged_bytes"].as_u64().unwrap() > 0,
        "{report}"
    );
    assert!(
        memory["charged_by_category"]["srs"].as_u64().unwrap() > 0,
        "{report}"
    );
    assert!(
        memory["charged_by_category"]["working_set"]
            .as_u64()
            .unwrap()
            > 0,
        "{report}"
    );
    // The public values are the witness's, as snarkjs writes them.
    let json = |p: &Path| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
    };
    assert_eq!(json(&public), json(&fixture("snarkjs_public.json")));
    let out = pinion(&[
        "zkey".as_ref(),
        "export-vk".as_ref(),
        fixture("example.zkey").as_os_str(),
        vk.as_os_str(),
    ]);
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    // snarkjs's own export, field for field.
    let mine: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&vk).unwrap()).unwrap();
    let theirs: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("verification_key.json")).unwrap())
            .unwrap();
    assert_eq!(mine, theirs);

    let verify = |vk: &Path, proof: &Path, public: &Path| {
        code(&pinion(&[
            "verify".as_ref(),
            "--vk".as_ref(),
            vk.as_os_str(),
            "--proof".as_ref(),
            proof.as_os_str(),
            "--public".as_ref(),
            public.as_os_str(),
        ]))
    };
    assert_eq!(
        verify(&vk, &proof, &public),
        0,
        "pinion's proof, seed {seed}"
    );
    let (their_proof, their_public) = (
        fixture("snarkjs_proof.json"),
        fixture("snarkjs_public.json"),
    );
    assert_eq!(
        verify(&vk, &their_proof, &their_public),
        0,
        "snarkjs's proof"
    );
    // Another public value: invalid, exit 1.
    let wrong = dir.path("wrong.json");
    std::fs::write(&wrong, "[\"133\", \"11\"]").unwrap();
    assert_eq!(verify(&vk, &proof, &wrong), 1);

    if let Some(snarkjs) = snarkjs() {
        assert!(
            snarkjs_verify(&snarkjs, &vk, &public, &proof),
            "snarkjs rejects pinion's proof (seed {seed})"
        );
        assert!(snarkjs_verify(
            &snarkjs,
            &fixture("verification_key.json"),
            &public,
            &proof
        ));
        assert!(
            !snarkjs_verify(&snarkjs, &vk, &wrong, &proof),
            "snarkjs accepts a wrong public value"
        );
    }
}

/// `pinion setup --out x.zkey` writes a zkey that snarkjs proves with and exports the same
/// key from, and that `pinion prove --zkey` proves with: each one's proof is accepted by
/// both verifiers.
#[test]
fn a_zkey_from_pinion_setup_serves_snarkjs_and_pinion() {
    let dir = TempDir::new("setup-zkey");
    let seed = seed().to_string();
    let (zkey, vk) = (dir.path("gen.zkey"), dir.path("vk.json"));
    let out = pinion(&[
        "setup".as_ref(),
        "--r1cs".as_ref(),
        fixture("example.r1cs").as_os_str(),
        "--out".as_ref(),
        zkey.as_os_str(),
        "--seed".as_ref(),
        seed.as_ref(),
    ]);
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("insecure"),
        "{}",
        text(&out.stdout)
    );
    let out = pinion(&[
        "zkey".as_ref(),
        "export-vk".as_ref(),
        zkey.as_os_str(),
        vk.as_os_str(),
    ]);
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let (proof, public) = (dir.path("proof.json"), dir.path("public.json"));
    let out = pinion(&[
        "prove".as_ref(),
        "--zkey".as_ref(),
        zkey.as_os_str(),
        "--witness".as_ref(),
        fixture("example.wtns").as_os_str(),
        "--out".as_ref(),
        proof.as_os_str(),
        "--public-out".as_ref(),
        public.as_os_str(),
        "--seed".as_ref(),
        seed.as_ref(),
        "--cpu".as_ref(),
    ]);
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let verify = |proof: &Path, public: &Path| {
        code(&pinion(&[
            "verify".as_ref(),
            "--vk".as_ref(),
            vk.as_os_str(),
            "--proof".as_ref(),
            proof.as_os_str(),
            "--public".as_ref(),
            public.as_os_str(),
        ]))
    };
    assert_eq!(verify(&proof, &public), 0, "seed {seed}");
    // The fixture's own key does not accept a proof made with the generated one.
    let fixture_vk = code(&pinion(&[
        "verify".as_ref(),
        "--vk".as_ref(),
        fixture("verification_key.json").as_os_str(),
        "--proof".as_ref(),
        proof.as_os_str(),
        "--public".as_ref(),
        public.as_os_str(),
    ]));
    assert_eq!(fixture_vk, 1, "seed {seed}");

    let Some(snarkjs) = snarkjs() else { return };
    let theirs_vk = dir.path("vk_snarkjs.json");
    let out = Command::new(&snarkjs)
        .args(["zkey", "export", "verificationkey"])
        .args([&zkey, &theirs_vk])
        .output()
        .expect("run snarkjs");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json = |p: &Path| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
    };
    assert_eq!(json(&vk), json(&theirs_vk), "seed {seed}");
    let (their_proof, their_public) = (dir.path("sproof.json"), dir.path("spublic.json"));
    let out = Command::new(&snarkjs)
        .args(["groth16", "prove"])
        .args([&zkey, &fixture("example.wtns"), &their_proof, &their_public])
        .output()
        .expect("run snarkjs");
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert_eq!(json(&their_public), json(&public));
    assert!(
        snarkjs_verify(&snarkjs, &vk, &their_public, &their_proof),
        "snarkjs rejects its own proof with a pinion zkey (seed {seed})"
    );
    assert_eq!(verify(&their_proof, &their_public), 0, "seed {seed}");
    assert!(
        snarkjs_verify(&snarkjs, &vk, &public, &proof),
        "snarkjs rejects pinion's proof (seed {seed})"
    );
}

#[test]
fn verify_exit_codes_and_json_errors() {
    let dir = TempDir::new("exit");
    let vk = fixture("verification_key.json");
    let proof = fixture("snarkjs_proof.json");
    let run = |public: &str, json: bool| {
        let p = dir.path("public.json");
        std::fs::write(&p, public).unwrap();
        let mut args: Vec<std::ffi::OsString> = vec![
            "verify".into(),
            "--vk".into(),
            vk.clone().into(),
            "--proof".into(),
            proof.clone().into(),
            "--public".into(),
            p.into(),
        ];
        if json {
            args.push("--json".into());
        }
        pinion(&args)
    };
    let out = run("[\"132\", \"11\"]", false);
    assert_eq!(code(&out), 0);
    // Not canonical decimal strings: unreadable input, exit 2, the element named.
    for (public, index) in [
        ("[\"132\", 11]", 1),
        ("[\"0132\", \"11\"]", 0),
        ("[\"132\", \"-11\"]", 1),
        ("[\"132\", \" 11\"]", 1),
    ] {
        let out = run(public, false);
        assert_eq!(code(&out), 2, "{public}");
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains(&format!("public value {index}")),
            "{public}: {stderr}"
        );
        let out = run(public, true);
        assert_eq!(code(&out), 2, "{public}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json error");
        assert!(v["error"].as_str().unwrap().contains("public value"), "{v}");
        assert!(v["valid"].is_null());
    }
    // Too few values for the key: mismatched input, exit 2.
    assert_eq!(code(&run("[\"132\"]", false)), 2);
    // Invalid proof under --json: exit 1, valid false.
    let out = run("[\"131\", \"11\"]", true);
    assert_eq!(code(&out), 1);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["valid"], false);
}

#[test]
fn other_formats_are_named() {
    let dir = TempDir::new("formats");
    let circom = root().join("fixtures/circom");
    // A zkey where parameters are expected.
    let out = pinion(&[
        "prove".as_ref(),
        "--params".as_ref(),
        fixture("example.zkey").as_os_str(),
        "--r1cs".as_ref(),
        fixture("example.r1cs").as_os_str(),
        "--witness".as_ref(),
        fixture("example.wtns").as_os_str(),
        "--out".as_ref(),
        dir.path("p.bin").as_os_str(),
    ]);
    assert_eq!(code(&out), 1);
    assert!(
        text(&out.stderr).contains("is a snarkjs proving key (.zkey): give it with --zkey"),
        "{}",
        text(&out.stderr)
    );
    // An r1cs, a witness and JSON as the parameters of verify.
    for (file, want) in [
        (circom.join("cubic.r1cs"), "circom constraint system"),
        (circom.join("cubic.wtns"), "circom witness"),
        (fixture("verification_key.json"), "json"),
    ] {
        let out = pinion(&[
            "verify".as_ref(),
            "--params".as_ref(),
            file.as_os_str(),
            "--proof".as_ref(),
            fixture("snarkjs_proof.json").as_os_str(),
            "--public".as_ref(),
            fixture("snarkjs_public.json").as_os_str(),
        ]);
        assert_eq!(code(&out), 2);
        assert!(
            text(&out.stderr).contains(want),
            "{}: {}",
            file.display(),
            text(&out.stderr)
        );
    }
    // A zkey over bn128: the curve is named.
    let out = pinion(&[
        "prove".as_ref(),
        "--zkey".as_ref(),
        fixture("example_bn128.zkey").as_os_str(),
        "--witness".as_ref(),
        fixture("example.wtns").as_os_str(),
        "--out".as_ref(),
        dir.path("p.json").as_os_str(),
    ]);
    assert_eq!(code(&out), 1);
    assert!(text(&out.stderr).contains("bn128"), "{}", text(&out.stderr));
    // A witness that does not satisfy the circuit: named, no proof written.
    let bad = dir.path("bad.wtns");
    let mut w = std::fs::read(fixture("example.wtns")).unwrap();
    let last = w.len() - 32;
    w[last] ^= 1;
    std::fs::write(&bad, &w).unwrap();
    let out = pinion(&[
        "prove".as_ref(),
        "--zkey".as_ref(),
        fixture("example.zkey").as_os_str(),
        "--witness".as_ref(),
        bad.as_os_str(),
        "--out".as_ref(),
        dir.path("p.json").as_os_str(),
    ]);
    assert_eq!(code(&out), 1);
    assert!(
        text(&out.stderr).contains("does not satisfy"),
        "{}",
        text(&out.stderr)
    );
    assert!(!dir.path("p.json").exists());
}
