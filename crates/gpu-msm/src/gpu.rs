//! The CUDA backend: Pippenger on the GPU for G1 (`cuda-kernels/msm.cu`).
//!
//! # Contract
//! - [`GpuMsm::msm_g1`] gives exactly `Σ scalars[i]·bases[i]` (the same value as
//!   [`crate::reference::naive_msm`] and [`crate::CpuMsm`]) for any scalars, bases at
//!   infinity and repeated bases included; shapes follow the crate's rules
//!   ([`crate::DensityMask`] pairing, equal lengths otherwise).
//! - Bases can be made resident once ([`GpuMsm::upload_bases_g1`], [`DeviceBasesG1`]) and
//!   reused by every MSM over them; scalars can be uploaded separately
//!   ([`GpuMsm::upload_scalars`], canonical on the device) so that a caller can overlap
//!   or time the copy.
//! - Scalars: [`Scalar`]s are converted to canonical integers on the host (through
//!   `to_bytes`, in parallel); [`FrRepr`] (Montgomery) scalars are uploaded as they are and
//!   converted to canonical on the GPU ([`GpuMsm::upload_scalars_montgomery`]).
//! - Every device allocation (bases, scalars, scratch) is charged to the device's VRAM
//!   budget first; a refusal or a real CUDA out-of-memory is [`GpuMsmError::Gpu`], never a
//!   panic. Scratch lives only for one call.
//! - G2 is not implemented on the GPU yet: the [`crate::MsmBackend`] impl of [`GpuMsm`]
//!   runs G2 on the host through [`crate::CpuMsm`] (the trait's G1 methods run on the GPU,
//!   bases uploaded per call). Device errors reach the trait as [`MsmError::Gpu`].
//!
//! # Pipeline (one stream)
//! Signed-digit windows of `c` bits (`W = ⌈256/c⌉` windows, `2^(c-1)` buckets each), plus a
//! "ones" window that sums the bases of scalars equal to 1 without weights; scalars equal
//! to 0 produce no work. Bucket assignment is a counting sort by bucket key (count with
//! atomics, prefix sum, scatter), then one thread per bucket adds its bases in XYZZ
//! coordinates, buckets are reduced by running sums over segments of buckets (one thread
//! each) and a two-level sum, the `W + 1` window sums are made affine on the GPU, and the
//! host combines them by doubling.
//!
//! # Known limitation (performance, not correctness)
//! One thread sums one bucket, so a bucket that receives many entries serialises: many
//! equal scalars other than 0 and 1 (say a million 2s), or a window whose digits take few
//! values. The default window sizes avoid the second case for uniform scalars (see
//! [`GpuMsmPlan::default_window_bits`]); the first is still slow (seconds at 2^20 equal
//! scalars), though exact. The fix is to split long buckets into tasks of bounded length
//! and sum the partial results (not done yet).
//!
//! # Measured (H200, 2026-11-30, `examples/gpu_msm_bench.rs`, bases resident, uniform scalars)
//! Median ms including the pinned-host copy of the scalars / with scalars resident:
//! 2^16 10.78 / 10.68 (c = 13), 2^18 11.56 / 11.32, 2^20 21.63 / 20.92, 2^22 59.90 / 57.98,
//! 2^24 195.79 / 186.77 (c = 16; 2^22 and 2^24 with the uncapped accumulation kernel).
//! At 2^24 the bucket accumulation is 164.5 of 184.5 ms of device time (count 2.6,
//! scan 0.3, scatter 11.0, reduction 6.1): the mixed additions bound it.
//!
//! # Cost model
//! About `W·m` mixed additions for `m` scalars other than 0 and 1, one per scalar equal to
//! 1, `~2·(W+1)·2^(c-1)` additions to reduce buckets; device scratch of
//! `4·W·n + 192·(W+1)·2^(c-1) + 12·(W+1)·2^(c-1)` bytes (entries, buckets, sort keys).

use bls12_381::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use bls_repr::{FrRepr, G1AffineRepr, ReprError};
use cudarc::driver::{LaunchConfig, PushKernelArg};
use gpu_device::{DeviceBuffer, Entry, Gpu, GpuError};
use rayon::prelude::*;
use std::sync::Arc;

use crate::{check_shapes, DensityMask, MsmError};

