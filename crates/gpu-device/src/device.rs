//! Discovery, the device handle, module and function caches, and the VRAM budget.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use cudarc::driver::sys::{self, CUdevice_attribute, CUresult};
use cudarc::driver::{CudaContext, CudaEvent, CudaFunction, CudaModule, CudaStream, DriverError};
use memory_budget::{Budget, Reservation};
use pinion_kernels::{Entry, Module};

use crate::memory::device_memory_error;
use crate::GpuError;

/// Whether the CUDA driver library (`libcuda`) can be loaded on this machine.
///
/// Every entry point of this crate checks this first: cudarc's dynamic loading panics on
/// first use when the library is missing, and this crate must return
/// [`GpuError::NoDriver`] instead.
pub fn driver_present() -> bool {
    // SAFETY: only tries to open the shared library by its usual names (dlopen); nothing
    // from it is called, and a failed open is reported as `false`.
    unsafe { sys::is_culib_present() }
}

/// Turns a missing driver into [`GpuError::NoDriver`] (split out so both answers are testable).
pub(crate) fn require_driver(present: bool) -> Result<(), GpuError> {
    if present {
        Ok(())
    } else {
        Err(GpuError::NoDriver)
    }
}

/// This process's hard bytes now (`/proc/self/status`), `None` where unreadable.
fn own_hard_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    memory_budget::ProcessUsage::parse(&text).hard_bytes()
}

/// Number of CUDA devices; `Err(NoDriver)` without a driver, `Ok(0)` when the driver finds
/// no device.
pub fn device_count() -> Result<usize, GpuError> {
    require_driver(driver_present())?;
    match CudaContext::device_count() {
        Ok(n) => Ok(usize::try_from(n).unwrap_or(0)),
        // cuInit reports a machine with a driver but no GPU this way.
        Err(DriverError(CUresult::CUDA_ERROR_NO_DEVICE)) => Ok(0),
        Err(code) => Err(GpuError::Driver {
            call: "cuInit/cuDeviceGetCount",
            code,
        }),
    }
}

/// Static facts about one device, read once when it is opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Driver ordinal.
    pub ordinal: usize,
    /// Marketing name, e.g. "NVIDIA H200".
    pub name: String,
    /// Number of streaming multiprocessors.
    pub sm_count: u32,
    /// Compute capability (major, minor), e.g. (9, 0).
    pub compute_capability: (u32, u32),
    /// Total device memory.
    pub total_memory_bytes: u64,
}

/// Free and total device memory as the driver reports them now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemInfo {
    /// Free bytes (all processes' allocations subtracted).
    pub free_bytes: u64,
    /// Total bytes.
    pub total_bytes: u64,
}

/// The device's stream-ordered memory pool now (`cuMemPoolGetAttribute`): what it has
/// mapped and how much of that live allocations use. `reserved_bytes - used_bytes` is freed
/// memory the pool keeps ([`VramPool::keep_bytes`]), counted as used by `cuMemGetInfo` but
/// charged to no budget.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolBytes {
    /// Bytes the pool has mapped (`CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT`).
    pub reserved_bytes: u64,
    /// Bytes of it in live allocations (`CU_MEMPOOL_ATTR_USED_MEM_CURRENT`).
    pub used_bytes: u64,
}

/// How to open a device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GpuConfig {
    /// Bytes kept out of the VRAM budget. `None`: the larger of 512 MiB and 1/32 of the
    /// card, which covers the driver's own per-context and per-module allocations and
    /// library workspaces that are not charged.
    pub vram_margin_bytes: Option<u64>,
    /// How host threads wait for the device (the primary context's scheduling flag, set
    /// when the device is opened; the whole process shares it).
    pub wait: WaitMode,
    /// What the device's stream-ordered memory pool keeps and reuses (set when the device
    /// is opened; the whole process shares the pool, so the latest open's policy holds).
    /// Default: [`VramPool::KEEP`].
    pub pool: VramPool,
    /// Whether [`Gpu::new_feeder_stream`] gives streams the device's greatest priority, so
    /// that the short kernels and copies which feed others (scalar conversions and
    /// selections queued beside an MSM) run as soon as a multiprocessor frees instead of
    /// after every block a long kernel on another stream has queued. Default:
    /// [`FeederPriority::Normal`] (High measured no different in a 32 GiB PoRep C2 on the
    /// H200, session 17: docs/benchmarks.md).
    pub feeders_first: FeederPriority,
}

