//! The CUDA backend: H on the GPU (`gpu_ntt::GpuNtt`), the four G1 MSMs and the B MSM on
//! G2 on the GPU (`gpu_msm::GpuMsm`), over the key's bases where they live. The G2 MSM is
//! driven from its own thread, on a stream of its own, while the G1 MSMs run.
//!
//! # Where the bases live
//! The backend keeps no bases. Each proof asks its key for a view on this device
//! ([`ProvingKey::view_for_gpu`]): a key over an `srs-store` entry is moved up to the
//! store's device tier when the VRAM budget admits the whole key plus the proof's
//! working headroom (idle device entries of other keys may be evicted for it, LRU), else
//! to the pinned tier, else it stays in host memory; the store is the only home of the
//! bases and demotes idle entries under pressure, never one a proof holds. Per query
//! ([`bases`]): bases on this device are summed in place; bases in host memory are
//! streamed to the device in chunks of 2^22 G1 / 2^21 G2 bases on a second stream while
//! the previous chunk is summed (two chunks of VRAM whatever the query's size);
//! `bls12_381` points (a key over in-memory `groth16::Parameters`) are converted into a
//! charged host copy for the proof and streamed; a query whose streaming the VRAM budget
//! refuses runs on the CPU.
//!
//! # One MSM per query
//! A device MSM needs as many scalars as bases, so the A and B sums are formed as one MSM
//! each: A over `a_query[..n_in + |a_aux|]` with the scalars `inputs ++ aux[a_aux]`, B over
//! `b_g1_query[..|b_in| + |b_aux|]` with `inputs[b_in] ++ aux[b_aux]`. That is exactly
//! groth16's two sums added (exact group arithmetic), so proofs do not change.
//!
//! # Host memory and copies
//! H ([`h_step`]): a, b and c are evaluated by the prover straight into pinned staging
//! buffers from the backend's [`PinnedStagingPool`] (charged to the backend's budget,
//! `Category::PinnedPool`; [`ProverBackend::abc_buffers`]) and copied asynchronously. h
//! **stays on the device**: the H MSM adopts the result buffer in place; nothing comes
//! back. MSMs ([`staging`]): the witness goes to the device **once**: its Montgomery
//! limbs (`aux ++ inputs`, a plain copy of what each `Scalar` holds) are written into one
//! pinned buffer (one of a, b, c's after the H step) and copied on the backend's copy
//! stream, where the device converts them to canonical and compacts a's and b's scalars
//! by the density masks (`gpu_msm::GpuMsm::select_scalars`) while the H MSM runs; l sums
//! the aux part in place, and B on G1 and on G2 read the same buffer. A device thread
//! runs the G1 MSMs in order. Host bytes outside the pool: a mask's words and word
//! offsets while they upload (12 bytes per 64 terms), converted in-memory bases (charged,
//! `Category::Transient`), and for a query summed on the CPU its
//! scalars (h copied back when it is H) and the CPU MSM's scratch.

mod bases;
mod h_step;
mod pce;
mod resident;
mod staging;

pub use pce::sparse_parts;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bls12_381::{G1Projective, G2Projective, Scalar};
use cudarc::driver::{CudaEvent, CudaStream};
use gpu_device::{Gpu, GpuError, PinnedStagingPool};
use gpu_msm::{
    CpuMsm, DeviceScalars, G1Curve, G2Curve, GpuMsm, GpuMsmError, MsmError, GPU_MAX_WINDOW_BITS,
    GPU_MIN_WINDOW_BITS,
};
use gpu_ntt::{AbcEvaluations, GpuNtt, GpuNttError, NttError};
use memory_budget::{Budget, Category, Reservation};

use bases::{GpuBases, Placed, TableSource, STREAM_CHUNK_G1, STREAM_CHUNK_G2};
use h_step::DeviceH;
use staging::{staging_err, take_held_abc, PinnedAbc, StagedB, WitnessNeeds, SCALAR_LIMBS};

use crate::backend::{
    BackendKind, BasesKind, HOutput, HPoly, MsmInputs, MsmOutputs, MsmTimings, Part, ProverBackend,
    QueryPlacement, StagedAbc, WitnessAbc,
};
use crate::key::{G1Query, GpuPlacement, KeyView, QueryLens};
use crate::{ProverError, ProvingKey};

/// Host bytes per term a CPU fallback sum charges for its scalars: h left on the device
/// by the H step is read back in the device layout, then converted to scalars
/// ([`GpuBackend::scalars_back`]); the witness's queries are charged as much.
const GPU_TERM_BYTES: u64 = 64;

/// Pooled staging bytes for `n` scalars (one size class of u64 limbs).
fn staging_buffer_bytes(n: usize) -> u64 {
    8 * gpu_device::size_class(SCALAR_LIMBS * n) as u64
}

/// Bytes of the pool's buffer for the witness staging's three density masks, each at
/// most `n` bits (words and offsets: `GpuMsm::mask_staging_words`).
fn mask_staging_bytes(n: usize) -> u64 {
    let w = n.div_ceil(64).max(1);
    8 * gpu_device::size_class(3 * (w + w.div_ceil(2))) as u64
}

/// Device bytes a proof needs beyond the key's bases, per term of its largest query and
/// per point of its domain (scalars 32, sorted entries about 64 at the default windows, G1
/// partial sums of the chunked accumulation 2 × 192 × 16 / 256 = 24; a, b, c and h on the
/// device, 4 × 32), plus a fixed part (buckets, two streamed chunks, the driver's
/// temporaries). What a key's promotion to the device tier leaves free.
const HEADROOM_PER_TERM: u64 = 120;
const HEADROOM_PER_POINT: u64 = 128;
const HEADROOM_FIXED: u64 = 1 << 30;

/// The CUDA prover backend on one device. `Send + Sync`; proofs through one backend may
/// run concurrently (their work shares the device's streams).
pub struct GpuBackend {
    gpu: Gpu,
    ntt: GpuNtt,
    msm: GpuMsm,
    cpu: CpuMsm,
    pool: PinnedStagingPool<u64>,
    /// Scalar copies run here, so they overlap the MSM running on the device's stream.
    copy_stream: Mutex<Option<Arc<CudaStream>>>,
    /// The next proof's a, b and c go to the device here while the device works on the
    /// current one (`prefetch_abc`).
    prefetch_stream: Mutex<Option<Arc<CudaStream>>>,
    /// The G2 engine, on a stream of its own (created on first use) so the B MSM on G2
    /// runs beside the G1 MSMs instead of after them.
    msm_g2: Mutex<Option<Arc<GpuMsm>>>,
    /// The engine l, a and b on G1 run on beside H's MSM in a small proof, on a stream of
    /// its own (created on first use; `with_side_msms`).
    msm_side: Mutex<Option<Arc<GpuMsm>>>,
    /// Whether l, a and b on G1 run beside H's MSM: `None` by the proof's size
    /// ([`SIDE_MSMS_UP_TO`]).
    side_msms: Option<bool>,
    /// Whether l and a's aux part share one sort where they can (`with_one_sort_l_a`).
    one_sort_l_a: bool,
    budget: Budget,
    placement: GpuPlacement,
    /// Whether a, b and c are evaluated on the device from the circuit's PCE in VRAM
    /// (default true; `with_device_abc`).
    device_abc: bool,
    /// The circuits' PCEs on the device.
    pces: pce::ResidentPces,
    /// Keeps their evictor registered with the device's VRAM budget.
    _pce_evictor: memory_budget::EvictorRegistration,
    /// The kernel that evaluates them (`with_abc_kernel`).
    abc_kernel: gpu_ntt::SparseKernel,
    /// Whether a proof whose witness is copied ahead has a, b and c evaluated ahead too
    /// (`with_abc_ahead`).
    abc_ahead: bool,
    /// Window bits of the precomputed tables the G1 MSMs over device-tier bases read, or
    /// `None` (`with_precomputed_windows`).
    precomputed_bits: Option<u32>,
    /// Those tables, for the last key proved.
    precomputed: Mutex<bases::PrecomputedTables>,
}

