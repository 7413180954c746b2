//! Groth16 parameters for a recorded circuit, fast and **insecure: for testing only**.
//!
//! [`generate`] draws the toxic waste (g1, g2, alpha, beta, gamma, delta, tau) from the
//! caller's RNG in the order `groth16::generate_random_parameters` draws it, and writes
//! the same bytes `groth16::Parameters::write` would write for that circuit and RNG (the
//! bellman / bellperson / Filecoin `.params` layout srs-store reads). Whoever holds the
//! RNG's seed knows the toxic waste and can forge proofs: use the result for tests and
//! benchmarks, never for anything that needs a trusted setup.
//!
//! # How
//! 1. The QAP at tau from the PCE: the Lagrange coefficients of the domain at tau (the
//!    powers `tau^i` through gpu-ntt's inverse NTT, exactly bellman's `ifft`), then
//!    `Aᵀ·L`, `Bᵀ·L`, `Cᵀ·L` per column ([`Pce::evaluate_transposed_into`], the three
//!    matrices on three threads).
//! 2. Fixed-base scalar multiplication: one table per group of `d·2^(w·k)·g` (signed
//!    digits `1 ≤ d ≤ 2^(w−1)`, affine), so a point costs `⌈256/w⌉` mixed additions and
//!    no doublings (groth16's wNAF costs ~255 doublings plus additions); points are
//!    computed in chunks on the rayon pool, made affine in batches, and streamed to the
//!    writer in the file's order (vk with ic, h, l, a, b_g1, b_g2).
//!
//! # Memory
//! Charged to the [`Budget`] (`Category::Transient`, label "parameter generation") before
//! it is allocated: first the Lagrange coefficients and the NTT twiddles (`64·m` bytes)
//! with the three column vectors (`96·n_columns`), then, once the coefficients are gone,
//! the two tables (`≈ 104·⌈256/w⌉·2^(w−1)` bytes for G1 and `≈ 200·…` for G2, w ≤ 16) and
//! one chunk of points. Nothing grows with the file: it is written as it is computed.
//!
//! # Differences from groth16
//! None in the bytes. Where groth16 would write parameters that our prover could not use
//! (a column whose coefficients cancel inside a row: groth16's prover and ours count it in
//! the density, its generator drops its point) this is a typed error instead.

use std::io::Write;
use std::time::{Duration, Instant};

use bls12_381::{G1Projective, G2Projective, Scalar};
use ff::{Field, PrimeField};
use gpu_ntt::{CpuNtt, NttBackend, Order};
use group::{Curve, CurveAffine, Group, UncompressedEncoding};
use memory_budget::{Budget, Category, Reservation};
use pce_cache::{Density, MatrixId, Pce};
use rand_core::Rng;
use rayon::prelude::*;

use crate::ProverError;

mod zkey;
pub use zkey::{generate_zkey, generate_zkey_with, ZkeyReport};

/// Points computed, made affine and written per step.
const CHUNK: usize = 1 << 14;

/// Largest window: tables of 2^15 points per window (53 MiB for G1, 102 MiB for G2).
const MAX_WINDOW: u32 = 16;

/// The secrets behind a parameter set. Whoever knows them can forge proofs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ToxicWaste {
    /// Generator of G1 used for every G1 point.
    pub g1: G1Projective,
    /// Generator of G2 used for every G2 point.
    pub g2: G2Projective,
    /// alpha.
    pub alpha: Scalar,
    /// beta.
    pub beta: Scalar,
    /// gamma (divides the ic query).
    pub gamma: Scalar,
    /// delta (divides the h and l queries).
    pub delta: Scalar,
    /// The evaluation point.
    pub tau: Scalar,
}

