//! The compute seam: the H polynomial and the five MSMs of a proof. Synthesis, memory
//! accounting and proof assembly stay in the prover, identical for every backend.

use std::any::Any;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bls12_381::{G1Projective, G2Projective, Scalar};
use bls_repr::FrRepr;
use gpu_msm::{CpuMsm, DensityMask, GpuCurve, MsmBase};
use gpu_ntt::{AbcEvaluations, CpuNtt, NttBackend};
use memory_budget::{Budget, Category, Reservation};
use pce_cache::Pce;

use crate::key::{G1Query, KeyView, QueryBases, QueryLens};
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
    /// Of `staging_wait` (GPU backend, the witness's one upload): allocating its device
    /// buffers.
    pub witness_alloc: Duration,
    /// Of `staging_wait` (the witness's upload): copying the a and b masks to the device
    /// (pageable copies: they return once their stream's earlier work is done).
    pub witness_masks: Duration,
    /// GPU backend: how long the device's MSM thread, done with the MSMs before them,
    /// waited for staged scalars to reach the device (the witness's copy, conversion
    /// and selections on the copy stream; h's own when staged from the host) before it
    /// could queue their MSMs: time the device's MSM stream idled for them.
    pub scalars_wait: Duration,
    /// Device time of the H transforms, measured by events around them (GPU backend with
    /// h on the device; zero otherwise). They run while the MSM scalars are prepared.
    pub h_device: Duration,
    /// Of `h_device`: a, b and c evaluated on the device from the witness (its copy
    /// unless made ahead, the three mat-vecs and the witness check); zero otherwise.
    pub abc_device: Duration,
    /// The whole MSM phase, start to end.
    pub wall: Duration,
}

/// How a query's bases reached its sum in one proof.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BasesKind {
    /// Read in place on the device (the store's device tier).
    Resident,
    /// Read on the device from a table of precomputed windows the backend made from the
    /// device tier's bases (`GpuBackend::with_precomputed_windows`).
    Precomputed,
    /// Streamed to the device from host memory, chunk by chunk.
    Streamed,
    /// Summed on the CPU.
    Cpu,
}

/// Where one query of a proof was summed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueryPlacement {
    /// `h_query`, `l_query`, `a_query`, `b_g1_query` or `b_g2_query`.
    pub query: &'static str,
    /// How its bases reached the sum.
    pub kind: BasesKind,
    /// Bases used.
    pub n: usize,
    /// The query whose bucket sort of the scalars this one's sum (or its aux part) was
    /// read over, when the two shared one (a's aux part over l's: `"l_query"`).
    pub sorted_with: Option<&'static str>,
}

/// The five sums of a proof (before r and s are mixed in).
#[derive(Clone, Debug, PartialEq, Eq)]
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
    /// Where each used query was summed (h, l, a, b_g1, b_g2 order).
    pub placement: Vec<QueryPlacement>,
}

/// Buffers a backend owns and hands out through [`ProverBackend::abc_buffers`] or keeps
/// h in ([`BackendH`]): opaque to the prover; the backend that made them takes its own
/// type back with a downcast.
pub trait BackendOwned: Send + Any {
    /// For the type check of a downcast.
    fn as_any(&self) -> &dyn Any;
    /// For the backend that made it, to work on it in place.
    fn as_any_mut(&mut self) -> &mut dyn Any;
    /// For the backend that made it, to take its own type back.
    fn into_any(self: Box<Self>) -> Box<dyn Any + Send>;
}

/// Takes `T` back out of a box of a [`BackendOwned`] value, or gives the box back.
fn downcast_box<T: Any, D: ?Sized + BackendOwned>(b: Box<D>) -> Result<T, Box<D>> {
    if !b.as_any().is::<T>() {
        return Err(b);
    }
    match b.into_any().downcast::<T>() {
        Ok(t) => Ok(*t),
        // `is::<T>()` held just above; `into_any` returns the same value.
        Err(_) => unreachable!("as_any and into_any disagree on the concrete type"),
    }
}

/// h's coefficients kept where a backend computed them (the GPU backend: on the device).
pub trait BackendCoeffs: BackendOwned {
    /// Copies the coefficients to the host (waiting for their computation).
    fn into_host(self: Box<Self>) -> Result<Vec<Scalar>, ProverError>;
}

