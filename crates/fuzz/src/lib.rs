//! In-process mutation fuzzing of every Pinion parser and entry point that reads outside
//! data: parameter files, the verifying key `pinion verify` reads, circom `.r1cs` and
//! `.wtns`, PCE files, 192-byte proofs and public values.
//!
//! `cargo xtask fuzz` builds the `pinion-fuzz` binary and runs it. A supervisor starts one
//! worker process per job; each worker builds the seed files from the run's seed
//! ([`Fixtures`]: a small circom circuit, its witness, parameters, proof, public values and
//! PCE files), then makes input after input from them ([`mutate`]) and calls each
//! [`Target`] in-process. Adding a parser is one [`Target`] and one line in [`registry`].
//!
//! # Example
//! Every target accepts its unmutated seeds; one mutated input runs like the workers run it:
//! ```
//! use std::sync::Arc;
//! use groth16_prover::testing::SplitMix;
//! use pinion_fuzz::{mutate, registry, run_input, Fixtures, Verdict};
//!
//! let dir = std::env::temp_dir().join(format!("pinion-fuzz-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir)?;
//! let fx = Arc::new(Fixtures::new(7, &dir)?);
//! let input = dir.join("input");
//! for target in registry(&fx) {
//!     for seed in target.seeds() {
//!         let verdict = run_input(&*target, &seed.bytes, &input, 1 << 28)?;
//!         assert_eq!(verdict, Verdict::Accepted, "{} {}", target.name(), seed.name);
//!     }
//! }
//! let proof = registry(&fx).into_iter().find(|t| t.name() == "proof").unwrap();
//! let seed = &proof.seeds()[0];
//! let bytes = mutate::mutate(seed, &mut SplitMix::new(1), Some(mutate::Mutation::BitFlip));
//! let verdict = run_input(&*proof, &bytes, &input, 1 << 28)?;
//! assert!(!matches!(verdict, Verdict::WronglyAccepted(_)));
//! std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Guarantees
//! - Every input runs under a time cap (the supervisor kills a worker whose input runs
//!   past it) and a memory cap: a counting allocator refuses any allocation that takes the
//!   input's live heap past the heap cap, and the worker's address space is limited
//!   (`RLIMIT_AS`). Each input gets a fresh `memory_budget::Budget` and must leave nothing
//!   charged.
//! - A finding is a panic (failed assertions included: a target asserts the guarantees of
//!   its entry point), a hang, a signal death, a memory-cap overrun, or a mutated proof or
//!   statement accepted as valid ([`Verdict::WronglyAccepted`]; Groth16's known
//!   malleability `(A, B, C) -> (-A, -B, C)` is excluded and counted apart). Its input is
//!   saved with a note saying how to replay it; the run exits non-zero.
//! - Inputs are a pure function of the seed and their index ([`worker::make_input`]), and
//!   the seed files of the seed, so a saved input replays (`pinion-fuzz replay`) and can
//!   become a regression test (`crates/fuzz/regressions/`).
//!
//! # Non-goals
//! No coverage feedback (inputs are blind mutations of seeds that know their formats'
//! layouts), no GPU entry points, no network input (a gRPC target joins when the daemon
//! does).
//!
//! # Cost model
//! About 400 inputs a second per core (12,000 in 13–16 s with two workers on the 2-core
//! CI machine kind): most mutated inputs are refused by a header check; the expensive ones
//! are those that decode (pairings for proofs and keys, subgroup checks and a proof for
//! parameter files). The workers are the parallelism (one rayon thread each); a worker
//! builds its seed files in well under a second, again after each hang or death.
#![warn(missing_docs)]
#![deny(unsafe_code)]

pub mod caps;
pub mod fixtures;
pub mod mutate;
pub mod supervisor;
mod targets;
pub mod worker;

pub use fixtures::Fixtures;
pub use targets::{canaries, registry, select, Input, Target, Verdict};
pub use worker::run_input;
