//! snarkjs's Groth16 `.zkey` for BLS12-381, read into srs-store's layout.
//!
//! # The format (snarkjs 0.7, `zkey_utils.js`)
//! Container: magic `zkey`, version u32 = 1, section count u32, then sections (type u32,
//! size u64, content), all little-endian. Groth16 sections:
//!
//! | type | content |
//! |---|---|
//! | 1 | protocol id u32 (1 = groth16) |
//! | 2 | n8q u32, q, n8r u32, r, n_vars u32, n_public u32, domain_size u32, then alpha1, beta1, beta2, gamma2, delta1, delta2 |
//! | 3 | IC: `n_public + 1` G1 points |
//! | 4 | coefficients: count u32, then per entry matrix u32 (0 = A, 1 = B), constraint u32, signal u32, value (32 bytes) |
//! | 5, 6, 7 | A (G1), B1 (G1), B2 (G2): one point per signal |
//! | 8 | C: one G1 point per private signal (signals after `n_public`) |
//! | 9 | H: `domain_size` G1 points |
//! | 10 | contributions (not needed to prove) |
//!
//! Points are affine `x ‖ y`, each coordinate in Montgomery form (R = 2^384), 48-byte
//! little-endian words; G2 coordinates are `c0 ‖ c1`; the point at infinity is all zero.
//! That is exactly `bls-repr`'s layout, so a point is read with a range check and no
//! conversion. A coefficient value v is stored as v·R² mod r (R = 2^256) as a plain
//! little-endian integer. Signal 0 is ONE, signals 1..=n_public are public.
//!
//! # What a zkey proof computes, and how it maps onto Pinion's prover
//! The coefficients hold A and B only (C is not stored): snarkjs's prover evaluates
//! a = A·w, b = B·w on each row, takes c = a∘b, interpolates the three on the domain of
//! `domain_size` points ω_s^i, evaluates them on the odd coset g·ω_s^i (g a square root of
//! ω_s), and takes the MSM of (a·b − c)(g·ω_s^i) with the H points, which were made for
//! those evaluations (Lagrange bases of the 2n-point domain at its odd points): no
//! division by Z, no inverse transform. The roots are ffjavascript's (w_32 = 5^t, t odd,
//! 5 the smallest non-residue), not bellman's (7^t), so ω_s = ω_b^e for an odd e.
//!
//! Pinion's NTTs use bellman's ω_b. This reader therefore stores row i of snarkjs's domain
//! at position e·i mod n, and H point i at the same position: an NTT over ω_b of the
//! reordered rows is snarkjs's NTT over ω_s, and the H MSM pairs the same values with the
//! same points. The prover needs only the coset shift g ([`ZkeyParams::h_coset_shift`]).
//!
//! A and B points of signals absent from that matrix are the point at infinity in a zkey;
//! they are dropped as groth16's densities drop them (so `a_query`, `b_g1_query`,
//! `b_g2_query` have groth16's lengths), and a non-infinity point for such a signal is an
//! error. Points at infinity elsewhere in the bulk sections are kept (the MSMs handle them).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Instant;

use bls12_381::Scalar;
use bls_repr::{Fp2Repr, FpRepr, G1AffineRepr, G2AffineRepr};
use ff::{Field, PrimeField};
use memmap2::{Mmap, UncheckedAdvice};
use memory_budget::{Budget, Category, Reservation};
use pce_cache::{Pce, RowBuilder};
use rayon::prelude::*;

use crate::error::{Result, SrsError};
use crate::layout::ParamsLayout;
use crate::load::{alloc_host, LoadStats, LoadedParams, PointCheck, VerifyingKeyRepr};

/// The first four bytes of a zkey.
pub const ZKEY_MAGIC: &[u8; 4] = b"zkey";

/// Largest domain this reader accepts (the NTTs' limit, 2^28 points).
pub const MAX_LOG_DOMAIN: u32 = 28;

/// Bytes of a zkey G1 point (two 48-byte coordinates).
const G1_BYTES: u64 = 96;
/// Bytes of a zkey G2 point.
const G2_BYTES: u64 = 192;
/// Bytes of one coefficient entry: matrix, constraint, signal (u32 each), value.
const COEFFICIENT_BYTES: u64 = 12 + 32;
/// Bytes of section 2 for BLS12-381.
const GROTH16_HEADER_BYTES: u64 = 4 + 48 + 4 + 32 + 3 * 4 + 3 * G1_BYTES + 3 * G2_BYTES;

/// The BLS12-381 base field prime q, little-endian.
const BLS12_381_Q_LE: [u8; 48] = le_of_be(&[
    0x1a, 0x01, 0x11, 0xea, 0x39, 0x7f, 0xe6, 0x9a, 0x4b, 0x1b, 0xa7, 0xb6, 0x43, 0x4b, 0xac, 0xd7,
    0x64, 0x77, 0x4b, 0x84, 0xf3, 0x85, 0x12, 0xbf, 0x67, 0x30, 0xd2, 0xa0, 0xf6, 0xb0, 0xf6, 0x24,
    0x1e, 0xab, 0xff, 0xfe, 0xb1, 0x53, 0xff, 0xff, 0xb9, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xaa, 0xab,
]);
/// The BLS12-381 scalar field prime r, little-endian.
const BLS12_381_R_LE: [u8; 32] = le_of_be(&[
    0x73, 0xed, 0xa7, 0x53, 0x29, 0x9d, 0x7d, 0x48, 0x33, 0x39, 0xd8, 0x08, 0x09, 0xa1, 0xd8, 0x05,
    0x53, 0xbd, 0xa4, 0x02, 0xff, 0xfe, 0x5b, 0xfe, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x01,
]);
/// The BN254 (bn128, circom's default) base field prime, little-endian: named in errors.
const BN254_Q_LE: [u8; 32] = le_of_be(&[
    0x30, 0x64, 0x4e, 0x72, 0xe1, 0x31, 0xa0, 0x29, 0xb8, 0x50, 0x45, 0xb6, 0x81, 0x81, 0x58, 0x5d,
    0x97, 0x81, 0x6a, 0x91, 0x68, 0x71, 0xca, 0x8d, 0x3c, 0x20, 0x8c, 0x16, 0xd8, 0x7c, 0xfd, 0x47,
]);

