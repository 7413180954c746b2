//! The CUDA backend: transforms on device buffers of Fr and the H step (kernels in
//! `cuda-kernels/ntt.cu`). All kernel launches of this crate live in this module.
//!
//! Device buffers are `DeviceBuffer<u64>` holding 4 little-endian words per element: the
//! bytes of [`FrRepr`] (Montgomery form, R = 2^256). `FrRepr` itself cannot be a cudarc
//! `DeviceRepr` outside its crate, so the words stand in for it.
//!
//! # Design
//! A transform of 2^L points runs as passes over the array; each pass does up to
//! `tile_log` radix-2 stages on a tile in shared memory (see [`plan_passes`]): 2^27 is
//! four passes of 10, 6, 6 and 5 stages with the default 2^10 tiles. Natural in →
//! bit-reversed out is DIF, bit-reversed in → natural out is DIT; the other two order
//! pairs add an in-place bit-reversal pass. The pass over bits [0, s) runs on kernels of
//! its own that group the butterflies sharing a twiddle in whole warps (the warps of w^0
//! skip the product), and [`GpuNtt::new`] picks the column runs of the other passes by
//! size ([`GpuNttConfig::for_size`]). Twiddles: one table of w^i (i < N/2) for the largest
//! N seen, on the device and charged to the VRAM budget (16·N bytes: 2 GiB at 2^27), read
//! with a stride by every smaller size, so no butterfly computes its twiddle. Coset and 1/n
//! scalings are applied as the first pass loads or the last pass stores (two table reads
//! and two multiplications per element, no extra memory pass).
//!
//! The H step keeps the orders so that only the result is permuted: for a and b, inverse
//! DIF (natural → bit-reversed) storing × g^j/m, then forward DIT (→ natural coset
//! evaluations); for c the inverse DIF alone (its coefficients, bit-reversed: see the
//! crate docs for why c needs no coset transform); the pointwise a·b; inverse DIF; and
//! one gather that writes h = (D·g^-j − C')·z/m in natural order into b's buffer. Six
//! transforms. Input copies run on a second stream so the copy of b overlaps the
//! transforms of a.
//!
//! # Cost model (`examples/gpu_ntt_bench.rs`; H200 2026-11-30 to 12-05, H100 2026-12-06)
//! Forward 2^27 ≈ 40 ms, 2^24 ≈ 4.4–4.7 ms; inverse coset 2^27 ≈ 45–47 ms; H step 2^27
//! ≈ 264 ms from device-resident a, b, c (six transforms; 315 ms with seven, H200) and
//! ≈ 344 ms from pinned host memory (the copies overlapped with compute). A transform does
//! about (n/2)·(log2 n − 2) Fr products, ≈ 1.7e9 at 2^27, i.e. ≈ 33 ms at the 5.0e10
//! mul/s the field kernels reach, so the passes run at about 85% of that rate; memory
//! traffic (four passes of 8 GiB at 2^27) mostly overlaps with it. Nsight Compute finds no
//! resource saturated in a pass (issue slots, the integer pipes and DRAM all well below
//! their peaks: cuda-kernels/NOTES.md).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use bls12_381::Scalar;
use bls_repr::FrRepr;
use cudarc::driver::sys::CUfunction_attribute;
use cudarc::driver::{CudaEvent, CudaStream, DevicePtr, DeviceRepr, LaunchConfig, PushKernelArg};
use ff::Field;
use gpu_device::{DeviceBuffer, Entry, Gpu, GpuError, PinnedBuffer};
use rayon::prelude::*;

use crate::domain::{coset_shift, h_domain_size, log2_len, omega};
use crate::{AbcEvaluations, Direction, Domain, NttError, NttSpec, Order};

/// u64 words per field element.
pub const WORDS_PER_ELEMENT: usize = 4;

/// Threads per block of the elementwise kernels.
const ELEMENTWISE_THREADS: u32 = 256;

/// Most threads per block of a pass (each does several butterflies per stage).
const PASS_THREADS: u32 = 256;

/// Shared memory a block may use without raising the function's limit.
const DEFAULT_SHARED_BYTES: u32 = 48 << 10;

/// Why a GPU transform or H step failed.
#[derive(Debug, thiserror::Error)]
pub enum GpuNttError {
    /// Bad size or mismatched inputs (the same checks as the CPU backend).
    #[error(transparent)]
    Ntt(#[from] NttError),
    /// A CUDA call, the VRAM budget or a device allocation failed.
    #[error("gpu: {0}")]
    Gpu(#[from] GpuError),
    /// A device buffer's length is not a whole number of field elements.
    #[error("{what} holds {words} u64 words, not a multiple of {WORDS_PER_ELEMENT}")]
    NotWholeElements {
        /// Which buffer.
        what: &'static str,
        /// Its length in words.
        words: usize,
    },
    /// A value read back from the device is not a reduced field element.
    #[error("device value at index {index} is not a reduced field element")]
    NotReduced {
        /// Element index.
        index: usize,
    },
}

fn driver(call: &'static str) -> impl FnOnce(cudarc::driver::DriverError) -> GpuNttError {
    move |code| GpuNttError::Gpu(GpuError::Driver { call, code })
}

/// Tuning of the GPU backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuNttConfig {
    /// log2 of the elements per shared-memory tile (32 bytes each); 10 → 32 KiB, 11 → 64 KiB.
    pub tile_log: u32,
    /// log2 of the consecutive columns a tile holds in passes above bit 0 (runs of
    /// `32 << clog` bytes in global memory).
    pub max_clog: u32,
}

impl Default for GpuNttConfig {
    fn default() -> Self {
        // Measured on the H200 (docs/benchmarks.md, 2026-11-30): 2^10 tiles (32 KiB) with
        // 4-column runs are as fast as 2^11 tiles at 2^24..2^27 and 4-6% faster at
        // 2^20..2^22, where twice the blocks leave fewer SMs idle in the last wave.
        Self {
            tile_log: 10,
            max_clog: 2,
        }
    }
}

impl GpuNttConfig {
    /// The tuning [`GpuNtt::new`] uses for a 2^`log_n` transform: the default, with
    /// 2-column runs at 2^24 and single columns at 2^26, each measured faster there on the
    /// H200 in two sessions' sweeps beside the default (docs/benchmarks.md, "Session 27":
    /// 2^24 4.52 against 4.69 ms, 2^26 19.79 against 19.97 ms; 4.54 / 4.72 and 19.92 /
    /// 20.10 in session 26). Sizes not measured keep the default.
    pub fn for_size(log_n: u32) -> Self {
        let max_clog = match log_n {
            24 => 1,
            26 => 0,
            _ => Self::default().max_clog,
        };
        Self {
            max_clog,
            ..Self::default()
        }
    }
}

/// One pass: stages over index bits `[lo, lo + s)`, tiles of `2^s` rows by `2^clog` columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pass {
    /// Lowest index bit the pass's stages touch.
    pub lo: u32,
    /// Number of stages (bits).
    pub s: u32,
    /// log2 of the columns per tile.
    pub clog: u32,
}

