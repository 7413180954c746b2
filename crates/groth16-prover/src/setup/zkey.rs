//! snarkjs's Groth16 `.zkey` (BLS12-381) for a recorded circuit, fast and **insecure:
//! for testing only** — the counterpart of [`generate`](super::generate) for circom and
//! snarkjs users (`snarkjs groth16 prove` proves with it, `snarkjs zkey export
//! verificationkey` reads its key, Pinion proves from it with [`ZkeyProver`](crate::ZkeyProver)).
//!
//! # What is written
//! The sections srs-store's reader documents ([`srs_store::zkey`]), as `snarkjs groth16
//! setup` followed by one contribution would leave them, for the toxic waste given:
//! - the domain is groth16's (`n_rows` rounded up to a power of two, the input rows —
//!   one `A` term per public signal, which snarkjs also appends — included), its rows in
//!   the PCE's order, its roots ffjavascript's ([`srs_store::zkey::domain::snarkjs_omega`]);
//! - `A_j`, `B_j` (G1 and G2) are `A_j(τ)`, `B_j(τ)` for every signal (the point at
//!   infinity where the signal is absent from that matrix); `IC_j` (public) and `C_j`
//!   (private) are `(β·A_j(τ) + α·B_j(τ) + C_j(τ))` over γ and δ;
//! - `H_i = L_{2i+1}(τ)/δ` with `L_k` the Lagrange basis of the domain of twice the size:
//!   snarkjs's prover pairs these with `a·b − c` on the odd coset, with no division by Z;
//! - the coefficient section lists the A and B terms (C is not stored: snarkjs's prover
//!   takes `c = a∘b`), each value `v` as `v·R²` with `R = 2^256 mod r`;
//! - an empty contribution list (no ceremony happened; `snarkjs zkey verify` will say so).
//!
//! Whoever holds the RNG's seed can forge proofs for this key.

use std::io::Write;
use std::time::{Duration, Instant};

use bls12_381::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use bls_repr::{FpRepr, G1AffineRepr, G2AffineRepr, FP_MODULUS, FR_MODULUS};
use ff::{Field, PrimeField};
use group::Curve;
use memory_budget::Budget;
use pce_cache::{MatrixId, Pce};
use rand_core::Rng;
use rayon::prelude::*;
use srs_store::zkey::domain;

use super::{
    best_window, chunk_bytes, degenerate, half, qap_at_tau, table_bytes, Charged, Counting,
    FixedBase, ToxicWaste, CHUNK,
};
use crate::ProverError;

/// Sections written: header, groth16 header, IC, coefficients, A, B1, B2, C, H,
/// contributions.
const N_SECTIONS: u32 = 10;
const G1_BYTES: u64 = 96;
const G2_BYTES: u64 = 192;
const COEFFICIENT_BYTES: u64 = 12 + 32;
const GROTH16_HEADER_BYTES: u64 = 4 + 48 + 4 + 32 + 3 * 4 + 3 * G1_BYTES + 3 * G2_BYTES;
/// Largest domain written: the reader's limit (2^28) for the domain, and the H points
/// need the roots of the domain of twice the size.
const MAX_LOG_DOMAIN: u32 = 27;

/// What [`generate_zkey`] wrote and what it cost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZkeyReport {
    /// Signals (ONE, the public ones, the private ones): the A, B1 and B2 sections' points.
    pub n_vars: u32,
    /// Public signals (ONE not counted).
    pub n_public: u32,
    /// The domain: rows of the A and B matrices and H points.
    pub domain_size: u32,
    /// Entries of the coefficient section (A and B terms).
    pub n_coefficients: u32,
    /// Bytes written.
    pub bytes_written: u64,
    /// The most this generation had charged to the budget at once.
    pub peak_charged_bytes: u64,
    /// Window width of the G1 and G2 tables.
    pub windows: (u32, u32),
    /// The QAP at tau (Lagrange coefficients and the three transposed products).
    pub qap_time: Duration,
    /// Building the two fixed-base tables.
    pub table_time: Duration,
    /// Computing and writing the points and coefficients.
    pub points_time: Duration,
}

