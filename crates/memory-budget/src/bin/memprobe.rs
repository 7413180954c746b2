//! `memprobe [--root DIR] [--json] [--budget SIZE] [--margin SIZE]`: what limits bound this
//! process, which one wins, the margin and budget derived from it, and charged vs measured
//! usage. Exit status 2 when nothing under the root is readable; 1 on other errors.

use std::path::PathBuf;
use std::process::ExitCode;

use memory_budget::{Budget, BudgetError, DetectOptions, MemoryReport, SizeSpec};

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
    let Some(report) = MemoryReport::of(&budget) else {
        eprintln!("memprobe: the detected budget has no detection record");
        return ExitCode::from(1);
    };
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report.to_json()).expect("json values serialise")
        );
        return ExitCode::SUCCESS;
    }
    if let Err(e) = report.write_text(&mut std::io::stdout().lock()) {
        eprintln!("memprobe: cannot write the report: {e}");
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}