const fn le_of_be<const N: usize>(be: &[u8; N]) -> [u8; N] {
    let mut le = [0u8; N];
    let mut i = 0;
    while i < N {
        le[i] = be[N - 1 - i];
        i += 1;
    }
    le
}

/// A section of a zkey, named in errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ZkeySection {
    /// Type 1: the protocol id.
    Header,
    /// Type 2: primes, counts and the verifying key's fixed points.
    Groth16Header,
    /// Type 3: the verifying key's IC points.
    Ic,
    /// Type 4: the A and B matrices.
    Coefficients,
    /// Type 5: A points.
    A,
    /// Type 6: B points on G1.
    B1,
    /// Type 7: B points on G2.
    B2,
    /// Type 8: C points (private signals).
    C,
    /// Type 9: H points.
    H,
    /// Type 10: the ceremony's contributions.
    Contributions,
}

impl ZkeySection {
    const ALL: [ZkeySection; 10] = [
        ZkeySection::Header,
        ZkeySection::Groth16Header,
        ZkeySection::Ic,
        ZkeySection::Coefficients,
        ZkeySection::A,
        ZkeySection::B1,
        ZkeySection::B2,
        ZkeySection::C,
        ZkeySection::H,
        ZkeySection::Contributions,
    ];

    /// The section's type number in the file.
    pub fn id(self) -> u32 {
        ZkeySection::ALL
            .iter()
            .position(|s| *s == self)
            .map_or(0, |i| i as u32 + 1)
    }

    /// Name used in messages.
    pub fn name(self) -> &'static str {
        match self {
            ZkeySection::Header => "header",
            ZkeySection::Groth16Header => "groth16 header",
            ZkeySection::Ic => "ic",
            ZkeySection::Coefficients => "coefficients",
            ZkeySection::A => "a points",
            ZkeySection::B1 => "b1 points",
            ZkeySection::B2 => "b2 points",
            ZkeySection::C => "c points",
            ZkeySection::H => "h points",
            ZkeySection::Contributions => "contributions",
        }
    }

    fn from_id(id: u32) -> Option<ZkeySection> {
        id.checked_sub(1)
            .and_then(|i| ZkeySection::ALL.get(i as usize).copied())
    }
}

impl std::fmt::Display for ZkeySection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a section's content lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZkeySpan {
    /// Offset of the first content byte.
    pub offset: u64,
    /// Content bytes.
    pub len: u64,
}

/// The validated shape of a zkey: counts, and every section's place, each size checked
/// against the counts and the file length. Walking it touches only the section table and
/// the headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZkeyLayout {
    file_bytes: u64,
    n_vars: u32,
    n_public: u32,
    domain_size: u32,
    n_coefficients: u32,
    /// Sections 1..=9 (index = type − 1).
    spans: [ZkeySpan; 9],
}

/// Bounds-checked little-endian reads with offsets for messages.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: u64,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: u64, what: impl FnOnce() -> String) -> Result<&'a [u8]> {
        let available = (self.bytes.len() as u64).saturating_sub(self.pos);
        if n > available {
            return Err(SrsError::ZkeyTruncated {
                what: what(),
                offset: self.pos,
                needed_bytes: n,
                available_bytes: available,
            });
        }
        let s = &self.bytes[self.pos as usize..(self.pos + n) as usize];
        self.pos += n;
        Ok(s)
    }

    fn u32(&mut self, what: &str) -> Result<u32> {
        let b = self.take(4, || what.to_string())?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self, what: &str) -> Result<u64> {
        let b = self.take(8, || what.to_string())?;
        let mut w = [0u8; 8];
        w.copy_from_slice(b);
        Ok(u64::from_le_bytes(w))
    }
}

fn hex_le(le: &[u8]) -> String {
    let digits: String = le.iter().rev().map(|b| format!("{b:02x}")).collect();
    let trimmed = digits.trim_start_matches('0');
    format!("0x{}", if trimmed.is_empty() { "0" } else { trimmed })
}

