//! The `memprobe` binary on copied trees.

mod common;

use std::process::Command;

use common::{pages, seeded_rng, Tree};
use memory_budget::default_safety_margin;

const GIB: u64 = 1 << 30;

fn memprobe(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_memprobe"))
        .args(args)
        .output()
        .expect("memprobe runs")
}

#[test]
fn json_names_sources_winner_margin_budget_and_usage() {
    let mut rng = seeded_rng("json_names_sources_winner_margin_budget_and_usage");
    let parent = pages(&mut rng, GIB, 8 * GIB);
    let t = Tree::new("memprobe");
    t.cgroup_v2("/a/b")
        .write("/sys/fs/cgroup/a/b/memory.max", "max\n")
        .write("/sys/fs/cgroup/a/memory.max", &format!("{parent}\n"))
        .write("/sys/fs/cgroup/a/memory.current", "4096\n")
        .write("/sys/fs/cgroup/a/memory.stat", "anon 4096\nfile 0\n")
        .meminfo(64 * GIB, 60 * GIB, 50 * GIB);
    let root = t.root.to_str().expect("utf-8 temp path");
    let out = memprobe(&["--root", root, "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    let margin = default_safety_margin(parent);
    assert_eq!(v["limit_bytes"], parent);
    assert_eq!(v["limit_source"], "cgroup2.memory.max");
    assert_eq!(v["limit_path"], "/sys/fs/cgroup/a/memory.max");
    assert_eq!(v["safety_margin_bytes"], margin);
    assert_eq!(v["budget_bytes"], parent - margin);
    let sources = v["sources"].as_array().expect("sources array");
    assert!(sources.len() >= 4);
    for s in sources {
        assert!(s["kind"].is_string() && s["path"].is_string(), "{s}");
        assert!(s.get("limit_bytes").is_some(), "{s}");
    }
    assert_eq!(v["usage"]["hard_bytes"], 4096);
    assert_eq!(v["usage"]["charged_bytes"], 0);
    assert_eq!(v["usage"]["scope"], "cgroup2:/sys/fs/cgroup/a");

    // The human-readable form names the same winner.
    let out = memprobe(&["--root", root]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(
        text.contains("limit:") && text.contains("/sys/fs/cgroup/a/memory.max"),
        "{text}"
    );
}

#[test]
fn nothing_readable_exits_2() {
    let t = Tree::new("memprobe-empty");
    let out = memprobe(&["--root", t.root.to_str().expect("utf-8"), "--json"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nothing readable"), "{err}");
    let out = memprobe(&["--root", "/nonexistent/pinion/root"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn bad_arguments_and_sizes_are_errors() {
    let t = Tree::new("memprobe-args");
    t.meminfo(16 * GIB, 12 * GIB, 8 * GIB);
    let root = t.root.to_str().expect("utf-8");
    let out = memprobe(&["--frobnicate"]);
    assert_eq!(out.status.code(), Some(1));
    let out = memprobe(&["--root", root, "--budget", "12 parsecs"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("12 parsecs"));
    let out = memprobe(&["--root", root, "--margin", "100%"]);
    assert_eq!(out.status.code(), Some(1));
    let out = memprobe(&["--root", root, "--budget=50%", "--json"]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    assert_eq!(v["budget_bytes"], 6 * GIB);
}

/// Under a real `setrlimit` in a child process (bash's `ulimit -S`, as `prlimit` would):
/// memprobe lists `rlimit.as` and `rlimit.data` with the limits set, and the smallest finite
/// source wins (issue 22: under `prlimit --as=4000000000` it reported MemAvailable).
#[test]
fn a_real_rlimit_in_a_child_process_is_a_limit_source() {
    let bash_ok = Command::new("bash")
        .args(["-c", "true"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        bash_ok,
        "this test needs bash (ulimit -S sets the soft rlimit)"
    );
    let run = |script: &str| -> serde_json::Value {
        let out = Command::new("bash")
            .args(["-c", script, env!("CARGO_BIN_EXE_memprobe")])
            .output()
            .expect("bash runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("valid JSON")
    };
    let find = |v: &serde_json::Value, kind: &str| -> serde_json::Value {
        v["sources"]
            .as_array()
            .expect("sources")
            .iter()
            .find(|s| s["kind"] == kind)
            .cloned()
            .unwrap_or_else(|| panic!("no {kind} source in {v}"))
    };
    // The smallest finite source's kind and limit are the winner's.
    let check_winner = |v: &serde_json::Value| {
        let (kind, limit) = v["sources"]
            .as_array()
            .expect("sources")
            .iter()
            .filter_map(|s| Some((s["kind"].as_str()?.to_string(), s["limit_bytes"].as_u64()?)))
            .min_by_key(|(_, l)| *l)
            .expect("a finite source");
        assert_eq!(v["limit_bytes"], limit, "{v}");
        // On a tie the earlier source wins; only check the kind when the rlimit is alone.
        if kind.starts_with("rlimit.") {
            assert_eq!(v["limit_source"], kind.as_str(), "{v}");
            let scope = if kind == "rlimit.as" {
                "process:VmSize"
            } else {
                "process:VmData"
            };
            assert_eq!(v["usage"]["scope"], scope, "{v}");
        }
    };

    // 4,000,000,000 bytes of address space: 3,906,250 KiB.
    let v = run(r#"ulimit -S -v 3906250 && exec "$0" --json"#);
    let as_src = find(&v, "rlimit.as");
    assert_eq!(as_src["limit_bytes"], 4_000_000_000u64, "{as_src}");
    assert_eq!(as_src["path"], "getrlimit(RLIMIT_AS)");
    check_winner(&v);
    assert!(v["limit_bytes"].as_u64().unwrap() <= 4_000_000_000);

    // Both limits, data the smaller.
    let v = run(r#"ulimit -S -v 3906250 && ulimit -S -d 2000000 && exec "$0" --json"#);
    assert_eq!(find(&v, "rlimit.data")["limit_bytes"], 2_048_000_000u64);
    assert_eq!(find(&v, "rlimit.as")["limit_bytes"], 4_000_000_000u64);
    check_winner(&v);

    // Without limits they are listed as skipped, with the reason.
    let v = run(
        r#"ulimit -S -v unlimited 2>/dev/null; ulimit -S -d unlimited 2>/dev/null; exec "$0" --json"#,
    );
    for kind in ["rlimit.as", "rlimit.data"] {
        let s = find(&v, kind);
        if s["status"] == "unlimited" {
            assert_eq!(s["note"], "unlimited (RLIM_INFINITY)", "{s}");
        }
    }
}