/// Draws the toxic waste from `rng` ([`ToxicWaste::random`]) and writes a snarkjs `.zkey`
/// for the circuit `pce` recorded (see the module docs). **Insecure: for testing only.**
///
/// ```
/// use groth16_prover::setup;
/// use groth16_prover::testing::MimcChain;
/// use memory_budget::Budget;
/// use rand::SeedableRng;
///
/// let pce = pce_cache::Pce::record(MimcChain::new(20, 1))?;
/// let mut zkey = Vec::new();
/// let report = setup::generate_zkey(
///     &pce,
///     &mut rand::rngs::StdRng::seed_from_u64(5),
///     &Budget::fixed(1 << 30),
///     &mut zkey,
/// )?;
/// assert_eq!(&zkey[..4], b"zkey");
/// assert_eq!(report.bytes_written, zkey.len() as u64);
/// let layout = srs_store::ZkeyLayout::parse(&zkey)?;
/// assert_eq!(layout.n_public(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn generate_zkey<R: Rng + ?Sized, W: Write>(
    pce: &Pce,
    rng: &mut R,
    budget: &Budget,
    out: W,
) -> Result<ZkeyReport, ProverError> {
    generate_zkey_with(pce, &ToxicWaste::random(rng), budget, out)
}

/// [`generate_zkey`] with given toxic waste.
pub fn generate_zkey_with<W: Write>(
    pce: &Pce,
    waste: &ToxicWaste,
    budget: &Budget,
    out: W,
) -> Result<ZkeyReport, ProverError> {
    let ToxicWaste {
        g1,
        g2,
        alpha,
        beta,
        gamma,
        delta,
        tau,
    } = *waste;
    let (gamma_inv, delta_inv) = waste.checked_inverses()?;

    let shape = pce.shape();
    let n_inputs = shape.n_inputs as usize;
    let n_columns = shape.n_columns() as usize;
    let m = gpu_ntt::h_domain_size(shape.n_rows as usize)?;
    let log_m = m.trailing_zeros();
    let too_large = |what: &str, found: u64| {
        ProverError::ParamsWrite {
        section: "zkey header",
        offset: 0,
        source: std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{what} {found} does not fit a zkey (u32 counts, domain at most 2^{MAX_LOG_DOMAIN})"),
        ),
    }
    };
    if log_m > MAX_LOG_DOMAIN {
        return Err(too_large("domain", m as u64));
    }
    let n_vars = u32::try_from(n_columns).map_err(|_| too_large("signals", n_columns as u64))?;
    let n_coefficients = pce.n_nonzeros_of(MatrixId::A) + pce.n_nonzeros_of(MatrixId::B);
    let n_coefficients_u32 =
        u32::try_from(n_coefficients).map_err(|_| too_large("coefficients", n_coefficients))?;
    if n_inputs == 0 {
        return Err(too_large("inputs (ONE missing)", 0));
    }
    // tau on either domain would make a Lagrange coefficient undefined.
    let tau_2m = pow(tau, 2 * m as u64);
    if tau_2m == Scalar::ONE {
        return Err(degenerate("tau", "a root of unity of the domain"));
    }
    let mut charge = Charged::new(budget);

    // 1. The QAP at tau over snarkjs's domain, per column.
    let start = Instant::now();
    let scalar_bytes = std::mem::size_of::<Scalar>() as u64;
    charge.grow(
        scalar_bytes * (m as u64 + 3 * n_columns as u64),
        "lagrange coefficients and the qap at tau",
    )?;
    let (at, bt, ext) = {
        let lagrange = lagrange_at(tau, domain::snarkjs_omega(log_m), m, 0..m);
        qap_at_tau(pce, &lagrange, waste, (gamma_inv, delta_inv))?
    };
    charge.shrink_to(scalar_bytes * 3 * n_columns as u64);
    let qap_time = start.elapsed();

    // 2. The tables.
    let start = Instant::now();
    let n_g1 = 3 * n_columns + m;
    let w1 = best_window(n_g1);
    let w2 = best_window(n_columns);
    let threads = rayon::current_num_threads() as u64;
    let build_scratch = |w: u32, proj: usize| threads * half(w) as u64 * proj as u64;
    charge.grow(
        table_bytes::<G1Projective>(w1)
            + table_bytes::<G2Projective>(w2)
            + build_scratch(w1, std::mem::size_of::<G1Projective>())
                .max(build_scratch(w2, std::mem::size_of::<G2Projective>())),
        "fixed-base tables",
    )?;
    let t1 = FixedBase::new(g1, w1);
    let t2 = FixedBase::new(g2, w2);
    charge.shrink_to(
        scalar_bytes * 3 * n_columns as u64
            + table_bytes::<G1Projective>(w1)
            + table_bytes::<G2Projective>(w2),
    );
    let table_time = start.elapsed();

    // 3. The file, section by section.
    let start = Instant::now();
    charge.grow(
        chunk_bytes::<G1Projective>().max(chunk_bytes::<G2Projective>()),
        "a chunk of points",
    )?;
    let mut out = Counting {
        inner: out,
        written: 0,
    };
    let n_public = n_inputs as u32 - 1;
    let n_aux = (n_columns - n_inputs) as u64;
    out.put("zkey magic", b"zkey")?;
    out.put("zkey version", &1u32.to_le_bytes())?;
    out.put("zkey section count", &N_SECTIONS.to_le_bytes())?;

    section(&mut out, 1, 4)?;
    out.put("header", &1u32.to_le_bytes())?;

    section(&mut out, 2, GROTH16_HEADER_BYTES)?;
    let mut header = Vec::with_capacity(GROTH16_HEADER_BYTES as usize);
    header.extend_from_slice(&48u32.to_le_bytes());
    header.extend_from_slice(&fp_le(&FpRepr { limbs: FP_MODULUS }));
    header.extend_from_slice(&32u32.to_le_bytes());
    header.extend_from_slice(&r_le());
    for v in [n_vars, n_public, m as u32] {
        header.extend_from_slice(&v.to_le_bytes());
    }
    let (g1a, g2a) = (g1.to_affine(), g2.to_affine());
    for p in [g1a * alpha, g1a * beta] {
        header.extend_from_slice(&g1_bytes(&p.to_affine()));
    }
    for p in [g2a * beta, g2a * gamma] {
        header.extend_from_slice(&g2_bytes(&p.to_affine()));
    }
    header.extend_from_slice(&g1_bytes(&(g1a * delta).to_affine()));
    header.extend_from_slice(&g2_bytes(&(g2a * delta).to_affine()));
    debug_assert_eq!(header.len() as u64, GROTH16_HEADER_BYTES);
    out.put("groth16 header", &header)?;

    section(&mut out, 3, n_inputs as u64 * G1_BYTES)?;
    t1.write_points(
        "ic",
        n_inputs,
        &mut out,
        G1_BYTES as usize,
        g1_into,
        |s, buf| buf.extend_from_slice(&ext[s..s + CHUNK.min(n_inputs - s)]),
    )?;

    section(
        &mut out,
        4,
        4 + u64::from(n_coefficients_u32) * COEFFICIENT_BYTES,
    )?;
    out.put("coefficients", &n_coefficients_u32.to_le_bytes())?;
    // v is stored as v·R² (R = 2^256 mod r): Montgomery form of the Montgomery form.
    let r2 = pow(Scalar::from(2u64), 512);
    for (matrix, which) in [(0u32, MatrixId::A), (1, MatrixId::B)] {
        let mut buf = Vec::with_capacity(CHUNK * COEFFICIENT_BYTES as usize);
        let mut failed = None;
        pce.for_each_term(which, |row, col, coeff| {
            if failed.is_some() {
                return;
            }
            buf.extend_from_slice(&matrix.to_le_bytes());
            buf.extend_from_slice(&(row as u32).to_le_bytes());
            buf.extend_from_slice(&col.to_le_bytes());
            buf.extend_from_slice((coeff * r2).to_repr().as_ref());
            if buf.len() >= CHUNK * COEFFICIENT_BYTES as usize {
                failed = out.put("coefficients", &buf).err();
                buf.clear();
            }
        });
        if let Some(e) = failed {
            return Err(e);
        }
        out.put("coefficients", &buf)?;
    }

    let all = |v: &[Scalar], s: usize, buf: &mut Vec<Scalar>| {
        buf.extend_from_slice(&v[s..s + CHUNK.min(v.len() - s)])
    };
    section(&mut out, 5, n_columns as u64 * G1_BYTES)?;
    t1.write_points(
        "a",
        n_columns,
        &mut out,
        G1_BYTES as usize,
        g1_into,
        |s, buf| all(&at, s, buf),
    )?;
    section(&mut out, 6, n_columns as u64 * G1_BYTES)?;
    t1.write_points(
        "b1",
        n_columns,
        &mut out,
        G1_BYTES as usize,
        g1_into,
        |s, buf| all(&bt, s, buf),
    )?;
    section(&mut out, 7, n_columns as u64 * G2_BYTES)?;
    t2.write_points(
        "b2",
        n_columns,
        &mut out,
        G2_BYTES as usize,
        g2_into,
        |s, buf| all(&bt, s, buf),
    )?;
    drop((at, bt));
    section(&mut out, 8, n_aux * G1_BYTES)?;
    t1.write_points(
        "c",
        n_aux as usize,
        &mut out,
        G1_BYTES as usize,
        g1_into,
        |s, buf| all(&ext[n_inputs..], s, buf),
    )?;
    drop(ext);

    // H_i = L_{2i+1}(τ)/δ over the domain of 2m points.
    section(&mut out, 9, m as u64 * G1_BYTES)?;
    let omega_2m = domain::snarkjs_omega(log_m + 1);
    t1.write_points("h", m, &mut out, G1_BYTES as usize, g1_into, |s, buf| {
        let n = CHUNK.min(m - s);
        let odd = lagrange_odd(tau, omega_2m, 2 * m, s..s + n);
        buf.extend(odd.into_iter().map(|l| l * delta_inv));
    })?;

    section(&mut out, 10, 64 + 4)?;
    out.put("contributions", &[0u8; 64])?;
    out.put("contributions", &0u32.to_le_bytes())?;
    out.inner
        .flush()
        .map_err(|source| ProverError::ParamsWrite {
            section: "flush",
            offset: out.written,
            source,
        })?;
    Ok(ZkeyReport {
        n_vars,
        n_public,
        domain_size: m as u32,
        n_coefficients: n_coefficients_u32,
        bytes_written: out.written,
        peak_charged_bytes: charge.peak,
        windows: (w1, w2),
        qap_time,
        table_time,
        points_time: start.elapsed(),
    })
}