impl ZkeyLayout {
    /// Walks the magic, version, section table and the two header sections of a zkey
    /// whose bytes are `bytes` (a mapping: only the table and headers are touched), and
    /// checks every section's size against the counts. Allocates nothing proportional to
    /// the file. The fuzz harness's entry point.
    pub fn parse(bytes: &[u8]) -> Result<ZkeyLayout> {
        let file_bytes = bytes.len() as u64;
        let mut c = Cursor { bytes, pos: 0 };
        let magic = c
            .take(4, || "magic".into())
            .map_err(|_| SrsError::ZkeyMagic {
                found: String::from_utf8_lossy(bytes).into_owned(),
            })?;
        if magic != ZKEY_MAGIC {
            return Err(SrsError::ZkeyMagic {
                found: String::from_utf8_lossy(magic).into_owned(),
            });
        }
        let version = c.u32("format version")?;
        if version != 1 {
            return Err(SrsError::ZkeyVersion { found: version });
        }
        let n_sections = c.u32("section count")?;
        let mut found: [Option<ZkeySpan>; 10] = [None; 10];
        for i in 0..n_sections {
            let id = c.u32(&format!("type of section {i}"))?;
            let len = c.u64(&format!("size of section {i} (type {id})"))?;
            let offset = c.pos;
            c.take(len, || format!("section {i} (type {id})"))?;
            // snarkjs ignores section types it does not know; so do we.
            if let Some(section) = ZkeySection::from_id(id) {
                let slot = &mut found[id as usize - 1];
                if slot.is_some() {
                    return Err(SrsError::ZkeyDuplicateSection { section, offset });
                }
                *slot = Some(ZkeySpan { offset, len });
            }
        }
        if c.pos != file_bytes {
            return Err(SrsError::ZkeyTruncated {
                what: format!(
                    "nothing after the {n_sections} sections the table declares (trailing bytes)"
                ),
                offset: c.pos,
                needed_bytes: 0,
                available_bytes: file_bytes - c.pos,
            });
        }
        let mut spans = [ZkeySpan { offset: 0, len: 0 }; 9];
        for (i, slot) in spans.iter_mut().enumerate() {
            let section = ZkeySection::ALL[i];
            *slot = found[i].ok_or(SrsError::ZkeyMissingSection { section })?;
        }
        let sub = |s: ZkeySpan| &bytes[s.offset as usize..(s.offset + s.len) as usize];
        let size = |section: ZkeySection, span: ZkeySpan, expected: u64| -> Result<()> {
            if span.len != expected {
                return Err(SrsError::ZkeySectionSize {
                    section,
                    offset: span.offset,
                    declared_bytes: span.len,
                    expected_bytes: expected,
                });
            }
            Ok(())
        };

        // Section 1: the protocol.
        size(ZkeySection::Header, spans[0], 4)?;
        let protocol = u32::from_le_bytes(sub(spans[0]).try_into().unwrap_or([0; 4]));
        if protocol != 1 {
            let name = match protocol {
                2 => "plonk",
                10 => "fflonk",
                _ => "an unknown protocol",
            };
            return Err(SrsError::ZkeyProtocol {
                found: protocol,
                name,
            });
        }

        // Section 2: primes and counts (the curve first: a bn128 zkey has other sizes).
        let h = spans[1];
        let mut hc = Cursor {
            bytes: sub(h),
            pos: 0,
        };
        let at = |pos: u64| h.offset + pos;
        let n8q = hc.u32("base field size").map_err(|e| rebase(e, h.offset))?;
        let q = hc
            .take(u64::from(n8q), || "base field prime".into())
            .map_err(|e| rebase(e, h.offset))?;
        if q != BLS12_381_Q_LE {
            let curve = if q == BN254_Q_LE {
                "bn128 (bn254, circom's default prime)"
            } else {
                "an unknown curve"
            };
            return Err(SrsError::ZkeyCurve {
                curve,
                prime: hex_le(q),
            });
        }
        size(ZkeySection::Groth16Header, h, GROTH16_HEADER_BYTES)?;
        let n8r = hc.u32("scalar field size")?;
        let r = hc.take(32, || "scalar field prime".into())?;
        if n8r != 32 || r != BLS12_381_R_LE {
            return Err(SrsError::ZkeyHeader {
                field: "scalar field (n8r and r)",
                found: u64::from(n8r),
                expected: format!(
                    "32 bytes holding the bls12-381 r (header at byte offset {})",
                    at(52)
                ),
            });
        }
        let n_vars = hc.u32("n_vars")?;
        let n_public = hc.u32("n_public")?;
        let domain_size = hc.u32("domain_size")?;
        if u64::from(n_public) + 1 > u64::from(n_vars) {
            return Err(SrsError::ZkeyHeader {
                field: "n_vars",
                found: u64::from(n_vars),
                expected: format!("at least n_public + 1 = {}", u64::from(n_public) + 1),
            });
        }
        if !domain_size.is_power_of_two()
            || domain_size.trailing_zeros() > MAX_LOG_DOMAIN
            || u64::from(domain_size) < u64::from(n_public) + 1
        {
            return Err(SrsError::ZkeyHeader {
                field: "domain_size",
                found: u64::from(domain_size),
                expected: format!(
                    "a power of two, at least n_public + 1 = {}, at most 2^{MAX_LOG_DOMAIN}",
                    u64::from(n_public) + 1
                ),
            });
        }
        let n_vars64 = u64::from(n_vars);
        let n_aux = n_vars64 - u64::from(n_public) - 1;
        size(
            ZkeySection::Ic,
            spans[2],
            (u64::from(n_public) + 1) * G1_BYTES,
        )?;
        size(ZkeySection::A, spans[4], n_vars64 * G1_BYTES)?;
        size(ZkeySection::B1, spans[5], n_vars64 * G1_BYTES)?;
        size(ZkeySection::B2, spans[6], n_vars64 * G2_BYTES)?;
        size(ZkeySection::C, spans[7], n_aux * G1_BYTES)?;
        size(ZkeySection::H, spans[8], u64::from(domain_size) * G1_BYTES)?;
        let coefs = spans[3];
        let mut cc = Cursor {
            bytes: sub(coefs),
            pos: 0,
        };
        let n_coefficients = cc
            .u32("coefficient count")
            .map_err(|e| rebase(e, coefs.offset))?;
        size(
            ZkeySection::Coefficients,
            coefs,
            4 + u64::from(n_coefficients) * COEFFICIENT_BYTES,
        )?;
        // The loader indexes host memory with usize; refuse what cannot be addressed.
        if usize::try_from(file_bytes).is_err() {
            return Err(SrsError::ZkeyHeader {
                field: "file size",
                found: file_bytes,
                expected: "addressable on this machine".into(),
            });
        }
        Ok(ZkeyLayout {
            file_bytes,
            n_vars,
            n_public,
            domain_size,
            n_coefficients,
            spans,
        })
    }

    /// Length of the file.
    pub fn file_bytes(&self) -> u64 {
        self.file_bytes
    }
    /// Signals, ONE included.
    pub fn n_vars(&self) -> u32 {
        self.n_vars
    }
    /// Public signals (ONE excluded).
    pub fn n_public(&self) -> u32 {
        self.n_public
    }
    /// Private signals: `n_vars − n_public − 1`.
    pub fn n_private(&self) -> u32 {
        self.n_vars - self.n_public - 1
    }
    /// Points of the proving domain.
    pub fn domain_size(&self) -> u32 {
        self.domain_size
    }
    /// Entries of the coefficients section.
    pub fn n_coefficients(&self) -> u32 {
        self.n_coefficients
    }
    /// Where a section's content lies (`None` for the contributions, which are not
    /// checked).
    pub fn span(&self, section: ZkeySection) -> Option<ZkeySpan> {
        self.spans.get(section.id() as usize - 1).copied()
    }

    fn at(&self, section: ZkeySection) -> ZkeySpan {
        self.spans[section.id() as usize - 1]
    }
}

