//! Memory cgroups: finding this process's, making a child with a limit, starting a program
//! inside it, reading its OOM events, removing it.
//!
//! cgroup v2: the child gets `memory.max` (the limit) and `memory.swap.max = 0`; the memory
//! controller is enabled in the parent's `cgroup.subtree_control` first where it is not.
//! A non-root cgroup that holds processes cannot enable controllers for its children (the
//! "no internal processes" rule), so when this process's own cgroup refuses, the child is
//! made beside it, under its parent. cgroup v1: `memory.limit_in_bytes`, and
//! `memory.memsw.limit_in_bytes` at the same value where swap accounting exists (no swap).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

use crate::error::{Result, StressError};
use crate::sample::{read_text, CgroupMemory};

/// Which cgroup hierarchy holds the memory controller.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CgroupVersion {
    /// The legacy memory controller hierarchy.
    V1,
    /// The unified hierarchy.
    V2,
}

impl CgroupVersion {
    /// `v1` or `v2`.
    pub fn name(self) -> &'static str {
        match self {
            CgroupVersion::V1 => "v1",
            CgroupVersion::V2 => "v2",
        }
    }
}

/// An existing memory cgroup directory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryCgroup {
    /// Its hierarchy.
    pub version: CgroupVersion,
    /// Its directory.
    pub dir: PathBuf,
}

/// OOM and limit events of a cgroup, read after a run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CgroupEvents {
    /// Times the cgroup hit its limit and reclaim could not make room (v2 `oom`; v1
    /// `under_oom` is a state, not a count, so v1 reports `oom_kill` here as well).
    pub oom: u64,
    /// Processes the OOM killer killed in it (v2 `oom_kill`, v1 `oom_kill` of
    /// `memory.oom_control`).
    pub oom_kills: u64,
    /// Times usage reached the limit (v2 `max` of `memory.events`; v1 the larger of
    /// `memory.failcnt` and `memory.memsw.failcnt`: with both limits equal the kernel
    /// charges memory + swap first, so the hits land there): reclaim ran, nobody need
    /// have died. Informative only: a v1 kernel 6.18 was seen leaving both at 0 through
    /// an OOM kill.
    pub limit_hits: u64,
    /// The most memory the kernel charged it (v2 `memory.peak`, v1
    /// `memory.max_usage_in_bytes`), page cache included; `None` where the kernel has no
    /// such file.
    pub peak_current_bytes: Option<u64>,
}

impl MemoryCgroup {
    /// This process's memory cgroup: the v2 one when the unified hierarchy has the memory
    /// controller, else the v1 memory hierarchy's.
    pub fn of_this_process() -> Result<MemoryCgroup> {
        let own = memory_budget::own_cgroups(Path::new("/"));
        let mut why = own.notes.clone();
        if let Some(v2) = &own.v2 {
            let controllers = std::fs::read_to_string(v2.leaf.join("cgroup.controllers"))
                .or_else(|_| std::fs::read_to_string(v2.mount_point.join("cgroup.controllers")))
                .unwrap_or_default();
            if controllers.split_whitespace().any(|c| c == "memory") {
                return Ok(MemoryCgroup {
                    version: CgroupVersion::V2,
                    dir: v2.leaf.clone(),
                });
            }
            why.push(format!(
                "cgroup v2 at {} has no memory controller",
                v2.mount_point.display()
            ));
        }
        if let Some(v1) = &own.v1_memory {
            return Ok(MemoryCgroup {
                version: CgroupVersion::V1,
                dir: v1.leaf.clone(),
            });
        }
        why.push("no cgroup v1 memory hierarchy".into());
        Err(StressError::NoCgroup {
            reason: why.join("; "),
        })
    }