/// The passes of a 2^`log_n` transform, lowest bits first (DIT order; DIF runs them in
/// reverse). Bit 0's pass takes as many stages as a tile holds; the remaining bits are
/// split evenly among the fewest passes whose tiles (with their columns) fit.
pub fn plan_passes(log_n: u32, config: GpuNttConfig) -> Vec<Pass> {
    let tile_log = config.tile_log.max(1);
    let mut passes = Vec::new();
    if log_n == 0 {
        return passes;
    }
    let s0 = log_n.min(tile_log);
    passes.push(Pass {
        lo: 0,
        s: s0,
        clog: 0,
    });
    let rest = log_n - s0;
    if rest == 0 {
        return passes;
    }
    let clog = config.max_clog.min(s0).min(tile_log - 1);
    let per = tile_log - clog;
    let n_pass = rest.div_ceil(per);
    let mut lo = s0;
    for i in 0..n_pass {
        // Earlier passes take the remainder so sizes differ by at most one.
        let s = rest / n_pass + u32::from(i < rest % n_pass);
        passes.push(Pass { lo, s, clog });
        lo += s;
    }
    passes
}

/// Powers of a base on the device as two tables (`base^j = lo[j & lo_mask] ·
/// hi[(j >> lo_bits) & hi_mask]`, a constant factor folded into `lo`).
struct PowerTable {
    lo: DeviceBuffer<u64>,
    hi: DeviceBuffer<u64>,
    lo_bits: u32,
    lo_mask: u32,
    hi_mask: u32,
}

/// A scaling fused into a pass: position p is multiplied by `factor · base^j`, j the
/// logical index at p in `order`.
#[derive(Clone, Copy, Debug)]
struct Fused {
    base: Scalar,
    factor: Scalar,
    order: Order,
}

/// Kernel argument; the layout of `ScaleArgs` in `cuda-kernels/include/ntt.cuh`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct ScaleArgs {
    lo: u64,
    hi: u64,
    lo_bits: u32,
    lo_mask: u32,
    hi_mask: u32,
    mode: u32,
    log_n: u32,
    pad: u32,
}

// SAFETY: plain data (integers only, no padding: 2·8 + 6·4 = 40 bytes, 8-aligned), laid
// out exactly as the CUDA struct it is passed to by value (#[repr(C)], same order and
// widths: two 64-bit pointers then six 32-bit words).
unsafe impl DeviceRepr for ScaleArgs {}

struct Twiddles {
    log: u32,
    table: DeviceBuffer<u64>,
}

type PowerKey = (u32, [u64; 4], [u64; 4]);

/// The CUDA NTT backend for one device. Keeps its twiddle table and small power tables
/// (all charged to the device's VRAM budget) for its life. `Send + Sync`.
pub struct GpuNtt {
    gpu: Gpu,
    config: GpuNttConfig,
    /// Tuned for each size ([`GpuNttConfig::for_size`]) instead of `config` everywhere.
    per_size: bool,
    twiddles: Mutex<Option<Arc<Twiddles>>>,
    powers: Mutex<HashMap<PowerKey, Arc<PowerTable>>>,
    shared_raised: Mutex<bool>,
    copy_stream: Mutex<Option<Arc<CudaStream>>>,
}

impl std::fmt::Debug for GpuNtt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuNtt")
            .field("gpu", &self.gpu)
            .field("config", &self.config)
            .field("per_size", &self.per_size)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Entries are inserted whole, so a poisoned map is still consistent.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn to_words(v: &[FrRepr]) -> &[u64] {
    bytemuck::cast_slice(v)
}

fn reprs(v: &[Scalar]) -> Vec<FrRepr> {
    v.par_iter().map(FrRepr::from_scalar).collect()
}

fn invert_nonzero(x: Scalar) -> Scalar {
    // Callers pass n (a power of two below r), g or g^m − 1, all nonzero.
    Option::from(x.invert()).unwrap_or(Scalar::ZERO)
}

fn n_elements(buf: &DeviceBuffer<u64>, what: &'static str) -> Result<usize, GpuNttError> {
    if buf.len() % WORDS_PER_ELEMENT != 0 {
        return Err(GpuNttError::NotWholeElements {
            what,
            words: buf.len(),
        });
    }
    Ok(buf.len() / WORDS_PER_ELEMENT)
}

/// h on the device: the buffer holds the padded domain size m elements; the first
/// `n_coeffs` are the H MSM's scalars: m − 1 coefficients of h (bellman's H step), or m
/// coset evaluations (snarkjs's, [`GpuNtt::h_coset_evaluations_device`]).
#[derive(Debug)]
pub struct HPolyDevice {
    /// m elements (4 words each), natural order.
    pub coeffs: DeviceBuffer<u64>,
    /// Number of meaningful values: m − 1 coefficients, or m coset evaluations.
    pub n_coeffs: usize,
    /// Recorded on the backend's copy stream right after the last copy of a, b, c: once
    /// it has completed, pinned host inputs may be reused or freed. Pageable host inputs
    /// are free as soon as the call returns (the driver stages them before returning);
    /// device inputs were consumed.
    pub inputs_uploaded: CudaEvent,
}

