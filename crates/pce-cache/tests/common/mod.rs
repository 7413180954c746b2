//! Test circuits, seeds and the comparison helper shared by the integration tests.
#![allow(dead_code)]

use bellman::gadgets::boolean::{AllocatedBit, Boolean};
use bellman::gadgets::multipack;
use bellman::gadgets::num::AllocatedNum;
use bellman::gadgets::sha256::sha256;
use bellman::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use bls12_381::Scalar;
use ff::{Field, PrimeField};
use pce_cache::reference::FullSynthesis;
use pce_cache::Pce;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

/// Seed from `PINION_SEED` or the clock, printed so a failure can be replayed.
pub fn seed(test: &str) -> u64 {
    let seed = std::env::var("PINION_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        });
    eprintln!("seed = {seed} ({test})");
    seed
}

pub fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

/// SHA-256 over `n_blocks` compression blocks (message of 64·n − 9 bytes, so padding fits),
/// digest packed into public inputs.
#[derive(Clone)]
pub struct Sha256Circuit {
    pub n_blocks: usize,
    pub message: Option<Vec<u8>>,
}

impl Sha256Circuit {
    pub fn message_len(n_blocks: usize) -> usize {
        64 * n_blocks - 9
    }

    pub fn random(n_blocks: usize, rng: &mut StdRng) -> Self {
        let msg = (0..Self::message_len(n_blocks))
            .map(|_| rng.random::<u8>())
            .collect();
        Sha256Circuit {
            n_blocks,
            message: Some(msg),
        }
    }
}

impl Circuit<Scalar> for Sha256Circuit {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let len = Self::message_len(self.n_blocks);
        let bits: Vec<Option<bool>> = match &self.message {
            Some(m) => m
                .iter()
                .flat_map(|&byte| (0..8).rev().map(move |i| Some((byte >> i) & 1 == 1)))
                .collect(),
            None => vec![None; len * 8],
        };
        let bits = bits
            .into_iter()
            .enumerate()
            .map(|(i, b)| {
                AllocatedBit::alloc(cs.namespace(|| format!("bit {i}")), b).map(Boolean::from)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let digest = sha256(cs.namespace(|| "sha256"), &bits)?;
        multipack::pack_into_inputs(cs.namespace(|| "pack"), &digest)
    }
}

/// Boolean, num and multipack gadgets: xor/and/not chains, field products, strict bit
/// decomposition, packing into inputs.
#[derive(Clone)]
pub struct BooleanCircuit {
    pub bits: Vec<bool>,
    pub x: Scalar,
}

impl BooleanCircuit {
    pub fn random(n_bits: usize, rng: &mut StdRng) -> Self {
        BooleanCircuit {
            bits: (0..n_bits).map(|_| rng.random::<bool>()).collect(),
            x: Scalar::random(&mut *rng),
        }
    }
}

impl Circuit<Scalar> for BooleanCircuit {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let bits = self
            .bits
            .iter()
            .enumerate()
            .map(|(i, &b)| {
                AllocatedBit::alloc(cs.namespace(|| format!("b{i}")), Some(b)).map(Boolean::from)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut acc = bits[0].clone();
        let mut mixed = Vec::new();
        for (i, b) in bits.iter().enumerate().skip(1) {
            let x = Boolean::xor(cs.namespace(|| format!("xor{i}")), &acc, b)?;
            let a = Boolean::and(cs.namespace(|| format!("and{i}")), &x, &b.not())?;
            mixed.push(a.clone());
            mixed.push(x.clone());
            acc = x;
        }
        multipack::pack_into_inputs(cs.namespace(|| "pack mixed"), &mixed)?;
        let x = AllocatedNum::alloc(cs.namespace(|| "x"), || Ok(self.x))?;
        let y = x.square(cs.namespace(|| "x^2"))?;
        let z = y.mul(cs.namespace(|| "x^3"), &x)?;
        let zbits = z.to_bits_le_strict(cs.namespace(|| "z bits"))?;
        multipack::pack_into_inputs(cs.namespace(|| "pack z"), &zbits[..64])?;
        z.inputize(cs.namespace(|| "z input"))
    }
}

/// A MiMC-style chain x ← (x + k_i)^3 with a distinct random constant per round, so the
/// coefficient table outgrows one-byte codes.
#[derive(Clone)]
pub struct MimcCircuit {
    pub x0: Scalar,
    pub constants: Vec<Scalar>,
}

impl MimcCircuit {
    pub fn random(rounds: usize, rng: &mut StdRng) -> Self {
        MimcCircuit {
            x0: Scalar::random(&mut *rng),
            constants: (0..rounds).map(|_| Scalar::random(&mut *rng)).collect(),
        }
    }
}

impl Circuit<Scalar> for MimcCircuit {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let mut x_val = self.x0;
        let mut x = cs.alloc(|| "x0", || Ok(x_val))?;
        for (i, k) in self.constants.iter().enumerate() {
            let t_val = x_val + k;
            let t2_val = t_val.square();
            let t2 = cs.alloc(|| format!("t2 {i}"), || Ok(t2_val))?;
            // (x + k)·(x + k) = t2
            cs.enforce(
                || format!("square {i}"),
                |lc| lc + x + (*k, CS::one()),
                |lc| lc + x + (*k, CS::one()),
                |lc| lc + t2,
            );
            let next_val = t2_val * t_val;
            let next = if i + 1 == self.constants.len() {
                cs.alloc_input(|| "out", || Ok(next_val))?
            } else {
                cs.alloc(|| format!("x{}", i + 1), || Ok(next_val))?
            };
            // t2·(x + k) = next
            cs.enforce(
                || format!("cube {i}"),
                |lc| lc + t2,
                |lc| lc + x + (*k, CS::one()),
                |lc| lc + next,
            );
            x = next;
            x_val = next_val;
        }
        Ok(())
    }
}

/// A variable of a random R1CS.
#[derive(Copy, Clone, Debug)]
pub enum V {
    Input(usize),
    Aux(usize),
}

pub type Lc = Vec<(V, Scalar)>;

/// Random R1CS with explicit term lists (so tests can evaluate it naively): duplicates,
/// zero coefficients, cancelling terms, small and random coefficients, long rows. Variables
/// are allocated interleaved with constraints; a constraint only uses variables that exist.
#[derive(Clone, Debug)]
pub struct RandomR1cs {
    /// Values of inputs 1.. (ONE is implicit) and aux, in allocation order.
    pub inputs: Vec<Scalar>,
    pub aux: Vec<Scalar>,
    /// Allocation schedule: before constraint `i`, allocate these (true = input).
    pub allocs_before: Vec<Vec<bool>>,
    pub constraints: Vec<(Lc, Lc, Lc)>,
}

impl RandomR1cs {
    /// `n_constraints` rows; with `satisfied`, each C is a fresh aux holding `<A,w>·<B,w>`.
    pub fn random(
        n_constraints: usize,
        satisfied: bool,
        wide_coeffs: bool,
        rng: &mut StdRng,
    ) -> Self {
        let mut inputs = vec![];
        let mut aux = vec![];
        let mut allocs_before = vec![];
        let mut constraints = vec![];
        let coeff = |rng: &mut StdRng| -> Scalar {
            match rng.random_range(0..10u32) {
                0..=3 => Scalar::ONE,
                4..=5 => -Scalar::ONE,
                6 => Scalar::ZERO,
                7 => Scalar::from(rng.random_range(2..1000u64)),
                8 => -Scalar::from(rng.random_range(2..1000u64)),
                _ if wide_coeffs => Scalar::random(&mut *rng),
                _ => Scalar::from(1u64 << rng.random_range(0..63u32)),
            }
        };
        for _ in 0..n_constraints {
            let mut allocs = vec![];
            for _ in 0..rng.random_range(0..3u32) {
                let is_input = rng.random_range(0..8u32) == 0;
                if is_input {
                    inputs.push(Scalar::random(&mut *rng));
                } else {
                    aux.push(Scalar::random(&mut *rng));
                }
                allocs.push(is_input);
            }
            if aux.is_empty() {
                aux.push(Scalar::random(&mut *rng));
                allocs.push(false);
            }
            let n_in = inputs.len() + 1;
            let n_aux = aux.len();
            let lc = |rng: &mut StdRng| -> Lc {
                let len = match rng.random_range(0..40u32) {
                    0 => rng.random_range(255..400usize),
                    1..=3 => 0,
                    _ => rng.random_range(1..6usize),
                };
                let mut terms: Lc = (0..len)
                    .map(|_| {
                        let v = if rng.random_range(0..6u32) == 0 {
                            V::Input(rng.random_range(0..n_in))
                        } else {
                            V::Aux(rng.random_range(0..n_aux))
                        };
                        (v, coeff(rng))
                    })
                    .collect();
                if !terms.is_empty() && rng.random_range(0..5u32) == 0 {
                    // duplicate a term, sometimes cancelling it
                    let (v, c) = terms[0];
                    let c2 = if rng.random_bool(0.5) { -c } else { c };
                    terms.push((v, c2));
                }
                terms
            };
            let a = lc(rng);
            let b = lc(rng);
            let c = if satisfied {
                let w = |v: &V| match *v {
                    V::Input(0) => Scalar::ONE,
                    V::Input(i) => inputs[i - 1],
                    V::Aux(j) => aux[j],
                };
                let ev = |l: &Lc| l.iter().fold(Scalar::ZERO, |acc, (v, c)| acc + w(v) * c);
                let prod = ev(&a) * ev(&b);
                aux.push(prod);
                allocs.push(false);
                vec![(V::Aux(aux.len() - 1), Scalar::ONE)]
            } else {
                lc(rng)
            };
            allocs_before.push(allocs);
            constraints.push((a, b, c));
        }
        RandomR1cs {
            inputs,
            aux,
            allocs_before,
            constraints,
        }
    }

    /// Naive oracle: `<A_i,w>·<B_i,w> - <C_i,w>` for every synthesized row.
    pub fn first_unsatisfied(&self, inputs: &[Scalar], aux: &[Scalar]) -> Option<usize> {
        let w = |v: &V| match *v {
            V::Input(i) => inputs[i],
            V::Aux(j) => aux[j],
        };
        let ev = |l: &Lc| l.iter().fold(Scalar::ZERO, |acc, (v, c)| acc + w(v) * c);
        self.constraints
            .iter()
            .position(|(a, b, c)| ev(a) * ev(b) != ev(c))
    }
}

fn var(v: V) -> Variable {
    match v {
        V::Input(i) => Variable::new_unchecked(Index::Input(i)),
        V::Aux(j) => Variable::new_unchecked(Index::Aux(j)),
    }
}

fn lc_of(terms: &Lc, mut lc: LinearCombination<Scalar>) -> LinearCombination<Scalar> {
    for &(v, c) in terms {
        lc = lc + (c, var(v));
    }
    lc
}

impl Circuit<Scalar> for RandomR1cs {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let (mut ni, mut na) = (0, 0);
        for (allocs, (a, b, c)) in self.allocs_before.iter().zip(&self.constraints) {
            for &is_input in allocs {
                if is_input {
                    let v = self.inputs[ni];
                    cs.alloc_input(|| "in", || Ok(v))?;
                    ni += 1;
                } else {
                    let v = self.aux[na];
                    cs.alloc(|| "aux", || Ok(v))?;
                    na += 1;
                }
            }
            cs.enforce(
                || "c",
                |lc| lc_of(a, lc),
                |lc| lc_of(b, lc),
                |lc| lc_of(c, lc),
            );
        }
        Ok(())
    }
}

/// Records `circuit`, synthesizes its witness, evaluates through the PCE and compares with
/// full synthesis: assignment, a, b, c (with padding), and groth16's densities.
pub fn assert_pce_matches<C: Circuit<Scalar> + Clone>(circuit: C) -> Pce {
    let pce = Pce::record(circuit.clone()).expect("record");
    assert_pce_matches_with(&pce, circuit);
    pce
}

pub fn assert_pce_matches_with<C: Circuit<Scalar> + Clone>(pce: &Pce, circuit: C) {
    let full = FullSynthesis::run(circuit.clone()).expect("full synthesis");
    let w = pce.synthesize_witness(circuit.clone()).expect("witness");
    assert_eq!(w.inputs, full.inputs, "inputs");
    assert_eq!(w.aux, full.aux, "aux");
    let shape = pce.shape();
    assert_eq!(shape.n_rows as usize, full.a.len(), "rows");
    assert_eq!(shape.n_inputs as usize, full.inputs.len());
    assert_eq!(shape.n_aux as usize, full.aux.len());
    // A padded buffer: rows then zeros, as an FFT domain wants.
    let n = full.a.len() + 5;
    let junk = Scalar::from(7u64);
    let (mut a, mut b, mut c) = (vec![junk; n], vec![junk; n], vec![junk; n]);
    pce.evaluate_into(&w.inputs, &w.aux, &mut a, &mut b, &mut c)
        .expect("evaluate");
    for (name, got, want) in [("a", &a, &full.a), ("b", &b, &full.b), ("c", &c, &full.c)] {
        if let Some(i) = (0..want.len()).find(|&i| got[i] != want[i]) {
            panic!("{name}[{i}] differs from full synthesis");
        }
        assert!(
            got[want.len()..].iter().all(|x| bool::from(x.is_zero())),
            "{name} padding"
        );
    }
    let d = pce.densities();
    let bits = |d: &pce_cache::Density| d.iter().collect::<Vec<bool>>();
    assert_eq!(bits(d.a_aux()), full.a_aux_density, "a_aux density");
    assert_eq!(bits(d.b_input()), full.b_input_density, "b_input density");
    assert_eq!(bits(d.b_aux()), full.b_aux_density, "b_aux density");
    assert!(
        d.a_input().iter().all(|x| x),
        "a_input density is full in groth16"
    );
    assert_eq!(d.a_input().len(), full.inputs.len());
    // overlapped synthesis + evaluation gives the same witness and vectors
    let (mut a2, mut b2, mut c2) = (vec![junk; n], vec![junk; n], vec![junk; n]);
    let w2 = pce
        .synthesize_and_evaluate(circuit.clone(), &mut a2, &mut b2, &mut c2)
        .expect("synthesize_and_evaluate");
    assert_eq!(w2, w, "pipelined witness");
    assert!(a2 == a && b2 == b && c2 == c, "pipelined a/b/c");
    // per-matrix evaluation agrees too
    let mut one = vec![Scalar::ZERO; full.a.len()];
    pce.evaluate_matrix_into(pce_cache::MatrixId::B, &w.inputs, &w.aux, &mut one)
        .expect("evaluate b");
    assert_eq!(one, full.b, "b via evaluate_matrix_into");
    let _ = Scalar::CAPACITY;
}