    /// Makes a child cgroup named `name` with `limit_bytes` as its hard limit (`None`: no
    /// limit, for measuring) and swap off. See the module docs for where a v2 child goes.
    pub fn create_child(&self, name: &str, limit_bytes: Option<u64>) -> Result<ChildCgroup> {
        let parent = match self.version {
            CgroupVersion::V1 => self.dir.clone(),
            CgroupVersion::V2 => self.v2_parent_for_children()?,
        };
        let dir = parent.join(name);
        if dir.exists() {
            // A leftover of an interrupted run with the same name: empty, so removable.
            std::fs::remove_dir(&dir).map_err(StressError::io("remove", &dir))?;
        }
        std::fs::create_dir(&dir).map_err(StressError::io("create", &dir))?;
        let child = ChildCgroup {
            cgroup: MemoryCgroup {
                version: self.version,
                dir,
            },
            limit_bytes,
            removed: false,
        };
        child.configure()?;
        Ok(child)
    }

    /// Where a v2 child with the memory controller can be made: this cgroup if its
    /// `subtree_control` has (or takes) `memory`, else its parent when the parent's does.
    fn v2_parent_for_children(&self) -> Result<PathBuf> {
        let has_memory = |dir: &Path| {
            read_text(&dir.join("cgroup.subtree_control"))
                .map(|t| t.split_whitespace().any(|c| c == "memory"))
                .unwrap_or(false)
        };
        if has_memory(&self.dir) {
            return Ok(self.dir.clone());
        }
        let control = self.dir.join("cgroup.subtree_control");
        let enable = std::fs::write(&control, "+memory");
        if enable.is_ok() && has_memory(&self.dir) {
            return Ok(self.dir.clone());
        }
        let own_refusal = match enable {
            Err(e) => format!("{}: {e}", control.display()),
            Ok(()) => format!("{}: memory not listed after +memory", control.display()),
        };
        match self.dir.parent() {
            Some(parent) if has_memory(parent) => Ok(parent.to_path_buf()),
            Some(parent) => Err(StressError::NoCgroup {
                reason: format!(
                    "cannot enable the memory controller for children of {} ({own_refusal}), and its parent {} does not delegate it",
                    self.dir.display(),
                    parent.display()
                ),
            }),
            None => Err(StressError::NoCgroup { reason: own_refusal }),
        }
    }
}

/// A cgroup this process made; removed on [`ChildCgroup::remove`] or, best effort, on drop.
#[derive(Debug)]
pub struct ChildCgroup {
    cgroup: MemoryCgroup,
    limit_bytes: Option<u64>,
    removed: bool,
}

impl ChildCgroup {
    /// The cgroup.
    pub fn cgroup(&self) -> &MemoryCgroup {
        &self.cgroup
    }

    /// Its limit (`None`: unlimited).
    pub fn limit_bytes(&self) -> Option<u64> {
        self.limit_bytes
    }

    fn write(&self, file: &str, value: &str) -> Result<()> {
        let path = self.cgroup.dir.join(file);
        std::fs::write(&path, value).map_err(StressError::io("write", path))
    }

    fn configure(&self) -> Result<()> {
        match self.cgroup.version {
            CgroupVersion::V2 => {
                if let Some(limit) = self.limit_bytes {
                    self.write("memory.max", &limit.to_string())?;
                }
                // Absent where swap accounting is off: no swap to turn off then.
                if self.cgroup.dir.join("memory.swap.max").exists() {
                    self.write("memory.swap.max", "0")?;
                }
            }
            CgroupVersion::V1 => {
                if let Some(limit) = self.limit_bytes {
                    self.write("memory.limit_in_bytes", &limit.to_string())?;
                    // memsw bounds memory + swap; equal to the limit means no swap. It
                    // exists only with swap accounting.
                    if self.cgroup.dir.join("memory.memsw.limit_in_bytes").exists() {
                        self.write("memory.memsw.limit_in_bytes", &limit.to_string())?;
                    }
                }
                if self.cgroup.dir.join("memory.swappiness").exists() {
                    self.write("memory.swappiness", "0")?;
                }
            }
        }
        Ok(())
    }

