//! Budget-charged device buffers and pinned host buffers.

use cudarc::driver::sys::{self, CUresult};
use cudarc::driver::{
    CudaSlice, CudaStream, DeviceRepr, DriverError, PinnedHostSlice, ValidAsZeroBits,
};
use memory_budget::{Category, Reservation};
use std::sync::Arc;

use crate::{Gpu, GpuError};

/// Bytes of `n_elements` values of `T`, or a typed overflow error.
fn size_bytes<T>(n_elements: usize) -> Result<u64, GpuError> {
    let element_bytes = std::mem::size_of::<T>();
    n_elements
        .checked_mul(element_bytes)
        .filter(|&b| b <= isize::MAX as usize)
        .map(|b| b as u64)
        .ok_or(GpuError::SizeOverflow {
            n_elements,
            element_bytes,
        })
}

/// Device memory holding `len` values of `T`, charged to its device's VRAM budget for as
/// long as it lives. Freed (on its stream) before the charge is returned.
pub struct DeviceBuffer<T> {
    // Field order matters: the memory is freed before the reservation is released.
    slice: CudaSlice<T>,
    reservation: Reservation,
}

impl<T> std::fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("len", &self.slice.len())
            .field("reserved_bytes", &self.reservation.bytes())
            .finish()
    }
}

impl<T> DeviceBuffer<T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.slice.len()
    }
    /// Whether it holds no elements.
    pub fn is_empty(&self) -> bool {
        self.slice.len() == 0
    }
    /// Bytes charged to the VRAM budget.
    pub fn reserved_bytes(&self) -> u64 {
        self.reservation.bytes()
    }
    /// The cudarc slice, for kernel arguments and copies.
    pub fn slice(&self) -> &CudaSlice<T> {
        &self.slice
    }
    /// The cudarc slice, mutably (kernel outputs, copies into it).
    pub fn slice_mut(&mut self) -> &mut CudaSlice<T> {
        &mut self.slice
    }
}

impl DeviceBuffer<u64> {
    /// The same memory as twice as many `u32` words (each `u64` as its low then high half,
    /// little-endian), without a copy; the VRAM charge moves with it. Work already queued
    /// on the buffer keeps its order: the new slice lives on the same stream.
    pub fn into_u32_words(self) -> DeviceBuffer<u32> {
        let DeviceBuffer { slice, reservation } = self;
        let stream = slice.stream().clone();
        let len = slice.len() * 2;
        let ptr = slice.leak();
        // SAFETY: `ptr` is the allocation just released from a CudaSlice<u64> of len / 2
        // elements, i.e. exactly `len` u32 words, and every bit pattern is a valid u32;
        // nobody else owns it after `leak`, and the new slice frees it when dropped.
        let slice = unsafe { stream.upgrade_device_ptr::<u32>(ptr, len) };
        DeviceBuffer { slice, reservation }
    }
}

/// Maps a driver call that failed to get device memory (`call`) to `OutOfMemory` (with the
/// free bytes now) or `Driver`.
pub(crate) fn device_memory_error(
    gpu: &Gpu,
    call: &'static str,
    requested_bytes: u64,
    code: DriverError,
) -> GpuError {
    if code.0 == CUresult::CUDA_ERROR_OUT_OF_MEMORY {
        GpuError::OutOfMemory {
            requested_bytes,
            free_bytes: gpu.free_bytes(),
        }
    } else {
        GpuError::Driver { call, code }
    }
}

impl Gpu {
    /// Charges `bytes` to the VRAM budget (category `Device`) without waiting.
    pub fn reserve_vram(&self, bytes: u64, label: &str) -> Result<Reservation, GpuError> {
        self.vram_budget()
            .try_reserve(bytes, Category::Device, label)
            .map_err(|source| GpuError::Budget {
                label: label.to_owned(),
                source,
            })
    }

    /// A zero-filled device buffer of `len` elements, charged to the VRAM budget first.
    pub fn alloc_zeros<T: DeviceRepr + ValidAsZeroBits>(
        &self,
        len: usize,
        label: &str,
    ) -> Result<DeviceBuffer<T>, GpuError> {
        self.charged(len, label, |stream| stream.alloc_zeros::<T>(len))
    }

    /// `alloc` of `len` elements on this handle's stream, charged to the VRAM budget first
    /// (the charge returned if the allocation fails).
    fn charged<T>(
        &self,
        len: usize,
        label: &str,
        alloc: impl Fn(&Arc<CudaStream>) -> Result<CudaSlice<T>, DriverError>,
    ) -> Result<DeviceBuffer<T>, GpuError> {
        let bytes = size_bytes::<T>(len)?;
        let reservation = self.reserve_vram(bytes, label)?;
        let slice = self.driver_alloc(bytes, alloc)?;
        Ok(DeviceBuffer { slice, reservation })
    }

