//! Proving from a snarkjs `.zkey`: `pinion prove --zkey` against `snarkjs groth16 prove`
//! on the same zkey, witness and machine, each as its user runs it (one process per proof,
//! wall time from start to exit: both read the zkey and the witness and write the proof).
//!
//! `cargo run --release -p pinion --example zkey_bench -- [k] [--snarkjs CLI] [--node NODE]
//!  [--reps N] [--snarkjs-reps N] [--cpu | --gpu] [--pinion PATH] [--dir DIR]`
//!
//! - The circuit: `pinion::fixtures::chain_circuit` with `2^k − 8` constraints (a domain of
//!   2^k; default k = 20), its `.r1cs` and `.wtns` written under the directory;
//! - the zkey: `pinion setup --out chain.zkey` (insecure, for testing: snarkjs's own
//!   ceremony tools need hours for a 2^20 BLS12-381 powers of tau on these machines);
//!   kept between runs;
//! - snarkjs: `CLI groth16 prove` (`--snarkjs` names snarkjs's `cli.cjs` or its `.bin`
//!   link; with `--node NODE` it is run as `NODE CLI ...`), `--snarkjs-reps` times
//!   (default 1: it is the slow one);
//! - Pinion: `pinion prove --zkey ... --json` on the GPU (when one is visible) and the
//!   CPU, `--reps` times each (medians reported, with the prover's own proof time);
//! - every proof is checked with `pinion verify --vk` (exported from the zkey), snarkjs's
//!   proofs and Pinion's alike; a proof that fails stops the bench.
//!
//! Target (issue 21): Pinion from a zkey at ~2^20 constraints on the H200 ≥ 50× faster
//! than `snarkjs groth16 prove` on the same machine. Without snarkjs the bench measures
//! Pinion alone and says so. `PINION_BENCH_QUICK=1`: k = 12, CPU only.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use pinion::circom::wtns_bytes;
use pinion_bench::{quick, BenchLine};
use serde_json::Value;

struct Opts {
    k: u32,
    reps: usize,
    snarkjs_reps: usize,
    cpu: bool,
    gpu: bool,
    pinion: PathBuf,
    snarkjs: Option<(Option<PathBuf>, PathBuf)>,
    dir: PathBuf,
}

fn fail(msg: &str) -> ! {
    eprintln!("zkey_bench: {msg}");
    std::process::exit(2)
}

fn parse_args() -> Opts {
    let mut k = if quick() { 12 } else { 20 };
    let mut reps = 3;
    let mut snarkjs_reps = 1;
    let (mut cpu_only, mut gpu_only) = (false, false);
    let mut pinion = std::env::var_os("PINION_BIN").map(PathBuf::from);
    let mut snarkjs = std::env::var_os("PINION_SNARKJS").map(PathBuf::from);
    let mut node = None;
    let mut dir = None;
    let mut args = std::env::args().skip(1);
    let value =
        |flag: &str, v: Option<String>| v.unwrap_or_else(|| fail(&format!("{flag} needs a value")));
    while let Some(a) = args.next() {
        match a.as_str() {
            "--cpu" => cpu_only = true,
            "--gpu" => gpu_only = true,
            "--pinion" => pinion = Some(value("--pinion", args.next()).into()),
            "--snarkjs" => snarkjs = Some(value("--snarkjs", args.next()).into()),
            "--node" => node = Some(PathBuf::from(value("--node", args.next()))),
            "--dir" => dir = Some(PathBuf::from(value("--dir", args.next()))),
            "--reps" | "--snarkjs-reps" => {
                let n = value(&a, args.next())
                    .parse()
                    .ok()
                    .filter(|&r| r >= 1)
                    .unwrap_or_else(|| fail(&format!("{a}: expected a count ≥ 1")));
                if a == "--reps" {
                    reps = n
                } else {
                    snarkjs_reps = n
                }
            }
            other => match other.parse() {
                Ok(v) if (4..=24).contains(&v) => k = v,
                _ => fail(&format!(
                    "bad argument {other:?}: expected k (4..=24), --reps N, --snarkjs-reps N, \
                     --cpu, --gpu, --snarkjs CLI, --node NODE, --pinion PATH or --dir DIR"
                )),
            },
        }
    }
    let pinion = pinion.unwrap_or_else(|| {
        pinion_bench::sibling_binary("pinion")
            .unwrap_or_else(|e| fail(&format!("{e}; or pass --pinion")))
    });
    let dir = dir.unwrap_or_else(|| {
        std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("target"))
            .join("pinion-bench")
            .join("zkey")
    });
    let gpu_present =
        gpu_device::driver_present() && gpu_device::device_count().is_ok_and(|n| n > 0);
    if gpu_only && !gpu_present {
        fail("--gpu: no GPU is visible (driver and device 0)");
    }
    if !gpu_present {
        eprintln!("zkey_bench: no GPU visible: the CPU backend only");
    }
    let snarkjs = snarkjs.filter(|p| {
        let ok = p.is_file();
        if !ok {
            eprintln!("zkey_bench: snarkjs {} not found", p.display());
        }
        ok
    });
    if snarkjs.is_none() {
        eprintln!("zkey_bench: skipped: snarkjs (no --snarkjs or $PINION_SNARKJS): Pinion alone");
    }
    Opts {
        k,
        reps,
        snarkjs_reps,
        cpu: !gpu_only,
        gpu: !cpu_only && !quick() && gpu_present,
        pinion,
        snarkjs: snarkjs.map(|s| (node, s)),
        dir,
    }
}