/// u32 words of one G1 affine point (x, y: 12 words each).
const G1_AFFINE_WORDS: usize = 24;
/// u32 words of one G1 XYZZ point (4 coordinates).
const G1_XYZZ_WORDS: usize = 48;
/// u32 words of one scalar (canonical, little-endian).
const SCALAR_WORDS: usize = 8;
/// Threads per block: the scalar kernels are light, the point kernels use many registers.
const SCALAR_BLOCK: u32 = 256;
const POINT_BLOCK: u32 = 128;
/// Counts summed per thread in the first level of the prefix sum.
const SCAN_CHUNK: u32 = 256;
/// Most segments a window's buckets are split into for the reduction (a power of two).
const MAX_SEGMENTS: u32 = 1024;
/// Smallest and largest window sizes.
pub const GPU_MIN_WINDOW_BITS: u32 = 2;
/// Largest window size (keeps bucket keys and scratch small).
pub const GPU_MAX_WINDOW_BITS: u32 = 20;
/// Most terms one GPU MSM takes (entry indices keep a sign bit; the sorted entries must
/// fit u32 offsets).
pub const GPU_MAX_TERMS: usize = 1 << 28;

/// Why a GPU MSM failed.
#[derive(Debug, thiserror::Error)]
pub enum GpuMsmError {
    /// The inputs' shapes are wrong (the same checks as every backend).
    #[error(transparent)]
    Shape(#[from] MsmError),
    /// The device refused or failed (VRAM budget, out of memory, driver error).
    #[error("gpu msm: {0}")]
    Gpu(#[from] GpuError),
    /// More terms than the GPU pipeline indexes.
    #[error("{n_terms} terms exceed the gpu backend's maximum of {max_terms}")]
    TooManyTerms {
        /// Terms requested.
        n_terms: usize,
        /// Largest supported count.
        max_terms: usize,
    },
    /// A configured window size is out of range.
    #[error("window of {window_bits} bits is outside {min_bits}..={max_bits}")]
    BadWindow {
        /// Requested size.
        window_bits: u32,
        /// Smallest allowed.
        min_bits: u32,
        /// Largest allowed.
        max_bits: u32,
    },
    /// Scalars and bases on the device disagree in count.
    #[error("{n_bases} resident bases but {n_scalars} resident scalars")]
    LengthMismatch {
        /// Bases on the device.
        n_bases: usize,
        /// Scalars on the device.
        n_scalars: usize,
    },
    /// A window sum read back from the device is not a valid point (a kernel bug).
    #[error("window sum {index} read back from the gpu is invalid: {source}")]
    BadResult {
        /// Index of the window sum.
        index: usize,
        /// Why it was rejected.
        #[source]
        source: ReprError,
    },
}

/// Device time of each pipeline phase, in order: (phase, milliseconds).
pub type PhaseTimes = Vec<(&'static str, f32)>;

/// G1 bases resident on the device (affine, Montgomery, infinity all-zero), charged to the
/// VRAM budget while they live.
#[derive(Debug)]
pub struct DeviceBasesG1 {
    words: DeviceBuffer<u32>,
    n: usize,
}

impl DeviceBasesG1 {
    /// Number of bases.
    pub fn len(&self) -> usize {
        self.n
    }
    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
}

/// Scalars resident on the device, canonical little-endian (8 u32 words each).
#[derive(Debug)]
pub struct DeviceScalars {
    words: DeviceBuffer<u32>,
    n: usize,
}

impl DeviceScalars {
    /// Number of scalars.
    pub fn len(&self) -> usize {
        self.n
    }
    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
    /// The device words (8 per scalar), e.g. as the destination of a pinned-host copy of
    /// canonical scalar words made by [`scalars_to_words`].
    pub fn words_mut(&mut self) -> &mut DeviceBuffer<u32> {
        &mut self.words
    }
}

/// Which bucket-accumulation kernel to run (same results; a tuning choice).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AccumulateKernel {
    /// Registers as the compiler likes (142 on sm_90: 3 blocks of 128 threads per SM).
    Uncapped,
    /// Registers capped at 128 (4 blocks per SM, 68 bytes of spills). The default:
    /// measured 4-5% faster on the H200 at 2^18 and 2^20 (11.31 vs 11.73 ms, 21.19 vs
    /// 22.34 ms, scalars resident, median of 3); not yet measured at 2^22 and above.
    #[default]
    Capped128,
}

/// Configuration of the GPU backend.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GpuMsmConfig {
    /// Window size in bits; `None` picks one from the number of terms.
    pub window_bits: Option<u32>,
    /// Bucket-accumulation kernel.
    pub accumulate: AccumulateKernel,
}

/// The CUDA MSM engine on one device.
#[derive(Clone, Debug)]
pub struct GpuMsm {
    gpu: Gpu,
    config: GpuMsmConfig,
}

/// Window parameters of one MSM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuMsmPlan {
    /// Window bits c.
    pub window_bits: u32,
    /// Signed-digit windows W (the ones window is extra).
    pub n_windows: u32,
    /// Buckets per window, 2^(c-1).
    pub n_buckets: u32,
    /// Bucket keys, (W + 1)·2^(c-1).
    pub n_keys: u32,
    /// Segments per window in the bucket reduction.
    pub n_segments: u32,
}