    /// A command that runs `program args` inside this cgroup from its first instruction:
    /// a shell writes its own pid into `cgroup.procs` and then `exec`s the program, so
    /// everything the program allocates is charged here.
    pub fn command(&self, program: &Path, args: &[String]) -> Command {
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c")
            .arg(r#"echo $$ > "$0" && exec "$@""#)
            .arg(self.cgroup.dir.join("cgroup.procs"))
            .arg(program)
            .args(args);
        cmd
    }

    /// What the kernel charges it now.
    pub fn memory(&self) -> Result<CgroupMemory> {
        CgroupMemory::read(&self.cgroup)
    }

    /// Its OOM and limit events so far.
    pub fn events(&self) -> Result<CgroupEvents> {
        read_events(&self.cgroup)
    }

    /// Removes it (its processes must have exited). Charged page cache is handed to the
    /// parent by the kernel.
    pub fn remove(mut self) -> Result<()> {
        self.removed = true;
        remove_dir_retrying(&self.cgroup.dir)
    }
}

impl Drop for ChildCgroup {
    fn drop(&mut self) {
        if !self.removed {
            let _ = remove_dir_retrying(&self.cgroup.dir);
        }
    }
}

/// `rmdir` of a cgroup fails with EBUSY for a moment after its last process exits (the
/// kernel is still tearing the task down); try a few times.
fn remove_dir_retrying(dir: &Path) -> Result<()> {
    let mut last = None;
    for _ in 0..50 {
        match std::fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => last = Some(e),
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    Err(StressError::Io {
        action: "remove",
        path: dir.to_path_buf(),
        source: last.unwrap_or_else(|| std::io::Error::other("cgroup busy")),
    })
}

/// `key value` lines (`memory.events`, `memory.oom_control`, `memory.stat`).
pub(crate) fn parse_key_values(text: &str) -> Vec<(&str, u64)> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let k = it.next()?;
            let v = it.next()?.parse().ok()?;
            Some((k, v))
        })
        .collect()
}

pub(crate) fn get(kv: &[(&str, u64)], key: &str) -> Option<u64> {
    kv.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
}

fn read_u64(path: &Path) -> Result<u64> {
    let text = read_text(path)?;
    let t = text.trim();
    t.parse().map_err(|_| StressError::Malformed {
        path: path.to_path_buf(),
        reason: "expected a byte count",
        found: t.chars().take(64).collect(),
    })
}

/// Parses the event files' text: v2 `memory.events` (+ `memory.peak`), v1
/// `memory.oom_control` + `memory.failcnt` (+ `memory.max_usage_in_bytes`).
pub fn parse_events(
    version: CgroupVersion,
    events: &str,
    failcnt: Option<u64>,
    peak: Option<u64>,
) -> CgroupEvents {
    let kv = parse_key_values(events);
    match version {
        CgroupVersion::V2 => CgroupEvents {
            oom: get(&kv, "oom").unwrap_or(0),
            oom_kills: get(&kv, "oom_kill").unwrap_or(0),
            limit_hits: get(&kv, "max").unwrap_or(0),
            peak_current_bytes: peak,
        },
        CgroupVersion::V1 => {
            let kills = get(&kv, "oom_kill").unwrap_or(0);
            CgroupEvents {
                oom: kills.max(get(&kv, "under_oom").unwrap_or(0)),
                oom_kills: kills,
                limit_hits: failcnt.unwrap_or(0),
                peak_current_bytes: peak,
            }
        }
    }
}