impl ToxicWaste {
    /// Draws g1, g2, alpha, beta, gamma, delta, tau in this order, as
    /// `groth16::generate_random_parameters` does, so the same RNG state gives the same
    /// parameters.
    pub fn random<R: Rng + ?Sized>(rng: &mut R) -> ToxicWaste {
        ToxicWaste {
            g1: G1Projective::random(&mut *rng),
            g2: G2Projective::random(&mut *rng),
            alpha: Scalar::random(&mut *rng),
            beta: Scalar::random(&mut *rng),
            gamma: Scalar::random(&mut *rng),
            delta: Scalar::random(&mut *rng),
            tau: Scalar::random(&mut *rng),
        }
    }
}

/// What [`generate`] wrote and what it cost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetupReport {
    /// `ic` points (public inputs, ONE included).
    pub n_ic: u64,
    /// `h` points (domain size − 1).
    pub n_h: u64,
    /// `l` points (aux variables).
    pub n_l: u64,
    /// `a` points.
    pub n_a: u64,
    /// `b_g1` and `b_g2` points (each).
    pub n_b: u64,
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
    /// Computing and writing the points.
    pub points_time: Duration,
}

/// Draws the toxic waste from `rng` ([`ToxicWaste::random`]) and writes the parameters of
/// the circuit `pce` recorded to `out` (see the module docs). **Insecure: for testing only.**
///
/// ```
/// use groth16_prover::setup;
/// use groth16_prover::testing::MimcChain;
/// use memory_budget::Budget;
/// use rand::SeedableRng;
///
/// let circuit = MimcChain::new(20, 1);
/// let pce = pce_cache::Pce::record(circuit.clone())?;
/// let mut bytes = Vec::new();
/// setup::generate(&pce, &mut rand::rngs::StdRng::seed_from_u64(5), &Budget::fixed(1 << 30), &mut bytes)?;
/// let reference = groth16::generate_random_parameters::<bls12_381::Bls12, _, _>(
///     circuit,
///     &mut rand::rngs::StdRng::seed_from_u64(5),
/// )?;
/// let mut expected = Vec::new();
/// reference.write(&mut expected)?;
/// assert!(bytes == expected);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn generate<R: Rng + ?Sized, W: Write>(
    pce: &Pce,
    rng: &mut R,
    budget: &Budget,
    out: W,
) -> Result<SetupReport, ProverError> {
    generate_with(pce, &ToxicWaste::random(rng), budget, out)
}

