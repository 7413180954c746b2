//! Plain synthesis: evaluate a, b, c while the circuit runs (no PCE), the way groth16's
//! prover does, with every buffer growth charged to the proof's working set first.

use bellman::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use bls12_381::Scalar;
use ff::Field;
use gpu_msm::DensityMask;

use crate::charge::{Charge, SCALAR_BYTES};
use crate::ProverError;

/// First capacity of each growing vector.
const MIN_CAPACITY: usize = 1 << 10;

/// What synthesis produced: the witness, one a/b/c value per row (input rows included)
/// and groth16's densities.
pub(crate) struct PlainAssignment {
    pub(crate) inputs: Vec<Scalar>,
    pub(crate) aux: Vec<Scalar>,
    pub(crate) a: Vec<Scalar>,
    pub(crate) b: Vec<Scalar>,
    pub(crate) c: Vec<Scalar>,
    pub(crate) a_aux: DensityMask,
    pub(crate) b_input: DensityMask,
    pub(crate) b_aux: DensityMask,
    pub(crate) n_constraints: usize,
}

/// The first problem met inside `enforce`, which cannot return an error itself.
enum Failure {
    Budget(ProverError),
    Unallocated {
        constraint: usize,
        kind: &'static str,
        index: usize,
        allocated: usize,
    },
}

struct PlainCs<'c> {
    asg: PlainAssignment,
    charge: &'c mut Charge,
    failure: Option<Failure>,
}

/// Makes room for one more element, charging the new buffer before it exists. A Vec
/// reallocation holds the old and the new buffer at once, so the charge covers both
/// until the old one is gone.
fn grow_charged(
    v: &mut Vec<Scalar>,
    charge: &mut Charge,
    extra_bytes_per_slot: u64,
) -> Result<(), ProverError> {
    if v.len() < v.capacity() {
        return Ok(());
    }
    let old = v.capacity();
    let new = (old * 2).max(MIN_CAPACITY);
    charge.grow(
        new as u64 * (SCALAR_BYTES + extra_bytes_per_slot),
        "plain synthesis buffers",
    )?;
    v.reserve_exact(new - v.len());
    charge.release(old as u64 * (SCALAR_BYTES + extra_bytes_per_slot));
    Ok(())
}

/// Sums `lc` over the assignment; marks dense the variables with a nonzero coefficient
/// in the densities given (groth16's rule: the terms as written, before any merging).
fn eval(
    lc: &LinearCombination<Scalar>,
    inputs: &[Scalar],
    aux: &[Scalar],
    mut input_density: Option<&mut DensityMask>,
    mut aux_density: Option<&mut DensityMask>,
) -> Result<Scalar, (&'static str, usize, usize)> {
    let mut acc = Scalar::ZERO;
    for (var, coeff) in lc.as_ref() {
        if bool::from(coeff.is_zero()) {
            continue;
        }
        let value = match var.get_unchecked() {
            Index::Input(i) => {
                let v = *inputs.get(i).ok_or(("input", i, inputs.len()))?;
                if let Some(d) = input_density.as_deref_mut() {
                    d.set(i);
                }
                v
            }
            Index::Aux(i) => {
                let v = *aux.get(i).ok_or(("aux", i, aux.len()))?;
                if let Some(d) = aux_density.as_deref_mut() {
                    d.set(i);
                }
                v
            }
        };
        if *coeff == Scalar::ONE {
            acc += value;
        } else {
            acc += value * coeff;
        }
    }
    Ok(acc)
}

impl PlainCs<'_> {
    fn fail(&mut self, f: Failure) {
        if self.failure.is_none() {
            self.failure = Some(f);
        }
    }

    fn push_row(&mut self, a: Scalar, b: Scalar, c: Scalar) -> Result<(), ProverError> {
        grow_charged(&mut self.asg.a, self.charge, 0)?;
        grow_charged(&mut self.asg.b, self.charge, 0)?;
        grow_charged(&mut self.asg.c, self.charge, 0)?;
        self.asg.a.push(a);
        self.asg.b.push(b);
        self.asg.c.push(c);
        Ok(())
    }
}

