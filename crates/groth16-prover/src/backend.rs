//! The compute seam: the H polynomial and the five MSMs of a proof. Synthesis, memory
//! accounting and proof assembly stay in the prover, identical for every backend.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use bls12_381::{G1Projective, G2Projective, Scalar};
use gpu_msm::{CpuMsm, DensityMask, MsmBackend};
use gpu_ntt::{AbcEvaluations, CpuNtt, NttBackend};
use memory_budget::{Budget, Category, Reservation};

use crate::gpu::{AbcBuffers, DeviceH};
use crate::{GpuBackend, ProverError, ProvingKey};

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
    /// The GPU backend when `gpu_device` opens device 0, else the CPU backend (a missing
    /// driver or device is not an error here).
    #[default]
    Auto,
    /// The CPU backend.
    Cpu,
    /// The GPU backend; without a usable device, [`ProverError::GpuUnavailable`].
    Gpu,
}

/// What the MSMs of one proof read besides the key's bases and h.
#[derive(Clone, Copy, Debug)]
pub struct MsmInputs<'a> {
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

/// Wall time of each MSM. On the GPU backend a G1 figure is the device thread's time for
/// that MSM: waiting for its scalars' copy (for `h`, for the H transforms) and the MSM
/// itself; the scalars are prepared on another thread meanwhile (`scalar_transfers`),
/// bases are uploaded before (`bases_upload`), and `b_g2` runs on the host at the same
/// time as the G1 MSMs, so the figures add up to more than `wall`.
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
    /// Uploading bases to the device (first proof over a key only; zero on the CPU).
    pub bases_upload: Duration,
    /// Host time converting scalars to canonical words in pinned staging buffers and
    /// queueing their copies to the device (zero on the CPU). On the GPU backend this
    /// runs on its own thread while the device computes the previous MSM.
    pub scalar_transfers: Duration,
    /// Of `scalar_transfers`: waiting for a pooled staging buffer (its earlier copies to
    /// finish, or a new one to be pinned).
    pub staging_wait: Duration,
    /// Device time of the H transforms, measured by events around them (GPU backend with
    /// h on the device; zero otherwise). They run while the MSM scalars are prepared.
    pub h_device: Duration,
    /// The whole MSM phase, start to end.
    pub wall: Duration,
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

/// h's `m − 1` coefficients, where the H step left them.
#[derive(Debug)]
pub enum HPoly {
    /// On the host (the CPU backend).
    Host(Vec<Scalar>),
    /// On the device of the GPU backend that computed it (Montgomery form, possibly still
    /// being computed on the device's stream); only that backend's `msms` reads it.
    Device(DeviceH),
}

impl HPoly {
    /// Number of coefficients.
    pub fn len(&self) -> usize {
        match self {
            HPoly::Host(h) => h.len(),
            HPoly::Device(d) => d.len(),
        }
    }

    /// Whether h has no coefficients.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Host bytes it holds (a device-resident h holds none).
    pub fn host_bytes(&self) -> u64 {
        match self {
            HPoly::Host(h) => h.capacity() as u64 * 32,
            HPoly::Device(_) => 0,
        }
    }
}

/// What the H step returns.
#[derive(Debug)]
pub struct HOutput {
    /// h's `m − 1` coefficients.
    pub h: HPoly,
    /// Of the step's time, host conversions and uploads (zero on the CPU; see
    /// `ProofTimings::h_transfers`).
    pub transfers: Duration,
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

    /// Host bytes h holds once the H step returns (the CPU backend: `m − 1` scalars; a
    /// backend that keeps h on the device: 0).
    fn h_host_bytes(&self, domain_size: usize) -> u64 {
        32 * domain_size as u64
    }

    /// Restarts the staging pool's peak (a backend without one: nothing).
    fn reset_staging_peak(&self) {}

    /// The most bytes the backend's pinned staging pool held charged (idle buffers
    /// included) since [`ProverBackend::reset_staging_peak`]; 0 without a pool.
    fn staging_peak_bytes(&self) -> u64 {
        0
    }

    /// h's `m − 1` coefficients from a, b, c (see `gpu_ntt::NttBackend::h_poly`), on the
    /// host or left on the device for [`ProverBackend::msms`].
    /// `inputs_released` is called once the host a, b, c are freed before the step ends
    /// (the GPU backend: when their upload has completed), so the caller can shrink its
    /// charge early; a backend that reuses their buffers for h never calls it.
    fn h_poly(
        &self,
        abc: AbcEvaluations,
        inputs_released: &mut dyn FnMut(),
    ) -> Result<HOutput, ProverError>;

