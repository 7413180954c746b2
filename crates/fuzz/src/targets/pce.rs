//! PCE files: the checked and the unchecked load, evaluation of whatever loads, and a proof
//! through a loaded PCE of the fixture circuit's shape.

use std::sync::Arc;

use bls12_381::Scalar;
use ff::Field;
use groth16_prover::Synthesis;
use memory_budget::Category;
use pce_cache::{Pce, PceError};
use pinion::CircomCircuit;

use super::{self_checking_prover, Input, Target, Verdict};
use crate::fixtures::{pce_layout, pce_reseal, Fixtures};
use crate::mutate::Seed;

/// `Pce::load` and `Pce::load_unchecked`, then the loaded matrices used.
pub struct PceFile {
    fx: Arc<Fixtures>,
}

impl PceFile {
    pub fn new(fx: &Arc<Fixtures>) -> PceFile {
        PceFile { fx: fx.clone() }
    }
}

/// Evaluates a, b, c and runs the row check on a witness of ones (buffers charged first).
fn exercise(pce: &Pce, input: &Input<'_>) -> Result<(), PceError> {
    let s = pce.shape();
    let scalars = s.n_inputs + s.n_aux + 3 * s.n_rows;
    let Ok(_charge) =
        input
            .budget
            .try_reserve(scalars * 32, Category::WorkingSet, "fuzz pce evaluation")
    else {
        return Ok(());
    };
    let inputs = vec![Scalar::ONE; s.n_inputs as usize];
    let aux = vec![Scalar::ONE; s.n_aux as usize];
    let n = s.n_rows as usize;
    let (mut a, mut b, mut c) = (
        vec![Scalar::ZERO; n],
        vec![Scalar::ZERO; n],
        vec![Scalar::ZERO; n],
    );
    pce.evaluate_into(&inputs, &aux, &mut a, &mut b, &mut c)?;
    let _ = pce.check(&inputs, &aux);
    Ok(())
}

impl Target for PceFile {
    fn name(&self) -> &'static str {
        "pce"
    }

    fn about(&self) -> &'static str {
        "pce files: checked and unchecked load (checksums resealed after some mutations), evaluation, a proof through the pce"
    }

    fn seeds(&self) -> Vec<Seed> {
        [
            ("cubic", &self.fx.files.pce_cubic),
            ("wide", &self.fx.files.pce_wide),
        ]
        .into_iter()
        .map(|(name, bytes)| Seed {
            name,
            layout: pce_layout(bytes),
            bytes: bytes.clone(),
        })
        .collect()
    }

    /// A third of the inputs keep the mutated checksums (so the checksums refuse them), a
    /// third get a fresh header checksum and fingerprint (reaching the structure checks of
    /// the unchecked load), a third fresh section checksums too (reaching them through the
    /// checked load as well).
    fn fixup(&self, bytes: &mut Vec<u8>, knob: u64) {
        match knob % 3 {
            0 => {}
            1 => pce_reseal(bytes, false),
            _ => pce_reseal(bytes, true),
        }
    }

    fn run(&self, input: &Input<'_>) -> Verdict {
        let checked = Pce::load(input.path, None);
        let unchecked = Pce::load_unchecked(input.path, None);
        if checked.is_ok() {
            assert!(
                unchecked.is_ok(),
                "the checked load accepted a file the unchecked load refuses: {:?}",
                unchecked.err()
            );
        }
        let Ok(pce) = unchecked else {
            return Verdict::Rejected;
        };
        // Whatever loads is evaluated without a panic; an evaluation error is a refusal.
        if exercise(&pce, input).is_err() {
            return Verdict::Rejected;
        }
        // A PCE of the fixture's shape drives a proof of the fixture's witness: refused, or
        // a proof that verifies.
        let s = pce.shape();
        let fixture = &self.fx.r1cs;
        if s.n_inputs == u64::from(fixture.n_public()) + 1
            && s.n_aux == u64::from(fixture.n_wires() - fixture.n_public() - 1)
        {
            if let Some(prover) = self_checking_prover(self.fx.key.clone(), input.budget) {
                let circuit = CircomCircuit::with_witness(fixture, &self.fx.witness)
                    .expect("the fixture witness satisfies the fixture circuit");
                if let Ok(out) = prover.prove(Synthesis::Pce(&pce), circuit, self.fx.randomness) {
                    assert!(
                        groth16::verify_proof(&self.fx.pvk, &out.proof, &self.fx.public).is_ok(),
                        "a proof through a loaded pce does not verify"
                    );
                }
            }
        }
        Verdict::Accepted
    }
}