/// The priority of feeder streams ([`GpuConfig::feeders_first`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FeederPriority {
    /// The device's greatest stream priority (`cuStreamCreateWithPriority`).
    High,
    /// The default priority, as every other stream.
    #[default]
    Normal,
}

/// The device's default stream-ordered memory pool (the one `cuMemAllocAsync` draws
/// from), which every device buffer of this crate comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VramPool {
    /// Freed bytes the pool keeps mapped for later allocations instead of unmapping them
    /// at the next synchronization (`CU_MEMPOOL_ATTR_RELEASE_THRESHOLD`). `None`: the VRAM
    /// budget, which this process may hold anyway; `Some(0)` is the driver's default, under
    /// which a multi-gigabyte buffer freed before a synchronization is mapped again by the
    /// next allocation.
    pub keep_bytes: Option<u64>,
    /// Whether an allocation on one stream may take memory freed on another stream by
    /// making its own stream wait for that free (`CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_
    /// DEPENDENCIES`, the driver's default). When it may, a buffer allocated for a copy
    /// stream can make that stream wait behind kernels queued before a free on the work
    /// stream; when not, such an allocation takes other memory.
    pub cross_stream_waits: bool,
}

impl Default for VramPool {
    /// [`VramPool::KEEP`]: measured on the H200 (session 32, docs/benchmarks.md), a G1 MSM
    /// of 2^26 terms spent 13.2 ms mapping its ~5 GB of scratch again under the driver's
    /// default and 3.1 ms with freed memory kept (434 against 446 ms in all).
    fn default() -> Self {
        VramPool::KEEP
    }
}

impl VramPool {
    /// The driver's defaults: nothing kept past a synchronization, cross-stream waits. For
    /// a process that shares its card with others and must give freed memory back at once.
    pub const DRIVER: VramPool = VramPool {
        keep_bytes: Some(0),
        cross_stream_waits: true,
    };
    /// Freed memory kept mapped up to the VRAM budget (which this process may hold anyway),
    /// cross-stream waits: the default. The pool's reserve never exceeds the budget after
    /// a synchronization, and what the budget charges is what is in use; the rest of what
    /// `cuMemGetInfo` counts as used is the pool's kept memory ([`Gpu::pool_bytes`]), given
    /// back to the driver when a context limit must grow ([`Gpu::reserve_local_memory`]) and
    /// before an allocation the driver refused is asked once more.
    pub const KEEP: VramPool = VramPool {
        keep_bytes: None,
        cross_stream_waits: true,
    };
}

/// Applies `pool` to device `ordinal`'s default memory pool; `budget_bytes` is what
/// `keep_bytes: None` keeps.
fn set_pool(
    (ordinal, n_devices): (usize, usize),
    pool: VramPool,
    budget_bytes: u64,
) -> Result<(), GpuError> {
    let handle = default_pool(ordinal, n_devices)?;
    // One attribute of the pool from a value of the type the driver reads for it.
    let set = |attr, value: *mut std::ffi::c_void, call: &'static str| {
        // SAFETY: `handle` came from cuDeviceGetDefaultMemPool; `value` points at a live
        // value of the attribute's type (cuuint64_t or int, matched by the callers).
        unsafe { sys::cuMemPoolSetAttribute(handle, attr, value) }
            .result()
            .map_err(GpuError::driver(call))
    };
    let mut keep: u64 = pool.keep_bytes.unwrap_or(budget_bytes);
    set(
        sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
        (&mut keep as *mut u64).cast(),
        "cuMemPoolSetAttribute(RELEASE_THRESHOLD)",
    )?;
    let mut waits: i32 = i32::from(pool.cross_stream_waits);
    set(
        sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES,
        (&mut waits as *mut i32).cast(),
        "cuMemPoolSetAttribute(REUSE_ALLOW_INTERNAL_DEPENDENCIES)",
    )
}

