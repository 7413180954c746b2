//! snarkjs's JSON files for Groth16 on BLS12-381: `proof.json`, `public.json` and
//! `verification_key.json`, written as snarkjs writes them and read strictly.
//!
//! Coordinates are canonical decimal strings; a point is `[x, y, "1"]` (G1) or
//! `[[x.c0, x.c1], [y.c0, y.c1], ["1", "0"]]` (G2), the point at infinity `["0", "1", "0"]`
//! (`[["0","0"],["1","0"],["0","0"]]` on G2), as ffjavascript's `toObject` gives them.
//! Reading checks every point is on the curve and in the prime-order subgroup.
//!
//! The verification key's `vk_alphabeta_12` is the pairing e(α, β) as twelve Fp values in
//! the tower order both libraries share (`Fp12 = Fp6[w]`, `Fp6 = Fp2[v]`, `Fp2 = Fp[u]`); the
//! `bls12_381` crate has no accessor for them, so they are read from its `Debug` text,
//! strictly (twelve 96-digit hex values or an error), and a test compares the result with
//! snarkjs's own export.

use bls12_381::{Bls12, G1Affine, G2Affine, Scalar};
use groth16::{Proof, VerifyingKey};
use serde_json::{json, Value};

use crate::decimal::{le_bytes_to_decimal, parse_decimal_le, scalar_to_decimal};
use crate::CircomError;

fn err(what: impl Into<String>, reason: impl Into<String>) -> CircomError {
    CircomError::Json {
        what: what.into(),
        reason: reason.into(),
    }
}

/// Decimal of a big-endian field coordinate.
fn be_decimal(be: &[u8]) -> String {
    let le: Vec<u8> = be.iter().rev().copied().collect();
    le_bytes_to_decimal(&le)
}

/// `[x, y, "1"]`, or `["0", "1", "0"]` at infinity.
pub fn g1_json(p: &G1Affine) -> Value {
    if bool::from(p.is_identity()) {
        return json!(["0", "1", "0"]);
    }
    let u = p.to_uncompressed();
    json!([be_decimal(&u[..48]), be_decimal(&u[48..]), "1"])
}

/// `[[x.c0, x.c1], [y.c0, y.c1], ["1", "0"]]`, or the point at infinity's form.
pub fn g2_json(p: &G2Affine) -> Value {
    if bool::from(p.is_identity()) {
        return json!([["0", "0"], ["1", "0"], ["0", "0"]]);
    }
    // The uncompressed encoding is x.c1 ‖ x.c0 ‖ y.c1 ‖ y.c0.
    let u = p.to_uncompressed();
    json!([
        [be_decimal(&u[48..96]), be_decimal(&u[..48])],
        [be_decimal(&u[144..]), be_decimal(&u[96..144])],
        ["1", "0"]
    ])
}

/// snarkjs's `proof.json`.
pub fn proof_json(proof: &Proof<Bls12>) -> Value {
    json!({
        "pi_a": g1_json(&proof.a),
        "pi_b": g2_json(&proof.b),
        "pi_c": g1_json(&proof.c),
        "protocol": "groth16",
        "curve": "bls12381",
    })
}

/// snarkjs's `public.json`: the values as decimal strings.
pub fn public_json(values: &[Scalar]) -> Value {
    Value::Array(
        values
            .iter()
            .map(|v| Value::String(scalar_to_decimal(v)))
            .collect(),
    )
}

/// The twelve coordinates of a pairing value, `[[[c0.c0.c0, c0.c0.c1], [c0.c1.c0, ..],
/// [c0.c2..]], [[c1.c0..], ..]]` in decimal, as ffjavascript's `Gt.toObject` gives them.
pub fn gt_json(gt: &bls12_381::Gt) -> Result<Value, CircomError> {
    let text = format!("{gt:?}");
    let bad = || {
        err(
            "e(alpha, beta)",
            "the pairing value's text is not twelve fp values",
        )
    };
    let mut values = Vec::with_capacity(12);
    let mut rest = text.as_str();
    while let Some(i) = rest.find("0x") {
        let hex = rest.get(i + 2..i + 2 + 96).ok_or_else(bad)?;
        let be = (0..48)
            .map(|k| u8::from_str_radix(&hex[2 * k..2 * k + 2], 16).map_err(|_| bad()))
            .collect::<Result<Vec<u8>, _>>()?;
        values.push(be_decimal(&be));
        rest = &rest[i + 2 + 96..];
    }
    if values.len() != 12 {
        return Err(bad());
    }
    let fp2 = |k: usize| json!([values[k], values[k + 1]]);
    Ok(json!([[fp2(0), fp2(2), fp2(4)], [fp2(6), fp2(8), fp2(10)]]))
}