/// [`generate`] with given toxic waste.
pub fn generate_with<W: Write>(
    pce: &Pce,
    waste: &ToxicWaste,
    budget: &Budget,
    out: W,
) -> Result<SetupReport, ProverError> {
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
    let mut charge = Charged::new(budget);

    // 1. The QAP at tau, per column.
    let start = Instant::now();
    let scalar_bytes = std::mem::size_of::<Scalar>() as u64;
    charge.grow(
        scalar_bytes * (2 * m as u64 + 3 * n_columns as u64),
        "lagrange coefficients, twiddles and the qap at tau",
    )?;
    let (at, bt, ext) = {
        let ntt = CpuNtt::new();
        let mut lagrange = powers(tau, m);
        ntt.inverse(&mut lagrange, Order::Natural, Order::Natural)?;
        drop(ntt);
        qap_at_tau(pce, &lagrange, waste, (gamma_inv, delta_inv))?
    };
    charge.shrink_to(scalar_bytes * 3 * n_columns as u64);
    let qap_time = start.elapsed();

    // 2. The tables.
    let start = Instant::now();
    let n_a = at.iter().filter(|x| !bool::from(x.is_zero())).count();
    let n_b = bt.iter().filter(|x| !bool::from(x.is_zero())).count();
    let n_g1 = (m - 1) + n_columns + n_a + n_b;
    let w1 = best_window(n_g1);
    let w2 = best_window(n_b);
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

    // 3. The points, in the file's order.
    let start = Instant::now();
    charge.grow(
        chunk_bytes::<G1Projective>().max(chunk_bytes::<G2Projective>()),
        "a chunk of points",
    )?;
    let mut out = Counting {
        inner: out,
        written: 0,
    };
    let g1a = g1.to_affine();
    let g2a = g2.to_affine();
    for (section, point) in [("vk.alpha_g1", g1a * alpha), ("vk.beta_g1", g1a * beta)] {
        out.put(section, point.to_affine().to_uncompressed().as_ref())?;
    }
    for (section, point) in [("vk.beta_g2", g2a * beta), ("vk.gamma_g2", g2a * gamma)] {
        out.put(section, point.to_affine().to_uncompressed().as_ref())?;
    }
    out.put(
        "vk.delta_g1",
        (g1a * delta).to_affine().to_uncompressed().as_ref(),
    )?;
    out.put(
        "vk.delta_g2",
        (g2a * delta).to_affine().to_uncompressed().as_ref(),
    )?;
    t1.write("vk.ic", n_inputs, &mut out, |s, buf| {
        buf.extend_from_slice(&ext[s..s + CHUNK.min(n_inputs - s)])
    })?;
    // h_i = (tau^i · t(tau) / delta)·g1 with t(tau) = tau^m − 1, i < m − 1.
    let h_coeff = (tau.pow_vartime(&[m as u64, 0, 0, 0]) - Scalar::ONE) * delta_inv;
    t1.write("h", m - 1, &mut out, |s, buf| {
        let n = CHUNK.min(m - 1 - s);
        buf.resize(n, Scalar::ZERO);
        buf.par_chunks_mut(1024).enumerate().for_each(|(k, c)| {
            let mut x = tau.pow_vartime(&[(s + k * 1024) as u64, 0, 0, 0]) * h_coeff;
            for v in c {
                *v = x;
                x *= tau;
            }
        });
    })?;
    t1.write("l", n_columns - n_inputs, &mut out, |s, buf| {
        let from = n_inputs + s;
        buf.extend_from_slice(&ext[from..from + CHUNK.min(n_columns - from)])
    })?;
    drop(ext);
    t1.write("a", n_a, &mut out, nonzero(&at))?;
    t1.write("b_g1", n_b, &mut out, nonzero(&bt))?;
    t2.write("b_g2", n_b, &mut out, nonzero(&bt))?;
    out.inner
        .flush()
        .map_err(|source| ProverError::ParamsWrite {
            section: "flush",
            offset: out.written,
            source,
        })?;
    Ok(SetupReport {
        n_ic: n_inputs as u64,
        n_h: m as u64 - 1,
        n_l: (n_columns - n_inputs) as u64,
        n_a: n_a as u64,
        n_b: n_b as u64,
        bytes_written: out.written,
        peak_charged_bytes: charge.peak,
        windows: (w1, w2),
        qap_time,
        table_time,
        points_time: start.elapsed(),
    })
}

/// `fill` for a query that skips the zero scalars (groth16 drops their identity points).
impl ToxicWaste {
    /// 1/gamma and 1/delta, after checking that neither generator is the point at infinity
    /// and neither scalar is zero (a typed error naming the degenerate one otherwise).
    fn checked_inverses(&self) -> Result<(Scalar, Scalar), ProverError> {
        if bool::from(self.g1.is_identity()) {
            return Err(degenerate("g1", "the point at infinity"));
        }
        if bool::from(self.g2.is_identity()) {
            return Err(degenerate("g2", "the point at infinity"));
        }
        let gamma_inv =
            Option::<Scalar>::from(self.gamma.invert()).ok_or(degenerate("gamma", "zero"))?;
        let delta_inv =
            Option::<Scalar>::from(self.delta.invert()).ok_or(degenerate("delta", "zero"))?;
        Ok((gamma_inv, delta_inv))
    }
}

/// `(at, bt, ext)` of [`qap_at_tau`], one scalar per column each.
type QapColumns = (Vec<Scalar>, Vec<Scalar>, Vec<Scalar>);

