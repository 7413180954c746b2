//! `pinion verify`: a proof against the verifying key at the start of a parameter file.

use std::io::BufReader;
use std::path::Path;

use anyhow::{bail, Context};
use bls12_381::{Bls12, Scalar};
use groth16::{Proof, VerifyingKey};
use pinion::decimal::parse_scalar;
use serde_json::{json, Value};
use srs_store::ParamsFile;

use crate::Outcome;

/// Bytes of `groth16::Proof::write`: compressed A (G1, 48), B (G2, 96), C (G1, 48).
pub const PROOF_BYTES: usize = 192;

/// Reads a `public.json`: an array of decimal strings (plain integers are accepted too).
pub fn read_public(path: &Path) -> anyhow::Result<Vec<Scalar>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read public values {}", path.display()))?;
    let what = || format!("public values {} are not usable", path.display());
    let v: Value = serde_json::from_str(&text)
        .context("not json")
        .with_context(what)?;
    let Value::Array(items) = v else {
        return Err(anyhow::anyhow!("expected a json array of decimal strings")).with_context(what);
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let text = match item {
                Value::String(s) => s.clone(),
                Value::Number(n) if n.is_u64() => n.to_string(),
                other => bail!("element {i} is {other}, expected a decimal string"),
            };
            parse_scalar(&text).with_context(|| format!("element {i}"))
        })
        .collect::<anyhow::Result<Vec<_>>>()
        .with_context(what)
}

/// Reads a 192-byte proof (points checked: on the curve, in the subgroup).
pub fn read_proof(path: &Path) -> anyhow::Result<Proof<Bls12>> {
    let bytes =
        std::fs::read(path).with_context(|| format!("cannot read proof {}", path.display()))?;
    if bytes.len() != PROOF_BYTES {
        bail!(
            "proof {} is {} bytes, a groth16 bls12-381 proof is {PROOF_BYTES}",
            path.display(),
            bytes.len()
        );
    }
    Proof::read(&bytes[..])
        .with_context(|| format!("proof {} is not a valid encoding", path.display()))
}

/// Reads the verifying key of a parameter file, after checking the file's structure.
pub fn read_vk(path: &Path) -> anyhow::Result<VerifyingKey<Bls12>> {
    let what = || format!("parameters {} are not usable", path.display());
    // The header walk catches truncated and inconsistent files before trusting the key.
    ParamsFile::open(path).with_context(what)?;
    let file = std::fs::File::open(path).with_context(what)?;
    VerifyingKey::read(BufReader::new(file))
        .context("verifying key")
        .with_context(what)
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