impl std::fmt::Debug for GpuBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuBackend")
            .field("gpu", &self.gpu)
            .field("placement", &self.placement)
            .finish_non_exhaustive()
    }
}

pub(crate) fn ntt_err(e: GpuNttError) -> ProverError {
    ProverError::Ntt(NttError::from(e))
}

pub(crate) fn gpu_msm_err(query: &'static str) -> impl FnOnce(GpuMsmError) -> ProverError {
    move |e| ProverError::Msm {
        query,
        source: MsmError::from(e),
    }
}

pub(crate) fn driver_err(call: &'static str, code: cudarc::driver::DriverError) -> ProverError {
    ntt_err(GpuNttError::Gpu(GpuError::Driver { call, code }))
}

/// A mutex's value, also after a panic elsewhere poisoned it (every value kept behind the
/// backend's mutexes is replaced whole, so it stays consistent).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The stream in `slot`, made by `make` on first use.
fn lazy_stream(
    slot: &Mutex<Option<Arc<CudaStream>>>,
    make: impl FnOnce() -> Result<Arc<CudaStream>, GpuError>,
) -> Result<Arc<CudaStream>, ProverError> {
    let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(s) = slot.as_ref() {
        return Ok(s.clone());
    }
    let s = make().map_err(|e| ntt_err(GpuNttError::Gpu(e)))?;
    *slot = Some(s.clone());
    Ok(s)
}

/// `PINION_ABC_KERNEL` (`serial` or `batched`), else the default kernel.
fn abc_kernel_from_env() -> gpu_ntt::SparseKernel {
    match std::env::var("PINION_ABC_KERNEL").as_deref() {
        Ok("batched") => gpu_ntt::SparseKernel::Batched,
        Ok("serial") => gpu_ntt::SparseKernel::Serial,
        _ => gpu_ntt::SparseKernel::default(),
    }
}

/// Whether l, a and b run beside H's MSM (of `n_h` terms) under the setting `forced`
/// ([`GpuBackend::with_side_msms`]).
fn side_msms_on(forced: Option<bool>, n_h: usize) -> bool {
    forced.unwrap_or(n_h <= SIDE_MSMS_UP_TO)
}

/// Device bytes a proof needs beyond the bases: the largest MSM's scratch, a second one's
/// when l, a and b run beside H's (`side`), and the H step's.
fn headroom_with(lens: &QueryLens, side: bool) -> u64 {
    let max_terms = [lens.h, lens.l, lens.a, lens.b_g1, lens.b_g2]
        .into_iter()
        .max()
        .unwrap_or(0) as u64;
    let domain = lens.domain_size() as u64;
    let side_terms = if side {
        [lens.l, lens.a, lens.b_g1].into_iter().max().unwrap_or(0) as u64
    } else {
        0
    };
    (max_terms + side_terms) * HEADROOM_PER_TERM + domain * HEADROOM_PER_POINT + HEADROOM_FIXED
}

/// Whether a device MSM failed for lack of device memory (then the CPU takes the query).
fn out_of_vram(e: &GpuMsmError) -> bool {
    matches!(e, GpuMsmError::Gpu(g) if g.is_vram_refusal())
}

impl GpuBackend {
    /// The backend on device 0; host-side temporaries are charged to `budget`. A missing
    /// driver or device is [`ProverError::GpuUnavailable`], never a panic.
    pub fn new(budget: Budget) -> Result<GpuBackend, ProverError> {
        let gpu = Gpu::open(0).map_err(|source| ProverError::GpuUnavailable { source })?;
        Ok(GpuBackend::with_gpu(gpu, budget))
    }

    /// The backend on an opened device. Its pinned staging pool (a, b, c and MSM scalars
    /// on their way to the device) is charged to `budget` under `Category::PinnedPool`
    /// and kept across proofs; the budget can evict its idle buffers.
    pub fn with_gpu(gpu: Gpu, budget: Budget) -> GpuBackend {
        let pces = pce::ResidentPces::default();
        let _pce_evictor = gpu.vram_budget().register_evictor(pces.evictor());
        GpuBackend {
            ntt: GpuNtt::new(gpu.clone()),
            msm: GpuMsm::new(gpu.clone()),
            cpu: CpuMsm::new(),
            pool: PinnedStagingPool::cuda(gpu.clone(), budget.clone(), "groth16-prover staging"),
            copy_stream: Mutex::new(None),
            prefetch_stream: Mutex::new(None),
            msm_g2: Mutex::new(None),
            msm_side: Mutex::new(None),
            side_msms: match std::env::var("PINION_SIDE_MSMS").as_deref() {
                Ok("0") => Some(false),
                Ok("1") => Some(true),
                _ => None,
            },
            one_sort_l_a: std::env::var("PINION_ONE_SORT_L_A").as_deref() != Ok("0"),
            gpu,
            budget,
            placement: GpuPlacement::Auto,
            device_abc: true,
            pces,
            _pce_evictor,
            abc_kernel: abc_kernel_from_env(),
            abc_ahead: std::env::var("PINION_ABC_AHEAD").as_deref() != Ok("0"),
            precomputed_bits: std::env::var("PINION_PRECOMPUTED_WINDOWS")
                .ok()
                .and_then(|v| v.parse().ok())
                .filter(|c| (GPU_MIN_WINDOW_BITS..=GPU_MAX_WINDOW_BITS).contains(c)),
            precomputed: Mutex::default(),
        }
    }

    /// Whether the G1 MSMs over bases on this device (the store's device tier) read tables
    /// of precomputed windows of `bits` bits instead (`gpu_msm::PrecomputedBasesG1`: each
    /// window's digits into one shared set of buckets, W = ⌈256 / bits⌉ copies of the
    /// bases). Default `None`, or `PINION_PRECOMPUTED_WINDOWS` (bits, e.g. `20`) for a
    /// benchmark's comparison. A query with fewer terms than the 2^(bits-1) shared buckets
    /// is summed over its bases as they are (no table). The tables of the last key proved
    /// are kept (made on its first proof, about W times its G1 queries' VRAM, charged to
    /// the VRAM budget; a key whose table the budget refuses is proved over its bases as
    /// they are). Not for a device shared by several keys' proofs: the engine's VRAM
    /// planning (`device_headroom_bytes`) does not count these tables, which only the
    /// budget's refusals bound. Same proofs;
    /// on an H200 a synthetic 2^24 proof's H + MSMs took 0.357 s with 20 bits against 0.384
    /// (session 26; on an H100 in session 39, 0.314 against 0.383 s, l and a over one sort:
    /// [`Self::with_one_sort_l_a`]), tables of 19.5 GiB a query, built in about 2 s each on
    /// the key's first proof.
    /// `bits` outside [`gpu_msm::GPU_MIN_WINDOW_BITS`]`..=`[`gpu_msm::GPU_MAX_WINDOW_BITS`]
    /// is `None`.
    pub fn with_precomputed_windows(mut self, bits: Option<u32>) -> GpuBackend {
        self.precomputed_bits =
            bits.filter(|c| (GPU_MIN_WINDOW_BITS..=GPU_MAX_WINDOW_BITS).contains(c));
        *lock(&self.precomputed) = bases::PrecomputedTables::default();
        self
    }

    /// Device bytes the tables of precomputed windows hold now
    /// ([`Self::with_precomputed_windows`]).
    pub fn precomputed_bytes(&self) -> u64 {
        lock(&self.precomputed).bytes()
    }

    /// Whether a proof whose witness is copied to the device ahead of its H step
    /// (`ProverBackend::prefetch_abc`, as an engine does while the device works on
    /// another proof) also has a, b and c evaluated there, on the prefetch stream beside
    /// that other proof's MSMs (default true, or `PINION_ABC_AHEAD=0` for a benchmark's
    /// comparison); otherwise its H step evaluates them first.
    pub fn with_abc_ahead(mut self, on: bool) -> GpuBackend {
        self.abc_ahead = on;
        self
    }