    /// Buffers for a, b and c of a domain of `m` points that
    /// [`ProverBackend::h_poly_staged`] reads in place, for the prover to evaluate into
    /// directly (the GPU backend: pinned buffers from its staging pool, in bls-repr's
    /// layout, charged to the pool and kept across proofs, so a proof neither allocates
    /// fresh host pages for a, b, c nor converts them afterwards). `None` (the default):
    /// the prover evaluates into host vectors for [`ProverBackend::h_poly`].
    fn abc_buffers(&self, _m: usize) -> Result<Option<AbcBuffers>, ProverError> {
        Ok(None)
    }

    /// [`ProverBackend::h_poly`] from buffers this backend's
    /// [`ProverBackend::abc_buffers`] gave out, filled with a, b and c. The default copies
    /// them into host vectors.
    fn h_poly_staged(&self, abc: AbcBuffers) -> Result<HOutput, ProverError> {
        self.h_poly(abc.into_host()?, &mut || {})
    }

    /// The five MSMs of one proof over `key`'s bases, sliced as groth16 slices them; `h`
    /// is what this backend's [`ProverBackend::h_poly`] returned (or host coefficients).
    fn msms(
        &self,
        key: &ProvingKey,
        h: HPoly,
        inputs: &MsmInputs<'_>,
    ) -> Result<MsmOutputs, ProverError>;
}

/// Builds the backend for a choice: `Auto` falls back to the CPU when no device opens,
/// explicit `Gpu` returns that failure as [`ProverError::GpuUnavailable`].
pub fn backend_for(
    choice: BackendChoice,
    budget: &Budget,
) -> Result<Box<dyn ProverBackend>, ProverError> {
    match choice {
        BackendChoice::Cpu => Ok(Box::new(CpuBackend::new(budget.clone()))),
        BackendChoice::Gpu => Ok(Box::new(GpuBackend::new(budget.clone())?)),
        BackendChoice::Auto => match GpuBackend::new(budget.clone()) {
            Ok(gpu) => Ok(Box::new(gpu)),
            Err(_) => Ok(Box::new(CpuBackend::new(budget.clone()))),
        },
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

pub(crate) fn msm_err(query: &'static str) -> impl FnOnce(gpu_msm::MsmError) -> ProverError {
    move |source| ProverError::Msm { query, source }
}

/// `bases[start..end]`, or a typed error when the query is too short.
pub(crate) fn slice<'a, T>(
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
        cpu_msm_scratch_bytes(n_max_terms)
    }

    fn h_poly(
        &self,
        abc: AbcEvaluations,
        _inputs_released: &mut dyn FnMut(),
    ) -> Result<HOutput, ProverError> {
        let m = gpu_ntt::h_domain_size(abc.a.len())?;
        self.charge_twiddles(m)?;
        Ok(HOutput {
            h: HPoly::Host(self.ntt.h_poly(abc)?),
            transfers: Duration::ZERO,
        })
    }

    fn msms(
        &self,
        key: &ProvingKey,
        h: HPoly,
        x: &MsmInputs<'_>,
    ) -> Result<MsmOutputs, ProverError> {
        let start = Instant::now();
        let h = match h {
            HPoly::Host(h) => h,
            HPoly::Device(d) => d.into_host()?,
        };
        let mut out = self.msms_serial(key, &h, x)?;
        out.timings.wall = start.elapsed();
        Ok(out)
    }
}

/// Host scratch of `gpu_msm::CpuMsm` for MSMs of at most `n_max_terms` scalars.
pub(crate) fn cpu_msm_scratch_bytes(n_max_terms: usize) -> u64 {
    // Upper bound from gpu-msm's cost model: per classified term at most 224 bytes
    // (G2 with batch-affine buckets; 40 projective, 128 G1 batch-affine), at most
    // DEFAULT_SCALARS_IN_FLIGHT terms at once, plus 2^(c-1) buckets (bounded by a
    // projective G2 point each) per busy thread.
    let terms = MSM_TERM_BYTES * n_max_terms.min(gpu_msm::DEFAULT_SCALARS_IN_FLIGHT) as u64;
    let c = cpu_window(n_max_terms);
    let buckets = (1u64 << (c - 1)) * G2_PROJECTIVE_BYTES * rayon::current_num_threads() as u64;
    terms + buckets
}

impl CpuBackend {
    /// The five MSMs one after another.
    fn msms_serial(
        &self,
        key: &ProvingKey,
        h: &[Scalar],
        x: &MsmInputs<'_>,
    ) -> Result<MsmOutputs, ProverError> {
        let msm = &self.msm;
        let n_in = x.inputs.len();
        let mut timings = MsmTimings::default();

        let bases = slice("h_query", key.h_query(), 0, h.len())?;
        let (h, t) = timed(|| msm.msm_g1(bases, h, None));
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
