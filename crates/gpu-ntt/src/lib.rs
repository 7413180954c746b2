//! NTTs over the BLS12-381 scalar field and the Groth16 H polynomial.
//!
//! # Example
//! Evaluate `1 + 2x + 3x² + 4x³` on the four 4th roots of unity and interpolate it back,
//! on the CPU backend ([`GpuNtt`] implements the same [`NttBackend`] on a CUDA device):
//! ```
//! use bls12_381::Scalar;
//! use ff::Field;
//! use gpu_ntt::{omega, CpuNtt, NttBackend, NttSpec};
//!
//! let coeffs: Vec<Scalar> = [1u64, 2, 3, 4].into_iter().map(Scalar::from).collect();
//! let mut data = coeffs.clone();
//! let ntt = CpuNtt::new();
//! ntt.transform(&mut data, NttSpec::FORWARD)?;
//! let w = omega(2);
//! for (i, y) in data.iter().enumerate() {
//!     let x = w.pow_vartime(&[i as u64, 0, 0, 0]);
//!     let p = coeffs.iter().rev().fold(Scalar::ZERO, |acc, c| acc * x + c);
//!     assert_eq!(*y, p);
//! }
//! ntt.transform(&mut data, NttSpec::INVERSE)?;
//! assert_eq!(data, coeffs);
//! # Ok::<(), gpu_ntt::NttError>(())
//! ```
//!
//! # Contract
//! - [`NttBackend::transform`] runs one in-place transform of 2^k elements
//!   (`0 <= k <= MAX_LOG_N`, i.e. up to 2^28) described by an [`NttSpec`]:
//!   - forward: `y_i = Σ_j x_j·(s·ω^i)^j`, inverse: the exact inverse map, where ω is the
//!     primitive 2^k-th root of unity bellman picks ([`omega`]) and `s` is 1 on the
//!     subgroup or [`coset_shift`] (the multiplicative generator 7) on the coset;
//!   - input and output each in natural or bit-reversed order (position `p` holds
//!     logical index `bit_reverse(p, k)`), so a pipeline can skip permutation passes.
//! - [`NttBackend::h_poly`] takes a, b, c (one value per constraint, groth16's input
//!   rows included) and returns h's coefficients **exactly** as `groth16::create_proof`
//!   computes them with bellman's `EvaluationDomain`: pad to the next power of two m,
//!   `h = icoset(coset(ifft(a))·coset(ifft(b)) − coset(ifft(c))) / (g^m − 1)`, keeping the
//!   first `m − 1` coefficients (the length of the H query). Exact field arithmetic, so
//!   equal maps give bit-identical output; the tests compare against bellman directly.
//!   Both backends compute that map with six transforms instead of seven: C = ifft(c) has
//!   degree < m, so `icoset(coset(C)) = C` and
//!   `h = (icoset(coset(ifft(a))·coset(ifft(b))) − ifft(c)) / (g^m − 1)`, the same field
//!   elements for any a, b, c (satisfied or not).
//! - [`NttBackend::h_coset_evaluations`] is snarkjs's H step (a `.zkey`'s H points are
//!   made for it): `coset(ifft(a))·coset(ifft(b)) − coset(ifft(c))` on the coset of a
//!   given shift, returned as evaluations (m values, nothing divided or inverted).
//! - Bad sizes are a typed [`NttError`], never a panic.
//!
//! # Backends
//! - [`CpuNtt`] (now): radix-2 on the rayon pool. Large stages run across the whole
//!   array in parallel chunks; once a butterfly span fits in a cache-sized block, every
//!   remaining stage runs inside that block (one pass over memory for the small stages).
//!   Twiddles `ω_{2h}^j` for all stage sizes live in one table, built once for the
//!   largest size seen and shared by every smaller size (a stage's twiddles do not depend
//!   on n); inverse twiddles are read from the same table (`ω^-j = −ω^(h−j)`).
//!   The H step fuses the 1/m scaling into the coset powers and orders its transforms
//!   natural→bit-reversed→natural so that only the final result is permuted.
//! - [`GpuNtt`] (CUDA, sm_90): the same transforms and H step on device buffers of
//!   `FrRepr`, several radix-2 stages per pass in shared memory (3 passes at 2^27), coset and
//!   1/n factors fused into the first load or last store, one twiddle table charged to the
//!   device's VRAM budget. Its H step takes a, b, c from host, pinned or device memory and
//!   records an event once they are uploaded, so the caller can release their host budget.
//!   It implements [`NttBackend`] (each call uploads and copies back; device failures
//!   become [`NttError::Gpu`]); its own methods return the richer [`GpuNttError`].
//!
//! # Cost model (CPU)
//! A transform: `(n/2)·log2 n` multiplications (fewer at j = 0), `log2 n − 13` full
//! passes over memory plus one blocked pass; the bit-reversal pass (natural in and out
//! only) is serial. Twiddle table: `32·n` bytes for the largest n seen (4 GiB at 2^27),
//! kept until [`CpuNtt::clear_twiddles`]; [`CpuNtt::twiddle_bytes`] tells a caller what to
//! charge to its memory budget. H step: six transforms, ~5n extra multiplications, one
//! serial bit-reversal, no buffers beyond a, b, c (and the twiddle table).
#![warn(missing_docs)]
// Only the kernel launches in `gpu` and `sparse` use unsafe (each states its invariant).
#![deny(unsafe_code)]