/// Returns the memory device `ordinal`'s default stream-ordered pool holds unused to the
/// driver (`cuMemPoolTrimTo(pool, 0)`; memory in use or awaiting a stream-ordered free stays).
fn trim_default_pool(ordinal: usize) -> Result<(), GpuError> {
    let handle = default_pool(ordinal, ordinal + 1)?;
    // SAFETY: `handle` came from cuDeviceGetDefaultMemPool.
    unsafe { sys::cuMemPoolTrimTo(handle, 0) }
        .result()
        .map_err(GpuError::driver("cuMemPoolTrimTo"))
}

/// Device `ordinal`'s (one of `n_devices`) default stream-ordered memory pool.
fn default_pool(ordinal: usize, n_devices: usize) -> Result<sys::CUmemoryPool, GpuError> {
    let dev = cu_device(ordinal, n_devices)?;
    let mut handle: sys::CUmemoryPool = std::ptr::null_mut();
    // SAFETY: `dev` came from cuDeviceGet; `handle` is a valid out-pointer.
    unsafe { sys::cuDeviceGetDefaultMemPool(&mut handle, dev) }
        .result()
        .map_err(GpuError::driver("cuDeviceGetDefaultMemPool"))?;
    Ok(handle)
}

/// The driver's handle of device `ordinal` (one of `n_devices`).
fn cu_device(ordinal: usize, n_devices: usize) -> Result<sys::CUdevice, GpuError> {
    let ordinal_c =
        i32::try_from(ordinal).map_err(|_| GpuError::NoDevice { ordinal, n_devices })?;
    let mut dev: sys::CUdevice = 0;
    // SAFETY: cuInit ran (device_count); `dev` is a valid out-pointer for the call.
    unsafe { sys::cuDeviceGet(&mut dev, ordinal_c) }
        .result()
        .map_err(GpuError::driver("cuDeviceGet"))?;
    Ok(dev)
}

/// How a host thread that waits for the device (a synchronizing copy, an event or stream
/// synchronize) spends the wait.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WaitMode {
    /// Sleep until the driver wakes the thread (`CU_CTX_SCHED_BLOCKING_SYNC`): the core
    /// goes to other work, a wake-up costs some microseconds. The default: a prover's
    /// waiting threads (its MSM and G2 threads, the staging thread) would otherwise each
    /// hold a core busy while the next proof's synthesis wants all of them. (The driver's
    /// own default on a machine with more cores than contexts is to spin.)
    #[default]
    Blocking,
    /// Spin, yielding the core to other runnable threads (`CU_CTX_SCHED_YIELD`).
    Yield,
    /// Spin (`CU_CTX_SCHED_SPIN`): the lowest latency, one core per waiting thread.
    Spin,
}

impl WaitMode {
    fn flags(self) -> u32 {
        let f = match self {
            WaitMode::Blocking => sys::CUctx_flags::CU_CTX_SCHED_BLOCKING_SYNC,
            WaitMode::Yield => sys::CUctx_flags::CU_CTX_SCHED_YIELD,
            WaitMode::Spin => sys::CUctx_flags::CU_CTX_SCHED_SPIN,
        };
        f as u32
    }
}

/// Sets the scheduling flag of device `ordinal` (one of `n_devices`)'s primary context
/// (allowed while it is active since CUDA 11.2; every device this project supports has a
/// newer driver).
fn set_wait_mode(ordinal: usize, n_devices: usize, mode: WaitMode) -> Result<(), GpuError> {
    let dev = cu_device(ordinal, n_devices)?;
    // SAFETY: `dev` came from cuDeviceGet; the flags are one scheduling flag.
    unsafe { sys::cuDevicePrimaryCtxSetFlags_v2(dev, mode.flags()) }
        .result()
        .map_err(GpuError::driver("cuDevicePrimaryCtxSetFlags"))
}

/// The default VRAM margin for a card of `total_bytes`.
pub fn default_vram_margin_bytes(total_bytes: u64) -> u64 {
    (512u64 << 20).max(total_bytes / 32)
}

