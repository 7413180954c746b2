//! The fuzz targets: one [`Target`] per parser or entry point that reads outside data, and
//! the table of them ([`registry`]).
//!
//! # Adding a target
//! A new parser (a `.zkey` reader, snarkjs JSON, Filecoin C1 output, a gRPC message) gets
//! one struct implementing [`Target`] (its seeds, made from [`Fixtures`] or built in, and a
//! `run` that calls the entry point the way the product does) and one line in
//! [`registry`]. Guarantees a target checks beyond "returns" are assertions: a failed one
//! is a panic, which the harness records like any other.

mod canary;
mod circom;
mod grpc;
mod params;
mod pce;
mod statement;

use std::path::Path;
use std::sync::Arc;

use memory_budget::Budget;

use crate::fixtures::Fixtures;
use crate::mutate::Seed;

pub use canary::canaries;

/// One input as a target sees it.
pub struct Input<'a> {
    /// The bytes.
    pub bytes: &'a [u8],
    /// The same bytes in a file (for entry points that open or map files).
    pub path: &'a Path,
    /// A fresh budget for this input; the harness checks that nothing stays charged.
    pub budget: &'a Budget,
    /// A number for the target's own choices (check levels, chunk sizes, ...): a hash of
    /// the bytes, so a saved input replays with the same choices.
    pub knob: u64,
}

/// What an entry point made of an input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Refused with a typed error.
    Rejected,
    /// Accepted, rightly: the input means what a valid one means (or the format has no
    /// notion of validity beyond parsing).
    Accepted,
    /// A proof accepted that differs from the original only by Groth16's known
    /// malleability (see the `proof` target); excluded from findings, counted apart.
    Malleable,
    /// A mutated proof or statement accepted as valid: a finding.
    WronglyAccepted(String),
}

/// A parser or entry point under test.
pub trait Target: Send + Sync {
    /// Name used by `--target` and in findings.
    fn name(&self) -> &'static str;
    /// One line for `pinion-fuzz list`.
    fn about(&self) -> &'static str;
    /// The valid inputs to mutate.
    fn seeds(&self) -> Vec<Seed>;
    /// Adjusts a mutated input before it runs (recomputing checksums, so a mutation
    /// reaches the checks behind them). Default: nothing.
    fn fixup(&self, _bytes: &mut Vec<u8>, _knob: u64) {}
    /// Runs the entry point on one input.
    fn run(&self, input: &Input<'_>) -> Verdict;
}

/// Every target, in the order `list` shows them. Add new ones here.
pub fn registry(fx: &Arc<Fixtures>) -> Vec<Box<dyn Target>> {
    vec![
        Box::new(params::Params::new(fx)),
        Box::new(params::VerifyingKeyRead::new(fx)),
        Box::new(circom::R1csFile::new(fx)),
        Box::new(circom::WtnsFile::new(fx)),
        Box::new(pce::PceFile::new(fx)),
        Box::new(statement::ProofFile::new(fx)),
        Box::new(statement::PublicJson::new(fx)),
        Box::new(grpc::GrpcMessages),
    ]
}

/// The targets named in `names` (all of [`registry`] when empty; canaries only by name).
pub fn select(fx: &Arc<Fixtures>, names: &[String]) -> anyhow::Result<Vec<Box<dyn Target>>> {
    if names.is_empty() {
        return Ok(registry(fx));
    }
    let mut all: Vec<Box<dyn Target>> = registry(fx);
    all.extend(canaries());
    let mut picked = Vec::new();
    for name in names {
        let Some(i) = all.iter().position(|t| t.name() == name) else {
            let known: Vec<&str> = registry(fx).iter().map(|t| t.name()).collect();
            anyhow::bail!("unknown target {name:?}; targets: {}", known.join(", "));
        };
        picked.push(all.swap_remove(i));
    }
    Ok(picked)
}

/// A CPU prover over `key` with every proof verified before it is returned (the
/// configuration `pinion prove` uses); a refusal to start is a refusal of the input.
fn self_checking_prover(
    key: Arc<groth16_prover::ProvingKey>,
    budget: &Budget,
) -> Option<groth16_prover::Prover> {
    groth16_prover::Prover::new(
        key,
        budget.clone(),
        groth16_prover::ProverConfig {
            backend: groth16_prover::BackendChoice::Cpu,
            self_check: groth16_prover::SelfCheck::Always,
        },
    )
    .ok()
}