/// Moves a truncation error of a sub-cursor to file offsets.
fn rebase(e: SrsError, base: u64) -> SrsError {
    match e {
        SrsError::ZkeyTruncated {
            what,
            offset,
            needed_bytes,
            available_bytes,
        } => SrsError::ZkeyTruncated {
            what,
            offset: offset + base,
            needed_bytes,
            available_bytes,
        },
        e => e,
    }
}

/// ffjavascript's roots of unity and their relation to bellman's.
pub mod domain {
    use super::*;

    /// t = (r − 1) / 2^32 (odd), little-endian limbs.
    pub(crate) const T_LIMBS: [u64; 4] = [
        0xfffe_5bfe_ffff_ffff,
        0x09a1_d805_53bd_a402,
        0x299d_7d48_3339_d808,
        0x0000_0000_73ed_a753,
    ];

    /// The primitive 2^`log_n`-th root snarkjs uses: 5^t (5 is the smallest quadratic
    /// non-residue mod r, which ffjavascript and wasmcurves search for), squared
    /// 32 − `log_n` times. `log_n` ≤ 32.
    pub fn snarkjs_omega(log_n: u32) -> Scalar {
        let mut w = Scalar::from(5u64).pow_vartime(&T_LIMBS);
        for _ in log_n..Scalar::S {
            w = w.square();
        }
        w
    }

    /// The primitive 2^`log_n`-th root bellman (and gpu-ntt) use: `ROOT_OF_UNITY` (7^t)
    /// squared 32 − `log_n` times.
    pub fn bellman_omega(log_n: u32) -> Scalar {
        let mut w = Scalar::ROOT_OF_UNITY;
        for _ in log_n..Scalar::S {
            w = w.square();
        }
        w
    }

    /// The odd e with `snarkjs_omega(32) = bellman_omega(32)^e`; for any domain,
    /// `snarkjs_omega(k) = bellman_omega(k)^(e mod 2^k)`. Found bit by bit in the group
    /// of order 2^32 (Pohlig–Hellman).
    pub fn exponent() -> u64 {
        let target = snarkjs_omega(Scalar::S);
        let base = bellman_omega(Scalar::S);
        let mut e = 0u64;
        for i in 0..Scalar::S {
            // target · base^-e has order dividing 2^(32 − i); its 2^(31 − i)-th power is
            // 1 exactly when bit i of the exponent is 0.
            let rest = target
                * Field::pow_vartime(&base, [e])
                    .invert()
                    .unwrap_or(Scalar::ZERO);
            let mut x = rest;
            for _ in 0..(Scalar::S - 1 - i) {
                x = x.square();
            }
            if x != Scalar::ONE {
                e |= 1 << i;
            }
        }
        e
    }

    /// Inverse of an odd `e` modulo 2^64 (Newton's iteration), so also modulo any 2^k.
    pub fn inverse_mod_2_64(e: u64) -> u64 {
        let mut x = e; // correct to 3 bits for odd e
        for _ in 0..6 {
            x = x.wrapping_mul(2u64.wrapping_sub(e.wrapping_mul(x)));
        }
        x
    }

    /// The coset shift of snarkjs's H step for a domain of 2^`log_n` points: its
    /// 2^(`log_n` + 1)-th root, a square root of `snarkjs_omega(log_n)`.
    pub fn odd_coset_shift(log_n: u32) -> Scalar {
        snarkjs_omega(log_n + 1)
    }
}

/// A zkey's verifying key and counts, and what proving from it needs beyond srs-store's
/// layout: the constraint matrices (as a PCE) and the H step's coset shift.
pub struct ZkeyParams {
    params: LoadedParams,
    pce: Pce,
    pce_reservation: Option<Reservation>,
    n_public: u32,
    domain_size: u32,
    h_coset_shift: Scalar,
}

impl std::fmt::Debug for ZkeyParams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZkeyParams")
            .field("params", &self.params)
            .field("pce", &self.pce.fingerprint())
            .field("n_public", &self.n_public)
            .field("domain_size", &self.domain_size)
            .finish()
    }
}

impl ZkeyParams {
    /// The bases and verifying key in srs-store's layout: `h_query` holds the zkey's H
    /// points reordered onto bellman's domain (`domain_size` of them, not m − 1),
    /// `l_query` its C points, `a_query`, `b_g1_query`, `b_g2_query` its A, B1, B2 points
    /// of the signals dense in A and B (groth16's densities).
    pub fn params(&self) -> &LoadedParams {
        &self.params
    }
    /// A and B as a PCE over bellman's domain order (rows reordered, see the module
    /// docs; C is empty: a zkey does not hold it). Columns are the signals in order.
    pub fn pce(&self) -> &Pce {
        &self.pce
    }
    /// Public signals (ONE excluded).
    pub fn n_public(&self) -> u32 {
        self.n_public
    }
    /// Points of the domain.
    pub fn domain_size(&self) -> u32 {
        self.domain_size
    }
    /// The shift g of the coset g·⟨ω⟩ on which the H step evaluates a·b − c.
    pub fn h_coset_shift(&self) -> Scalar {
        self.h_coset_shift
    }
    /// Host bytes charged for all of it (bases, verifying key, PCE).
    pub fn charged_bytes(&self) -> u64 {
        self.params.charged_bytes() + self.pce_reservation.as_ref().map_or(0, Reservation::bytes)
    }
    /// Splits into the parameters, the PCE and the PCE's reservation.
    pub fn into_parts(self) -> (LoadedParams, Pce, Option<Reservation>) {
        (self.params, self.pce, self.pce_reservation)
    }
}

/// An open zkey: mapped, section table and headers walked and checked, nothing else read.
#[derive(Debug)]
pub struct ZkeyFile {
    path: PathBuf,
    map: Mmap,
    layout: ZkeyLayout,
}

