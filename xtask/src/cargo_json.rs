//! What xtask reads from cargo: the executables in `--message-format=json` output, and a
//! package's name from its manifest. `gpu-bundle` and `bench` both build through cargo and
//! pick executables from its messages, so the parsing lives here once.

use serde_json::Value;
use std::path::PathBuf;

/// One executable cargo produced (a `compiler-artifact` message with an `executable`).
#[derive(Debug, Clone, PartialEq)]
pub struct Executable {
    /// The target's name (`memprobe`, `msm_bench`, `gpu_field`).
    pub name: String,
    /// The target's kinds (`bin`, `example`, `test`, ...).
    pub kinds: Vec<String>,
    /// Whether it was built with the test harness (`cargo test --no-run`).
    pub test: bool,
    /// Where cargo wrote it.
    pub path: PathBuf,
}

impl Executable {
    /// Whether the target has kind `kind`.
    pub fn is(&self, kind: &str) -> bool {
        self.kinds.iter().any(|k| k == kind)
    }
}

/// Every executable named in cargo's JSON messages, in message order; other lines are skipped.
pub fn executables(messages: &str) -> Vec<Executable> {
    messages
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|v| v["reason"] == "compiler-artifact")
        .filter_map(|v| {
            Some(Executable {
                name: v["target"]["name"].as_str()?.to_string(),
                kinds: v["target"]["kind"]
                    .as_array()?
                    .iter()
                    .filter_map(|k| k.as_str().map(str::to_string))
                    .collect(),
                test: v["profile"]["test"].as_bool().unwrap_or(false),
                path: PathBuf::from(v["executable"].as_str()?),
            })
        })
        .collect()
}

/// The `name = "..."` of a manifest's `[package]` (the first `name` line).
pub fn package_name(manifest: &str) -> Option<String> {
    manifest
        .lines()
        .find_map(|l| l.trim().strip_prefix("name = "))
        .map(|n| n.trim_matches('"').to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_executables_from_messages() {
        let messages = r#"{"reason":"compiler-artifact","target":{"name":"memprobe","kind":["bin"]},"profile":{"test":false},"executable":"/t/release/memprobe"}
{"reason":"compiler-artifact","target":{"name":"memory_budget","kind":["lib"]},"profile":{"test":false},"executable":null}
not json
{"reason":"build-finished","success":true}
{"reason":"compiler-artifact","target":{"name":"gpu_field","kind":["test"]},"profile":{"test":true},"executable":"/t/release/deps/gpu_field-0123"}"#;
        let got = executables(messages);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].name, "memprobe");
        assert!(got[0].is("bin") && !got[0].test);
        assert_eq!(got[0].path, PathBuf::from("/t/release/memprobe"));
        assert_eq!(got[1].name, "gpu_field");
        assert!(got[1].is("test") && got[1].test);
    }

    #[test]
    fn package_names() {
        assert_eq!(
            package_name("[package]\nname = \"gpu-msm\"\nversion.workspace = true\n").as_deref(),
            Some("gpu-msm")
        );
        assert_eq!(package_name("[package]\nversion = \"1\"\n"), None);
    }
}
