//! End-to-end tests of the `pinion` binary: the circom fixture pair through setup, prove
//! and verify; byte identity with `groth16::create_proof`; every malformed input is exit
//! status 1 with one error line and no panic; the demo; memprobe.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use bls12_381::{Bls12, Scalar};
use ff::Field;
use pinion::circom::{wtns_bytes, Constraint, R1cs};
use pinion::decimal::scalar_to_decimal;
use pinion::fixtures::{cubic_files, cubic_r1cs, cubic_witness};
use pinion::CircomCircuit;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

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

/// A fresh folder, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir =
            std::env::temp_dir().join(format!("pinion-cli-{name}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
    fn write(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/circom")
        .join(name)
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

/// Exit 0, no panic.
fn ok(out: &Output) -> String {
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(
        out.status.success(),
        "failed: {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    stdout
}

/// Exit status `code` (1; `verify` exits 2 on unusable input), exactly one
/// `pinion: error:` line (the last one), containing `needle`, and no panic.
fn fails_with_code(out: &Output, code: i32, needle: &str) {
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "stderr:\n{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("pinion: error:"))
        .collect();
    assert_eq!(errors.len(), 1, "want one error line:\n{stderr}");
    assert_eq!(stderr.lines().last(), Some(errors[0]), "{stderr}");
    assert!(
        errors[0].contains(needle),
        "error line {:?} lacks {needle:?}",
        errors[0]
    );
}

fn setup(dir: &TempDir, r1cs: &Path, name: &str, seed: u64) -> PathBuf {
    let out = dir.path(name);
    let stdout = ok(&pinion(&[
        "setup".as_ref(),
        "--r1cs".as_ref(),
        r1cs.as_os_str(),
        "--out".as_ref(),
        out.as_os_str(),
        "--seed".as_ref(),
        seed.to_string().as_ref(),
    ]));
    assert!(stdout.contains("for testing only: insecure"), "{stdout}");
    out
}

fn args(list: &[&dyn AsRef<std::ffi::OsStr>]) -> Vec<std::ffi::OsString> {
    list.iter().map(|a| a.as_ref().to_os_string()).collect()
}

#[test]
fn fixtures_are_fresh() {
    for (name, bytes) in cubic_files() {
        let committed = std::fs::read(fixture(name)).unwrap_or_default();
        assert!(
            committed == bytes,
            "fixtures/circom/{name} is stale: run `cargo run -p pinion --example circom_fixtures`"
        );
    }
}

#[test]
fn setup_prove_verify_round_trip() {
    let seed = seed();
    let dir = TempDir::new("roundtrip");
    let (r1cs, wtns) = (fixture("cubic.r1cs"), fixture("cubic.wtns"));
    let params = setup(&dir, &r1cs, "c.params", seed);
    // Same seed, same file.
    let again = setup(&dir, &r1cs, "c2.params", seed);
    assert_eq!(
        std::fs::read(&params).unwrap(),
        std::fs::read(&again).unwrap()
    );

    let (proof, public) = (dir.path("proof.bin"), dir.path("public.json"));
    ok(&pinion(&args(&[
        &"prove",
        &"--params",
        &params,
        &"--r1cs",
        &r1cs,
        &"--witness",
        &wtns,
        &"--out",
        &proof,
        &"--public-out",
        &public,
        &"--seed",
        &seed.to_string(),
    ])));
    assert_eq!(std::fs::read(&proof).unwrap().len(), 192);
    let values: Vec<String> = serde_json::from_slice(&std::fs::read(&public).unwrap()).unwrap();
    assert_eq!(values, ["35", "5"], "outputs then inputs");
    let stdout = ok(&pinion(&args(&[
        &"verify",
        &"--params",
        &params,
        &"--proof",
        &proof,
        &"--public",
        &public,
    ])));
    assert_eq!(stdout.trim(), "valid");

    // Another public value: a clean "invalid", exit 1, no error line.
    let wrong = dir.write("wrong.json", br#"["36", "5"]"#);
    let out = pinion(&args(&[
        &"verify",
        &"--params",
        &params,
        &"--proof",
        &proof,
        &"--public",
        &wrong,
    ]));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stdout).starts_with("invalid"),
        "{}",
        text(&out.stdout)
    );
    assert!(!text(&out.stderr).contains("panicked"));
    let out = pinion(&args(&[
        &"verify",
        &"--json",
        &"--params",
        &params,
        &"--proof",
        &proof,
        &"--public",
        &wrong,
    ]));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["valid"], false);
}

#[test]
fn fixed_rs_proof_equals_groth16_create_proof() {
    let mut rng = StdRng::seed_from_u64(seed());
    let dir = TempDir::new("identity");
    let r1cs_path = fixture("cubic.r1cs");
    let r1cs = cubic_r1cs();
    // Parameters written by groth16 itself, not by `pinion setup`: they work unchanged.
    let params = groth16::generate_random_parameters::<Bls12, _, _>(
        CircomCircuit::shape_only(&r1cs),
        &mut rng,
    )
    .unwrap();
    let mut params_bytes = Vec::new();
    params.write(&mut params_bytes).unwrap();
    let params_path = dir.write("c.params", &params_bytes);
    for _ in 0..2 {
        let w = cubic_witness(rng.random(), rng.random());
        let wtns = dir.write("w.wtns", &wtns_bytes(&w));
        let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
        let proof = dir.path("proof.bin");
        ok(&pinion(&args(&[
            &"prove",
            &"--params",
            &params_path,
            &"--r1cs",
            &r1cs_path,
            &"--witness",
            &wtns,
            &"--out",
            &proof,
            &"--r",
            &scalar_to_decimal(&r),
            &"--s",
            &scalar_to_decimal(&s),
            &"--cpu",
        ])));
        let circuit = CircomCircuit::with_witness(&r1cs, &w).unwrap();
        let want = groth16::create_proof(circuit, &params, r, s).unwrap();
        let mut want_bytes = Vec::new();
        want.write(&mut want_bytes).unwrap();
        assert_eq!(std::fs::read(&proof).unwrap(), want_bytes);
    }
}

#[test]
fn setup_writes_what_groth16_generates() {
    let seed = seed();
    let dir = TempDir::new("setup");
    let path = setup(&dir, &fixture("cubic.r1cs"), "c.params", seed);
    let want = groth16::generate_random_parameters::<Bls12, _, _>(
        CircomCircuit::shape_only(&cubic_r1cs()),
        &mut StdRng::seed_from_u64(seed),
    )
    .unwrap();
    let mut want_bytes = Vec::new();
    want.write(&mut want_bytes).unwrap();
    assert!(
        std::fs::read(&path).unwrap() == want_bytes,
        "setup differs from groth16"
    );
}

#[test]
fn seed_derives_r_then_s() {
    let seed = seed();
    let dir = TempDir::new("seed");
    let (r1cs, wtns) = (fixture("cubic.r1cs"), fixture("cubic.wtns"));
    let params = setup(&dir, &r1cs, "c.params", seed);
    let prove = |name: &str, extra: &[&dyn AsRef<std::ffi::OsStr>]| {
        let out = dir.path(name);
        let mut a = args(&[
            &"prove",
            &"--params",
            &params,
            &"--r1cs",
            &r1cs,
            &"--witness",
            &wtns,
            &"--out",
            &out,
        ]);
        a.extend(args(extra));
        ok(&pinion(&a));
        std::fs::read(out).unwrap()
    };
    let seed_text = seed.to_string();
    let first = prove("a.bin", &[&"--seed", &seed_text]);
    assert_eq!(first, prove("b.bin", &[&"--seed", &seed_text]));
    let mut g = StdRng::seed_from_u64(seed);
    let (r, s) = (Scalar::random(&mut g), Scalar::random(&mut g));
    let (r, s) = (scalar_to_decimal(&r), scalar_to_decimal(&s));
    assert_eq!(first, prove("c.bin", &[&"--r", &r, &"--s", &s]));
    // Without a seed, fresh randomness: another proof of the same statement.
    assert_ne!(first, prove("d.bin", &[]));
}

#[test]
fn demo_sizes_map_to_whole_blocks() {
    let dir = TempDir::new("demo-size");
    let extract = |n: u64| {
        let out = ok(&pinion(&args(&[
            &"pce",
            &"extract",
            &"--demo",
            &"--constraints",
            &n.to_string(),
            &"--out",
            &dir.path("d.pce"),
            &"--json",
        ])));
        serde_json::from_str::<serde_json::Value>(&out).unwrap()
    };
    // The default (2^16) is the largest circuit whose rows fit a domain of 2^16.
    let default = extract(1 << 16);
    let n_rows = default["n_rows"].as_u64().unwrap();
    assert!(n_rows <= 1 << 16, "{default}");
    let per_block = n_rows - extract(1)["n_rows"].as_u64().unwrap();
    assert!(
        n_rows + per_block > 1 << 16,
        "a block more would still fit: {default}"
    );
}

/// r itself: one past the largest field element.
const R_DECIMAL: &str =
    "52435875175126190479447740508185965837690552500527637822603658699938581184513";

/// The cubic circuit with `x³ + 2x + k = out`: same sizes, another circuit.
fn other_circuit() -> (R1cs, Vec<Scalar>) {
    let mut cs = cubic_r1cs().constraints().to_vec();
    cs[2].a[1].coeff = Scalar::from(2u64);
    let r = R1cs::new(6, 1, 1, 1, cs).unwrap();
    let mut w = cubic_witness(3, 5);
    w[1] += Scalar::from(3u64);
    r.check_witness(&w).unwrap();
    (r, w)
}

#[test]
fn malformed_inputs_fail_with_one_line() {
    let seed = seed();
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = TempDir::new("malformed");
    let (r1cs, wtns) = (fixture("cubic.r1cs"), fixture("cubic.wtns"));
    let r1cs_bytes = std::fs::read(&r1cs).unwrap();
    let wtns_file_bytes = std::fs::read(&wtns).unwrap();
    let params = setup(&dir, &r1cs, "c.params", seed);
    let params_bytes = std::fs::read(&params).unwrap();

    let (other, other_w) = other_circuit();
    let other_r1cs = dir.write("other.r1cs", &other.to_bytes());
    let other_params = setup(&dir, &other_r1cs, "other.params", seed ^ 1);
    // More public values: another verifying-key size.
    let mut wide = cubic_r1cs().constraints().to_vec();
    wide.push(Constraint::default());
    let wide = R1cs::new(6, 1, 2, 0, wide).unwrap();
    let wide_params = setup(
        &dir,
        &dir.write("wide.r1cs", &wide.to_bytes()),
        "wide.params",
        seed,
    );

    let mut bn254 = r1cs_bytes.clone();
    bn254[28..60].copy_from_slice(&[0x11; 32]);
    let mut bad_magic = r1cs_bytes.clone();
    bad_magic[..4].copy_from_slice(b"R1CS");
    let mut non_canonical = wtns_file_bytes.clone();
    let last = non_canonical.len() - 32;
    non_canonical[last..].copy_from_slice(&[0xff; 32]);

    let good_proof = dir.path("good.proof");
    ok(&pinion(&args(&[
        &"prove",
        &"--params",
        &params,
        &"--r1cs",
        &r1cs,
        &"--witness",
        &wtns,
        &"--out",
        &good_proof,
    ])));
    let prove = |p: &Path, c: &Path, w: &Path| {
        pinion(&args(&[
            &"prove",
            &"--params",
            &p,
            &"--r1cs",
            &c,
            &"--witness",
            &w,
            &"--out",
            &dir.path("proof.bin"),
        ]))
    };
    let r1cs_cut = rng.random_range(1..r1cs_bytes.len());
    let wtns_cut = rng.random_range(1..wtns_file_bytes.len());
    let params_cut = rng.random_range(1..params_bytes.len());
    eprintln!("cuts: r1cs {r1cs_cut}, wtns {wtns_cut}, params {params_cut}");
    let cases: Vec<(&str, Output, &str)> = vec![
        (
            "truncated r1cs",
            prove(
                &params,
                &dir.write("t.r1cs", &r1cs_bytes[..r1cs_cut]),
                &wtns,
            ),
            "circuit",
        ),
        (
            "truncated wtns",
            prove(
                &params,
                &r1cs,
                &dir.write("t.wtns", &wtns_file_bytes[..wtns_cut]),
            ),
            "witness",
        ),
        (
            "truncated params",
            prove(
                &dir.write("t.params", &params_bytes[..params_cut]),
                &r1cs,
                &wtns,
            ),
            "parameters",
        ),
        (
            "wrong magic",
            prove(&params, &dir.write("m.r1cs", &bad_magic), &wtns),
            "magic",
        ),
        (
            "wrong prime",
            prove(&params, &dir.write("p.r1cs", &bn254), &wtns),
            "expected the bls12-381 scalar field",
        ),
        (
            "non-canonical witness value",
            prove(&params, &r1cs, &dir.write("n.wtns", &non_canonical)),
            "not a canonical field element",
        ),
        (
            "witness too short",
            prove(
                &params,
                &r1cs,
                &dir.write("s.wtns", &wtns_bytes(&cubic_witness(3, 5)[..5])),
            ),
            "witness has 5 values, the r1cs has 6 wires",
        ),
        (
            "unsatisfied witness",
            prove(&params, &r1cs, &fixture("cubic-bad.wtns")),
            "does not satisfy r1cs constraint 2",
        ),
        (
            "params for another circuit of the same size",
            prove(&other_params, &r1cs, &wtns),
            "do not fit this circuit",
        ),
        (
            "params for a circuit with more public values",
            prove(&wide_params, &r1cs, &wtns),
            "ic points, the circuit needs 3",
        ),
        (
            "other circuit's witness",
            prove(&params, &r1cs, &dir.write("o.wtns", &wtns_bytes(&other_w))),
            "does not satisfy",
        ),
        (
            "witness over another prime",
            prove(
                &params,
                &r1cs,
                &dir.write("bn.wtns", &{
                    let mut b = wtns_file_bytes.clone();
                    b[28..60].copy_from_slice(&[0x11; 32]);
                    b
                }),
            ),
            "expected the bls12-381 scalar field",
        ),
        (
            "budget too small for the circuit",
            pinion(&args(&[
                &"--memory-budget",
                &"256",
                &"prove",
                &"--params",
                &params,
                &"--r1cs",
                &r1cs,
                &"--witness",
                &wtns,
                &"--out",
                &dir.path("p.bin"),
            ])),
            "the memory budget refuses",
        ),
        (
            "missing file",
            prove(&params, &dir.path("absent.r1cs"), &wtns),
            "cannot read circuit",
        ),
        (
            "r not a field element",
            pinion(&args(&[
                &"prove",
                &"--params",
                &params,
                &"--r1cs",
                &r1cs,
                &"--witness",
                &wtns,
                &"--out",
                &dir.path("p.bin"),
                &"--r",
                &R_DECIMAL,
                &"--s",
                &"2",
            ])),
            "bad --r",
        ),
        (
            "truncated proof",
            pinion(&args(&[
                &"verify",
                &"--params",
                &params,
                &"--proof",
                &dir.write("t.proof", &[1u8; 100]),
                &"--public",
                &dir.write("pub.json", br#"["35","5"]"#),
            ])),
            "is 100 bytes",
        ),
        (
            "garbage proof",
            pinion(&args(&[
                &"verify",
                &"--params",
                &params,
                &"--proof",
                &dir.write("g.proof", &[0x42u8; 192]),
                &"--public",
                &dir.path("pub.json"),
            ])),
            "proof element A at byte offset 0: not a compressed point",
        ),
        (
            "public values not json",
            pinion(&args(&[
                &"verify",
                &"--params",
                &params,
                &"--proof",
                &good_proof,
                &"--public",
                &dir.write("bad.json", b"[35,"),
            ])),
            "not json",
        ),
        (
            "wrong number of public values",
            pinion(&args(&[
                &"verify",
                &"--params",
                &params,
                &"--proof",
                &good_proof,
                &"--public",
                &dir.write("one.json", br#"["35"]"#),
            ])),
            "expects 2",
        ),
        (
            "setup on a truncated r1cs",
            pinion(&args(&[
                &"setup",
                &"--r1cs",
                &dir.path("t.r1cs"),
                &"--out",
                &dir.path("x.params"),
            ])),
            "circuit",
        ),
        (
            "srs inspect on a truncated file",
            pinion(&args(&[&"srs", &"inspect", &dir.path("t.params")])),
            "invalid",
        ),
        (
            "pce inspect on a non-pce file",
            pinion(&args(&[&"pce", &"inspect", &params])),
            "pce file",
        ),
        (
            "gpu backend",
            pinion(&args(&[
                &"prove",
                &"--params",
                &params,
                &"--r1cs",
                &r1cs,
                &"--witness",
                &wtns,
                &"--out",
                &dir.path("p.bin"),
                &"--gpu",
            ])),
            "gpu backend unavailable",
        ),
    ];
    for (what, out, needle) in &cases {
        eprintln!(
            "case: {what}: {}",
            text(&out.stderr).lines().last().unwrap_or("")
        );
        // verify's unusable input exits 2 (1 is an invalid proof).
        let verify_input = [
            "truncated proof",
            "garbage proof",
            "public values not json",
            "wrong number of public values",
        ];
        let code = if verify_input.contains(what) { 2 } else { 1 };
        fails_with_code(out, code, needle);
    }
    assert!(!dir.path("x.params").exists(), "a failed setup left a file");
}

/// Each of the verifying key's six fixed points set to the identity: `verify` refuses the
/// key with the message `srs inspect` gives (beta_g1 and delta_g1, which verification
/// never reads, and delta_g2, which made every proof fail, included).
#[test]
fn identity_points_in_the_verifying_key_are_refused() {
    let seed = seed();
    let dir = TempDir::new("vk-identity");
    let (r1cs, wtns) = (fixture("cubic.r1cs"), fixture("cubic.wtns"));
    let params = setup(&dir, &r1cs, "c.params", seed);
    let (proof, public) = (dir.path("proof.bin"), dir.path("public.json"));
    ok(&pinion(&args(&[
        &"prove",
        &"--params",
        &params,
        &"--r1cs",
        &r1cs,
        &"--witness",
        &wtns,
        &"--out",
        &proof,
        &"--public-out",
        &public,
    ])));
    let bytes = std::fs::read(&params).unwrap();
    // (name, byte offset, encoded bytes) in file order: 3 G1 and 3 G2 uncompressed points.
    let points = [
        ("alpha_g1", 0, 96),
        ("beta_g1", 96, 96),
        ("beta_g2", 192, 192),
        ("gamma_g2", 384, 192),
        ("delta_g1", 576, 96),
        ("delta_g2", 672, 192),
    ];
    for (name, at, len) in points {
        let mut b = bytes.clone();
        b[at..at + len].fill(0);
        b[at] = 0x40; // the uncompressed encoding of the point at infinity
        let bad = dir.write(&format!("{name}.params"), &b);
        let message = format!("{name}[0] at byte offset {at}: point at infinity");
        let inspect = pinion(&args(&[&"srs", &"inspect", &bad]));
        fails_with_code(&inspect, 1, &message);
        assert!(text(&inspect.stdout).contains(&message));
        let verify = pinion(&args(&[
            &"verify",
            &"--params",
            &bad,
            &"--proof",
            &proof,
            &"--public",
            &public,
        ]));
        // verify: unusable input exits 2.
        fails_with_code(&verify, 2, &message);
    }
}

#[test]
fn srs_and_pce_tools() {
    let dir = TempDir::new("tools");
    let r1cs = fixture("cubic.r1cs");
    let params = setup(&dir, &r1cs, "c.params", seed());
    let out = ok(&pinion(&args(&[
        &"srs", &"inspect", &params, &"--check", &"full", &"--json",
    ])));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["valid"], true);
    assert_eq!(
        v["sections"][0]["n_points"], 3,
        "ic: one per public value plus one"
    );

    let pce = dir.path("c.pce");
    ok(&pinion(&args(&[
        &"pce", &"extract", &"--r1cs", &r1cs, &"--out", &pce,
    ])));
    let v: serde_json::Value =
        serde_json::from_str(&ok(&pinion(&args(&[&"pce", &"inspect", &pce, &"--json"])))).unwrap();
    assert_eq!(v["n_inputs"], 3);
    assert_eq!(v["n_aux"], 3);
    assert_eq!(v["n_constraints"], 3);
    assert_eq!(v["n_rows"], 6);
    assert_eq!(v["checksums"], "ok");
    for sub in ["setup", "prove", "verify", "demo", "memprobe"] {
        assert!(
            ok(&pinion(&[sub, "--help"])).contains("Example"),
            "{sub} --help"
        );
    }
}

#[test]
fn demo_runs_and_verifies_then_reuses_its_cache() {
    let dir = TempDir::new("demo");
    let cache = dir.path("cache");
    let run = || {
        let out = ok(&pinion(&args(&[
            &"demo",
            &"--constraints",
            &"20000",
            &"--cache-dir",
            &cache,
            &"--json",
        ])));
        serde_json::from_str::<serde_json::Value>(&out).unwrap()
    };
    let first = run();
    assert_eq!(first["valid"], true);
    assert_eq!(first["n_blocks"], 1);
    assert_eq!(first["params_generated"], true);
    assert_eq!(first["pce_source"], "recorded now");
    let memory = &first["memory"];
    let charged = memory["peak_charged_bytes"].as_u64().unwrap();
    assert!(charged > 0);
    assert!(memory["peak_measured_bytes"].as_u64().unwrap() > 0);
    for category in [
        "srs",
        "pce",
        "working_set",
        "pinned_pool",
        "transient",
        "other",
    ] {
        let c = memory["charged_by_category"][category].as_u64().unwrap();
        assert!(c <= charged, "{category}: {c} > peak {charged}");
    }
    assert!(memory["charged_by_category"]["srs"].as_u64().unwrap() > 0);
    let second = run();
    assert_eq!(second["valid"], true);
    assert_eq!(second["params_generated"], false);
    assert_eq!(second["pce_source"], "loaded from the cache");

    // A budget too small to load the cached parameters is a refusal naming the sizes,
    // not a corrupt cache: the file is left exactly as it was.
    let params = PathBuf::from(second["params"].as_str().unwrap());
    let before = std::fs::read(&params).unwrap();
    let refused = pinion(&args(&[
        &"demo",
        &"--constraints",
        &"20000",
        &"--cache-dir",
        &cache,
        &"--memory-budget",
        &"20MiB",
    ]));
    fails_with_code(&refused, 1, "not enough memory budget to load parameters");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!stderr.contains("generating"), "{stderr}");
    assert_eq!(std::fs::read(&params).unwrap(), before, "cache untouched");

    // A corrupt cached parameter file is regenerated, not trusted.
    let bytes = before;
    std::fs::write(&params, &bytes[..bytes.len() / 2]).unwrap();
    let third = run();
    assert_eq!(third["valid"], true);
    assert_eq!(third["params_generated"], true);
}

#[test]
fn memprobe_reports_and_probes() {
    let v: serde_json::Value = serde_json::from_str(&ok(&pinion(&["memprobe", "--json"]))).unwrap();
    assert!(v["budget_bytes"].as_u64().unwrap() > 0);
    assert!(v["limit_bytes"].as_u64().unwrap() >= v["budget_bytes"].as_u64().unwrap());
    // The process's rlimits are listed among the sources, limited or not.
    let kinds: Vec<&str> = v["sources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["kind"].as_str())
        .collect();
    assert!(
        kinds.contains(&"rlimit.as") && kinds.contains(&"rlimit.data"),
        "{kinds:?}"
    );

    let v: serde_json::Value = serde_json::from_str(&ok(&pinion(&[
        "memprobe",
        "--json",
        "--probe",
        "--memory-budget",
        "96MiB",
        "--step",
        "32MiB",
    ])))
    .unwrap();
    assert_eq!(v["probe"]["pageable"]["reached_bytes"], 96 << 20);
    assert_eq!(v["probe"]["pageable"]["stopped"], "reached the budget");
    assert!(v["probe"]["pinned"]["stopped"].as_str().is_some());
}

#[test]
fn memprobe_survives_the_child_being_killed() {
    // The child kills itself with SIGKILL (what the OOM killer sends) after its first step.
    let out = Command::new(env!("CARGO_BIN_EXE_pinion"))
        .args([
            "memprobe",
            "--probe",
            "--memory-budget",
            "64MiB",
            "--step",
            "16MiB",
        ])
        .env("PINION_TEST_PROBE_KILL_AFTER_BYTES", "16777216")
        .output()
        .unwrap();
    let stdout = ok(&out);
    assert!(stdout.contains("SIGKILL"), "{stdout}");
    assert!(stdout.contains("pageable  reached 16"), "{stdout}");
}
