//! The field constants written into `include/field.cuh` agree with bls-repr's (which checks
//! its own literals against values derived from the moduli at compile time).

/// Parses the words assigned in `static void <func>(uint32_t (&m)[N])` of struct `params`.
fn words(params: &str, func: &str) -> Vec<u32> {
    let src = include_str!("../include/field.cuh");
    let body = src
        .split_once(&format!("struct {params} {{"))
        .and_then(|(_, rest)| rest.split_once(&format!(" {func}(uint32_t (&m)[N]) {{")))
        .and_then(|(_, rest)| rest.split_once('}'))
        .map(|(body, _)| body)
        .unwrap_or_else(|| panic!("{params}::{func} not found in field.cuh"));
    let mut out = Vec::new();
    for stmt in body.split(';') {
        let Some((lhs, rhs)) = stmt.split_once('=') else {
            continue;
        };
        let index: usize = lhs
            .trim()
            .trim_start_matches("m[")
            .trim_end_matches(']')
            .parse()
            .unwrap();
        let value = u32::from_str_radix(
            rhs.trim().trim_start_matches("0x").trim_end_matches('u'),
            16,
        )
        .unwrap();
        assert_eq!(index, out.len(), "{params}::{func}: words out of order");
        out.push(value);
    }
    out
}

fn inv(params: &str) -> u32 {
    let src = include_str!("../include/field.cuh");
    let rest = src.split_once(&format!("struct {params} {{")).unwrap().1;
    let lit = rest
        .split_once("INV = 0x")
        .unwrap()
        .1
        .split_once('u')
        .unwrap()
        .0;
    u32::from_str_radix(lit, 16).unwrap()
}

#[test]
fn fp_constants_match_bls_repr() {
    assert_eq!(words("FpParams", "modulus"), bls_repr::FP_MODULUS_U32);
    assert_eq!(words("FpParams", "one"), bls_repr::FP_R_U32);
    assert_eq!(words("FpParams", "r2"), bls_repr::FP_R2_U32);
    assert_eq!(inv("FpParams"), bls_repr::FP_INV_U32);
}

#[test]
fn fr_constants_match_bls_repr() {
    assert_eq!(words("FrParams", "modulus"), bls_repr::FR_MODULUS_U32);
    assert_eq!(words("FrParams", "one"), bls_repr::FR_R_U32);
    assert_eq!(words("FrParams", "r2"), bls_repr::FR_R2_U32);
    assert_eq!(inv("FrParams"), bls_repr::FR_INV_U32);
}

#[test]
fn inv_is_minus_modulus_inverse_mod_2_32() {
    for (m, inv) in [
        (bls_repr::FP_MODULUS_U32[0], inv("FpParams")),
        (bls_repr::FR_MODULUS_U32[0], inv("FrParams")),
    ] {
        assert_eq!(m.wrapping_mul(inv), u32::MAX, "m * inv must be -1 mod 2^32");
    }
}

/// The `B` of `AFFINE_KERNEL(<g>, <field>, K, B)` in a module's source.
fn affine_blocks(src: &str, curve: &str) -> u32 {
    let args = src
        .split_once(&format!("\nAFFINE_KERNEL({curve}, "))
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(args, _)| args)
        .unwrap_or_else(|| panic!("AFFINE_KERNEL({curve}, ...) not found"));
    args.rsplit(',').next().unwrap().trim().parse().unwrap()
}

#[test]
fn affine_blocks_per_sm_match_the_kernels() {
    assert_eq!(
        affine_blocks(include_str!("../msm.cu"), "g1"),
        crate::G1_AFFINE_BLOCKS_PER_SM
    );
    assert_eq!(
        affine_blocks(include_str!("../msm_g2.cu"), "g2"),
        crate::G2_AFFINE_BLOCKS_PER_SM
    );
}