    /// Which kernel evaluates a, b and c on the device (default: `PINION_ABC_KERNEL`,
    /// `serial` or `batched`, else [`gpu_ntt::SparseKernel::default`]): both give the
    /// same values; the environment variable lets a benchmark compare them in one build.
    pub fn with_abc_kernel(mut self, kernel: gpu_ntt::SparseKernel) -> GpuBackend {
        self.abc_kernel = kernel;
        self
    }

    /// Whether l, a and b on G1 run on a second stream beside H's MSM (`Some(true)`), after
    /// it on the device's stream (`Some(false)`), or, by default (`None`, unless
    /// `PINION_SIDE_MSMS` is `1` or `0`), beside it when H has at most
    /// [`SIDE_MSMS_UP_TO`] terms (whenever they run beside it, the backend's
    /// [`ProverBackend::device_headroom_bytes`] leaves room for the second MSM's scratch). In a small proof each MSM is mostly fixed costs (its
    /// classification's and sum's round trips to the host, allocations, the bucket
    /// reduction), which the other stream's work fills; in a large one both streams would
    /// only time-share the device, each holding its sorted entries at once (11 GiB more
    /// VRAM at 2^27, session 21).
    pub fn with_side_msms(mut self, on: Option<bool>) -> GpuBackend {
        self.side_msms = on;
        self
    }

    /// Whether l and the aux part of a are summed over one sort of the aux scalars
    /// (default true, or `PINION_ONE_SORT_L_A=0` for a benchmark's comparison), where
    /// both queries are on this device: the bucket sort of l's scalars serves both sums,
    /// a's inputs are summed apart, and a's aux scalars are never staged. a's aux part
    /// reads its bases after the inputs in place where A keeps every aux variable;
    /// otherwise those bases laid out one per aux variable, infinity where A has none
    /// (gpu-msm's `expand_bases_g1_with`): for the proof, where the VRAM budget has room
    /// for them twice over (n_aux·96 bytes, not in the device headroom a key plans:
    /// without the room the sorts stay two), or once in a table of precomputed windows
    /// when l has one ([`Self::with_precomputed_windows`]). Same proofs, one sort fewer.
    pub fn with_one_sort_l_a(mut self, on: bool) -> GpuBackend {
        self.one_sort_l_a = on;
        self
    }

    /// Whether this backend evaluates a proof's a, b and c on the device (default true):
    /// the circuit's PCE is uploaded to VRAM once (charged to the device's VRAM budget,
    /// the few least recently used kept; those no proof holds give their VRAM back when
    /// the budget runs short after 30 s unused, or at once when a proof of this backend
    /// needs the room), each proof's witness goes to the device once,
    /// and the three sparse mat-vecs and the witness check run there; the host computes
    /// only the witness. Off: the host evaluates a, b and c into pinned buffers, which
    /// are copied to the device (what a backend that keeps its bases in pinned memory does:
    /// [`GpuPlacement::Pinned`] turns it off).
    pub fn with_device_abc(mut self, on: bool) -> GpuBackend {
        self.device_abc = on;
        self
    }

    /// VRAM the backend's device PCEs hold.
    pub fn device_pce_bytes(&self) -> u64 {
        self.pces.bytes()
    }

    /// How a stored key's bases are placed for this backend's proofs (default
    /// [`GpuPlacement::Auto`]: the device tier when it fits). [`GpuPlacement::Pinned`]
    /// leaves VRAM to other work (and is how the tests reach the streamed path);
    /// [`GpuPlacement::AsLoaded`] streams from wherever the key is.
    pub fn with_placement(mut self, placement: GpuPlacement) -> GpuBackend {
        self.placement = placement;
        if placement == GpuPlacement::Pinned {
            self.device_abc = false;
        }
        self
    }

    /// The pinned staging pool (its stats show what it holds charged).
    pub fn pinned_pool(&self) -> &PinnedStagingPool<u64> {
        &self.pool
    }

    /// The device.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// Device bytes a proof over a key of these sizes needs beyond the bases, for a
    /// backend with the default rule for l, a and b beside H's MSM ([`Self::with_side_msms`]
    /// with `None`); a backend's own, its setting included, is
    /// [`ProverBackend::device_headroom_bytes`].
    pub fn headroom_bytes(lens: &QueryLens) -> u64 {
        headroom_with(lens, side_msms_on(None, lens.h))
    }

    /// The backend's copy stream (created on first use). A feeder: the witness's
    /// conversion and selections queued on it are what the l MSM waits for (of the
    /// greatest priority when the device was opened so).
    fn copy_stream(&self) -> Result<Arc<CudaStream>, ProverError> {
        lazy_stream(&self.copy_stream, || self.gpu.new_feeder_stream())
    }

    /// The stream a, b and c are copied ahead on (created on first use).
    fn prefetch_stream(&self) -> Result<Arc<CudaStream>, ProverError> {
        lazy_stream(&self.prefetch_stream, || self.gpu.new_stream())
    }

    /// `bytes` of short-lived host memory for `what`, charged as `Category::Transient`.
    fn transient(&self, bytes: u64, what: &'static str) -> Result<Reservation, ProverError> {
        self.budget
            .try_reserve(bytes, Category::Transient, what)
            .map_err(|source| ProverError::Budget {
                what,
                requested_bytes: bytes,
                source,
            })
    }

    /// The MSM engine in `slot`, on a stream of its own made on first use (a failure to
    /// make it is reported against `query`).
    fn lazy_engine(
        &self,
        slot: &Mutex<Option<Arc<GpuMsm>>>,
        query: &'static str,
    ) -> Result<Arc<GpuMsm>, ProverError> {
        let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = slot.as_ref() {
            return Ok(m.clone());
        }
        let stream = self
            .gpu
            .new_stream()
            .map_err(|e| gpu_msm_err(query)(GpuMsmError::Gpu(e)))?;
        let m = Arc::new(GpuMsm::new(self.gpu.with_stream(stream)));
        *slot = Some(m.clone());
        Ok(m)
    }

    /// The G2 engine on its own stream (created on first use).
    fn g2_engine(&self) -> Result<Arc<GpuMsm>, ProverError> {
        self.lazy_engine(&self.msm_g2, "b_g2_query")
    }

