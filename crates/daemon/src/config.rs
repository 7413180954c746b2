//! The daemon's settings: a TOML file with cuzk's section and key names where they mean
//! the same, overridden by command-line flags. Every key and its default is listed in the
//! README (`pinion serve`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use memory_budget::SizeSpec;
use serde::Deserialize;
use srs_store::PointCheck;

use crate::DaemonError;

/// Where a gRPC server listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Listen {
    /// A TCP address (`HOST:PORT`).
    Tcp(SocketAddr),
    /// A unix socket (`unix:///path`); the daemon removes it when it stops.
    Unix(PathBuf),
}

impl Listen {
    /// Parses `HOST:PORT` or `unix:///PATH` (`key` names the setting in errors).
    pub fn parse(key: &str, text: &str) -> Result<Listen, DaemonError> {
        let bad = |reason: String| DaemonError::Config {
            key: key.to_string(),
            reason,
        };
        if let Some(path) = text.strip_prefix("unix://") {
            if !path.starts_with('/') {
                return Err(bad(format!(
                    "{text:?}: a unix socket address is unix:///absolute/path"
                )));
            }
            return Ok(Listen::Unix(PathBuf::from(path)));
        }
        use std::net::ToSocketAddrs;
        let mut addrs = text
            .to_socket_addrs()
            .map_err(|e| bad(format!("{text:?} is not HOST:PORT or unix:///PATH ({e})")))?;
        addrs
            .next()
            .map(Listen::Tcp)
            .ok_or_else(|| bad(format!("{text:?} resolves to no address")))
    }
}

impl std::fmt::Display for Listen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Listen::Tcp(a) => write!(f, "{a}"),
            Listen::Unix(p) => write!(f, "unix://{}", p.display()),
        }
    }
}

/// Which devices prove.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Devices {
    /// The GPUs listed in `[gpus] devices` (every detected one when empty), else the CPU.
    Auto,
    /// The CPU only (`--cpu`).
    Cpu,
    /// GPUs only: starting without one is an error (`--gpu`).
    Gpu,
}

/// The settings, resolved and checked.
#[derive(Clone, Debug)]
pub struct Config {
    /// gRPC address (`[daemon] listen`).
    pub listen: Listen,
    /// HTTP address of /metrics, /status, /healthz (`[daemon] status_listen`; `None`:
    /// off).
    pub status_listen: Option<SocketAddr>,
    /// Largest gRPC message accepted or sent (`[daemon] max_message_size`).
    pub max_message_bytes: usize,
    /// Finished jobs remembered for await (`[daemon] keep_finished`).
    pub keep_finished: usize,
    /// Witnesses of queued jobs held at once, in bytes or a share of the budget
    /// (`[daemon] max_queued_bytes`); a submission past it waits for room.
    pub max_queued: SizeSpec,
    /// Where uploaded parameter files are kept (`[daemon] state_dir`; `None`: a fresh
    /// folder under the system's temp folder, removed at exit).
    pub state_dir: Option<PathBuf>,
    /// Folder relative parameter paths are read from (`[srs] param_cache`).
    pub param_cache: PathBuf,
    /// Point checks when parameters load (`[srs] check`).
    pub check: PointCheck,
    /// Host budget (`[memory] total_budget`; `None`: "auto").
    pub total_budget: Option<SizeSpec>,
    /// Margin kept free under "auto" (`[memory] safety_margin`; `None`: memory-budget's
    /// default).
    pub safety_margin: Option<SizeSpec>,
    /// Idle time before an unheld key or PCE may be evicted (`[memory] eviction_min_idle`).
    pub eviction_min_idle: Duration,
    /// Devices (`[gpus] devices`, `--cpu`, `--gpu`).
    pub devices: Devices,
    /// GPU ordinals to use (`[gpus] devices`; empty: all).
    pub gpu_ordinals: Vec<usize>,
    /// Rayon threads (`[synthesis] threads`; 0: one per core).
    pub synthesis_threads: usize,
    /// Partitions synthesizing at once (`[pipeline] synthesis_concurrency`; 0: one per
    /// core, under the budget).
    pub synthesis_concurrency: usize,
    /// Synthesized partitions waiting per device (`[pipeline] synthesis_lookahead`).
    pub synthesis_lookahead: usize,
    /// cuzk keys this daemon accepts and ignores (listed at start).
    pub ignored: Vec<String>,
}

impl Default for Config {
    fn default() -> Config {
        // The defaults are the file's defaults: an empty file.
        match Config::from_toml("") {
            Ok(c) => c,
            Err(e) => unreachable!("the default configuration is valid: {e}"),
        }
    }
}

