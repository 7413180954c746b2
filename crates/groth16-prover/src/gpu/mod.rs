//! The CUDA backend: H on the GPU (`gpu_ntt::GpuNtt`), the four G1 MSMs and the B MSM on
//! G2 on the GPU (`gpu_msm::GpuMsm`) over bases kept resident per proving key, or
//! streamed from pinned host memory when the device cannot hold them. The G2 MSM is
//! driven from its own thread, on a stream of its own, while the G1 MSMs run (the two
//! streams share the device).
//!
//! # Where the bases live
//! The first proof over a [`ProvingKey`] places the prefixes of `h_query`, `l_query`,
//! `a_query`, `b_g1_query` and `b_g2_query` that the circuit uses; later proofs over the
//! same key reuse them. One key is resident at a time: a proof over another key (told
//! apart by [`ProvingKey::id`]) drops the old placements first. Each query goes, in order
//! of preference:
//! 1. **on the device** (one buffer per query, charged to the device's VRAM budget by
//!    `gpu-device`); the host copy made for the upload (bls-repr layout) is charged to the
//!    host budget (`Category::Transient`) while it lives;
//! 2. when the resident limit ([`GpuBackend::with_resident_limit`]), the VRAM budget or
//!    the driver refuses that: **streamed**: a copy in pinned host memory (charged as
//!    `Category::Srs` while the key is resident), which every MSM copies to the device in
//!    chunks of 2^22 G1 / 2^21 G2 bases on a second stream while the previous chunk is
//!    summed (`GpuMsm::msm_streamed`: two chunks of VRAM whatever the query's size);
//! 3. when the stream limit ([`GpuBackend::with_stream_limit`]), the host budget or the
//!    driver refuses the pinned copy too: **on the CPU** (`gpu_msm::CpuMsm`).
//!
//! Non-goal for now: the key's points are `bls12_381` values, so placing a query converts
//! them again; an `srs-store` entry already in the device or pinned tier is not reused.
//!
//! # One MSM per query
//! A device MSM (resident or streamed) needs as many scalars as bases, so the A and B sums are formed as one MSM
//! each: A over `a_query[..n_in + |a_aux|]` with the scalars `inputs ++ aux[a_aux]`, B over
//! `b_g1_query[..|b_in| + |b_aux|]` with `inputs[b_in] ++ aux[b_aux]`. That is exactly
//! groth16's two sums added (exact group arithmetic), so proofs do not change.
//!
//! # Host memory and copies
//! H: a, b and c are converted to bls-repr's Montgomery layout straight into pinned
//! staging buffers from the backend's [`PinnedStagingPool`] (charged to the backend's
//! budget, `Category::PinnedPool`), one vector at a time, each `Vec` dropped once
//! converted; then the caller's a/b/c charge is released and gpu-ntt copies them
//! asynchronously (`AbcSource::Pinned`). h **stays on the device**: the H MSM adopts the
//! result buffer in place (`GpuMsm::adopt_scalars_montgomery`, first `m − 1` of its `m`
//! elements, the length of `h_query`); nothing comes back. MSMs: each query's scalars are
//! converted to canonical limbs (and filtered by the densities) straight into a pooled
//! pinned buffer, then copied asynchronously on the backend's copy stream into a device
//! buffer allocated for it up front (all staged queries' buffers at once, queued before
//! the MSMs, so a copy waits only for them); a device thread runs the MSMs in order, each
//! waiting for its copy's event, while this thread stages the next query's scalars, so
//! host conversion and copies overlap device compute. The pool keeps its buffers between proofs (an idle
//! buffer stays charged until the budget's eviction frees it) and waits for a buffer's
//! copies before reusing it. Host bytes outside the pool: b_g2's canonical scalars while
//! they upload (charged, `Category::Transient`), the CPU G2 MSM's scratch when b_g2's bases
//! are on the CPU, and for a query whose bases are on the CPU its scalars (h copied back
//! when it is H). A streamed query's scalars are staged like a resident one's.
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bls12_381::{G1Affine, G1Projective, G2Projective, Scalar};
use bls_repr::FrRepr;
use cudarc::driver::{CudaEvent, CudaStream};
use gpu_device::{CudaPinned, DeviceBuffer, Gpu, GpuError, PinnedStagingPool, PoolError, Pooled};
use gpu_msm::{
    CpuMsm, DensityMask, DeviceBases, DeviceScalars, G1Curve, G2Curve, GpuCurve, GpuMsm,
    GpuMsmError, MsmBackend, MsmError, PinnedBases,
};
use gpu_ntt::{AbcEvaluations, AbcSource, GpuNtt, GpuNttError, NttError};
use memory_budget::{Budget, Category, Reservation};
use rayon::prelude::*;

use crate::backend::{
    cpu_msm_scratch_bytes, msm_err, slice, BackendKind, HOutput, HPoly, MsmInputs, MsmOutputs,
    MsmTimings, ProverBackend,
};
use crate::{ProverError, ProvingKey};

/// Host bytes per term of a query computed on the CPU although the H step left h on the
/// device: h copied back in the device layout, then as scalars.
const GPU_TERM_BYTES: u64 = 64;

/// Scalars of one part of an MSM, filtered by the mask when there is one.
type Part<'a> = (&'a [Scalar], Option<&'a DensityMask>);

/// The four G1 queries the GPU computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Query {
    H = 0,
    L = 1,
    A = 2,
    BG1 = 3,
}

impl Query {
    fn name(self) -> &'static str {
        match self {
            Query::H => "h_query",
            Query::L => "l_query",
            Query::A => "a_query",
            Query::BG1 => "b_g1_query",
        }
    }

    fn bases(self, key: &ProvingKey) -> &[G1Affine] {
        match self {
            Query::H => key.h_query(),
            Query::L => key.l_query(),
            Query::A => key.a_query(),
            Query::BG1 => key.b_g1_query(),
        }
    }
}