    /// a's bases after its inputs (one a set bit of A's aux density), read in place, when
    /// this proof may sum a's aux part over l's scalars ([`Self::with_one_sort_l_a`]): l
    /// and a both read in place on this device. With the density's every bit set they
    /// serve as they are; otherwise only laid out one per aux variable in a table of
    /// precomputed windows (`msms_from`).
    fn one_sort_l_a<'a>(
        &self,
        placed: &[Option<Placed<'a, G1Curve>>; 4],
        x: &MsmInputs<'_>,
    ) -> Option<gpu_msm::DeviceBasesView<'a, G1Curve>> {
        let (n_in, n_aux) = (x.inputs.len(), x.aux.len());
        if !self.one_sort_l_a || n_aux == 0 {
            return None;
        }
        match (&placed[G1Query::L as usize], &placed[G1Query::A as usize]) {
            (
                Some(Placed::Gpu(GpuBases::Resident(_))),
                Some(Placed::Gpu(GpuBases::Resident(a))),
            ) => a.skip(n_in).filter(|aux| aux.len() >= x.a_aux.count_ones()),
            _ => None,
        }
    }

    /// The engine of l, a and b on G1 beside H's MSM when this proof (H of `n_h` terms)
    /// runs them there ([`Self::with_side_msms`]), else `None`.
    fn side_engine(&self, n_h: usize) -> Result<Option<Arc<GpuMsm>>, ProverError> {
        if !side_msms_on(self.side_msms, n_h) {
            return Ok(None);
        }
        self.lazy_engine(&self.msm_side, "l_query").map(Some)
    }

    /// The device MSMs sent on `rx`, in order, on `engine`'s stream: each waits for its
    /// scalars' copy (`copied`), then its sum returns. An MSM the VRAM budget refuses
    /// comes back as `None` (the CPU takes it). Also returns how long the host waited for
    /// copies.
    fn run_device_jobs(
        &self,
        engine: &GpuMsm,
        rx: std::sync::mpsc::Receiver<DeviceJob<'_>>,
    ) -> Result<(DeviceSums, Duration), ProverError> {
        let mut sums = Vec::new();
        let mut waited = Duration::ZERO;
        for job in rx {
            let t = Instant::now();
            if let Some(copied) = &job.copied {
                // Timed on the host (the MSMs before it are done: each returns its sum):
                // how long the device would idle for these scalars.
                copied
                    .synchronize()
                    .map_err(|c| driver_err("cuEventSynchronize", c))?;
                waited += t.elapsed();
                engine
                    .gpu()
                    .stream()
                    .wait(copied)
                    .map_err(|c| driver_err("cuStreamWaitEvent", c))?;
            }
            let result = match &job.also {
                None => job
                    .bases
                    .msm(engine, &job.scalars, STREAM_CHUNK_G1)
                    .map(|p| [Some(p), None]),
                Some((_, also)) => job
                    .bases
                    .msm_with(also, engine, &job.scalars, STREAM_CHUNK_G1)
                    .map(|[p, q]| [Some(p), Some(q)]),
            };
            let (sums_of, kind, back) = match result {
                Ok(p) => (p, job.bases.kind(), None),
                // Scalars the device holds the only copy of (h, adopted in place) come back
                // to the host for the CPU's sum.
                Err(e) if out_of_vram(&e) => {
                    let back = if job.only_copy {
                        Some(self.scalars_back(engine, job.q, &job.scalars)?)
                    } else {
                        None
                    };
                    ([None, None], BasesKind::Cpu, back)
                }
                Err(e) => return Err(gpu_msm_err(job.q.name())(e)),
            };
            drop(job.scalars);
            let time = t.elapsed();
            sums.push(DeviceSum {
                q: job.q,
                sum: sums_of[0],
                kind,
                time,
                back,
                sorted_with: None,
            });
            if let Some((q, also)) = &job.also {
                sums.push(DeviceSum {
                    q: *q,
                    sum: sums_of[1],
                    kind: match sums_of[1] {
                        Some(_) => also.kind(),
                        None => BasesKind::Cpu,
                    },
                    time,
                    back: None,
                    sorted_with: Some(job.q),
                });
            }
        }
        Ok((sums, waited))
    }

    /// The scalars of a refused MSM read back from the device, as scalars for the CPU's
    /// sum: canonical words copied back through `engine`'s stream, then converted. Both
    /// are charged first ([`GPU_TERM_BYTES`] a term, as transient; no wait), and the
    /// charge is kept for the fallback's sum (the words' half of it until then).
    fn scalars_back(
        &self,
        engine: &GpuMsm,
        q: G1Query,
        scalars: &DeviceScalars,
    ) -> Result<ScalarsBack, ProverError> {
        let n = scalars.len();
        let charge = self.cpu_fallback_charge(GPU_TERM_BYTES * n as u64)?;
        let mut words = vec![0u32; 8 * n];
        engine
            .gpu()
            .copy_prefix_to_host(scalars.words(), &mut words)
            .map_err(|e| gpu_msm_err(q.name())(GpuMsmError::Gpu(e)))?;
        // 8n words: a whole number of scalars (`cast_slice` cannot fail on it).
        let scalars = gpu_msm::scalars_from_words(bytemuck::cast_slice(&words))
            .map_err(gpu_msm_err(q.name()))?;
        Ok(ScalarsBack {
            scalars,
            _charge: charge,
        })
    }

    /// B on G2: one MSM over `b_g2_query[..|b_in| + |b_aux|]` with the scalars
    /// `inputs[b_in] ++ aux[b_aux]` (groth16's two sums added) on the device, in place or
    /// streamed, over the scalars the witness staging sends on `staged` (the ones B on G1
    /// sums); on the CPU when the device cannot take it (device-tier bases copied back
    /// through the G2 engine's stream: [`GpuBackend::cpu_fallback_sum`]).
    fn msm_b_g2(
        &self,
        view: &KeyView<'_>,
        x: &MsmInputs<'_>,
        staged: &std::sync::mpsc::Receiver<Option<StagedB>>,
    ) -> Result<(G2Projective, BasesKind), ProverError> {
        let parts: [Part<'_>; 2] = [(x.inputs, Some(x.b_input)), (x.aux, Some(x.b_aux))];
        let n = x.b_input.count_ones() + x.b_aux.count_ones();
        if n == 0 {
            return Ok((G2Projective::identity(), BasesKind::Resident));
        }
        let query = "b_g2_query";
        let bases = view.b_g2();
        if let Placed::Gpu(on_gpu) = self.place::<G2Curve>(query, &bases, n)? {
            let kind = on_gpu.kind();
            match staged.recv() {
                Ok(Some((scalars, ready))) => {
                    let engine = self.g2_engine()?;
                    engine
                        .gpu()
                        .stream()
                        .wait(&ready)
                        .map_err(|c| driver_err("cuStreamWaitEvent", c))?;
                    match on_gpu.msm(&engine, &scalars, STREAM_CHUNK_G2) {
                        Ok(sum) => return Ok((sum, kind)),
                        Err(e) if out_of_vram(&e) => {}
                        Err(e) => return Err(gpu_msm_err(query)(e)),
                    }
                }
                // No room on the device for the scalars: the CPU sums it.
                Ok(None) => {}
                // The staging failed before it got here; its error is the one reported.
                Err(_) => {
                    return Err(ProverError::BackendUnavailable {
                        backend: "gpu",
                        reason: "the witness staging stopped before b's scalars were ready",
                    })
                }
            }
        }
        metrics::counter!("pinion_groth16_prover_gpu_query_on_cpu_total").increment(1);
        // Device bases come back through the G2 engine's stream, so that the copy does
        // not wait for the G1 MSMs running meanwhile on the device's.
        let through = match bases {
            crate::key::QueryBases::Device { .. } => self.g2_engine()?.gpu().clone(),
            _ => self.gpu.clone(),
        };
        let host_bytes = GPU_TERM_BYTES * n as u64 + self.cpu.scratch_bytes_g2(n);
        let sum = self.cpu_fallback_sum(&through, query, &bases, n, host_bytes, &parts)?;
        Ok((sum, BasesKind::Cpu))
    }

    /// `bytes` of host memory for a CPU fallback sum (its scalars, scratch, the host copy
    /// of device bases it reads), charged as transient without waiting; a refusal is
    /// reported as the device being unusable for this proof.
    fn cpu_fallback_charge(&self, bytes: u64) -> Result<Reservation, ProverError> {
        self.budget
            .request(bytes, Category::Transient)
            .label("groth16-prover gpu: cpu fallback (scalars read back, scratch, bases copy)")
            .reserve(Some(Duration::ZERO))
            .map_err(|_| ProverError::BackendUnavailable {
                backend: "gpu",
                reason: "no memory budget left for the cpu fallback of a query the device refused",
            })
    }
}

/// One device MSM's outcome.
struct DeviceSum {
    q: G1Query,
    /// `None`: refused for lack of VRAM (the CPU takes it).
    sum: Option<G1Projective>,
    /// Where its bases were.
    kind: BasesKind,
    /// How long it took.
    time: Duration,
    /// A refused MSM's scalars read back, when the device held their only copy.
    back: Option<ScalarsBack>,
    /// The query whose sort of the scalars this sum was read over (a's aux part, l's).
    sorted_with: Option<G1Query>,
}

type DeviceSums = Vec<DeviceSum>;

/// Scalars read back from the device for a CPU fallback (`GpuBackend::scalars_back`),
/// charged while they live.
struct ScalarsBack {
    scalars: Vec<Scalar>,
    _charge: Reservation,
}