mod cpu;
mod domain;
mod error;
#[allow(unsafe_code)]
mod gpu;
pub mod reference;
#[allow(unsafe_code)]
mod sparse;

pub use cpu::CpuNtt;
pub use domain::{bit_reverse, coset_shift, h_domain_size, log2_len, omega, MAX_LOG_N};
pub use error::NttError;
pub use gpu::{
    download_reprs, plan_passes, reprs_to_scalars, upload_reprs, AbcSource, GpuNtt, GpuNttConfig,
    GpuNttError, HPolyDevice, Pass, WORDS_PER_ELEMENT,
};
pub use sparse::{
    DeviceR1cs, PendingCheck, SparseCheck, SparseKernel, SparseParts, SPARSE_ROW_BLOCK,
};

use bls12_381::Scalar;

/// Element order of a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Order {
    /// Position i holds logical index i.
    Natural,
    /// Position p holds logical index `bit_reverse(p, log2 n)`.
    BitReversed,
}

/// Coefficients to evaluations, or back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Coefficients → evaluations.
    Forward,
    /// Evaluations → coefficients (includes the 1/n factor).
    Inverse,
}

/// Where the evaluations live.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Domain {
    /// The points ω^i.
    Subgroup,
    /// The points g·ω^i with g = [`coset_shift`].
    Coset,
}

/// One transform: direction, domain, input and output orders.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NttSpec {
    /// Forward or inverse.
    pub direction: Direction,
    /// Subgroup or coset.
    pub domain: Domain,
    /// Order of the input buffer.
    pub input: Order,
    /// Order of the output buffer.
    pub output: Order,
}

impl NttSpec {
    /// Forward on the subgroup, natural in and out.
    pub const FORWARD: Self = Self::new(Direction::Forward, Domain::Subgroup);
    /// Inverse on the subgroup, natural in and out.
    pub const INVERSE: Self = Self::new(Direction::Inverse, Domain::Subgroup);
    /// Forward on the coset, natural in and out.
    pub const COSET_FORWARD: Self = Self::new(Direction::Forward, Domain::Coset);
    /// Inverse on the coset, natural in and out.
    pub const COSET_INVERSE: Self = Self::new(Direction::Inverse, Domain::Coset);

    /// Natural order in and out.
    pub const fn new(direction: Direction, domain: Domain) -> Self {
        Self {
            direction,
            domain,
            input: Order::Natural,
            output: Order::Natural,
        }
    }

    /// The same transform with other orders.
    pub const fn with_orders(self, input: Order, output: Order) -> Self {
        Self {
            input,
            output,
            ..self
        }
    }
}

/// The H step's inputs: the A, B and C evaluations, one per constraint (groth16's
/// trailing input rows included), not yet padded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AbcEvaluations {
    /// ⟨A_i, w⟩ per constraint i.
    pub a: Vec<Scalar>,
    /// ⟨B_i, w⟩ per constraint i.
    pub b: Vec<Scalar>,
    /// ⟨C_i, w⟩ per constraint i.
    pub c: Vec<Scalar>,
}

/// An NTT engine. Every backend gives the same results.
pub trait NttBackend: Send + Sync {
    /// Short name for logs and benchmark tables.
    fn name(&self) -> &'static str;

    /// Transforms `data` in place; its length must be 2^k with `k <= MAX_LOG_N`.
    fn transform(&self, data: &mut [Scalar], spec: NttSpec) -> Result<(), NttError>;

    /// h's `m − 1` coefficients, m the padded domain size (see the crate docs). Consumes
    /// a, b, c: their buffers are reused, so the step needs no memory beyond them.
    fn h_poly(&self, abc: AbcEvaluations) -> Result<Vec<Scalar>, NttError>;

    /// snarkjs's H step: the values of a·b − c on the coset `shift·⟨ω⟩`, where a, b, c
    /// are the polynomials interpolating the inputs on the domain (each padded to the
    /// next power of two m): m values in natural order (value j at `shift·ω^j`), with no
    /// division by the vanishing polynomial and no inverse transform. Six transforms.
    /// `shift` must lie outside the domain (snarkjs uses a 2m-th root of unity, whose
    /// points form the domain's odd coset). Consumes a, b, c like
    /// [`NttBackend::h_poly`].
    fn h_coset_evaluations(
        &self,
        abc: AbcEvaluations,
        shift: Scalar,
    ) -> Result<Vec<Scalar>, NttError>;

    /// Forward on the subgroup.
    fn forward(&self, data: &mut [Scalar], input: Order, output: Order) -> Result<(), NttError> {
        self.transform(data, NttSpec::FORWARD.with_orders(input, output))
    }

    /// Inverse on the subgroup.
    fn inverse(&self, data: &mut [Scalar], input: Order, output: Order) -> Result<(), NttError> {
        self.transform(data, NttSpec::INVERSE.with_orders(input, output))
    }

    /// Forward on the coset g·⟨ω⟩.
    fn coset_forward(
        &self,
        data: &mut [Scalar],
        input: Order,
        output: Order,
    ) -> Result<(), NttError> {
        self.transform(data, NttSpec::COSET_FORWARD.with_orders(input, output))
    }

    /// Inverse on the coset g·⟨ω⟩.
    fn coset_inverse(
        &self,
        data: &mut [Scalar],
        input: Order,
        output: Order,
    ) -> Result<(), NttError> {
        self.transform(data, NttSpec::COSET_INVERSE.with_orders(input, output))
    }
}