/// Bases per chunk when a G1 query is streamed from pinned memory (two chunks of VRAM:
/// 768 MiB). Large enough that each chunk's own bucket reduction stays a small part.
const STREAM_CHUNK_G1: usize = 1 << 22;
/// The same for G2 (two chunks: 768 MiB).
const STREAM_CHUNK_G2: usize = 1 << 21;

/// Where one query's bases live for the resident key, and so where its MSM runs.
#[derive(Clone, Debug)]
enum Placement<C: GpuCurve> {
    /// The first `len()` bases are on the device.
    Device(Arc<DeviceBases<C>>),
    /// The device refused them (VRAM budget, driver, or the resident limit): a copy in
    /// pinned host memory, streamed to the device in chunks by every MSM.
    Streamed(Arc<PinnedBases<C>>),
    /// Neither the device nor pinned memory took them: computed on the CPU.
    Cpu { n: usize },
}

impl<C: GpuCurve> Placement<C> {
    fn n(&self) -> usize {
        match self {
            Placement::Device(b) => b.len(),
            Placement::Streamed(b) => b.len(),
            Placement::Cpu { n } => *n,
        }
    }

    /// Bytes of bases on the device and in pinned host memory.
    fn bytes(&self) -> (u64, u64) {
        let per_base = C::AFFINE_WORDS as u64 * 4;
        match self {
            Placement::Device(b) => (per_base * b.len() as u64, 0),
            Placement::Streamed(b) => (0, per_base * b.len() as u64),
            Placement::Cpu { .. } => (0, 0),
        }
    }

    /// The bases when the device computes the MSM (resident or streamed).
    fn on_gpu(&self) -> Option<GpuBases<C>> {
        match self {
            Placement::Device(b) => Some(GpuBases::Resident(b.clone())),
            Placement::Streamed(b) => Some(GpuBases::Streamed(b.clone())),
            Placement::Cpu { .. } => None,
        }
    }

    fn summary(&self, query: &'static str) -> QueryBases {
        let mut s = QueryBases {
            query,
            on_device: 0,
            streamed: 0,
            on_cpu: 0,
        };
        match self {
            Placement::Device(b) => s.on_device = b.len(),
            Placement::Streamed(b) => s.streamed = b.len(),
            Placement::Cpu { n } => s.on_cpu = *n,
        }
        s
    }
}

/// Bases of an MSM the device computes.
enum GpuBases<C: GpuCurve> {
    Resident(Arc<DeviceBases<C>>),
    Streamed(Arc<PinnedBases<C>>),
}

impl<C: GpuCurve> GpuBases<C> {
    /// `Σ scalars[i]·bases[i]` on the device's stream.
    fn msm(
        &self,
        msm: &GpuMsm,
        scalars: &DeviceScalars,
        chunk_len: usize,
    ) -> Result<C::Projective, GpuMsmError> {
        match self {
            GpuBases::Resident(b) => msm.msm_resident(b, scalars),
            GpuBases::Streamed(b) => msm.msm_streamed(b, scalars, chunk_len),
        }
    }
}

/// Where the GPU backend keeps one query's bases for the resident key (see
/// [`GpuBackend::resident_bases`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueryBases {
    /// `h_query`, `l_query`, `a_query`, `b_g1_query` or `b_g2_query`.
    pub query: &'static str,
    /// Bases resident on the device.
    pub on_device: usize,
    /// Bases in pinned host memory, streamed to the device by each MSM.
    pub streamed: usize,
    /// Bases whose sums the CPU computes.
    pub on_cpu: usize,
}

#[derive(Default)]
struct Resident {
    key_id: Option<u64>,
    queries: [Option<Placement<G1Curve>>; 4],
    b_g2: Option<Placement<G2Curve>>,
}

impl Resident {
    /// Bytes of bases (G1 queries and b_g2) on the device and in pinned host memory.
    fn bytes(&self) -> (u64, u64) {
        self.queries
            .iter()
            .flatten()
            .map(Placement::bytes)
            .chain(self.b_g2.iter().map(Placement::bytes))
            .fold((0, 0), |(d, h), (pd, ph)| (d + pd, h + ph))
    }

    /// A fresh set for `key_id` when the resident bases belong to another key.
    fn switch_to(&mut self, key_id: u64) {
        if self.key_id != Some(key_id) {
            // Another key: free the old bases before uploading new ones.
            *self = Resident {
                key_id: Some(key_id),
                ..Resident::default()
            };
        }
    }
}

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
    /// The G2 engine, on a stream of its own (created on first use) so the B MSM on G2
    /// runs beside the G1 MSMs instead of after them.
    msm_g2: Mutex<Option<Arc<GpuMsm>>>,
    budget: Budget,
    resident: Mutex<Resident>,
    /// Most bytes of bases kept resident (beyond them, queries are streamed).
    resident_limit_bytes: u64,
    /// Most bytes of bases kept in pinned host memory for streaming (beyond them, and
    /// when the host budget refuses, queries run on the CPU).
    stream_limit_bytes: u64,
}

impl std::fmt::Debug for GpuBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuBackend")
            .field("gpu", &self.gpu)
            .field("resident_bases", &self.resident_bases())
            .finish_non_exhaustive()
    }
}

fn lock(m: &Mutex<Resident>) -> MutexGuard<'_, Resident> {
    // Placements are replaced whole, so a poisoned slot is still consistent.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn ntt_err(e: GpuNttError) -> ProverError {
    ProverError::Ntt(NttError::from(e))
}

fn gpu_msm_err(query: &'static str) -> impl FnOnce(GpuMsmError) -> ProverError {
    move |e| ProverError::Msm {
        query,
        source: MsmError::from(e),
    }
}