/// An open device: its primary context, a default stream, cached modules and functions,
/// and its VRAM budget. Cheap to clone (shared); `Send + Sync`.
#[derive(Clone)]
pub struct Gpu {
    inner: Arc<GpuInner>,
    /// This handle's work stream ([`Gpu::with_stream`] gives handles with others).
    stream: Arc<CudaStream>,
}

struct GpuInner {
    ctx: Arc<CudaContext>,
    info: DeviceInfo,
    vram: Budget,
    /// See [`Gpu::context_host_bytes`].
    context_host_bytes: u64,
    modules: Mutex<HashMap<Module, Arc<CudaModule>>>,
    functions: Mutex<HashMap<Entry, CudaFunction>>,
    feeders: FeederPriority,
    /// Threads the device holds at once (SMs x the most threads an SM holds): the driver
    /// reserves every kernel's local memory per thread for all of them.
    resident_threads: u64,
    /// The context's per-thread stack limit when the device was opened (reserved by the
    /// driver from the start, inside the VRAM margin).
    initial_stack: u64,
    /// Whether the device has stream-ordered memory pools (allocations go through its
    /// default pool, whose policy `open_with` set).
    pools: bool,
    local: Mutex<LocalMemory>,
}

/// The context's per-thread local memory ("stack") as [`Gpu::reserve_local_memory`] set it.
#[derive(Default)]
struct LocalMemory {
    per_thread: u64,
    /// One charge a raise, each for what it added.
    reservations: Vec<Reservation>,
    measured_bytes: u64,
    /// The smallest per-thread size the driver refused for lack of memory (not asked again).
    refused: Option<u64>,
}

/// What [`Gpu::reserve_local_memory`] charged for kernels' local memory, beside what the
/// driver's free-memory figure fell by when the limit was raised.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LocalMemoryInfo {
    /// Local bytes per thread the context now provides (0: never raised by this crate).
    pub per_thread_bytes: u64,
    /// The context's per-thread stack when the device was opened (the driver reserves it
    /// from the start; the VRAM margin covers it).
    pub initial_per_thread_bytes: u64,
    /// Bytes charged to the VRAM budget for it: (`per_thread_bytes` −
    /// `initial_per_thread_bytes`) x the threads the device holds.
    pub charged_bytes: u64,
    /// How much `cuMemGetInfo`'s free memory fell when the limit was raised, summed over
    /// raises: approximate, as other work allocating or freeing at the same moment moves it.
    pub measured_bytes: u64,
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu")
            .field("info", &self.inner.info)
            .field("vram_budget_bytes", &self.inner.vram.total_bytes())
            .finish_non_exhaustive()
    }
}

