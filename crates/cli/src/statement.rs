//! What `pinion verify` reads: the verifying key at the start of a parameter file, a
//! 192-byte proof and the public values. Each reader checks everything a verifier relies
//! on and names what it refused (proof element and byte offset, public value index, the
//! parameter file's point and byte offset).

use std::path::Path;

use bls12_381::{Bls12, G1Affine, G2Affine, Scalar};
use groth16::{Proof, VerifyingKey};
use serde_json::Value;
use srs_store::ParamsFile;

use crate::decimal::parse_scalar;
use crate::CircomError;

/// Bytes of `groth16::Proof::write`: compressed A (G1, 48), B (G2, 96), C (G1, 48).
pub const PROOF_BYTES: usize = 192;

/// One of the three points of a proof.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProofElement {
    /// A, in G1 (bytes 0..48).
    A,
    /// B, in G2 (bytes 48..144).
    B,
    /// C, in G1 (bytes 144..192).
    C,
}

impl ProofElement {
    /// The three elements in file order.
    pub const ALL: [ProofElement; 3] = [ProofElement::A, ProofElement::B, ProofElement::C];

    /// Byte offset of the element's encoding in the proof.
    pub fn offset(self) -> usize {
        match self {
            ProofElement::A => 0,
            ProofElement::B => 48,
            ProofElement::C => 144,
        }
    }

    /// Bytes of the element's compressed encoding.
    pub fn encoded_bytes(self) -> usize {
        match self {
            ProofElement::B => 96,
            ProofElement::A | ProofElement::C => 48,
        }
    }
}

impl std::fmt::Display for ProofElement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ProofElement::A => "A",
            ProofElement::B => "B",
            ProofElement::C => "C",
        })
    }
}

const NOT_COMPRESSED: &str =
    "not a compressed point (flag bits, x not below p, or no curve point with this x)";
const NOT_IN_SUBGROUP: &str = "not in the prime-order subgroup";
const INFINITY: &str = "point at infinity";

/// Decodes a compressed G1 point, telling the decoder's refusals apart.
fn g1_point(enc: &[u8; 48]) -> Result<G1Affine, &'static str> {
    let p =
        Option::<G1Affine>::from(G1Affine::from_compressed_unchecked(enc)).ok_or(NOT_COMPRESSED)?;
    if !bool::from(p.is_torsion_free()) {
        return Err(NOT_IN_SUBGROUP);
    }
    if bool::from(p.is_identity()) {
        return Err(INFINITY);
    }
    Ok(p)
}

/// Decodes a compressed G2 point, telling the decoder's refusals apart.
fn g2_point(enc: &[u8; 96]) -> Result<G2Affine, &'static str> {
    let p =
        Option::<G2Affine>::from(G2Affine::from_compressed_unchecked(enc)).ok_or(NOT_COMPRESSED)?;
    if !bool::from(p.is_torsion_free()) {
        return Err(NOT_IN_SUBGROUP);
    }
    if bool::from(p.is_identity()) {
        return Err(INFINITY);
    }
    Ok(p)
}

/// Parses a 192-byte proof (`groth16::Proof::write`): each point must be a canonical
/// compressed encoding of a point of the prime-order subgroup other than the identity,
/// as `groth16::Proof::read` requires. Errors name the element and its byte offset.
pub fn parse_proof(bytes: &[u8]) -> Result<Proof<Bls12>, CircomError> {
    if bytes.len() != PROOF_BYTES {
        return Err(CircomError::ProofLength {
            found_bytes: bytes.len() as u64,
        });
    }
    let bad = |element: ProofElement, reason: &'static str| CircomError::BadProofElement {
        element,
        offset: element.offset() as u64,
        reason,
    };
    let g1 = |element: ProofElement| -> Result<G1Affine, CircomError> {
        let at = element.offset();
        let mut enc = [0u8; 48];
        enc.copy_from_slice(&bytes[at..at + 48]);
        g1_point(&enc).map_err(|reason| bad(element, reason))
    };
    // In file order, so the first bad element is the one named.
    let a = g1(ProofElement::A)?;
    let mut enc = [0u8; 96];
    enc.copy_from_slice(&bytes[48..144]);
    let b = g2_point(&enc).map_err(|reason| bad(ProofElement::B, reason))?;
    let c = g1(ProofElement::C)?;
    Ok(Proof { a, b, c })
}