    /// The driver's allocation of `bytes` (already charged), asked once more after the
    /// stream-ordered pool gives back the freed memory it keeps ([`crate::VramPool::KEEP`])
    /// if the driver ran out: that memory is charged to no budget, so it must never make
    /// an allocation the budget admitted fail.
    fn driver_alloc<T>(
        &self,
        bytes: u64,
        alloc: impl Fn(&Arc<CudaStream>) -> Result<CudaSlice<T>, DriverError>,
    ) -> Result<CudaSlice<T>, GpuError> {
        match alloc(self.stream()) {
            Ok(slice) => Ok(slice),
            Err(e) if e.0 == CUresult::CUDA_ERROR_OUT_OF_MEMORY && self.trim_pool() => {
                alloc(self.stream()).map_err(|e| device_memory_error(self, "cuMemAlloc", bytes, e))
            }
            Err(e) => Err(device_memory_error(self, "cuMemAlloc", bytes, e)),
        }
    }

    /// A device buffer of `len` plain words whose contents are unspecified until written,
    /// charged to the VRAM budget first: for a buffer a copy or a kernel fills entirely.
    /// Nothing is queued (no fill), so it never waits behind kernels running on the
    /// device; every bit pattern is a valid `T`, so reading it early gives arbitrary values,
    /// never undefined behaviour.
    pub fn alloc_for_overwrite<T: DeviceRepr + bytemuck::Pod>(
        &self,
        len: usize,
        label: &str,
    ) -> Result<DeviceBuffer<T>, GpuError> {
        // SAFETY: `T` is plain data (`Pod`): any bytes the allocation holds are a valid `T`.
        self.charged(len, label, |stream| unsafe { stream.alloc::<T>(len) })
    }

    /// A device buffer holding a copy of `data`, charged to the VRAM budget first.
    pub fn upload<T: DeviceRepr>(
        &self,
        data: &[T],
        label: &str,
    ) -> Result<DeviceBuffer<T>, GpuError> {
        let bytes = size_bytes::<T>(data.len())?;
        let reservation = self.reserve_vram(bytes, label)?;
        // SAFETY: the uninitialised buffer is fully overwritten by the copy queued right
        // after it on the same stream, before anything can read it.
        let mut slice =
            self.driver_alloc(bytes, |stream| unsafe { stream.alloc::<T>(data.len()) })?;
        self.stream()
            .memcpy_htod(data, &mut slice)
            .map_err(GpuError::driver("cuMemcpyHtoDAsync"))?;
        Ok(DeviceBuffer { slice, reservation })
    }

    /// Copies `src` into `dst` (same length) on the device's stream.
    pub fn copy_to_device<T: DeviceRepr>(
        &self,
        src: &[T],
        dst: &mut DeviceBuffer<T>,
    ) -> Result<(), GpuError> {
        if src.len() != dst.len() {
            return Err(GpuError::LengthMismatch {
                what: "host-to-device copy (elements)",
                expected: dst.len(),
                found: src.len(),
            });
        }
        self.stream()
            .memcpy_htod(src, &mut dst.slice)
            .map_err(GpuError::driver("cuMemcpyHtoDAsync"))
    }

    /// Copies a device buffer back into a new `Vec` (waits for the stream).
    ///
    /// Waits for the stream's queued work first (`cuStreamSynchronize`), then copies: a
    /// copy into pageable memory is synchronous, and a thread waiting inside it for the
    /// kernels ahead of it holds up other threads' copy calls on the device (measured in
    /// the prover: a 32 MiB host-to-device copy queued from another thread returned only
    /// when a 20 ms MSM's download did).
    pub fn download<T: DeviceRepr>(&self, src: &DeviceBuffer<T>) -> Result<Vec<T>, GpuError> {
        self.stream()
            .synchronize()
            .map_err(GpuError::driver("cuStreamSynchronize"))?;
        self.stream()
            .clone_dtoh(&src.slice)
            .map_err(GpuError::driver("cuMemcpyDtoHAsync"))
    }

    /// Copies the first `dst.len()` elements of `src` into `dst` (waits for the stream):
    /// for a reader that needs a prefix of a large buffer in memory it has charged itself.
    /// A `dst` longer than `src` is [`GpuError::LengthMismatch`] and copies nothing.
    ///
    /// Waits for the stream's queued work first, as [`Gpu::download`] does and for the
    /// same reason; a copy into pageable memory has finished when it returns.
    pub fn copy_prefix_to_host<T: DeviceRepr>(
        &self,
        src: &DeviceBuffer<T>,
        dst: &mut [T],
    ) -> Result<(), GpuError> {
        if dst.len() > src.len() {
            return Err(GpuError::LengthMismatch {
                what: "device-to-host copy (elements, at most the buffer's)",
                expected: src.len(),
                found: dst.len(),
            });
        }
        // Nothing to copy: no driver call (and no zero-byte copy to specify).
        if dst.is_empty() {
            return Ok(());
        }
        self.stream()
            .synchronize()
            .map_err(GpuError::driver("cuStreamSynchronize"))?;
        self.stream()
            .memcpy_dtoh(&src.slice.slice(..dst.len()), dst)
            .map_err(GpuError::driver("cuMemcpyDtoHAsync"))
    }