/// Runs a command to completion; fails with its output on a non-zero exit. Returns the
/// wall time in seconds and stdout.
fn timed(cmd: &mut Command, what: &str) -> (f64, Vec<u8>) {
    let t = Instant::now();
    let out = cmd
        .output()
        .unwrap_or_else(|e| fail(&format!("{what}: cannot run: {e}")));
    let secs = t.elapsed().as_secs_f64();
    if !out.status.success() {
        fail(&format!(
            "{what}: {}\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    (secs, out.stdout)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let o = parse_args();
    let dir = o.dir.join(format!("k{}", o.k));
    std::fs::create_dir_all(&dir)
        .unwrap_or_else(|e| fail(&format!("cannot create {}: {e}", dir.display())));
    let n = (1u32 << o.k) - 8;
    let (r1cs_path, wtns_path, zkey_path, vk_path) = (
        dir.join("chain.r1cs"),
        dir.join("chain.wtns"),
        dir.join("chain.zkey"),
        dir.join("vk.json"),
    );
    println!(
        "zkey_bench: k = {}, {} constraints, pinion = {}, files under {}",
        o.k,
        n + 1,
        o.pinion.display(),
        dir.display()
    );
    if !zkey_path.is_file() {
        let (r1cs, w) = pinion::fixtures::chain_circuit(n)
            .unwrap_or_else(|e| fail(&format!("chain circuit: {e}")));
        std::fs::write(&r1cs_path, r1cs.to_bytes())
            .unwrap_or_else(|e| fail(&format!("write {}: {e}", r1cs_path.display())));
        std::fs::write(&wtns_path, wtns_bytes(&w))
            .unwrap_or_else(|e| fail(&format!("write {}: {e}", wtns_path.display())));
        let tmp = dir.join("chain.zkey.part");
        let (secs, _) = timed(
            Command::new(&o.pinion)
                .arg("setup")
                .arg("--r1cs")
                .arg(&r1cs_path)
                .arg("--out")
                .arg(&tmp)
                .args(["--format", "zkey", "--seed", "1"]),
            "pinion setup",
        );
        std::fs::rename(&tmp, &zkey_path)
            .unwrap_or_else(|e| fail(&format!("rename {}: {e}", tmp.display())));
        println!("zkey (insecure, for testing) made by `pinion setup` in {secs:.1} s");
    }
    let zkey_bytes = std::fs::metadata(&zkey_path).map_or(0, |m| m.len());
    println!(
        "zkey {} ({:.1} MiB)",
        zkey_path.display(),
        zkey_bytes as f64 / (1 << 20) as f64
    );
    timed(
        Command::new(&o.pinion)
            .args(["zkey", "export-vk"])
            .arg(&zkey_path)
            .arg(&vk_path),
        "pinion zkey export-vk",
    );
    let verify = |proof: &Path, public: &Path, what: &str| {
        timed(
            Command::new(&o.pinion)
                .arg("verify")
                .arg("--vk")
                .arg(&vk_path)
                .arg("--proof")
                .arg(proof)
                .arg("--public")
                .arg(public),
            &format!("pinion verify ({what}'s proof)"),
        );
    };
    let size = format!("2^{} ({} constraints)", o.k, n + 1);

    // snarkjs first, as a user runs it.
    let mut snarkjs_secs = Vec::new();
    if let Some((node, cli)) = &o.snarkjs {
        for rep in 0..o.snarkjs_reps {
            let (proof, public) = (
                dir.join("snarkjs_proof.json"),
                dir.join("snarkjs_public.json"),
            );
            let mut cmd = match node {
                Some(node) => {
                    // snarkjs holds the zkey's sections in JavaScript memory: lift node's
                    // default heap limit so a 2^20 key fits.
                    let mut c = Command::new(node);
                    c.arg("--max-old-space-size=65536").arg(cli);
                    c
                }
                None => Command::new(cli),
            };
            cmd.args(["groth16", "prove"])
                .arg(&zkey_path)
                .arg(&wtns_path)
                .arg(&proof)
                .arg(&public);
            let (secs, _) = timed(&mut cmd, "snarkjs groth16 prove");
            verify(&proof, &public, "snarkjs");
            println!("snarkjs groth16 prove, rep {rep}: {secs:.2} s (proof verified)");
            snarkjs_secs.push(secs);
        }
    }
    let snarkjs_median = (!snarkjs_secs.is_empty()).then(|| median(&mut snarkjs_secs));

    let mut backends = Vec::new();
    if o.gpu {
        backends.push("gpu");
    }
    if o.cpu {
        backends.push("cpu");
    }
    for backend in backends {
        let (mut wall, mut prove) = (Vec::new(), Vec::new());
        for rep in 0..o.reps {
            let (proof, public) = (dir.join("proof.json"), dir.join("public.json"));
            let (secs, stdout) = timed(
                Command::new(&o.pinion)
                    .arg("prove")
                    .arg("--zkey")
                    .arg(&zkey_path)
                    .arg("--witness")
                    .arg(&wtns_path)
                    .arg("--out")
                    .arg(&proof)
                    .arg("--public-out")
                    .arg(&public)
                    .arg("--json")
                    .arg(format!("--{backend}")),
                "pinion prove --zkey",
            );
            let v: Value = serde_json::from_slice(&stdout)
                .unwrap_or_else(|e| fail(&format!("pinion prove: output is not json: {e}")));
            let p = v["prove_seconds"].as_f64().unwrap_or(f64::NAN);
            verify(&proof, &public, "pinion");
            println!(
                "pinion prove --zkey --{backend}, rep {rep}: {secs:.3} s wall, proof {p:.3} s (verified)"
            );
            wall.push(secs);
            prove.push(p);
        }
        let (wall, prove) = (median(&mut wall), median(&mut prove));
        let ratio = snarkjs_median.map(|s| s / wall);
        println!(
            "pinion --{backend}: median {wall:.3} s wall ({prove:.3} s proving){}",
            ratio.map_or(String::new(), |r| format!(
                "; snarkjs median {:.2} s: {r:.1}× faster",
                snarkjs_median.unwrap_or(0.0)
            ))
        );
        BenchLine {
            what: &format!("pinion prove --zkey --{backend}, process wall time"),
            size: size.clone(),
            ours: wall * 1e3,
            peer: snarkjs_median.map(|s| s * 1e3),
            unit: "ms",
            lower_is_better: true,
            target: (backend == "gpu").then_some(">= 50x faster than snarkjs at 2^20"),
            pass: (backend == "gpu" && o.k >= 20)
                .then_some(ratio.map(|r| r >= 50.0))
                .flatten(),
        }
        .emit();
    }
}