impl GpuMsmPlan {
    /// The plan for `n` terms with window size `c`.
    pub fn new(c: u32) -> GpuMsmPlan {
        let n_windows = 256u32.div_ceil(c);
        let n_buckets = 1u32 << (c - 1);
        GpuMsmPlan {
            window_bits: c,
            n_windows,
            n_buckets,
            n_keys: (n_windows + 1) * n_buckets,
            n_segments: n_buckets.min(MAX_SEGMENTS),
        }
    }

    /// The default window size for `n` terms: 8 up to 2^12 terms, 13 below 2^17, else 16.
    ///
    /// Only sizes whose top window still spans most of its bits are used (c = 8, 13, 16:
    /// the top window holds scalar bits 248..255, 247..255, 240..255). With c = 14, say,
    /// the top window holds bits 252..254 only, so all n top digits fall into 8 buckets and
    /// the one thread per bucket adds n/8 points in a row: measured on the H200 at 2^16,
    /// c = 14 took 134 ms and c = 13 10.7 ms; at 2^20, c = 15 took 4.4 s and c = 16 21 ms.
    pub fn default_window_bits(n: usize) -> u32 {
        if n <= 1 << 12 {
            8
        } else if n < 1 << 17 {
            13
        } else {
            16
        }
    }
}

/// Canonical little-endian u32 words of each scalar (8 per scalar), in parallel.
pub fn scalars_to_words(scalars: &[Scalar]) -> Vec<u32> {
    let mut words = vec![0u32; scalars.len() * SCALAR_WORDS];
    words
        .par_chunks_mut(SCALAR_WORDS * 4096)
        .zip(scalars.par_chunks(4096))
        .for_each(|(out, s)| {
            for (o, s) in out.chunks_exact_mut(SCALAR_WORDS).zip(s) {
                let bytes = s.to_bytes();
                for (w, b) in o.iter_mut().zip(bytes.chunks_exact(4)) {
                    *w = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                }
            }
        });
    words
}

fn grid(n: u32, block: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (n.div_ceil(block).max(1), 1, 1),
        block_dim: (block, 1, 1),
        shared_mem_bytes: 0,
    }
}

fn driver(call: &'static str) -> impl Fn(cudarc::driver::DriverError) -> GpuMsmError {
    move |code| GpuMsmError::Gpu(GpuError::Driver { call, code })
}

fn launch_err(e: cudarc::driver::DriverError) -> GpuMsmError {
    driver("cuLaunchKernel")(e)
}

impl GpuMsm {
    /// An engine on `gpu` with the default configuration.
    pub fn new(gpu: Gpu) -> GpuMsm {
        GpuMsm {
            gpu,
            config: GpuMsmConfig::default(),
        }
    }

    /// An engine with an explicit configuration (checked).
    pub fn with_config(gpu: Gpu, config: GpuMsmConfig) -> Result<GpuMsm, GpuMsmError> {
        if let Some(c) = config.window_bits {
            if !(GPU_MIN_WINDOW_BITS..=GPU_MAX_WINDOW_BITS).contains(&c) {
                return Err(GpuMsmError::BadWindow {
                    window_bits: c,
                    min_bits: GPU_MIN_WINDOW_BITS,
                    max_bits: GPU_MAX_WINDOW_BITS,
                });
            }
        }
        Ok(GpuMsm { gpu, config })
    }

    /// The configuration.
    pub fn config(&self) -> GpuMsmConfig {
        self.config
    }