    /// Page-locked host memory for `len` elements, zero-filled, paid for by `reservation`
    /// (taken from the host budget by the caller, normally category `PinnedPool`).
    ///
    /// Flags: `CU_MEMHOSTALLOC_PORTABLE` only. Portable makes the buffer pinned for every
    /// context, so one pool serves all GPUs. cudarc's `alloc_pinned` would add
    /// `WRITECOMBINED`, which makes CPU reads uncached (an order of magnitude slower):
    /// wrong for buffers the host also reads (SRS parsing, results). Not `DEVICEMAP`:
    /// kernels read device copies, never host memory over the bus.
    ///
    /// Cost: pinning is slow (the kernel faults in and locks every page) and the zero fill
    /// touches every byte once, so allocate pinned buffers once and reuse them.
    pub fn alloc_pinned<T: DeviceRepr + ValidAsZeroBits + Copy>(
        &self,
        len: usize,
        reservation: Reservation,
    ) -> Result<PinnedBuffer<T>, GpuError> {
        // cudarc asserts on the pointer the driver returns, and a zero-byte cuMemHostAlloc
        // is not specified to return one: refuse it here, typed.
        if len == 0 {
            return Err(GpuError::EmptyAllocation {
                what: "pinned host buffer",
            });
        }
        let needed_bytes = size_bytes::<T>(len)?;
        if reservation.bytes() < needed_bytes {
            return Err(GpuError::ReservationTooSmall {
                what: "pinned host buffer",
                needed_bytes,
                reserved_bytes: reservation.bytes(),
            });
        }
        // SAFETY: the size is checked above (cudarc asserts it); the memory is zero-filled
        // below before any read, and all-zero bits are a valid `T` (`ValidAsZeroBits`).
        let mut host = unsafe {
            self.context()
                .alloc_pinned_with_flags::<T>(len, sys::CU_MEMHOSTALLOC_PORTABLE)
        }
        .map_err(|code| {
            if code.0 == CUresult::CUDA_ERROR_OUT_OF_MEMORY {
                GpuError::OutOfMemory {
                    requested_bytes: needed_bytes,
                    free_bytes: 0,
                }
            } else {
                GpuError::Driver {
                    call: "cuMemHostAlloc",
                    code,
                }
            }
        })?;
        let ptr = host
            .as_mut_ptr()
            .map_err(GpuError::driver("cuEventSynchronize"))?;
        // SAFETY: `ptr` points to `len` elements of `T` just allocated and owned by `host`;
        // writing bytes (not reading) is valid on uninitialised memory.
        unsafe { std::ptr::write_bytes(ptr, 0, len) };
        Ok(PinnedBuffer { host, reservation })
    }
}

/// Page-locked (pinned) host memory, portable across contexts and not write-combined (see
/// [`Gpu::alloc_pinned`]), charged to the host budget through the reservation it owns.
/// Use [`PinnedBuffer::host_slice`] as the source or destination of cudarc copies.
pub struct PinnedBuffer<T> {
    host: PinnedHostSlice<T>,
    reservation: Reservation,
}

impl<T> std::fmt::Debug for PinnedBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedBuffer")
            .field("len", &self.host.len())
            .field("reserved_bytes", &self.reservation.bytes())
            .finish()
    }
}

impl<T: ValidAsZeroBits> PinnedBuffer<T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.host.len()
    }
    /// Whether it holds no elements.
    pub fn is_empty(&self) -> bool {
        self.host.len() == 0
    }
    /// The reservation paying for it.
    pub fn reservation(&self) -> &Reservation {
        &self.reservation
    }
    /// The contents, after any copy queued on it has finished.
    pub fn as_slice(&self) -> Result<&[T], GpuError> {
        self.host
            .as_slice()
            .map_err(GpuError::driver("cuEventSynchronize"))
    }
    /// The contents, mutably, after any copy queued on it has finished.
    pub fn as_mut_slice(&mut self) -> Result<&mut [T], GpuError> {
        self.host
            .as_mut_slice()
            .map_err(GpuError::driver("cuEventSynchronize"))
    }
    /// The cudarc pinned slice (a `HostSlice`), for `memcpy_htod` / `memcpy_dtoh`.
    pub fn host_slice(&self) -> &PinnedHostSlice<T> {
        &self.host
    }
    /// The cudarc pinned slice, mutably.
    pub fn host_slice_mut(&mut self) -> &mut PinnedHostSlice<T> {
        &mut self.host
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_overflow_is_typed() {
        assert_eq!(size_bytes::<u64>(3).unwrap(), 24);
        let err = size_bytes::<u64>(usize::MAX / 4).unwrap_err();
        assert!(
            matches!(
                err,
                GpuError::SizeOverflow {
                    element_bytes: 8,
                    ..
                }
            ),
            "{err}"
        );
    }
}
