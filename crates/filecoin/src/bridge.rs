//! bellperson circuits (over `blstrs::Scalar`) into Pinion's PCE and witness.
//!
//! Two `bellperson::ConstraintSystem`s, both concrete (bellperson requires its constraint
//! systems to be `Send`, which a wrapper around an arbitrary bellman system cannot promise):
//! [`RecordingCs`] forwards every allocation and constraint to a `pce_cache::Recorder`, and
//! [`WitnessCs`] runs only the value closures. The computed witness goes to the prover as
//! it is (`groth16_prover::Prover::prove_witness`); [`Replay`] is the same witness as a
//! bellman circuit that allocates the same values in the same order (for a prover path
//! that takes a circuit).
//!
//! Scalars cross over through their canonical little-endian bytes (both crates implement
//! the same field). Neither system is extensible nor a witness generator in bellperson's
//! sense, so circuits take their plain path, which allocates variables and enforces
//! constraints in the order bellperson's prover and generator see them.

use bellman::{ConstraintSystem as _, Index as BmIndex, Variable as BmVariable};
use bellperson::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use bls12_381::Scalar;
use ff::Field;
use memory_budget::Reservation;
use pce_cache::{Pce, Recorder, Witness};

/// blstrs → bls12_381 through canonical bytes. Zero and one, most of a Filecoin witness
/// (98.7% of a 32 GiB PoRep partition's aux values), are mapped without a conversion.
pub fn to_bls(x: &blstrs::Scalar) -> Scalar {
    use ff013::Field as _;
    if *x == blstrs::Scalar::ZERO {
        return Scalar::ZERO;
    }
    if *x == blstrs::Scalar::ONE {
        return Scalar::ONE;
    }
    let bytes = x.to_bytes_le();
    // Canonical bytes of one field are canonical in the other (the same prime); the wide
    // reduction is only there so that this function has no failure path.
    Option::from(Scalar::from_bytes(&bytes)).unwrap_or_else(|| {
        let mut wide = [0u8; 64];
        wide[..32].copy_from_slice(&bytes);
        Scalar::from_bytes_wide(&wide)
    })
}

/// bls12_381 → blstrs through canonical bytes.
pub fn to_blstrs(x: &Scalar) -> blstrs::Scalar {
    // Canonical bytes of one field are canonical in the other: the same prime.
    Option::from(blstrs::Scalar::from_bytes_le(&x.to_bytes()))
        .unwrap_or_else(|| unreachable!("canonical bls12_381 bytes are a canonical blstrs scalar"))
}

fn coefficient(c: &blstrs::Scalar) -> Scalar {
    // Most coefficients of Filecoin's circuits are ±1 (bit decompositions, equalities).
    use ff013::Field as _;
    if *c == blstrs::Scalar::ONE {
        Scalar::ONE
    } else if *c == -blstrs::Scalar::ONE {
        -Scalar::ONE
    } else {
        to_bls(c)
    }
}

fn to_bellman(v: Variable) -> BmVariable {
    BmVariable::new_unchecked(match v.get_unchecked() {
        Index::Input(i) => BmIndex::Input(i),
        Index::Aux(j) => BmIndex::Aux(j),
    })
}

fn from_bellman(v: BmVariable) -> Variable {
    Variable::new_unchecked(match v.get_unchecked() {
        BmIndex::Input(i) => Index::Input(i),
        BmIndex::Aux(j) => Index::Aux(j),
    })
}

fn lc(terms: &LinearCombination<blstrs::Scalar>) -> bellman::LinearCombination<Scalar> {
    let mut out = bellman::LinearCombination::zero();
    for (v, c) in terms.iter() {
        out = out + (coefficient(c), to_bellman(v));
    }
    out
}

/// Records a bellperson circuit into a PCE (the value closures are never called, so a
/// blank circuit records as well as a real one).
pub struct RecordingCs {
    recorder: Recorder,
}

