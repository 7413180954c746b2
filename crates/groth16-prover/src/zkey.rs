//! Proving from snarkjs's `.zkey` (BLS12-381): the key, the witness as a circuit, and
//! [`ZkeyProver`], the entry point. srs-store reads the zkey (`srs_store::ZkeyFile`): its
//! bases into srs-store's layout, its A and B coefficients into a PCE, both over bellman's
//! domain order; what differs from a bellman key is the H step ([`HStep::
//! CosetEvaluations`]) and that c is a∘b (a zkey stores no C matrix).

use std::path::Path;
use std::sync::Arc;

use bellman::{Circuit, ConstraintSystem, SynthesisError};
use bls12_381::Scalar;
use ff::Field;
use gpu_ntt::AbcEvaluations;
use memory_budget::{Budget, Reservation};
use pce_cache::Pce;
use rayon::prelude::*;
use srs_store::{LoadedParams, PointCheck, ZkeyFile, ZkeyParams};

use crate::key::HStep;
use crate::{ProofOutput, Prover, ProverConfig, ProverError, ProvingKey, Randomness, Synthesis};

/// c = a∘b, snarkjs's C evaluations (the zkey holds no C matrix).
pub(crate) fn c_from_a_b(v: &mut AbcEvaluations) {
    v.c.par_iter_mut()
        .zip(v.a.par_iter().zip(v.b.par_iter()))
        .with_min_len(4096)
        .for_each(|(c, (a, b))| *c = a * b);
}

impl ProvingKey {
    /// The key of a loaded zkey's bases (`ZkeyParams::into_parts`), owning them, for
    /// snarkjs's H step on the coset of `h_coset_shift` (`ZkeyParams::h_coset_shift`).
    pub fn from_zkey(
        params: LoadedParams,
        h_coset_shift: Scalar,
    ) -> Result<ProvingKey, ProverError> {
        Ok(
            ProvingKey::from_loaded(params)?.with_h_step(HStep::CosetEvaluations {
                shift: h_coset_shift,
            }),
        )
    }
}

/// A circom witness as a bellman circuit for a zkey's PCE: signal 0 is ONE, signals
/// 1..=`n_public` are inputs, the rest aux, allocated in signal order (the zkey's
/// columns). It enforces nothing: the PCE holds the constraints.
#[derive(Clone, Copy, Debug)]
pub struct WitnessCircuit<'a> {
    values: &'a [Scalar],
    n_public: usize,
}

impl<'a> WitnessCircuit<'a> {
    /// The witness `values` (signal 0 first) of a circuit with `n_vars` signals and
    /// `n_public` public ones; its length and ONE are checked.
    pub fn new(
        values: &'a [Scalar],
        n_vars: usize,
        n_public: usize,
    ) -> Result<WitnessCircuit<'a>, ProverError> {
        if values.len() != n_vars {
            return Err(ProverError::Witness {
                what: "the number of values",
                expected: n_vars.to_string(),
                found: values.len().to_string(),
            });
        }
        if values.first() != Some(&Scalar::ONE) {
            return Err(ProverError::Witness {
                what: "value 0 (the constant one)",
                expected: "1".into(),
                found: "another value".into(),
            });
        }
        Ok(WitnessCircuit { values, n_public })
    }

    /// The public values: signals 1..=`n_public`.
    pub fn public_values(&self) -> &'a [Scalar] {
        &self.values[1..=self.n_public]
    }
}

impl Circuit<Scalar> for WitnessCircuit<'_> {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        for (s, v) in self.values.iter().enumerate().skip(1) {
            if s <= self.n_public {
                cs.alloc_input(|| "public signal", || Ok(*v))?;
            } else {
                cs.alloc(|| "signal", || Ok(*v))?;
            }
        }
        Ok(())
    }
}