/// What [`ZkeyFile::load`] charges, from the headers alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZkeyPlan {
    /// The bases and verifying key kept (upper bound: every A and B point kept).
    pub destination_bytes: u64,
    /// Held only during the load: the row index of the coefficients, one segment of
    /// decoded coefficients, which signals keep their A and B points, and the largest
    /// section's mapped pages.
    pub transient_bytes: u64,
}

impl ZkeyPlan {
    /// What the reservation covers before the first base is converted.
    pub fn peak_bytes(&self) -> u64 {
        self.destination_bytes + self.transient_bytes
    }
}

fn g1_at(bytes: &[u8]) -> G1AffineRepr {
    G1AffineRepr {
        x: fp_at(&bytes[..48]),
        y: fp_at(&bytes[48..96]),
    }
}

fn g2_at(bytes: &[u8]) -> G2AffineRepr {
    G2AffineRepr {
        x: Fp2Repr::new(fp_at(&bytes[..48]), fp_at(&bytes[48..96])),
        y: Fp2Repr::new(fp_at(&bytes[96..144]), fp_at(&bytes[144..192])),
    }
}

fn fp_at(bytes: &[u8]) -> FpRepr {
    let mut limbs = [0u64; 6];
    for (l, w) in limbs.iter_mut().zip(bytes.chunks_exact(8)) {
        let mut b = [0u8; 8];
        b.copy_from_slice(w);
        *l = u64::from_le_bytes(b);
    }
    FpRepr { limbs }
}

/// A zkey point group as the reader sees it.
trait ZkeyPoint: Copy + Send + Sync + bytemuck::Zeroable {
    const BYTES: usize;
    fn read(bytes: &[u8]) -> Self;
    fn is_identity(&self) -> bool;
    /// Why the point fails `check`, if it does (identity passes).
    fn problem(&self, check: PointCheck) -> Option<&'static str>;
}

impl ZkeyPoint for G1AffineRepr {
    const BYTES: usize = G1_BYTES as usize;
    fn read(bytes: &[u8]) -> Self {
        g1_at(bytes)
    }
    fn is_identity(&self) -> bool {
        G1AffineRepr::is_identity(self)
    }
    fn problem(&self, check: PointCheck) -> Option<&'static str> {
        if !self.is_reduced() {
            return Some("a coordinate is not below p");
        }
        if self.is_identity() {
            return None;
        }
        match check {
            PointCheck::None => None,
            PointCheck::Curve => (!self.is_on_curve()).then_some("point not on curve"),
            PointCheck::Full => self
                .to_affine()
                .err()
                .map(|_| "point not on the curve or not in the prime-order subgroup"),
        }
    }
}

impl ZkeyPoint for G2AffineRepr {
    const BYTES: usize = G2_BYTES as usize;
    fn read(bytes: &[u8]) -> Self {
        g2_at(bytes)
    }
    fn is_identity(&self) -> bool {
        G2AffineRepr::is_identity(self)
    }
    fn problem(&self, check: PointCheck) -> Option<&'static str> {
        if !self.is_reduced() {
            return Some("a coordinate is not below p");
        }
        if self.is_identity() {
            return None;
        }
        match check {
            PointCheck::None => None,
            PointCheck::Curve => (!self.is_on_curve()).then_some("point not on curve"),
            PointCheck::Full => self
                .to_affine()
                .err()
                .map(|_| "point not on the curve or not in the prime-order subgroup"),
        }
    }
}

/// Points per parallel task.
const TASK_POINTS: usize = 4096;

/// One coefficient entry, decoded.
#[derive(Clone, Copy)]
struct Coefficient {
    matrix: u32,
    signal: u32,
    value: Scalar,
}

impl Coefficient {
    const ZERO: Coefficient = Coefficient {
        matrix: 0,
        signal: 0,
        value: Scalar::ZERO,
    };
}

/// Coefficients decoded at once while the matrices are built (one segment of rows).
const DECODE_SEGMENT: u64 = 1 << 18;

impl ZkeyFile {
    /// Maps the file and walks its section table and headers ([`ZkeyLayout::parse`]).
    pub fn open(path: impl AsRef<Path>) -> Result<ZkeyFile> {
        let path = path.as_ref();
        let io = |source| SrsError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = File::open(path).map_err(io)?;
        // SAFETY: read-only shared mapping of a file treated as immutable while open (the
        // same contract as `ParamsFile::open`); nothing is written through it.
        let map = unsafe { Mmap::map(&file) }.map_err(io)?;
        let layout = ZkeyLayout::parse(&map)?;
        Ok(ZkeyFile {
            path: path.to_path_buf(),
            map,
            layout,
        })
    }

    /// The validated layout.
    pub fn layout(&self) -> &ZkeyLayout {
        &self.layout
    }

