//! The crate's one error type.

use cudarc::driver::DriverError;
use memory_budget::BudgetError;

/// Everything that can go wrong talking to a GPU.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    /// `libcuda` could not be loaded: no NVIDIA driver on this machine.
    #[error("no CUDA driver: libcuda could not be loaded")]
    NoDriver,
    /// The driver loaded but reports no usable device (or not the one asked for).
    #[error("no CUDA device with ordinal {ordinal} ({n_devices} devices present)")]
    NoDevice {
        /// The ordinal asked for.
        ordinal: usize,
        /// How many devices the driver reports.
        n_devices: usize,
    },
    /// A device allocation failed for lack of memory.
    #[error("device out of memory: requested {requested_bytes} bytes, {free_bytes} bytes free")]
    OutOfMemory {
        /// Bytes asked for.
        requested_bytes: u64,
        /// Free device memory reported by the driver right after the failure.
        free_bytes: u64,
    },
    /// The device's VRAM budget refused the allocation before it was attempted.
    #[error("vram budget refused {label}: {source}")]
    Budget {
        /// What the allocation was for.
        label: String,
        /// The budget's reason.
        #[source]
        source: BudgetError,
    },
    /// A reservation handed in for an allocation does not cover it.
    #[error(
        "reservation of {reserved_bytes} bytes does not cover the {needed_bytes} bytes of {what}"
    )]
    ReservationTooSmall {
        /// What was being allocated.
        what: &'static str,
        /// Bytes the allocation needs.
        needed_bytes: u64,
        /// Bytes the reservation holds.
        reserved_bytes: u64,
    },
    /// A size computation overflowed (element count times element size).
    #[error("size of {n_elements} elements of {element_bytes} bytes overflows")]
    SizeOverflow {
        /// Elements asked for.
        n_elements: usize,
        /// Bytes per element.
        element_bytes: usize,
    },
    /// Buffers handed to a kernel disagree in length or shape.
    #[error("{what}: expected {expected}, found {found}")]
    LengthMismatch {
        /// Which argument and unit.
        what: &'static str,
        /// Expected length.
        expected: usize,
        /// Length found.
        found: usize,
    },
    /// A kernel entry point is missing from its loaded module (stale PTX).
    #[error("kernel {entry} missing from module {module}: {code:?}")]
    MissingKernel {
        /// Module name.
        module: &'static str,
        /// Entry point name.
        entry: &'static str,
        /// The driver's code.
        code: DriverError,
    },
    /// A zero-length allocation was requested where the driver gives no valid answer.
    #[error("{what} of zero elements requested")]
    EmptyAllocation {
        /// What was being allocated.
        what: &'static str,
    },
    /// A module's PTX text is unavailable (an `external-ptx` build without its files).
    #[error("{0}")]
    Ptx(#[from] pinion_kernels::PtxError),
    /// The driver refused to load a PTX module (for example PTX newer than the driver).
    #[error("loading module {module} failed: {code:?}")]
    ModuleLoad {
        /// Module name.
        module: &'static str,
        /// The driver's code.
        code: DriverError,
    },
    /// Any other CUDA driver call failed.
    #[error("{call} failed: {code:?}")]
    Driver {
        /// The driver call or operation.
        call: &'static str,
        /// The driver's code.
        code: DriverError,
    },
}

impl GpuError {
    /// A closure that wraps a driver error with the call that produced it.
    pub(crate) fn driver(call: &'static str) -> impl FnOnce(DriverError) -> GpuError {
        move |code| GpuError::Driver { call, code }
    }

    /// Whether the allocation was refused for lack of device memory: by the VRAM budget
    /// ([`GpuError::Budget`]) or by the driver ([`GpuError::OutOfMemory`]). Callers with
    /// somewhere else to put the work (the CPU, a smaller plan) fall back on these and
    /// report every other error.
    ///
    /// ```
    /// use gpu_device::GpuError;
    /// let oom = GpuError::OutOfMemory { requested_bytes: 1 << 30, free_bytes: 0 };
    /// assert!(oom.is_vram_refusal());
    /// assert!(!GpuError::NoDriver.is_vram_refusal());
    /// ```
    pub fn is_vram_refusal(&self) -> bool {
        matches!(self, GpuError::Budget { .. } | GpuError::OutOfMemory { .. })
    }
}