fn read_events(cg: &MemoryCgroup) -> Result<CgroupEvents> {
    let d = &cg.dir;
    Ok(match cg.version {
        CgroupVersion::V2 => parse_events(
            cg.version,
            &read_text(&d.join("memory.events"))?,
            None,
            read_u64(&d.join("memory.peak")).ok(),
        ),
        CgroupVersion::V1 => {
            let memsw = read_u64(&d.join("memory.memsw.failcnt")).unwrap_or(0);
            parse_events(
                cg.version,
                &read_text(&d.join("memory.oom_control"))?,
                Some(read_u64(&d.join("memory.failcnt"))?.max(memsw)),
                read_u64(&d.join("memory.max_usage_in_bytes")).ok(),
            )
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A v2 tree in a temporary directory: `parent/leaf`, each with a
    /// `cgroup.subtree_control` holding the given controllers.
    fn fake_v2(tag: &str, parent_ctl: &str, leaf_ctl: &str) -> (PathBuf, MemoryCgroup) {
        let seed = groth16_prover::testing::test_seed();
        let root = std::env::temp_dir().join(format!(
            "pinion-stress-fake-{tag}-{}-{seed}",
            std::process::id()
        ));
        let leaf = root.join("parent").join("leaf");
        std::fs::create_dir_all(&leaf).unwrap();
        std::fs::write(root.join("parent/cgroup.subtree_control"), parent_ctl).unwrap();
        std::fs::write(leaf.join("cgroup.subtree_control"), leaf_ctl).unwrap();
        let cg = MemoryCgroup {
            version: CgroupVersion::V2,
            dir: leaf,
        };
        (root, cg)
    }

    #[test]
    fn v2_children_go_where_memory_is_delegated() {
        // The leaf delegates memory: the child goes under it, with its limit written.
        let (root, cg) = fake_v2("leaf", "cpu memory", "memory pids");
        let child = cg.create_child("c", Some(1 << 30)).unwrap();
        assert_eq!(child.cgroup().dir, cg.dir.join("c"));
        let max = std::fs::read_to_string(child.cgroup().dir.join("memory.max")).unwrap();
        assert_eq!(max, (1u64 << 30).to_string());
        assert_eq!(child.limit_bytes(), Some(1 << 30));
        std::fs::remove_dir_all(&root).unwrap();
        drop(child);

        // The leaf does not (it holds processes, so enabling fails on a real kernel; a
        // plain file takes the write but does not list "memory" after it): beside it.
        let (root, cg) = fake_v2("parent", "memory", "cpu");
        let child = cg.create_child("c", None).unwrap();
        assert_eq!(child.cgroup().dir, root.join("parent/c"));
        assert!(
            !child.cgroup().dir.join("memory.max").exists(),
            "no limit, no file"
        );
        std::fs::remove_dir_all(&root).unwrap();
        drop(child);

        // Neither: an error naming both.
        let (root, cg) = fake_v2("none", "cpu", "");
        let e = cg.create_child("c", None).unwrap_err().to_string();
        assert!(e.contains("no writable memory cgroup"), "{e}");
        assert!(e.contains("leaf") && e.contains("parent"), "{e}");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn v2_events() {
        let e = parse_events(
            CgroupVersion::V2,
            "low 0\nhigh 0\nmax 17\noom 2\noom_kill 1\noom_group_kill 0\n",
            None,
            Some(4096),
        );
        assert_eq!(
            e,
            CgroupEvents {
                oom: 2,
                oom_kills: 1,
                limit_hits: 17,
                peak_current_bytes: Some(4096)
            }
        );
    }

    #[test]
    fn v1_events() {
        let e = parse_events(
            CgroupVersion::V1,
            "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n",
            Some(250),
            None,
        );
        assert_eq!(
            e,
            CgroupEvents {
                oom: 3,
                oom_kills: 3,
                limit_hits: 250,
                peak_current_bytes: None
            }
        );
        // Kernels before 4.13 have no oom_kill line.
        let e = parse_events(
            CgroupVersion::V1,
            "oom_kill_disable 0\nunder_oom 1\n",
            Some(0),
            None,
        );
        assert_eq!((e.oom, e.oom_kills), (1, 0));
    }
}