    /// The path it was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn section(&self, s: ZkeySection) -> (&[u8], u64) {
        let span = self.layout.at(s);
        (
            &self.map[span.offset as usize..(span.offset + span.len) as usize],
            span.offset,
        )
    }

    /// What [`ZkeyFile::load`] charges.
    pub fn plan(&self) -> ZkeyPlan {
        let l = &self.layout;
        let (n_vars, n_private) = (u64::from(l.n_vars), u64::from(l.n_private()));
        let n = u64::from(l.domain_size);
        let vk = 3 * G1_BYTES + 3 * G2_BYTES + (u64::from(l.n_public) + 1) * G1_BYTES;
        let destination_bytes = vk + (n + n_private + 2 * n_vars) * G1_BYTES + n_vars * G2_BYTES;
        let largest = [
            ZkeySection::Coefficients,
            ZkeySection::A,
            ZkeySection::B2,
            ZkeySection::H,
        ]
        .iter()
        .map(|s| l.at(*s).len)
        .max()
        .unwrap_or(0);
        let index = 4 * (n + 1)
            + 4 * u64::from(l.n_coefficients)
            + DECODE_SEGMENT.min(u64::from(l.n_coefficients))
                * std::mem::size_of::<Coefficient>() as u64;
        // Which signals keep their A and B points: one byte each.
        let keep = 2 * n_vars;
        ZkeyPlan {
            destination_bytes,
            transient_bytes: largest + index + keep,
        }
    }

    /// Reads and fully checks the verifying key (curve and subgroup; the six fixed points
    /// must not be at infinity).
    pub fn verifying_key(&self) -> Result<VerifyingKeyRepr> {
        let (h, base) = self.section(ZkeySection::Groth16Header);
        // alpha1 starts after n8q, q, n8r, r and the three counts.
        let start = 4 + 48 + 4 + 32 + 12;
        let sizes = [G1_BYTES, G1_BYTES, G2_BYTES, G2_BYTES, G1_BYTES, G2_BYTES];
        let names = ["alpha1", "beta1", "beta2", "gamma2", "delta1", "delta2"];
        let mut offsets = [0u64; 6];
        let mut at = start;
        for (o, s) in offsets.iter_mut().zip(sizes) {
            *o = at;
            at += s;
        }
        let fixed_err = |i: usize, reason: &'static str| SrsError::ZkeyPoint {
            section: ZkeySection::Groth16Header,
            index: i as u64,
            offset: base + offsets[i],
            reason: if reason.is_empty() { names[i] } else { reason },
        };
        let g1 = |i: usize| -> Result<G1AffineRepr> {
            let o = offsets[i] as usize;
            let p = g1_at(&h[o..o + 96]);
            if p.is_identity() {
                return Err(fixed_err(i, "point at infinity"));
            }
            match p.problem(PointCheck::Full) {
                Some(reason) => Err(fixed_err(i, reason)),
                None => Ok(p),
            }
        };
        let g2 = |i: usize| -> Result<G2AffineRepr> {
            let o = offsets[i] as usize;
            let p = g2_at(&h[o..o + 192]);
            if p.is_identity() {
                return Err(fixed_err(i, "point at infinity"));
            }
            match p.problem(PointCheck::Full) {
                Some(reason) => Err(fixed_err(i, reason)),
                None => Ok(p),
            }
        };
        let (ic_bytes, ic_base) = self.section(ZkeySection::Ic);
        let mut ic = vec![G1AffineRepr::default(); self.layout.n_public as usize + 1];
        convert(
            ic_bytes,
            &mut ic,
            ZkeySection::Ic,
            ic_base,
            PointCheck::Full,
        )?;
        Ok(VerifyingKeyRepr {
            alpha_g1: g1(0)?,
            beta_g1: g1(1)?,
            beta_g2: g2(2)?,
            gamma_g2: g2(3)?,
            delta_g1: g1(4)?,
            delta_g2: g2(5)?,
            ic,
        })
    }

    /// The matrix, constraint and signal of coefficient `k`, checked: matrix 0 or 1,
    /// constraint inside the domain, signal below `n_vars` (no field arithmetic).
    fn coefficient_place(&self, coefs: &[u8], base: u64, k: usize) -> Result<(u32, u32, u32)> {
        let at = 4 + k * COEFFICIENT_BYTES as usize;
        let e = &coefs[at..at + 12];
        let word = |i: usize| u32::from_le_bytes([e[i], e[i + 1], e[i + 2], e[i + 3]]);
        let (matrix, constraint, signal) = (word(0), word(4), word(8));
        let bad = |reason: String| SrsError::ZkeyCoefficient {
            index: k as u64,
            offset: base + at as u64,
            reason,
        };
        if matrix > 1 {
            return Err(bad(format!("matrix {matrix}, expected 0 (a) or 1 (b)")));
        }
        if constraint >= self.layout.domain_size {
            return Err(bad(format!(
                "constraint {constraint} outside the domain of {} rows",
                self.layout.domain_size
            )));
        }
        if signal >= self.layout.n_vars {
            return Err(bad(format!(
                "signal {signal}, the circuit has {} signals",
                self.layout.n_vars
            )));
        }
        Ok((matrix, constraint, signal))
    }

    /// Decodes coefficient `k` ([`ZkeyFile::coefficient_place`]'s checks, and the value
    /// below r).
    fn coefficient(
        &self,
        coefs: &[u8],
        base: u64,
        k: usize,
        r_inv2: &Scalar,
    ) -> Result<Coefficient> {
        let (matrix, _, signal) = self.coefficient_place(coefs, base, k)?;
        let at = 4 + k * COEFFICIENT_BYTES as usize;
        let mut v = [0u8; 32];
        v.copy_from_slice(&coefs[at + 12..at + COEFFICIENT_BYTES as usize]);
        let stored: Option<Scalar> = Scalar::from_repr(v).into();
        let stored = stored.ok_or_else(|| SrsError::ZkeyCoefficient {
            index: k as u64,
            offset: base + at as u64,
            reason: "value is not below r".into(),
        })?;
        Ok(Coefficient {
            matrix,
            signal,
            value: stored * r_inv2,
        })
    }

    /// Loads under `budget`: charges [`ZkeyFile::plan`]'s peak first (fails at once if it
    /// does not fit), builds the matrices (their growth charged as `Category::Pce`),
    /// reads the verifying key (fully checked) and the bases (`check`), and shrinks the
    /// charge to what is kept. Host memory only.
    pub fn load(&self, budget: &Budget, check: PointCheck) -> Result<ZkeyParams> {
        let plan = self.plan();
        let label = format!("zkey {}", self.path.display());
        let mut reservation = budget
            .try_reserve(plan.peak_bytes(), Category::Srs, label.clone())
            .map_err(|source| SrsError::Budget {
                requested_bytes: plan.peak_bytes(),
                label,
                source,
            })?;
        let started = Instant::now();
        let l = self.layout;
        let n = l.domain_size as usize;
        let log_n = l.domain_size.trailing_zeros();
        let e = domain::exponent();
        let e_inv = domain::inverse_mod_2_64(e);
        let mask = n - 1;
        // snarkjs row i sits at e·i mod n of bellman's domain (module docs).
        let to_bellman = |i: usize| (e as usize).wrapping_mul(i) & mask;
        let from_bellman = |j: usize| (e_inv as usize).wrapping_mul(j) & mask;

        let vk = self.verifying_key()?;

        // Coefficients: decode and bucket by (reordered) row, then build the PCE.
        let (coefs, coefs_base) = self.section(ZkeySection::Coefficients);
        let r = Field::pow_vartime(&Scalar::from(2u64), [256u64]);
        let r_inv2 = r.square().invert().unwrap_or(Scalar::ZERO);
        let n_coefs = l.n_coefficients as usize;
        let mut row_start = vec![0u32; n + 1];
        for k in 0..n_coefs {
            let (_, constraint, _) = self.coefficient_place(coefs, coefs_base, k)?;
            row_start[to_bellman(constraint as usize) + 1] += 1;
        }
        for j in 0..n {
            row_start[j + 1] += row_start[j];
        }
        let mut order = vec![0u32; n_coefs];
        let mut fill = row_start.clone();
        for k in 0..n_coefs {
            let at = 4 + k * COEFFICIENT_BYTES as usize + 4;
            let constraint =
                u32::from_le_bytes([coefs[at], coefs[at + 1], coefs[at + 2], coefs[at + 3]]);
            let j = to_bellman(constraint as usize);
            order[fill[j] as usize] = k as u32;
            fill[j] += 1;
        }
        drop(fill);
        let n_inputs = l.n_public + 1;
        let pce_charge = budget
            .try_reserve(
                0,
                Category::Pce,
                format!("zkey matrices {}", self.path.display()),
            )
            .map_err(|source| SrsError::Budget {
                requested_bytes: 0,
                label: "zkey matrices".into(),
                source,
            })?;
        let mut rows = RowBuilder::new(n_inputs, l.n_private(), Some(pce_charge))
            .map_err(|source| SrsError::ZkeyMatrices { source })?;
        // Rows in segments of about DECODE_SEGMENT coefficients: a segment's values are
        // decoded on all cores, then its rows pushed in order (the builder is serial).
        let mut a_terms = Vec::new();
        let mut b_terms = Vec::new();
        let mut decoded: Vec<Coefficient> = Vec::new();
        let mut j0 = 0;
        while j0 < n {
            let first = row_start[j0] as usize;
            let mut j1 = j0 + 1;
            while j1 < n && (row_start[j1 + 1] as usize - first) as u64 <= DECODE_SEGMENT {
                j1 += 1;
            }
            let ks = &order[first..row_start[j1] as usize];
            decoded.clear();
            decoded.resize(ks.len(), Coefficient::ZERO);
            let parallel = decoded
                .par_iter_mut()
                .zip(ks.par_iter())
                .with_min_len(4096)
                .try_for_each(|(d, &k)| {
                    *d = self.coefficient(coefs, coefs_base, k as usize, &r_inv2)?;
                    Ok::<(), SrsError>(())
                });
            if parallel.is_err() {
                // Report the first bad coefficient of the segment, as a serial read would.
                for &k in ks {
                    self.coefficient(coefs, coefs_base, k as usize, &r_inv2)?;
                }
            }
            let mut at = 0;
            for j in j0..j1 {
                a_terms.clear();
                b_terms.clear();
                let len = (row_start[j + 1] - row_start[j]) as usize;
                for c in &decoded[at..at + len] {
                    let t = (c.signal, c.value);
                    if c.matrix == 0 {
                        a_terms.push(t);
                    } else {
                        b_terms.push(t);
                    }
                }
                at += len;
                rows.push_row(a_terms.iter().copied(), b_terms.iter().copied(), []);
            }
            j0 = j1;
        }
        drop(decoded);
        drop(order);
        drop(row_start);
        let (pce, pce_reservation) = rows
            .finish()
            .map_err(|source| SrsError::ZkeyMatrices { source })?;
        let mut pce_reservation = pce_reservation;
        if let Some(r) = pce_reservation.as_mut() {
            r.shrink_to(pce.resident_bytes());
        }
        self.release(ZkeySection::Coefficients);

        // Bases. A, B1, B2 keep the signals dense in their matrix (groth16's layout):
        // inputs always in A, dense aux after; B inputs then aux where dense.
        let d = pce.densities();
        let n_pub = n_inputs as usize;
        let a_keep: Vec<bool> = (0..l.n_vars as usize)
            .map(|s| s < n_pub || d.a_aux().get(s - n_pub))
            .collect();
        let b_keep: Vec<bool> = (0..l.n_vars as usize)
            .map(|s| {
                if s < n_pub {
                    d.b_input().get(s)
                } else {
                    d.b_aux().get(s - n_pub)
                }
            })
            .collect();
        let a = self.dense_section::<G1AffineRepr>(ZkeySection::A, &a_keep, check)?;
        let b_g1 = self.dense_section::<G1AffineRepr>(ZkeySection::B1, &b_keep, check)?;
        let b_g2 = self.dense_section::<G2AffineRepr>(ZkeySection::B2, &b_keep, check)?;
        let (c_bytes, c_base) = self.section(ZkeySection::C);
        let mut l_query = host_points::<G1AffineRepr>(l.n_private() as usize, ZkeySection::C)?;
        convert(c_bytes, &mut l_query, ZkeySection::C, c_base, check)?;
        self.release(ZkeySection::C);
        let h_query = self.h_section(n, from_bellman, check)?;

        let layout = ParamsLayout::from_counts(
            n_inputs,
            [
                h_query.len() as u32,
                l_query.len() as u32,
                a.len() as u32,
                b_g1.len() as u32,
                b_g2.len() as u32,
            ],
        );
        let kept = layout.loaded_bulk_bytes() + vk.bytes();
        let peak_charged_bytes = reservation.bytes();
        reservation.shrink_to(kept);
        let stats = LoadStats {
            file_bytes: l.file_bytes,
            seconds: started.elapsed().as_secs_f64(),
            peak_charged_bytes,
            steady_charged_bytes: reservation.bytes(),
        };
        crate::metrics::record_load(&stats);
        Ok(ZkeyParams {
            params: LoadedParams::host(
                layout,
                vk,
                h_query,
                l_query,
                a,
                b_g1,
                b_g2,
                stats,
                reservation,
            ),
            pce,
            pce_reservation,
            n_public: l.n_public,
            domain_size: l.domain_size,
            h_coset_shift: domain::odd_coset_shift(log_n),
        })
    }

    /// The points of `section` whose signal `keep` marks, in signal order; a dropped
    /// signal's point must be the point at infinity.
    fn dense_section<P: ZkeyPoint>(
        &self,
        section: ZkeySection,
        keep: &[bool],
        check: PointCheck,
    ) -> Result<Vec<P>> {
        let (bytes, base) = self.section(section);
        let n_kept = keep.iter().filter(|k| **k).count();
        let mut all = host_points::<P>(keep.len(), section)?;
        convert(bytes, &mut all, section, base, check)?;
        self.release(section);
        if let Some(s) = (0..keep.len()).find(|&s| !keep[s] && !all[s].is_identity()) {
            return Err(SrsError::ZkeyPoint {
                section,
                index: s as u64,
                offset: base + (s * P::BYTES) as u64,
                reason: "signal absent from the matrix but its point is not at infinity",
            });
        }
        let mut kept = 0;
        for s in 0..keep.len() {
            if keep[s] {
                all[kept] = all[s];
                kept += 1;
            }
        }
        all.truncate(n_kept);
        all.shrink_to_fit();
        Ok(all)
    }

    /// The H points reordered onto bellman's domain: position j holds point
    /// `from_bellman(j)`.
    fn h_section(
        &self,
        n: usize,
        from_bellman: impl Fn(usize) -> usize + Sync,
        check: PointCheck,
    ) -> Result<Vec<G1AffineRepr>> {
        let (bytes, base) = self.section(ZkeySection::H);
        let mut out = host_points::<G1AffineRepr>(n, ZkeySection::H)?;
        out.par_chunks_mut(TASK_POINTS)
            .enumerate()
            .try_for_each(|(task, chunk)| {
                for (k, o) in chunk.iter_mut().enumerate() {
                    let i = from_bellman(task * TASK_POINTS + k);
                    let at = i * G1_BYTES as usize;
                    let p = g1_at(&bytes[at..at + G1_BYTES as usize]);
                    if let Some(reason) = p.problem(check) {
                        return Err(SrsError::ZkeyPoint {
                            section: ZkeySection::H,
                            index: i as u64,
                            offset: base + at as u64,
                            reason,
                        });
                    }
                    *o = p;
                }
                Ok(())
            })?;
        self.release(ZkeySection::H);
        Ok(out)
    }

    /// Drops a converted section's pages from our address space (the page cache keeps
    /// them unless the kernel needs the memory).
    fn release(&self, section: ZkeySection) {
        let span = self.layout.at(section);
        // SAFETY: the mapping is read-only and shared, so MADV_DONTNEED only removes our
        // page-table entries (a later read faults the same bytes back in); no reference
        // into the range outlives the conversion that just finished.
        let _ = unsafe {
            self.map.unchecked_advise_range(
                UncheckedAdvice::DontNeed,
                span.offset as usize,
                span.len as usize,
            )
        };
    }
}

