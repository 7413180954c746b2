//! `pinion pce extract|inspect`: record a circuit into a PCE file, describe one.

use std::path::Path;

use anyhow::Context;
use memory_budget::{Budget, Category, Reservation};
use pce_cache::{MatrixId, Pce, Recorder};
use pinion::CircomCircuit;
use serde_json::json;

use crate::cmd::demo;
use crate::ui::{self, Stage};
use crate::Outcome;

/// Records a circom circuit (or the demo's SHA-256) and writes the PCE.
pub fn extract(
    r1cs: Option<&Path>,
    demo_constraints: Option<u64>,
    out: &Path,
    json: bool,
    budget: Option<&str>,
) -> anyhow::Result<Outcome> {
    let budget = super::host_budget(budget)?;
    let ((pce, _charge), took) = match (r1cs, demo_constraints) {
        (Some(path), _) => {
            let (r1cs, _charge) = super::read_r1cs(path, &budget)?;
            let stage = Stage::start(format!("recording {}", path.display()));
            let pce = record(CircomCircuit::shape_only(&r1cs), &budget)
                .with_context(|| format!("cannot record {}", path.display()))?;
            (pce, stage.finish())
        }
        (None, Some(n)) => {
            let (circuit, n_blocks) = demo::circuit_for(n);
            let stage = Stage::start(format!(
                "recording the demo sha-256 circuit ({n_blocks} blocks)"
            ));
            let pce = record(circuit, &budget).context("cannot record the demo circuit")?;
            (pce, stage.finish())
        }
        (None, None) => anyhow::bail!("give --r1cs FILE or --demo"),
    };
    pce.write_to(out)
        .with_context(|| format!("cannot write {}", out.display()))?;
    if json {
        let mut v = describe(&pce);
        v["file"] = json!(out.display().to_string());
        v["extraction_seconds"] = json!(took.as_secs_f64());
        super::print_json(&v);
    } else {
        println!("wrote {} in {}", out.display(), ui::secs(took));
        print_description(&pce);
    }
    Ok(Outcome::Success)
}

/// Records with every buffer growth charged to `budget` (pce-cache's recorder); the
/// charge is held until the file is written.
fn record<C: bellman::Circuit<bls12_381::Scalar>>(
    circuit: C,
    budget: &Budget,
) -> anyhow::Result<(Pce, Option<Reservation>)> {
    let reservation = budget
        .try_reserve(0, Category::Pce, "pce extraction")
        .context("the memory budget refuses the pce extraction")?;
    Ok(Recorder::record(circuit, Some(reservation))?)
}

/// Loads a PCE file with every checksum verified and describes it.
pub fn inspect(path: &Path, json: bool) -> anyhow::Result<Outcome> {
    // Every PceError names the file: the context does not repeat it.
    let pce = Pce::load(path, None).context("pce file is not usable")?;
    if json {
        let mut v = describe(&pce);
        v["file"] = json!(path.display().to_string());
        v["checksums"] = json!("ok");
        super::print_json(&v);
    } else {
        println!("file: {}", path.display());
        print_description(&pce);
        println!("checksums: ok");
    }
    Ok(Outcome::Success)
}

fn describe(pce: &Pce) -> serde_json::Value {
    let s = pce.shape();
    let d = pce.densities();
    let matrices: serde_json::Map<String, serde_json::Value> = MatrixId::ALL
        .iter()
        .zip(["a", "b", "c"])
        .map(|(m, name)| {
            let (plus, minus, other) = pce.n_nonzeros_by_kind(*m);
            (
                name.to_string(),
                json!({
                    "n_nonzeros": pce.n_nonzeros_of(*m),
                    "n_plus_one": plus,
                    "n_minus_one": minus,
                    "n_other": other,
                    "code_bytes": pce.code_bytes_of(*m),
                }),
            )
        })
        .collect();
    json!({
        "fingerprint": pce.fingerprint().to_string(),
        "n_inputs": s.n_inputs,
        "n_aux": s.n_aux,
        "n_constraints": s.n_constraints,
        "n_rows": s.n_rows,
        "n_nonzeros": pce.n_nonzeros(),
        "matrices": matrices,
        "n_coefficients": pce.n_coefficients(),
        "matrix_bytes": pce.matrix_bytes(),
        "bytes_per_nonzero": pce.bytes_per_nonzero(),
        "resident_bytes": pce.resident_bytes(),
        "density": {
            "a_aux": d.a_aux().count_ones(),
            "b_input": d.b_input().count_ones(),
            "b_aux": d.b_aux().count_ones(),
        },
    })
}

fn print_description(pce: &Pce) {
    let s = pce.shape();
    println!("fingerprint: {}", pce.fingerprint());
    println!(
        "shape: {} inputs (one included), {} aux, {} constraints, {} rows",
        s.n_inputs, s.n_aux, s.n_constraints, s.n_rows
    );
    for (m, name) in MatrixId::ALL.iter().zip(["a", "b", "c"]) {
        let (plus, minus, other) = pce.n_nonzeros_by_kind(*m);
        println!(
            "  {name}: {:>10} non-zeros (+1: {plus}, -1: {minus}, other: {other}), {}-byte codes",
            pce.n_nonzeros_of(*m),
            pce.code_bytes_of(*m)
        );
    }
    println!(
        "storage: {} for {} non-zeros ({:.2} bytes each), {} distinct coefficients; resident {}",
        ui::bytes(pce.matrix_bytes()),
        pce.n_nonzeros(),
        pce.bytes_per_nonzero(),
        pce.n_coefficients(),
        ui::bytes(pce.resident_bytes())
    );
    let d = pce.densities();
    println!(
        "densities: a_aux {}/{}, b_input {}/{}, b_aux {}/{}",
        d.a_aux().count_ones(),
        d.a_aux().len(),
        d.b_input().count_ones(),
        d.b_input().len(),
        d.b_aux().count_ones(),
        d.b_aux().len()
    );
}