/// Whether an upload failed for lack of device memory (then the CPU takes the query).
fn out_of_vram(e: &GpuMsmError) -> bool {
    matches!(
        e,
        GpuMsmError::Gpu(GpuError::Budget { .. } | GpuError::OutOfMemory { .. })
    )
}

/// u64 limbs of one scalar in a staging buffer (canonical for the MSMs, Montgomery for
/// the H step; either way the 8 little-endian u32 words the device reads).
const SCALAR_LIMBS: usize = 4;

/// `dst[i]` = `src[i]` in bls-repr's Montgomery layout (what gpu-ntt reads), in parallel.
fn reprs_into(dst: &mut [FrRepr], src: &[Scalar]) {
    dst.par_iter_mut()
        .zip(src.par_iter())
        .for_each(|(d, s)| *d = FrRepr::from_scalar(s));
}

/// Writes the concatenated parts (each filtered by its mask) as canonical limbs into the
/// start of `out`; returns the number of scalars written.
fn write_parts(out: &mut [u64], parts: &[Part<'_>]) -> usize {
    // A limb is two of the device's little-endian u32 words, low first: the same bytes.
    let words: &mut [u32] = bytemuck::cast_slice_mut(out);
    let mut n = 0;
    for (scalars, mask) in parts {
        n += gpu_msm::select_scalar_words_into(&mut words[2 * SCALAR_LIMBS * n..], scalars, *mask);
    }
    n
}

/// h on the device, as the GPU backend's H step leaves it: `m` elements of which the
/// first `m − 1` are h's coefficients (Montgomery form), possibly still being computed on
/// the device's stream. Read by [`GpuBackend`]'s MSMs in place (no copy);
/// [`DeviceH::into_host`] copies it back for other backends.
pub struct DeviceH {
    coeffs: DeviceBuffer<u64>,
    n_coeffs: usize,
    gpu: Gpu,
    /// Recorded on the device's stream before and after the transforms.
    started: CudaEvent,
    finished: CudaEvent,
}

impl std::fmt::Debug for DeviceH {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceH")
            .field("n_coeffs", &self.n_coeffs)
            .field("coeffs", &self.coeffs)
            .finish_non_exhaustive()
    }
}

impl DeviceH {
    /// Number of coefficients (`m − 1`).
    pub fn len(&self) -> usize {
        self.n_coeffs
    }

    /// Whether there are none (a domain of one point).
    pub fn is_empty(&self) -> bool {
        self.n_coeffs == 0
    }

    /// Copies the coefficients back to the host (waits for the transforms).
    pub fn into_host(self) -> Result<Vec<Scalar>, ProverError> {
        let reprs = gpu_ntt::download_reprs(&self.gpu, &self.coeffs).map_err(ntt_err)?;
        gpu_ntt::reprs_to_scalars(&reprs[..self.n_coeffs]).map_err(ntt_err)
    }
}

/// Pinned buffers from the GPU backend's staging pool that the prover evaluates a, b and c
/// into directly (bls-repr's Montgomery layout, `m` elements each); see
/// [`ProverBackend::abc_buffers`]. Dropping them returns them to the pool.
pub struct AbcBuffers {
    bufs: [Pooled<CudaPinned<u64>>; 3],
    m: usize,
}

impl std::fmt::Debug for AbcBuffers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AbcBuffers").field("m", &self.m).finish()
    }
}

impl AbcBuffers {
    /// Elements per vector (the domain size).
    pub fn len(&self) -> usize {
        self.m
    }

    /// Whether the vectors are empty.
    pub fn is_empty(&self) -> bool {
        self.m == 0
    }

    /// a, b and c for writing (or reading), once any copy from them has completed.
    pub fn slices_mut(&mut self) -> Result<[&mut [FrRepr]; 3], ProverError> {
        let m = self.m;
        let [a, b, c] = &mut self.bufs;
        Ok([repr_view(a, m)?, repr_view(b, m)?, repr_view(c, m)?])
    }

    /// Copies a, b and c into host vectors of scalars (for a backend that does not read
    /// the buffers in place); fails on a value that is not reduced.
    pub fn into_host(mut self) -> Result<AbcEvaluations, ProverError> {
        let [a, b, c] = self.slices_mut()?;
        let host = |v: &mut [FrRepr]| gpu_ntt::reprs_to_scalars(v).map_err(ntt_err);
        Ok(AbcEvaluations {
            a: host(a)?,
            b: host(b)?,
            c: host(c)?,
        })
    }
}

/// The first `m` elements of a pooled buffer as field elements (after its copies).
fn repr_view(buf: &mut Pooled<CudaPinned<u64>>, m: usize) -> Result<&mut [FrRepr], ProverError> {
    let words = buf
        .as_mut_slice()
        .map_err(|e| ntt_err(GpuNttError::Gpu(e)))?;
    let found = words.len();
    let words = words.get_mut(..SCALAR_LIMBS * m).ok_or_else(|| {
        ntt_err(GpuNttError::Gpu(GpuError::LengthMismatch {
            what: "a, b, c staging buffer (u64 words)",
            expected: SCALAR_LIMBS * m,
            found,
        }))
    })?;
    Ok(bytemuck::cast_slice_mut(words))
}

fn driver_err(call: &'static str, code: cudarc::driver::DriverError) -> ProverError {
    ntt_err(GpuNttError::Gpu(GpuError::Driver { call, code }))
}

