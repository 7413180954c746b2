//! Decimal text for field elements and primes: what circom, snarkjs and `public.json` use.

use bls12_381::Scalar;

use crate::CircomError;

/// The BLS12-381 scalar field modulus r, little-endian (what circom's `--prime bls12381`
/// writes in the headers).
pub const BLS12_381_R_LE: [u8; 32] = {
    // 0x73eda753299d7d483339d80809a1d80553bda402fffe5bfeffffffff00000001
    let be: [u8; 32] = [
        0x73, 0xed, 0xa7, 0x53, 0x29, 0x9d, 0x7d, 0x48, 0x33, 0x39, 0xd8, 0x08, 0x09, 0xa1, 0xd8,
        0x05, 0x53, 0xbd, 0xa4, 0x02, 0xff, 0xfe, 0x5b, 0xfe, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00,
        0x00, 0x01,
    ];
    let mut le = [0u8; 32];
    let mut i = 0;
    while i < 32 {
        le[i] = be[31 - i];
        i += 1;
    }
    le
};

/// Decimal text of an unsigned little-endian integer of any length.
pub fn le_bytes_to_decimal(le: &[u8]) -> String {
    // Base-10^9 digits by repeated division of 32-bit limbs: inputs are at most a few
    // dozen bytes, so the quadratic cost does not matter.
    let mut limbs: Vec<u32> = le
        .chunks(4)
        .map(|c| {
            let mut w = [0u8; 4];
            w[..c.len()].copy_from_slice(c);
            u32::from_le_bytes(w)
        })
        .collect();
    while limbs.last() == Some(&0) {
        limbs.pop();
    }
    if limbs.is_empty() {
        return "0".into();
    }
    let mut chunks = Vec::new();
    while !limbs.is_empty() {
        let mut rem: u64 = 0;
        for limb in limbs.iter_mut().rev() {
            let cur = (rem << 32) | u64::from(*limb);
            *limb = (cur / 1_000_000_000) as u32;
            rem = cur % 1_000_000_000;
        }
        chunks.push(rem as u32);
        while limbs.last() == Some(&0) {
            limbs.pop();
        }
    }
    let mut s = chunks.pop().map_or_else(String::new, |c| c.to_string());
    for c in chunks.iter().rev() {
        s.push_str(&format!("{c:09}"));
    }
    s
}

/// Decimal text of a field element (its canonical value).
pub fn scalar_to_decimal(s: &Scalar) -> String {
    le_bytes_to_decimal(&s.to_bytes())
}

/// Parses a canonical decimal integer of at most `N` bytes into little-endian bytes:
/// ASCII digits only (no sign, spaces or exponent), no leading zero unless the number is
/// 0. `too_large` is the reason given when the value needs more than `N` bytes.
pub fn parse_decimal_le<const N: usize>(
    text: &str,
    too_large: &'static str,
) -> Result<[u8; N], CircomError> {
    let bad = |reason: &'static str| CircomError::BadDecimal {
        text: shorten(text),
        reason,
    };
    if text.is_empty() {
        return Err(bad("empty"));
    }
    if text.len() > 1 && text.starts_with('0') {
        return Err(bad("leading zero (not canonical decimal)"));
    }
    // Little-endian 32-bit limbs of the value, one more than N bytes need, to see overflow.
    let n_limbs = N.div_ceil(4) + 1;
    let mut limbs = vec![0u32; n_limbs];
    for ch in text.bytes() {
        if !ch.is_ascii_digit() {
            return Err(bad("not a decimal number"));
        }
        let mut carry = u64::from(ch - b'0');
        for limb in limbs.iter_mut() {
            let cur = u64::from(*limb) * 10 + carry;
            *limb = cur as u32;
            carry = cur >> 32;
        }
        if carry != 0 || limbs[n_limbs - 1] != 0 {
            return Err(bad(too_large));
        }
    }
    let mut bytes = [0u8; N];
    for (i, b) in bytes.iter_mut().enumerate() {
        *b = (limbs[i / 4] >> (8 * (i % 4))) as u8;
    }
    if N % 4 != 0 && limbs[N / 4] >> (8 * (N % 4)) != 0 {
        return Err(bad(too_large));
    }
    Ok(bytes)
}

/// Parses a decimal field element: canonical decimal (see [`parse_decimal_le`]), value
/// below r.
pub fn parse_scalar(text: &str) -> Result<Scalar, CircomError> {
    const TOO_LARGE: &str = "not below the bls12-381 scalar field modulus r";
    let bytes = parse_decimal_le::<32>(text, TOO_LARGE)?;
    Option::from(Scalar::from_bytes(&bytes)).ok_or_else(|| CircomError::BadDecimal {
        text: shorten(text),
        reason: TOO_LARGE,
    })
}

fn shorten(text: &str) -> String {
    if text.chars().count() > 90 {
        let head: String = text.chars().take(87).collect();
        format!("{head}...")
    } else {
        text.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ff::Field;

    #[test]
    fn r_prints_as_the_known_decimal() {
        // The modulus as circom and the BLS12-381 spec write it.
        assert_eq!(
            le_bytes_to_decimal(&BLS12_381_R_LE),
            "52435875175126190479447740508185965837690552500527637822603658699938581184513"
        );
        assert_eq!(le_bytes_to_decimal(&[]), "0");
        assert_eq!(le_bytes_to_decimal(&[0, 0]), "0");
        assert_eq!(le_bytes_to_decimal(&[0x00, 0xca, 0x9a, 0x3b]), "1000000000");
    }

    #[test]
    fn random_scalars_round_trip_through_decimal() {
        use rand::SeedableRng;
        let mut rng = rand::rngs::StdRng::seed_from_u64(crate::circom::tests::seed());
        for _ in 0..200 {
            let s = Scalar::random(&mut rng);
            let text = scalar_to_decimal(&s);
            assert_eq!(parse_scalar(&text).unwrap(), s, "{text}");
        }
        let minus_one = -Scalar::ONE;
        assert_eq!(
            parse_scalar(&scalar_to_decimal(&minus_one)).unwrap(),
            minus_one
        );
    }

    #[test]
    fn bad_decimals_are_refused() {
        let r = le_bytes_to_decimal(&BLS12_381_R_LE);
        for text in [
            "",
            "-1",
            "1 ",
            "0x10",
            "1e5",
            &r,
            &format!("{r}0"),
            &"9".repeat(200),
        ] {
            assert!(parse_scalar(text).is_err(), "{text:?} accepted");
        }
        assert_eq!(parse_scalar("0").unwrap(), Scalar::ZERO);
        assert_eq!(parse_scalar("35").unwrap(), Scalar::from(35u64));
        for text in ["0035", "00", "+1", " 1", "1\n", "１"] {
            assert!(parse_scalar(text).is_err(), "{text:?} accepted");
        }
    }
}
