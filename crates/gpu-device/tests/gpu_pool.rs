//! The device's stream-ordered pool under the default `VramPool::KEEP`: a freed buffer stays
//! mapped past a synchronization and the next allocation of its size maps nothing more,
//! while the VRAM budget charges only live buffers. Alone in its test binary: the pool is
//! the whole process's, so other tests' allocations would move its figures.

use gpu_device::testing::gpu_or_skip;

/// The default pool (`VramPool::KEEP`) keeps a freed buffer mapped past a synchronization, so
/// the next allocation of its size maps nothing more; the budget charges only what is live.
#[test]
fn gpu_default_pool_keeps_freed_memory_and_charges_only_live_buffers() {
    let Some(gpu) = gpu_or_skip("memory") else {
        return;
    };
    const LEN: usize = 64 << 20; // 256 MiB of u32
    let bytes = (LEN * 4) as u64;
    let charged_before = gpu.vram_budget().snapshot().used_bytes;
    let buf = gpu
        .alloc_zeros::<u32>(LEN, "test: kept buffer")
        .expect("alloc");
    assert_eq!(
        gpu.vram_budget().snapshot().used_bytes,
        charged_before + bytes
    );
    drop(buf);
    gpu.synchronize().expect("synchronize");
    assert_eq!(gpu.vram_budget().snapshot().used_bytes, charged_before);
    let kept = gpu.pool_bytes().expect("pool bytes");
    eprintln!("after the free: {kept:?}");
    assert!(
        kept.reserved_bytes - kept.used_bytes >= bytes,
        "{kept:?}: the freed {bytes} bytes are not kept"
    );
    let again = gpu
        .alloc_zeros::<u32>(LEN, "test: kept buffer again")
        .expect("alloc");
    gpu.synchronize().expect("synchronize");
    let after = gpu.pool_bytes().expect("pool bytes");
    eprintln!("after the second allocation: {after:?}");
    assert_eq!(
        after.reserved_bytes, kept.reserved_bytes,
        "the second allocation mapped more memory"
    );
    assert!(after.used_bytes >= bytes, "{after:?}");
    drop(again);
}