/// A section's table entry: type, then size (u32 and u64, little-endian).
fn section<W: Write>(out: &mut Counting<W>, id: u32, bytes: u64) -> Result<(), ProverError> {
    out.put("section table", &id.to_le_bytes())?;
    out.put("section table", &bytes.to_le_bytes())
}

/// The Lagrange basis of the `n`-point domain of `omega` at `tau`, for the indices in
/// `range`: `L_k(τ) = (τ^n − 1)/n · ω^k/(τ − ω^k)`. `tau` must not be in the domain.
fn lagrange_at(tau: Scalar, omega: Scalar, n: usize, range: std::ops::Range<usize>) -> Vec<Scalar> {
    lagrange_stride(tau, omega, n, range.start, 1, range.len())
}

/// `L_{2i+1}(τ)` of the `n`-point domain of `omega` for `i` in `range` (the odd points).
fn lagrange_odd(
    tau: Scalar,
    omega: Scalar,
    n: usize,
    range: std::ops::Range<usize>,
) -> Vec<Scalar> {
    lagrange_stride(tau, omega, n, 2 * range.start + 1, 2, range.len())
}

/// `L_k(τ)` for `k = first + step·i`, `i < count`, on all cores (batch inversion per
/// block of 1024).
fn lagrange_stride(
    tau: Scalar,
    omega: Scalar,
    n: usize,
    first: usize,
    step: usize,
    count: usize,
) -> Vec<Scalar> {
    let n_inv = Scalar::from(n as u64).invert().unwrap_or(Scalar::ZERO);
    let scale = (pow(tau, n as u64) - Scalar::ONE) * n_inv;
    let step_root = pow(omega, step as u64);
    let mut out = vec![Scalar::ZERO; count];
    out.par_chunks_mut(1024).enumerate().for_each(|(b, block)| {
        let k0 = first + step * b * 1024;
        let mut w = pow(omega, k0 as u64);
        let mut roots = Vec::with_capacity(block.len());
        for d in block.iter_mut() {
            roots.push(w);
            *d = tau - w;
            w *= step_root;
        }
        // Batch inversion: one inversion for the block.
        let mut acc = Scalar::ONE;
        let mut prefix = Vec::with_capacity(block.len());
        for d in block.iter() {
            prefix.push(acc);
            acc *= d;
        }
        let mut inv = acc.invert().unwrap_or(Scalar::ZERO);
        for (i, d) in block.iter_mut().enumerate().rev() {
            let this = inv * prefix[i];
            inv *= *d;
            *d = this * roots[i] * scale;
        }
    });
    out
}