impl RecordingCs {
    /// A recorder charging `reservation` (if any) before each buffer growth.
    pub fn new(reservation: Option<Reservation>) -> Self {
        RecordingCs {
            recorder: reservation.map_or_else(Recorder::new, Recorder::with_reservation),
        }
    }

    /// Records `circuit` in one call; the reservation comes back still holding the
    /// recording's peak (see `pce_cache::Recorder::finish`).
    pub fn record<C: Circuit<blstrs::Scalar>>(
        circuit: C,
        reservation: Option<Reservation>,
    ) -> Result<(Pce, Option<Reservation>), crate::FilecoinError> {
        let mut cs = RecordingCs::new(reservation);
        circuit
            .synthesize(&mut cs)
            .map_err(|source| crate::FilecoinError::Synthesis {
                phase: "recording",
                partition: None,
                source: Box::new(source),
            })?;
        Ok(cs.recorder.finish()?)
    }
}

impl ConstraintSystem<blstrs::Scalar> for RecordingCs {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<blstrs::Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        // The recorder never evaluates values nor fails to allocate.
        let v = self
            .recorder
            .alloc(|| "", || Ok(Scalar::ZERO))
            .map_err(|_| SynthesisError::AssignmentMissing)?;
        Ok(from_bellman(v))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<blstrs::Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        let v = self
            .recorder
            .alloc_input(|| "", || Ok(Scalar::ZERO))
            .map_err(|_| SynthesisError::AssignmentMissing)?;
        Ok(from_bellman(v))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<blstrs::Scalar>) -> LinearCombination<blstrs::Scalar>,
        LB: FnOnce(LinearCombination<blstrs::Scalar>) -> LinearCombination<blstrs::Scalar>,
        LC: FnOnce(LinearCombination<blstrs::Scalar>) -> LinearCombination<blstrs::Scalar>,
    {
        let a = lc(&a(LinearCombination::zero()));
        let b = lc(&b(LinearCombination::zero()));
        let c = lc(&c(LinearCombination::zero()));
        self.recorder.enforce(|| "", |_| a, |_| b, |_| c);
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

/// The rest of a witness-only `ConstraintSystem`: constraints are not built, namespaces
/// ignored, the system is its own root.
macro_rules! witness_only_rest {
    () => {
        fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, _: LA, _: LB, _: LC)
        where
            A: FnOnce() -> AR,
            AR: Into<String>,
            LA: FnOnce(LinearCombination<blstrs::Scalar>) -> LinearCombination<blstrs::Scalar>,
            LB: FnOnce(LinearCombination<blstrs::Scalar>) -> LinearCombination<blstrs::Scalar>,
            LC: FnOnce(LinearCombination<blstrs::Scalar>) -> LinearCombination<blstrs::Scalar>,
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
    };
}

/// Witness-only synthesis of a bellperson circuit: the value closures run, linear
/// combinations are never built. Inputs start with ONE, as groth16 and bellperson order them.
pub struct WitnessCs {
    witness: Witness,
}

impl WitnessCs {
    /// An empty assignment (ONE allocated) with room for the given counts.
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

    /// The assignment so far.
    pub fn into_witness(self) -> Witness {
        self.witness
    }

    /// Runs `circuit`'s witness computation.
    pub fn synthesize<C: Circuit<blstrs::Scalar>>(
        circuit: C,
        n_inputs: usize,
        n_aux: usize,
    ) -> Result<Witness, SynthesisError> {
        let mut cs = WitnessCs::with_capacity(n_inputs, n_aux);
        circuit.synthesize(&mut cs)?;
        Ok(cs.witness)
    }
}

impl ConstraintSystem<blstrs::Scalar> for WitnessCs {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<blstrs::Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.witness.aux.push(to_bls(&f()?));
        Ok(Variable::new_unchecked(Index::Aux(
            self.witness.aux.len() - 1,
        )))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<blstrs::Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.witness.inputs.push(to_bls(&f()?));
        Ok(Variable::new_unchecked(Index::Input(
            self.witness.inputs.len() - 1,
        )))
    }

    witness_only_rest!();
}

