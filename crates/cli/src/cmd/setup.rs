//! `pinion setup`: parameters for a circom circuit from groth16's generator.

use std::path::Path;

use anyhow::Context;
use bls12_381::Bls12;
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
    let n_rows = r1cs.constraints().len() as u64 + u64::from(r1cs.n_public()) + 1;
    let _generator_charge = super::charge_generator(&budget, u64::from(r1cs.n_wires()), n_rows)?;
    ui::note(format!(
        "circuit {}: {} constraints, {} wires, {} public values",
        r1cs_path.display(),
        r1cs.constraints().len(),
        r1cs.n_wires(),
        r1cs.n_public()
    ));
    let stage = Stage::start("generating parameters (groth16 generator)");
    let circuit = CircomCircuit::shape_only(&r1cs);
    let params = match seed {
        Some(seed) => groth16::generate_random_parameters::<Bls12, _, _>(
            circuit,
            &mut StdRng::seed_from_u64(seed),
        ),
        None => groth16::generate_random_parameters::<Bls12, _, _>(circuit, &mut rand::rng()),
    }
    .context("parameter generation failed")?;
    stage.finish();
    super::write_atomic(out, |w| params.write(w))?;
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
