//! How `pinion.v1` turns uploaded bytes into what the engine proves. The daemon knows no
//! circuit format: the `pinion` binary hands it its circom front end (`.r1cs` + `.wtns`),
//! tests hand it their own.

use std::sync::Arc;

use engine::Partition;
use memory_budget::{Budget, Reservation};
use pce_cache::{CircuitKey, PceCache, PceHandle};
use tokio::sync::OwnedSemaphorePermit;

use crate::DaemonError;

/// A circuit format.
pub trait Frontend: Send + Sync + 'static {
    /// The format's name (`circom`), shown in status.
    fn name(&self) -> &'static str;

    /// Parses a circuit description. `bytes` are already charged by the caller; what the
    /// parse keeps is charged by the front end through `budget` (a refusal is
    /// [`DaemonError::Budget`], bad bytes [`DaemonError::Unusable`]).
    fn load_circuit(
        &self,
        bytes: &[u8],
        budget: &Budget,
    ) -> Result<Box<dyn FrontendCircuit>, DaemonError>;
}

/// A parsed circuit, kept only while it is registered.
pub trait FrontendCircuit: Send {
    /// Public values of a proof (not counting the constant ONE).
    fn n_public(&self) -> u32;

    /// Constraints, for status.
    fn n_constraints(&self) -> u64;

    /// Records the constraint system into `pces` under `key` (charged by the cache).
    fn record(&self, pces: &PceCache, key: &CircuitKey) -> Result<PceHandle, DaemonError>;

    /// What reading this circuit's witnesses needs later (small; kept while the circuit is
    /// registered, after the parsed circuit itself is dropped).
    fn witness_reader(&self) -> Arc<dyn WitnessReader>;
}

/// Reads witnesses of one circuit.
pub trait WitnessReader: Send + Sync {
    /// Parses a witness into a partition for the engine. `charge` holds `witness.len()`
    /// bytes for the values (they must take no more; shrink it to what they take); the
    /// partition owns the values and the charge, and both go when the engine drops the
    /// partition (when its job ends).
    fn read(&self, witness: &[u8], charge: WitnessCharge) -> Result<Witness, DaemonError>;
}

/// A parsed witness.
pub struct Witness {
    /// Synthesizes the witness through the circuit's PCE.
    pub partition: Partition,
    /// The public values (outputs then inputs) as decimal strings.
    pub public_values: Vec<String>,
}

/// The bytes a queued job's witness holds: charged to the budget, and counted against
/// `[daemon] max_queued_bytes` (so queued witnesses never take the room running proofs
/// need). Released when dropped.
#[derive(Debug)]
pub struct WitnessCharge {
    reservation: Reservation,
    _queued: OwnedSemaphorePermit,
}

impl WitnessCharge {
    pub(crate) fn new(reservation: Reservation, queued: OwnedSemaphorePermit) -> WitnessCharge {
        WitnessCharge {
            reservation,
            _queued: queued,
        }
    }

    /// Bytes charged.
    pub fn bytes(&self) -> u64 {
        self.reservation.bytes()
    }

    /// Keeps `bytes` charged (at most what is charged) and returns the rest.
    pub fn shrink_to(&mut self, bytes: u64) {
        self.reservation.shrink_to(bytes);
    }
}
