//! `pinion verify`: a proof (192 bytes or snarkjs's `proof.json`) against a verifying key
//! (the start of a parameter file, or snarkjs's `verification_key.json`).
//!
//! Exit status: 0 valid, 1 invalid, 2 unreadable or mismatched input (the caller maps an
//! error to 2; under `--json` the error is printed as JSON).

use std::path::Path;

use anyhow::{bail, Context};
use bls12_381::{Bls12, Scalar};
use groth16::{Proof, VerifyingKey};
use pinion::statement::{self, PROOF_BYTES};
use serde_json::json;

use crate::Outcome;

/// Where the verifying key comes from.
pub enum VkSource<'a> {
    /// A parameter file (its verifying key is at the start).
    Params(&'a Path),
    /// snarkjs's `verification_key.json`.
    Json(&'a Path),
}

/// Reads a `public.json`: an array of canonical decimal strings (see
/// `pinion::snarkjs::read_public`).
pub fn read_public(path: &Path) -> anyhow::Result<Vec<Scalar>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read public values {}", path.display()))?;
    pinion::snarkjs::read_public(&text)
        .with_context(|| format!("public values {} are not usable", path.display()))
}

/// Reads a proof: snarkjs's `proof.json` when the file is JSON, else the 192-byte
/// encoding (points checked: on the curve, in the subgroup, not the identity).
pub fn read_proof(path: &Path) -> anyhow::Result<Proof<Bls12>> {
    let bytes =
        std::fs::read(path).with_context(|| format!("cannot read proof {}", path.display()))?;
    let what = || format!("proof {} is not usable", path.display());
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{') {
        let text = String::from_utf8(bytes)
            .context("not utf-8")
            .with_context(what)?;
        return pinion::snarkjs::read_proof(&text).with_context(what);
    }
    if bytes.len() != PROOF_BYTES {
        if let Some(kind) = super::sniff(path) {
            bail!("proof {} is {kind}, not a proof", path.display());
        }
    }
    statement::parse_proof(&bytes).with_context(what)
}

/// Reads the verifying key of a parameter file (header walk, every point checked, the
/// identity refused: the message `pinion srs inspect` gives).
pub fn read_vk(path: &Path) -> anyhow::Result<VerifyingKey<Bls12>> {
    statement::read_verifying_key(path).map_err(|e| {
        super::name_format(
            anyhow::Error::new(e).context(format!("parameters {} are not usable", path.display())),
            path,
            "parameters",
        )
    })
}

/// Reads snarkjs's `verification_key.json`.
pub fn read_vk_json(path: &Path) -> anyhow::Result<VerifyingKey<Bls12>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read verification key {}", path.display()))?;
    pinion::snarkjs::read_verification_key(&text)
        .with_context(|| format!("verification key {} is not usable", path.display()))
}

/// Verifies; prints the verdict. `Ok(Failure)` is an invalid proof (exit 1); an error is
/// input that could not be read or does not match the key (exit 2).
pub fn run(vk: VkSource<'_>, proof: &Path, public: &Path, json: bool) -> anyhow::Result<Outcome> {
    let (vk, vk_path) = match vk {
        VkSource::Params(p) => (read_vk(p)?, p),
        VkSource::Json(p) => (read_vk_json(p)?, p),
    };
    let proof = read_proof(proof)?;
    let inputs = read_public(public)?;
    if inputs.len() + 1 != vk.ic.len() {
        bail!(
            "{} holds {} public values, the verifying key of {} expects {}",
            public.display(),
            inputs.len(),
            vk_path.display(),
            vk.ic.len().saturating_sub(1)
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