/// `n` zeroed points of host memory (already charged by the load's reservation).
fn host_points<P: bytemuck::Zeroable + Copy>(n: usize, section: ZkeySection) -> Result<Vec<P>> {
    alloc_host::<P>(n).ok_or(SrsError::ZkeyHeader {
        field: "points to allocate",
        found: n as u64,
        expected: format!("an allocation the system grants ({section})"),
    })
}

/// Reads the points of `bytes` into `out` in parallel, checking each (the point at
/// infinity passes).
fn convert<P: ZkeyPoint>(
    bytes: &[u8],
    out: &mut [P],
    section: ZkeySection,
    base: u64,
    check: PointCheck,
) -> Result<()> {
    out.par_chunks_mut(TASK_POINTS)
        .zip(bytes.par_chunks(TASK_POINTS * P::BYTES))
        .enumerate()
        .try_for_each(|(task, (out, bytes))| {
            for (k, (o, b)) in out.iter_mut().zip(bytes.chunks_exact(P::BYTES)).enumerate() {
                let i = task * TASK_POINTS + k;
                let p = P::read(b);
                let offset = base + (i * P::BYTES) as u64;
                if let Some(reason) = p.problem(check) {
                    return Err(SrsError::ZkeyPoint {
                        section,
                        index: i as u64,
                        offset,
                        reason,
                    });
                }
                *o = p;
            }
            Ok(())
        })
}

