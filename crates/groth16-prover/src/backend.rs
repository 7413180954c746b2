//! The compute seam: the H polynomial and the five MSMs of a proof. Synthesis, memory
//! accounting and proof assembly stay in the prover, identical for every backend.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use bls12_381::{G1Projective, G2Projective, Scalar};
use gpu_msm::{CpuMsm, DensityMask, MsmBackend};
use gpu_ntt::{AbcEvaluations, CpuNtt, NttBackend};
use memory_budget::{Budget, Category, Reservation};

use crate::{ProverError, ProvingKey};

/// Which kind of engine a backend is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BackendKind {
    /// rayon on the host.
    Cpu,
    /// CUDA.
    Gpu,
}

/// How a [`crate::Prover`] picks its backend.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum BackendChoice {
    /// The GPU when one is present and the GPU backend is built, else the CPU. The GPU
    /// backend is not built yet, so today this is always the CPU.
    #[default]
    Auto,
    /// The CPU backend.
    Cpu,
    /// The GPU backend: returns [`ProverError::BackendUnavailable`] until it is built.
    Gpu,
}

/// What the MSMs of one proof read besides the key's bases.
#[derive(Clone, Copy, Debug)]
pub struct MsmInputs<'a> {
    /// h's coefficients (domain size − 1 of them).
    pub h: &'a [Scalar],
    /// Public inputs, ONE first.
    pub inputs: &'a [Scalar],
    /// Auxiliary assignment.
    pub aux: &'a [Scalar],
    /// Aux variables with an `a_query` base.
    pub a_aux: &'a DensityMask,
    /// Inputs with a `b_g1_query`/`b_g2_query` base.
    pub b_input: &'a DensityMask,
    /// Aux variables with a `b_g1_query`/`b_g2_query` base.
    pub b_aux: &'a DensityMask,
}

/// Wall time of each MSM.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MsmTimings {
    /// `h_query` · h.
    pub h: Duration,
    /// `l_query` · aux.
    pub l: Duration,
    /// `a_query` · (inputs, aux).
    pub a: Duration,
    /// `b_g1_query` · (inputs, aux).
    pub b_g1: Duration,
    /// `b_g2_query` · (inputs, aux).
    pub b_g2: Duration,
}

/// The five sums of a proof (before r and s are mixed in).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MsmOutputs {
    /// Σ h_i·h_query_i.
    pub h: G1Projective,
    /// Σ aux_i·l_query_i.
    pub l: G1Projective,
    /// A: inputs and dense aux over `a_query`.
    pub a: G1Projective,
    /// B on G1.
    pub b_g1: G1Projective,
    /// B on G2.
    pub b_g2: G2Projective,
    /// How long each took.
    pub timings: MsmTimings,
}

/// A compute engine for the H step and the MSMs. Every backend gives the same points
/// for the same inputs (exact arithmetic), so proofs do not depend on the backend.
pub trait ProverBackend: Send + Sync {
    /// Short name for logs and benchmark tables.
    fn name(&self) -> &'static str;

    /// CPU or GPU.
    fn kind(&self) -> BackendKind;

    /// Host bytes the H step needs beyond a, b and c for a domain of `domain_size`
    /// points; the prover charges them with the working set.
    fn h_scratch_bytes(&self, domain_size: usize) -> u64;

    /// Host bytes the MSMs need at most, when the largest has `n_max_terms` scalars.
    fn msm_scratch_bytes(&self, n_max_terms: usize) -> u64;

    /// h's `m − 1` coefficients from a, b, c (see `gpu_ntt::NttBackend::h_poly`).
    fn h_poly(&self, abc: AbcEvaluations) -> Result<Vec<Scalar>, ProverError>;