/// snarkjs's `verification_key.json`.
pub fn verification_key_json(vk: &VerifyingKey<Bls12>) -> Result<Value, CircomError> {
    let alpha_beta = bls12_381::pairing(&vk.alpha_g1, &vk.beta_g2);
    Ok(json!({
        "protocol": "groth16",
        "curve": "bls12381",
        "nPublic": vk.ic.len().saturating_sub(1),
        "vk_alpha_1": g1_json(&vk.alpha_g1),
        "vk_beta_2": g2_json(&vk.beta_g2),
        "vk_gamma_2": g2_json(&vk.gamma_g2),
        "vk_delta_2": g2_json(&vk.delta_g2),
        "vk_alphabeta_12": gt_json(&alpha_beta)?,
        "IC": vk.ic.iter().map(g1_json).collect::<Vec<_>>(),
    }))
}

/// A decimal coordinate: canonical decimal of at most 48 bytes, big-endian out (the
/// curve check rejects a value not below p).
fn coordinate(v: &Value, what: &str) -> Result<[u8; 48], CircomError> {
    let Value::String(text) = v else {
        return Err(err(what, format!("is {v}, expected a decimal string")));
    };
    let le = parse_decimal_le::<48>(text, "larger than 384 bits")
        .map_err(|e| err(what, e.to_string()))?;
    let mut be = le;
    be.reverse();
    Ok(be)
}

fn array<'a>(v: &'a Value, len: usize, what: &str) -> Result<&'a [Value], CircomError> {
    match v {
        Value::Array(items) if items.len() == len => Ok(items),
        other => Err(err(
            what,
            format!("is {other}, expected an array of {len} elements"),
        )),
    }
}

fn is_str(v: &Value, s: &str) -> bool {
    v.as_str() == Some(s)
}

/// Reads a G1 point written as [`g1_json`] writes it.
pub fn read_g1(v: &Value, what: &str) -> Result<G1Affine, CircomError> {
    let p = array(v, 3, what)?;
    if is_str(&p[0], "0") && is_str(&p[1], "1") && is_str(&p[2], "0") {
        return Ok(G1Affine::identity());
    }
    if !is_str(&p[2], "1") {
        return Err(err(
            what,
            "third coordinate must be \"1\" (affine) or the point at infinity [\"0\", \"1\", \"0\"]",
        ));
    }
    let mut u = [0u8; 96];
    u[..48].copy_from_slice(&coordinate(&p[0], &format!("{what}[0]"))?);
    u[48..].copy_from_slice(&coordinate(&p[1], &format!("{what}[1]"))?);
    Option::from(G1Affine::from_uncompressed(&u))
        .ok_or_else(|| err(what, "not a point of the bls12-381 g1 subgroup"))
}

/// Reads a G2 point written as [`g2_json`] writes it.
pub fn read_g2(v: &Value, what: &str) -> Result<G2Affine, CircomError> {
    let p = array(v, 3, what)?;
    let pair = |i: usize| -> Result<[&Value; 2], CircomError> {
        let q = array(&p[i], 2, &format!("{what}[{i}]"))?;
        Ok([&q[0], &q[1]])
    };
    let [zc0, zc1] = pair(2)?;
    let [xc0, xc1] = pair(0)?;
    let [yc0, yc1] = pair(1)?;
    if is_str(zc0, "0") && is_str(zc1, "0") {
        if [xc0, xc1, yc1].iter().all(|v| is_str(v, "0")) && is_str(yc0, "1") {
            return Ok(G2Affine::identity());
        }
        return Err(err(what, "z is 0 but the point is not [[0,0],[1,0],[0,0]]"));
    }
    if !(is_str(zc0, "1") && is_str(zc1, "0")) {
        return Err(err(
            what,
            "third coordinate must be [\"1\", \"0\"] (affine)",
        ));
    }
    let mut u = [0u8; 192];
    u[..48].copy_from_slice(&coordinate(xc1, &format!("{what}[0][1]"))?);
    u[48..96].copy_from_slice(&coordinate(xc0, &format!("{what}[0][0]"))?);
    u[96..144].copy_from_slice(&coordinate(yc1, &format!("{what}[1][1]"))?);
    u[144..].copy_from_slice(&coordinate(yc0, &format!("{what}[1][0]"))?);
    Option::from(G2Affine::from_uncompressed(&u))
        .ok_or_else(|| err(what, "not a point of the bls12-381 g2 subgroup"))
}

fn field<'a>(obj: &'a Value, key: &str, file: &str) -> Result<&'a Value, CircomError> {
    obj.get(key)
        .ok_or_else(|| err(file, format!("has no \"{key}\" field")))
}

fn check_tags(obj: &Value, file: &str) -> Result<(), CircomError> {
    for (key, want) in [("protocol", "groth16"), ("curve", "bls12381")] {
        let found = field(obj, key, file)?;
        if !is_str(found, want) {
            return Err(err(
                format!("{file}.{key}"),
                format!("is {found}, expected \"{want}\""),
            ));
        }
    }
    Ok(())
}

