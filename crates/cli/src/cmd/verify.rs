//! `pinion verify`: a proof against the verifying key at the start of a parameter file.

use std::path::Path;

use anyhow::{bail, Context};
use bls12_381::{Bls12, Scalar};
use groth16::{Proof, VerifyingKey};
use pinion::statement;
use serde_json::json;

use crate::Outcome;

/// Reads a `public.json`: an array of decimal strings (plain integers are accepted too).
pub fn read_public(path: &Path) -> anyhow::Result<Vec<Scalar>> {
    let bytes = std::fs::read(path)
        .with_context(|| format!("cannot read public values {}", path.display()))?;
    statement::parse_public(&bytes)
        .with_context(|| format!("public values {} are not usable", path.display()))
}

/// Reads a 192-byte proof (points checked: on the curve, in the subgroup, not the identity).
pub fn read_proof(path: &Path) -> anyhow::Result<Proof<Bls12>> {
    let bytes =
        std::fs::read(path).with_context(|| format!("cannot read proof {}", path.display()))?;
    statement::parse_proof(&bytes)
        .with_context(|| format!("proof {} is not usable", path.display()))
}

/// Reads the verifying key of a parameter file (header walk, every point checked, the
/// identity refused: the message `pinion srs inspect` gives).
pub fn read_vk(path: &Path) -> anyhow::Result<VerifyingKey<Bls12>> {
    statement::read_verifying_key(path)
        .with_context(|| format!("parameters {} are not usable", path.display()))
}

/// Verifies; prints the verdict.
pub fn run(params: &Path, proof: &Path, public: &Path, json: bool) -> anyhow::Result<Outcome> {
    let vk = read_vk(params)?;
    let proof = read_proof(proof)?;
    let inputs = read_public(public)?;
    if inputs.len() + 1 != vk.ic.len() {
        bail!(
            "{} holds {} public values, the verifying key of {} expects {}",
            public.display(),
            inputs.len(),
            params.display(),
            vk.ic.len() - 1
        );
    }
    let pvk = groth16::prepare_verifying_key(&vk);
    let verdict = groth16::verify_proof(&pvk, &proof, &inputs);
    if json {
        super::print_json(&json!({
            "valid": verdict.is_ok(),
            "error": verdict.as_ref().err().map(|e| e.to_string()),
        }));
    } else {
        match &verdict {
            Ok(()) => println!("valid"),
            Err(e) => println!("invalid: {e}"),
        }
    }
    Ok(if verdict.is_ok() {
        Outcome::Success
    } else {
        Outcome::Failure
    })
}