    /// The device.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// The plan used for `n` terms.
    pub fn plan(&self, n: usize) -> GpuMsmPlan {
        GpuMsmPlan::new(
            self.config
                .window_bits
                .unwrap_or_else(|| GpuMsmPlan::default_window_bits(n)),
        )
    }

    /// Uploads bases once (converted to bls-repr's layout on the host).
    pub fn upload_bases_g1(&self, bases: &[G1Affine]) -> Result<DeviceBasesG1, GpuMsmError> {
        let reprs: Vec<G1AffineRepr> = bases.par_iter().map(G1AffineRepr::from_affine).collect();
        self.upload_bases_g1_repr(&reprs)
    }

    /// Uploads bases already in bls-repr's layout (e.g. from the SRS store).
    pub fn upload_bases_g1_repr(
        &self,
        bases: &[G1AffineRepr],
    ) -> Result<DeviceBasesG1, GpuMsmError> {
        let words: &[u32] = bytemuck::cast_slice(bases);
        let words = self.gpu.upload(words, "gpu-msm g1 bases")?;
        Ok(DeviceBasesG1 {
            words,
            n: bases.len(),
        })
    }

    /// Uploads scalars (converted to canonical on the host).
    pub fn upload_scalars(&self, scalars: &[Scalar]) -> Result<DeviceScalars, GpuMsmError> {
        self.upload_scalar_words(&scalars_to_words(scalars))
    }

    /// Uploads canonical scalar words (8 little-endian u32 per scalar, each < r).
    pub fn upload_scalar_words(&self, words: &[u32]) -> Result<DeviceScalars, GpuMsmError> {
        let n = words.len() / SCALAR_WORDS;
        let words = self.gpu.upload(words, "gpu-msm scalars")?;
        Ok(DeviceScalars { words, n })
    }

    /// Uploads Montgomery-form scalars and converts them to canonical on the GPU.
    pub fn upload_scalars_montgomery(
        &self,
        scalars: &[FrRepr],
    ) -> Result<DeviceScalars, GpuMsmError> {
        let mut s = self.upload_scalar_words(bytemuck::cast_slice(scalars))?;
        let n = u32::try_from(s.n).map_err(|_| GpuMsmError::TooManyTerms {
            n_terms: s.n,
            max_terms: GPU_MAX_TERMS,
        })?;
        if n > 0 {
            let f = self.gpu.function(Entry::MsmFromMontgomery)?;
            let mut l = self.gpu.stream().launch_builder(&f);
            l.arg(s.words.slice_mut()).arg(&n);
            // SAFETY: (u32* scalars, u32 n); the buffer holds 8n words.
            unsafe { l.launch(grid(n, SCALAR_BLOCK)) }.map_err(launch_err)?;
        }
        Ok(s)
    }

    /// Adopts Montgomery-form scalars already on the device (4 u64 words each, e.g. the H
    /// polynomial from `gpu-ntt`), converting the first `n` to canonical in place, queued
    /// on this backend's stream after whatever the buffer's stream has queued. No copy.
    pub fn adopt_scalars_montgomery(
        &self,
        words: DeviceBuffer<u64>,
        n: usize,
    ) -> Result<DeviceScalars, GpuMsmError> {
        if words.len() < n * (SCALAR_WORDS / 2) {
            return Err(GpuMsmError::LengthMismatch {
                n_bases: n,
                n_scalars: words.len() / (SCALAR_WORDS / 2),
            });
        }
        let n32 = u32::try_from(n).map_err(|_| GpuMsmError::TooManyTerms {
            n_terms: n,
            max_terms: GPU_MAX_TERMS,
        })?;
        let mut words = words.into_u32_words();
        // The conversion runs on our stream; make it wait for the buffer's own stream.
        let producer = words.slice().stream().clone();
        if !Arc::ptr_eq(&producer, self.gpu.stream()) {
            let ev = producer
                .record_event(None)
                .map_err(driver("cuEventRecord"))?;
            self.gpu
                .stream()
                .wait(&ev)
                .map_err(driver("cuStreamWaitEvent"))?;
        }
        if n > 0 {
            let f = self.gpu.function(Entry::MsmFromMontgomery)?;
            let mut l = self.gpu.stream().launch_builder(&f);
            l.arg(words.slice_mut()).arg(&n32);
            // SAFETY: (u32* scalars, u32 n); the buffer holds at least 8n u32 words.
            unsafe { l.launch(grid(n32, SCALAR_BLOCK)) }.map_err(launch_err)?;
        }
        Ok(DeviceScalars { words, n })
    }