/// The QAP at tau per column, from the domain's Lagrange coefficients at tau (each file
/// format has its own domain): `(at, bt, ext)` with
/// `ext_j = (beta·at_j + alpha·bt_j + ct_j) / (gamma for inputs, delta for aux)`, checked
/// against the circuit's densities ([`check_queries`]).
fn qap_at_tau(
    pce: &Pce,
    lagrange: &[Scalar],
    waste: &ToxicWaste,
    (gamma_inv, delta_inv): (Scalar, Scalar),
) -> Result<QapColumns, ProverError> {
    let n_inputs = pce.shape().n_inputs as usize;
    let n_columns = pce.shape().n_columns() as usize;
    let column = |which| -> Result<Vec<Scalar>, ProverError> {
        let mut v = vec![Scalar::ZERO; n_columns];
        pce.evaluate_transposed_into(which, lagrange, &mut v)?;
        Ok(v)
    };
    let (at, (bt, ct)) = rayon::join(
        || column(MatrixId::A),
        || rayon::join(|| column(MatrixId::B), || column(MatrixId::C)),
    );
    let (at, bt, mut ext) = (at?, bt?, ct?);
    let (alpha, beta) = (waste.alpha, waste.beta);
    ext.par_iter_mut()
        .zip(at.par_iter().zip(&bt))
        .enumerate()
        .for_each(|(j, (e, (a, b)))| {
            let inv = if j < n_inputs { gamma_inv } else { delta_inv };
            *e = (beta * a + alpha * b + *e) * inv;
        });
    check_queries(pce, &at, &bt, &ext)?;
    Ok((at, bt, ext))
}

fn nonzero(v: &[Scalar]) -> impl FnMut(usize, &mut Vec<Scalar>) + '_ {
    let mut it = v.iter().copied().filter(|x| !bool::from(x.is_zero()));
    move |_, buf| buf.extend(it.by_ref().take(CHUNK))
}

fn degenerate(which: &'static str, what: &'static str) -> ProverError {
    ProverError::DegenerateToxicWaste { which, what }
}

/// `tau^i` for `i < n`, on all cores.
fn powers(tau: Scalar, n: usize) -> Vec<Scalar> {
    let mut v = vec![Scalar::ZERO; n];
    v.par_chunks_mut(4096).enumerate().for_each(|(k, c)| {
        let mut x = tau.pow_vartime(&[(k * 4096) as u64, 0, 0, 0]);
        for p in c {
            *p = x;
            x *= tau;
        }
    });
    v
}

/// Refuses what groth16's generator refuses (an aux variable in no constraint: its `l`
/// point would be the identity) and what would make parameters our prover cannot use
/// (a column the densities mark used whose values at tau vanish, or the reverse).
fn check_queries(
    pce: &Pce,
    at: &[Scalar],
    bt: &[Scalar],
    ext: &[Scalar],
) -> Result<(), ProverError> {
    let shape = pce.shape();
    let n_inputs = shape.n_inputs as usize;
    if let Some(j) = ext[n_inputs..]
        .par_iter()
        .position_first(|e| bool::from(e.is_zero()))
    {
        return Err(ProverError::UnconstrainedVariable {
            index: j as u64,
            n_aux: shape.n_aux,
        });
    }
    let d = pce.densities();
    let check = |query: &'static str, values: &[Scalar], input: &Density, aux: &Density| {
        let marked = |j: usize| {
            if j < n_inputs {
                input.get(j)
            } else {
                aux.get(j - n_inputs)
            }
        };
        match values
            .par_iter()
            .enumerate()
            .find_first(|(j, v)| marked(*j) == bool::from(v.is_zero()))
        {
            None => Ok(()),
            Some((j, _)) => Err(ProverError::DensityMismatch {
                query,
                column: j as u64,
                marked: marked(j),
            }),
        }
    };
    check("a_query", at, d.a_input(), d.a_aux())?;
    check("b_query", bt, d.b_input(), d.b_aux())
}

/// Signed digits of a window: `1 ≤ |d| ≤ 2^(w−1)`.
fn half(w: u32) -> usize {
    1 << (w - 1)
}

/// Windows covering 256 bits: a scalar is below 2^255, so the last digit never carries.
fn n_windows(w: u32) -> usize {
    256usize.div_ceil(w as usize)
}