/// Parses public values: a JSON array of canonical decimal strings below r (outputs then
/// inputs, as `pinion prove --public-out` and snarkjs write them). Numbers, leading
/// zeros, signs and spaces are refused; a bad element is named by its index.
pub fn parse_public(bytes: &[u8]) -> Result<Vec<Scalar>, CircomError> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| CircomError::PublicJson {
        reason: format!("not json: {e}"),
    })?;
    let Value::Array(items) = v else {
        return Err(CircomError::PublicJson {
            reason: format!(
                "found {}, expected a json array of decimal strings",
                kind(&v)
            ),
        });
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let text = match item {
                Value::String(s) => s.clone(),
                // Numbers are refused even when small: one spelling per statement, as
                // snarkjs writes them (and a JSON number above 2^53 is not exact in
                // JavaScript).
                other => {
                    return Err(CircomError::PublicValue {
                        index: i as u64,
                        reason: format!("found {}, expected a decimal string", kind(other)),
                    })
                }
            };
            parse_scalar(&text).map_err(|e| CircomError::PublicValue {
                index: i as u64,
                reason: e.to_string(),
            })
        })
        .collect()
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Reads the verifying key at the start of a parameter file through `srs-store`: the
/// header walk first (a truncated or inconsistent file is refused before its key is
/// trusted), then every key point fully checked (encoding, curve, subgroup) and the point
/// at infinity refused in `alpha_g1`, `beta_g1`, `beta_g2`, `gamma_g2`, `delta_g1`,
/// `delta_g2` and `ic`, with the message `pinion srs inspect` gives for the same file.
pub fn read_verifying_key(path: &Path) -> Result<VerifyingKey<Bls12>, CircomError> {
    let repr = ParamsFile::open(path)?.verifying_key()?;
    let g1 = |element: &'static str, index: usize, p: &bls_repr::G1AffineRepr| {
        p.to_affine().map_err(|source| CircomError::KeyPoint {
            element,
            index: index as u64,
            source,
        })
    };
    let g2 = |element: &'static str, p: &bls_repr::G2AffineRepr| {
        p.to_affine().map_err(|source| CircomError::KeyPoint {
            element,
            index: 0,
            source,
        })
    };
    Ok(VerifyingKey {
        alpha_g1: g1("alpha_g1", 0, &repr.alpha_g1)?,
        beta_g1: g1("beta_g1", 0, &repr.beta_g1)?,
        beta_g2: g2("beta_g2", &repr.beta_g2)?,
        gamma_g2: g2("gamma_g2", &repr.gamma_g2)?,
        delta_g1: g1("delta_g1", 0, &repr.delta_g1)?,
        delta_g2: g2("delta_g2", &repr.delta_g2)?,
        ic: repr
            .ic
            .iter()
            .enumerate()
            .map(|(i, p)| g1("ic", i, p))
            .collect::<Result<_, _>>()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ff::Field;
    use groth16_prover::testing::{test_seed, SplitMix};
    use group::Curve;

    fn proof_bytes(p: &Proof<Bls12>) -> Vec<u8> {
        let mut v = Vec::new();
        p.write(&mut v).expect("writing to a vec");
        v
    }

    fn sample_proof() -> Proof<Bls12> {
        let mut rng = SplitMix::new(test_seed());
        Proof {
            a: (G1Affine::generator() * rng.scalar()).to_affine(),
            b: (G2Affine::generator() * rng.scalar()).to_affine(),
            c: (G1Affine::generator() * rng.scalar()).to_affine(),
        }
    }

    fn element_error(bytes: &[u8]) -> (ProofElement, u64, &'static str) {
        match parse_proof(bytes) {
            Err(CircomError::BadProofElement {
                element,
                offset,
                reason,
            }) => (element, offset, reason),
            other => panic!("expected a bad element, got {other:?}"),
        }
    }

    #[test]
    fn proofs_round_trip_like_groth16() {
        let p = sample_proof();
        let bytes = proof_bytes(&p);
        let parsed = parse_proof(&bytes).expect("valid proof");
        assert!(parsed == p);
        assert!(Proof::<Bls12>::read(&bytes[..]).expect("groth16 reads it") == parsed);
    }

    #[test]
    fn proof_errors_name_element_and_offset() {
        let bytes = proof_bytes(&sample_proof());
        for element in ProofElement::ALL {
            let at = element.offset();
            // Identity: compression and infinity flags, zeros.
            let mut b = bytes.clone();
            b[at..at + element.encoded_bytes()].fill(0);
            b[at] = 0xc0;
            assert_eq!(
                element_error(&b),
                (element, at as u64, "point at infinity"),
                "{element}"
            );
            // Compression flag cleared: not a compressed encoding.
            let mut b = bytes.clone();
            b[at] &= 0x7f;
            let (e, off, reason) = element_error(&b);
            assert_eq!((e, off), (element, at as u64));
            assert!(reason.starts_with("not a compressed point"), "{reason}");
            let msg = parse_proof(&b).unwrap_err().to_string();
            assert!(
                msg.contains(&format!("proof element {element} at byte offset {at}")),
                "{msg}"
            );
        }
        assert!(matches!(
            parse_proof(&bytes[..191]),
            Err(CircomError::ProofLength { found_bytes: 191 })
        ));
    }

    #[test]
    fn points_outside_the_subgroup_are_named() {
        // A curve point with a small x is almost never in the subgroup (the cofactor is
        // about 2^126): the first x that decodes at all serves.
        let mut found = false;
        for x in 1u8..=255 {
            let mut enc = [0u8; 48];
            enc[0] = 0x80;
            enc[47] = x;
            let unchecked = Option::<G1Affine>::from(G1Affine::from_compressed_unchecked(&enc));
            let checked = Option::<G1Affine>::from(G1Affine::from_compressed(&enc));
            if unchecked.is_some() && checked.is_none() {
                let mut b = proof_bytes(&sample_proof());
                b[144..192].copy_from_slice(&enc);
                assert_eq!(
                    element_error(&b),
                    (ProofElement::C, 144, "not in the prime-order subgroup")
                );
                found = true;
                break;
            }
        }
        assert!(found, "no small x gives a point outside the subgroup");
    }

    #[test]
    fn public_values_parse_and_errors_name_the_index() {
        let msg = |b: &[u8]| parse_public(b).unwrap_err().to_string();
        assert_eq!(
            parse_public(br#"["35", "5", "0"]"#).unwrap(),
            vec![Scalar::from(35u64), Scalar::from(5u64), Scalar::ZERO]
        );
        assert!(msg(br#"["35", 5]"#).starts_with("public value 1: found a number"));
        assert!(msg(br#"["01"]"#).contains("leading zero"));
        assert!(msg(b"[35,").contains("not json"));
        assert!(msg(br#"{"a": 1}"#).contains("found an object, expected a json array"));
        assert!(msg(br#"["1", -2]"#).starts_with("public value 1: found a number"));
        assert!(msg(br#"["1", "2", "x"]"#).starts_with("public value 2:"));
        let r = "52435875175126190479447740508185965837690552500527637822603658699938581184513";
        assert!(msg(format!(r#"["{r}"]"#).as_bytes()).contains("not below"));
        assert!(msg(b"[\"1\"\xff]").contains("not json"));
    }
}