fn staging_err(what: &'static str) -> impl FnOnce(PoolError) -> ProverError {
    move |source| ProverError::Staging { what, source }
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
        GpuBackend {
            ntt: GpuNtt::new(gpu.clone()),
            msm: GpuMsm::new(gpu.clone()),
            cpu: CpuMsm::new(),
            pool: PinnedStagingPool::cuda(gpu.clone(), budget.clone(), "groth16-prover staging"),
            copy_stream: Mutex::new(None),
            msm_g2: Mutex::new(None),
            gpu,
            budget,
            resident: Mutex::new(Resident::default()),
            resident_limit_bytes: u64::MAX,
            stream_limit_bytes: u64::MAX,
        }
    }

    /// The pinned staging pool (its stats show what it holds charged).
    pub fn pinned_pool(&self) -> &PinnedStagingPool<u64> {
        &self.pool
    }

    /// Keeps at most `bytes` of bases resident (96 per G1 base, 192 per G2 base); a query
    /// that would go past it is streamed from pinned host memory, as when the VRAM budget
    /// refuses it. Leaves room on the card for other work; also how the tests reach the
    /// streamed path.
    pub fn with_resident_limit(mut self, bytes: u64) -> GpuBackend {
        self.resident_limit_bytes = bytes;
        self
    }

    /// Keeps at most `bytes` of non-resident bases in pinned host memory (charged to the
    /// budget as `Category::Srs` while the key is resident); a query that would go past it
    /// runs on the CPU, as when the host budget refuses the pinned copy. How the tests
    /// reach the CPU fallback.
    pub fn with_stream_limit(mut self, bytes: u64) -> GpuBackend {
        self.stream_limit_bytes = bytes;
        self
    }

    /// The device.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// Where the resident key's bases are, per query used so far.
    pub fn resident_bases(&self) -> Vec<QueryBases> {
        let r = lock(&self.resident);
        [Query::H, Query::L, Query::A, Query::BG1]
            .into_iter()
            .filter_map(|q| r.queries[q as usize].as_ref().map(|p| p.summary(q.name())))
            .chain(r.b_g2.as_ref().map(|p| p.summary("b_g2_query")))
            .collect()
    }

    /// Drops the resident bases (their VRAM and pinned memory return to the budgets).
    pub fn clear_resident(&self) {
        *lock(&self.resident) = Resident::default();
    }

    /// Where query `q`'s first `n` bases of `key` live, placing them on first use.
    /// Returns the placement and the time spent placing them (zero when already placed).
    fn placement(
        &self,
        key: &ProvingKey,
        q: Query,
        n: usize,
    ) -> Result<(Placement<G1Curve>, Duration), ProverError> {
        self.placed(&self.msm, key, q.name(), q.bases(key), n, |r| {
            &mut r.queries[q as usize]
        })
    }

    /// Where the first `n` of `all` (query `query` of `key`) live: the placement in `slot`
    /// when it covers the same `n`, else a new one ([`GpuBackend::place`], uploads through
    /// `engine`), stored there. Returns it and the time spent placing (zero when kept).
    fn placed<C: GpuCurve + Clone>(
        &self,
        engine: &GpuMsm,
        key: &ProvingKey,
        query: &'static str,
        all: &[C::Affine],
        n: usize,
        slot: impl Fn(&mut Resident) -> &mut Option<Placement<C>>,
    ) -> Result<(Placement<C>, Duration), ProverError> {
        let mut r = lock(&self.resident);
        r.switch_to(key.id());
        if let Some(p) = slot(&mut r) {
            if p.n() == n {
                return Ok((p.clone(), Duration::ZERO));
            }
        }
        *slot(&mut r) = None;
        let bases = slice(query, all, 0, n)?;
        let t = Instant::now();
        let p = self.place::<C>(engine, &r, query, bases)?;
        *slot(&mut r) = Some(p.clone());
        Ok((p, t.elapsed()))
    }

    /// Places `bases` of `query`: uploaded to the device; else (the resident limit, the
    /// VRAM budget or the driver refuses them) copied into pinned host memory to be
    /// streamed; else (the stream limit, the host budget or the driver refuses that) left
    /// to the CPU. `r` holds what is placed already; `engine` uploads (on its stream).
    fn place<C: GpuCurve>(
        &self,
        engine: &GpuMsm,
        r: &Resident,
        query: &'static str,
        bases: &[C::Affine],
    ) -> Result<Placement<C>, ProverError> {
        let n = bases.len();
        let bytes = (C::AFFINE_WORDS * 4) as u64 * n as u64;
        let (on_device, pinned) = r.bytes();
        if on_device.saturating_add(bytes) <= self.resident_limit_bytes {
            // The host copy the upload makes (bls-repr layout), charged while it lives.
            let _host_copy = self.transient(bytes, "host copy of bases for upload")?;
            match engine.upload_bases::<C>(bases) {
                Ok(b) => return Ok(Placement::Device(Arc::new(b))),
                Err(e) if out_of_vram(&e) => {}
                Err(e) => return Err(gpu_msm_err(query)(e)),
            }
        }
        metrics::counter!("pinion_groth16_prover_gpu_query_streamed_total").increment(1);
        if pinned.saturating_add(bytes) <= self.stream_limit_bytes {
            if let Some(p) = self.pin::<C>(query, bases, bytes)? {
                return Ok(Placement::Streamed(Arc::new(p)));
            }
        }
        metrics::counter!("pinion_groth16_prover_gpu_query_on_cpu_total").increment(1);
        Ok(Placement::Cpu { n })
    }

    /// A copy of `bases` in pinned host memory (`bytes` of it, charged as
    /// `Category::Srs` for as long as it lives), or `None` when the host budget or the
    /// driver refuses the memory.
    fn pin<C: GpuCurve>(
        &self,
        query: &'static str,
        bases: &[C::Affine],
        bytes: u64,
    ) -> Result<Option<PinnedBases<C>>, ProverError> {
        let Ok(reservation) =
            self.budget
                .try_reserve(bytes, Category::Srs, "groth16-prover pinned bases")
        else {
            return Ok(None);
        };
        let words = match self
            .gpu
            .alloc_pinned::<u32>(C::AFFINE_WORDS * bases.len(), reservation)
        {
            Ok(w) => w,
            Err(GpuError::OutOfMemory { .. }) => return Ok(None),
            Err(e) => return Err(gpu_msm_err(query)(GpuMsmError::Gpu(e))),
        };
        let mut pinned = PinnedBases::<C>::from_words(words).map_err(gpu_msm_err(query))?;
        pinned
            .reprs_mut()
            .map_err(gpu_msm_err(query))?
            .par_iter_mut()
            .zip(bases.par_iter())
            .for_each(|(dst, src)| *dst = C::to_repr(src));
        Ok(Some(pinned))
    }

    /// A device buffer for `n` scalars of query `q`, queued on the device's stream;
    /// [`GpuBackend::stage`] then overwrites it.
    fn device_scalars(&self, q: Query, n: usize) -> Result<DeviceScalars, ProverError> {
        self.msm.alloc_scalars(n).map_err(gpu_msm_err(q.name()))
    }

    /// The backend's copy stream (created on first use).
    fn copy_stream(&self) -> Result<Arc<CudaStream>, ProverError> {
        let mut slot = self.copy_stream.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = slot.as_ref() {
            return Ok(s.clone());
        }
        let s = self
            .gpu
            .new_stream()
            .map_err(|e| ntt_err(GpuNttError::Gpu(e)))?;
        *slot = Some(s.clone());
        Ok(s)
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

    /// The G2 engine on its own stream (created on first use).
    fn g2_engine(&self) -> Result<Arc<GpuMsm>, ProverError> {
        let mut slot = self.msm_g2.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = slot.as_ref() {
            return Ok(m.clone());
        }
        let stream = self
            .gpu
            .new_stream()
            .map_err(|e| gpu_msm_err("b_g2_query")(GpuMsmError::Gpu(e)))?;
        let m = Arc::new(GpuMsm::new(self.gpu.with_stream(stream)));
        *slot = Some(m.clone());
        Ok(m)
    }

    /// Stages the scalars of `dst` (the parts concatenated, each filtered by its mask):
    /// canonical limbs written straight into a pooled pinned buffer, then an
    /// asynchronous copy into `dst` on `copy_stream`. The staging buffer goes back to the
    /// pool at once (the pool waits for the copy before reusing it). Returns an event
    /// recorded after the copy, for the MSM to wait on, the host time spent and the part
    /// of it spent waiting for the staging buffer.
    fn stage(
        &self,
        q: Query,
        parts: &[Part<'_>],
        dst: &mut DeviceScalars,
        copy_stream: &Arc<CudaStream>,
    ) -> Result<(CudaEvent, Duration, Duration), ProverError> {
        let t = Instant::now();
        let n = dst.len();
        let limbs = SCALAR_LIMBS * n;
        let gpu_err = |e: GpuError| gpu_msm_err(q.name())(GpuMsmError::Gpu(e));
        let mut staging = self.pool.acquire(limbs).map_err(staging_err(q.name()))?;
        let host = staging.as_mut_slice().map_err(gpu_err)?;
        let waited = t.elapsed();
        let written = write_parts(host, parts);
        if written != n {
            return Err(gpu_msm_err(q.name())(GpuMsmError::LengthMismatch {
                n_bases: n,
                n_scalars: written,
            }));
        }
        staging
            .copy_to_device(0..limbs, dst.words_mut(), 0, copy_stream)
            .map_err(gpu_err)?;
        let copied = copy_stream.record_event(None).map_err(|c| {
            gpu_err(GpuError::Driver {
                call: "cuEventRecord",
                code: c,
            })
        })?;
        Ok((copied, t.elapsed(), waited))
    }

    /// The same sums as the CPU backend, part by part over consecutive bases.
    fn cpu_sum(
        &self,
        key: &ProvingKey,
        q: Query,
        n: usize,
        parts: &[Part<'_>],
    ) -> Result<G1Projective, ProverError> {
        let all = slice(q.name(), q.bases(key), 0, n)?;
        let mut start = 0;
        let mut sum = G1Projective::identity();
        for (scalars, mask) in parts {
            let k = mask.map_or(scalars.len(), DensityMask::count_ones);
            let bases = slice(q.name(), all, start, start + k)?;
            sum += self
                .cpu
                .msm_g1(bases, scalars, *mask)
                .map_err(msm_err(q.name()))?;
            start += k;
        }
        Ok(sum)
    }

    /// Queues the H step from a, b, c in the pool's pinned buffers (asynchronous copies);
    /// the buffers go back to the pool at once (it waits for the copies before reuse).
    fn h_from_pinned(&self, abc: AbcBuffers) -> Result<HOutput, ProverError> {
        let gpu_err = |e: GpuError| ntt_err(GpuNttError::Gpu(e));
        let stream = self.gpu.stream().clone();
        let started = self.gpu.timing_event().map_err(gpu_err)?;
        started
            .record(&stream)
            .map_err(|c| driver_err("cuEventRecord", c))?;
        let [a, b, c] = &abc.bufs;
        let h = self
            .ntt
            .h_poly_device(
                AbcSource::Pinned {
                    a: a.pinned(),
                    b: b.pinned(),
                    c: c.pinned(),
                },
                &stream,
            )
            .map_err(ntt_err)?;
        // Back to the pool while the copies may still run: gpu-ntt copies through
        // cudarc's `host_slice()`, whose event the pool waits for before reuse.
        drop(abc);
        self.h_output(h, started)
    }

    /// h left on the device, with the events around its transforms.
    fn h_output(
        &self,
        h: gpu_ntt::HPolyDevice,
        started: CudaEvent,
    ) -> Result<HOutput, ProverError> {
        let finished = self
            .gpu
            .timing_event()
            .map_err(|e| ntt_err(GpuNttError::Gpu(e)))?;
        finished
            .record(self.gpu.stream())
            .map_err(|c| driver_err("cuEventRecord", c))?;
        Ok(HOutput {
            h: HPoly::Device(DeviceH {
                coeffs: h.coeffs,
                n_coeffs: h.n_coeffs,
                gpu: self.gpu.clone(),
                started,
                finished,
            }),
            transfers: Duration::ZERO,
        })
    }

    /// Where the first `n` bases of `b_g2_query` live, placing them on first use (as
    /// [`GpuBackend::placement`] for the G1 queries, uploaded by the G2 engine).
    fn placement_g2(&self, key: &ProvingKey, n: usize) -> Result<Placement<G2Curve>, ProverError> {
        let engine = self.g2_engine()?;
        let (p, _) = self.placed(&engine, key, "b_g2_query", key.b_g2_query(), n, |r| {
            &mut r.b_g2
        })?;
        Ok(p)
    }

    /// B on G2: one MSM over `b_g2_query[..|b_in| + |b_aux|]` with the scalars
    /// `inputs[b_in] ++ aux[b_aux]` (groth16's two sums added) on the device, the bases
    /// resident or streamed; or the two sums on the host when the bases are on neither.
    fn msm_b_g2(&self, key: &ProvingKey, x: &MsmInputs<'_>) -> Result<G2Projective, ProverError> {
        let (k_in, k_aux) = (x.b_input.count_ones(), x.b_aux.count_ones());
        if k_in + k_aux == 0 {
            return Ok(G2Projective::identity());
        }
        if let Some(bases) = self.placement_g2(key, k_in + k_aux)?.on_gpu() {
            let n = k_in + k_aux;
            let bytes = (SCALAR_LIMBS * 8 * n) as u64;
            let _words = self.transient(bytes, "b_g2 scalars")?;
            let mut limbs = vec![0u64; SCALAR_LIMBS * n];
            let parts: [Part<'_>; 2] = [(x.inputs, Some(x.b_input)), (x.aux, Some(x.b_aux))];
            let written = write_parts(&mut limbs, &parts);
            debug_assert_eq!(written, n);
            let engine = self.g2_engine()?;
            let scalars = engine
                .upload_scalar_words(bytemuck::cast_slice(&limbs))
                .map_err(gpu_msm_err("b_g2_query"))?;
            drop(limbs);
            return bases
                .msm(&engine, &scalars, STREAM_CHUNK_G2)
                .map_err(gpu_msm_err("b_g2_query"));
        }
        let b2_in = slice("b_g2_query", key.b_g2_query(), 0, k_in)?;
        let b2_aux = slice("b_g2_query", key.b_g2_query(), k_in, k_in + k_aux)?;
        let i = self
            .cpu
            .msm_g2(b2_in, x.inputs, Some(x.b_input))
            .map_err(msm_err("b_g2 inputs"))?;
        let a = self
            .cpu
            .msm_g2(b2_aux, x.aux, Some(x.b_aux))
            .map_err(msm_err("b_g2 aux"))?;
        Ok(i + a)
    }
}

fn to_reprs(v: Vec<Scalar>) -> Vec<FrRepr> {
    v.par_iter().map(FrRepr::from_scalar).collect()
}

/// One G1 MSM for the device thread: its bases, its scalars and the event after their
/// copy (none when they were produced on the device's own stream).
struct DeviceJob {
    q: Query,
    bases: GpuBases<G1Curve>,
    scalars: DeviceScalars,
    copied: Option<CudaEvent>,
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

    fn msm_scratch_bytes(&self, n_max_terms: usize) -> u64 {
        // Scalars are staged in the pool. Host bytes: the G2 MSM on the CPU, and a query
        // whose bases are not resident (h copied back: device layout and scalars).
        GPU_TERM_BYTES * n_max_terms as u64 + cpu_msm_scratch_bytes(n_max_terms)
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
        let AbcEvaluations { a, b, c } = abc;
        let t = Instant::now();
        let m = a.len();
        if b.len() == m && c.len() == m {
            if let Some(mut bufs) = self.abc_buffers(m)? {
                // Converted straight into the pool's pinned buffers, each host vector
                // dropped once converted.
                for (dst, v) in bufs.slices_mut()?.into_iter().zip([a, b, c]) {
                    reprs_into(dst, &v);
                }
                inputs_released();
                let mut out = self.h_from_pinned(bufs)?;
                out.transfers = t.elapsed();
                return Ok(out);
            }
        }
        // Not the prover's layout (a caller of the trait with unpadded vectors):
        // pageable copies, synchronous for the host.
        let gpu_err = |e: GpuError| ntt_err(GpuNttError::Gpu(e));
        let stream = self.gpu.stream().clone();
        let started = self.gpu.timing_event().map_err(gpu_err)?;
        let (a, b, c) = (to_reprs(a), to_reprs(b), to_reprs(c));
        started
            .record(&stream)
            .map_err(|c| driver_err("cuEventRecord", c))?;
        let h = self
            .ntt
            .h_poly_device(
                AbcSource::Host {
                    a: &a,
                    b: &b,
                    c: &c,
                },
                &stream,
            )
            .map_err(ntt_err)?;
        h.inputs_uploaded
            .synchronize()
            .map_err(|c| driver_err("cuEventSynchronize", c))?;
        drop((a, b, c));
        inputs_released();
        let mut out = self.h_output(h, started)?;
        out.transfers = t.elapsed();
        Ok(out)
    }

    fn abc_buffers(&self, m: usize) -> Result<Option<AbcBuffers>, ProverError> {
        let limbs = SCALAR_LIMBS * m;
        // gpu-ntt takes the domain from the pinned buffers' length, so they must hold
        // exactly m elements: true for the prover's a, b, c (padded to the power of two
        // m, whose size class is itself).
        if !m.is_power_of_two() || gpu_device::size_class(limbs) != limbs {
            return Ok(None);
        }
        let acquire = || self.pool.acquire(limbs).map_err(staging_err("a, b, c"));
        Ok(Some(AbcBuffers {
            bufs: [acquire()?, acquire()?, acquire()?],
            m,
        }))
    }

    fn h_poly_staged(&self, abc: AbcBuffers) -> Result<HOutput, ProverError> {
        let t = Instant::now();
        let mut out = self.h_from_pinned(abc)?;
        out.transfers = t.elapsed();
        Ok(out)
    }

    fn msms(
        &self,
        key: &ProvingKey,
        h: HPoly,
        x: &MsmInputs<'_>,
    ) -> Result<MsmOutputs, ProverError> {
        let start = Instant::now();
        let n_in = x.inputs.len();
        let (k_in, k_aux) = (x.b_input.count_ones(), x.b_aux.count_ones());
        let mut timings = MsmTimings::default();
        let n_h = h.len();
        let others: [(Query, usize, Vec<Part<'_>>); 3] = [
            (Query::L, x.aux.len(), vec![(x.aux, None)]),
            (
                Query::A,
                n_in + x.a_aux.count_ones(),
                vec![(x.inputs, None), (x.aux, Some(x.a_aux))],
            ),
            (
                Query::BG1,
                k_in + k_aux,
                vec![(x.inputs, Some(x.b_input)), (x.aux, Some(x.b_aux))],
            ),
        ];
        // Where each query runs (uploading bases on a key's first proof), up front.
        let mut placements: [Option<Placement<G1Curve>>; 4] = [None, None, None, None];
        for (q, n) in [(Query::H, n_h)]
            .into_iter()
            .chain(others.iter().map(|(q, n, _)| (*q, *n)))
        {
            if n > 0 {
                let (p, upload) = self.placement(key, q, n)?;
                timings.bases_upload += upload;
                placements[q as usize] = Some(p);
            }
        }
        // H's scalars: in place when the H step left h on the device and its bases are
        // resident; otherwise as host scalars like the other queries.
        let mut h_events = None;
        let mut h_adopted = None;
        let mut h_host = None;
        match (h, &placements[Query::H as usize]) {
            (_, None) => {}
            (HPoly::Device(d), Some(Placement::Device(_) | Placement::Streamed(_))) => {
                let t = Instant::now();
                let DeviceH {
                    coeffs,
                    n_coeffs,
                    started,
                    finished,
                    ..
                } = d;
                h_adopted = Some(
                    self.msm
                        .adopt_scalars_montgomery(coeffs, n_coeffs)
                        .map_err(gpu_msm_err(Query::H.name()))?,
                );
                h_events = Some((started, finished));
                timings.scalar_transfers += t.elapsed();
            }
            (HPoly::Device(d), Some(_)) => h_host = Some(d.into_host()?),
            (HPoly::Host(v), Some(_)) => h_host = Some(v),
        }
        let mut jobs: Vec<(Query, usize, Vec<Part<'_>>)> = Vec::with_capacity(4);
        if let Some(v) = &h_host {
            jobs.push((Query::H, n_h, vec![(&v[..], None)]));
        }
        jobs.extend(others);
        jobs.retain(|(q, _, _)| placements[*q as usize].is_some());
        // Device buffers for every staged query now, on the device's stream ahead of the
        // MSMs, so that each copy waits for nothing but this (and overlaps the MSM
        // before it). Costs their VRAM at once: at most one buffer per query.
        let mut scalars: [Option<DeviceScalars>; 4] = [None, None, None, None];
        for (q, n, _) in &jobs {
            if let Some(Placement::Device(_) | Placement::Streamed(_)) = &placements[*q as usize] {
                scalars[*q as usize] = Some(self.device_scalars(*q, *n)?);
            }
        }
        let copy_stream = self.copy_stream()?;
        let allocated = self
            .gpu
            .stream()
            .record_event(None)
            .map_err(|c| driver_err("cuEventRecord", c))?;
        copy_stream
            .wait(&allocated)
            .map_err(|c| driver_err("cuStreamWaitEvent", c))?;
        let mut out = [G1Projective::identity(); 4];
        let (device, g2) = std::thread::scope(|scope| {
            // G2 on the host while the device does the G1 sums.
            let g2 = scope.spawn(|| {
                let t = Instant::now();
                self.msm_b_g2(key, x).map(|p| (p, t.elapsed()))
            });
            // The device thread runs the resident MSMs in order while this thread
            // stages the next one's scalars (at most one staged ahead in the channel).
            let (tx, rx) = std::sync::mpsc::sync_channel::<DeviceJob>(1);
            let device = scope.spawn(
                move || -> Result<Vec<(Query, G1Projective, Duration)>, ProverError> {
                    let mut sums = Vec::new();
                    for job in rx {
                        let t = Instant::now();
                        if let Some(copied) = &job.copied {
                            self.gpu
                                .stream()
                                .wait(copied)
                                .map_err(|c| driver_err("cuStreamWaitEvent", c))?;
                        }
                        let sum = job
                            .bases
                            .msm(&self.msm, &job.scalars, STREAM_CHUNK_G1)
                            .map_err(gpu_msm_err(job.q.name()))?;
                        drop(job.scalars);
                        sums.push((job.q, sum, t.elapsed()));
                    }
                    Ok(sums)
                },
            );
            let staged = (|| -> Result<(), ProverError> {
                if let (Some(d), Some(bases)) = (
                    h_adopted.take(),
                    placements[Query::H as usize]
                        .as_ref()
                        .and_then(Placement::on_gpu),
                ) {
                    let job = DeviceJob {
                        q: Query::H,
                        bases,
                        scalars: d,
                        copied: None,
                    };
                    if tx.send(job).is_err() {
                        return Ok(());
                    }
                }
                for (q, n, parts) in &jobs {
                    let bases = placements[*q as usize].as_ref().and_then(Placement::on_gpu);
                    match (bases, scalars[*q as usize].take()) {
                        (Some(bases), Some(mut dst)) => {
                            let (copied, host_time, waited) =
                                self.stage(*q, parts, &mut dst, &copy_stream)?;
                            timings.scalar_transfers += host_time;
                            timings.staging_wait += waited;
                            let job = DeviceJob {
                                q: *q,
                                bases,
                                scalars: dst,
                                copied: Some(copied),
                            };
                            // A closed channel: the device thread failed; its error wins.
                            if tx.send(job).is_err() {
                                return Ok(());
                            }
                        }
                        _ => {
                            let t = Instant::now();
                            out[*q as usize] = self.cpu_sum(key, *q, *n, parts)?;
                            *query_time(&mut timings, *q) = t.elapsed();
                        }
                    }
                }
                Ok(())
            })();
            drop(tx);
            let device = device.join();
            let g2 = g2.join();
            ((staged, device), g2)
        });
        let (staged, device) = device;
        let sums = match device {
            Ok(r) => r,
            // The device thread only panics on a bug; re-raise it where it belongs.
            Err(panic) => std::panic::resume_unwind(panic),
        };
        // A device failure closes the channel and makes staging stop: report it first.
        let sums = sums?;
        staged?;
        for (q, sum, d) in sums {
            out[q as usize] = sum;
            *query_time(&mut timings, q) = d;
        }
        if let Some((started, finished)) = h_events {
            let ms = started
                .elapsed_ms(&finished)
                .map_err(|c| driver_err("cuEventElapsedTime", c))?;
            timings.h_device = Duration::from_secs_f64(f64::from(ms.max(0.0)) / 1e3);
        }
        let [h, l, a, b_g1] = out;
        let (b_g2, t) = match g2 {
            Ok(r) => r?,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        timings.b_g2 = t;
        timings.wall = start.elapsed();
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

/// The timing slot of a G1 query.
fn query_time(t: &mut MsmTimings, q: Query) -> &mut Duration {
    match q {
        Query::H => &mut t.h,
        Query::L => &mut t.l,
        Query::A => &mut t.a,
        Query::BG1 => &mut t.b_g1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::SplitMix;

    use crate::testing::test_seed as seed;

    /// Per element and serially: filter the scalars by the mask, then each one's canonical
    /// bytes as little-endian u32 words, part after part.
    fn reference_words(parts: &[Part<'_>]) -> Vec<u32> {
        let mut words = Vec::new();
        for (scalars, mask) in parts {
            for (i, s) in scalars.iter().enumerate() {
                if mask.is_none_or(|m| m.get(i)) {
                    let b = s.to_bytes();
                    words.extend(
                        b.chunks_exact(4)
                            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]])),
                    );
                }
            }
        }
        words
    }

    fn scalars(g: &mut SplitMix, n: usize) -> Vec<Scalar> {
        (0..n)
            .map(|_| match g.below(4) {
                // Zeros and ones are what the masks and fast paths meet most.
                0 => Scalar::zero(),
                1 => Scalar::one(),
                _ => g.scalar(),
            })
            .collect()
    }

    /// A mask of `len` bits, each set with probability `per_mille`/1000.
    fn mask(g: &mut SplitMix, len: usize, per_mille: usize) -> DensityMask {
        DensityMask::from_bools((0..len).map(|_| g.below(1000) < per_mille))
    }

    /// Limbs as the u32 words the device reads (little-endian halves, low first).
    fn as_words(limbs: &[u64]) -> Vec<u32> {
        limbs
            .iter()
            .flat_map(|l| [*l as u32, (*l >> 32) as u32])
            .collect()
    }

    #[test]
    fn parts_match_per_msm_conversion() {
        let mut g = SplitMix::new(seed());
        for (n_in, n_aux) in [(1usize, 0usize), (1, 1), (3, 70), (2, 5000), (70, 9000)] {
            let n_h = 1 + g.below(5000);
            let h = scalars(&mut g, n_h);
            let inputs = scalars(&mut g, n_in);
            let aux = scalars(&mut g, n_aux);
            let density = g.below(1001);
            let a_aux = mask(&mut g, n_aux, density);
            let b_input = mask(&mut g, n_in, 1000 - density);
            let b_aux = mask(&mut g, n_aux, 500);
            let cases: [(&str, usize, Vec<Part<'_>>); 4] = [
                ("h", n_h, vec![(&h, None)]),
                ("l", n_aux, vec![(&aux, None)]),
                (
                    "a",
                    n_in + a_aux.count_ones(),
                    vec![(&inputs, None), (&aux, Some(&a_aux))],
                ),
                (
                    "b_g1",
                    b_input.count_ones() + b_aux.count_ones(),
                    vec![(&inputs, Some(&b_input)), (&aux, Some(&b_aux))],
                ),
            ];
            for (name, n, parts) in &cases {
                // A staging buffer is a size class: longer than the scalars.
                let mut out = vec![u64::MAX; gpu_device::size_class(SCALAR_LIMBS * n)];
                assert_eq!(write_parts(&mut out, parts), *n, "{name}");
                assert_eq!(
                    as_words(&out[..SCALAR_LIMBS * n]),
                    reference_words(parts),
                    "{name} with {n_in} inputs, {n_aux} aux"
                );
            }
        }
    }

    #[test]
    fn montgomery_limbs_are_bls_repr() {
        let mut g = SplitMix::new(seed());
        let s = scalars(&mut g, 9000);
        let mut out = vec![FrRepr::ZERO; s.len() + 1];
        reprs_into(&mut out, &s);
        for (i, x) in s.iter().enumerate() {
            assert_eq!(out[i].to_scalar().unwrap(), *x, "element {i}");
        }
        assert_eq!(out[s.len()], FrRepr::ZERO, "nothing past the scalars");
    }
}
