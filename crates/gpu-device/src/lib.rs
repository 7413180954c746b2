//! CUDA devices for Pinion: discovery, contexts and streams, the embedded PTX modules,
//! budget-charged device memory, pinned host memory, and the field-kernel launches.
//!
//! # Example
//! Open the first device, if there is one, and round-trip a buffer through its memory,
//! charged to the device's VRAM budget while it lives:
//! ```
//! use gpu_device::{Gpu, GpuError};
//!
//! match Gpu::open(0) {
//!     Ok(gpu) => {
//!         let info = gpu.info();
//!         println!("{}: {} SMs, VRAM budget {} bytes", info.name, info.sm_count,
//!             gpu.vram_budget().total_bytes());
//!         let before = gpu.vram_budget().used_bytes();
//!         let buf = gpu.upload(&[1u32, 2, 3], "example")?;
//!         assert!(gpu.vram_budget().used_bytes() >= before + 12);
//!         assert_eq!(gpu.download(&buf)?, vec![1, 2, 3]);
//!     }
//!     // No driver, or no device: a typed error, never a panic.
//!     Err(GpuError::NoDriver | GpuError::NoDevice { .. }) => println!("no GPU here"),
//!     Err(e) => return Err(e.into()),
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Contract
//! - **No driver is an error, never a panic.** Every entry point first checks that
//!   `libcuda` can be loaded ([`driver_present`]); without it you get [`GpuError::NoDriver`],
//!   and with a driver but no device [`GpuError::NoDevice`]. Build and unit tests need
//!   neither CUDA nor a GPU.
//! - **Every CUDA return code is checked** and becomes a [`GpuError`] naming the call.
//! - **Kernels by enum.** [`Gpu::function`] takes a [`pinion_kernels::Entry`]; the module
//!   holding it is JIT-loaded from its PTX (embedded, or read from `$PINION_PTX_DIR` in
//!   `external-ptx` builds; unavailable PTX is [`GpuError::Ptx`]) on first use and cached per
//!   device.
//! - **Waiting threads sleep.** A device is opened with its primary context set to
//!   blocking synchronization ([`WaitMode::Blocking`], the default of [`GpuConfig`]): a
//!   thread waiting for the device gives its core to the host's other work instead of
//!   spinning on it (the driver's default with more cores than contexts).
//! - **VRAM is budgeted.** Each [`Gpu`] owns a `memory_budget::Budget` of
//!   `min(total - margin, free at open)` bytes ([`GpuConfig`]); [`Gpu::alloc_zeros`] and
//!   [`Gpu::upload`] charge it (category `Device`) before asking the driver, and a driver
//!   out-of-memory becomes [`GpuError::OutOfMemory`] with the requested and free bytes.
//! - **Pinned host memory** ([`PinnedBuffer`]) is portable and *not* write-combined, and
//!   is paid for by a host-budget `Reservation` the caller hands in.
//! - **Pinned staging pool** ([`pinned_pool`]): reusable pinned buffers by size class,
//!   charged to a host budget (`Category::PinnedPool`) before they are pinned and for as
//!   long as they exist, idle or not; the budget's eviction frees idle ones only; a buffer
//!   is reused or freed only after the copies that read it have completed.
//!
//! # Non-goals
//! Multi-GPU scheduling (callers open each device with [`Gpu::open`]/[`Gpu::open_all`]),
//! unified/managed memory (never used: oversubscribing it can hang the GPU), and
//! anything curve-specific beyond the field test kernels in [`field`].
//!
//! # Cost model
//! Opening a device retains its primary context (tens of milliseconds, once). The first
//! [`Gpu::function`] for a module JIT-compiles its PTX (seconds for the G1 modules; more
//! than a minute was seen for the 30 MB G2 MSM module on a fresh machine; once per device
//! and process, and the driver's cache keeps the result between processes); later lookups are a hash-map hit. Allocations cost a
//! budget check plus the driver's allocation (stream-ordered when the device supports
//! memory pools). By default the pool keeps freed memory mapped up to the VRAM budget
//! ([`VramPool::KEEP`]): a later allocation of the same size maps nothing (a 2^26-term G1
//! MSM's ~5 GB of scratch cost ~10 ms to map again each call under the driver's default,
//! [`VramPool::DRIVER`], which a process sharing its card may prefer).
#![warn(missing_docs)]

mod device;
mod error;
pub mod field;
mod memory;
pub mod pinned_pool;
pub mod testing;

pub use device::{
    default_vram_margin_bytes, device_count, driver_present, DeviceInfo, FeederPriority, Gpu,
    GpuConfig, LocalMemoryInfo, MemInfo, PoolBytes, VramPool, WaitMode,
};
pub use error::GpuError;
pub use memory::{DeviceBuffer, PinnedBuffer};
pub use pinion_kernels::{Entry, Module};
pub use pinned_pool::{
    size_class, CudaPinned, PinnedPool, PinnedStagingPool, PoolError, PoolStats, Pooled,
    StagingAllocator, StagingBuffer,
};