/// Witness-only synthesis of one piece of a circuit, into its place in the whole witness
/// or into a vector of its own. A piece first allocates what its part needs from the rest
/// of the circuit (values computed, then dropped: the scratch), then calls
/// [`PieceCs::start_here`]; the aux values after that fill the piece's place in order and
/// the inputs after it are kept. How many it allocated is checked by the caller
/// ([`PieceCs::counts`]): a piece of another shape must not pass as this one.
pub(crate) struct PieceCs<'a> {
    start: Option<(usize, usize)>,
    seen: (usize, usize),
    inputs: Vec<Scalar>,
    aux: Sink<'a>,
}

/// Where a piece's aux values go.
enum Sink<'a> {
    /// Its place in the whole witness (values past its end are dropped and counted).
    Place(&'a mut [Scalar]),
    /// A vector of its own, for a piece whose place is not known yet.
    Grow(Vec<Scalar>),
}

impl<'a> PieceCs<'a> {
    /// A piece whose aux values fill `place`.
    pub(crate) fn into_place(place: &'a mut [Scalar]) -> Self {
        Self::with(Sink::Place(place))
    }

    /// A piece whose aux values go into a vector of its own ([`PieceCs::into_parts`]).
    pub(crate) fn growing() -> PieceCs<'static> {
        PieceCs::with(Sink::Grow(Vec::new()))
    }

    fn with(aux: Sink<'a>) -> Self {
        PieceCs {
            start: None,
            seen: (1, 0),
            inputs: Vec::new(),
            aux,
        }
    }

    /// Ends the scratch: what is allocated from here on is the piece's own.
    pub(crate) fn start_here(&mut self) {
        self.start = Some(self.seen);
    }

    /// The inputs and aux values the piece allocated after [`PieceCs::start_here`].
    pub(crate) fn counts(&self) -> (usize, usize) {
        match self.start {
            Some((i, a)) => (self.seen.0 - i, self.seen.1 - a),
            None => (0, 0),
        }
    }

    /// The inputs kept (in allocation order) and, for a growing piece, its aux values.
    pub(crate) fn into_parts(self) -> (Vec<Scalar>, Option<Vec<Scalar>>) {
        match self.aux {
            Sink::Place(_) => (self.inputs, None),
            Sink::Grow(aux) => (self.inputs, Some(aux)),
        }
    }
}

impl ConstraintSystem<blstrs::Scalar> for PieceCs<'_> {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<blstrs::Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        // The closure always runs: gadgets keep the value it computes.
        let x = f()?;
        let j = self.seen.1;
        if let Some((_, from)) = self.start {
            match &mut self.aux {
                Sink::Place(place) => {
                    if let Some(slot) = place.get_mut(j - from) {
                        *slot = to_bls(&x);
                    }
                }
                Sink::Grow(aux) => aux.push(to_bls(&x)),
            }
        }
        self.seen.1 += 1;
        Ok(Variable::new_unchecked(Index::Aux(j)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<blstrs::Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        let x = f()?;
        let i = self.seen.0;
        if self.start.is_some() {
            self.inputs.push(to_bls(&x));
        }
        self.seen.0 += 1;
        Ok(Variable::new_unchecked(Index::Input(i)))
    }

    witness_only_rest!();
}

/// A computed witness as a bellman circuit: allocates the inputs (after ONE), then the aux
/// values, and enforces nothing. With a PCE the prover needs nothing else: the matrices
/// come from the recording, and only the two value vectors (each in allocation order)
/// matter, not how their allocations interleaved.
pub struct Replay(pub Witness);

impl bellman::Circuit<Scalar> for Replay {
    fn synthesize<CS: bellman::ConstraintSystem<Scalar>>(
        self,
        cs: &mut CS,
    ) -> Result<(), bellman::SynthesisError> {
        let Witness { inputs, aux } = self.0;
        for x in inputs.into_iter().skip(1) {
            cs.alloc_input(|| "", || Ok(x))?;
        }
        for x in aux {
            cs.alloc(|| "", || Ok(x))?;
        }
        Ok(())
    }
}