/// Where the H step's inputs are: one value per constraint each, not yet padded.
// Built once per proof and moved into the call: the size difference costs nothing.
#[allow(clippy::large_enum_variant)]
pub enum AbcSource<'a> {
    /// Ordinary host memory (copies are synchronous: free once the call returns).
    Host {
        /// A evaluations.
        a: &'a [FrRepr],
        /// B evaluations.
        b: &'a [FrRepr],
        /// C evaluations.
        c: &'a [FrRepr],
    },
    /// Pinned host memory, 4 words per element (copies are asynchronous: wait for
    /// [`HPolyDevice::inputs_uploaded`] before reusing the buffers).
    Pinned {
        /// A evaluations.
        a: &'a PinnedBuffer<u64>,
        /// B evaluations.
        b: &'a PinnedBuffer<u64>,
        /// C evaluations.
        c: &'a PinnedBuffer<u64>,
    },
    /// Already on this device (consumed; padded in place when already m long).
    Device {
        /// A evaluations.
        a: DeviceBuffer<u64>,
        /// B evaluations.
        b: DeviceBuffer<u64>,
        /// C evaluations.
        c: DeviceBuffer<u64>,
    },
}

impl GpuNtt {
    /// A backend on `gpu` tuned for each size ([`GpuNttConfig::for_size`]).
    pub fn new(gpu: Gpu) -> Self {
        Self {
            per_size: true,
            ..Self::with_config(gpu, GpuNttConfig::default())
        }
    }

    /// A backend with explicit tuning for every size (`tile_log` clamped to 1..=11,
    /// `max_clog` to `tile_log - 1`).
    pub fn with_config(gpu: Gpu, config: GpuNttConfig) -> Self {
        let tile_log = config.tile_log.clamp(1, 11);
        let config = GpuNttConfig {
            tile_log,
            max_clog: config.max_clog.min(tile_log - 1),
        };
        Self {
            gpu,
            config,
            per_size: false,
            twiddles: Mutex::new(None),
            powers: Mutex::new(HashMap::new()),
            shared_raised: Mutex::new(false),
            copy_stream: Mutex::new(None),
        }
    }

    /// The device.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// The tuning in use (the default's for a backend tuned for each size: its tile size
    /// is the one every size uses).
    pub fn config(&self) -> GpuNttConfig {
        self.config
    }

    /// The tuning a 2^`log_n` transform runs with.
    pub fn config_for(&self, log_n: u32) -> GpuNttConfig {
        if self.per_size {
            GpuNttConfig::for_size(log_n)
        } else {
            self.config
        }
    }

    /// Bytes of VRAM the twiddle table holds now (32 · N/2 for the largest N seen).
    pub fn twiddle_bytes(&self) -> u64 {
        lock(&self.twiddles)
            .as_ref()
            .map_or(0, |t| t.table.reserved_bytes())
    }

    /// Builds (or keeps) the twiddle table for transforms up to 2^`log_n` points.
    pub fn prepare(&self, log_n: u32, stream: &Arc<CudaStream>) -> Result<(), GpuNttError> {
        self.twiddles(log_n, stream).map(|_| ())
    }

    fn twiddles(&self, log_n: u32, stream: &Arc<CudaStream>) -> Result<Arc<Twiddles>, GpuNttError> {
        let mut slot = lock(&self.twiddles);
        if let Some(t) = slot.as_ref() {
            if t.log >= log_n {
                return Ok(t.clone());
            }
        }
        // Drop the smaller table first so both are never charged at once.
        *slot = None;
        let log = log_n.max(1);
        let count = 1usize << (log - 1);
        let w = omega(log);
        let lo_bits = (log - 1) / 2;
        let powers = |step: Scalar, len: usize| -> Vec<FrRepr> {
            let mut x = Scalar::ONE;
            (0..len)
                .map(|_| {
                    let r = FrRepr::from_scalar(&x);
                    x *= step;
                    r
                })
                .collect()
        };
        let lo = powers(w, 1 << lo_bits);
        let hi = powers(
            w.pow_vartime(&[1u64 << lo_bits, 0, 0, 0]),
            1 << (log - 1 - lo_bits),
        );
        let lo = self.gpu.upload(to_words(&lo), "ntt twiddle seed lo")?;
        let hi = self.gpu.upload(to_words(&hi), "ntt twiddle seed hi")?;
        let mut table = self
            .gpu
            .alloc_zeros::<u64>(count * WORDS_PER_ELEMENT, "ntt twiddles")?;
        let f = self.gpu.function(Entry::NttTwiddles)?;
        let count_u32 = count as u32;
        let mut launch = stream.launch_builder(&f);
        launch
            .arg(table.slice_mut())
            .arg(lo.slice())
            .arg(hi.slice())
            .arg(&lo_bits)
            .arg(&count_u32);
        // SAFETY: ntt_twiddles(Fr*, const Fr*, const Fr*, u32, u32): table holds `count`
        // elements, lo 2^lo_bits and hi count >> lo_bits, so every index i < count reads
        // lo[i & mask] and hi[i >> lo_bits] in bounds. cudarc orders the launch after the
        // uploads and keeps lo/hi alive until it completes.
        unsafe { launch.launch(elementwise_config(count_u32)) }
            .map_err(driver("cuLaunchKernel"))?;
        let t = Arc::new(Twiddles { log, table });
        *slot = Some(t.clone());
        Ok(t)
    }