fn pow(x: Scalar, e: u64) -> Scalar {
    Field::pow_vartime(&x, [e])
}

fn fp_le(x: &FpRepr) -> [u8; 48] {
    let mut b = [0u8; 48];
    for (w, l) in b.chunks_exact_mut(8).zip(x.limbs) {
        w.copy_from_slice(&l.to_le_bytes());
    }
    b
}

/// r, little-endian.
fn r_le() -> [u8; 32] {
    let mut b = [0u8; 32];
    for (w, l) in b.chunks_exact_mut(8).zip(FR_MODULUS) {
        w.copy_from_slice(&l.to_le_bytes());
    }
    b
}

fn g1_into(p: &G1Affine, out: &mut [u8]) {
    out.copy_from_slice(&g1_bytes(p));
}

fn g2_into(p: &G2Affine, out: &mut [u8]) {
    out.copy_from_slice(&g2_bytes(p));
}

/// A G1 point as a zkey stores it: x ‖ y, Montgomery form, little-endian; infinity is 0.
fn g1_bytes(p: &G1Affine) -> [u8; 96] {
    let r = G1AffineRepr::from_affine(p);
    let mut b = [0u8; 96];
    b[..48].copy_from_slice(&fp_le(&r.x));
    b[48..].copy_from_slice(&fp_le(&r.y));
    b
}