    /// The five MSMs of one proof over `key`'s bases, sliced as groth16 slices them.
    fn msms(&self, key: &ProvingKey, inputs: &MsmInputs<'_>) -> Result<MsmOutputs, ProverError>;
}

/// Builds the backend for a choice.
pub fn backend_for(
    choice: BackendChoice,
    budget: &Budget,
) -> Result<Box<dyn ProverBackend>, ProverError> {
    match choice {
        BackendChoice::Auto | BackendChoice::Cpu => Ok(Box::new(CpuBackend::new(budget.clone()))),
        BackendChoice::Gpu => Err(GpuBackend::unavailable()),
    }
}

/// The GPU backend's slot. Not built yet: [`GpuBackend::new`] always returns
/// [`ProverError::BackendUnavailable`] (never a panic), whether or not a GPU is present.
#[derive(Debug)]
pub struct GpuBackend {
    _not_built: (),
}

impl GpuBackend {
    /// Always `Err(BackendUnavailable)` until the CUDA prover backend exists.
    pub fn new() -> Result<GpuBackend, ProverError> {
        Err(Self::unavailable())
    }

    fn unavailable() -> ProverError {
        ProverError::BackendUnavailable {
            backend: "gpu",
            reason: "the cuda prover backend is not built yet",
        }
    }
}

/// The CPU backend: `gpu_ntt::CpuNtt` for H and `gpu_msm::CpuMsm` for the MSMs, on the
/// rayon pool. The MSMs run one after another (each is parallel inside), so only one
/// MSM's scratch is alive at a time.
pub struct CpuBackend {
    ntt: CpuNtt,
    msm: CpuMsm,
    budget: Budget,
    /// Charges CpuNtt's twiddle table, which lives as long as the backend.
    twiddles: Mutex<Option<Reservation>>,
}

impl std::fmt::Debug for CpuBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuBackend")
            .field("twiddle_bytes", &self.ntt.twiddle_bytes())
            .finish()
    }
}

impl CpuBackend {
    /// A CPU backend whose long-lived tables are charged to `budget`.
    pub fn new(budget: Budget) -> CpuBackend {
        CpuBackend {
            ntt: CpuNtt::new(),
            msm: CpuMsm::new(),
            budget,
            twiddles: Mutex::new(None),
        }
    }

    /// Grows the twiddle charge before the table grows (the table is 32 bytes per point
    /// of the largest domain seen, per gpu-ntt's cost model).
    fn charge_twiddles(&self, domain_size: usize) -> Result<(), ProverError> {
        let want = 32 * domain_size as u64;
        let mut slot = self.twiddles.lock().unwrap_or_else(|e| e.into_inner());
        let held = slot.as_ref().map_or(0, Reservation::bytes);
        if want <= held {
            return Ok(());
        }
        let refused = |source| ProverError::Budget {
            what: "ntt twiddle table",
            requested_bytes: want - held,
            source,
        };
        match slot.as_mut() {
            Some(r) => r.try_grow_to(want).map_err(refused)?,
            None => {
                *slot = Some(
                    self.budget
                        .try_reserve(want, Category::Other, "groth16-prover ntt twiddles")
                        .map_err(refused)?,
                )
            }
        }
        Ok(())
    }
}

/// Largest per-term scratch of `gpu_msm::CpuMsm` (G2, batch-affine buckets).
const MSM_TERM_BYTES: u64 = 224;

/// Bytes of one projective G2 point (the larger group bounds both).
const G2_PROJECTIVE_BYTES: u64 = std::mem::size_of::<G2Projective>() as u64;

/// The window `gpu_msm::CpuMsm` picks for `n` terms (its documented cost model:
/// ⌈256/c⌉·(n + 2^c) additions, minimised).
fn cpu_window(n_terms: usize) -> u32 {
    (1..=gpu_msm::MAX_WINDOW_BITS)
        .min_by_key(|&c| 256u128.div_ceil(c as u128) * (n_terms as u128 + (1u128 << c)))
        .unwrap_or(1)
}

fn msm_err(query: &'static str) -> impl FnOnce(gpu_msm::MsmError) -> ProverError {
    move |source| ProverError::Msm { query, source }
}

/// `bases[start..end]`, or a typed error when the query is too short.
fn slice<'a, T>(
    query: &'static str,
    bases: &'a [T],
    start: usize,
    end: usize,
) -> Result<&'a [T], ProverError> {
    bases.get(start..end).ok_or(ProverError::KeyTooSmall {
        query,
        needed: end,
        found: bases.len(),
    })
}

fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let start = Instant::now();
    let out = f();
    (out, start.elapsed())
}

impl ProverBackend for CpuBackend {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn kind(&self) -> BackendKind {
        BackendKind::Cpu
    }

