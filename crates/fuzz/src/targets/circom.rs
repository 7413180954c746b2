//! circom's `.r1cs` and `.wtns`, read as `pinion prove`, `setup` and `pce extract` read them.

use std::sync::Arc;

use groth16_prover::Synthesis;
use memory_budget::Category;
use pce_cache::Recorder;
use pinion::circom::{parse_wtns, R1cs};
use pinion::CircomCircuit;

use super::{self_checking_prover, Input, Target, Verdict};
use crate::fixtures::{circom_layout, Fixtures};
use crate::mutate::Seed;

/// `.r1cs`: the charge bound, the parse (its heap within the bound), the fixture witness
/// checked against it, a PCE recorded from it, and a proof when the witness fits.
pub struct R1csFile {
    fx: Arc<Fixtures>,
}

impl R1csFile {
    pub fn new(fx: &Arc<Fixtures>) -> R1csFile {
        R1csFile { fx: fx.clone() }
    }
}

impl Target for R1csFile {
    fn name(&self) -> &'static str {
        "r1cs"
    }

    fn about(&self) -> &'static str {
        "circom .r1cs: parse under its charge bound, witness check, pce extraction, proof"
    }

    fn seeds(&self) -> Vec<Seed> {
        vec![Seed {
            name: "cubic",
            layout: circom_layout(&self.fx.files.r1cs),
            bytes: self.fx.files.r1cs.clone(),
        }]
    }

    fn run(&self, input: &Input<'_>) -> Verdict {
        let Ok(bound) = R1cs::parsed_bytes_bound(input.bytes) else {
            assert!(
                R1cs::parse(input.bytes).is_err(),
                "a file whose headers the charge bound refuses was parsed"
            );
            return Verdict::Rejected;
        };
        let Ok(r1cs) = R1cs::parse(input.bytes) else {
            return Verdict::Rejected;
        };
        assert!(
            r1cs.heap_bytes() <= bound,
            "the parse holds {} bytes, more than the {} charged before it",
            r1cs.heap_bytes(),
            bound
        );
        // `pce extract --r1cs`: recording charged from an empty reservation.
        if let Ok(reservation) = input.budget.try_reserve(0, Category::Pce, "fuzz pce") {
            let _ = Recorder::record(CircomCircuit::shape_only(&r1cs), Some(reservation));
        }
        // `prove`: the fixture's witness against the (maybe mutated) circuit; when it fits,
        // a proof with the fixture's parameters either is refused or verifies.
        let Ok(circuit) = CircomCircuit::with_witness(&r1cs, &self.fx.witness) else {
            return Verdict::Accepted;
        };
        if let Some(prover) = self_checking_prover(self.fx.key.clone(), input.budget) {
            if let Ok(out) = prover.prove(Synthesis::Plain, circuit, self.fx.randomness) {
                let public = r1cs.public_values(&self.fx.witness);
                assert!(
                    groth16::verify_proof(&self.fx.pvk, &out.proof, &public).is_ok(),
                    "the prover returned a proof that does not verify"
                );
            }
        }
        Verdict::Accepted
    }
}

/// `.wtns`: the parse, the check against the fixture circuit, and a proof when it fits
/// (a satisfying witness is a valid statement: the proof must verify).
pub struct WtnsFile {
    fx: Arc<Fixtures>,
}

impl WtnsFile {
    pub fn new(fx: &Arc<Fixtures>) -> WtnsFile {
        WtnsFile { fx: fx.clone() }
    }
}

impl Target for WtnsFile {
    fn name(&self) -> &'static str {
        "wtns"
    }

    fn about(&self) -> &'static str {
        "circom .wtns: parse, witness check against the circuit, proof"
    }

    fn seeds(&self) -> Vec<Seed> {
        vec![Seed {
            name: "cubic",
            layout: circom_layout(&self.fx.files.wtns),
            bytes: self.fx.files.wtns.clone(),
        }]
    }

    fn run(&self, input: &Input<'_>) -> Verdict {
        let Ok(values) = parse_wtns(input.bytes) else {
            return Verdict::Rejected;
        };
        let Ok(circuit) = CircomCircuit::with_witness(&self.fx.r1cs, &values) else {
            return Verdict::Rejected;
        };
        let Some(prover) = self_checking_prover(self.fx.key.clone(), input.budget) else {
            return Verdict::Rejected;
        };
        let out = prover
            .prove(Synthesis::Plain, circuit, self.fx.randomness)
            .expect("a witness that satisfies the circuit proves with its parameters");
        let public = self.fx.r1cs.public_values(&values);
        assert!(
            groth16::verify_proof(&self.fx.pvk, &out.proof, &public).is_ok(),
            "the proof of a satisfying witness does not verify"
        );
        Verdict::Accepted
    }
}