/// `[daemon]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct DaemonSection {
    listen: String,
    status_listen: String,
    max_message_size: String,
    keep_finished: usize,
    max_queued_bytes: String,
    state_dir: String,
}

impl Default for DaemonSection {
    fn default() -> Self {
        DaemonSection {
            listen: "127.0.0.1:9820".into(),
            status_listen: String::new(),
            max_message_size: "256MiB".into(),
            keep_finished: 4096,
            max_queued_bytes: "25%".into(),
            state_dir: String::new(),
        }
    }
}

/// `[srs]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct SrsSection {
    param_cache: String,
    check: String,
    /// cuzk: deprecated and ignored.
    preload: Option<toml::Value>,
}

impl Default for SrsSection {
    fn default() -> Self {
        SrsSection {
            param_cache: std::env::var("FIL_PROOFS_PARAMETER_CACHE")
                .unwrap_or_else(|_| "/var/tmp/filecoin-proof-parameters".into()),
            check: "curve".into(),
            preload: None,
        }
    }
}

/// `[memory]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct MemorySection {
    total_budget: String,
    safety_margin: String,
    eviction_min_idle: String,
    /// cuzk: deprecated and ignored.
    pinned_budget: Option<toml::Value>,
    /// cuzk: deprecated and ignored.
    working_memory_budget: Option<toml::Value>,
}

impl Default for MemorySection {
    fn default() -> Self {
        MemorySection {
            total_budget: "auto".into(),
            safety_margin: "auto".into(),
            eviction_min_idle: "5m".into(),
            pinned_budget: None,
            working_memory_budget: None,
        }
    }
}

/// `[gpus]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct GpusSection {
    devices: Vec<usize>,
    /// cuzk: CPU threads of its GPU work (ours runs on rayon's pool).
    gpu_threads: Option<toml::Value>,
    /// cuzk: workers per GPU (ours: one worker per device with a hand-off).
    gpu_workers_per_device: Option<toml::Value>,
}

/// `[synthesis]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct SynthesisSection {
    threads: usize,
    /// cuzk: deprecated and ignored.
    partition_workers: Option<toml::Value>,
}

/// `[pipeline]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct PipelineSection {
    synthesis_concurrency: usize,
    synthesis_lookahead: usize,
    /// cuzk: pipelining on or off (ours always pipelines).
    enabled: Option<toml::Value>,
    /// cuzk: a ceiling on parallel partition syntheses (ours: synthesis_concurrency).
    max_parallel_synthesis: Option<toml::Value>,
}