/// h's `m − 1` coefficients in a backend's own memory (see [`BackendCoeffs`]): only the
/// backend that made them reads them in place; anything else copies them back.
pub struct BackendH {
    n_coeffs: usize,
    inner: Box<dyn BackendCoeffs>,
}

impl std::fmt::Debug for BackendH {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackendH")
            .field("n_coeffs", &self.n_coeffs)
            .finish_non_exhaustive()
    }
}

impl BackendH {
    /// `n_coeffs` coefficients held by `inner`.
    pub fn new(n_coeffs: usize, inner: impl BackendCoeffs) -> BackendH {
        BackendH {
            n_coeffs,
            inner: Box::new(inner),
        }
    }

    /// Number of coefficients.
    pub fn len(&self) -> usize {
        self.n_coeffs
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.n_coeffs == 0
    }

    /// Copies the coefficients to the host.
    pub fn into_host(self) -> Result<Vec<Scalar>, ProverError> {
        self.inner.into_host()
    }

    /// The backend's own type back, or `self` when it holds another type.
    pub fn downcast<T: BackendCoeffs>(self) -> Result<T, BackendH> {
        let n_coeffs = self.n_coeffs;
        downcast_box::<T, _>(self.inner).map_err(|inner| BackendH { n_coeffs, inner })
    }
}

/// Storage for a, b and c that a backend lends the prover ([`ProverBackend::abc_buffers`]).
pub trait AbcStorage: BackendOwned {
    /// a, b and c (`m` elements each, bls-repr's Montgomery layout), writable once any
    /// copy reading them has completed.
    fn slices_mut(&mut self) -> Result<[&mut [FrRepr]; 3], ProverError>;
}

/// a, b and c of a domain of `m` points in buffers a backend lent (see [`AbcStorage`]);
/// the prover evaluates into them and hands them back to
/// [`ProverBackend::h_poly_staged`].
pub struct StagedAbc {
    m: usize,
    inner: Box<dyn AbcStorage>,
}

impl std::fmt::Debug for StagedAbc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StagedAbc").field("m", &self.m).finish()
    }
}

impl StagedAbc {
    /// Buffers of `m` elements each held by `inner`.
    pub fn new(m: usize, inner: impl AbcStorage) -> StagedAbc {
        StagedAbc {
            m,
            inner: Box::new(inner),
        }
    }

    /// Elements per vector (the domain size).
    pub fn len(&self) -> usize {
        self.m
    }

    /// Whether the vectors are empty.
    pub fn is_empty(&self) -> bool {
        self.m == 0
    }

    /// a, b and c for writing (or reading).
    pub fn slices_mut(&mut self) -> Result<[&mut [FrRepr]; 3], ProverError> {
        self.inner.slices_mut()
    }

    /// Copies a, b and c into host vectors of scalars; fails on a value that is not
    /// reduced.
    pub fn into_host(mut self) -> Result<AbcEvaluations, ProverError> {
        let [a, b, c] = self.slices_mut()?;
        let host = |v: &mut [FrRepr]| {
            gpu_ntt::reprs_to_scalars(v).map_err(|e| ProverError::Ntt(gpu_ntt::NttError::from(e)))
        };
        Ok(AbcEvaluations {
            a: host(a)?,
            b: host(b)?,
            c: host(c)?,
        })
    }

    /// The backend's own storage in place (for the backend that lent it), if it is `T`.
    pub fn downcast_mut<T: AbcStorage>(&mut self) -> Option<&mut T> {
        self.inner.as_any_mut().downcast_mut::<T>()
    }

    /// The backend's own type back, or `self` when it holds another type.
    pub fn downcast<T: AbcStorage>(self) -> Result<T, StagedAbc> {
        let m = self.m;
        downcast_box::<T, _>(self.inner).map_err(|inner| StagedAbc { m, inner })
    }
}

/// A proof's witness handed to a backend that evaluates a, b and c itself
/// ([`ProverBackend::witness_abc`]; the GPU backend: the witness staged for the device,
/// which evaluates them from the circuit's PCE in VRAM). Opaque to the prover; handed back
/// to [`ProverBackend::h_poly_witness`].
pub struct WitnessAbc {
    inner: Box<dyn BackendOwned>,
}