    /// `factor · base^j` tables for transforms of 2^`log_n` points (cached).
    fn power_table(
        &self,
        log_n: u32,
        base: Scalar,
        factor: Scalar,
    ) -> Result<Arc<PowerTable>, GpuNttError> {
        let key = (
            log_n,
            FrRepr::from_scalar(&base).limbs,
            FrRepr::from_scalar(&factor).limbs,
        );
        if let Some(t) = lock(&self.powers).get(&key) {
            return Ok(t.clone());
        }
        let (lo_bits, lo_n, hi_n) = if base == Scalar::ONE {
            (0, 1, 1)
        } else {
            let lo_bits = log_n / 2;
            (lo_bits, 1usize << lo_bits, 1usize << (log_n - lo_bits))
        };
        let table = |start: Scalar, step: Scalar, len: usize| -> Vec<FrRepr> {
            let mut x = start;
            (0..len)
                .map(|_| {
                    let r = FrRepr::from_scalar(&x);
                    x *= step;
                    r
                })
                .collect()
        };
        let lo = table(factor, base, lo_n);
        let hi = table(
            Scalar::ONE,
            base.pow_vartime(&[1u64 << lo_bits, 0, 0, 0]),
            hi_n,
        );
        let t = Arc::new(PowerTable {
            lo: self.gpu.upload(to_words(&lo), "ntt power table lo")?,
            hi: self.gpu.upload(to_words(&hi), "ntt power table hi")?,
            lo_bits,
            lo_mask: (lo_n - 1) as u32,
            hi_mask: (hi_n - 1) as u32,
        });
        lock(&self.powers).insert(key, t.clone());
        Ok(t)
    }

    /// The stream the H step's input copies run on (created on first use), so that one
    /// vector's copy overlaps the previous vector's transforms.
    fn copy_stream(&self) -> Result<Arc<CudaStream>, GpuNttError> {
        let mut slot = lock(&self.copy_stream);
        if let Some(s) = slot.as_ref() {
            return Ok(s.clone());
        }
        let s = self.gpu.new_stream()?;
        *slot = Some(s.clone());
        Ok(s)
    }

    fn raise_shared_limit(&self) -> Result<(), GpuNttError> {
        let shared = 32u32 << self.config.tile_log;
        let mut raised = lock(&self.shared_raised);
        if *raised || shared <= DEFAULT_SHARED_BYTES {
            return Ok(());
        }
        for entry in [
            Entry::NttPassDif,
            Entry::NttPassDit,
            Entry::NttPassDifBit0,
            Entry::NttPassDitBit0,
        ] {
            self.gpu
                .function(entry)?
                .set_attribute(
                    CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    shared as i32,
                )
                .map_err(driver("cuFuncSetAttribute"))?;
        }
        *raised = true;
        Ok(())
    }

    /// Kernel arguments for a fused scaling (mode 0 when `None`).
    fn scale_args(
        &self,
        log_n: u32,
        fused: Option<Fused>,
        stream: &Arc<CudaStream>,
    ) -> Result<ScaleArgs, GpuNttError> {
        let Some(f) = fused else {
            return Ok(ScaleArgs::default());
        };
        let t = self.power_table(log_n, f.base, f.factor)?;
        // device_ptr makes `stream` wait for the tables' upload. The tables stay in the
        // backend's cache (never freed or written while it lives), so the raw pointers
        // outlive every launch that uses them.
        let (lo, _lo_read) = t.lo.slice().device_ptr(stream);
        let (hi, _hi_read) = t.hi.slice().device_ptr(stream);
        Ok(ScaleArgs {
            lo,
            hi,
            lo_bits: t.lo_bits,
            lo_mask: t.lo_mask,
            hi_mask: t.hi_mask,
            mode: if f.order == Order::BitReversed { 2 } else { 1 },
            log_n,
            pad: 0,
        })
    }

    /// All stages of a transform: DIF (natural → bit-reversed) or DIT (bit-reversed →
    /// natural); `inverse` selects w^-1. `pre` scales the input as the first pass loads
    /// it and `post` the output as the last pass stores it (orders as seen by those
    /// passes), saving separate scaling passes.
    #[allow(clippy::too_many_arguments)]
    fn stages(
        &self,
        data: &mut DeviceBuffer<u64>,
        log_n: u32,
        dif: bool,
        inverse: bool,
        pre: Option<Fused>,
        post: Option<Fused>,
        stream: &Arc<CudaStream>,
    ) -> Result<(), GpuNttError> {
        if log_n == 0 {
            for f in [pre, post].into_iter().flatten() {
                self.scale(data, 0, f.base, f.factor, f.order, stream)?;
            }
            return Ok(());
        }
        let tw = self.twiddles(log_n, stream)?;
        self.raise_shared_limit()?;
        let (f, f_bit0) = if dif {
            (Entry::NttPassDif, Entry::NttPassDifBit0)
        } else {
            (Entry::NttPassDit, Entry::NttPassDitBit0)
        };
        let (f, f_bit0) = (self.gpu.function(f)?, self.gpu.function(f_bit0)?);
        let mut passes = plan_passes(log_n, self.config_for(log_n));
        if dif {
            passes.reverse();
        }
        let inverse = u32::from(inverse);
        let pre = self.scale_args(log_n, pre, stream)?;
        let post = self.scale_args(log_n, post, stream)?;
        let none = ScaleArgs::default();
        let n_pass = passes.len();
        for (i, p) in passes.into_iter().enumerate() {
            let tile = p.s + p.clog;
            let n_bfly = 1u32 << (tile - 1);
            let cfg = LaunchConfig {
                grid_dim: (1u32 << (log_n - tile), 1, 1),
                block_dim: (n_bfly.min(PASS_THREADS), 1, 1),
                shared_mem_bytes: 32 << tile,
            };
            let pre_i = if i == 0 { &pre } else { &none };
            let post_i = if i + 1 == n_pass { &post } else { &none };
            // The pass over bits [0, s) (one column) has kernels of its own.
            let mut launch = stream.launch_builder(if p.lo == 0 && p.clog == 0 {
                &f_bit0
            } else {
                &f
            });
            launch
                .arg(data.slice_mut())
                .arg(tw.table.slice())
                .arg(&tw.log)
                .arg(&p.lo)
                .arg(&p.s)
                .arg(&p.clog)
                .arg(&inverse)
                .arg(pre_i)
                .arg(post_i);
            // SAFETY: ntt_pass_*(Fr*, const Fr*, u32 tw_log, u32 lo, u32 s, u32 clog,
            // u32 inverse, ScaleArgs pre, ScaleArgs post) (the *_bit0 kernels only with lo = 0
            // and clog = 0): data holds 2^log_n elements and the grid has one block per
            // 2^(s+clog)-element tile, so every index is below 2^log_n; the table holds
            // 2^(tw_log-1) ≥ 2^(log_n-1) twiddles and the kernel reads indices below that;
            // the dynamic shared memory is exactly the tile (32 bytes per element) and its
            // limit was raised above 48 KiB when needed; the scale tables (see
            // `scale_args`) are read only through masked indices.
            unsafe { launch.launch(cfg) }.map_err(driver("cuLaunchKernel"))?;
        }
        Ok(())
    }

