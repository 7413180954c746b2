//! The prover: synthesis (PCE or plain), the unsatisfied-witness check, H, the MSMs
//! through a backend, assembly with (r, s), and the optional self-check.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bellman::Circuit;
use bls12_381::{Bls12, G1Projective, Scalar};
use bls_repr::FrRepr;
use ff::Field;
use gpu_msm::DensityMask;
use gpu_ntt::AbcEvaluations;
use group::Curve;
use memory_budget::{Budget, Reservation};
use pce_cache::{AbcMut, Density, OverlapTimes, Pce, Witness};
use rayon::prelude::*;

use crate::backend::{
    backend_for, BackendChoice, MsmInputs, ProverBackend, QueryPlacement, StagedAbc, WitnessAbc,
};
use crate::charge::{Charge, SCALAR_BYTES};
use crate::key::{HStep, KeyHold};
use crate::{plain, ProverError, ProvingKey};

/// How a proof gets its witness and its a, b, c.
#[derive(Clone, Copy)]
pub enum Synthesis<'a> {
    /// Witness-only synthesis, then a, b, c by the PCE's mat-vec; densities from the PCE.
    /// The PCE must have been recorded from a circuit of the same shape (record it once,
    /// e.g. with `pce_cache::PceCache::get_or_extract`, and reuse it for every proof).
    Pce(&'a Pce),
    /// a, b, c evaluated while the circuit runs (as groth16 does); no PCE needed.
    Plain,
}

impl std::fmt::Debug for Synthesis<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Synthesis::Pce(p) => write!(f, "Pce({})", p.fingerprint()),
            Synthesis::Plain => write!(f, "Plain"),
        }
    }
}

/// Where a PCE-path proof's witness comes from.
enum WitnessFrom<C> {
    /// Witness-only synthesis of the circuit, a, b and c evaluated alongside.
    Circuit(C),
    /// Computed already: a, b and c evaluated from it on all cores.
    Computed(Witness),
}

/// The circuit type of a [`WitnessFrom::Computed`] (never synthesized).
struct NoCircuit;

impl Circuit<Scalar> for NoCircuit {
    fn synthesize<CS: bellman::ConstraintSystem<Scalar>>(
        self,
        _: &mut CS,
    ) -> Result<(), bellman::SynthesisError> {
        Ok(())
    }
}

impl<C: Circuit<Scalar>> WitnessFrom<C> {
    /// The witness alone (witness-only synthesis, or the one computed already).
    fn witness(self, pce: &Pce) -> Result<Witness, pce_cache::PceError> {
        match self {
            WitnessFrom::Circuit(c) => pce.synthesize_witness(c),
            WitnessFrom::Computed(w) => {
                pce.check_witness_lengths(&w.inputs, &w.aux)?;
                Ok(w)
            }
        }
    }

    /// The witness, with a, b and c evaluated into `out` (see
    /// [`Pce::evaluate_into_with`]).
    fn evaluate<T: Send + Sync + Copy>(
        self,
        pce: &Pce,
        out: AbcMut<'_, T>,
        zero: T,
        convert: impl Fn(Scalar) -> T + Sync,
    ) -> Result<(Witness, OverlapTimes), pce_cache::PceError> {
        match self {
            WitnessFrom::Circuit(c) => pce.synthesize_and_evaluate_timed(c, out, zero, convert),
            WitnessFrom::Computed(w) => {
                let t = Instant::now();
                pce.evaluate_into_with(&w.inputs, &w.aux, out, zero, convert)?;
                let times = OverlapTimes {
                    synthesis: Duration::ZERO,
                    evaluation_after: t.elapsed(),
                };
                Ok((w, times))
            }
        }
    }
}

/// The blinding pair of one proof.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Randomness {
    /// Blinds A (and C).
    pub r: Scalar,
    /// Blinds B (and C).
    pub s: Scalar,
}

impl Randomness {
    /// A given pair.
    pub fn new(r: Scalar, s: Scalar) -> Randomness {
        Randomness { r, s }
    }

    /// Draws r, then s, from `rng`: the order of `groth16::create_random_proof`, so the
    /// same rng state gives the same proof as the reference.
    pub fn random<R: rand_core::Rng + ?Sized>(rng: &mut R) -> Randomness {
        let r = Scalar::random(&mut *rng);
        let s = Scalar::random(&mut *rng);
        Randomness { r, s }
    }
}

/// When proofs are verified against the verifying key before being returned.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SelfCheck {
    /// Never (fastest).
    Never,
    /// Batches only (the default): a partition that fails is named in the error.
    #[default]
    Batches,
    /// Every proof.
    Always,
}

/// Prover settings.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProverConfig {
    /// Which backend computes H and the MSMs.
    pub backend: BackendChoice,
    /// When to verify proofs before returning them.
    pub self_check: SelfCheck,
}

