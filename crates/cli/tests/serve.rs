//! The CI smoke test of `pinion serve`: the daemon as a process on a unix socket, circom
//! circuits proved through `pinion submit` from other processes, /metrics and /status
//! read over HTTP, eight jobs in a budget that fits two (all complete, none refused, the
//! budget never exceeded), and SIGTERM.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use bls12_381::Scalar;
use ff::Field;
use pinion::circom::{wtns_bytes, Constraint, R1cs, Term};

fn seed() -> u64 {
    groth16_prover::testing::test_seed()
}

/// A fresh folder, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!(
            "pinion-serve-{name}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
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

/// A squaring chain: x, x², x⁴, ..., and `out` = the last square (one public output, one
/// private input, `n` constraints).
fn chain(n: u32) -> R1cs {
    let one = Scalar::ONE;
    let t = |wire, coeff| Term { wire, coeff };
    // Wires: 0 ONE, 1 out, 2 x, 3.. the squares.
    let mut constraints = Vec::new();
    let mut prev = 2;
    for i in 0..n - 1 {
        let next = 3 + i;
        constraints.push(Constraint {
            a: vec![t(prev, one)],
            b: vec![t(prev, one)],
            c: vec![t(next, one)],
        });
        prev = next;
    }
    constraints.push(Constraint {
        a: vec![t(prev, one)],
        b: vec![t(0, one)],
        c: vec![t(1, one)],
    });
    R1cs::new(3 + n - 1, 1, 0, 1, constraints).unwrap()
}

fn chain_witness(n: u32, x: u64) -> Vec<Scalar> {
    let mut squares = Vec::new();
    let mut v = Scalar::from(x);
    for _ in 0..n - 1 {
        v = v.square();
        squares.push(v);
    }
    let mut w = vec![Scalar::ONE, v, Scalar::from(x)];
    w.extend(squares);
    w
}

fn pinion() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pinion"))
}

fn ok(out: Output, what: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what} failed ({}):\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// A running `pinion serve`, killed if the test fails before SIGTERM.
struct Daemon {
    child: Option<Child>,
    socket: PathBuf,
    status: String,
}