impl std::fmt::Debug for WitnessAbc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WitnessAbc").finish_non_exhaustive()
    }
}

impl WitnessAbc {
    /// A witness held by `inner`.
    pub fn new(inner: impl BackendOwned) -> WitnessAbc {
        WitnessAbc {
            inner: Box::new(inner),
        }
    }

    /// The backend's own type in place, if it is `T`.
    pub fn downcast_mut<T: BackendOwned>(&mut self) -> Option<&mut T> {
        self.inner.as_any_mut().downcast_mut::<T>()
    }

    /// The backend's own type back, or `self` when it holds another type.
    pub fn downcast<T: BackendOwned>(self) -> Result<T, WitnessAbc> {
        downcast_box::<T, _>(self.inner).map_err(|inner| WitnessAbc { inner })
    }
}

/// h's `m − 1` coefficients, where the H step left them.
#[derive(Debug)]
pub enum HPoly {
    /// On the host (the CPU backend).
    Host(Vec<Scalar>),
    /// Where the backend that computed it keeps it (the GPU backend: on the device, in
    /// Montgomery form, possibly still being computed); only that backend's `msms` reads
    /// it in place.
    Backend(BackendH),
}

impl HPoly {
    /// Number of coefficients.
    pub fn len(&self) -> usize {
        match self {
            HPoly::Host(h) => h.len(),
            HPoly::Backend(d) => d.len(),
        }
    }