/// Wall time of each phase of one proof.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProofTimings {
    /// The circuit's synthesis with a, b, c: on the PCE path witness-only synthesis with
    /// the PCE's mat-vec overlapped (evaluated on a second thread as the witness grows,
    /// the rest on all cores after it); on the plain path as groth16 does it.
    pub synthesis: Duration,
    /// a, b, c evaluated after synthesis ended: on the PCE path what the overlapped
    /// mat-vec had left (blocks reading late public inputs, the evaluator's backlog);
    /// zero on the plain path. When the backend evaluates them
    /// ([`ProofTimings::abc_by_backend`]): the witness handed to it (its staging).
    pub abc_evaluation: Duration,
    /// Whether the backend evaluated a, b and c (and checked the witness) itself, from
    /// the witness (`ProverBackend::witness_abc`; the GPU backend on the device): then
    /// `h` includes that evaluation.
    pub abc_by_backend: bool,
    /// The a·b = c check on every row.
    pub witness_check: Duration,
    /// The H polynomial (6 NTTs).
    pub h: Duration,
    /// MSM over `h_query`.
    pub msm_h: Duration,
    /// MSM over `l_query`.
    pub msm_l: Duration,
    /// MSMs over `a_query`.
    pub msm_a: Duration,
    /// MSMs over `b_g1_query`.
    pub msm_b_g1: Duration,
    /// MSMs over `b_g2_query`.
    pub msm_b_g2: Duration,
    /// Of `h` (GPU backend): converting a, b, c into pinned staging and queueing their
    /// copies (h stays on the device: nothing comes back).
    pub h_transfers: Duration,
    /// The MSM phase start to end (on the GPU backend `msm_b_g2` overlaps the G1 MSMs,
    /// so this is less than [`ProofTimings::msm_total`]).
    pub msm_wall: Duration,
    /// Of the MSMs: placing bases (uploading them to the device, or copying them into
    /// pinned host memory to be streamed; a key's first proof only).
    pub bases_upload: Duration,
    /// Of the MSMs: converting scalars into pinned staging and queueing their copies to
    /// the device (GPU backend; overlaps the device MSMs).
    pub msm_transfers: Duration,
    /// Of `msm_transfers`: waiting for pooled staging buffers.
    pub msm_staging_wait: Duration,
    /// Of `msm_staging_wait`: allocating the witness's device buffers (GPU backend).
    pub msm_witness_alloc: Duration,
    /// Of `msm_staging_wait`: copying the witness's a and b masks to the device.
    pub msm_witness_masks: Duration,
    /// Of the MSMs: the device's MSM thread waiting for staged scalars on the device
    /// before l, a and b (GPU backend; `MsmTimings::scalars_wait`).
    pub msm_scalars_wait: Duration,
    /// Device time of the H transforms (GPU backend, h kept on the device: the host part
    /// is `h`, the transforms then run while the MSM scalars are prepared).
    pub h_device: Duration,
    /// Of `h_device`: a, b and c evaluated on the device (`MsmTimings::abc_device`).
    pub abc_device: Duration,
    /// Mixing in r and s, conversion to affine.
    pub assembly: Duration,
    /// Verification with the verifying key (zero when not asked for).
    pub self_check: Duration,
    /// The whole proof, start to end.
    pub total: Duration,
}

impl ProofTimings {
    /// The five MSMs together.
    pub fn msm_total(&self) -> Duration {
        self.msm_h + self.msm_l + self.msm_a + self.msm_b_g1 + self.msm_b_g2
    }
}

/// Sizes of a proven circuit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProofShape {
    /// Public inputs, ONE included.
    pub n_inputs: usize,
    /// Auxiliary variables.
    pub n_aux: usize,
    /// Constraints the circuit enforced.
    pub n_constraints: usize,
    /// Rows: constraints plus one `input · 0 = 0` row per input.
    pub n_rows: usize,
    /// The H step's domain (next power of two of `n_rows`).
    pub domain_size: usize,
}

/// One proof and what it cost.
#[derive(Clone, Debug)]
pub struct ProofOutput {
    /// The proof, in the reference crate's type.
    pub proof: groth16::Proof<Bls12>,
    /// Phase timings.
    pub timings: ProofTimings,
    /// The most working-set bytes this proof held charged at once, plus the most the
    /// backend's pinned staging pool held charged meanwhile (idle buffers included; see
    /// [`ProofOutput::pinned_staging_peak_bytes`]). An upper bound when the two peaks did not
    /// coincide.
    pub peak_charged_bytes: u64,
    /// Of `peak_charged_bytes`: the staging pool's peak (`Category::PinnedPool`; 0 on the
    /// CPU backend). Concurrent proofs on one backend share the pool, so each sees the
    /// pool's whole charge.
    pub pinned_staging_peak_bytes: u64,
    /// Sizes of the circuit.
    pub shape: ProofShape,
    /// Whether the proof was verified before being returned.
    pub self_checked: bool,
    /// Backend that computed H and the MSMs.
    pub backend: &'static str,
    /// How each query's bases reached its sum (in place on the device, streamed, or on
    /// the CPU), in the order h, l, a, b_g1, b_g2, skipping queries the proof did not use.
    pub bases: Vec<QueryPlacement>,
}

/// The proofs of a batch, in partition order.
#[derive(Clone, Debug)]
pub struct BatchOutput {
    /// One per partition.
    pub proofs: Vec<ProofOutput>,
    /// The whole batch.
    pub total: Duration,
    /// The most working-set bytes charged at once (partitions run one after another).
    pub peak_charged_bytes: u64,
}

/// Proves circuits against one proving key. Cheap to share (`&self` methods); proofs
/// of one prover may run concurrently, each charging its own working set.
pub struct Prover {
    key: Arc<ProvingKey>,
    backend: Arc<dyn ProverBackend>,
    budget: Budget,
    config: ProverConfig,
}

impl std::fmt::Debug for Prover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prover")
            .field("key", &self.key)
            .field("backend", &self.backend.name())
            .field("config", &self.config)
            .finish()
    }
}

/// Densities as MSM masks.
struct Masks {
    a_aux: DensityMask,
    b_input: DensityMask,
    b_aux: DensityMask,
}

impl Masks {
    fn bytes(&self) -> u64 {
        [&self.a_aux, &self.b_input, &self.b_aux]
            .iter()
            .map(|m| m.words().len() as u64 * 8)
            .sum()
    }
}

fn mask(d: &Density) -> DensityMask {
    // pce-cache keeps bits past len clear, so this cannot fail; fall back to the bit
    // walk rather than panic if that ever changes.
    DensityMask::from_words(d.words().to_vec(), d.len())
        .unwrap_or_else(|_| DensityMask::from_bools(d.iter()))
}

/// a, b, c of one proof, each padded to the domain size.
enum Abc {
    /// Host vectors, for [`ProverBackend::h_poly`].
    Host(AbcEvaluations),
    /// In the backend's own buffers, for [`ProverBackend::h_poly_staged`].
    Staged(Box<StagedAbc>),
    /// Not evaluated: the backend evaluates (and checks) them from the witness it took,
    /// in [`ProverBackend::h_poly_witness`].
    Witness(Box<WitnessAbc>),
}

