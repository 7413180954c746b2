//! `pinion setup`: parameters for a circom circuit from Pinion's multi-core generator
//! (`groth16_prover::setup`: the same file groth16's generator writes for the same RNG),
//! or a snarkjs `.zkey` for it (`setup::generate_zkey`). Insecure: for testing only.

use std::path::Path;

use anyhow::Context;
use pinion::CircomCircuit;
use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::ui::{self, Stage};
use crate::Outcome;

/// The file `pinion setup` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SetupFormat {
    /// `groth16::Parameters::write`'s layout (bellman, bellperson, Filecoin).
    Params,
    /// snarkjs's Groth16 `.zkey` for BLS12-381.
    Zkey,
}

impl SetupFormat {
    /// The format asked for, else the one `out`'s extension names (`.zkey`), else params.
    pub fn resolve(asked: Option<SetupFormat>, out: &Path) -> SetupFormat {
        asked.unwrap_or_else(|| {
            if out
                .extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("zkey"))
            {
                SetupFormat::Zkey
            } else {
                SetupFormat::Params
            }
        })
    }
}

/// Generates and writes the parameters.
pub fn run(
    r1cs_path: &Path,
    out: &Path,
    seed: Option<u64>,
    format: Option<SetupFormat>,
    budget: Option<&str>,
) -> anyhow::Result<Outcome> {
    let format = SetupFormat::resolve(format, out);
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
        "generating {} on {} cores",
        match format {
            SetupFormat::Params => "parameters",
            SetupFormat::Zkey => "a snarkjs zkey",
        },
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    ));
    // (qap at tau, tables, points, peak charged)
    let mut report = None;
    let mut rng: Box<dyn rand::Rng> = match seed {
        Some(seed) => Box::new(StdRng::seed_from_u64(seed)),
        None => Box::new(rand::rng()),
    };
    super::write_atomic(out, |w| {
        report = Some(
            match format {
                SetupFormat::Params => groth16_prover::setup::generate(&pce, &mut *rng, &budget, w)
                    .map(|r| {
                        (
                            r.qap_time,
                            r.table_time,
                            r.points_time,
                            r.peak_charged_bytes,
                        )
                    }),
                SetupFormat::Zkey => {
                    groth16_prover::setup::generate_zkey(&pce, &mut *rng, &budget, w).map(|r| {
                        (
                            r.qap_time,
                            r.table_time,
                            r.points_time,
                            r.peak_charged_bytes,
                        )
                    })
                }
            }
            .map_err(std::io::Error::other)?,
        );
        Ok(())
    })
    .context("parameter generation failed")?;
    stage.finish();
    if let Some((qap, tables, points, peak)) = report {
        ui::note(format!(
            "qap at tau {}, tables {}, points {}; peak charged {}",
            ui::secs(qap),
            ui::secs(tables),
            ui::secs(points),
            ui::bytes(peak)
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