    fn h_scratch_bytes(&self, _domain_size: usize) -> u64 {
        // CpuNtt works in place in a, b and c; its table is charged by the backend.
        0
    }

    fn msm_scratch_bytes(&self, n_max_terms: usize) -> u64 {
        // Upper bound from gpu-msm's cost model: per classified term at most 224 bytes
        // (G2 with batch-affine buckets; 40 projective, 128 G1 batch-affine), at most
        // DEFAULT_SCALARS_IN_FLIGHT terms at once, plus 2^(c-1) buckets (bounded by a
        // projective G2 point each) per busy thread.
        let terms = MSM_TERM_BYTES * n_max_terms.min(gpu_msm::DEFAULT_SCALARS_IN_FLIGHT) as u64;
        let c = cpu_window(n_max_terms);
        let buckets = (1u64 << (c - 1)) * G2_PROJECTIVE_BYTES * rayon::current_num_threads() as u64;
        terms + buckets
    }

    fn h_poly(&self, abc: AbcEvaluations) -> Result<Vec<Scalar>, ProverError> {
        let m = gpu_ntt::h_domain_size(abc.a.len())?;
        self.charge_twiddles(m)?;
        Ok(self.ntt.h_poly(abc)?)
    }

    fn msms(&self, key: &ProvingKey, x: &MsmInputs<'_>) -> Result<MsmOutputs, ProverError> {
        let msm = &self.msm;
        let n_in = x.inputs.len();
        let mut timings = MsmTimings::default();

        let bases = slice("h_query", key.h_query(), 0, x.h.len())?;
        let (h, t) = timed(|| msm.msm_g1(bases, x.h, None));
        let h = h.map_err(msm_err("h"))?;
        timings.h = t;

        let bases = slice("l_query", key.l_query(), 0, x.aux.len())?;
        let (l, t) = timed(|| msm.msm_g1(bases, x.aux, None));
        let l = l.map_err(msm_err("l"))?;
        timings.l = t;

        // A: every input has a base (groth16's input rows), aux only where dense.
        let a_in = slice("a_query", key.a_query(), 0, n_in)?;
        let a_aux = slice("a_query", key.a_query(), n_in, n_in + x.a_aux.count_ones())?;
        let (a, t) = timed(|| -> Result<G1Projective, ProverError> {
            let a_in = msm
                .msm_g1(a_in, x.inputs, None)
                .map_err(msm_err("a inputs"))?;
            let a_aux = msm
                .msm_g1(a_aux, x.aux, Some(x.a_aux))
                .map_err(msm_err("a aux"))?;
            Ok(a_in + a_aux)
        });
        let a = a?;
        timings.a = t;

        let (k_in, k_aux) = (x.b_input.count_ones(), x.b_aux.count_ones());
        let b1_in = slice("b_g1_query", key.b_g1_query(), 0, k_in)?;
        let b1_aux = slice("b_g1_query", key.b_g1_query(), k_in, k_in + k_aux)?;
        let (b_g1, t) = timed(|| -> Result<G1Projective, ProverError> {
            let i = msm
                .msm_g1(b1_in, x.inputs, Some(x.b_input))
                .map_err(msm_err("b_g1 inputs"))?;
            let a = msm
                .msm_g1(b1_aux, x.aux, Some(x.b_aux))
                .map_err(msm_err("b_g1 aux"))?;
            Ok(i + a)
        });
        let b_g1 = b_g1?;
        timings.b_g1 = t;

        let b2_in = slice("b_g2_query", key.b_g2_query(), 0, k_in)?;
        let b2_aux = slice("b_g2_query", key.b_g2_query(), k_in, k_in + k_aux)?;
        let (b_g2, t) = timed(|| -> Result<G2Projective, ProverError> {
            let i = msm
                .msm_g2(b2_in, x.inputs, Some(x.b_input))
                .map_err(msm_err("b_g2 inputs"))?;
            let a = msm
                .msm_g2(b2_aux, x.aux, Some(x.b_aux))
                .map_err(msm_err("b_g2 aux"))?;
            Ok(i + a)
        });
        let b_g2 = b_g2?;
        timings.b_g2 = t;

        Ok(MsmOutputs {
            h,
            l,
            a,
            b_g1,
            b_g2,
            timings,
        })
    }
}