    /// `data[p] *= factor · base^j`, j the logical index at position p.
    fn scale(
        &self,
        data: &mut DeviceBuffer<u64>,
        log_n: u32,
        base: Scalar,
        factor: Scalar,
        order: Order,
        stream: &Arc<CudaStream>,
    ) -> Result<(), GpuNttError> {
        if log_n == 0 {
            // One element: only the factor applies (base^0 = 1).
            let bitrev = 0u32;
            return self.scale_raw(data, 0, base, factor, bitrev, stream);
        }
        let bitrev = u32::from(order == Order::BitReversed);
        self.scale_raw(data, log_n, base, factor, bitrev, stream)
    }

    fn scale_raw(
        &self,
        data: &mut DeviceBuffer<u64>,
        log_n: u32,
        base: Scalar,
        factor: Scalar,
        bitrev: u32,
        stream: &Arc<CudaStream>,
    ) -> Result<(), GpuNttError> {
        let t = self.power_table(log_n, base, factor)?;
        let n = 1u32 << log_n;
        let f = self.gpu.function(Entry::NttScale)?;
        let mut launch = stream.launch_builder(&f);
        launch
            .arg(data.slice_mut())
            .arg(t.lo.slice())
            .arg(t.hi.slice())
            .arg(&t.lo_bits)
            .arg(&t.lo_mask)
            .arg(&t.hi_mask)
            .arg(&log_n)
            .arg(&bitrev);
        launch.arg(&n);
        // SAFETY: ntt_scale(Fr*, const Fr*, const Fr*, u32 x6): data holds n = 2^log_n
        // elements; the tables hold lo_mask + 1 and hi_mask + 1 elements and every read is
        // masked into them; bitrev is only set for log_n ≥ 1.
        unsafe { launch.launch(elementwise_config(n)) }.map_err(driver("cuLaunchKernel"))?;
        Ok(())
    }

    fn bitrev(
        &self,
        data: &mut DeviceBuffer<u64>,
        log_n: u32,
        stream: &Arc<CudaStream>,
    ) -> Result<(), GpuNttError> {
        if log_n == 0 {
            return Ok(());
        }
        let n = 1u32 << log_n;
        let f = self.gpu.function(Entry::NttBitrev)?;
        let mut launch = stream.launch_builder(&f);
        launch.arg(data.slice_mut()).arg(&log_n).arg(&n);
        // SAFETY: ntt_bitrev(Fr*, u32, u32): data holds n = 2^log_n ≥ 2 elements and
        // bit reversal maps [0, n) onto itself; each pair is swapped by one thread.
        unsafe { launch.launch(elementwise_config(n)) }.map_err(driver("cuLaunchKernel"))?;
        Ok(())
    }

    /// Transforms a device buffer of 2^k elements in place, queued on `stream`.
    pub fn transform_device(
        &self,
        data: &mut DeviceBuffer<u64>,
        spec: NttSpec,
        stream: &Arc<CudaStream>,
    ) -> Result<(), GpuNttError> {
        let n = n_elements(data, "transform buffer")?;
        let log_n = log2_len(n)?;
        if log_n == 0 {
            return Ok(()); // every transform of one element is the identity
        }
        let inverse = spec.direction == Direction::Inverse;
        let shift = match spec.domain {
            Domain::Subgroup => Scalar::ONE,
            Domain::Coset => coset_shift(),
        };
        let flip = |o: Order| match o {
            Order::Natural => Order::BitReversed,
            Order::BitReversed => Order::Natural,
        };
        // Natural → natural and bit-reversed → bit-reversed permute first; the first
        // pass then sees the input in the other order.
        let (dif, permute) = match (spec.input, spec.output) {
            (Order::Natural, Order::BitReversed) => (true, false),
            (Order::BitReversed, Order::Natural) => (false, false),
            (Order::Natural, Order::Natural) => (false, true),
            (Order::BitReversed, Order::BitReversed) => (true, true),
        };
        let pre = (!inverse && spec.domain == Domain::Coset).then(|| Fused {
            base: shift,
            factor: Scalar::ONE,
            order: if permute {
                flip(spec.input)
            } else {
                spec.input
            },
        });
        let post = inverse.then(|| Fused {
            base: invert_nonzero(shift),
            factor: invert_nonzero(Scalar::from(n as u64)),
            order: spec.output,
        });
        if permute {
            self.bitrev(data, log_n, stream)?;
        }
        self.stages(data, log_n, dif, inverse, pre, post, stream)
    }

    /// Uploads `data`, transforms it on the device's stream and copies it back.
    pub fn transform(&self, data: &mut [Scalar], spec: NttSpec) -> Result<(), GpuNttError> {
        log2_len(data.len())?;
        let stream = self.gpu.stream().clone();
        let mut buf = self.gpu.upload(to_words(&reprs(data)), "ntt transform")?;
        self.transform_device(&mut buf, spec, &stream)?;
        let out = download_reprs(&self.gpu, &buf)?;
        data.copy_from_slice(&reprs_to_scalars(&out)?);
        Ok(())
    }