/// A G2 point as a zkey stores it: x.c0 ‖ x.c1 ‖ y.c0 ‖ y.c1.
fn g2_bytes(p: &G2Affine) -> [u8; 192] {
    let r = G2AffineRepr::from_affine(p);
    let mut b = [0u8; 192];
    for (i, f) in [r.x.c0, r.x.c1, r.y.c0, r.y.c1].iter().enumerate() {
        b[48 * i..48 * (i + 1)].copy_from_slice(&fp_le(f));
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lagrange_basis_sums_to_one_and_interpolates_x() {
        let tau = Scalar::from(123_456_789u64);
        for log_n in [1u32, 3, 11] {
            let n = 1usize << log_n;
            let omega = domain::snarkjs_omega(log_n);
            let l = lagrange_at(tau, omega, n, 0..n);
            // Σ L_k(τ) = 1 and Σ ω^k·L_k(τ) = τ.
            let sum: Scalar = l.iter().sum();
            assert_eq!(sum, Scalar::ONE, "n = {n}");
            let mut w = Scalar::ONE;
            let mut x = Scalar::ZERO;
            for v in &l {
                x += w * v;
                w *= omega;
            }
            assert_eq!(x, tau, "n = {n}");
            let odd = lagrange_odd(tau, omega, n, 0..n / 2);
            let odd_direct: Vec<Scalar> = (0..n / 2).map(|i| l[2 * i + 1]).collect();
            assert_eq!(odd, odd_direct, "n = {n}");
        }
    }

    #[test]
    fn the_header_primes_are_the_readers() {
        let q = fp_le(&FpRepr { limbs: FP_MODULUS });
        let r = r_le();
        // q ends in ...aaab, r in ...0001 (big-endian), so their little-endian first bytes:
        assert_eq!((q[0], q[1]), (0xab, 0xaa));
        assert_eq!((r[0], r[1], r[31]), (0x01, 0x00, 0x73));
    }
}