/// The witness and a, b, c of one proof.
struct Evaluated {
    inputs: Vec<Scalar>,
    aux: Vec<Scalar>,
    abc: Abc,
    masks: Masks,
    shape: ProofShape,
}

/// The first row where `a·b ≠ c`, on values in bls-repr's Montgomery layout (the
/// Montgomery product of aR and bR is abR, compared with cR).
fn first_unsatisfied_repr(a: &[FrRepr], b: &[FrRepr], c: &[FrRepr]) -> Option<usize> {
    let n = a.len().min(b.len()).min(c.len());
    (0..n)
        .into_par_iter()
        .with_min_len(4096)
        .find_first(|&i| a[i].mul(&b[i]) != c[i])
}

/// Scalars of a proof's largest MSM or of its whole witness, whichever is more.
fn n_max_terms(shape: &ProofShape) -> usize {
    // The witness (inputs and aux together) is staged as one array by the GPU backend.
    (shape.domain_size - 1).max(shape.n_aux + shape.n_inputs)
}

fn domain_size(n_rows: usize) -> Result<usize, ProverError> {
    Ok(gpu_ntt::h_domain_size(n_rows)?)
}

impl Prover {
    /// A prover over `key` whose working sets are charged to `budget`.
    pub fn new(
        key: Arc<ProvingKey>,
        budget: Budget,
        config: ProverConfig,
    ) -> Result<Prover, ProverError> {
        let backend = backend_for(config.backend, &budget)?;
        Ok(Prover::with_backend(key, budget, config, backend))
    }

    /// A prover with a backend built by the caller (`config.backend` is then ignored).
    pub fn with_backend(
        key: Arc<ProvingKey>,
        budget: Budget,
        config: ProverConfig,
        backend: Box<dyn ProverBackend>,
    ) -> Prover {
        Prover::with_shared_backend(key, budget, config, Arc::from(backend))
    }

    /// A prover over a backend shared with other provers (one device serving several
    /// keys: its staging pool and streams are shared too).
    pub fn with_shared_backend(
        key: Arc<ProvingKey>,
        budget: Budget,
        config: ProverConfig,
        backend: Arc<dyn ProverBackend>,
    ) -> Prover {
        Prover {
            key,
            backend,
            budget,
            config,
        }
    }

    /// The backend.
    pub fn backend(&self) -> &Arc<dyn ProverBackend> {
        &self.backend
    }

    /// The key, shared.
    pub fn key_arc(&self) -> &Arc<ProvingKey> {
        &self.key
    }

    /// The proving key.
    pub fn key(&self) -> &ProvingKey {
        &self.key
    }

