//! The bellman front end: recording and witness-only synthesis.

use bellman::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use bls12_381::Scalar;
use ff::Field;
use memory_budget::Reservation;

use crate::builder::{Column, R1csBuilder, RowSink};
use crate::{Pce, PceError};

fn column(v: &Variable) -> Column {
    match v.get_unchecked() {
        Index::Input(i) => Column::Input(i),
        Index::Aux(j) => Column::Aux(j),
    }
}

fn terms(lc: &LinearCombination<Scalar>) -> impl Iterator<Item = (Column, Scalar)> + '_ {
    lc.as_ref().iter().map(|(v, c)| (column(v), *c))
}

/// A `ConstraintSystem` that records A, B and C instead of evaluating them.
///
/// It allocates ONE as input 0 first, exactly like groth16's prover and generator, never calls
/// the circuit's value closures (the matrices do not depend on the witness), and on
/// [`Recorder::finish`] appends groth16's `input_i · 0 = 0` rows.
pub struct Recorder {
    builder: R1csBuilder,
}

impl Recorder {
    /// A recorder whose buffers are not charged to any budget.
    pub fn new() -> Self {
        Self::build(None)
    }

    /// A recorder that grows `reservation` before every buffer growth; if the budget refuses,
    /// recording stops and [`Recorder::finish`] returns [`PceError::Budget`].
    pub fn with_reservation(reservation: Reservation) -> Self {
        Self::build(Some(reservation))
    }

    fn build(reservation: Option<Reservation>) -> Self {
        let mut builder = R1csBuilder::new(reservation);
        builder.alloc_input();
        Recorder { builder }
    }

    /// Compacts the recording. The reservation (if any) is handed back still holding the
    /// extraction's peak; shrink it to [`Pce::resident_bytes`] once the PCE is stored.
    pub fn finish(self) -> Result<(Pce, Option<Reservation>), PceError> {
        self.builder.finish()
    }

    /// Records `circuit` in one call.
    pub fn record<C: Circuit<Scalar>>(
        circuit: C,
        reservation: Option<Reservation>,
    ) -> Result<(Pce, Option<Reservation>), PceError> {
        let mut rec = Self::build(reservation);
        circuit
            .synthesize(&mut rec)
            .map_err(|source| PceError::Synthesis {
                phase: "recording",
                source,
            })?;
        rec.finish()
    }
}

impl Default for Recorder {
    fn default() -> Self {
        Self::new()
    }
}

impl ConstraintSystem<Scalar> for Recorder {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        Ok(Variable::new_unchecked(Index::Aux(
            self.builder.alloc_aux(),
        )))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        Ok(Variable::new_unchecked(Index::Input(
            self.builder.alloc_input(),
        )))
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
        self.builder
            .push_constraint(terms(&a), terms(&b), terms(&c));
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

/// The variable assignment of one proof, in recording order: `inputs[0]` is ONE.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Witness {
    /// Public inputs, ONE first.
    pub inputs: Vec<Scalar>,
    /// Auxiliary variables.
    pub aux: Vec<Scalar>,
}

/// A `ConstraintSystem` whose `enforce` does nothing: it only runs the circuit's value
/// closures, producing the same `inputs`/`aux` order as groth16's prover.
pub struct WitnessCs {
    witness: Witness,
}

impl WitnessCs {
    /// Starts with ONE as input 0; capacities avoid regrowth when the shape is known.
    pub fn with_capacity(n_inputs: usize, n_aux: usize) -> Self {
        let mut inputs = Vec::with_capacity(n_inputs.max(1));
        inputs.push(Scalar::ONE);
        WitnessCs {
            witness: Witness {
                inputs,
                aux: Vec::with_capacity(n_aux),
            },
        }
    }

    /// Runs `circuit` and returns its assignment.
    pub fn synthesize<C: Circuit<Scalar>>(
        circuit: C,
        n_inputs: usize,
        n_aux: usize,
    ) -> Result<Witness, PceError> {
        let mut cs = Self::with_capacity(n_inputs, n_aux);
        circuit
            .synthesize(&mut cs)
            .map_err(|source| PceError::Synthesis {
                phase: "witness synthesis",
                source,
            })?;
        Ok(cs.witness)
    }

    /// The assignment so far.
    pub fn into_witness(self) -> Witness {
        self.witness
    }
}

impl ConstraintSystem<Scalar> for WitnessCs {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.witness.aux.push(f()?);
        Ok(Variable::new_unchecked(Index::Aux(
            self.witness.aux.len() - 1,
        )))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.witness.inputs.push(f()?);
        Ok(Variable::new_unchecked(Index::Input(
            self.witness.inputs.len() - 1,
        )))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, _: LA, _: LB, _: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
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