fn table_bytes<G: Curve>(w: u32) -> u64 {
    (n_windows(w) * half(w) * std::mem::size_of::<G::Affine>()) as u64
}

fn chunk_bytes<G: Curve>() -> u64
where
    G::Affine: UncompressedEncoding,
{
    let encoded = std::mem::size_of::<<G::Affine as UncompressedEncoding>::Uncompressed>();
    (CHUNK
        * (std::mem::size_of::<Scalar>()
            + std::mem::size_of::<G>()
            + std::mem::size_of::<G::Affine>()
            + encoded)) as u64
}

/// The window minimising table additions plus per-point additions for `n` points.
fn best_window(n: usize) -> u32 {
    (2..=MAX_WINDOW)
        .min_by_key(|&w| n_windows(w) as u64 * (half(w) as u64 + n as u64))
        .unwrap_or(MAX_WINDOW)
}

/// `table[k·2^(w−1) + d − 1] = d·2^(w·k)·g` for `1 ≤ d ≤ 2^(w−1)`.
struct FixedBase<G: Curve> {
    w: u32,
    table: Vec<G::Affine>,
}

impl<G> FixedBase<G>
where
    G: Curve<Scalar = Scalar> + Send + Sync,
    G::Affine: UncompressedEncoding,
{
    fn new(g: G, w: u32) -> Self {
        let half = half(w);
        let mut bases = Vec::with_capacity(n_windows(w));
        let mut b = g;
        for _ in 0..n_windows(w) {
            bases.push(b);
            for _ in 0..w {
                b = b.double();
            }
        }
        let mut table = vec![G::Affine::identity(); n_windows(w) * half];
        table
            .par_chunks_mut(half)
            .zip(bases.par_iter())
            .for_each(|(t, b)| {
                let mut multiples = Vec::with_capacity(half);
                let mut acc = *b;
                multiples.push(acc);
                for _ in 1..half {
                    acc += b;
                    multiples.push(acc);
                }
                G::batch_normalize(&multiples, t);
            });
        FixedBase { w, table }
    }

    fn mul(&self, s: &Scalar) -> G {
        let repr = s.to_repr();
        let mut limbs = [0u64; 5];
        for (l, b) in limbs.iter_mut().zip(repr.as_ref().chunks(8)) {
            *l = u64::from_le_bytes(b.try_into().expect("8-byte chunk"));
        }
        let w = self.w as usize;
        let half = half(self.w);
        let mask = (1u64 << w) - 1;
        let mut acc = G::identity();
        let mut carry = 0u64;
        for k in 0..n_windows(self.w) {
            let (i, sh) = ((k * w) / 64, (k * w) % 64);
            let mut bits = limbs[i] >> sh;
            if sh + w > 64 {
                bits |= limbs[i + 1] << (64 - sh);
            }
            let v = (bits & mask) + carry;
            if v > half as u64 {
                carry = 1;
                let d = (1u64 << w) - v;
                if d != 0 {
                    acc -= self.table[k * half + d as usize - 1];
                }
            } else {
                carry = 0;
                if v != 0 {
                    acc += self.table[k * half + v as usize - 1];
                }
            }
        }
        acc
    }

    /// `s·g` for each of `scalars`, made affine in batches, into `affine` (cleared first);
    /// `proj` is scratch.
    fn affine_points(&self, scalars: &[Scalar], proj: &mut Vec<G>, affine: &mut Vec<G::Affine>) {
        proj.clear();
        proj.par_extend(scalars.par_iter().with_min_len(64).map(|s| self.mul(s)));
        affine.clear();
        affine.resize(scalars.len(), G::Affine::identity());
        proj.par_chunks(1024)
            .zip(affine.par_chunks_mut(1024))
            .for_each(|(p, a)| G::batch_normalize(p, a));
    }

    /// Writes `n` as a u32 big-endian count, then `n` points `s·g` uncompressed (the
    /// `.params` layout); `fill` as for [`FixedBase::write_points`].
    fn write<W: Write>(
        &self,
        section: &'static str,
        n: usize,
        out: &mut Counting<W>,
        fill: impl FnMut(usize, &mut Vec<Scalar>),
    ) -> Result<(), ProverError> {
        let count = u32::try_from(n).map_err(|_| ProverError::ParamsWrite {
            section,
            offset: out.written,
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{n} points do not fit the format's u32 length"),
            ),
        })?;
        out.put(section, &count.to_be_bytes())?;
        let encoded = std::mem::size_of::<<G::Affine as UncompressedEncoding>::Uncompressed>();
        self.write_points(
            section,
            n,
            out,
            encoded,
            |a, b| b.copy_from_slice(a.to_uncompressed().as_ref()),
            fill,
        )
    }

    /// Writes `n` points `s·g` in chunks (the zkey writer's too), each encoded into
    /// `bytes_per_point` bytes by `encode`; `fill(start, buf)` appends the scalars of points `start..start +
    /// min(CHUNK, n − start)` to the empty `buf`.
    fn write_points<W: Write>(
        &self,
        section: &'static str,
        n: usize,
        out: &mut Counting<W>,
        bytes_per_point: usize,
        encode: impl Fn(&G::Affine, &mut [u8]) + Sync,
        mut fill: impl FnMut(usize, &mut Vec<Scalar>),
    ) -> Result<(), ProverError> {
        let mut scalars = Vec::with_capacity(CHUNK);
        let mut proj = Vec::with_capacity(CHUNK);
        let mut affine = Vec::with_capacity(CHUNK);
        let mut bytes = Vec::with_capacity(CHUNK * bytes_per_point);
        let mut start = 0;
        while start < n {
            scalars.clear();
            fill(start, &mut scalars);
            let len = scalars.len();
            debug_assert_eq!(len, CHUNK.min(n - start));
            self.affine_points(&scalars, &mut proj, &mut affine);
            bytes.clear();
            bytes.resize(len * bytes_per_point, 0);
            bytes
                .par_chunks_mut(bytes_per_point)
                .zip(affine.par_iter())
                .for_each(|(b, a)| encode(a, b));
            out.put(section, &bytes)?;
            start += len;
        }
        Ok(())
    }
}