impl Daemon {
    fn start(dir: &TempDir, name: &str, budget: u64, config: &Path) -> Daemon {
        let socket = dir.path(&format!("{name}.sock"));
        let mut child = pinion()
            .args([
                "--memory-budget",
                &budget.to_string(),
                "serve",
                "--cpu",
                "--config",
            ])
            .arg(config)
            .arg("--listen")
            .arg(format!("unix://{}", socket.display()))
            .args(["--status-listen", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start pinion serve");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        // "pinion serve: grpc unix:///... status http://127.0.0.1:PORT"
        let status = line
            .split_whitespace()
            .last()
            .unwrap_or_default()
            .trim_start_matches("http://")
            .to_string();
        assert!(
            line.starts_with("pinion serve: grpc"),
            "ready line: {line:?}"
        );
        assert!(socket.exists());
        Daemon {
            child: Some(child),
            socket,
            status,
        }
    }

    fn addr(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    fn get(&self, path: &str) -> String {
        let mut s = std::net::TcpStream::connect(&self.status).unwrap();
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        assert!(out.starts_with("HTTP/1.1 200"), "{path}: {out}");
        out.split_once("\r\n\r\n").unwrap().1.to_string()
    }

    fn status(&self) -> serde_json::Value {
        serde_json::from_str(&self.get("/status")).unwrap()
    }

    /// SIGTERM; the daemon must exit 0 and remove its socket.
    fn terminate(mut self) {
        let mut child = self.child.take().unwrap();
        let pid = child.id().to_string();
        let killed = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(killed.success());
        let t = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            assert!(
                t.elapsed() < Duration::from_secs(120),
                "no exit after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(status.success(), "exit status after SIGTERM: {status}");
        assert!(!self.socket.exists(), "the socket is removed");
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn submit(d: &Daemon, dir: &TempDir, i: usize) -> Child {
    pinion()
        .args(["submit", "--addr", &d.addr(), "--json"])
        .arg("--params")
        .arg(dir.path("c.params"))
        .arg("--r1cs")
        .arg(dir.path("c.r1cs"))
        .arg("--witness")
        .arg(dir.path(&format!("w{i}.wtns")))
        .arg("--out")
        .arg(dir.path(&format!("p{i}.bin")))
        .arg("--public-out")
        .arg(dir.path(&format!("pub{i}.json")))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn verify(dir: &TempDir, i: usize) {
    ok(
        pinion()
            .args(["verify", "--params"])
            .arg(dir.path("c.params"))
            .arg("--proof")
            .arg(dir.path(&format!("p{i}.bin")))
            .arg("--public")
            .arg(dir.path(&format!("pub{i}.json")))
            .output()
            .unwrap(),
        "pinion verify",
    );
}

fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[test]
fn serve_proves_circom_through_submit_and_queues_in_a_small_budget() {
    let seed = seed();
    let dir = TempDir::new("smoke");
    let n = 1 << 13;
    std::fs::write(dir.path("c.r1cs"), chain(n).to_bytes()).unwrap();
    for i in 0..8 {
        let x = seed.wrapping_add(i as u64) | 2;
        std::fs::write(
            dir.path(&format!("w{i}.wtns")),
            wtns_bytes(&chain_witness(n, x)),
        )
        .unwrap();
    }
    ok(
        pinion()
            .args(["setup", "--seed"])
            .arg((seed % 1000).to_string())
            .arg("--r1cs")
            .arg(dir.path("c.r1cs"))
            .arg("--out")
            .arg(dir.path("c.params"))
            .output()
            .unwrap(),
        "pinion setup",
    );
    // The budget, not the core count, must bound how many proofs run.
    let config = dir.path("pinion.toml");
    std::fs::write(&config, "[pipeline]\nsynthesis_concurrency = 8\n").unwrap();

    // One proof in a large budget: what one job takes.
    let d = Daemon::start(&dir, "big", 4 << 30, &config);
    let out = submit(&d, &dir, 0).wait_with_output().unwrap();
    let report: serde_json::Value = serde_json::from_str(&ok(out, "pinion submit")).unwrap();
    assert_eq!(std::fs::metadata(dir.path("p0.bin")).unwrap().len(), 192);
    verify(&dir, 0);
    assert!(report["job_id"].as_str().unwrap().starts_with("job-"));
    let s = d.status();
    let budget = &s["budget"];
    // What stays (key, PCE, the backend's tables) and what one job adds (its witness and
    // working set).
    let resident = budget["charged_bytes"].as_u64().unwrap();
    let job_bytes = budget["by_category"]["working_set"]["peak_charged_bytes"]
        .as_u64()
        .unwrap();
    assert!(job_bytes > 0, "{budget}");
    assert_eq!(
        budget["by_category"]["working_set"]["charged_bytes"], 0,
        "a finished job keeps nothing charged"
    );
    assert_eq!(s["jobs"]["completed"], 1);
    assert_eq!(s["circuits"][0]["n_constraints"], u64::from(n));
    let metrics = d.get("/metrics");
    for series in [
        "pinion_engine_jobs_total",
        "pinion_budget_used_bytes",
        "pinion_daemon_requests_total",
        "pinion_engine_phase_seconds",
    ] {
        assert!(metrics.contains(series), "{series} missing from /metrics");
    }
    d.terminate();

    // Eight at once in a budget that fits two jobs.
    let small = resident + 2 * job_bytes + job_bytes / 2;
    let d = Daemon::start(&dir, "small", small, &config);
    let children: Vec<Child> = (0..8).map(|i| submit(&d, &dir, i)).collect();
    for (i, c) in children.into_iter().enumerate() {
        let out = c.wait_with_output().unwrap();
        ok(out, &format!("pinion submit {i}"));
        verify(&dir, i);
    }
    let s = d.status();
    let budget = &s["budget"];
    assert_eq!(s["jobs"]["completed"], 8, "{s}");
    assert_eq!(s["jobs"]["failed"], 0);
    assert!(
        budget["peak_charged_bytes"].as_u64().unwrap() <= small,
        "the budget was exceeded: {budget}"
    );
    let metrics = d.get("/metrics");
    assert!(
        metric(&metrics, "pinion_budget_waits_total") > 0.0,
        "no request waited for memory with eight jobs in a budget for two"
    );
    d.terminate();
}
