//! A proof's working-set reservation with its peak remembered.

use memory_budget::{Budget, Category, Reservation};

use crate::ProverError;

/// Bytes of one scalar in a, b, c, the witness and h.
pub(crate) const SCALAR_BYTES: u64 = 32;

/// The working-set reservation of one proof; shrinks as phases end, never below zero,
/// and remembers the most it held.
pub(crate) struct Charge {
    reservation: Reservation,
    peak: u64,
}

impl Charge {
    /// Reserves `bytes` (without waiting) for `what`.
    pub(crate) fn reserve(
        budget: &Budget,
        bytes: u64,
        what: &'static str,
    ) -> Result<Charge, ProverError> {
        let reservation = budget
            .try_reserve(bytes, Category::WorkingSet, what)
            .map_err(|source| ProverError::Budget {
                what,
                requested_bytes: bytes,
                source,
            })?;
        Ok(Charge {
            reservation,
            peak: bytes,
        })
    }

    /// Grows by `bytes` now (before the allocation it covers).
    pub(crate) fn grow(&mut self, bytes: u64, what: &'static str) -> Result<(), ProverError> {
        self.reservation
            .try_grow(bytes)
            .map_err(|source| ProverError::Budget {
                what,
                requested_bytes: bytes,
                source,
            })?;
        self.peak = self.peak.max(self.reservation.bytes());
        Ok(())
    }

    /// Returns `bytes` (after the memory they covered is freed).
    pub(crate) fn release(&mut self, bytes: u64) {
        self.reservation.release(bytes);
    }

    /// Grows or shrinks to exactly `bytes` (growing never waits).
    pub(crate) fn set(&mut self, bytes: u64, what: &'static str) -> Result<(), ProverError> {
        let held = self.reservation.bytes();
        if bytes > held {
            self.grow(bytes - held, what)
        } else {
            self.reservation.shrink_to(bytes);
            Ok(())
        }
    }

    /// The most this charge ever held.
    pub(crate) fn peak(&self) -> u64 {
        self.peak
    }
}