/// A writer that counts bytes, for the offset in write errors.
struct Counting<W> {
    inner: W,
    written: u64,
}

impl<W: Write> Counting<W> {
    fn put(&mut self, section: &'static str, bytes: &[u8]) -> Result<(), ProverError> {
        self.inner
            .write_all(bytes)
            .map_err(|source| ProverError::ParamsWrite {
                section,
                offset: self.written,
                source,
            })?;
        self.written += bytes.len() as u64;
        Ok(())
    }
}

/// The generation's reservation, with its peak.
struct Charged {
    budget: Budget,
    reservation: Option<Reservation>,
    peak: u64,
}

impl Charged {
    fn new(budget: &Budget) -> Self {
        Charged {
            budget: budget.clone(),
            reservation: None,
            peak: 0,
        }
    }

    fn grow(&mut self, bytes: u64, what: &'static str) -> Result<(), ProverError> {
        let refused = |source| ProverError::Budget {
            what,
            requested_bytes: bytes,
            source,
        };
        match self.reservation.as_mut() {
            Some(r) => r.try_grow(bytes).map_err(refused)?,
            None => {
                self.reservation = Some(
                    self.budget
                        .try_reserve(bytes, Category::Transient, "parameter generation")
                        .map_err(refused)?,
                )
            }
        }
        let held = self.reservation.as_ref().map_or(0, Reservation::bytes);
        self.peak = self.peak.max(held);
        Ok(())
    }

    fn shrink_to(&mut self, bytes: u64) {
        if let Some(r) = self.reservation.as_mut() {
            if bytes < r.bytes() {
                r.shrink_to(bytes);
            }
        }
    }
}