/// Largest H (in terms) for which l, a and b on G1 run beside H's MSM by default
/// ([`GpuBackend::with_side_msms`]). H200, session 24, same calls, beside / after H: SHA-256
/// 2^20 H + MSMs 18–19 / 22–25 ms, synthetic 2^20 36–38 / 40–43 ms, synthetic 2^24 0.386–0.390
/// / 0.403–0.407 s. Above it (Filecoin's 2^27 partitions) the two streams only time-share the
/// device, and a second MSM's sorted entries at once cost ~11 GiB (session 21).
pub const SIDE_MSMS_UP_TO: usize = 1 << 24;

/// One G1 MSM for a device thread: its bases, its scalars and the event after their
/// copy (none when they were produced on the device's own stream).
struct DeviceJob<'a> {
    q: G1Query,
    bases: GpuBases<'a, G1Curve>,
    /// A second query summed over the same scalars, over one sort of them (a's aux part
    /// beside l, [`GpuBackend::one_sort_l_a`]).
    also: Option<(G1Query, GpuBases<'a, G1Curve>)>,
    scalars: Arc<DeviceScalars>,
    copied: Option<CudaEvent>,
    /// Whether `scalars` are the only copy (h adopted in place): read back if refused.
    only_copy: bool,
}

impl ProverBackend for GpuBackend {
    fn name(&self) -> &'static str {
        "gpu"
    }

    fn kind(&self) -> BackendKind {
        BackendKind::Gpu
    }

    fn h_scratch_bytes(&self, _domain_size: usize) -> u64 {
        // a, b and c go into pinned staging (charged to the pool, `Category::PinnedPool`)
        // one at a time, each `Vec` dropped once converted; h stays on the device.
        0
    }

    fn msm_scratch_bytes(&self, _n_g1_max: usize, _n_g2: usize) -> u64 {
        // The scalars reach the device through the pool (see `staging_bytes`): the
        // witness once, which the device converts and compacts for l, a and b on both
        // curves, and the density masks through a pinned buffer of their own. No host
        // scratch besides: a query that falls back to the CPU charges its scratch when it
        // does (rare: the VRAM budget refused it).
        0
    }

    fn staging_bytes(&self, m: usize, n_max_terms: usize) -> (u64, u64) {
        // a, b and c: three buffers of the domain; the MSMs: one buffer for the witness
        // and one for the density masks (h stays on the device; h staged from the host, a
        // rare fallback, takes another buffer from the pool, which asks the budget itself).
        let abc = if staging::stages(m) {
            3 * staging_buffer_bytes(m)
        } else {
            0
        };
        (
            abc,
            staging_buffer_bytes(n_max_terms) + mask_staging_bytes(n_max_terms),
        )
    }

    fn prefetch_abc(&self, abc: &mut StagedAbc) -> Result<bool, ProverError> {
        match abc.downcast_mut::<PinnedAbc>() {
            Some(p) => self.prefetch_pinned(p),
            None => Ok(false),
        }
    }

    fn evaluates_abc(&self, pce: &pce_cache::Pce, m: usize) -> Result<bool, ProverError> {
        Ok(self.evaluates_on_device(m) && self.device_pce(pce)?.is_some())
    }

    fn witness_abc_bytes(&self, n_terms: usize) -> u64 {
        staging_buffer_bytes(n_terms)
    }

    fn witness_abc(
        &self,
        pce: &pce_cache::Pce,
        m: usize,
        witness: (&[Scalar], &[Scalar]),
        from: &mut Reservation,
    ) -> Result<Option<WitnessAbc>, ProverError> {
        Ok(self
            .witness_only(pce, m, witness, from)?
            .map(WitnessAbc::new))
    }

    fn prefetch_witness(&self, w: &mut WitnessAbc) -> Result<bool, ProverError> {
        match w.downcast_mut::<pce::WitnessOnly>() {
            Some(w) => self.prefetch_witness_only(w),
            None => Ok(false),
        }
    }

    fn h_poly_witness(&self, w: WitnessAbc) -> Result<HOutput, ProverError> {
        match w.downcast::<pce::WitnessOnly>() {
            Ok(w) => self.h_from_witness(w),
            Err(_) => Err(ProverError::BackendUnavailable {
                backend: "gpu",
                reason: "a witness staged by another backend",
            }),
        }
    }

    fn prewarm_staging(&self, m: usize, proofs: usize) -> Result<u64, ProverError> {
        // A proof holds a, b and c's three buffers from its synthesis to its MSMs (the
        // witness and the masks are staged in them); with a, b and c evaluated on the
        // device, one buffer for its witness (at most m values in the circuits this
        // serves: n_inputs + n_aux ≤ n_rows; a larger witness is pinned on demand).
        if !staging::stages(m) {
            return Ok(0);
        }
        let per_proof = if self.evaluates_on_device(m) { 1 } else { 3 };
        let n = self
            .pool
            .prewarm(SCALAR_LIMBS * m, per_proof * proofs)
            .map_err(staging_err("a, b, c (prewarm)"))?;
        Ok(n as u64 * staging_buffer_bytes(m))
    }

    fn msm_staging_after_abc(&self, m: usize, n_terms: usize) -> u64 {
        // The H step keeps a, b and c's three buffers (m scalars each): the density masks
        // (a few bits a term) are staged in one of them, the witness (its `n_terms` inputs
        // and aux values) in another when it fits.
        match (staging::stages(m), n_terms <= m) {
            (true, true) => 0,
            (true, false) => staging_buffer_bytes(n_terms),
            (false, _) => staging_buffer_bytes(n_terms) + mask_staging_bytes(n_terms),
        }
    }

    fn abc_buffers_within(
        &self,
        m: usize,
        from: &mut Reservation,
    ) -> Result<Option<StagedAbc>, ProverError> {
        Ok(self
            .pinned_abc(m, Some(from))?
            .map(|b| StagedAbc::new(m, b)))
    }

    fn msms_within(
        &self,
        bases: &KeyView<'_>,
        h: HPoly,
        x: &MsmInputs<'_>,
        from: &mut Reservation,
    ) -> Result<MsmOutputs, ProverError> {
        self.msms_from(bases, h, x, from)
    }

    fn view_key<'k>(&self, key: &'k ProvingKey) -> Result<KeyView<'k>, ProverError> {
        key.view_for_gpu(
            &self.gpu,
            self.placement,
            self.device_headroom_bytes(&key.lens()),
        )
    }

    fn device_headroom_bytes(&self, lens: &QueryLens) -> u64 {
        headroom_with(lens, side_msms_on(self.side_msms, lens.h))
    }

    fn h_host_bytes(&self, _domain_size: usize) -> u64 {
        0
    }

    fn reset_staging_peak(&self) {
        self.pool.reset_peak();
    }

    fn staging_peak_bytes(&self) -> u64 {
        self.pool.stats().peak_charged_bytes
    }

    fn h_poly(
        &self,
        abc: AbcEvaluations,
        inputs_released: &mut dyn FnMut(),
    ) -> Result<HOutput, ProverError> {
        self.h_from_host(abc, inputs_released)
    }

    fn stages_abc(&self, m: usize) -> bool {
        staging::stages(m)
    }

    fn h_coset_evaluations(
        &self,
        abc: AbcEvaluations,
        shift: Scalar,
        inputs_released: &mut dyn FnMut(),
    ) -> Result<HOutput, ProverError> {
        // A zkey's proofs: pageable copies (the prover evaluates them into host vectors).
        self.h_coset_from_host(abc, shift, inputs_released)
    }

    fn abc_buffers(&self, m: usize) -> Result<Option<StagedAbc>, ProverError> {
        Ok(self.pinned_abc(m, None)?.map(|b| StagedAbc::new(m, b)))
    }

    fn h_poly_staged(&self, abc: StagedAbc) -> Result<HOutput, ProverError> {
        let t = Instant::now();
        let mut out = match abc.downcast::<PinnedAbc>() {
            Ok(pinned) => self.h_from_pinned(pinned)?,
            // Another backend's buffers: read them back as host vectors.
            Err(other) => self.h_from_host(other.into_host()?, &mut || {})?,
        };
        out.transfers = t.elapsed();
        Ok(out)
    }

    fn msms(
        &self,
        bases: &KeyView<'_>,
        h: HPoly,
        x: &MsmInputs<'_>,
    ) -> Result<MsmOutputs, ProverError> {
        // Nothing admitted for the staging: the pool charges its buffers itself.
        let mut none = self
            .budget
            .try_reserve(0, Category::WorkingSet, "no admitted staging")
            .map_err(|source| ProverError::Budget {
                what: "msm staging",
                requested_bytes: 0,
                source,
            })?;
        self.msms_from(bases, h, x, &mut none)
    }
}