/// Proves from a `.zkey`: the key, its PCE, and a prover over them.
///
/// ```no_run
/// use groth16_prover::{ProverConfig, Randomness, ZkeyProver};
/// use memory_budget::Budget;
/// use srs_store::PointCheck;
///
/// let budget = Budget::fixed(1 << 30);
/// let zk = ZkeyProver::open("circuit.zkey", &budget, ProverConfig::default(), PointCheck::Curve)?;
/// # let witness: Vec<bls12_381::Scalar> = Vec::new();
/// // witness: the circom witness (`.wtns` values, signal 0 first)
/// let out = zk.prove(&witness, Randomness::random(&mut rand::rng()))?;
/// println!("{:?}", out.proof);
/// # Ok::<(), groth16_prover::ProverError>(())
/// ```
pub struct ZkeyProver {
    prover: Prover,
    pce: Pce,
    /// Charges the PCE.
    _pce_charge: Option<Reservation>,
    n_vars: usize,
    n_public: usize,
}

impl std::fmt::Debug for ZkeyProver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZkeyProver")
            .field("prover", &self.prover)
            .field("n_vars", &self.n_vars)
            .field("n_public", &self.n_public)
            .finish()
    }
}

impl ZkeyProver {
    /// Reads the zkey at `path` under `budget` (`check`: the bases' point checks; the
    /// verifying key is always fully checked) and starts a prover for it. The key owns
    /// the loaded bases (charged as `Srs`) and the PCE stays charged (`Pce`) while this
    /// lives.
    pub fn open(
        path: impl AsRef<Path>,
        budget: &Budget,
        config: ProverConfig,
        check: PointCheck,
    ) -> Result<ZkeyProver, ProverError> {
        // Opening the backend (a GPU's context and kernels) takes a while: do it while the
        // zkey loads.
        let path = path.as_ref();
        let (zkey, backend) = std::thread::scope(|s| {
            let backend = s.spawn(|| crate::backend::backend_for(config.backend, budget));
            let zkey = ZkeyFile::open(path).and_then(|f| f.load(budget, check));
            let backend = backend
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (zkey, backend)
        });
        ZkeyProver::with_backend(zkey?, budget, config, backend?)
    }

    /// A prover for an already loaded zkey.
    pub fn from_params(
        zkey: ZkeyParams,
        budget: &Budget,
        config: ProverConfig,
    ) -> Result<ZkeyProver, ProverError> {
        let backend = crate::backend::backend_for(config.backend, budget)?;
        ZkeyProver::with_backend(zkey, budget, config, backend)
    }

    fn with_backend(
        zkey: ZkeyParams,
        budget: &Budget,
        config: ProverConfig,
        backend: Box<dyn crate::ProverBackend>,
    ) -> Result<ZkeyProver, ProverError> {
        let n_public = zkey.n_public() as usize;
        let shift = zkey.h_coset_shift();
        let (params, pce, pce_charge) = zkey.into_parts();
        let key = ProvingKey::from_zkey(params, shift)?;
        let shape = pce.shape();
        let n_vars = (shape.n_inputs + shape.n_aux) as usize;
        let prover = Prover::with_backend(Arc::new(key), budget.clone(), config, backend);
        Ok(ZkeyProver {
            prover,
            pce,
            _pce_charge: pce_charge,
            n_vars,
            n_public,
        })
    }

    /// Proves for a witness (signal 0 first, as in a `.wtns`).
    pub fn prove(&self, witness: &[Scalar], rs: Randomness) -> Result<ProofOutput, ProverError> {
        let circuit = WitnessCircuit::new(witness, self.n_vars, self.n_public)?;
        self.prover.prove(Synthesis::Pce(&self.pce), circuit, rs)
    }

    /// The prover (its key, backend and settings).
    pub fn prover(&self) -> &Prover {
        &self.prover
    }

    /// The PCE built from the zkey's coefficients.
    pub fn pce(&self) -> &Pce {
        &self.pce
    }

    /// Signals, ONE included.
    pub fn n_vars(&self) -> usize {
        self.n_vars
    }

    /// Public signals, ONE excluded.
    pub fn n_public(&self) -> usize {
        self.n_public
    }
}
