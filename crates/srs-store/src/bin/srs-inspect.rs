//! `srs-inspect FILE [--check none|curve|full] [--json]`: prints a parameter file's section
//! counts, sizes and what a load would charge. Exit status 0 on a valid file; 1 with a
//! one-line reason (naming the section and byte offset) on an invalid one; 2 on bad usage.

use std::io::Write;
use std::process::ExitCode;

use srs_store::{LoadOptions, ParamsFile, PointCheck, Section};

const USAGE: &str = "usage: srs-inspect FILE [--check none|curve|full] [--json]";

struct Args {
    path: String,
    check: PointCheck,
    json: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut path = None;
    let mut check = PointCheck::None;
    let mut json = false;
    let mut it = std::env::args_os().skip(1);
    while let Some(arg) = it.next() {
        let arg = arg
            .into_string()
            .map_err(|a| format!("argument {a:?} is not utf-8"))?;
        match arg.as_str() {
            "--json" => json = true,
            "--check" => {
                let v = it
                    .next()
                    .and_then(|v| v.into_string().ok())
                    .ok_or("--check needs a value")?;
                check = v.parse()?;
            }
            "-h" | "--help" => return Err(String::new()),
            s if s.starts_with("--check=") => check = s["--check=".len()..].parse()?,
            s if s.starts_with('-') => return Err(format!("unknown option {s}")),
            _ if path.is_some() => return Err("more than one FILE".into()),
            _ => path = Some(arg),
        }
    }
    Ok(Args {
        path: path.ok_or("missing FILE")?,
        check,
        json,
    })
}

fn check_name(c: PointCheck) -> &'static str {
    match c {
        PointCheck::None => "none",
        PointCheck::Curve => "curve",
        PointCheck::Full => "full",
    }
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(msg) => {
            let mut e = std::io::stderr();
            if !msg.is_empty() {
                let _ = writeln!(e, "srs-inspect: {msg}");
            }
            let _ = writeln!(e, "{USAGE}");
            return if msg.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(2)
            };
        }
    };
    let mut out = std::io::stdout().lock();
    let options = LoadOptions {
        check: args.check,
        ..LoadOptions::default()
    };
    let result =
        ParamsFile::open(&args.path).and_then(|f| f.check_points(args.check, &options).map(|()| f));
    match result {
        Ok(file) => {
            let layout = file.layout();
            let plan = file.plan(&options);
            let sections = [
                Section::Ic,
                Section::H,
                Section::L,
                Section::A,
                Section::BG1,
                Section::BG2,
            ];
            if args.json {
                let secs: Vec<_> = sections
                    .iter()
                    .filter_map(|s| layout.span(*s))
                    .map(|sp| {
                        serde_json::json!({
                            "section": sp.section().name(),
                            "n_points": sp.n_points(),
                            "offset": sp.data_offset(),
                            "data_bytes": sp.data_bytes(),
                        })
                    })
                    .collect();
                let v = serde_json::json!({
                    "valid": true,
                    "file": args.path,
                    "file_bytes": layout.file_bytes(),
                    "check": check_name(args.check),
                    "sections": secs,
                    "load_destination_bytes": plan.destination_bytes,
                    "load_transient_bytes": plan.transient_bytes,
                    "load_peak_bytes": plan.peak_bytes(),
                });
                let _ = writeln!(out, "{v}");
            } else {
                let _ = writeln!(out, "file: {} ({} bytes)", args.path, layout.file_bytes());
                for s in sections {
                    if let Some(sp) = layout.span(s) {
                        let _ = writeln!(
                            out,
                            "{:<11} {:>12} points at offset {:>14}, {:>15} bytes",
                            sp.section().name(),
                            sp.n_points(),
                            sp.data_offset(),
                            sp.data_bytes()
                        );
                    }
                }
                let _ = writeln!(
                    out,
                    "load charges: peak {} bytes (destination {} + transient {}), steady {} bytes",
                    plan.peak_bytes(),
                    plan.destination_bytes,
                    plan.transient_bytes,
                    plan.destination_bytes
                );
                let _ = writeln!(out, "check {}: ok", check_name(args.check));
            }
            ExitCode::SUCCESS
        }
        Err(err) => {
            if args.json {
                let v = serde_json::json!({ "valid": false, "file": args.path, "error": err.to_string() });
                let _ = writeln!(out, "{v}");
            } else {
                let _ = writeln!(out, "invalid: {err}");
            }
            ExitCode::from(1)
        }
    }
}