impl GpuBackend {
    /// The five MSMs, the scalars' staging paid from `from` (what the proof admitted for
    /// it; the pool asks the budget itself once `from` is spent).
    fn msms_from(
        &self,
        view: &KeyView<'_>,
        h: HPoly,
        x: &MsmInputs<'_>,
        from: &mut Reservation,
    ) -> Result<MsmOutputs, ProverError> {
        let start = Instant::now();
        let mut timings = MsmTimings::default();

        let n_in = x.inputs.len();
        let (k_in, k_aux) = (x.b_input.count_ones(), x.b_aux.count_ones());
        let n_h = h.len();
        let others: [(G1Query, usize, Vec<Part<'_>>); 3] = [
            (G1Query::L, x.aux.len(), vec![(x.aux, None)]),
            (
                G1Query::A,
                n_in + x.a_aux.count_ones(),
                vec![(x.inputs, None), (x.aux, Some(x.a_aux))],
            ),
            (
                G1Query::BG1,
                k_in + k_aux,
                vec![(x.inputs, Some(x.b_input)), (x.aux, Some(x.b_aux))],
            ),
        ];
        let all_bases = [
            view.g1(G1Query::H),
            view.g1(G1Query::L),
            view.g1(G1Query::A),
            view.g1(G1Query::BG1),
        ];
        // Where each query's sum runs, up front (every shape checked before any work).
        let mut placed: [Option<Placed<'_, G1Curve>>; 4] = [None, None, None, None];
        for (q, n) in [(G1Query::H, n_h)]
            .into_iter()
            .chain(others.iter().map(|(q, n, _)| (*q, *n)))
        {
            if n > 0 {
                placed[q as usize] =
                    Some(self.place::<G1Curve>(q.name(), &all_bases[q as usize], n)?);
            }
        }
        // a's aux part over l's scalars (one sort for both), where l and a are read in
        // place: its bases after the inputs as they are when A keeps every aux variable
        // (else only through a table, below).
        let aux_bases = self.one_sort_l_a(&placed, x);
        let dense = x.a_aux.count_ones() == x.aux.len();
        let mut a_aux = match &aux_bases {
            Some(v) if dense => v.skip(0).map(GpuBases::Resident),
            _ => None,
        };
        // Bases on this device read through tables of precomputed windows instead, when
        // this backend makes them (`with_precomputed_windows`) and the query has terms
        // enough for them (`uses_precomputed`).
        if let Some(bits) = self.precomputed_bits {
            for q in [G1Query::H, G1Query::L, G1Query::A, G1Query::BG1] {
                if !uses_precomputed(bits, used_terms(q, n_h, x)) {
                    continue;
                }
                // With one sort for l and a, a's aux part gets a table (below); its
                // inputs stay on the bases.
                if q == G1Query::A && aux_bases.is_some() {
                    continue;
                }
                let table = match &placed[q as usize] {
                    Some(Placed::Gpu(GpuBases::Resident(v))) => {
                        self.precomputed_table(view.key_id(), q, TableSource::Whole(v))?
                    }
                    _ => None,
                };
                if let Some(t) = table {
                    placed[q as usize] = Some(Placed::Gpu(GpuBases::Precomputed(t)));
                }
            }
            // a's aux part on a table of l's length, its rows one per aux variable
            // (infinity where A has none), when l sums over a table: the sorted entries
            // name rows of both. Otherwise (l on its bases, or no room for a's table) the
            // aux part in place where A is dense, else the two sorts, a on the table of
            // its whole query if it gets one.
            if let Some(compact) = &aux_bases {
                let table = match &placed[G1Query::L as usize] {
                    Some(Placed::Gpu(GpuBases::Precomputed(t))) => {
                        let source = TableSource::Expanded {
                            compact,
                            mask: x.a_aux,
                            len: t.len(),
                        };
                        self.precomputed_table(view.key_id(), G1Query::A, source)?
                    }
                    _ => None,
                };
                let l_on_table = matches!(
                    placed[G1Query::L as usize],
                    Some(Placed::Gpu(GpuBases::Precomputed(_)))
                );
                match table {
                    Some(t) => a_aux = Some(GpuBases::Precomputed(t)),
                    None if l_on_table => a_aux = None,
                    None => {}
                }
                let q = G1Query::A;
                if a_aux.is_none() && uses_precomputed(bits, used_terms(q, n_h, x)) {
                    if let Some(Placed::Gpu(GpuBases::Resident(v))) = &placed[q as usize] {
                        if let Some(t) =
                            self.precomputed_table(view.key_id(), q, TableSource::Whole(v))?
                        {
                            placed[q as usize] = Some(Placed::Gpu(GpuBases::Precomputed(t)));
                        }
                    }
                }
            }
        }
        // The pinned a, b, c buffers the H step kept: the witness's staging, before any
        // buffer from the pool (the working set counts on it: `msm_staging_after_abc`).
        let (h, kept) = take_held_abc(h);
        let (mut held, mut witness_on_device, check) = (kept.held, kept.witness, kept.check);
        // H's scalars: in place when the H step left h on this device and the device
        // sums it; otherwise as host scalars, staged on their own.
        let mut h_events = None;
        let mut h_adopted = None;
        let mut h_host = None;
        match (h, &placed[G1Query::H as usize]) {
            (_, None) => {}
            (HPoly::Backend(d), Some(Placed::Gpu(_))) => match d.downcast::<DeviceH>() {
                Ok(d) => {
                    let t = Instant::now();
                    let DeviceH {
                        coeffs,
                        n_coeffs,
                        started,
                        finished,
                        ..
                    } = d;
                    // `finished` follows every write of h; its buffer's stream (the
                    // prefetch stream, when it was allocated ahead) may hold the next
                    // proof's copies and evaluation by now, which H's MSM must not wait for.
                    h_adopted = Some(
                        self.msm
                            .adopt_scalars_montgomery_after(coeffs, n_coeffs, &finished)
                            .map_err(gpu_msm_err(G1Query::H.name()))?,
                    );
                    h_events = Some((started, finished, kept.abc_events));
                    timings.scalar_transfers += t.elapsed();
                }
                Err(other) => h_host = Some(other.into_host()?),
            },
            (h, Some(_)) => h_host = Some(h.into_host()?),
        }
        let on_gpu = |q: G1Query, placed: &[Option<Placed<'_, G1Curve>>; 4]| {
            matches!(placed[q as usize], Some(Placed::Gpu(_)))
        };
        let copy_stream = self.copy_stream()?;
        // Where A is not dense and l is read in place (no tables), a's aux part joins l's
        // sort over its bases expanded one per aux variable for this proof, on the copy
        // stream ahead of the witness (l's MSM waits for that stream), where the VRAM
        // budget has room for them twice over; otherwise the two sorts.
        if a_aux.is_none()
            && matches!(
                placed[G1Query::L as usize],
                Some(Placed::Gpu(GpuBases::Resident(_)))
            )
        {
            if let Some(compact) = &aux_bases {
                let n_aux = x.aux.len();
                let bytes = (n_aux * <G1Curve as gpu_msm::GpuCurve>::AFFINE_WORDS * 4) as u64;
                if 2 * bytes <= self.gpu.vram_budget().available_bytes() {
                    let copy = GpuMsm::new(self.gpu.with_stream(copy_stream.clone()));
                    let expanded = copy
                        .upload_mask(x.a_aux, n_aux)
                        .and_then(|mask| copy.expand_bases_g1_with(compact, &mask, n_aux));
                    match expanded {
                        Ok(e) => a_aux = Some(GpuBases::Expanded(e)),
                        Err(e) if out_of_vram(&e) => {}
                        Err(e) => return Err(gpu_msm_err(G1Query::A.name())(e)),
                    }
                }
            }
        }
        // l, a and b (on G1 and G2) read one copy of the witness on the device.
        let needs = WitnessNeeds {
            l: on_gpu(G1Query::L, &placed),
            a: on_gpu(G1Query::A, &placed),
            a_inputs_only: a_aux.is_some(),
            b: k_in + k_aux > 0,
        };
        // l, a and b beside H's MSM in a small proof (`with_side_msms`).
        let side_engine = self.side_engine(n_h)?;
        // H's host scalars (rare: h left on the host) get a device buffer now, on the
        // device's stream ahead of the MSMs; the copy stream waits for its zero fill.
        let mut h_staged = None;
        if let (Some(_), Some(Placed::Gpu(_))) = (&h_host, &placed[G1Query::H as usize]) {
            match self.msm.alloc_scalars(n_h) {
                Ok(d) => h_staged = Some(d),
                Err(e) if out_of_vram(&e) => placed[G1Query::H as usize] = Some(Placed::Cpu),
                Err(e) => return Err(gpu_msm_err(G1Query::H.name())(e)),
            }
            let allocated = self
                .gpu
                .stream()
                .record_event(None)
                .map_err(|c| driver_err("cuEventRecord", c))?;
            copy_stream
                .wait(&allocated)
                .map_err(|c| driver_err("cuStreamWaitEvent", c))?;
        }
        let mut out = [G1Projective::identity(); 4];
        let mut kinds = [BasesKind::Cpu; 4];
        let mut cpu_queries: Vec<G1Query> = Vec::new();
        let (device, g2) = std::thread::scope(|scope| {
            // B on G2 on its own stream while the device does the G1 sums; its scalars
            // come from the witness staging below.
            let (b_tx, b_rx) = std::sync::mpsc::sync_channel::<Option<StagedB>>(1);
            let g2 = scope.spawn(move || {
                let t = Instant::now();
                self.msm_b_g2(view, x, &b_rx).map(|p| (p, t.elapsed()))
            });
            // The device thread runs the MSMs in order while this thread stages the
            // scalars (at most one job ahead in the channel); in a small proof l, a and b
            // go to a second one, on the side engine's stream, beside H's MSM. An MSM the
            // VRAM budget refuses is handed back for the CPU.
            let (tx, rx) = std::sync::mpsc::sync_channel::<DeviceJob<'_>>(1);
            let device = scope.spawn(move || self.run_device_jobs(&self.msm, rx));
            let (side_tx, side) = match &side_engine {
                Some(engine) => {
                    let (tx, rx) = std::sync::mpsc::sync_channel::<DeviceJob<'_>>(3);
                    let engine = engine.clone();
                    let h = scope.spawn(move || self.run_device_jobs(&engine, rx));
                    (Some(tx), Some(h))
                }
                None => (None, None),
            };
            let staged = (|| -> Result<(), ProverError> {
                // H first, so that the device starts on it at once: in place, or its host
                // scalars staged (rare: h left on the host).
                let mut h_job = None;
                let only_copy = h_adopted.is_some();
                if let Some(d) = h_adopted.take() {
                    h_job = Some((d, None));
                } else if let (Some(v), Some(mut dst)) = (&h_host, h_staged.take()) {
                    let parts: [Part<'_>; 1] = [(&v[..], None)];
                    let (copied, host_time, waited) = self.stage(
                        G1Query::H.name(),
                        &parts,
                        &mut dst,
                        &copy_stream,
                        (&mut held, from),
                    )?;
                    timings.scalar_transfers += host_time;
                    timings.staging_wait += waited;
                    h_job = Some((dst, Some(copied)));
                }
                if let Some((scalars, copied)) = h_job {
                    if let Some(Placed::Gpu(bases)) = placed[G1Query::H as usize].take() {
                        let job = DeviceJob {
                            q: G1Query::H,
                            bases,
                            also: None,
                            scalars: Arc::new(scalars),
                            copied,
                            only_copy,
                        };
                        // A closed channel: the device thread failed; its error wins.
                        if tx.send(job).is_err() {
                            return Ok(());
                        }
                    }
                }
                // The witness while the H MSM runs (nothing here waits for the device's
                // kernels: no fills, the masks' pageable copies queued before the rest).
                let witness = if needs.l || needs.a || needs.b {
                    self.stage_witness(
                        x,
                        needs,
                        &copy_stream,
                        (&mut held, from),
                        witness_on_device.take(),
                    )?
                } else {
                    None
                };
                // The a, b, c buffers not used go back to the pool for the next proof.
                held.clear();
                // B on G2 gets b's scalars first; without room on the device for the
                // witness the CPU sums l, a and b. The device's stream waits once, before
                // the first G1 MSM of them.
                let (scalars, mut first) = match witness {
                    Some(w) => {
                        timings.scalar_transfers += w.host_time;
                        timings.staging_wait += w.waited;
                        timings.witness_alloc += w.alloc_time;
                        timings.witness_masks += w.masks_time;
                        let _ = b_tx.send(w.b.clone().map(|b| (b, w.g2_ready)));
                        (
                            [w.l.map(Arc::new), w.a.map(Arc::new), w.b],
                            Some(w.g1_ready),
                        )
                    }
                    None => {
                        let _ = b_tx.send(None);
                        ([None, None, None], None)
                    }
                };
                // a's aux part goes with l's job (one sort), once l's scalars are there.
                let mut a_aux_sent = false;
                for (q, scalars) in [G1Query::L, G1Query::A, G1Query::BG1]
                    .into_iter()
                    .zip(scalars)
                {
                    match (placed[q as usize].take(), scalars) {
                        (Some(Placed::Gpu(bases)), Some(scalars)) => {
                            let also = match q {
                                G1Query::L => a_aux.take().map(|b| (G1Query::A, b)),
                                _ => None,
                            };
                            a_aux_sent |= also.is_some();
                            let job = DeviceJob {
                                q,
                                bases,
                                also,
                                scalars,
                                copied: first.take(),
                                only_copy: false,
                            };
                            if side_tx.as_ref().unwrap_or(&tx).send(job).is_err() {
                                return Ok(());
                            }
                        }
                        // No inputs: a is its aux part alone, summed with l.
                        (Some(_), None) if q == G1Query::A && a_aux_sent && n_in == 0 => {}
                        (Some(_), _) => cpu_queries.push(q),
                        (None, _) => {}
                    }
                }
                // H when it ends on the CPU (placed there, or its device buffer refused).
                if placed[G1Query::H as usize].take().is_some() {
                    cpu_queries.push(G1Query::H);
                }
                Ok(())
            })();
            drop(tx);
            drop(side_tx);
            drop(b_tx);
            let device = device.join();
            let side = side.map(|h| h.join());
            let g2 = g2.join();
            ((staged, device, side), g2)
        });
        let (staged, device, side) = device;
        // The device threads only panic on a bug; re-raise it where it belongs.
        let joined = |r: std::thread::Result<_>| match r {
            Ok(r) => r,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        // A device failure closes a channel and makes staging stop: report it first.
        let (mut sums, mut waited) = joined(device)?;
        if let Some(side) = side {
            let (more, w) = joined(side)?;
            sums.extend(more);
            waited += w;
        }
        timings.scalars_wait = waited;
        staged?;
        // The witness check of a, b and c evaluated on the device, done by now: an
        // unsatisfied row refuses the proof here.
        if let Some(check) = check {
            check.verify(&self.gpu)?;
        }
        // h read back from the device when its MSM was refused there. A query may come
        // in two parts (a's inputs, its aux part summed with l): their sums add, the
        // first part's bases name its kind, and if either part was refused the CPU sums
        // the whole query.
        let mut h_back = None;
        let mut parts = [0usize; 4];
        let mut sorted_with: [Option<G1Query>; 4] = [None; 4];
        for DeviceSum {
            q,
            sum,
            kind,
            time,
            back,
            sorted_with: with,
        } in sums
        {
            let i = q as usize;
            parts[i] += 1;
            match sum {
                Some(p) if !cpu_queries.contains(&q) => {
                    out[i] += p;
                    if parts[i] == 1 {
                        kinds[i] = kind;
                    }
                    sorted_with[i] = sorted_with[i].or(with);
                    *query_time(&mut timings, q) += time;
                }
                Some(_) => {}
                None => {
                    if q == G1Query::H {
                        h_back = back;
                    }
                    if !cpu_queries.contains(&q) {
                        cpu_queries.push(q);
                    }
                }
            }
        }
        // Queries the device could not take: the CPU reads host bases where they are and
        // device-tier bases from a copy, its memory charged now (a refusal is a
        // device-side failure: an engine retries the proof on a CPU backend, whose
        // working set includes it).
        for q in cpu_queries {
            let t = Instant::now();
            metrics::counter!("pinion_groth16_prover_gpu_query_on_cpu_total").increment(1);
            let n = used_terms(q, n_h, x);
            // The scalars' host bytes (h read back is charged already), then the scratch.
            let terms = GPU_TERM_BYTES * n as u64;
            let (parts, scalar_bytes): (Vec<Part<'_>>, u64) = match (q, &h_host, &h_back) {
                (G1Query::H, Some(h), _) => (vec![(&h[..], None)], terms),
                (G1Query::H, None, Some(back)) => (vec![(&back.scalars[..], None)], 0),
                (G1Query::H, None, None) => return Err(h_nowhere()),
                _ => (jobs_parts(&others, q), terms),
            };
            let bases = &all_bases[q as usize];
            let host_bytes = scalar_bytes + self.cpu.scratch_bytes_g1(n);
            out[q as usize] =
                self.cpu_fallback_sum(&self.gpu, q.name(), bases, n, host_bytes, &parts)?;
            kinds[q as usize] = BasesKind::Cpu;
            *query_time(&mut timings, q) = t.elapsed();
        }
        if let Some((started, finished, abc_events)) = h_events {
            let secs = |from: &CudaEvent, to: &CudaEvent| {
                from.elapsed_ms(to)
                    .map(|ms| Duration::from_secs_f64(f64::from(ms.max(0.0)) / 1e3))
                    .map_err(|c| driver_err("cuEventElapsedTime", c))
            };
            timings.h_device = secs(&started, &finished)?;
            if let Some((from, to)) = &abc_events {
                timings.abc_device = secs(from, to)?;
            }
        }
        let [h, l, a, b_g1] = out;
        let ((b_g2, b_g2_kind), t) = match g2 {
            Ok(r) => r?,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        timings.b_g2 = t;
        timings.wall = start.elapsed();
        let used = [n_h, x.aux.len(), n_in + x.a_aux.count_ones(), k_in + k_aux];
        let mut report: Vec<QueryPlacement> = [G1Query::H, G1Query::L, G1Query::A, G1Query::BG1]
            .into_iter()
            .filter(|q| used[*q as usize] > 0)
            .map(|q| QueryPlacement {
                query: q.name(),
                kind: kinds[q as usize],
                n: used[q as usize],
                // (A query the CPU summed read no device sort.)
                sorted_with: sorted_with[q as usize]
                    .filter(|_| kinds[q as usize] != BasesKind::Cpu)
                    .map(G1Query::name),
            })
            .collect();
        if k_in + k_aux > 0 {
            report.push(QueryPlacement {
                query: "b_g2_query",
                kind: b_g2_kind,
                n: k_in + k_aux,
                sorted_with: None,
            });
        }
        Ok(MsmOutputs {
            h,
            l,
            a,
            b_g1,
            b_g2,
            timings,
            placement: report,
        })
    }
}

/// Whether a G1 query of `n` terms sums over tables of `bits`-bit precomputed windows: when
/// it has at least one term for each of the 2^(bits-1) shared buckets. A smaller one pays
/// the reduction of every bucket, empty or not, for few additions (synthetic 2^24, B on G1
/// with 16 terms on a 20-bit table: 16 ms against 1-2 ms over its bases, H100, session 36),
/// and takes the window its size picks over its bases instead.
fn uses_precomputed(bits: u32, n: usize) -> bool {
    n >= 1usize << (bits - 1)
}

/// Scalars of G1 query `q` in a proof (for its CPU fallback's scratch).
fn used_terms(q: G1Query, n_h: usize, x: &MsmInputs<'_>) -> usize {
    match q {
        G1Query::H => n_h,
        G1Query::L => x.aux.len(),
        G1Query::A => x.inputs.len() + x.a_aux.count_ones(),
        G1Query::BG1 => x.b_input.count_ones() + x.b_aux.count_ones(),
    }
}

/// The parts of a staged query (the CPU fallback sums the same scalars).
fn jobs_parts<'a>(jobs: &[(G1Query, usize, Vec<Part<'a>>)], q: G1Query) -> Vec<Part<'a>> {
    jobs.iter()
        .find(|(j, _, _)| *j == q)
        .map(|(_, _, p)| p.clone())
        .unwrap_or_default()
}

/// The H query on the CPU with h neither on the host nor read back from the device (not
/// reached: h adopted on the device is read back when its MSM is refused).
fn h_nowhere() -> ProverError {
    ProverError::BackendUnavailable {
        backend: "gpu",
        reason: "h for the cpu fallback of its msm is neither on the host nor read back",
    }
}

/// The timing slot of a G1 query.
fn query_time(t: &mut MsmTimings, q: G1Query) -> &mut Duration {
    match q {
        G1Query::H => &mut t.h,
        G1Query::L => &mut t.l,
        G1Query::A => &mut t.a,
        G1Query::BG1 => &mut t.b_g1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lens(log_h: u32) -> QueryLens {
        let n = (1usize << log_h) - 1;
        QueryLens {
            h: n,
            l: n / 2,
            a: n / 2 + 3,
            b_g1: n / 4,
            b_g2: n / 4,
        }
    }

    #[test]
    fn small_queries_skip_the_tables() {
        assert!(uses_precomputed(20, 1 << 24));
        assert!(uses_precomputed(20, 1 << 19));
        assert!(!uses_precomputed(20, (1 << 19) - 1));
        assert!(!uses_precomputed(20, 16));
        assert!(!uses_precomputed(22, 1 << 20));
        assert!(uses_precomputed(2, 2));
        assert!(!uses_precomputed(2, 1));
        assert!(!uses_precomputed(2, 0));
    }

    #[test]
    fn headroom_follows_the_side_msm_setting() {
        for log_h in [10u32, 20, 24, 25, 27] {
            let l = lens(log_h);
            let side = headroom_with(&l, true);
            let alone = headroom_with(&l, false);
            // A second MSM's scratch at once: the largest of l, a and b_g1 more terms.
            assert_eq!(side - alone, (l.a as u64) * HEADROOM_PER_TERM, "2^{log_h}");
            // The default rule: beside H's MSM up to SIDE_MSMS_UP_TO terms of H.
            let default = GpuBackend::headroom_bytes(&l);
            let want = if l.h <= SIDE_MSMS_UP_TO { side } else { alone };
            assert_eq!(default, want, "2^{log_h}");
            // A forced setting is what the headroom follows, on either side of the rule.
            assert_eq!(headroom_with(&l, side_msms_on(Some(true), l.h)), side);
            assert_eq!(headroom_with(&l, side_msms_on(Some(false), l.h)), alone);
            assert_eq!(side_msms_on(None, l.h), l.h <= SIDE_MSMS_UP_TO);
        }
    }
}