fn parse(text: &str, file: &str) -> Result<Value, CircomError> {
    serde_json::from_str(text).map_err(|e| err(file, format!("not json: {e}")))
}

/// Reads snarkjs's `proof.json` (protocol groth16, curve bls12381).
pub fn read_proof(text: &str) -> Result<Proof<Bls12>, CircomError> {
    let v = parse(text, "proof")?;
    check_tags(&v, "proof")?;
    Ok(Proof {
        a: read_g1(field(&v, "pi_a", "proof")?, "proof.pi_a")?,
        b: read_g2(field(&v, "pi_b", "proof")?, "proof.pi_b")?,
        c: read_g1(field(&v, "pi_c", "proof")?, "proof.pi_c")?,
    })
}

/// Reads snarkjs's `verification_key.json` into a `groth16::VerifyingKey`. The file has
/// no β and δ on G1 (the verifier does not use them): they are set to the point at
/// infinity, so the key serves verification only.
pub fn read_verification_key(text: &str) -> Result<VerifyingKey<Bls12>, CircomError> {
    let file = "verification key";
    let v = parse(text, file)?;
    check_tags(&v, file)?;
    let n_public = field(&v, "nPublic", file)?
        .as_u64()
        .ok_or_else(|| err("verification key.nPublic", "not a count"))?;
    let ic = field(&v, "IC", file)?
        .as_array()
        .ok_or_else(|| err("verification key.IC", "not an array"))?;
    if ic.len() as u64 != n_public + 1 {
        return Err(err(
            "verification key.IC",
            format!("has {} points, nPublic + 1 = {}", ic.len(), n_public + 1),
        ));
    }
    let ic = ic
        .iter()
        .enumerate()
        .map(|(i, p)| read_g1(p, &format!("verification key.IC[{i}]")))
        .collect::<Result<Vec<_>, _>>()?;
    let g2 = |key: &str| read_g2(field(&v, key, file)?, &format!("verification key.{key}"));
    Ok(VerifyingKey {
        alpha_g1: read_g1(
            field(&v, "vk_alpha_1", file)?,
            "verification key.vk_alpha_1",
        )?,
        beta_g1: G1Affine::identity(),
        beta_g2: g2("vk_beta_2")?,
        gamma_g2: g2("vk_gamma_2")?,
        delta_g1: G1Affine::identity(),
        delta_g2: g2("vk_delta_2")?,
        ic,
    })
}

/// Reads a `public.json`: an array of canonical decimal strings below r (no numbers, no
/// leading zeros, signs or spaces); a bad element is named by its index. The one reader
/// of public values: [`crate::statement::parse_public`].
pub fn read_public(text: &str) -> Result<Vec<Scalar>, CircomError> {
    crate::statement::parse_public(text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ff::Field;
    use group::Group;
    use rand::SeedableRng;

    #[test]
    fn points_round_trip_through_json() {
        let seed = crate::circom::tests::seed();
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        for _ in 0..20 {
            let p = G1Affine::from(bls12_381::G1Projective::random(&mut rng));
            let q = G2Affine::from(bls12_381::G2Projective::random(&mut rng));
            assert_eq!(read_g1(&g1_json(&p), "p").unwrap(), p, "seed {seed}");
            assert_eq!(read_g2(&g2_json(&q), "q").unwrap(), q, "seed {seed}");
        }
        let o1 = G1Affine::identity();
        let o2 = G2Affine::identity();
        assert_eq!(read_g1(&g1_json(&o1), "o").unwrap(), o1);
        assert_eq!(read_g2(&g2_json(&o2), "o").unwrap(), o2);
    }

    /// The whole key, e(α, β) included, equals snarkjs's export (fixtures/snarkjs).
    #[test]
    fn verification_key_equals_snarkjs_export() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/snarkjs/verification_key.json"
        ))
        .unwrap();
        let theirs: Value = serde_json::from_str(&text).unwrap();
        let vk = read_verification_key(&text).unwrap();
        assert_eq!(verification_key_json(&vk).unwrap(), theirs);
    }

    #[test]
    fn public_values_must_be_canonical_decimal_strings() {
        assert_eq!(
            read_public(r#"["132", "0", "11"]"#).unwrap(),
            vec![Scalar::from(132u64), Scalar::ZERO, Scalar::from(11u64)]
        );
        for (text, index) in [
            (r#"["1", 1]"#, 1),
            (r#"["01"]"#, 0),
            (r#"["1", "-1"]"#, 1),
            (r#"["1", "2", " 3"]"#, 2),
            (r#"["+5"]"#, 0),
            (r#"["1e3"]"#, 0),
        ] {
            let e = read_public(text).unwrap_err().to_string();
            assert!(e.contains(&format!("public value {index}")), "{text}: {e}");
        }
        assert!(read_public("{}").is_err());
        assert!(read_public("[1").is_err());
    }
}
