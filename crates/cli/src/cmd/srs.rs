//! `pinion srs inspect`: a parameter file's sections and what loading it charges.

use std::path::Path;

use serde_json::json;
use srs_store::{LoadOptions, ParamsFile, PointCheck, Section};

use crate::ui::Stage;
use crate::Outcome;

const SECTIONS: [Section; 6] = [
    Section::Ic,
    Section::H,
    Section::L,
    Section::A,
    Section::BG1,
    Section::BG2,
];

/// Inspects; an invalid file prints the reason and exits 1.
pub fn inspect(path: &Path, check: &str, json: bool) -> anyhow::Result<Outcome> {
    let check_mode: PointCheck = check.parse().map_err(anyhow::Error::msg)?;
    let options = LoadOptions {
        check: check_mode,
        ..LoadOptions::default()
    };
    let stage = (check_mode != PointCheck::None)
        .then(|| Stage::start(format!("checking points ({check})")));
    let result =
        ParamsFile::open(path).and_then(|f| f.check_points(check_mode, &options).map(|()| f));
    if let Some(stage) = stage {
        stage.finish();
    }
    let file = match result {
        Ok(f) => f,
        Err(err) => {
            if json {
                super::print_json(&json!({
                    "valid": false,
                    "file": path.display().to_string(),
                    "error": err.to_string(),
                }));
            } else {
                println!("invalid: {err}");
            }
            // The reason is on stdout; stderr gets the one-line error too.
            return Err(anyhow::Error::new(err)
                .context(format!("parameters {} are invalid", path.display())));
        }
    };
    let layout = file.layout();
    let plan = file.plan(&options);
    let spans: Vec<_> = SECTIONS.iter().filter_map(|s| layout.span(*s)).collect();
    if json {
        let sections: Vec<_> = spans
            .iter()
            .map(|sp| {
                json!({
                    "section": sp.section().name(),
                    "n_points": sp.n_points(),
                    "offset": sp.data_offset(),
                    "data_bytes": sp.data_bytes(),
                })
            })
            .collect();
        super::print_json(&json!({
            "valid": true,
            "file": path.display().to_string(),
            "file_bytes": layout.file_bytes(),
            "check": check,
            "sections": sections,
            "load_destination_bytes": plan.destination_bytes,
            "load_transient_bytes": plan.transient_bytes,
            "load_peak_bytes": plan.peak_bytes(),
        }));
    } else {
        println!("file: {} ({} bytes)", path.display(), layout.file_bytes());
        for sp in &spans {
            println!(
                "{:<11} {:>12} points at offset {:>14}, {:>15} bytes",
                sp.section().name(),
                sp.n_points(),
                sp.data_offset(),
                sp.data_bytes()
            );
        }
        println!(
            "load charges: peak {} bytes (destination {} + transient {}), steady {} bytes",
            plan.peak_bytes(),
            plan.destination_bytes,
            plan.transient_bytes,
            plan.destination_bytes
        );
        println!("check {check}: ok");
    }
    Ok(Outcome::Success)
}
