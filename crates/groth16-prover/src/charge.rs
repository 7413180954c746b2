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
    /// Reserves `bytes` for `what` without waiting, after asking the budget's evictors
    /// (idle cache entries: keys, PCEs, staging buffers) to make room when it must.
    pub(crate) fn reserve(
        budget: &Budget,
        bytes: u64,
        what: &'static str,
    ) -> Result<Charge, ProverError> {
        let reservation = budget
            .request(bytes, Category::WorkingSet)
            .label(what)
            .reserve(Some(std::time::Duration::ZERO))
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

    /// Takes a reservation the caller made (e.g. an engine's admission, which may have
    /// waited for it) and makes it exactly `bytes`: growing without waiting when it is
    /// smaller, shrinking when it is larger. Re-categorised as the working set.
    pub(crate) fn adopt(
        mut reservation: Reservation,
        bytes: u64,
        what: &'static str,
    ) -> Result<Charge, ProverError> {
        reservation.set_category(Category::WorkingSet);
        let mut charge = Charge {
            peak: reservation.bytes(),
            reservation,
        };
        charge.set(bytes, what)?;
        Ok(charge)
    }

    /// Grows by `bytes` now (before the allocation it covers), without waiting, after
    /// asking the budget's evictors for room when it must (e.g. the staging pool's idle
    /// buffers that a, b and c just went back to).
    pub(crate) fn grow(&mut self, bytes: u64, what: &'static str) -> Result<(), ProverError> {
        let refused = |source| ProverError::Budget {
            what,
            requested_bytes: bytes,
            source,
        };
        if self.reservation.try_grow(bytes).is_err() {
            let budget = self.reservation.budget();
            let more = budget
                .request(bytes, Category::WorkingSet)
                .label(what)
                .reserve(Some(std::time::Duration::ZERO))
                .map_err(refused)?;
            self.reservation.merge(more).map_err(refused)?;
        }
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

    /// Shrinks to `bytes` when holding more (never grows).
    pub(crate) fn shrink_to(&mut self, bytes: u64) {
        if bytes < self.reservation.bytes() {
            self.reservation.shrink_to(bytes);
        }
    }

    /// The reservation, for a backend to take staging bytes from (they leave this charge
    /// for the backend's pool; the peak already counted them).
    pub(crate) fn reservation_mut(&mut self) -> &mut Reservation {
        &mut self.reservation
    }

    /// Bytes held now.
    pub(crate) fn bytes(&self) -> u64 {
        self.reservation.bytes()
    }

    /// The most this charge ever held.
    pub(crate) fn peak(&self) -> u64 {
        self.peak
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peak_is_remembered_and_bytes_return_on_drop() {
        let budget = Budget::fixed(1000);
        let mut c = Charge::reserve(&budget, 100, "t").unwrap();
        c.grow(300, "t").unwrap();
        c.release(250);
        c.set(50, "t").unwrap();
        assert_eq!((c.bytes(), c.peak()), (50, 400));
        c.set(700, "t").unwrap();
        assert_eq!(c.peak(), 700);
        assert!(matches!(
            c.grow(301, "more"),
            Err(ProverError::Budget {
                requested_bytes: 301,
                ..
            })
        ));
        assert_eq!(budget.used_bytes(), 700, "a refused growth changes nothing");
        drop(c);
        assert_eq!(budget.used_bytes(), 0);
        assert!(matches!(
            Charge::reserve(&budget, 2000, "too big"),
            Err(ProverError::Budget {
                requested_bytes: 2000,
                ..
            })
        ));
    }
}