    /// h = (a·b − c)/Z on the coset, as coefficients, on the device (see the crate docs
    /// for the exact map; equal to [`crate::CpuNtt`]'s and bellman's). Queued on `stream`;
    /// the result's buffer is ready when the stream reaches it.
    ///
    /// The copies of a, b and c run on a second stream of this backend; each vector's
    /// three passes (inverse, coset scaling, forward) wait only for its own copy, so the
    /// copy of b overlaps the transforms of a, and so on.
    ///
    /// Peak VRAM: 3 m elements for a, b, c (the result reuses b's buffer), plus the
    /// twiddle table (16 m bytes the first time) and small power tables.
    pub fn h_poly_device(
        &self,
        abc: AbcSource<'_>,
        stream: &Arc<CudaStream>,
    ) -> Result<HPolyDevice, GpuNttError> {
        self.h_device(abc, HTarget::Coefficients, stream)
    }

    /// snarkjs's H step on the device (see `NttBackend::h_coset_evaluations`): the m
    /// values of a·b − c on the coset `shift·⟨ω⟩`, natural order, in the result's buffer
    /// (`n_coeffs` = m). The same copies and passes as [`GpuNtt::h_poly_device`] up to
    /// the pointwise step, which multiplies by 1 instead of 1/Z; no inverse transform.
    pub fn h_coset_evaluations_device(
        &self,
        abc: AbcSource<'_>,
        shift: Scalar,
        stream: &Arc<CudaStream>,
    ) -> Result<HPolyDevice, GpuNttError> {
        self.h_device(abc, HTarget::CosetEvaluations(shift), stream)
    }

