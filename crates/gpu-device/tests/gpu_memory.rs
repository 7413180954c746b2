//! `Gpu::copy_prefix_to_host` copies exactly the first `dst.len()` elements of a device
//! buffer (none, some, all), leaves the rest of the host slice alone, and refuses a
//! destination longer than the buffer with a typed error, copying nothing.

use gpu_device::testing::gpu_or_skip;
use gpu_device::{Gpu, GpuError};

/// Copies `n` of the `len` values `0..len` (as u64 and as u32) and checks what arrived.
fn check(gpu: &Gpu, len: usize, n: usize) {
    let values: Vec<u64> = (0..len as u64).map(|i| i * 0x1_0000_0001 + 7).collect();
    let src = gpu.upload(&values, "test: prefix source").expect("upload");
    // One sentinel past the copy: it must stay.
    let mut dst = vec![u64::MAX; n + 1];
    gpu.copy_prefix_to_host(&src, &mut dst[..n])
        .unwrap_or_else(|e| panic!("copy {n} of {len}: {e}"));
    assert_eq!(&dst[..n], &values[..n], "copy {n} of {len}");
    assert_eq!(dst[n], u64::MAX, "copy {n} of {len}: wrote past the prefix");

    let words: Vec<u32> = values.iter().map(|&v| v as u32).collect();
    let src = gpu.upload(&words, "test: prefix source").expect("upload");
    let mut dst = vec![u32::MAX; n];
    gpu.copy_prefix_to_host(&src, &mut dst).expect("copy u32");
    assert_eq!(dst, words[..n], "copy {n} of {len} (u32)");
}

#[test]
fn gpu_copy_prefix_to_host_copies_the_prefix() {
    let Some(gpu) = gpu_or_skip("memory") else {
        return;
    };
    for (len, n) in [
        (1, 0),
        (1, 1),
        (1000, 1),
        (1000, 999),
        (1000, 1000),
        (1 << 20, 12345),
    ] {
        check(&gpu, len, n);
    }
}

#[test]
fn gpu_copy_prefix_to_host_longer_than_the_buffer_is_typed() {
    let Some(gpu) = gpu_or_skip("memory") else {
        return;
    };
    let src = gpu
        .upload(&[1u64, 2, 3], "test: short source")
        .expect("upload");
    let mut dst = [0u64; 4];
    let err = gpu.copy_prefix_to_host(&src, &mut dst).unwrap_err();
    assert!(
        matches!(
            err,
            GpuError::LengthMismatch {
                expected: 3,
                found: 4,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(dst, [0; 4], "nothing copied");
}
