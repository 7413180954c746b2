//! The crate's one error type.

use thiserror::Error;

/// Why a transform or the H step was refused. Bad input is reported, never a panic.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum NttError {
    /// Transforms work on 2^k elements.
    #[error("transform length {len} is not a power of two")]
    NotPowerOfTwo {
        /// Length passed.
        len: usize,
    },
    /// Longer than `2^MAX_LOG_N` (the largest domain this crate supports).
    #[error("length {len} exceeds the largest supported domain of {max_len}")]
    TooLarge {
        /// Length passed (for the H step: the padded domain size).
        len: usize,
        /// Largest supported length.
        max_len: usize,
    },
    /// a, b and c of the H step must have one value per constraint each.
    #[error("{name} has {found} evaluations, expected {expected} (the length of a)")]
    LengthMismatch {
        /// Which vector: "b" or "c".
        name: &'static str,
        /// Length of a.
        expected: usize,
        /// Length of this vector.
        found: usize,
    },
    /// A GPU backend failed (device, driver, VRAM budget or out of memory); the
    /// backend's own error is flattened to text so that this type stays `Clone + Eq`.
    #[error("gpu backend {backend}: {message}")]
    Gpu {
        /// Which backend (e.g. `"cuda"`).
        backend: &'static str,
        /// What failed, with the device error's own context.
        message: String,
    },
}
