//! Kernels' local memory is charged before the context is made to reserve it: the G1 affine
//! accumulation (22.6 KB a thread on sm_90) is the kernel that needs more than the default
//! stack. A budget too small for the charge is a typed error and leaves nothing recorded;
//! a budget with room takes exactly the per-thread bytes beyond the initial stack x the
//! threads the device holds, once.

use gpu_device::testing::gpu_or_skip;
use gpu_device::{Entry, Gpu, GpuConfig, GpuError};

const KERNEL: Entry = Entry::G1AccumulateChunksAffine;

#[test]
fn gpu_local_memory_refused_by_a_small_budget_is_a_budget_error() {
    let Some(gpu) = gpu_or_skip("local-memory") else {
        return;
    };
    // A budget of 256 MiB: the device's total less a margin of everything else.
    let total = gpu.info().total_memory_bytes;
    let small = Gpu::open_with(
        0,
        GpuConfig {
            vram_margin_bytes: Some(total - (256 << 20)),
            ..GpuConfig::default()
        },
    )
    .unwrap();
    assert!(small.vram_budget().total_bytes() <= 256 << 20);
    let f = small.function(KERNEL).unwrap();
    let err = small
        .reserve_local_memory(&f, "test: affine local memory")
        .unwrap_err();
    assert!(matches!(err, GpuError::Budget { .. }), "{err}");
    let info = small.local_memory();
    assert_eq!(
        (info.per_thread_bytes, info.charged_bytes),
        (0, 0),
        "{info:?}"
    );
    assert_eq!(small.vram_budget().snapshot().used_bytes, 0);
}

#[test]
fn gpu_local_memory_is_charged_once_per_thread_the_device_holds() {
    let Some(gpu) = gpu_or_skip("local-memory") else {
        return;
    };
    let f = gpu.function(KERNEL).unwrap();
    let per_thread = f
        .get_attribute(
            cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES,
        )
        .unwrap() as u64;
    eprintln!("{KERNEL:?}: {per_thread} bytes of local memory a thread");
    gpu.reserve_local_memory(&f, "test: affine local memory")
        .unwrap();
    let info = gpu.local_memory();
    eprintln!("{info:?}");
    assert_eq!(info.per_thread_bytes, per_thread);
    // The charge is what the frame adds to the context's initial stack, for each thread the
    // device can hold (every SM of a CUDA device holds at least 1024).
    let extra = per_thread - info.initial_per_thread_bytes;
    let threads = info.charged_bytes / extra;
    assert_eq!(info.charged_bytes, threads * extra);
    assert!(
        threads >= u64::from(gpu.info().sm_count) * 1024,
        "{threads} threads"
    );
    assert_eq!(gpu.vram_budget().snapshot().used_bytes, info.charged_bytes);
    // Asking again for the same kernel charges nothing more.
    gpu.reserve_local_memory(&f, "test: affine local memory")
        .unwrap();
    assert_eq!(gpu.local_memory(), info);
    assert_eq!(gpu.vram_budget().snapshot().used_bytes, info.charged_bytes);
}