    /// The backend's name.
    pub fn backend_name(&self) -> &'static str {
        self.backend.name()
    }

    /// The settings.
    pub fn config(&self) -> ProverConfig {
        self.config
    }

    /// Proves one circuit. Self-checked only under [`SelfCheck::Always`].
    pub fn prove<C: Circuit<Scalar>>(
        &self,
        synthesis: Synthesis<'_>,
        circuit: C,
        randomness: Randomness,
    ) -> Result<ProofOutput, ProverError> {
        let check = self.config.self_check == SelfCheck::Always;
        self.prove_one(synthesis, circuit, randomness, 0, None, check)
    }

    /// Proves one circuit with (r, s) drawn from `rng` as `groth16::create_random_proof`
    /// draws them.
    pub fn prove_random<C: Circuit<Scalar>, R: rand_core::Rng + ?Sized>(
        &self,
        synthesis: Synthesis<'_>,
        circuit: C,
        rng: &mut R,
    ) -> Result<ProofOutput, ProverError> {
        self.prove(synthesis, circuit, Randomness::random(rng))
    }

    /// Proves the partitions of one statement: circuits of the same shape, one (r, s)
    /// each, one after another over the shared key. Self-checked unless
    /// [`SelfCheck::Never`]; any failure names its partition.
    pub fn prove_batch<C: Circuit<Scalar>>(
        &self,
        synthesis: Synthesis<'_>,
        circuits: Vec<C>,
        randomness: &[Randomness],
    ) -> Result<BatchOutput, ProverError> {
        if circuits.len() != randomness.len() {
            return Err(ProverError::BatchLength {
                n_circuits: circuits.len(),
                n_randomness: randomness.len(),
            });
        }
        let start = Instant::now();
        let check = self.config.self_check != SelfCheck::Never;
        let mut proofs: Vec<ProofOutput> = Vec::with_capacity(circuits.len());
        for (partition, (circuit, rs)) in circuits.into_iter().zip(randomness).enumerate() {
            let expected = proofs.first().map(|p| p.shape);
            let out = self
                .prove_one(synthesis, circuit, *rs, partition, expected, check)
                .map_err(|e| match e {
                    e @ (ProverError::SelfCheckFailed { .. }
                    | ProverError::ShapeMismatch { .. }) => e,
                    e => ProverError::Partition {
                        partition,
                        source: Box::new(e),
                    },
                })?;
            proofs.push(out);
        }
        let peak_charged_bytes = proofs
            .iter()
            .map(|p| p.peak_charged_bytes)
            .max()
            .unwrap_or(0);
        Ok(BatchOutput {
            proofs,
            total: start.elapsed(),
            peak_charged_bytes,
        })
    }

    /// Checks the key against the circuit's sizes before any large allocation.
    fn check_key(
        &self,
        shape: &ProofShape,
        masks_or_counts: (usize, usize, usize),
    ) -> Result<(), ProverError> {
        let (n_a_aux, n_b_in, n_b_aux) = masks_or_counts;
        let key = &self.key;
        let vk = key.vk();
        let lens = key.lens();
        if bool::from(vk.delta_g1.is_identity() | vk.delta_g2.is_identity()) {
            return Err(ProverError::IdentityDelta);
        }
        if vk.ic.len() != shape.n_inputs {
            return Err(ProverError::InputCountMismatch {
                expected: shape.n_inputs,
                found: vk.ic.len(),
            });
        }
        // bellman's H step has m − 1 coefficients, snarkjs's m coset values.
        let n_h = match key.h_step() {
            HStep::Coefficients => shape.domain_size - 1,
            HStep::CosetEvaluations { .. } => shape.domain_size,
        };
        let needs = [
            ("h_query", lens.h, n_h),
            ("l_query", lens.l, shape.n_aux),
            ("a_query", lens.a, shape.n_inputs + n_a_aux),
            ("b_g1_query", lens.b_g1, n_b_in + n_b_aux),
            ("b_g2_query", lens.b_g2, n_b_in + n_b_aux),
        ];
        for (query, found, needed) in needs {
            if found < needed {
                return Err(ProverError::KeyTooSmall {
                    query,
                    needed,
                    found,
                });
            }
        }
        Ok(())
    }

    /// Bytes the MSM phase holds: witness, h, the backend's scratch and its scalar
    /// staging (paid from this charge; see [`Prover::msm_staging_bytes`]).
    fn msm_phase_bytes(
        &self,
        witness_bytes: u64,
        h_bytes: u64,
        shape: &ProofShape,
        abc_staged: bool,
    ) -> u64 {
        let n = n_max_terms(shape);
        // The G2 MSM sums b_g2_query's bases (inputs and aux dense in B), no more.
        let n_g2 = self.key.lens().b_g2.min(n);
        witness_bytes
            + h_bytes
            + self.backend.msm_scratch_bytes(n, n_g2)
            + self.msm_staging_bytes(shape, abc_staged)
    }

    /// The MSMs' scalar staging: less when a, b and c went into the backend's buffers
    /// (`abc_staged`), which the MSMs then stage into
    /// ([`ProverBackend::msm_staging_after_abc`]).
    fn msm_staging_bytes(&self, shape: &ProofShape, abc_staged: bool) -> u64 {
        let m = shape.domain_size;
        if abc_staged {
            self.backend
                .msm_staging_after_abc(m, shape.n_inputs + shape.n_aux)
        } else {
            self.backend.staging_bytes(m, n_max_terms(shape)).1
        }
    }

    /// The shape of a PCE-path proof and its density masks, checked against the key.
    fn pce_shape(&self, pce: &Pce) -> Result<(ProofShape, Masks), ProverError> {
        let s = pce.shape();
        let n_rows = s.n_rows as usize;
        let shape = ProofShape {
            n_inputs: s.n_inputs as usize,
            n_aux: s.n_aux as usize,
            n_constraints: s.n_constraints as usize,
            n_rows,
            domain_size: domain_size(n_rows)?,
        };
        let d = pce.densities();
        let masks = Masks {
            a_aux: mask(d.a_aux()),
            b_input: mask(d.b_input()),
            b_aux: mask(d.b_aux()),
        };
        self.check_key(
            &shape,
            (
                masks.a_aux.count_ones(),
                masks.b_input.count_ones(),
                masks.b_aux.count_ones(),
            ),
        )?;
        Ok((shape, masks))
    }

    /// Host bytes one PCE-path proof of `shape` holds at its peak (the witness and masks,
    /// a, b and c unless the backend stages them, the H step's and the MSMs' scratch).
    fn pce_working_set(&self, shape: &ProofShape, masks: &Masks, abc_by_backend: bool) -> u64 {
        let m = shape.domain_size;
        let witness_bytes = (shape.n_inputs + shape.n_aux) as u64 * SCALAR_BYTES + masks.bytes();
        if abc_by_backend {
            // The witness and its staging for the backend (kept through the MSMs, whose
            // staging it serves as a, b, c's buffers do), no a, b, c on the host.
            return self.backend.witness_abc_bytes(shape.n_inputs + shape.n_aux)
                + self.msm_phase_bytes(witness_bytes, self.backend.h_host_bytes(m), shape, true);
        }
        // a, b, c in the backend's staging (paid from this charge) or in host vectors.
        let (abc_staging, _) = self.backend.staging_bytes(m, n_max_terms(shape));
        let abc_bytes = if self.stages_abc(m) {
            abc_staging
        } else {
            3 * m as u64 * SCALAR_BYTES
        };
        let h_phase = witness_bytes + abc_bytes + self.backend.h_scratch_bytes(m);
        // Staged a, b and c leave this charge for the pool when they are taken and the
        // proof keeps them through the MSMs, whose staging may write into them (the
        // backend says how much more it needs): the MSM phase comes on top of them, so
        // that the charge never has to grow in the middle of a proof (where a full budget
        // would refuse it).
        let msm_phase = if self.stages_abc(m) {
            abc_staging
                + self.msm_phase_bytes(witness_bytes, self.backend.h_host_bytes(m), shape, true)
        } else {
            self.msm_phase_bytes(witness_bytes, m as u64 * SCALAR_BYTES, shape, false)
        };
        h_phase.max(msm_phase)
    }

    /// Whether a, b, c of a domain of `m` points go into the backend's buffers. Not for a
    /// zkey's H step, which reads host vectors (its c is formed from a and b first).
    fn stages_abc(&self, m: usize) -> bool {
        match self.key.h_step() {
            HStep::Coefficients => self.backend.stages_abc(m),
            HStep::CosetEvaluations { .. } => false,
        }
    }

    /// Charges the backend's long-lived tables for proofs of `pce`'s circuit (see
    /// [`ProverBackend::prepare`]), waiting at most `wait` for room.
    pub fn prepare_backend(
        &self,
        pce: &Pce,
        wait: Option<std::time::Duration>,
    ) -> Result<(), ProverError> {
        let (shape, _) = self.pce_shape(pce)?;
        self.backend.prepare(shape.domain_size, wait)
    }

    /// The working set a proof of `pce`'s circuit charges at its peak, from the recorded
    /// dimensions (what [`Prover::synthesize`] reserves on the PCE path): for an engine to
    /// admit the proof before it starts. A key too small for the circuit is an error here.
    pub fn working_set_bytes(&self, pce: &Pce) -> Result<u64, ProverError> {
        let (shape, masks) = self.pce_shape(pce)?;
        let by_backend = self.abc_by_backend(pce, shape.domain_size)?;
        Ok(self.pce_working_set(&shape, &masks, by_backend))
    }

    /// Whether the backend evaluates a, b and c of `pce`'s proofs itself (see
    /// [`ProverBackend::evaluates_abc`]; never for a zkey's H step).
    fn abc_by_backend(&self, pce: &Pce, m: usize) -> Result<bool, ProverError> {
        Ok(self.stages_abc(m) && self.backend.evaluates_abc(pce, m)?)
    }

    /// PCE path: the whole working set is charged from the recorded shape before the
    /// witness exists (or the caller's admitted reservation is made exactly that).
    fn evaluate_pce<C: Circuit<Scalar>>(
        &self,
        pce: &Pce,
        source: WitnessFrom<C>,
        admitted: Option<Reservation>,
        timings: &mut ProofTimings,
    ) -> Result<(Evaluated, Charge), ProverError> {
        let (shape, masks) = self.pce_shape(pce)?;
        let m = shape.domain_size;
        let by_backend = self.abc_by_backend(pce, m)?;
        let bytes = self.pce_working_set(&shape, &masks, by_backend);
        let what = "groth16 proof working set";
        let mut charge = match admitted {
            Some(r) => Charge::adopt(r, bytes, what)?,
            None => Charge::reserve(&self.budget, bytes, what)?,
        };
        if by_backend {
            // The witness alone on the host; the backend evaluates a, b and c from it.
            let t = Instant::now();
            let w = source.witness(pce)?;
            timings.synthesis = t.elapsed();
            let taken =
                self.backend
                    .witness_abc(pce, m, (&w.inputs, &w.aux), charge.reservation_mut())?;
            timings.abc_evaluation = t.elapsed() - timings.synthesis;
            match taken {
                Some(abc) => {
                    timings.abc_by_backend = true;
                    return Ok((
                        Evaluated {
                            inputs: w.inputs,
                            aux: w.aux,
                            abc: Abc::Witness(Box::new(abc)),
                            masks,
                            shape,
                        },
                        charge,
                    ));
                }
                // The backend changed its mind (its device PCE was dropped for room in
                // between): evaluated here after all, a, b and c's buffers charged by
                // the pool itself beyond this working set.
                None => {
                    return self.evaluate_host(
                        pce,
                        WitnessFrom::<NoCircuit>::Computed(w),
                        (shape, masks, charge),
                        timings,
                    )
                }
            }
        }
        self.evaluate_host(pce, source, (shape, masks, charge), timings)
    }

    /// a, b and c evaluated on the host, into the backend's buffers when it lends them
    /// (paid from the charge) or into host vectors.
    fn evaluate_host<C: Circuit<Scalar>>(
        &self,
        pce: &Pce,
        source: WitnessFrom<C>,
        (shape, masks, mut charge): (ProofShape, Masks, Charge),
        timings: &mut ProofTimings,
    ) -> Result<(Evaluated, Charge), ProverError> {
        let m = shape.domain_size;
        // a, b, c in the backend's buffers (the GPU's staging pool, paid from this charge)
        // when it offers them, else host vectors charged above.
        let staged = if self.stages_abc(m) {
            self.backend
                .abc_buffers_within(m, charge.reservation_mut())?
        } else {
            None
        };

        // Witness synthesis with the mat-vec overlapped: row blocks are evaluated on a
        // second thread as soon as the aux values they read exist (pce-cache's pipeline),
        // straight into the backend's layout when it gave buffers.
        let (w, times, abc) = match staged {
            Some(mut bufs) => {
                let [a, b, c] = bufs.slices_mut()?;
                let (w, times) = source.evaluate(pce, AbcMut { a, b, c }, FrRepr::ZERO, |s| {
                    FrRepr::from_scalar(&s)
                })?;
                (w, times, Abc::Staged(Box::new(bufs)))
            }
            None => {
                let (mut a, mut b, mut c) = (
                    pce_cache::zeroed(m),
                    pce_cache::zeroed(m),
                    pce_cache::zeroed(m),
                );
                let (w, times) = source.evaluate(
                    pce,
                    AbcMut {
                        a: &mut a,
                        b: &mut b,
                        c: &mut c,
                    },
                    Scalar::ZERO,
                    |s| s,
                )?;
                (w, times, Abc::Host(AbcEvaluations { a, b, c }))
            }
        };
        timings.synthesis = times.synthesis;
        timings.abc_evaluation = times.evaluation_after;
        Ok((
            Evaluated {
                inputs: w.inputs,
                aux: w.aux,
                abc,
                masks,
                shape,
            },
            charge,
        ))
    }

    /// Plain path: the sizes are unknown until the circuit has run, so the charge grows
    /// before each buffer does.
    fn evaluate_plain<C: Circuit<Scalar>>(
        &self,
        circuit: C,
        admitted: Option<Reservation>,
        timings: &mut ProofTimings,
    ) -> Result<(Evaluated, Charge), ProverError> {
        if self.key.h_step() != HStep::Coefficients {
            return Err(ProverError::PceRequired);
        }
        let what = "groth16 proof working set";
        let mut charge = match admitted {
            // The plain path's charge grows as buffers do; it starts from what was admitted.
            Some(r) => {
                let bytes = r.bytes();
                Charge::adopt(r, bytes, what)?
            }
            None => Charge::reserve(&self.budget, 0, what)?,
        };
        let t = Instant::now();
        let asg = plain::synthesize(circuit, &mut charge, domain_size)?;
        timings.synthesis = t.elapsed();
        let n_rows = asg.n_constraints + asg.inputs.len();
        let shape = ProofShape {
            n_inputs: asg.inputs.len(),
            n_aux: asg.aux.len(),
            n_constraints: asg.n_constraints,
            n_rows,
            domain_size: asg.a.len(),
        };
        let masks = Masks {
            a_aux: asg.a_aux,
            b_input: asg.b_input,
            b_aux: asg.b_aux,
        };
        self.check_key(
            &shape,
            (
                masks.a_aux.count_ones(),
                masks.b_input.count_ones(),
                masks.b_aux.count_ones(),
            ),
        )?;
        Ok((
            Evaluated {
                inputs: asg.inputs,
                aux: asg.aux,
                abc: Abc::Host(AbcEvaluations {
                    a: asg.a,
                    b: asg.b,
                    c: asg.c,
                }),
                masks,
                shape,
            },
            charge,
        ))
    }

    fn prove_one<C: Circuit<Scalar>>(
        &self,
        synthesis: Synthesis<'_>,
        circuit: C,
        rs: Randomness,
        partition: usize,
        expected: Option<ProofShape>,
        self_check: bool,
    ) -> Result<ProofOutput, ProverError> {
        let synthesized = self.synthesize(synthesis, circuit, None)?;
        if let Some(want) = expected {
            synthesized.check_shape(&want, partition)?;
        }
        let computed = self.compute(synthesized)?;
        self.assemble(computed, rs, self_check, partition)
    }

    /// Phase 1 of a proof, on the CPU: synthesis (witness-only with a PCE) with a, b and
    /// c, and the witness check. The working set is charged first: `admitted` (a
    /// reservation the caller obtained, e.g. by waiting in the budget's queue, made
    /// exactly the proof's need) or a new reservation that does not wait. The result
    /// holds the charge until [`Prover::compute`] takes it.
    pub fn synthesize<C: Circuit<Scalar>>(
        &self,
        synthesis: Synthesis<'_>,
        circuit: C,
        admitted: Option<Reservation>,
    ) -> Result<Synthesized, ProverError> {
        self.phase_one(|timings| match synthesis {
            Synthesis::Pce(pce) => {
                self.evaluate_pce(pce, WitnessFrom::Circuit(circuit), admitted, timings)
            }
            Synthesis::Plain => self.evaluate_plain(circuit, admitted, timings),
        })
    }

    /// [`Prover::synthesize`] on the PCE path from a witness computed elsewhere (`inputs`
    /// with ONE first, then `aux`, each in allocation order: what
    /// [`pce_cache::WitnessCs`] gives), for a front end that computes its witness by its own
    /// means (in parallel, or from another constraint system): no circuit runs, the
    /// witness is moved in (not copied), and a, b and c are evaluated from it on all
    /// cores. The working set is the same as [`Synthesis::Pce`]'s, the witness included:
    /// a caller that must charge the witness before it exists reserves
    /// [`Prover::working_set_bytes`] first and passes it as `admitted`. A witness of
    /// other lengths than the PCE's shape is an error ([`pce_cache::PceError`]).
    pub fn synthesize_witness(
        &self,
        pce: &Pce,
        witness: Witness,
        admitted: Option<Reservation>,
    ) -> Result<Synthesized, ProverError> {
        self.phase_one(|timings| {
            self.evaluate_pce(
                pce,
                WitnessFrom::<NoCircuit>::Computed(witness),
                admitted,
                timings,
            )
        })
    }

    /// Proves from a computed witness ([`Prover::synthesize_witness`], then
    /// [`Prover::compute`] and [`Prover::assemble`]), self-checked as [`Prover::prove`] is.
    pub fn prove_witness(
        &self,
        pce: &Pce,
        witness: Witness,
        admitted: Option<Reservation>,
        randomness: Randomness,
    ) -> Result<ProofOutput, ProverError> {
        let check = self.config.self_check == SelfCheck::Always;
        let synthesized = self.synthesize_witness(pce, witness, admitted)?;
        let computed = self.compute(synthesized)?;
        self.assemble(computed, randomness, check, 0)
    }

    /// Phase 1 around `evaluate` (the witness with a, b and c, and the charge holding
    /// them): the staging peak reset before it, the witness check on a, b and c after.
    fn phase_one(
        &self,
        evaluate: impl FnOnce(&mut ProofTimings) -> Result<(Evaluated, Charge), ProverError>,
    ) -> Result<Synthesized, ProverError> {
        let started = Instant::now();
        let mut timings = ProofTimings::default();
        self.backend.reset_staging_peak();
        let (mut ev, charge) = evaluate(&mut timings)?;
        // An unsatisfied witness would give a proof that does not verify: refuse it.
        let t = Instant::now();
        let bad_row = match &mut ev.abc {
            // A zkey holds no C matrix: c is a∘b by definition (snarkjs's rule), so there
            // is nothing to check here; a bad witness fails the self-check instead.
            Abc::Host(v) if self.key.h_step() != HStep::Coefficients => {
                crate::zkey::c_from_a_b(v);
                None
            }
            Abc::Host(v) => pce_cache::first_unsatisfied_row(&v.a, &v.b, &v.c),
            Abc::Staged(bufs) => {
                let [a, b, c] = bufs.slices_mut()?;
                first_unsatisfied_repr(a, b, c)
            }
            // Checked by the backend where it evaluates them.
            Abc::Witness(_) => None,
        };
        timings.witness_check = t.elapsed();
        if let Some(row) = bad_row.filter(|_| !crate::timing_only::let_unsatisfied_through()) {
            return Err(ProverError::Unsatisfied {
                row,
                n_constraints: ev.shape.n_constraints,
                n_rows: ev.shape.n_rows,
            });
        }
        Ok(Synthesized {
            ev,
            charge,
            timings,
            started,
        })
    }

    /// Phase 2, on the backend (the device): H and the five MSMs over the key's bases.
    /// The working set shrinks as the phase goes (a, b and c once H has them; the witness
    /// once the MSMs are done) and only the public inputs stay charged.
    ///
    /// The key's bases are viewed by the backend right before the MSMs
    /// ([`ProverBackend::view_key`]), which may load or promote a stored key; a caller
    /// that took the key's bases at admission passes them with [`Prover::compute_held`].
    pub fn compute(&self, synthesized: Synthesized) -> Result<Computed, ProverError> {
        self.compute_over(synthesized, None)
    }

    /// Starts copying this proof's a, b and c to the device ahead of its device phase
    /// (`ProverBackend::prefetch_abc`): for a proof synthesized while the device works
    /// on another, so that the copies run beside that work. `Ok(true)` when queued;
    /// `Ok(false)` when the backend copies nothing ahead (host a, b, c, no room on the
    /// device now).
    pub fn prefetch(&self, synthesized: &mut Synthesized) -> Result<bool, ProverError> {
        match &mut synthesized.ev.abc {
            Abc::Staged(abc) => self.backend.prefetch_abc(abc),
            Abc::Witness(w) => self.backend.prefetch_witness(w),
            Abc::Host(_) => Ok(false),
        }
    }

    /// [`Prover::compute`] over the bases `hold` holds (a view of this prover's key taken
    /// earlier, e.g. when the proof was admitted): nothing is loaded, moved or waited for
    /// in the store, so a proof on a device never waits there for memory that proofs
    /// queued behind it hold. A hold of another key is [`ProverError::HoldMismatch`].
    pub fn compute_held(
        &self,
        synthesized: Synthesized,
        hold: &KeyHold,
    ) -> Result<Computed, ProverError> {
        self.compute_over(synthesized, Some(hold))
    }

    fn compute_over(
        &self,
        synthesized: Synthesized,
        hold: Option<&KeyHold>,
    ) -> Result<Computed, ProverError> {
        if let Some(h) = hold {
            // Checked before any work: a wrong hold must not cost an H step.
            self.key.view_held(h)?;
        }
        let Synthesized {
            ev,
            mut charge,
            mut timings,
            started,
        } = synthesized;
        let Evaluated {
            inputs,
            aux,
            abc,
            masks,
            shape,
        } = ev;
        let witness_bytes =
            (inputs.capacity() + aux.capacity()) as u64 * SCALAR_BYTES + masks.bytes();
        let t = Instant::now();
        // Once the backend has freed a, b and c (the GPU backend: once they are in pinned
        // staging), the charge shrinks to what the MSM phase needs: the witness, h's host
        // bytes (none when it stays on the device), the MSMs' scratch and staging (kept,
        // never released only to be asked for again).
        let h_return = self.backend.h_host_bytes(shape.domain_size);
        let msm_floor = self.msm_phase_bytes(witness_bytes, h_return, &shape, false);
        // As `pce_working_set` charged it: less staging when a, b, c are the backend's.
        let abc_staged = matches!(abc, Abc::Staged(_) | Abc::Witness(_));
        let mut released = || charge.shrink_to(msm_floor);
        let h_out = match abc {
            Abc::Host(v) => match self.key.h_step() {
                HStep::Coefficients => self.backend.h_poly(v, &mut released)?,
                HStep::CosetEvaluations { shift } => {
                    self.backend.h_coset_evaluations(v, shift, &mut released)?
                }
            },
            // Charged to the backend, not to this working set: nothing to release.
            Abc::Staged(bufs) => self.backend.h_poly_staged(*bufs)?,
            Abc::Witness(w) => self.backend.h_poly_witness(*w)?,
        };
        timings.h = t.elapsed();
        timings.h_transfers = h_out.transfers;
        let h = h_out.h;
        // b and c are gone; a host h lives in a's buffer until the H MSM is done.
        charge.set(
            self.msm_phase_bytes(witness_bytes, h.host_bytes(), &shape, abc_staged),
            "groth16 proof msm phase",
        )?;

        // The key's bases, held until the sums are done.
        let t = Instant::now();
        let view = match hold {
            Some(h) => self.key.view_held(h)?,
            None => self.backend.view_key(&self.key)?,
        };
        let view_time = t.elapsed();
        let mut sums = self.backend.msms_within(
            &view,
            h,
            &MsmInputs {
                inputs: &inputs,
                aux: &aux,
                a_aux: &masks.a_aux,
                b_input: &masks.b_input,
                b_aux: &masks.b_aux,
            },
            charge.reservation_mut(),
        )?;
        drop(view);
        drop(masks);
        // The witness is freed by `assemble`, not here: returning a few GiB of pages to
        // the kernel takes ~0.1 s, which an engine's device thread would spend before
        // its next partition. Charged exactly until then.
        charge.set(
            (inputs.capacity() + aux.capacity()) as u64 * SCALAR_BYTES,
            "witness until assembly",
        )?;
        timings.msm_h = sums.timings.h;
        timings.msm_l = sums.timings.l;
        timings.msm_a = sums.timings.a;
        timings.msm_b_g1 = sums.timings.b_g1;
        timings.msm_b_g2 = sums.timings.b_g2;
        timings.msm_wall = sums.timings.wall;
        timings.bases_upload = view_time + sums.timings.bases_upload;
        timings.msm_transfers = sums.timings.scalar_transfers;
        timings.msm_staging_wait = sums.timings.staging_wait;
        timings.msm_witness_alloc = sums.timings.witness_alloc;
        timings.msm_witness_masks = sums.timings.witness_masks;
        timings.msm_scalars_wait = sums.timings.scalars_wait;
        timings.h_device = sums.timings.h_device;
        timings.abc_device = sums.timings.abc_device;
        let bases = std::mem::take(&mut sums.placement);
        Ok(Computed {
            inputs,
            aux,
            sums,
            bases,
            charge,
            timings,
            shape,
            started,
        })
    }

    /// Phase 3, on the CPU: the proof from the sums and (r, s), verified against the key
    /// when `self_check` (a failure names `partition`). Returns the last bytes charged.
    pub fn assemble(
        &self,
        computed: Computed,
        rs: Randomness,
        self_check: bool,
        partition: usize,
    ) -> Result<ProofOutput, ProverError> {
        let Computed {
            inputs,
            aux,
            sums,
            bases,
            mut charge,
            mut timings,
            shape,
            started,
        } = computed;
        drop(aux);
        charge.set(inputs.capacity() as u64 * SCALAR_BYTES, "public inputs")?;
        let t = Instant::now();
        let vk = self.key.vk();
        let Randomness { r, s } = rs;
        // Three independent sums (the G2 one the slowest): computed side by side.
        let (b, (a, c)) = rayon::join(
            || (vk.delta_g2 * s + vk.beta_g2 + sums.b_g2).to_affine(),
            || {
                rayon::join(
                    || (vk.delta_g1 * r + vk.alpha_g1 + sums.a).to_affine(),
                    || {
                        let g_c: G1Projective = vk.delta_g1 * (r * s)
                            + vk.alpha_g1 * s
                            + vk.beta_g1 * r
                            + sums.a * s
                            + sums.b_g1 * r
                            + sums.h
                            + sums.l;
                        g_c.to_affine()
                    },
                )
            },
        );
        let proof = groth16::Proof { a, b, c };
        timings.assembly = t.elapsed();

        if self_check {
            let t = Instant::now();
            let verdict = groth16::verify_proof(self.key.prepared_vk(), &proof, &inputs[1..]);
            timings.self_check = t.elapsed();
            if let Err(reason) = verdict {
                return Err(ProverError::SelfCheckFailed { partition, reason });
            }
        }
        drop(inputs);
        let pinned_staging_peak_bytes = self.backend.staging_peak_bytes();
        let peak_charged_bytes = charge.peak() + pinned_staging_peak_bytes;
        drop(charge);
        timings.total = started.elapsed();
        metrics::counter!("pinion_groth16_prover_proofs_total").increment(1);
        metrics::histogram!("pinion_groth16_prover_proof_seconds")
            .record(timings.total.as_secs_f64());
        metrics::gauge!("pinion_groth16_prover_last_peak_bytes").set(peak_charged_bytes as f64);
        Ok(ProofOutput {
            proof,
            timings,
            peak_charged_bytes,
            pinned_staging_peak_bytes,
            shape,
            self_checked: self_check,
            backend: self.backend.name(),
            bases,
        })
    }
}