impl ConstraintSystem<Scalar> for PlainCs<'_> {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        let value = f()?;
        // Two density bits per aux variable, charged with its slot (rounded up to a byte).
        if let Err(e) = grow_charged(&mut self.asg.aux, self.charge, 1) {
            self.fail(Failure::Budget(e));
            return Err(SynthesisError::AssignmentMissing);
        }
        self.asg.aux.push(value);
        self.asg.a_aux.push(false);
        self.asg.b_aux.push(false);
        Ok(Variable::new_unchecked(Index::Aux(self.asg.aux.len() - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        let value = f()?;
        if let Err(e) = grow_charged(&mut self.asg.inputs, self.charge, 1) {
            self.fail(Failure::Budget(e));
            return Err(SynthesisError::AssignmentMissing);
        }
        self.asg.inputs.push(value);
        self.asg.b_input.push(false);
        Ok(Variable::new_unchecked(Index::Input(
            self.asg.inputs.len() - 1,
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
        if self.failure.is_some() {
            return;
        }
        let constraint = self.asg.n_constraints;
        let (la, lb, lc) = (
            a(LinearCombination::zero()),
            b(LinearCombination::zero()),
            c(LinearCombination::zero()),
        );
        let asg = &mut self.asg;
        // Inputs are dense in A anyway (the input rows), so only aux is tracked there;
        // C has no query of its own.
        let values = eval(&la, &asg.inputs, &asg.aux, None, Some(&mut asg.a_aux)).and_then(|av| {
            let bv = eval(
                &lb,
                &asg.inputs,
                &asg.aux,
                Some(&mut asg.b_input),
                Some(&mut asg.b_aux),
            )?;
            let cv = eval(&lc, &asg.inputs, &asg.aux, None, None)?;
            Ok((av, bv, cv))
        });
        match values {
            Ok((av, bv, cv)) => {
                if let Err(e) = self.push_row(av, bv, cv) {
                    self.fail(Failure::Budget(e));
                }
                self.asg.n_constraints += 1;
            }
            Err((kind, index, allocated)) => self.fail(Failure::Unallocated {
                constraint,
                kind,
                index,
                allocated,
            }),
        }
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

/// Runs `circuit`, appends groth16's `input_i · 0 = 0` rows and pads a, b, c with zeros
/// to `domain_size(n_rows)` so the H step works in place. Every growth is charged to
/// `charge` before it happens.
pub(crate) fn synthesize<C: Circuit<Scalar>>(
    circuit: C,
    charge: &mut Charge,
    domain_size: impl Fn(usize) -> Result<usize, ProverError>,
) -> Result<PlainAssignment, ProverError> {
    let mut cs = PlainCs {
        asg: PlainAssignment {
            inputs: Vec::new(),
            aux: Vec::new(),
            a: Vec::new(),
            b: Vec::new(),
            c: Vec::new(),
            a_aux: DensityMask::new(0),
            b_input: DensityMask::new(0),
            b_aux: DensityMask::new(0),
            n_constraints: 0,
        },
        charge,
        failure: None,
    };
    let result = cs
        .alloc_input(|| "one", || Ok(Scalar::ONE))
        .and_then(|_| circuit.synthesize(&mut cs));
    match cs.failure.take() {
        Some(Failure::Budget(e)) => return Err(e),
        Some(Failure::Unallocated {
            constraint,
            kind,
            index,
            allocated,
        }) => {
            return Err(ProverError::UnallocatedVariable {
                constraint,
                kind,
                index,
                allocated,
            })
        }
        None => result.map_err(ProverError::Synthesis)?,
    }
    for i in 0..cs.asg.inputs.len() {
        let x = cs.asg.inputs[i];
        cs.push_row(x, Scalar::ZERO, Scalar::ZERO)?;
    }
    let m = domain_size(cs.asg.a.len())?;
    let PlainCs {
        mut asg, charge, ..
    } = cs;
    for v in [&mut asg.a, &mut asg.b, &mut asg.c] {
        if v.capacity() < m {
            let old = v.capacity();
            charge.grow(m as u64 * SCALAR_BYTES, "padding a, b, c to the domain")?;
            v.reserve_exact(m - v.len());
            charge.release(old as u64 * SCALAR_BYTES);
        }
        v.resize(m, Scalar::ZERO);
    }
    Ok(asg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{MimcChain, RandomR1cs, Sha256Circuit};
    use memory_budget::{Budget, Category};
    use pce_cache::reference::FullSynthesis;

    /// Plain synthesis against pce-cache's independent full-synthesis oracle: same
    /// witness, same a, b, c (then zero padding), same densities; every byte charged.
    fn check<C: Circuit<Scalar> + Clone>(name: &str, circuit: C) {
        let budget = Budget::fixed(1 << 30);
        let mut charge = Charge::reserve(&budget, 0, "test").unwrap();
        let got = synthesize(circuit.clone(), &mut charge, |n| Ok(n.next_power_of_two())).unwrap();
        let want = FullSynthesis::run(circuit).unwrap();
        assert_eq!(got.inputs, want.inputs, "{name}");
        assert_eq!(got.aux, want.aux, "{name}");
        let n_rows = want.a.len();
        assert_eq!(got.a.len(), n_rows.next_power_of_two(), "{name}");
        for (v, w, which) in [
            (&got.a, &want.a, "a"),
            (&got.b, &want.b, "b"),
            (&got.c, &want.c, "c"),
        ] {
            assert_eq!(&v[..n_rows], &w[..], "{name}: {which}");
            assert!(
                v[n_rows..].iter().all(|x| bool::from(x.is_zero())),
                "{name}: {which} padding"
            );
        }
        assert_eq!(
            got.a_aux,
            DensityMask::from_bools(want.a_aux_density.iter().copied()),
            "{name}"
        );
        assert_eq!(
            got.b_input,
            DensityMask::from_bools(want.b_input_density.iter().copied()),
            "{name}"
        );
        assert_eq!(
            got.b_aux,
            DensityMask::from_bools(want.b_aux_density.iter().copied()),
            "{name}"
        );
        let live = (got.a.capacity() + got.b.capacity() + got.c.capacity()) as u64 * SCALAR_BYTES
            + (got.inputs.capacity() + got.aux.capacity()) as u64 * (SCALAR_BYTES + 1);
        assert_eq!(charge.bytes(), live, "{name}: charge equals live buffers");
        assert_eq!(budget.snapshot().used_in(Category::WorkingSet), live);
        assert!(charge.peak() >= live);
    }

    #[test]
    fn plain_synthesis_matches_full_synthesis_oracle() {
        let seed = crate::testing::test_seed();
        for n_constraints in [0usize, 1, 7, 1500] {
            let circuit = RandomR1cs {
                n_inputs: n_constraints % 5,
                n_constraints,
                shape_seed: seed ^ n_constraints as u64,
                value_seed: seed.rotate_left(7) ^ n_constraints as u64,
                corrupt: false,
            };
            check(&format!("random-{n_constraints}"), circuit);
        }
        check("mimc", MimcChain::new(100, seed));
        check("sha256", Sha256Circuit::with_blocks(1, seed));
    }
}