#[cfg(test)]
mod tests {
    use super::domain::*;
    use super::*;

    #[test]
    fn the_two_roots_are_related_by_the_exponent() {
        let e = exponent();
        assert_eq!(e % 2, 1);
        for log_n in [0u32, 1, 2, 5, 17, 28, 32] {
            let w = Field::pow_vartime(&bellman_omega(log_n), [e & ((1u64 << log_n) - 1)]);
            assert_eq!(w, snarkjs_omega(log_n), "log_n = {log_n}");
        }
        assert_eq!(e.wrapping_mul(inverse_mod_2_64(e)), 1);
        // g² = ω_s, and g is not in the n-point domain (an odd coset).
        for log_n in [1u32, 3, 20] {
            let g = odd_coset_shift(log_n);
            assert_eq!(g.square(), snarkjs_omega(log_n));
            assert_ne!(Field::pow_vartime(&g, [1u64 << log_n]), Scalar::ONE);
        }
        // ffjavascript's non-residue is the smallest: 2, 3, 4 are squares mod r, 5 is not
        // (x^((r−1)/2) = x^(t·2^31)).
        let legendre = |x: u64| {
            let mut y = Scalar::from(x).pow_vartime(&T_LIMBS);
            for _ in 0..31 {
                y = y.square();
            }
            y
        };
        for x in [2u64, 3, 4] {
            assert_eq!(legendre(x), Scalar::ONE, "{x}");
        }
        assert_eq!(legendre(5), -Scalar::ONE);
        assert_eq!(snarkjs_omega(1), -Scalar::ONE);
        assert_eq!(
            bellman_omega(Scalar::S),
            Scalar::from(7u64).pow_vartime(&T_LIMBS)
        );
    }
}
