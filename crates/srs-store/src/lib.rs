//! Groth16 parameter files (the SRS), loaded under the memory budget at their true peak.
//!
//! Reads the `.params` layout written by `groth16::Parameters::write` (the bellman /
//! bellperson / Filecoin layout: verifying key, then `h`, `l`, `a`, `b_g1`, `b_g2`, each a
//! big-endian u32 count and uncompressed points) into the `bls-repr` layout.
//!
//! # Example
//! Write a small circuit's parameters with `groth16`, then map the file, load it under a
//! budget (charged while it lives) and see a truncated copy refused:
//! ```
//! use bellman::{Circuit, ConstraintSystem, SynthesisError};
//! use bls12_381::{Bls12, Scalar};
//! use memory_budget::Budget;
//! use rand::{rngs::StdRng, SeedableRng};
//! use srs_store::{LoadOptions, ParamsFile, SrsError};
//!
//! /// Knowledge of x with x·x = y, y public.
//! struct Square;
//! impl Circuit<Scalar> for Square {
//!     fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
//!         let x = cs.alloc(|| "x", || Ok(Scalar::from(3)))?;
//!         let y = cs.alloc_input(|| "y", || Ok(Scalar::from(9)))?;
//!         cs.enforce(|| "x*x", |lc| lc + x, |lc| lc + x, |lc| lc + y);
//!         Ok(())
//!     }
//! }
//!
//! let params = groth16::generate_random_parameters::<Bls12, _, _>(Square, &mut StdRng::seed_from_u64(1))?;
//! let mut bytes = Vec::new();
//! params.write(&mut bytes)?;
//! let path = std::env::temp_dir().join(format!("srs-store-doc-{}.params", std::process::id()));
//! std::fs::write(&path, &bytes)?;
//!
//! // Opening walks the section headers; nothing proportional to the file is allocated.
//! let file = ParamsFile::open(&path)?;
//! let budget = Budget::fixed(1 << 30);
//! let loaded = file.load(&budget, &LoadOptions::default())?;
//! assert_eq!(loaded.l_query().len(), params.l.len());
//! assert_eq!(budget.used_bytes(), loaded.charged_bytes());
//! drop(loaded);
//! assert_eq!(budget.used_bytes(), 0);
//!
//! // One byte short: a typed error naming the section, never a panic.
//! std::fs::write(&path, &bytes[..bytes.len() - 1])?;
//! assert!(matches!(ParamsFile::open(&path), Err(SrsError::SectionTruncated { .. })));
//! std::fs::remove_file(&path)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Guarantees
//! - [`ParamsFile::open`] maps the file and walks all six section headers with checked
//!   arithmetic before anything proportional to the file is allocated: the counts must
//!   account for every byte (G1 = 96, G2 = 192 bytes per point), else a typed error names the
//!   section and byte offset.
//! - A load charges its peak (destination + two windows of mapped pages: the one being
//!   converted and the one being prefetched) to the budget before the first byte is copied,
//!   converts window by window in parallel, unmaps each window's pages behind it, and
//!   shrinks the reservation to the steady size at the end. Any error drops everything
//!   allocated and charged so far.
//! - Destinations ([`Destination`]): pageable host memory; pinned host memory from
//!   `gpu-device` (paid for by a share of the load's host reservation); device memory charged
//!   to the GPU's VRAM budget, filled through one reused host staging window.
//! - Every point's encoding is parsed strictly and points at infinity are rejected (as the
//!   reference reader does); curve and subgroup checks are selectable ([`PointCheck`]).
//!   Failures name the section, index and byte offset. Bad input never panics.
//! - [`SrsStore`]: single-flight `get_or_load` by circuit id and file fingerprint, LRU per
//!   tier, an evictor registered with the budget that only drops unheld entries idle for the
//!   configured minimum, explicit `preload`/`evict`, and the verifying key without a load.
//!
//! # Non-goals
//! - No direct disk-to-VRAM path (GPUDirect Storage): device loads stage through host memory.
//! - The store's device tier is evicted by the VRAM budget only once
//!   [`SrsStore::register_device_budget`] has been called for that GPU.
//! - Files are treated as immutable while open (rewriting a mapped file is not detected
//!   until the next `get_or_load` compares fingerprints).
//! - No compressed-point files and no writing of parameter files.
//!
//! # Cost model
//! Header validation touches at most seven pages. A load reads the file once sequentially;
//! with [`PointCheck::None`] it is bound by memory bandwidth and the Fp conversion to
//! Montgomery form; `Curve` adds a few field multiplications per point; `Full` adds a
//! subgroup check (tens of microseconds per point), which dominates for large files.
//! Fresh destination pages are zero-filled by the kernel on first touch; on this VM that is
//! as costly as the conversion itself (see the benchmark). Resident memory during a load
//! stays near destination + 2 x `chunk_bytes` (64 MiB each by default).

#![warn(missing_docs)]

mod error;
pub mod layout;
mod load;
pub mod metrics;
mod store;
pub mod zkey;

pub use error::{Result, SrsError};
pub use layout::{ExpectedSizes, ParamsLayout, Section, SectionSpan};
pub use load::{
    Bases, Destination, InMemoryFill, LoadOptions, LoadPlan, LoadStats, LoadedParams, PageCache,
    ParamsFile, PointCheck, VerifyingKeyRepr, DEFAULT_CHUNK_BYTES,
};
pub use store::{
    read_verifying_key, EntryStatus, SrsHandle, SrsSpec, SrsStore, StoreConfig, StoreStats, Tier,
};
pub use zkey::{ZkeyFile, ZkeyLayout, ZkeyParams, ZkeySection};
