//! What `pinion verify` reads besides the key: the proof and the public values.
//!
//! # What "accepted" excludes
//! Groth16 proofs are malleable: anyone can turn a valid proof into another valid proof of
//! the same statement. Of the ways to do it, one is within reach of byte mutations:
//! negating A and B together, `(A, B, C) -> (-A, -B, C)` (e(-A, -B) = e(A, B)), which is
//! flipping the y-sign flag (`0x20`) of the first bytes of A and B. A mutated proof that
//! verifies for the original statement is a finding unless it decodes to the original
//! proof or to exactly `(-A, -B, C)`; those are counted as accepted (the latter apart, as
//! "malleable"). Re-randomisations that need scalar multiplications (`(A·r⁻¹, B·r, C)` and
//! the like) are not excluded: reaching one by byte mutations would itself be a finding.
//! A mutated statement (public values that decode to different scalars) that verifies is
//! always a finding; other spellings of the same scalars (numbers instead of strings,
//! leading zeros, signs, spaces) are refused with a typed error, as `pinion verify` reads
//! `public.json` (one spelling per statement).

use std::sync::Arc;

use bls12_381::Bls12;
use groth16::Proof;
use pinion::statement::{parse_proof, parse_public};

use super::{Input, Target, Verdict};
use crate::fixtures::Fixtures;
use crate::mutate::{Layout, PointEncoding, PointSlot, Seed};

/// The 192-byte proof: decode, then verify against the original statement.
pub struct ProofFile {
    fx: Arc<Fixtures>,
}

impl ProofFile {
    pub fn new(fx: &Arc<Fixtures>) -> ProofFile {
        ProofFile { fx: fx.clone() }
    }
}

/// `(-A, -B, C)`.
fn negated_ab(p: &Proof<Bls12>) -> Proof<Bls12> {
    Proof {
        a: -p.a,
        b: -p.b,
        c: p.c,
    }
}

impl Target for ProofFile {
    fn name(&self) -> &'static str {
        "proof"
    }

    fn about(&self) -> &'static str {
        "192-byte proofs: decode (A, B, C named) and verify the original statement; (-A, -B, C) excluded"
    }

    fn seeds(&self) -> Vec<Seed> {
        let slot = |offset, len| PointSlot {
            offset,
            len,
            encoding: PointEncoding::Compressed,
        };
        vec![Seed {
            name: "cubic",
            bytes: self.fx.files.proof.clone(),
            layout: Layout {
                boundaries: vec![0, 1, 48, 49, 144, 145, 192],
                counts: Vec::new(),
                points: vec![slot(0, 48), slot(48, 96), slot(144, 48)],
                dictionary: Vec::new(),
            },
        }]
    }

    fn run(&self, input: &Input<'_>) -> Verdict {
        let Ok(proof) = parse_proof(input.bytes) else {
            return Verdict::Rejected;
        };
        if groth16::verify_proof(&self.fx.pvk, &proof, &self.fx.public).is_err() {
            return Verdict::Rejected;
        }
        if proof == self.fx.proof {
            Verdict::Accepted
        } else if proof == negated_ab(&self.fx.proof) {
            Verdict::Malleable
        } else {
            Verdict::WronglyAccepted(format!(
                "a mutated proof verified for the original statement (A {}, B {}, C {})",
                same(proof.a == self.fx.proof.a),
                same(proof.b == self.fx.proof.b),
                same(proof.c == self.fx.proof.c),
            ))
        }
    }
}

fn same(equal: bool) -> &'static str {
    if equal {
        "unchanged"
    } else {
        "changed"
    }
}

/// `public.json`: parse, then verify the original proof against the values read.
pub struct PublicJson {
    fx: Arc<Fixtures>,
}

impl PublicJson {
    pub fn new(fx: &Arc<Fixtures>) -> PublicJson {
        PublicJson { fx: fx.clone() }
    }
}

/// Tokens for the JSON mutations: other values, edge numbers, broken syntax, deep nesting.
fn json_dictionary() -> Vec<Vec<u8>> {
    let r = "52435875175126190479447740508185965837690552500527637822603658699938581184513";
    let r_minus_1 = "52435875175126190479447740508185965837690552500527637822603658699938581184512";
    let mut tokens: Vec<String> = [
        "\"0\"",
        "0",
        "\"1\"",
        "-1",
        "1e3",
        "1.0",
        "18446744073709551616",
        "null",
        "true",
        "[]",
        "{}",
        "\"\"",
        "\" 1\"",
        "\"0x1\"",
        "\"+1\"",
        "\"\\u0000\"",
        "\"\\ud800\"",
        ",",
        "[",
        "]",
        "\"",
        ":",
        "\u{feff}",
        "\"٣\"",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    tokens.extend([
        format!("\"{r}\""),
        format!("\"{r_minus_1}\""),
        format!("\"0000{r_minus_1}\""),
        format!("\"{}\"", "9".repeat(100)),
        "[".repeat(200),
        format!("\"{}\"", "0".repeat(5000)),
    ]);
    tokens.into_iter().map(String::into_bytes).collect()
}

impl Target for PublicJson {
    fn name(&self) -> &'static str {
        "public-json"
    }

    fn about(&self) -> &'static str {
        "public values (json): parse, then the original proof verified against them"
    }

    fn seeds(&self) -> Vec<Seed> {
        let bytes = self.fx.files.public_json.clone();
        let boundaries = bytes
            .iter()
            .enumerate()
            .filter(|(_, &c)| matches!(c, b'[' | b']' | b'"' | b','))
            .flat_map(|(i, _)| [i, i + 1])
            .collect();
        vec![Seed {
            name: "cubic",
            bytes,
            layout: Layout {
                boundaries,
                counts: Vec::new(),
                points: Vec::new(),
                dictionary: json_dictionary(),
            },
        }]
    }

    fn run(&self, input: &Input<'_>) -> Verdict {
        let Ok(values) = parse_public(input.bytes) else {
            return Verdict::Rejected;
        };
        if groth16::verify_proof(&self.fx.pvk, &self.fx.proof, &values).is_err() {
            return Verdict::Rejected;
        }
        if values == self.fx.public {
            Verdict::Accepted
        } else {
            Verdict::WronglyAccepted(
                "the original proof verified for public values other than its own".into(),
            )
        }
    }
}
