//! The crate's one error type.

use thiserror::Error;

/// Why an MSM was refused. Bad input is reported, never a panic.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MsmError {
    /// Without a density mask every scalar needs its own base.
    #[error("{n_bases} bases but {n_scalars} scalars (they must be equal without a density mask)")]
    LengthMismatch {
        /// Number of bases passed.
        n_bases: usize,
        /// Number of scalars passed.
        n_scalars: usize,
    },
    /// A density mask has one bit per scalar.
    #[error("density mask has {mask_len} bits but there are {n_scalars} scalars")]
    DensityLengthMismatch {
        /// Bits in the mask.
        mask_len: usize,
        /// Number of scalars passed.
        n_scalars: usize,
    },
    /// With a density mask there is one base per set bit.
    #[error("density mask selects {n_selected} bases but {n_bases} bases were passed")]
    DensityBasesMismatch {
        /// Set bits in the mask.
        n_selected: usize,
        /// Number of bases passed.
        n_bases: usize,
    },
    /// In a batch every scalar vector must have the same length.
    #[error("batch scalar vector {index} has {found} scalars, expected {expected}")]
    BatchLengthMismatch {
        /// Position of the offending vector in the batch.
        index: usize,
        /// Length of the first vector.
        expected: usize,
        /// Length of this vector.
        found: usize,
    },
    /// Term indices are stored as `u32`.
    #[error("{n_terms} terms exceed the supported maximum of {max_terms}")]
    TooManyTerms {
        /// Terms requested.
        n_terms: usize,
        /// Largest supported count.
        max_terms: usize,
    },
    /// A base in bls-repr's layout has a coordinate that is not a reduced field element
    /// (never the case for points from this workspace's parsers).
    #[error("base {index} has a coordinate that is not reduced modulo p")]
    BaseNotReduced {
        /// Position of the base in the slice passed.
        index: usize,
    },
    /// A window size outside `1..=MAX_WINDOW_BITS` was configured.
    #[error("window of {window_bits} bits is outside 1..={max_bits}")]
    BadWindow {
        /// Requested window size.
        window_bits: u32,
        /// Largest supported window.
        max_bits: u32,
    },
    /// `scalars_in_flight` must be at least 1.
    #[error("scalars_in_flight must be at least 1, got {scalars_in_flight}")]
    BadSliceLength {
        /// The configured value.
        scalars_in_flight: usize,
    },
    /// A density mask built from words had bits set past its length.
    #[error("density mask of {len} bits has bits set past its end (word {word_index})")]
    DensityTrailingBits {
        /// Declared length in bits.
        len: usize,
        /// Index of the last word, the one with stray bits.
        word_index: usize,
    },
    /// Not enough words for the declared number of bits.
    #[error("density mask of {len} bits needs {expected_words} words, found {found_words}")]
    DensityWordCount {
        /// Declared length in bits.
        len: usize,
        /// Words needed.
        expected_words: usize,
        /// Words passed.
        found_words: usize,
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
