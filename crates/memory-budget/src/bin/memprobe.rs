//! `memprobe [--root DIR] [--json] [--budget SIZE] [--margin SIZE]`: what limits bound this
//! process, which one wins, the margin and budget derived from it, and charged vs measured
//! usage. Exit status 2 when nothing under the root is readable; 1 on other errors.

use std::path::PathBuf;
use std::process::ExitCode;

use memory_budget::{
    format_bytes, Budget, BudgetError, DetectOptions, KernelProbe, MeasuredUsage, SizeSpec,
    SourceStatus, UsageProbe, UsageScope,
};
use serde_json::{json, Value};

const USAGE: &str = "usage: memprobe [--root DIR] [--json] [--budget SIZE] [--margin SIZE]";

struct Args {
    root: PathBuf,
    json: bool,
    budget: Option<SizeSpec>,
    margin: Option<SizeSpec>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        root: PathBuf::from("/"),
        json: false,
        budget: None,
        margin: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (a.clone(), None),
        };
        let mut value = |name: &str| {
            inline
                .clone()
                .or_else(|| it.next())
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match flag.as_str() {
            "--json" => args.json = true,
            "--root" => args.root = PathBuf::from(value("--root")?),
            "--budget" => {
                args.budget = Some(SizeSpec::parse(&value("--budget")?).map_err(|e| e.to_string())?)
            }
            "--margin" => {
                args.margin = Some(SizeSpec::parse(&value("--margin")?).map_err(|e| e.to_string())?)
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(args)
}

fn scope_str(s: &UsageScope) -> String {
    match s {
        UsageScope::CgroupV2 { dir } => format!("cgroup2:{}", dir.display()),
        UsageScope::CgroupV1 { dir } => format!("cgroup1:{}", dir.display()),
        UsageScope::System => "system:/proc/meminfo".into(),
    }
}

fn usage_json(
    m: &Result<MeasuredUsage, BudgetError>,
    charged: u64,
    real_headroom: Option<i128>,
) -> Value {
    match m {
        Err(e) => json!({ "error": e.to_string(), "charged_bytes": charged }),
        Ok(m) => {
            let breakdown: serde_json::Map<String, Value> = m
                .breakdown
                .iter()
                .map(|(k, v)| (k.clone(), json!(v)))
                .collect();
            let process = m.process.as_ref().map(|p| {
                json!({
                    "vm_rss_bytes": p.vm_rss_bytes,
                    "rss_anon_bytes": p.rss_anon_bytes,
                    "rss_file_bytes": p.rss_file_bytes,
                    "rss_shmem_bytes": p.rss_shmem_bytes,
                    "vm_lck_bytes": p.vm_lck_bytes,
                    "vm_pin_bytes": p.vm_pin_bytes,
                    "vm_pte_bytes": p.vm_pte_bytes,
                    "hard_bytes": p.hard_bytes(),
                })
            });
            json!({
                "scope": scope_str(&m.scope),
                "charged_bytes": charged,
                "current_bytes": m.current_bytes,
                "hard_bytes": m.hard_bytes,
                "reclaimable_bytes": m.reclaimable_bytes,
                "own_hard_bytes": m.own_hard_bytes(),
                "drift_bytes": m.own_hard_bytes() as i128 - charged as i128,
                "real_headroom_bytes": real_headroom,
                "breakdown": breakdown,
                "process": process,
            })
        }
    }
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("memprobe: {e}\n{USAGE}");
            return ExitCode::from(1);
        }
    };
    let options = DetectOptions {
        budget: args.budget,
        safety_margin: args.margin,
        ..DetectOptions::with_root(&args.root)
    };
    let budget = match Budget::detect(&options) {
        Ok(b) => b,
        Err(e @ BudgetError::NoLimitFound { .. }) => {
            eprintln!(
                "memprobe: nothing readable under {}: {e}",
                args.root.display()
            );
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("memprobe: {e}");
            return ExitCode::from(1);
        }
    };
    let det = budget
        .detection()
        .expect("a detected budget keeps its detection")
        .clone();
    let limits = &det.limits;
    let win = limits.winning_source();
    let charged = budget.used_bytes();
    let measured = KernelProbe::new(args.root.clone(), limits.usage_scope.clone()).measure();
    // The drift check's view: the limit the probe's numbers are compared with.
    let drift_limit = match limits.usage_scope {
        UsageScope::System => limits.mem_total_bytes.unwrap_or(limits.limit_bytes),
        _ => limits.limit_bytes,
    };
    let real_headroom = measured
        .as_ref()
        .ok()
        .map(|m| drift_limit as i128 - m.hard_bytes as i128 - det.safety_margin_bytes as i128);

    if args.json {
        let sources: Vec<Value> = limits
            .sources
            .iter()
            .map(|s| {
                let status = match &s.status {
                    SourceStatus::Limit(_) => "limit".to_string(),
                    SourceStatus::Unlimited => "unlimited".to_string(),
                    SourceStatus::Missing => "missing".to_string(),
                    SourceStatus::Unreadable(e) => format!("unreadable: {e}"),
                    SourceStatus::Malformed(e) => format!("malformed: {e}"),
                };
                json!({
                    "kind": s.kind.as_str(),
                    "path": s.path.display().to_string(),
                    "limit_bytes": s.limit_bytes(),
                    "soft": s.kind.is_soft(),
                    "status": status,
                    "note": s.note,
                })
            })
            .collect();
        let out = json!({
            "root": args.root.display().to_string(),
            "limit_bytes": limits.limit_bytes,
            "limit_source": win.kind.as_str(),
            "limit_path": win.path.display().to_string(),
            "safety_margin_bytes": det.safety_margin_bytes,
            "budget_bytes": det.budget_bytes,
            "budget_rule": det.budget_rule,
            "admission_cap_bytes": budget.snapshot().cap_bytes,
            "sources": sources,
            "notes": limits.notes,
            "usage": usage_json(&measured, charged, real_headroom),
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&out).expect("json values serialise")
        );
        return ExitCode::SUCCESS;
    }

    println!("root: {}", args.root.display());
    println!("sources:");
    for s in &limits.sources {
        let v = match &s.status {
            SourceStatus::Limit(b) => format_bytes(*b),
            SourceStatus::Unlimited => "max".into(),
            SourceStatus::Missing => "absent".into(),
            SourceStatus::Unreadable(_) => "unreadable".into(),
            SourceStatus::Malformed(_) => "malformed".into(),
        };
        println!(
            "  {:<38} {:<12} {}  ({})",
            s.kind.as_str(),
            v,
            s.path.display(),
            s.note
        );
    }
    for n in &limits.notes {
        println!("  note: {n}");
    }
    println!(
        "limit: {} ({} bytes) from {} {}",
        format_bytes(limits.limit_bytes),
        limits.limit_bytes,
        win.kind.as_str(),
        win.path.display()
    );
    println!(
        "safety margin: {} ({} bytes)",
        format_bytes(det.safety_margin_bytes),
        det.safety_margin_bytes
    );
    println!(
        "budget: {} ({} bytes): {}",
        format_bytes(det.budget_bytes),
        det.budget_bytes,
        det.budget_rule
    );
    match &measured {
        Ok(m) => {
            println!("usage ({}):", scope_str(&m.scope));
            println!("  charged:     {}", format_bytes(charged));
            println!("  current:     {}", format_bytes(m.current_bytes));
            println!("  hard:        {}", format_bytes(m.hard_bytes));
            println!("  reclaimable: {}", format_bytes(m.reclaimable_bytes));
            if let Some(h) = real_headroom {
                println!("  real headroom: {} bytes (limit - hard - margin)", h);
            }
            for (k, v) in &m.breakdown {
                println!("    {k:<14} {}", format_bytes(*v));
            }
            if let Some(p) = &m.process {
                println!(
                    "  this process: VmRSS {:?} RssAnon {:?} RssFile {:?} RssShmem {:?} VmLck {:?} VmPin {:?}",
                    p.vm_rss_bytes, p.rss_anon_bytes, p.rss_file_bytes, p.rss_shmem_bytes, p.vm_lck_bytes, p.vm_pin_bytes
                );
            }
        }
        Err(e) => println!("usage: unavailable: {e}"),
    }
    ExitCode::SUCCESS
}