    fn h_device(
        &self,
        abc: AbcSource<'_>,
        target: HTarget,
        stream: &Arc<CudaStream>,
    ) -> Result<HPolyDevice, GpuNttError> {
        let (n, lens) = match &abc {
            AbcSource::Host { a, b, c } => (a.len(), [a.len(), b.len(), c.len()]),
            AbcSource::Pinned { a, b, c } => (
                a.len() / WORDS_PER_ELEMENT,
                [a.len(), b.len(), c.len()].map(|w| w / WORDS_PER_ELEMENT),
            ),
            AbcSource::Device { a, b, c } => (
                n_elements(a, "a")?,
                [
                    n_elements(a, "a")?,
                    n_elements(b, "b")?,
                    n_elements(c, "c")?,
                ],
            ),
        };
        if let AbcSource::Pinned { a, b, c } = &abc {
            for (what, p) in [("a", a), ("b", b), ("c", c)] {
                if p.len() % WORDS_PER_ELEMENT != 0 {
                    return Err(GpuNttError::NotWholeElements {
                        what,
                        words: p.len(),
                    });
                }
            }
        }
        for (name, len) in [("b", lens[1]), ("c", lens[2])] {
            if len != n {
                return Err(NttError::LengthMismatch {
                    name,
                    expected: n,
                    found: len,
                }
                .into());
            }
        }
        let m = h_domain_size(n)?;
        let log_m = m.trailing_zeros();
        let words = n * WORDS_PER_ELEMENT;
        // Where each vector comes from, and its padded device buffer. All buffers are
        // allocated (and zero-filled, on the device's stream) before anything is queued,
        // so no copy waits behind a transform.
        enum Src<'s> {
            Host(&'s [FrRepr]),
            Pinned(&'s PinnedBuffer<u64>),
            Device(Option<DeviceBuffer<u64>>),
            Ready,
        }
        let sources = match abc {
            AbcSource::Host { a, b, c } => [Src::Host(a), Src::Host(b), Src::Host(c)],
            AbcSource::Pinned { a, b, c } => [Src::Pinned(a), Src::Pinned(b), Src::Pinned(c)],
            AbcSource::Device { a, b, c } => [a, b, c].map(|v| Src::Device(Some(v))),
        };
        let m_words = m * WORDS_PER_ELEMENT;
        let [sa, sb, sc] = sources;
        let mut staged = [("h a", sa), ("h b", sb), ("h c", sc)].try_map_each(
            |(label, src)| -> Result<_, GpuNttError> {
                Ok(match src {
                    Src::Device(Some(v)) if v.len() == m_words => (v, Src::Ready),
                    src => (self.gpu.alloc_zeros::<u64>(m_words, label)?, src),
                })
            },
        )?;
        let copy_stream = self.copy_stream()?;
        let g = match target {
            HTarget::Coefficients => coset_shift(),
            HTarget::CosetEvaluations(shift) => shift,
        };
        let m_inv = invert_nonzero(Scalar::from(m as u64));
        let coefficients = target == HTarget::Coefficients;
        for (i, (buf, src)) in staged.iter_mut().enumerate() {
            {
                let mut view = buf.slice_mut().slice_mut(0..words);
                match src {
                    Src::Host(h) => copy_stream.memcpy_htod(to_words(h), &mut view),
                    Src::Pinned(p) => copy_stream.memcpy_htod(p.host_slice(), &mut view),
                    Src::Device(Some(d)) => {
                        copy_stream.memcpy_dtod(&d.slice().slice(0..words), &mut view)
                    }
                    Src::Device(None) | Src::Ready => Ok(()),
                }
                .map_err(driver("cuMemcpyAsync"))?;
            }
            // This vector's transforms wait for its own copy only: the next copy overlaps
            // them.
            let copied = copy_stream
                .record_event(None)
                .map_err(driver("cuEventRecord"))?;
            stream.wait(&copied).map_err(driver("cuStreamWaitEvent"))?;
            if m > 1 && coefficients && i == 2 {
                // c's coefficients are all h needs of c (see below): evaluations →
                // m·coefficients, bit-reversed, like the product's inverse transform.
                self.stages(buf, log_m, true, true, None, None, stream)?;
            } else if m > 1 {
                // Evaluations → m·coefficients (bit-reversed); × g^j/m; → coset evaluations
                // in natural order. No permutation pass.
                let to_coset = Fused {
                    base: g,
                    factor: m_inv,
                    order: Order::BitReversed,
                };
                self.stages(buf, log_m, true, true, None, Some(to_coset), stream)?;
                self.stages(buf, log_m, false, false, None, None, stream)?;
            }
        }
        let inputs_uploaded = copy_stream
            .record_event(None)
            .map_err(driver("cuEventRecord"))?;
        let [(mut a, _), (mut b, _), (c, _)] = staged;
        if m == 1 && target == HTarget::Coefficients {
            // No constraint rows beyond padding: h has no coefficients.
            return Ok(HPolyDevice {
                coeffs: b,
                n_coeffs: 0,
                inputs_uploaded,
            });
        }
        let m_u32 = m as u32;
        if let HTarget::CosetEvaluations(_) = target {
            // snarkjs's values: a·b − c on the coset, nothing divided.
            let one = self
                .gpu
                .upload(to_words(&[FrRepr::from_scalar(&Scalar::ONE)]), "h scale")?;
            {
                let f = self.gpu.function(Entry::NttAbc)?;
                let mut launch = stream.launch_builder(&f);
                launch
                    .arg(a.slice_mut())
                    .arg(b.slice())
                    .arg(c.slice())
                    .arg(one.slice())
                    .arg(&m_u32);
                // SAFETY: ntt_abc(Fr*, const Fr*, const Fr*, const Fr*, u32): a, b, c hold
                // m elements each, `one` one; a is distinct from b and c.
                unsafe { launch.launch(elementwise_config(m_u32)) }
                    .map_err(driver("cuLaunchKernel"))?;
            }
            drop((b, c));
            return Ok(HPolyDevice {
                coeffs: a,
                n_coeffs: m,
                inputs_uploaded,
            });
        }
        // h = (icoset(A·B on the coset) − C) / (g^m − 1): c's coset transform is not
        // needed, because C has degree < m, so the inverse coset transform of its coset
        // values is its coefficients, which c's inverse transform already gave. The same
        // field elements as bellman's seven-transform map, from six transforms.
        // With D = inverse(A·B) and C' = inverse(c) (both unnormalised, bit-reversed):
        // h_j = D_j · g^-j·z/m − C'_j · z/m, z = 1/(g^m − 1).
        let z_inv = invert_nonzero(g.pow_vartime(&[m as u64, 0, 0, 0]) - Scalar::ONE);
        let k = z_inv * m_inv;
        let k_dev = self
            .gpu
            .upload(to_words(&[FrRepr::from_scalar(&k)]), "h z_inv/m")?;
        {
            let f = self.gpu.function(Entry::NttAb)?;
            let mut launch = stream.launch_builder(&f);
            launch.arg(a.slice_mut()).arg(b.slice()).arg(&m_u32);
            // SAFETY: ntt_ab(Fr*, const Fr*, u32): a and b hold m elements each and are
            // distinct buffers.
            unsafe { launch.launch(elementwise_config(m_u32)) }
                .map_err(driver("cuLaunchKernel"))?;
        }
        self.stages(&mut a, log_m, true, true, None, None, stream)?;
        // D × g^-j·z/m − C' × z/m, gathered into natural order in b.
        let t = self.power_table(log_m, invert_nonzero(g), k)?;
        {
            let f = self.gpu.function(Entry::NttBitrevScaleSub)?;
            let mut launch = stream.launch_builder(&f);
            launch
                .arg(b.slice_mut())
                .arg(a.slice())
                .arg(c.slice())
                .arg(k_dev.slice())
                .arg(t.lo.slice())
                .arg(t.hi.slice())
                .arg(&t.lo_bits)
                .arg(&t.lo_mask)
                .arg(&t.hi_mask)
                .arg(&log_m)
                .arg(&m_u32);
            // SAFETY: ntt_bitrev_scale_sub(Fr* out, const Fr* in, const Fr* sub,
            // const Fr* k, const Fr*, const Fr*, u32 x5): out (b), in (a) and sub (c) are
            // distinct buffers of m = 2^log_m elements, log_m ≥ 1; k holds one element;
            // table reads are masked into their lengths.
            unsafe { launch.launch(elementwise_config(m_u32)) }
                .map_err(driver("cuLaunchKernel"))?;
        }
        drop((a, c));
        Ok(HPolyDevice {
            coeffs: b,
            n_coeffs: m - 1,
            inputs_uploaded,
        })
    }

    /// [`GpuNtt::h_coset_evaluations_device`] from host values (m values come back).
    pub fn h_coset_evaluations(
        &self,
        abc: AbcEvaluations,
        shift: Scalar,
    ) -> Result<Vec<Scalar>, GpuNttError> {
        let (a, b, c) = (reprs(&abc.a), reprs(&abc.b), reprs(&abc.c));
        drop(abc);
        let stream = self.gpu.stream().clone();
        let h = self.h_coset_evaluations_device(
            AbcSource::Host {
                a: &a,
                b: &b,
                c: &c,
            },
            shift,
            &stream,
        )?;
        let out = download_reprs(&self.gpu, &h.coeffs)?;
        reprs_to_scalars(&out[..h.n_coeffs])
    }

    /// The H step from host values: uploads, runs [`GpuNtt::h_poly_device`] on the
    /// device's stream and copies h back (m − 1 coefficients).
    pub fn h_poly(&self, abc: AbcEvaluations) -> Result<Vec<Scalar>, GpuNttError> {
        let (a, b, c) = (reprs(&abc.a), reprs(&abc.b), reprs(&abc.c));
        drop(abc);
        let stream = self.gpu.stream().clone();
        let h = self.h_poly_device(
            AbcSource::Host {
                a: &a,
                b: &b,
                c: &c,
            },
            &stream,
        )?;
        let out = download_reprs(&self.gpu, &h.coeffs)?;
        reprs_to_scalars(&out[..h.n_coeffs])
    }
}

impl From<GpuNttError> for NttError {
    /// Size errors pass through unchanged; device errors become [`NttError::Gpu`] with
    /// their message (the device error itself is not `Clone`).
    fn from(e: GpuNttError) -> NttError {
        match e {
            GpuNttError::Ntt(e) => e,
            other => NttError::Gpu {
                backend: "cuda",
                message: other.to_string(),
            },
        }
    }
}

/// The trait view of the CUDA backend: each call uploads, computes on the device's stream
/// and copies back (see [`GpuNtt::transform`] and [`GpuNtt::h_poly`]).
impl crate::NttBackend for GpuNtt {
    fn name(&self) -> &'static str {
        "cuda"
    }

