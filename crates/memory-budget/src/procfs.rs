//! Reading kernel files under a root directory, and the small text formats they use.

use std::path::{Component, Path, PathBuf};

use crate::error::BudgetError;

/// `root` joined with an absolute in-tree path (`/proc/meminfo` under `/tmp/tree`).
pub(crate) fn under(root: &Path, abs: &Path) -> PathBuf {
    let mut p = root.to_path_buf();
    for c in abs.components() {
        match c {
            Component::Normal(s) => p.push(s),
            // `..` in a cgroup path must not climb out of the root.
            Component::ParentDir if p != root => {
                p.pop();
            }
            _ => {}
        }
    }
    p
}

/// Reads an in-tree file; the error names the in-tree path.
pub(crate) fn read(root: &Path, abs: &Path) -> Result<String, BudgetError> {
    std::fs::read_to_string(under(root, abs)).map_err(|source| BudgetError::Io {
        path: abs.to_path_buf(),
        source,
    })
}

/// Reads a file holding one number (or `max`): `Ok(None)` means "max".
pub(crate) fn read_limit(root: &Path, abs: &Path) -> Result<Option<u64>, BudgetError> {
    let text = read(root, abs)?;
    parse_limit(abs, &text)
}

/// The v1 "unlimited" value for 4 KiB pages; other page sizes give other huge values, so
/// anything at or above 2^60 bytes (1 EiB) is treated as no limit as well.
pub const V1_UNLIMITED: u64 = 9_223_372_036_854_771_712;
const HUGE: u64 = 1 << 60;

pub(crate) fn parse_limit(path: &Path, text: &str) -> Result<Option<u64>, BudgetError> {
    let t = text.trim();
    if t == "max" {
        return Ok(None);
    }
    let v: u64 = t.parse().map_err(|_| BudgetError::Malformed {
        path: path.to_path_buf(),
        reason: "expected a byte count or \"max\"",
        found: t.chars().take(64).collect(),
    })?;
    Ok(if v == V1_UNLIMITED || v >= HUGE {
        None
    } else {
        Some(v)
    })
}

pub(crate) fn read_u64(root: &Path, abs: &Path) -> Result<u64, BudgetError> {
    let text = read(root, abs)?;
    let t = text.trim();
    t.parse().map_err(|_| BudgetError::Malformed {
        path: abs.to_path_buf(),
        reason: "expected a byte count",
        found: t.chars().take(64).collect(),
    })
}

/// `key value` lines (cgroup `memory.stat`). Lines that do not parse are skipped: the kernel
/// adds keys over time and we only need a few.
pub(crate) fn parse_stat(text: &str) -> Vec<(String, u64)> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let k = it.next()?;
            let v = it.next()?.parse().ok()?;
            Some((k.to_string(), v))
        })
        .collect()
}

pub(crate) fn stat_get(stat: &[(String, u64)], key: &str) -> Option<u64> {
    stat.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
}

/// `Key:   123 kB` lines (`/proc/meminfo`, `/proc/self/status`), in bytes.
pub(crate) fn parse_kb_fields(text: &str) -> Vec<(String, u64)> {
    text.lines()
        .filter_map(|l| {
            let (k, rest) = l.split_once(':')?;
            let mut it = rest.split_whitespace();
            let v: u64 = it.next()?.parse().ok()?;
            let mult = match it.next() {
                Some("kB") => 1024,
                None => 1,
                Some(_) => return None,
            };
            Some((k.trim().to_string(), v.checked_mul(mult)?))
        })
        .collect()
}

/// One `/proc/self/mountinfo` entry (the fields we use).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mount {
    /// Path inside the mounted filesystem that is the mount's root.
    pub root: String,
    /// Where it is mounted.
    pub mount_point: String,
    pub fstype: String,
    pub super_options: String,
}

/// Undoes mountinfo's octal escapes (`\040` for a space).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() {
            let oct = &b[i + 1..i + 4];
            if oct.iter().all(|c| (b'0'..=b'7').contains(c)) {
                let v = oct
                    .iter()
                    .fold(0u32, |acc, c| acc * 8 + u32::from(c - b'0'));
                if let Ok(v) = u8::try_from(v) {
                    out.push(v);
                    i += 4;
                    continue;
                }
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub(crate) fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            let pre: Vec<&str> = pre.split(' ').collect();
            if pre.len() < 5 {
                return None;
            }
            let mut post = post.split(' ');
            let fstype = post.next()?.to_string();
            let _source = post.next()?;
            let super_options = post.next().unwrap_or("").to_string();
            Some(Mount {
                root: unescape(pre[3]),
                mount_point: unescape(pre[4]),
                fstype,
                super_options,
            })
        })
        .collect()
}

/// One `/proc/self/cgroup` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CgroupLine {
    pub hierarchy_id: String,
    pub controllers: Vec<String>,
    pub path: String,
}

pub(crate) fn parse_proc_cgroup(text: &str) -> Vec<CgroupLine> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.splitn(3, ':');
            let id = it.next()?.to_string();
            let ctl = it.next()?;
            let path = it.next()?.to_string();
            let controllers = ctl
                .split(',')
                .filter(|c| !c.is_empty())
                .map(str::to_string)
                .collect();
            Some(CgroupLine {
                hierarchy_id: id,
                controllers,
                path,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_fields_and_escapes() {
        let text =
            "30 23 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n\
                    41 30 0:36 /docker/abc /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n\
                    50 23 8:1 / /mnt/with\\040space rw - ext4 /dev/sda1 rw\n\
                    garbage line\n";
        let m = parse_mountinfo(text);
        assert_eq!(m.len(), 3);
        assert_eq!(m[0].fstype, "cgroup2");
        assert_eq!(m[0].mount_point, "/sys/fs/cgroup");
        assert_eq!(m[1].root, "/docker/abc");
        assert_eq!(m[1].super_options, "rw,memory");
        assert_eq!(m[2].mount_point, "/mnt/with space");
    }

    #[test]
    fn proc_cgroup_lines() {
        let l = parse_proc_cgroup("12:cpu,cpuacct:/a\n4:memory:/b/c\n0::/user.slice/x\n");
        assert_eq!(l.len(), 3);
        assert_eq!(l[1].controllers, vec!["memory".to_string()]);
        assert_eq!(l[2].hierarchy_id, "0");
        assert!(l[2].controllers.is_empty());
        assert_eq!(l[2].path, "/user.slice/x");
    }

    #[test]
    fn limits_and_kb_fields() {
        let p = Path::new("/x");
        assert_eq!(parse_limit(p, "max\n").unwrap(), None);
        assert_eq!(parse_limit(p, "9223372036854771712\n").unwrap(), None);
        assert_eq!(parse_limit(p, "1048576\n").unwrap(), Some(1 << 20));
        assert!(parse_limit(p, "12abc").is_err());
        assert!(parse_limit(p, "").is_err());
        let f = parse_kb_fields("MemTotal:       1000 kB\nHugePages_Total:       0\nBad: x kB\n");
        assert_eq!(
            f,
            vec![
                ("MemTotal".into(), 1000 * 1024),
                ("HugePages_Total".into(), 0)
            ]
        );
    }

    #[test]
    fn under_does_not_escape_root() {
        let r = Path::new("/tmp/root");
        assert_eq!(
            under(r, Path::new("/../../etc/passwd")),
            Path::new("/tmp/root/etc/passwd")
        );
        assert_eq!(under(r, Path::new("/a/../b")), Path::new("/tmp/root/b"));
    }
}