impl Default for PipelineSection {
    fn default() -> Self {
        PipelineSection {
            synthesis_concurrency: 0,
            synthesis_lookahead: 1,
            enabled: None,
            max_parallel_synthesis: None,
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct File {
    daemon: DaemonSection,
    srs: SrsSection,
    memory: MemorySection,
    gpus: GpusSection,
    synthesis: SynthesisSection,
    pipeline: PipelineSection,
    /// cuzk's batching settings (ours proves partitions, not batches).
    scheduler: Option<toml::Value>,
    /// cuzk's log settings (ours: RUST_LOG-free, errors on stderr).
    logging: Option<toml::Value>,
}

/// `"5m"`, `"300s"`, `"250ms"`, `"2h"` or a number of seconds.
pub fn parse_duration(key: &str, text: &str) -> Result<Duration, DaemonError> {
    let bad = || DaemonError::Config {
        key: key.to_string(),
        reason: format!("{text:?} is not a duration (\"250ms\", \"30s\", \"5m\", \"2h\")"),
    };
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().map_err(|_| bad())?;
    let ms = match unit.trim() {
        "ms" => n,
        "" | "s" => n.checked_mul(1000).ok_or_else(bad)?,
        "m" => n.checked_mul(60_000).ok_or_else(bad)?,
        "h" => n.checked_mul(3_600_000).ok_or_else(bad)?,
        _ => return Err(bad()),
    };
    Ok(Duration::from_millis(ms))
}

fn size(key: &str, text: &str) -> Result<SizeSpec, DaemonError> {
    SizeSpec::parse(text).map_err(|e| DaemonError::Config {
        key: key.to_string(),
        reason: e.to_string(),
    })
}

fn auto_or_size(key: &str, text: &str) -> Result<Option<SizeSpec>, DaemonError> {
    if text.trim() == "auto" {
        Ok(None)
    } else {
        size(key, text).map(Some)
    }
}

impl Config {
    /// Reads and checks a TOML file.
    pub fn load(path: &Path) -> Result<Config, DaemonError> {
        let text = std::fs::read_to_string(path).map_err(|source| DaemonError::ConfigRead {
            path: path.to_path_buf(),
            source,
        })?;
        Config::from_toml(&text).map_err(|e| match e {
            DaemonError::Config { key, reason } => DaemonError::Config {
                key: format!("{} {key}", path.display()),
                reason,
            },
            other => other,
        })
    }

    /// Parses and checks TOML text.
    pub fn from_toml(text: &str) -> Result<Config, DaemonError> {
        let file: File = toml::from_str(text).map_err(|e| DaemonError::Config {
            key: "file".into(),
            reason: e.to_string().trim().replace('\n', " "),
        })?;
        let mut ignored = Vec::new();
        let mut note = |present: bool, key: &str| {
            if present {
                ignored.push(key.to_string());
            }
        };
        note(file.srs.preload.is_some(), "srs.preload");
        note(file.memory.pinned_budget.is_some(), "memory.pinned_budget");
        note(
            file.memory.working_memory_budget.is_some(),
            "memory.working_memory_budget",
        );
        note(file.gpus.gpu_threads.is_some(), "gpus.gpu_threads");
        note(
            file.gpus.gpu_workers_per_device.is_some(),
            "gpus.gpu_workers_per_device",
        );
        note(
            file.synthesis.partition_workers.is_some(),
            "synthesis.partition_workers",
        );
        note(file.pipeline.enabled.is_some(), "pipeline.enabled");
        note(
            file.pipeline.max_parallel_synthesis.is_some(),
            "pipeline.max_parallel_synthesis",
        );
        note(file.scheduler.is_some(), "scheduler");
        note(file.logging.is_some(), "logging");

        let d = &file.daemon;
        let max_message = match size("daemon.max_message_size", &d.max_message_size)? {
            SizeSpec::Bytes(b) => b,
            SizeSpec::Percent(_) => {
                return Err(DaemonError::Config {
                    key: "daemon.max_message_size".into(),
                    reason: "a size in bytes, not a percentage".into(),
                })
            }
        };
        // Four bytes of gRPC framing and tonic's usize limits bound it.
        if !(1024..=u64::from(u32::MAX)).contains(&max_message) {
            return Err(DaemonError::Config {
                key: "daemon.max_message_size".into(),
                reason: format!("{max_message} bytes is outside 1KiB..4GiB"),
            });
        }
        let check = file
            .srs
            .check
            .parse::<PointCheck>()
            .map_err(|reason| DaemonError::Config {
                key: "srs.check".into(),
                reason,
            })?;
        if file.pipeline.synthesis_lookahead == 0 {
            return Err(DaemonError::Config {
                key: "pipeline.synthesis_lookahead".into(),
                reason: "must be at least 1".into(),
            });
        }
        Ok(Config {
            listen: Listen::parse("daemon.listen", &d.listen)?,
            status_listen: match d.status_listen.trim() {
                "" => None,
                s => match Listen::parse("daemon.status_listen", s)? {
                    Listen::Tcp(a) => Some(a),
                    Listen::Unix(_) => {
                        return Err(DaemonError::Config {
                            key: "daemon.status_listen".into(),
                            reason: "the HTTP status server listens on TCP (HOST:PORT)".into(),
                        })
                    }
                },
            },
            max_message_bytes: max_message as usize,
            keep_finished: d.keep_finished.max(1),
            max_queued: size("daemon.max_queued_bytes", &d.max_queued_bytes)?,
            state_dir: (!d.state_dir.is_empty()).then(|| PathBuf::from(&d.state_dir)),
            param_cache: PathBuf::from(&file.srs.param_cache),
            check,
            total_budget: auto_or_size("memory.total_budget", &file.memory.total_budget)?,
            safety_margin: auto_or_size("memory.safety_margin", &file.memory.safety_margin)?,
            eviction_min_idle: parse_duration(
                "memory.eviction_min_idle",
                &file.memory.eviction_min_idle,
            )?,
            devices: Devices::Auto,
            gpu_ordinals: file.gpus.devices,
            synthesis_threads: file.synthesis.threads,
            synthesis_concurrency: file.pipeline.synthesis_concurrency,
            synthesis_lookahead: file.pipeline.synthesis_lookahead,
            ignored,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_documented_ones() {
        let c = Config::default();
        assert_eq!(c.listen, Listen::Tcp("127.0.0.1:9820".parse().unwrap()));
        assert_eq!(c.status_listen, None);
        assert_eq!(c.max_message_bytes, 256 << 20);
        assert_eq!(c.keep_finished, 4096);
        assert_eq!(c.max_queued, SizeSpec::Percent(25.0));
        assert_eq!(c.check, PointCheck::Curve);
        assert_eq!(c.total_budget, None);
        assert_eq!(c.safety_margin, None);
        assert_eq!(c.eviction_min_idle, Duration::from_secs(300));
        assert_eq!(c.devices, Devices::Auto);
        assert!(c.gpu_ordinals.is_empty());
        assert_eq!(c.synthesis_threads, 0);
        assert_eq!(c.synthesis_concurrency, 0);
        assert_eq!(c.synthesis_lookahead, 1);
        assert!(c.ignored.is_empty());
    }

    #[test]
    fn cuzk_example_file_is_accepted() {
        // The keys of cuzk.example.toml, with its values.
        let text = r#"
[daemon]
listen = "unix:///run/curio/cuzk.sock"
status_listen = "0.0.0.0:9821"
[srs]
param_cache = "/data/zk/params"
[memory]
total_budget = "auto"
safety_margin = "5GiB"
eviction_min_idle = "5m"
[gpus]
devices = [0, 1]
gpu_threads = 32
gpu_workers_per_device = 2
[scheduler]
max_batch_size = 1
max_batch_wait_ms = 10000
sort_by_type = true
[synthesis]
threads = 0
[pipeline]
enabled = true
synthesis_lookahead = 1
synthesis_concurrency = 1
[logging]
level = "info"
"#;
        let c = Config::from_toml(text).unwrap();
        assert_eq!(c.listen, Listen::Unix("/run/curio/cuzk.sock".into()));
        assert_eq!(c.status_listen, Some("0.0.0.0:9821".parse().unwrap()));
        assert_eq!(c.param_cache, PathBuf::from("/data/zk/params"));
        assert_eq!(c.safety_margin, Some(SizeSpec::Bytes(5 << 30)));
        assert_eq!(c.gpu_ordinals, vec![0, 1]);
        assert_eq!(c.synthesis_concurrency, 1);
        assert_eq!(
            c.ignored,
            [
                "gpus.gpu_threads",
                "gpus.gpu_workers_per_device",
                "pipeline.enabled",
                "scheduler",
                "logging"
            ]
        );
    }

    fn check_error(text: &str, key: &str) {
        match Config::from_toml(text) {
            Err(DaemonError::Config { key: k, reason }) => {
                assert_eq!(k, key, "{reason}");
                assert!(!reason.is_empty());
            }
            other => panic!("{text:?}: expected a config error on {key}, got {other:?}"),
        }
    }

    #[test]
    fn bad_values_name_their_key() {
        check_error("[daemon]\nlisten = \"nowhere\"", "daemon.listen");
        check_error("[daemon]\nlisten = \"unix://relative\"", "daemon.listen");
        check_error(
            "[daemon]\nstatus_listen = \"unix:///s\"",
            "daemon.status_listen",
        );
        check_error(
            "[daemon]\nmax_message_size = \"12\"",
            "daemon.max_message_size",
        );
        check_error(
            "[daemon]\nmax_message_size = \"5%\"",
            "daemon.max_message_size",
        );
        check_error(
            "[daemon]\nmax_queued_bytes = \"0%\"",
            "daemon.max_queued_bytes",
        );
        check_error("[memory]\ntotal_budget = \"lots\"", "memory.total_budget");
        check_error(
            "[memory]\neviction_min_idle = \"5 weeks\"",
            "memory.eviction_min_idle",
        );
        check_error("[srs]\ncheck = \"some\"", "srs.check");
        check_error(
            "[pipeline]\nsynthesis_lookahead = 0",
            "pipeline.synthesis_lookahead",
        );
        // A typo is an error, not a silently ignored key.
        check_error("[daemon]\nlisten_addr = \"127.0.0.1:1\"", "file");
        check_error("[memroy]\ntotal_budget = \"1GiB\"", "file");
    }

    #[test]
    fn durations() {
        for (text, ms) in [
            ("250ms", 250),
            ("30s", 30_000),
            ("5m", 300_000),
            ("2h", 7_200_000),
            ("7", 7000),
        ] {
            assert_eq!(
                parse_duration("k", text).unwrap(),
                Duration::from_millis(ms),
                "{text}"
            );
        }
        for text in ["", "m", "5d", "-1s", "1.5s"] {
            assert!(parse_duration("k", text).is_err(), "{text}");
        }
    }
}