/// A proof after [`Prover::synthesize`]: witness checked, a, b and c evaluated (in host
/// memory or the backend's staging buffers), its working set charged.
pub struct Synthesized {
    ev: Evaluated,
    charge: Charge,
    timings: ProofTimings,
    started: Instant,
}

impl std::fmt::Debug for Synthesized {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Synthesized")
            .field("shape", &self.ev.shape)
            .field("charged_bytes", &self.charge.bytes())
            .finish_non_exhaustive()
    }
}

impl Synthesized {
    /// Sizes of the circuit.
    pub fn shape(&self) -> ProofShape {
        self.ev.shape
    }

    /// Working-set bytes charged now.
    pub fn charged_bytes(&self) -> u64 {
        self.charge.bytes()
    }

    /// The timings so far (synthesis, a, b, c, witness check).
    pub fn timings(&self) -> ProofTimings {
        self.timings
    }

    /// `ShapeMismatch` naming `partition` when the sizes differ from `want`'s.
    pub fn check_shape(&self, want: &ProofShape, partition: usize) -> Result<(), ProverError> {
        let shape = &self.ev.shape;
        for (what, e, f) in [
            ("number of inputs", want.n_inputs, shape.n_inputs),
            ("number of aux variables", want.n_aux, shape.n_aux),
            (
                "number of constraints",
                want.n_constraints,
                shape.n_constraints,
            ),
        ] {
            if e != f {
                return Err(ProverError::ShapeMismatch {
                    partition,
                    what,
                    expected: e,
                    found: f,
                });
            }
        }
        Ok(())
    }
}