    /// `Σ scalars[i]·bases[i]` (with a density mask: see the crate docs); uploads bases
    /// and scalars for this call only.
    pub fn msm_g1(
        &self,
        bases: &[G1Affine],
        scalars: &[Scalar],
        density: Option<&DensityMask>,
    ) -> Result<G1Projective, GpuMsmError> {
        check_shapes(bases.len(), scalars.len(), density)?;
        if bases.len() > GPU_MAX_TERMS {
            return Err(GpuMsmError::TooManyTerms {
                n_terms: bases.len(),
                max_terms: GPU_MAX_TERMS,
            });
        }
        if bases.is_empty() {
            return Ok(G1Projective::identity());
        }
        let words = match density {
            None => scalars_to_words(scalars),
            Some(mask) => {
                let selected: Vec<Scalar> = scalars
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| mask.get(*i))
                    .map(|(_, s)| *s)
                    .collect();
                scalars_to_words(&selected)
            }
        };
        let d_bases = self.upload_bases_g1(bases)?;
        let d_scalars = self.upload_scalar_words(&words)?;
        self.msm_g1_resident(&d_bases, &d_scalars)
    }

    /// One G1 MSM per scalar vector over the same bases (uploaded once).
    pub fn msm_g1_batch(
        &self,
        bases: &[G1Affine],
        scalar_sets: &[&[Scalar]],
        density: Option<&DensityMask>,
    ) -> Result<Vec<G1Projective>, GpuMsmError> {
        crate::check_batch(bases.len(), scalar_sets, density)?;
        if bases.is_empty() {
            return Ok(vec![G1Projective::identity(); scalar_sets.len()]);
        }
        let d_bases = self.upload_bases_g1(bases)?;
        scalar_sets
            .iter()
            .map(|scalars| {
                let words = match density {
                    None => scalars_to_words(scalars),
                    Some(mask) => {
                        let selected: Vec<Scalar> = scalars
                            .iter()
                            .enumerate()
                            .filter(|(i, _)| mask.get(*i))
                            .map(|(_, s)| *s)
                            .collect();
                        scalars_to_words(&selected)
                    }
                };
                let d_scalars = self.upload_scalar_words(&words)?;
                self.msm_g1_resident(&d_bases, &d_scalars)
            })
            .collect()
    }

    /// `Σ scalars[i]·bases[i]` with both already on the device (the fast path).
    pub fn msm_g1_resident(
        &self,
        bases: &DeviceBasesG1,
        scalars: &DeviceScalars,
    ) -> Result<G1Projective, GpuMsmError> {
        if bases.n != scalars.n {
            return Err(GpuMsmError::LengthMismatch {
                n_bases: bases.n,
                n_scalars: scalars.n,
            });
        }
        let n = bases.n;
        if n > GPU_MAX_TERMS {
            return Err(GpuMsmError::TooManyTerms {
                n_terms: n,
                max_terms: GPU_MAX_TERMS,
            });
        }
        if n == 0 {
            return Ok(G1Projective::identity());
        }
        let plan = self.plan(n);
        let sums = self.window_sums_g1(bases, scalars, &plan, None)?;
        combine_windows(&sums, plan.window_bits)
    }

    /// As [`GpuMsm::msm_g1_resident`], also returning the device time of each phase in
    /// milliseconds (CUDA events between the launches; for benchmarks).
    pub fn msm_g1_resident_profiled(
        &self,
        bases: &DeviceBasesG1,
        scalars: &DeviceScalars,
    ) -> Result<(G1Projective, PhaseTimes), GpuMsmError> {
        if bases.n != scalars.n {
            return Err(GpuMsmError::LengthMismatch {
                n_bases: bases.n,
                n_scalars: scalars.n,
            });
        }
        if bases.n == 0 || bases.n > GPU_MAX_TERMS {
            return Ok((self.msm_g1_resident(bases, scalars)?, Vec::new()));
        }
        let plan = self.plan(bases.n);
        let mut marks = Vec::new();
        let sums = self.window_sums_g1(bases, scalars, &plan, Some(&mut marks))?;
        let mut phases = Vec::new();
        for pair in marks.windows(2) {
            let (_, start): &(&'static str, cudarc::driver::CudaEvent) = &pair[0];
            let (name, end) = &pair[1];
            let ms = start
                .elapsed_ms(end)
                .map_err(driver("cuEventElapsedTime"))?;
            phases.push((*name, ms));
        }
        Ok((combine_windows(&sums, plan.window_bits)?, phases))
    }

    /// Runs the pipeline and returns the W + 1 window sums (affine, the ones window last).
    fn window_sums_g1(
        &self,
        bases: &DeviceBasesG1,
        scalars: &DeviceScalars,
        plan: &GpuMsmPlan,
        mut marks: Option<&mut Vec<(&'static str, cudarc::driver::CudaEvent)>>,
    ) -> Result<Vec<G1Affine>, GpuMsmError> {
        let gpu = &self.gpu;
        let stream = gpu.stream();
        // Records an event after the work queued so far, named after the phase it ends.
        let mut mark = |name: &'static str| -> Result<(), GpuMsmError> {
            if let Some(m) = marks.as_deref_mut() {
                let e = gpu.timing_event()?;
                e.record(stream).map_err(driver("cuEventRecord"))?;
                m.push((name, e));
            }
            Ok(())
        };
        let n = bases.n as u32;
        let c = plan.window_bits;
        let n_windows = plan.n_windows;
        let n_keys = plan.n_keys;
        let n_chunks = n_keys.div_ceil(SCAN_CHUNK);
        let n_entries = (n as usize) * (n_windows as usize);
        let n_groups = n_windows + 1;
        let seg_threads = n_groups * plan.n_segments;
        let g1_len = plan.n_segments.min(32);
        let g2_len = plan.n_segments / g1_len;

        let mut counts = gpu.alloc_zeros::<u32>(n_keys as usize, "gpu-msm counts")?;
        let mut chunk_sums = gpu.alloc_zeros::<u32>(n_chunks as usize, "gpu-msm chunk sums")?;
        let mut offsets = gpu.alloc_zeros::<u32>(n_keys as usize, "gpu-msm offsets")?;
        let mut cursors = gpu.alloc_zeros::<u32>(n_keys as usize, "gpu-msm cursors")?;
        let mut entries = gpu.alloc_zeros::<u32>(n_entries.max(1), "gpu-msm entries")?;
        let mut buckets =
            gpu.alloc_zeros::<u32>(n_keys as usize * G1_XYZZ_WORDS, "gpu-msm buckets")?;
        let mut segs =
            gpu.alloc_zeros::<u32>(seg_threads as usize * G1_XYZZ_WORDS, "gpu-msm segments")?;
        let mut level1 = gpu.alloc_zeros::<u32>(
            (seg_threads / g1_len) as usize * G1_XYZZ_WORDS,
            "gpu-msm level 1",
        )?;
        let mut level2 =
            gpu.alloc_zeros::<u32>(n_groups as usize * G1_XYZZ_WORDS, "gpu-msm window sums")?;
        let mut affine =
            gpu.alloc_zeros::<u32>(n_groups as usize * G1_AFFINE_WORDS, "gpu-msm affine sums")?;

        mark("alloc")?;
        // SAFETY (all launches below): each kernel's parameter list in msm.cu is matched
        // argument by argument (device pointers to u32 words, then u32 values); every buffer
        // was sized above for the plan (counts/offsets/cursors: n_keys; chunk_sums: n_chunks;
        // entries: n·W, the most entries n scalars can produce; buckets: n_keys XYZZ points;
        // segs: (W+1)·n_segments; level1: seg_threads/g1_len; level2 and affine: W+1), and
        // every buffer outlives the stream work (the final download synchronizes).
        let f = gpu.function(Entry::MsmCount)?;
        let mut l = stream.launch_builder(&f);
        l.arg(scalars.words.slice())
            .arg(&n)
            .arg(&c)
            .arg(&n_windows)
            .arg(counts.slice_mut());
        unsafe { l.launch(grid(n, SCALAR_BLOCK)) }.map_err(launch_err)?;

        mark("count")?;
        let f = gpu.function(Entry::MsmChunkSums)?;
        let mut l = stream.launch_builder(&f);
        l.arg(counts.slice())
            .arg(&n_keys)
            .arg(&SCAN_CHUNK)
            .arg(chunk_sums.slice_mut());
        unsafe { l.launch(grid(n_chunks, SCALAR_BLOCK)) }.map_err(launch_err)?;

        let f = gpu.function(Entry::MsmScanChunks)?;
        let mut l = stream.launch_builder(&f);
        l.arg(chunk_sums.slice_mut()).arg(&n_chunks);
        unsafe { l.launch(grid(1, 32)) }.map_err(launch_err)?;

        let f = gpu.function(Entry::MsmScanApply)?;
        let mut l = stream.launch_builder(&f);
        l.arg(counts.slice())
            .arg(&n_keys)
            .arg(&SCAN_CHUNK)
            .arg(chunk_sums.slice())
            .arg(offsets.slice_mut())
            .arg(cursors.slice_mut());
        unsafe { l.launch(grid(n_chunks, SCALAR_BLOCK)) }.map_err(launch_err)?;

        mark("scan")?;
        let f = gpu.function(Entry::MsmScatter)?;
        let mut l = stream.launch_builder(&f);
        l.arg(scalars.words.slice())
            .arg(&n)
            .arg(&c)
            .arg(&n_windows)
            .arg(cursors.slice_mut())
            .arg(entries.slice_mut());
        unsafe { l.launch(grid(n, SCALAR_BLOCK)) }.map_err(launch_err)?;

        mark("scatter")?;
        let f = gpu.function(match self.config.accumulate {
            AccumulateKernel::Uncapped => Entry::G1Accumulate,
            AccumulateKernel::Capped128 => Entry::G1AccumulateCapped,
        })?;
        let mut l = stream.launch_builder(&f);
        l.arg(bases.words.slice())
            .arg(entries.slice())
            .arg(offsets.slice())
            .arg(counts.slice())
            .arg(buckets.slice_mut())
            .arg(&n_keys);
        unsafe { l.launch(grid(n_keys, POINT_BLOCK)) }.map_err(launch_err)?;

        mark("accumulate")?;
        let seg_len = plan.n_buckets / plan.n_segments;
        let f = gpu.function(Entry::G1ReduceSegments)?;
        let mut l = stream.launch_builder(&f);
        l.arg(buckets.slice())
            .arg(&plan.n_buckets)
            .arg(&seg_len)
            .arg(&plan.n_segments)
            .arg(&n_windows)
            .arg(segs.slice_mut())
            .arg(&seg_threads);
        unsafe { l.launch(grid(seg_threads, POINT_BLOCK)) }.map_err(launch_err)?;

        mark("reduce segments")?;
        let level1_n = seg_threads / g1_len;
        let f = gpu.function(Entry::G1SumGroups)?;
        let mut l = stream.launch_builder(&f);
        l.arg(segs.slice())
            .arg(&g1_len)
            .arg(level1.slice_mut())
            .arg(&level1_n);
        unsafe { l.launch(grid(level1_n, POINT_BLOCK)) }.map_err(launch_err)?;

        let mut l = stream.launch_builder(&f);
        l.arg(level1.slice())
            .arg(&g2_len)
            .arg(level2.slice_mut())
            .arg(&n_groups);
        unsafe { l.launch(grid(n_groups, POINT_BLOCK)) }.map_err(launch_err)?;

        mark("sum groups")?;
        let f = gpu.function(Entry::G1ToAffine)?;
        let mut l = stream.launch_builder(&f);
        l.arg(level2.slice()).arg(affine.slice_mut()).arg(&n_groups);
        unsafe { l.launch(grid(n_groups, POINT_BLOCK)) }.map_err(launch_err)?;

        mark("to affine")?;
        let words = gpu.download(&affine)?;
        let reprs: &[G1AffineRepr] = bytemuck::cast_slice(&words);
        reprs
            .iter()
            .enumerate()
            .map(|(index, r)| {
                r.to_affine_unchecked()
                    .map_err(|source| GpuMsmError::BadResult { index, source })
            })
            .collect()
    }
}