    /// The coefficients on the host (copied back from a backend's memory if needed).
    pub fn into_host(self) -> Result<Vec<Scalar>, ProverError> {
        match self {
            HPoly::Host(h) => Ok(h),
            HPoly::Backend(d) => d.into_host(),
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
            HPoly::Backend(_) => 0,
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

    /// Host bytes the MSMs need at most, when the largest G1 MSM has `n_g1_max` scalars
    /// and the G2 MSM `n_g2`.
    fn msm_scratch_bytes(&self, n_g1_max: usize, n_g2: usize) -> u64;

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

    /// Charges, waiting at most `wait` for room (`None`: as long as it takes), whatever
    /// long-lived tables the backend will grow for proofs over a domain of `domain_size`
    /// points (the CPU backend: its NTT twiddles), so that such a proof does not meet a
    /// refusal halfway. An engine calls it before admitting a proof's working set; a
    /// backend without such tables does nothing.
    fn prepare(&self, _domain_size: usize, _wait: Option<Duration>) -> Result<(), ProverError> {
        Ok(())
    }

    /// Whether [`ProverBackend::abc_buffers`] gives buffers for a domain of `m` points
    /// (then a, b and c are charged to the backend, not to the proof's working set).
    fn stages_abc(&self, _m: usize) -> bool {
        false
    }

    /// snarkjs's H step for a key read from a `.zkey` (see `gpu_ntt::NttBackend::
    /// h_coset_evaluations`): the m values of a·b − c on the coset `shift·⟨ω⟩`, for the H
    /// MSM over the zkey's H points; on the host or left on the device for
    /// [`ProverBackend::msms`]. `inputs_released` as for [`ProverBackend::h_poly`].
    fn h_coset_evaluations(
        &self,
        abc: AbcEvaluations,
        shift: Scalar,
        inputs_released: &mut dyn FnMut(),
    ) -> Result<HOutput, ProverError>;

    /// Buffers for a, b and c of a domain of `m` points that
    /// [`ProverBackend::h_poly_staged`] reads in place, for the prover to evaluate into
    /// directly (the GPU backend: pinned buffers from its staging pool, in bls-repr's
    /// layout, charged to the pool and kept across proofs, so a proof neither allocates
    /// fresh host pages for a, b, c nor converts them afterwards). `None` (the default):
    /// the prover evaluates into host vectors for [`ProverBackend::h_poly`].
    fn abc_buffers(&self, _m: usize) -> Result<Option<StagedAbc>, ProverError> {
        Ok(None)
    }

    /// Starts copying a proof's staged a, b and c ([`ProverBackend::abc_buffers`]) to the
    /// device ahead of its [`ProverBackend::h_poly_staged`], on a stream of their own,
    /// so that the copies run while the device still works on the proof before it (an
    /// engine calls it when a synthesized proof is handed to a busy device). `Ok(true)`
    /// when queued (or queued before); `Ok(false)` when there is nothing to copy ahead
    /// or no room on the device for it now (then the H step copies them as before).
    /// The default: nothing, `Ok(false)`.
    fn prefetch_abc(&self, _abc: &mut StagedAbc) -> Result<bool, ProverError> {
        Ok(false)
    }

    /// Whether this backend evaluates a, b and c itself for proofs of `pce`'s circuit over
    /// a domain of `m` points ([`ProverBackend::witness_abc`]); may prepare for it (the
    /// GPU backend uploads the PCE to its device, charged to the VRAM budget, once). The
    /// prover then charges [`ProverBackend::witness_abc_bytes`] instead of a, b and c.
    /// The default: `false`.
    fn evaluates_abc(&self, _pce: &Pce, _m: usize) -> Result<bool, ProverError> {
        Ok(false)
    }

    /// Host bytes a proof's witness of `n_terms` values takes in the backend's staging
    /// when the backend evaluates a, b and c ([`ProverBackend::evaluates_abc`]), paid from
    /// the proof's working set; kept through the MSMs, whose staging it serves.
    fn witness_abc_bytes(&self, _n_terms: usize) -> u64 {
        0
    }

    /// Takes a proof's witness for the backend to evaluate a, b and c from (its staging
    /// paid from `from`), or `Ok(None)` when it does not (then the prover evaluates them).
    /// The witness check is the backend's then: [`ProverBackend::h_poly_witness`] reports
    /// an unsatisfied row as [`ProverError::Unsatisfied`].
    fn witness_abc(
        &self,
        _pce: &Pce,
        _m: usize,
        _witness: (&[Scalar], &[Scalar]),
        _from: &mut Reservation,
    ) -> Result<Option<WitnessAbc>, ProverError> {
        Ok(None)
    }

    /// [`ProverBackend::prefetch_abc`] for a witness taken by
    /// [`ProverBackend::witness_abc`]: its copy to the device started ahead.
    fn prefetch_witness(&self, _w: &mut WitnessAbc) -> Result<bool, ProverError> {
        Ok(false)
    }

    /// The H step from a witness taken by [`ProverBackend::witness_abc`]: a, b and c
    /// evaluated and checked by the backend, then as [`ProverBackend::h_poly_staged`].
    fn h_poly_witness(&self, _w: WitnessAbc) -> Result<HOutput, ProverError> {
        Err(ProverError::BackendUnavailable {
            backend: "cpu",
            reason: "this backend does not evaluate a, b and c from a witness",
        })
    }

    /// Pins ahead of use the staging buffers `proofs` proofs over a domain of `m` points
    /// take at once ([`ProverBackend::abc_buffers`]), charged to the backend's pool as
    /// idle buffers; returns the bytes of such buffers idle in the pool now. Within the
    /// budget's room, evicting nothing; what did not fit is pinned on demand as before.
    /// An engine calls it when a circuit is registered, so that its first proofs do not
    /// pin while others run (pinning takes the driver's locks: every thread's driver calls
    /// wait). The default (no staging): nothing, 0.
    fn prewarm_staging(&self, _m: usize, _proofs: usize) -> Result<u64, ProverError> {
        Ok(0)
    }

    /// Host bytes of pinned staging a proof over a domain of `m` points, whose largest MSM
    /// has `n_max_terms` scalars, takes from the backend's pool: what the prover adds to
    /// its working set and hands to [`ProverBackend::abc_buffers_within`] and
    /// [`ProverBackend::msms_within`], so that the pool's buffers are paid from the
    /// admitted reservation instead of a second request that a full budget refuses.
    fn staging_bytes(&self, _m: usize, _n_max_terms: usize) -> (u64, u64) {
        (0, 0)
    }

    /// The MSMs' staging (the second part of [`ProverBackend::staging_bytes`]) of a proof
    /// whose a, b and c went into this backend's buffers
    /// ([`ProverBackend::abc_buffers_within`]), over a domain of `m` points with `n_terms`
    /// inputs and aux values: less when the MSMs stage their scalars in those buffers.
    fn msm_staging_after_abc(&self, m: usize, n_terms: usize) -> u64 {
        self.staging_bytes(m, n_terms).1
    }

    /// [`ProverBackend::abc_buffers`], paid from `from` (see
    /// [`ProverBackend::staging_bytes`]).
    fn abc_buffers_within(
        &self,
        m: usize,
        _from: &mut Reservation,
    ) -> Result<Option<StagedAbc>, ProverError> {
        self.abc_buffers(m)
    }

    /// [`ProverBackend::msms`], its staging paid from `from` (see
    /// [`ProverBackend::staging_bytes`]).
    fn msms_within(
        &self,
        bases: &KeyView<'_>,
        h: HPoly,
        inputs: &MsmInputs<'_>,
        _from: &mut Reservation,
    ) -> Result<MsmOutputs, ProverError> {
        self.msms(bases, h, inputs)
    }

    /// The key's bases where this backend reads them best, held for one proof: the CPU
    /// backend's in host memory ([`ProvingKey::view_host`], the default); the GPU
    /// backend's on its device when there is room ([`ProvingKey::view_for_gpu`]). May
    /// load or move a stored key (charged, and waiting on the budget as the store is
    /// configured). A proof whose admission already holds its key reads it through
    /// [`ProvingKey::view_held`] instead and never comes here.
    fn view_key<'k>(&self, key: &'k ProvingKey) -> Result<KeyView<'k>, ProverError> {
        key.view_host()
    }