    fn transform(&self, data: &mut [Scalar], spec: NttSpec) -> Result<(), NttError> {
        Ok(GpuNtt::transform(self, data, spec)?)
    }

    fn h_poly(&self, abc: AbcEvaluations) -> Result<Vec<Scalar>, NttError> {
        Ok(GpuNtt::h_poly(self, abc)?)
    }

    fn h_coset_evaluations(
        &self,
        abc: AbcEvaluations,
        shift: Scalar,
    ) -> Result<Vec<Scalar>, NttError> {
        Ok(GpuNtt::h_coset_evaluations(self, abc, shift)?)
    }
}

/// What the device H step produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum HTarget {
    /// h's coefficients (bellman's H step).
    Coefficients,
    /// a·b − c on the coset of this shift (snarkjs's H step).
    CosetEvaluations(Scalar),
}

/// Copies a device buffer of elements back as `FrRepr`s (waits for the device stream).
pub fn download_reprs(gpu: &Gpu, buf: &DeviceBuffer<u64>) -> Result<Vec<FrRepr>, GpuNttError> {
    n_elements(buf, "download buffer")?;
    let words = gpu.download(buf)?;
    Ok(bytemuck::cast_slice(&words).to_vec())
}

/// Elements read back from a device (or a staging buffer) as scalars, in parallel; an
/// element that is not reduced below r is [`GpuNttError::NotReduced`] naming its index.
pub fn reprs_to_scalars(reprs: &[FrRepr]) -> Result<Vec<Scalar>, GpuNttError> {
    reprs
        .par_iter()
        .enumerate()
        .map(|(i, r)| {
            r.to_scalar()
                .map_err(|_| GpuNttError::NotReduced { index: i })
        })
        .collect()
}

/// Uploads `FrRepr`s into a new device buffer (charged to the VRAM budget).
pub fn upload_reprs(
    gpu: &Gpu,
    values: &[FrRepr],
    label: &str,
) -> Result<DeviceBuffer<u64>, GpuNttError> {
    Ok(gpu.upload(to_words(values), label)?)
}

fn elementwise_config(n: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (n.div_ceil(ELEMENTWISE_THREADS).max(1), 1, 1),
        block_dim: (ELEMENTWISE_THREADS, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// `[x; 3].map(f)` for a fallible `f`, stopping at the first error.
trait TryMapEach<T> {
    fn try_map_each<U, E>(self, f: impl FnMut(T) -> Result<U, E>) -> Result<[U; 3], E>;
}

impl<T> TryMapEach<T> for [T; 3] {
    fn try_map_each<U, E>(self, mut f: impl FnMut(T) -> Result<U, E>) -> Result<[U; 3], E> {
        let [x, y, z] = self;
        Ok([f(x)?, f(y)?, f(z)?])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_cover_every_bit_once_and_fit_a_tile() {
        for tile_log in [2u32, 5, 10, 11] {
            for max_clog in [0u32, 1, 2, 3] {
                let config = GpuNttConfig { tile_log, max_clog };
                for log_n in 0..=28u32 {
                    let passes = plan_passes(log_n, config);
                    let mut next = 0;
                    for p in &passes {
                        assert_eq!(p.lo, next, "{config:?} log_n {log_n}: {passes:?}");
                        assert!(p.s >= 1 && p.s + p.clog <= tile_log.max(1));
                        assert!(p.clog <= p.lo, "columns must stay below bit lo");
                        next += p.s;
                    }
                    assert_eq!(next, log_n, "{config:?}: {passes:?}");
                }
            }
        }
    }

    #[test]
    fn reprs_to_scalars_round_trips_and_names_an_unreduced_element() {
        let values: Vec<Scalar> = (0..5000u64)
            .map(|i| Scalar::from(i.wrapping_mul(0x9e37_79b9_7f4a_7c15)) - Scalar::from(i))
            .collect();
        let mut r: Vec<FrRepr> = values.iter().map(FrRepr::from_scalar).collect();
        assert_eq!(reprs_to_scalars(&r).unwrap(), values);
        // 2^256 - 1 is above r: not reduced.
        r[4321] = FrRepr {
            limbs: [u64::MAX; 4],
        };
        assert!(matches!(
            reprs_to_scalars(&r),
            Err(GpuNttError::NotReduced { index: 4321 })
        ));
    }

    #[test]
    fn size_tuning_changes_only_the_columns_at_2_24_and_2_26() {
        for log_n in 1..=28u32 {
            let c = GpuNttConfig::for_size(log_n);
            let want = match log_n {
                24 => 1,
                26 => 0,
                _ => GpuNttConfig::default().max_clog,
            };
            assert_eq!(c.tile_log, GpuNttConfig::default().tile_log, "2^{log_n}");
            assert_eq!(c.max_clog, want, "2^{log_n}");
        }
        // 2^24: 10 + 7 + 7 bits, two columns above bit 0 (tiles of 2^8).
        let plan = plan_passes(24, GpuNttConfig::for_size(24));
        let shape: Vec<(u32, u32, u32)> = plan.iter().map(|p| (p.lo, p.s, p.clog)).collect();
        assert_eq!(shape, [(0, 10, 0), (10, 7, 1), (17, 7, 1)]);
    }

    #[test]
    fn plans_for_2_27() {
        // Tile 2^11 with 4 columns: 11 + 9 + 7 bits; tile 2^10 (the default): 10 + 3 * 8 - 7.
        let big = GpuNttConfig {
            tile_log: 11,
            max_clog: 2,
        };
        assert_eq!(plan_passes(27, big).len(), 3);
        let passes = plan_passes(27, GpuNttConfig::default());
        assert_eq!(passes.len(), 4, "{passes:?}");
        assert_eq!(passes.iter().map(|p| p.s).sum::<u32>(), 27);
    }
}
