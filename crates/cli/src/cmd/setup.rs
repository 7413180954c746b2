//! `pinion setup`: parameters for a circom circuit from Pinion's multi-core generator
//! (`groth16_prover::setup`: the same file groth16's generator writes for the same RNG).

use std::path::Path;

use anyhow::Context;
use pinion::CircomCircuit;
use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::ui::{self, Stage};
use crate::Outcome;

/// Generates and writes the parameters.
pub fn run(
    r1cs_path: &Path,
    out: &Path,
    seed: Option<u64>,
    budget: Option<&str>,
) -> anyhow::Result<Outcome> {
    let budget = super::host_budget(budget)?;
    let (r1cs, _r1cs_charge) = super::read_r1cs(r1cs_path, &budget)?;
    ui::note(format!(
        "circuit {}: {} constraints, {} wires, {} public values",
        r1cs_path.display(),
        r1cs.constraints().len(),
        r1cs.n_wires(),
        r1cs.n_public()
    ));
    // Record the circuit, then Pinion's generator (all cores; the same file as
    // groth16::generate_random_parameters for the same RNG), streaming the points to the
    // file; it charges what it holds to the budget.
    let stage = Stage::start("recording the circuit");
    let pce = pce_cache::Pce::record(CircomCircuit::shape_only(&r1cs))
        .context("cannot record the circuit")?;
    drop(_r1cs_charge);
    drop(r1cs);
    stage.finish();
    let stage = Stage::start(format!(
        "generating parameters on {} cores",
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    ));
    let mut report = None;
    let mut rng: Box<dyn rand::Rng> = match seed {
        Some(seed) => Box::new(StdRng::seed_from_u64(seed)),
        None => Box::new(rand::rng()),
    };
    super::write_atomic(out, |w| {
        let r = groth16_prover::setup::generate(&pce, &mut *rng, &budget, w)
            .map_err(std::io::Error::other)?;
        report = Some(r);
        Ok(())
    })
    .context("parameter generation failed")?;
    stage.finish();
    if let Some(r) = &report {
        ui::note(format!(
            "qap at tau {}, tables {}, points {}; peak charged {}",
            ui::secs(r.qap_time),
            ui::secs(r.table_time),
            ui::secs(r.points_time),
            ui::bytes(r.peak_charged_bytes)
        ));
    }
    let n_bytes = std::fs::metadata(out).map(|m| m.len()).unwrap_or(0);
    println!("wrote {} ({})", out.display(), ui::bytes(n_bytes));
    println!(
        "for testing only: insecure (the toxic waste came from {} and was not destroyed)",
        if seed.is_some() {
            "a seeded PRNG"
        } else {
            "the thread RNG"
        }
    );
    Ok(Outcome::Success)
}
