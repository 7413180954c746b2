//! A parsed `.r1cs` (and optionally its witness) as a bellman circuit.

use bellman::{Circuit, ConstraintSystem, LinearCombination, SynthesisError, Variable};
use bls12_381::Scalar;

use super::r1cs::{R1cs, Term};
use super::CircomError;

/// The circuit bellman sees for a circom constraint system.
///
/// Wire 0 is bellman's own input 0 (ONE); the public outputs, then the public inputs,
/// become `alloc_input` in wire order; every other wire is `alloc` in wire order; each
/// constraint is one `enforce` with its linear combinations as written. So
/// `groth16::generate_random_parameters` on this circuit gives exactly the parameters
/// `pinion setup` writes, and the public inputs of a proof are outputs then inputs.
#[derive(Clone, Copy, Debug)]
pub struct CircomCircuit<'a> {
    r1cs: &'a R1cs,
    witness: Option<&'a [Scalar]>,
}

impl<'a> CircomCircuit<'a> {
    /// The shape only (parameter generation, PCE recording): values are never asked for.
    pub fn shape_only(r1cs: &'a R1cs) -> CircomCircuit<'a> {
        CircomCircuit {
            r1cs,
            witness: None,
        }
    }

    /// With a witness, which must satisfy the system ([`R1cs::check_witness`] is run
    /// here, so an unsatisfied witness is reported in circom's terms before any proving).
    pub fn with_witness(
        r1cs: &'a R1cs,
        witness: &'a [Scalar],
    ) -> Result<CircomCircuit<'a>, CircomError> {
        r1cs.check_witness(witness)?;
        Ok(CircomCircuit {
            r1cs,
            witness: Some(witness),
        })
    }
}

fn lc(vars: &[Variable], terms: &[Term]) -> LinearCombination<Scalar> {
    // Wires were range-checked when the R1cs was built; a bad one would be a bug, and
    // maps to ONE rather than panicking.
    terms.iter().fold(LinearCombination::zero(), |acc, t| {
        let v = vars.get(t.wire as usize).copied().unwrap_or(vars[0]);
        acc + (t.coeff, v)
    })
}

impl Circuit<Scalar> for CircomCircuit<'_> {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let n_wires = self.r1cs.n_wires() as usize;
        let n_public = self.r1cs.n_public() as usize;
        let mut vars = Vec::with_capacity(n_wires);
        vars.push(CS::one());
        for w in 1..n_wires {
            let value = || {
                self.witness
                    .and_then(|v| v.get(w).copied())
                    .ok_or(SynthesisError::AssignmentMissing)
            };
            let var = if w <= n_public {
                cs.alloc_input(|| format!("public wire {w}"), value)?
            } else {
                cs.alloc(|| format!("wire {w}"), value)?
            };
            vars.push(var);
        }
        for (i, c) in self.r1cs.constraints().iter().enumerate() {
            cs.enforce(
                || format!("constraint {i}"),
                |_| lc(&vars, &c.a),
                |_| lc(&vars, &c.b),
                |_| lc(&vars, &c.c),
            );
        }
        Ok(())
    }
}
