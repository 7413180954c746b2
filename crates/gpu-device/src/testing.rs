//! Helpers for GPU tests (integration tests named `tests/gpu_*.rs`).
//!
//! ```no_run
//! # fn main() {
//! let Some(gpu) = gpu_device::testing::gpu_or_skip("field") else { return };
//! // ... run kernels on `gpu`, check against a CPU oracle ...
//! # let _ = gpu;
//! # }
//! ```

use std::io::Write;

use crate::{Gpu, GpuError};

/// Device 0 when a CUDA driver and device exist; otherwise writes
/// `skipped: no CUDA driver (<group>)` straight to stderr, which the test harness does not
/// capture, and returns `None`. A machine with a driver but no device gets the same line
/// with `: driver loaded, no device` appended, so one pattern finds every skip.
///
/// A driver that is present but fails (a broken install, a device that cannot be
/// opened) panics with the error: a GPU test must never pass silently on a GPU machine.
/// With `PINION_REQUIRE_GPU=1` (set by `cargo xtask test` on a machine with a driver, and by
/// the GPU bundle's runner) a missing driver or device panics too, instead of skipping.
pub fn gpu_or_skip(group: &str) -> Option<Gpu> {
    let required = std::env::var("PINION_REQUIRE_GPU").is_ok_and(|v| v == "1");
    match Gpu::open(0) {
        Ok(gpu) => Some(gpu),
        Err(e @ (GpuError::NoDriver | GpuError::NoDevice { .. })) if required => {
            panic!("GPU test group {group}: PINION_REQUIRE_GPU=1 but no GPU is usable: {e}")
        }
        Err(GpuError::NoDriver) => {
            skip_line(&format!("skipped: no CUDA driver ({group})"));
            None
        }
        Err(GpuError::NoDevice { .. }) => {
            skip_line(&format!(
                "skipped: no CUDA driver ({group}): driver loaded, no device"
            ));
            None
        }
        Err(e) => panic!("GPU test group {group}: opening device 0 failed: {e}"),
    }
}

fn skip_line(line: &str) {
    let mut stderr = std::io::stderr();
    // A failed write to stderr has nowhere better to go; the test result still shows.
    let _ = writeln!(stderr, "{line}");
}
