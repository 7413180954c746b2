//! Domain constants shared by every backend: roots of unity, the coset shift, sizes.

use bls12_381::Scalar;
use ff::PrimeField;

use crate::NttError;

/// Largest supported transform: 2^28 elements (the field's two-adicity is 32).
pub const MAX_LOG_N: u32 = 28;

/// The coset shift g used by every coset transform and by the H step: the field's
/// multiplicative generator (7), the same constant bellman's `EvaluationDomain` uses.
pub fn coset_shift() -> Scalar {
    Scalar::MULTIPLICATIVE_GENERATOR
}

/// ω for a domain of 2^`log_n` points: `ROOT_OF_UNITY` squared `32 - log_n` times,
/// exactly as bellman derives it (so both pick the same primitive root).
pub fn omega(log_n: u32) -> Scalar {
    let mut w = Scalar::ROOT_OF_UNITY;
    for _ in log_n..Scalar::S {
        w = w.square();
    }
    w
}

/// log2 of a transform length; errors when it is not a power of two or too large.
pub fn log2_len(len: usize) -> Result<u32, NttError> {
    if !len.is_power_of_two() {
        return Err(NttError::NotPowerOfTwo { len });
    }
    let log_n = len.trailing_zeros();
    if log_n > MAX_LOG_N {
        return Err(NttError::TooLarge {
            len,
            max_len: 1 << MAX_LOG_N,
        });
    }
    Ok(log_n)
}

/// The H step's domain size for `n_constraints` rows (groth16 counts its input rows
/// `x·0 = 0` too): the next power of two, and 1 for no rows, as bellman pads.
pub fn h_domain_size(n_constraints: usize) -> Result<usize, NttError> {
    let m = n_constraints
        .max(1)
        .checked_next_power_of_two()
        .ok_or(NttError::TooLarge {
            len: n_constraints,
            max_len: 1 << MAX_LOG_N,
        })?;
    log2_len(m)?;
    Ok(m)
}

/// Position of logical index `i` in bit-reversed order of 2^`log_n` elements.
pub fn bit_reverse(i: usize, log_n: u32) -> usize {
    if log_n == 0 {
        0
    } else {
        i.reverse_bits() >> (usize::BITS - log_n)
    }
}
