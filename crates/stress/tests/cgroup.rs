//! Real memory cgroups: a child made under this process's, a program started inside it,
//! the kernel's figures read back, an OOM kill seen in the events, the child removed.
//!
//! These need a writable memory hierarchy (root, cgroup v1 or v2). Without one each test
//! says why and passes; with `PINION_REQUIRE_CGROUP=1` it fails instead.

use std::process::Stdio;

use groth16_prover::testing::{test_seed, SplitMix};
use pinion_stress::cgroup::{ChildCgroup, MemoryCgroup};

/// A child cgroup with `limit`, or `None` after saying why none can be made.
fn child_or_skip(tag: &str, limit: Option<u64>) -> Option<ChildCgroup> {
    let made = MemoryCgroup::of_this_process().and_then(|p| {
        p.create_child(
            &format!("pinion-stress-test-{tag}-{}", std::process::id()),
            limit,
        )
    });
    match made {
        Ok(c) => Some(c),
        Err(e) if std::env::var("PINION_REQUIRE_CGROUP").is_ok_and(|v| v == "1") => {
            panic!("PINION_REQUIRE_CGROUP=1 but no cgroup: {e}")
        }
        Err(e) => {
            eprintln!("skipped: {e}");
            None
        }
    }
}

#[test]
fn a_program_runs_inside_and_is_charged_there() {
    let seed = test_seed();
    let limit = (64 + SplitMix::new(seed).next_u64() % 64) << 20;
    let Some(cg) = child_or_skip("inside", Some(limit)) else {
        return;
    };
    let name = cg
        .cgroup()
        .dir
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let out = cg
        .command(
            std::path::Path::new("/bin/cat"),
            &["/proc/self/cgroup".into()],
        )
        .stderr(Stdio::inherit())
        .output()
        .expect("run cat in the cgroup");
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines().any(|l| l.ends_with(&format!("/{name}"))),
        "cat did not run in {name}: {text}"
    );
    let m = cg.memory().expect("read the cgroup's memory");
    assert!(m.current_bytes <= limit, "{m:?} above {limit}");
    let e = cg.events().expect("read the events");
    assert_eq!(e.oom_kills, 0, "{e:?}");
    let dir = cg.cgroup().dir.clone();
    cg.remove().expect("remove");
    assert!(!dir.exists(), "{} still there", dir.display());
}

#[test]
fn an_oom_kill_is_counted() {
    let seed = test_seed();
    let mut g = SplitMix::new(seed);
    let limit = (8 + g.next_u64() % 8) << 20;
    let Some(cg) = child_or_skip("oom", Some(limit)) else {
        return;
    };
    // A shell holding a string four to eight times the limit (command substitution keeps
    // all of it in memory), with no swap to go to.
    let bytes = limit * (4 + g.next_u64() % 5);
    let script = format!("x=$(head -c {bytes} /dev/zero | tr '\\0' a); echo ${{#x}}");
    let status = cg
        .command(
            std::path::Path::new("/bin/sh"),
            &["-c".into(), script.clone()],
        )
        .stdout(Stdio::null())
        .status()
        .expect("run the shell");
    assert!(
        !status.success(),
        "{script} fit in {limit} bytes: {status:?}"
    );
    let e = cg.events().expect("read the events");
    assert!(
        e.oom_kills >= 1 && e.oom >= 1,
        "no OOM kill counted after {status:?}: {e:?} (seed {seed})"
    );
    // Not asserted: limit_hits. The v1 failcnt stays 0 through an OOM kill on this
    // machine's kernel (6.18), so it is reported, never relied on.
    cg.remove().expect("remove");
}

#[test]
fn an_unlimited_child_has_no_limit_file_written() {
    let Some(cg) = child_or_skip("unlimited", None) else {
        return;
    };
    assert_eq!(cg.limit_bytes(), None);
    let m = cg.memory().expect("read");
    assert_eq!(
        m.measured_bytes(),
        m.anon_bytes + m.kernel_bytes + m.shmem_bytes
    );
    // Dropped without remove(): the drop removes it.
    let dir = cg.cgroup().dir.clone();
    drop(cg);
    assert!(!dir.exists(), "{} left behind", dir.display());
}