/// Each device's per-thread stack limit as this process first found it (ordinal, bytes).
static INITIAL_STACK: Mutex<Vec<(usize, u64)>> = Mutex::new(Vec::new());

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding a cache lock leaves the map consistent (inserts are single
    // calls), so poisoning is ignored.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Gpu {
    /// Opens device `ordinal` with the default [`GpuConfig`].
    pub fn open(ordinal: usize) -> Result<Gpu, GpuError> {
        Gpu::open_with(ordinal, GpuConfig::default())
    }

    /// Opens every device the driver reports (empty when there is none).
    pub fn open_all() -> Result<Vec<Gpu>, GpuError> {
        (0..device_count()?).map(Gpu::open).collect()
    }

    /// Opens device `ordinal`: retains its primary context, creates a stream, reads its
    /// facts and sizes its VRAM budget as `min(total - margin, free now)`. The free memory
    /// matters when other processes already hold part of the card.
    pub fn open_with(ordinal: usize, config: GpuConfig) -> Result<Gpu, GpuError> {
        let n_devices = device_count()?;
        if ordinal >= n_devices {
            return Err(GpuError::NoDevice { ordinal, n_devices });
        }
        let host_before = own_hard_bytes();
        set_wait_mode(ordinal, n_devices, config.wait)?;
        let ctx =
            CudaContext::new(ordinal).map_err(GpuError::driver("cuDevicePrimaryCtxRetain"))?;
        let name = ctx.name().map_err(GpuError::driver("cuDeviceGetName"))?;
        let attr = |a: CUdevice_attribute, call: &'static str| -> Result<u32, GpuError> {
            let v = ctx.attribute(a).map_err(GpuError::driver(call))?;
            Ok(u32::try_from(v).unwrap_or(0))
        };
        let sm_count = attr(
            CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)",
        )?;
        let major = attr(
            CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
            "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MAJOR)",
        )?;
        let minor = attr(
            CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
            "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MINOR)",
        )?;
        let max_threads_per_sm = attr(
            CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR,
            "cuDeviceGetAttribute(MAX_THREADS_PER_MULTIPROCESSOR)",
        )?;
        let stack_now = ctx
            .get_limit(sys::CUlimit::CU_LIMIT_STACK_SIZE)
            .map_err(GpuError::driver("cuCtxGetLimit(STACK_SIZE)"))? as u64;
        // The stack the context had before this process raised it: the primary context is
        // shared by every open of the device, so a later open must not take a limit raised
        // (and charged) through an earlier handle as its starting point.
        let initial_stack = {
            let mut seen = lock(&INITIAL_STACK);
            match seen.iter().find(|(o, _)| *o == ordinal) {
                Some(&(_, stack)) => stack,
                None => {
                    seen.push((ordinal, stack_now));
                    stack_now
                }
            }
        };
        let (free, total) = ctx
            .mem_get_info()
            .map_err(GpuError::driver("cuMemGetInfo"))?;
        let (free_bytes, total_bytes) = (free as u64, total as u64);
        let margin = config
            .vram_margin_bytes
            .unwrap_or_else(|| default_vram_margin_bytes(total_bytes));
        let budget_bytes = total_bytes.saturating_sub(margin).min(free_bytes);
        let vram = Budget::fixed_named(format!("vram{ordinal}"), budget_bytes);
        // Set on every open (the latest open's policy is the process's, DRIVER included); a
        // device without stream-ordered pools allocates without one (cudarc's cuMemAlloc
        // path) and has nothing to set.
        let pools = attr(
            CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
            "cuDeviceGetAttribute(MEMORY_POOLS_SUPPORTED)",
        )?;
        if pools != 0 {
            set_pool((ordinal, n_devices), config.pool, budget_bytes)?;
        }
        let stream = ctx
            .new_stream()
            .map_err(GpuError::driver("cuStreamCreate"))?;
        let context_host_bytes = match (host_before, own_hard_bytes()) {
            (Some(before), Some(after)) => after.saturating_sub(before),
            _ => 0,
        };
        let info = DeviceInfo {
            ordinal,
            name,
            sm_count,
            compute_capability: (major, minor),
            total_memory_bytes: total_bytes,
        };
        Ok(Gpu {
            inner: Arc::new(GpuInner {
                ctx,
                info,
                vram,
                context_host_bytes,
                modules: Mutex::new(HashMap::new()),
                functions: Mutex::new(HashMap::new()),
                feeders: config.feeders_first,
                resident_threads: u64::from(sm_count) * u64::from(max_threads_per_sm),
                initial_stack,
                pools: pools != 0,
                local: Mutex::new(LocalMemory::default()),
            }),
            stream,
        })
    }

    /// Host memory this process gained while the device was opened (driver initialisation,
    /// context, stream), measured from `/proc/self/status` (anonymous + shared + page
    /// tables) before and after; 0 where that file cannot be read. No host budget sees this
    /// memory unless its owner charges it: the engine charges it for as long as it runs
    /// (18.6 MiB measured this way on the H200 with driver 580; the stress run's cgroup saw
    /// 22.2 MiB for the same open). Allocations of other threads during the open are counted
    /// too.
    pub fn context_host_bytes(&self) -> u64 {
        self.inner.context_host_bytes
    }

    /// Facts read when the device was opened.
    pub fn info(&self) -> &DeviceInfo {
        &self.inner.info
    }

    /// The device's primary context (cudarc), for work this crate does not wrap.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.inner.ctx
    }

    /// This handle's work stream (a real stream, not the legacy null stream): where its
    /// allocations, copies and the kernels of crates built on it are queued.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// The same device (context, loaded modules, VRAM budget) with `stream` as the work
    /// stream, so work queued through the two handles can run side by side. `stream` must
    /// belong to this device (from [`Gpu::new_stream`]). Device buffers carry cudarc's
    /// events, so a buffer written on one handle's stream and read on another's is
    /// ordered by the driver.
    pub fn with_stream(&self, stream: Arc<CudaStream>) -> Gpu {
        Gpu {
            inner: Arc::clone(&self.inner),
            stream,
        }
    }

    /// A new stream for work that others wait for (copies, conversions): of the device's
    /// greatest priority when the device was opened with [`FeederPriority::High`] (see
    /// [`GpuConfig::feeders_first`]), else an ordinary one.
    pub fn new_feeder_stream(&self) -> Result<Arc<CudaStream>, GpuError> {
        match self.inner.feeders {
            FeederPriority::Normal => self.new_stream(),
            FeederPriority::High => {
                // The range is the current context's: a thread that has not used the device
                // yet has none (CUDA_ERROR_INVALID_CONTEXT without this).
                self.inner
                    .ctx
                    .bind_to_thread()
                    .map_err(GpuError::driver("cuCtxSetCurrent"))?;
                let (_least, greatest) = cudarc::driver::result::stream::get_priority_range()
                    .map_err(GpuError::driver("cuCtxGetStreamPriorityRange"))?;
                self.inner
                    .ctx
                    .new_stream_with_priority(greatest)
                    .map_err(GpuError::driver("cuStreamCreateWithPriority"))
            }
        }
    }

    /// A new stream on this device, for overlapping copies and kernels.
    pub fn new_stream(&self) -> Result<Arc<CudaStream>, GpuError> {
        self.inner
            .ctx
            .new_stream()
            .map_err(GpuError::driver("cuStreamCreate"))
    }

    /// Waits for all work on the device.
    pub fn synchronize(&self) -> Result<(), GpuError> {
        self.inner
            .ctx
            .synchronize()
            .map_err(GpuError::driver("cuCtxSynchronize"))
    }

    /// Free and total memory now.
    pub fn mem_info(&self) -> Result<MemInfo, GpuError> {
        let (free, total) = self
            .inner
            .ctx
            .mem_get_info()
            .map_err(GpuError::driver("cuMemGetInfo"))?;
        Ok(MemInfo {
            free_bytes: free as u64,
            total_bytes: total as u64,
        })
    }

    /// The device's default stream-ordered pool now: mapped and in-use bytes (zeros on a
    /// device without memory pools, whose allocations do not go through one).
    pub fn pool_bytes(&self) -> Result<PoolBytes, GpuError> {
        if !self.inner.pools {
            return Ok(PoolBytes::default());
        }
        let ordinal = self.inner.info.ordinal;
        let handle = default_pool(ordinal, ordinal + 1)?;
        let get = |attr, call: &'static str| -> Result<u64, GpuError> {
            let mut v: u64 = 0;
            // SAFETY: `handle` came from cuDeviceGetDefaultMemPool; both attributes are
            // cuuint64_t values, written to a live u64.
            unsafe { sys::cuMemPoolGetAttribute(handle, attr, (&mut v as *mut u64).cast()) }
                .result()
                .map_err(GpuError::driver(call))?;
            Ok(v)
        };
        Ok(PoolBytes {
            reserved_bytes: get(
                sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT,
                "cuMemPoolGetAttribute(RESERVED_MEM_CURRENT)",
            )?,
            used_bytes: get(
                sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_CURRENT,
                "cuMemPoolGetAttribute(USED_MEM_CURRENT)",
            )?,
        })
    }

    /// Gives the memory the device's pool keeps unused back to the driver; `false` on a
    /// device without pools or when the driver refused (nothing was given back).
    pub(crate) fn trim_pool(&self) -> bool {
        self.inner.pools && trim_default_pool(self.inner.info.ordinal).is_ok()
    }

    /// `cuMemGetInfo`'s free bytes now, 0 when the driver does not answer.
    pub(crate) fn free_bytes(&self) -> u64 {
        self.mem_info().map_or(0, |m| m.free_bytes)
    }

    /// The device's VRAM budget: every allocation made through this crate is charged to it
    /// (category `Device`) before the driver is asked.
    pub fn vram_budget(&self) -> &Budget {
        &self.inner.vram
    }

    /// An event that records timing (`CU_EVENT_DEFAULT`; cudarc's default disables timing).
    pub fn timing_event(&self) -> Result<CudaEvent, GpuError> {
        self.inner
            .ctx
            .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(GpuError::driver("cuEventCreate"))
    }

    /// The loaded module, loading it on first use: the prebuilt sm_90 cubin on a Hopper GPU,
    /// else (or if the driver refuses the cubin) its PTX, which the driver JIT-compiles.
    pub fn module(&self, module: Module) -> Result<Arc<CudaModule>, GpuError> {
        let mut modules = lock(&self.inner.modules);
        if let Some(m) = modules.get(&module) {
            return Ok(m.clone());
        }
        // sm_90: the prebuilt cubin, no JIT (more than a minute for the G2 MSM module); a
        // cubin the driver refuses, or any other GPU, falls back to the PTX.
        let cubin = if self.inner.info.compute_capability == (9, 0) {
            module.cubin_sm90().ok().and_then(|bin| {
                self.inner
                    .ctx
                    .load_module(cudarc::nvrtc::Ptx::from_binary(bin))
                    .ok()
            })
        } else {
            None
        };
        let loaded = match cubin {
            Some(m) => m,
            None => {
                metrics::counter!("pinion_gpu_module_jit_total").increment(1);
                let ptx = cudarc::nvrtc::Ptx::from_src(module.ptx()?);
                self.inner
                    .ctx
                    .load_module(ptx)
                    .map_err(|code| GpuError::ModuleLoad {
                        module: module.name(),
                        code,
                    })?
            }
        };
        modules.insert(module, loaded.clone());
        Ok(loaded)
    }

    /// Makes the context provide `f`'s local memory per thread (its stack frame: register
    /// spills and local arrays), charged first. The driver reserves a kernel's local memory
    /// for every thread the device can hold, whatever the kernel's occupancy, and keeps the
    /// largest reservation for the context's life: 22 KB a thread is 5.7 GiB on an H200,
    /// outside any allocation this crate sees. So a kernel with a large frame is prepared
    /// once: its per-thread bytes beyond the stack the context had when the device was opened
    /// (1 KiB by default, which the VRAM margin covers), times the threads the device holds,
    /// are charged to the VRAM budget (held while this device handle lives) and
    /// `CU_LIMIT_STACK_SIZE` is raised to them, which makes the driver reserve it now rather
    /// than at some later launch (on the H200: 22,592 B a thread, 5.43 GiB charged, and
    /// `cuMemGetInfo`'s free memory fell by 5.43 GiB). Nothing is done if this handle has
    /// already raised the limit that far (another `Gpu::open` of the same device charges
    /// again, against its own budget: the primary context is shared, the records are not).
    /// A budget that cannot take the charge is [`GpuError::Budget`]; a driver without the
    /// memory, even after the stream-ordered pool has given back what it keeps unused,
    /// [`GpuError::OutOfMemory`], remembered (a later call for as large a frame gets it
    /// without asking the driver again); either leaves the limit as it was and nothing charged (callers can pick a kernel with less local
    /// memory). The limit is never lowered. Raising it waits for the device's work to drain.
    pub fn reserve_local_memory(&self, f: &CudaFunction, label: &str) -> Result<(), GpuError> {
        let per_thread = f
            .get_attribute(sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)
            .map_err(GpuError::driver("cuFuncGetAttribute(LOCAL_SIZE_BYTES)"))?;
        let per_thread = u64::try_from(per_thread).unwrap_or(0);
        let mut local = lock(&self.inner.local);
        let covered = local.per_thread.max(self.inner.initial_stack);
        if per_thread <= covered {
            return Ok(());
        }
        let ctx = &self.inner.ctx;
        // Only what this raise adds is charged (a larger frame after a smaller one adds the
        // difference). A limit another handle of this process raised is charged again here,
        // against this handle's budget: conservative, and right once that handle is gone.
        let bytes = (per_thread - covered).saturating_mul(self.inner.resident_threads);
        if local.refused.is_some_and(|r| per_thread >= r) {
            return Err(GpuError::OutOfMemory {
                requested_bytes: bytes,
                free_bytes: self.free_bytes(),
            });
        }
        let reservation = self.reserve_vram(bytes, label)?;
        let current = ctx
            .get_limit(sys::CUlimit::CU_LIMIT_STACK_SIZE)
            .map_err(GpuError::driver("cuCtxGetLimit(STACK_SIZE)"))? as u64;
        let free_before = self.free_bytes();
        // Never lowered: the context may already provide more (raised through another
        // handle, or grown by the driver for some launch).
        if current < per_thread {
            let raise = || ctx.set_limit(sys::CUlimit::CU_LIMIT_STACK_SIZE, per_thread as usize);
            let mut result = raise();
            if result.is_err_and(|code| code.0 == CUresult::CUDA_ERROR_OUT_OF_MEMORY) {
                // Memory the stream-ordered pool keeps after frees is not the budget's; give
                // it back to the driver and ask once more.
                trim_default_pool(self.inner.info.ordinal)?;
                result = raise();
            }
            if let Err(code) = result {
                let e = device_memory_error(self, "cuCtxSetLimit(STACK_SIZE)", bytes, code);
                if matches!(e, GpuError::OutOfMemory { .. }) {
                    local.refused = Some(local.refused.map_or(per_thread, |r| r.min(per_thread)));
                }
                return Err(e);
            }
        }
        local.measured_bytes += free_before.saturating_sub(self.free_bytes());
        local.per_thread = per_thread;
        local.reservations.push(reservation);
        Ok(())
    }

    /// What [`Gpu::reserve_local_memory`] has charged and measured so far.
    pub fn local_memory(&self) -> LocalMemoryInfo {
        let local = lock(&self.inner.local);
        LocalMemoryInfo {
            per_thread_bytes: local.per_thread,
            initial_per_thread_bytes: self.inner.initial_stack,
            charged_bytes: local.reservations.iter().map(Reservation::bytes).sum(),
            measured_bytes: local.measured_bytes,
        }
    }

    /// A kernel function by entry point (its module is loaded on first use); cached.
    pub fn function(&self, entry: Entry) -> Result<CudaFunction, GpuError> {
        if let Some(f) = lock(&self.inner.functions).get(&entry) {
            return Ok(f.clone());
        }
        let module = self.module(entry.module())?;
        let f = module
            .load_function(entry.name())
            .map_err(|code| GpuError::MissingKernel {
                module: entry.module().name(),
                entry: entry.name(),
                code,
            })?;
        lock(&self.inner.functions).insert(entry, f.clone());
        Ok(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_driver_is_an_error_not_a_panic() {
        assert!(matches!(require_driver(false), Err(GpuError::NoDriver)));
        assert!(require_driver(true).is_ok());
    }

    #[test]
    fn open_without_driver_reports_no_driver() {
        if driver_present() {
            // With a driver, opening an absurd ordinal must name it rather than panic.
            let err = Gpu::open(1 << 20).expect_err("ordinal 2^20 cannot exist");
            assert!(
                matches!(err, GpuError::NoDevice { ordinal, .. } if ordinal == 1 << 20),
                "{err}"
            );
        } else {
            assert!(matches!(Gpu::open(0), Err(GpuError::NoDriver)));
            assert!(matches!(device_count(), Err(GpuError::NoDriver)));
            assert!(matches!(Gpu::open_all(), Err(GpuError::NoDriver)));
        }
    }

    #[test]
    fn default_margin_scales_with_the_card() {
        let gib = 1u64 << 30;
        assert_eq!(default_vram_margin_bytes(4 * gib), 512 << 20);
        assert_eq!(default_vram_margin_bytes(141 * gib), 141 * gib / 32);
        assert!(default_vram_margin_bytes(141 * gib) < 141 * gib);
    }
}
