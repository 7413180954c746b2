//! The Groth16 prover over BLS12-381: circuits in, `groth16::Proof<Bls12>` out, byte for
//! byte what `groth16::create_proof` gives for the same parameters, witness and (r, s).
//!
//! # Flow of one proof
//! 1. **Synthesis** ([`Synthesis`]): with a PCE (`pce-cache`, recorded once per circuit
//!    shape), witness-only synthesis and three sparse mat-vecs give the witness and a, b,
//!    c; without one, a, b, c are evaluated while the circuit runs, as groth16 does. Both
//!    append groth16's `input_i · 0 = 0` rows and use groth16's densities.
//! 2. **Witness check**: a·b = c on every row. A failing row is
//!    [`ProverError::Unsatisfied`] (the reference crate would return a proof that does not
//!    verify).
//! 3. **H** and the **MSMs** through a [`ProverBackend`]: H is gpu-ntt's `h_poly` (bellman's
//!    `EvaluationDomain` pipeline, truncated to m − 1 coefficients); the A and B MSMs skip the
//!    bases the densities mark unused, exactly as groth16 slices its queries.
//! 4. **Assembly** with (r, s) ([`Randomness`]: given, or drawn like
//!    `groth16::create_random_proof`), then the optional **self-check** ([`SelfCheck`],
//!    on by default for batches): `groth16::verify_proof` with the prepared verifying key;
//!    a failure names the partition.
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use groth16_prover::testing::MimcChain;
//! use groth16_prover::{Prover, ProverConfig, ProvingKey, Randomness, Synthesis};
//! use memory_budget::Budget;
//! use rand::SeedableRng;
//!
//! let mut rng = rand::rngs::StdRng::seed_from_u64(7);
//! let circuit = MimcChain::new(10, 1);
//! let params =
//!     groth16::generate_random_parameters::<bls12_381::Bls12, _, _>(circuit.clone(), &mut rng)?;
//! let budget = Budget::fixed(1 << 30);
//! let prover = Prover::new(
//!     Arc::new(ProvingKey::from_parameters(&params)),
//!     budget.clone(),
//!     ProverConfig::default(),
//! )?;
//! // Record the circuit once; every later proof is witness-only synthesis + mat-vec.
//! let pce = pce_cache::Pce::record(circuit.clone())?;
//! let rs = Randomness::random(&mut rng);
//! let out = prover.prove(Synthesis::Pce(&pce), circuit.clone(), rs)?;
//! let reference = groth16::create_proof(circuit.clone(), &params, rs.r, rs.s)?;
//! assert!(out.proof == reference);
//! groth16::verify_proof(prover.key().prepared_vk(), &out.proof, &[circuit.output()])?;
//! println!("{:?}, peak {} bytes", out.timings, out.peak_charged_bytes);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Guarantees
//! - Proofs equal the reference's for the same inputs (exact group arithmetic; the tests
//!   compare `Proof::write` bytes on several circuits and pairs (r, s)).
//! - **Memory**: each proof charges its working set to the [`memory_budget::Budget`]
//!   (`Category::WorkingSet`) before allocating it, sized from the circuit's real
//!   dimensions: on the PCE path witness + a, b, c (padded to the domain m) + the MSM
//!   scratch, all before synthesis; on the plain path the charge grows before each buffer
//!   does (a `Vec` reallocation is charged for old + new). After H the charge shrinks to
//!   witness + h + MSM scratch, after the MSMs to the public inputs, and it is returned
//!   when the proof is done. [`ProofOutput::peak_charged_bytes`] is the most it held plus
//!   the GPU backend's pinned staging pool peak ([`ProofOutput::pinned_staging_peak_bytes`]:
//!   the pool is charged under `Category::PinnedPool` before each buffer is pinned, keeps
//!   idle buffers charged until they are freed, and lets the budget evict them). The
//!   CPU backend's NTT twiddle table is charged for the backend's life (`Category::Other`);
//!   a key built from `srs-store` charges its converted bases (`Category::Srs`).
//!   Not charged: a `groth16::Parameters` the key shares (the caller's memory), and the
//!   circuit's own temporaries during synthesis (gadget values, bellman's linear
//!   combinations on the plain path, freed per constraint).
//! - A batch runs its partitions one after another, so its peak is one partition's.
//! - With a PCE, the circuit must be the one recorded: the variable counts are checked
//!   (`PceError::ShapeMismatch`) and any other difference shows up as
//!   [`ProverError::Unsatisfied`] or, with the self-check, [`ProverError::SelfCheckFailed`].
//! - Bad input is a typed [`ProverError`] naming sizes, query and partition; never a panic.
//!
//! # Backends
//! [`BackendChoice::Cpu`] gives [`CpuBackend`] (rayon: `gpu_ntt::CpuNtt` and
//! `gpu_msm::CpuMsm`, the MSMs one after another). [`BackendChoice::Gpu`] gives
//! [`GpuBackend`] (CUDA, device 0): H on the GPU (`gpu_ntt::GpuNtt`; a, b, c go through a
//! pinned staging pool and the a/b/c part of the working-set charge is released as soon as
//! they are staged; h stays on the device for the H MSM, [`HPoly::Backend`]), the `h`, `l`, `a`
//! and `b_g1` MSMs on G1 and the `b_g2` MSM on G2 on the GPU (b_g2 driven from a thread of
//! its own; in a small proof l, a and b_g1 too, beside H's MSM: [`SIDE_MSMS_UP_TO`]), over
//! bases uploaded once per [`ProvingKey`] and kept resident (charged to the device's VRAM
//! budget); a query the device cannot hold is streamed to it from a pinned
//! host copy (charged as `Category::Srs`), and runs on the CPU only when the host budget
//! refuses that copy too. Without a usable device, explicit `Gpu` is [`ProverError::GpuUnavailable`];
//! [`BackendChoice::Auto`] (the default) takes the GPU when device 0 opens, else the CPU.
//!
//! # Non-goals
//! No witness generation beyond the circuit's own code; no trusted setup ([`setup`] makes
//! insecure parameters for tests and benchmarks only).
//!
//! # Cost model (CPU)
//! Synthesis: the circuit's own cost (witness-only with a PCE). a, b, c: one pass over the
//! PCE's non-zeros. Witness check: m multiplications. H: 6 NTTs of size m. MSMs: see
//! `gpu-msm` (0 and 1 scalars, most of a Groth16 witness, cost one addition or nothing).
//! Memory: about `32·(n_inputs + n_aux) + 96·m` bytes during H, plus MSM scratch after.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod backend;
mod charge;
mod error;
mod gpu;
mod key;
mod plain;
mod prover;
pub mod setup;
pub mod testing;
pub mod timing_only;
mod zkey;

pub use backend::{
    backend_for, AbcStorage, BackendChoice, BackendCoeffs, BackendH, BackendKind, BackendOwned,
    BasesKind, CpuBackend, HOutput, HPoly, MsmInputs, MsmOutputs, MsmTimings, ProverBackend,
    QueryPlacement, StagedAbc, WitnessAbc,
};
pub use error::ProverError;
pub use gpu::{sparse_parts, GpuBackend, SIDE_MSMS_UP_TO};
pub use key::{
    verifying_key_from_repr, G1Query, GpuPlacement, HStep, KeyHold, KeySource, KeyView, ProvingKey,
    QueryBases, QueryLens,
};
pub use prover::{
    BatchOutput, Computed, ProofOutput, ProofShape, ProofTimings, Prover, ProverConfig, Randomness,
    SelfCheck, Synthesis, Synthesized,
};
pub use zkey::{WitnessCircuit, ZkeyProver};