/// `Σ_w 2^(c·w)·sums[w]` over the W signed-digit windows, plus the ones window (last).
fn combine_windows(sums: &[G1Affine], c: u32) -> Result<G1Projective, GpuMsmError> {
    let (ones, windows) = sums.split_last().ok_or(GpuMsmError::LengthMismatch {
        n_bases: 1,
        n_scalars: 0,
    })?;
    let mut acc = G1Projective::identity();
    for w in windows.iter().rev() {
        for _ in 0..c {
            acc = acc.double();
        }
        acc += G1Projective::from(w);
    }
    Ok(acc + G1Projective::from(ones))
}

impl From<GpuMsmError> for MsmError {
    /// Shape errors pass through unchanged; device errors become [`MsmError::Gpu`] with
    /// their message (the device error itself is not `Clone`).
    fn from(e: GpuMsmError) -> MsmError {
        match e {
            GpuMsmError::Shape(e) => e,
            GpuMsmError::TooManyTerms { n_terms, max_terms } => {
                MsmError::TooManyTerms { n_terms, max_terms }
            }
            other => MsmError::Gpu {
                backend: "cuda",
                message: other.to_string(),
            },
        }
    }
}

/// The trait view of the CUDA engine: G1 on the GPU (bases uploaded per call; use
/// [`GpuMsm::upload_bases_g1`] and [`GpuMsm::msm_g1_resident`] to keep them resident), **G2
/// on the host** through [`crate::CpuMsm`] (there are no G2 kernels yet), so every method
/// of the trait works and gives the same points as every other backend.
impl crate::MsmBackend for GpuMsm {
    fn name(&self) -> &'static str {
        "cuda (g2 on cpu)"
    }

    fn msm_g1(
        &self,
        bases: &[G1Affine],
        scalars: &[Scalar],
        density: Option<&DensityMask>,
    ) -> Result<G1Projective, MsmError> {
        Ok(GpuMsm::msm_g1(self, bases, scalars, density)?)
    }

    fn msm_g2(
        &self,
        bases: &[G2Affine],
        scalars: &[Scalar],
        density: Option<&DensityMask>,
    ) -> Result<G2Projective, MsmError> {
        crate::CpuMsm::new().msm_g2(bases, scalars, density)
    }

    fn msm_g1_batch(
        &self,
        bases: &[G1Affine],
        scalar_sets: &[&[Scalar]],
        density: Option<&DensityMask>,
    ) -> Result<Vec<G1Projective>, MsmError> {
        Ok(GpuMsm::msm_g1_batch(self, bases, scalar_sets, density)?)
    }

    fn msm_g2_batch(
        &self,
        bases: &[G2Affine],
        scalar_sets: &[&[Scalar]],
        density: Option<&DensityMask>,
    ) -> Result<Vec<G2Projective>, MsmError> {
        crate::CpuMsm::new().msm_g2_batch(bases, scalar_sets, density)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_cover_256_bits_and_fill_segments() {
        for c in GPU_MIN_WINDOW_BITS..=GPU_MAX_WINDOW_BITS {
            let p = GpuMsmPlan::new(c);
            assert!(p.n_windows * c >= 256, "c = {c}");
            assert!((p.n_windows - 1) * c < 256, "c = {c}");
            assert_eq!(p.n_buckets % p.n_segments, 0);
            assert!(p.n_segments.is_power_of_two());
            let g1 = p.n_segments.min(32);
            assert!(p.n_segments / g1 <= 32);
        }
        assert_eq!(GpuMsmPlan::default_window_bits(0), 8);
        assert_eq!(GpuMsmPlan::default_window_bits(1 << 16), 13);
        assert_eq!(GpuMsmPlan::default_window_bits(1 << 24), 16);
        // Every default keeps at least 8 bits of the scalar in the top window.
        for log_n in 0..30 {
            let c = GpuMsmPlan::default_window_bits(1 << log_n);
            let top_bits = 255 - (256u32.div_ceil(c) - 1) * c;
            assert!(top_bits >= 7, "c = {c}: top window has {top_bits} bits");
        }
    }

    #[test]
    fn scalar_words_are_canonical_little_endian() {
        let s = Scalar::from(0x1234_5678_9abc_def0u64);
        let w = scalars_to_words(&[s, -Scalar::one()]);
        assert_eq!(&w[..3], &[0x9abc_def0, 0x1234_5678, 0]);
        let r_minus_1 = bls_repr::FR_MODULUS_U32;
        assert_eq!(w[8], r_minus_1[0] - 1);
        assert_eq!(&w[9..16], &r_minus_1[1..8]);
    }
}