/// A proof after [`Prover::compute`]: the five sums and the public inputs, waiting for
/// (r, s) in [`Prover::assemble`].
pub struct Computed {
    inputs: Vec<Scalar>,
    /// The witness's aux part, freed by `assemble`.
    aux: Vec<Scalar>,
    sums: crate::backend::MsmOutputs,
    bases: Vec<QueryPlacement>,
    charge: Charge,
    timings: ProofTimings,
    shape: ProofShape,
    started: Instant,
}

impl std::fmt::Debug for Computed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Computed")
            .field("shape", &self.shape)
            .finish_non_exhaustive()
    }
}

impl Computed {
    /// The timings so far (through the MSMs).
    pub fn timings(&self) -> ProofTimings {
        self.timings
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::SplitMix;

    /// The check on the staged layout (Montgomery products of bls-repr values) finds the
    /// row the scalar check finds, or none, on random rows with zeros and one planted
    /// bad row at a random place.
    #[test]
    fn repr_witness_check_matches_scalar_check() {
        let mut g = SplitMix::new(crate::testing::test_seed());
        for n in [1usize, 7, 4096, 20_000] {
            let pick = |g: &mut SplitMix| match g.below(3) {
                0 => Scalar::ZERO,
                _ => g.scalar(),
            };
            let a: Vec<Scalar> = (0..n).map(|_| pick(&mut g)).collect();
            let b: Vec<Scalar> = (0..n).map(|_| pick(&mut g)).collect();
            let mut c: Vec<Scalar> = a.iter().zip(&b).map(|(x, y)| x * y).collect();
            let reprs =
                |v: &[Scalar]| -> Vec<FrRepr> { v.iter().map(FrRepr::from_scalar).collect() };
            assert_eq!(
                first_unsatisfied_repr(&reprs(&a), &reprs(&b), &reprs(&c)),
                None,
                "n = {n}: satisfied rows"
            );
            let bad = g.below(n);
            c[bad] += Scalar::ONE;
            let want = pce_cache::first_unsatisfied_row(&a, &b, &c);
            assert_eq!(want, Some(bad), "n = {n}");
            assert_eq!(
                first_unsatisfied_repr(&reprs(&a), &reprs(&b), &reprs(&c)),
                want,
                "n = {n}: the planted row"
            );
        }
    }
}