    /// Device bytes a proof over a key of these sizes needs beside the key's bases when
    /// this backend places them on its device (what [`ProverBackend::view_key`] keeps
    /// free, and what an engine placing the key itself must keep free): 0 for a backend
    /// that reads its bases from host memory.
    fn device_headroom_bytes(&self, _lens: &QueryLens) -> u64 {
        0
    }

    /// [`ProverBackend::h_poly`] from buffers this backend's
    /// [`ProverBackend::abc_buffers`] gave out, filled with a, b and c. The default copies
    /// them into host vectors.
    fn h_poly_staged(&self, abc: StagedAbc) -> Result<HOutput, ProverError> {
        self.h_poly(abc.into_host()?, &mut || {})
    }

    /// The five MSMs of one proof over the key's `bases` (a view from
    /// [`ProverBackend::view_key`] or [`ProvingKey::view_held`]), sliced as groth16 slices
    /// them; `h` is what this backend's [`ProverBackend::h_poly`] returned (or host
    /// coefficients). Reads the bases where the view has them: nothing is loaded here.
    fn msms(
        &self,
        bases: &KeyView<'_>,
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
    /// of the largest domain seen, per gpu-ntt's cost model), without waiting.
    fn charge_twiddles(&self, domain_size: usize) -> Result<(), ProverError> {
        self.charge_twiddles_within(domain_size, Some(Duration::ZERO))
    }

    /// The same, waiting at most `wait` for room (evicting idle cache entries first).
    fn charge_twiddles_within(
        &self,
        domain_size: usize,
        wait: Option<Duration>,
    ) -> Result<(), ProverError> {
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
        let more = self
            .budget
            .request(want - held, Category::Other)
            .label("groth16-prover ntt twiddles")
            .reserve(wait)
            .map_err(refused)?;
        match slot.as_mut() {
            Some(r) => r.merge(more).map_err(refused)?,
            None => *slot = Some(more),
        }
        Ok(())
    }
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

    fn prepare(&self, domain_size: usize, wait: Option<Duration>) -> Result<(), ProverError> {
        self.charge_twiddles_within(domain_size, wait)
    }

    fn msm_scratch_bytes(&self, n_g1_max: usize, n_g2: usize) -> u64 {
        // One MSM at a time, each charged from gpu-msm's own plan for its curve.
        self.msm
            .scratch_bytes_g1(n_g1_max)
            .max(self.msm.scratch_bytes_g2(n_g2))
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

    fn h_coset_evaluations(
        &self,
        abc: AbcEvaluations,
        shift: Scalar,
        _inputs_released: &mut dyn FnMut(),
    ) -> Result<HOutput, ProverError> {
        let m = gpu_ntt::h_domain_size(abc.a.len())?;
        self.charge_twiddles(m)?;
        Ok(HOutput {
            h: HPoly::Host(self.ntt.h_coset_evaluations(abc, shift)?),
            transfers: Duration::ZERO,
        })
    }

    fn msms(
        &self,
        bases: &KeyView<'_>,
        h: HPoly,
        x: &MsmInputs<'_>,
    ) -> Result<MsmOutputs, ProverError> {
        let start = Instant::now();
        let h = h.into_host()?;
        let mut out = self.msms_serial(bases, &h, x)?;
        out.timings.wall = start.elapsed();
        Ok(out)
    }
}

/// Scalars of one part of an MSM, filtered by the mask when there is one.
pub(crate) type Part<'a> = (&'a [Scalar], Option<&'a DensityMask>);

/// The parts of one query's MSM (each over the next bases, as groth16 slices them) summed
/// on the CPU, reading the bases where the host has them.
pub(crate) fn cpu_sum<C: GpuCurve>(
    msm: &CpuMsm,
    query: &'static str,
    bases: &QueryBases<'_, C>,
    parts: &[Part<'_>],
) -> Result<C::Projective, ProverError>
where
    C::Affine: MsmBase<Curve = C::Projective>,
    C::Repr: MsmBase<Curve = C::Projective>,
{
    let mut start = 0;
    let mut sum = <C::Projective as group::Group>::identity();
    for (scalars, mask) in parts {
        let k = mask.map_or(scalars.len(), DensityMask::count_ones);
        let part = match bases {
            QueryBases::Affine(b) => msm.msm(slice(query, b, start, start + k)?, scalars, *mask),
            QueryBases::Host(b) => msm.msm(slice(query, b, start, start + k)?, scalars, *mask),
            QueryBases::Device { .. } => {
                return Err(ProverError::BackendUnavailable {
                    backend: "cpu",
                    reason: "the parameter bases are in device memory",
                })
            }
        };
        sum += part.map_err(msm_err(query))?;
        start += k;
    }
    Ok(sum)
}

impl CpuBackend {
    /// The five MSMs one after another, over the key's bases where they are.
    fn msms_serial(
        &self,
        view: &KeyView<'_>,
        h: &[Scalar],
        x: &MsmInputs<'_>,
    ) -> Result<MsmOutputs, ProverError> {
        let msm = &self.msm;
        let mut timings = MsmTimings::default();
        let g1 =
            |q: G1Query, parts: &[Part<'_>]| timed(|| cpu_sum(msm, q.name(), &view.g1(q), parts));

        let h_len = h.len();
        let (h, t) = g1(G1Query::H, &[(h, None)]);
        timings.h = t;
        let h = h?;
        let (l, t) = g1(G1Query::L, &[(x.aux, None)]);
        timings.l = t;
        let l = l?;
        // A: every input has a base (groth16's input rows), aux only where dense.
        let (a, t) = g1(G1Query::A, &[(x.inputs, None), (x.aux, Some(x.a_aux))]);
        timings.a = t;
        let a = a?;
        let b_parts: [Part<'_>; 2] = [(x.inputs, Some(x.b_input)), (x.aux, Some(x.b_aux))];
        let (b_g1, t) = g1(G1Query::BG1, &b_parts);
        timings.b_g1 = t;
        let b_g1 = b_g1?;
        let (b_g2, t) = timed(|| cpu_sum(msm, "b_g2_query", &view.b_g2(), &b_parts));
        timings.b_g2 = t;
        let b_g2 = b_g2?;
        let n_b = x.b_input.count_ones() + x.b_aux.count_ones();
        let used = [
            ("h_query", h_len),
            ("l_query", x.aux.len()),
            ("a_query", x.inputs.len() + x.a_aux.count_ones()),
            ("b_g1_query", n_b),
            ("b_g2_query", n_b),
        ];
        let placement = used
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .map(|(query, n)| QueryPlacement {
                query,
                kind: BasesKind::Cpu,
                n,
                sorted_with: None,
            })
            .collect();

        Ok(MsmOutputs {
            h,
            l,
            a,
            b_g1,
            b_g2,
            timings,
            placement,
        })
    }
}
