//! Reference oracle: full bellman-style synthesis that builds every linear combination and
//! evaluates it at the witness as each constraint is enforced, the way groth16 0.2's
//! `ProvingAssignment` does (same term-by-term density rule, same trailing `input·0 = 0`
//! rows). Used by the tests as the ground truth and by the benchmark as the baseline; it is
//! deliberately independent of the PCE code.

use bellman::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use bls12_381::Scalar;
use ff::Field;

/// Result of a full synthesis.
#[derive(Clone, Debug, Default)]
pub struct FullSynthesis {
    /// Public inputs, ONE first.
    pub inputs: Vec<Scalar>,
    /// Auxiliary variables.
    pub aux: Vec<Scalar>,
    /// `<A_i, w>` per row (constraints, then one row per input).
    pub a: Vec<Scalar>,
    /// `<B_i, w>` per row.
    pub b: Vec<Scalar>,
    /// `<C_i, w>` per row.
    pub c: Vec<Scalar>,
    /// A over aux, as groth16's `a_aux_density`.
    pub a_aux_density: Vec<bool>,
    /// B over inputs, as groth16's `b_input_density`.
    pub b_input_density: Vec<bool>,
    /// B over aux, as groth16's `b_aux_density`.
    pub b_aux_density: Vec<bool>,
}

impl FullSynthesis {
    /// Synthesizes `circuit` with its witness.
    pub fn run<C: Circuit<Scalar>>(circuit: C) -> Result<Self, SynthesisError> {
        let mut cs = FullSynthesis::default();
        cs.alloc_input(|| "one", || Ok(Scalar::ONE))?;
        circuit.synthesize(&mut cs)?;
        for i in 0..cs.inputs.len() {
            cs.enforce(
                || "input row",
                |lc| lc + Variable::new_unchecked(Index::Input(i)),
                |lc| lc,
                |lc| lc,
            );
        }
        Ok(cs)
    }

    fn eval(
        &self,
        lc: &LinearCombination<Scalar>,
        mut input_density: Option<&mut Vec<bool>>,
        mut aux_density: Option<&mut Vec<bool>>,
    ) -> Scalar {
        let mut acc = Scalar::ZERO;
        for (var, coeff) in lc.as_ref() {
            if coeff.is_zero_vartime() {
                continue;
            }
            let value = match var.get_unchecked() {
                Index::Input(i) => {
                    if let Some(d) = input_density.as_deref_mut() {
                        d[i] = true;
                    }
                    self.inputs[i]
                }
                Index::Aux(j) => {
                    if let Some(d) = aux_density.as_deref_mut() {
                        d[j] = true;
                    }
                    self.aux[j]
                }
            };
            // groth16 skips the multiplication for +1; so does the baseline.
            if *coeff == Scalar::ONE {
                acc += value;
            } else {
                acc += value * coeff;
            }
        }
        acc
    }
}

impl ConstraintSystem<Scalar> for FullSynthesis {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.aux.push(f()?);
        self.a_aux_density.push(false);
        self.b_aux_density.push(false);
        Ok(Variable::new_unchecked(Index::Aux(self.aux.len() - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.inputs.push(f()?);
        self.b_input_density.push(false);
        Ok(Variable::new_unchecked(Index::Input(self.inputs.len() - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        let a = a(LinearCombination::zero());
        let b = b(LinearCombination::zero());
        let c = c(LinearCombination::zero());
        let mut a_aux = std::mem::take(&mut self.a_aux_density);
        let mut b_in = std::mem::take(&mut self.b_input_density);
        let mut b_aux = std::mem::take(&mut self.b_aux_density);
        let va = self.eval(&a, None, Some(&mut a_aux));
        let vb = self.eval(&b, Some(&mut b_in), Some(&mut b_aux));
        let vc = self.eval(&c, None, None);
        self.a_aux_density = a_aux;
        self.b_input_density = b_in;
        self.b_aux_density = b_aux;
        self.a.push(va);
        self.b.push(vb);
        self.c.push(vc);
    }

    fn push_namespace<NR, N>(&mut self, _: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
    }

    fn pop_namespace(&mut self) {}

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }
}
