//! Launches of the field-arithmetic test and benchmark kernels (`field_test.cu`).
//!
//! Buffers are flat `u32` limb words: an element is [`FieldKind::words`] little-endian
//! words in Montgomery form, exactly the bytes of bls-repr's `FpRepr` (12 words),
//! `FrRepr` (8) and `Fp2Repr` (24). All kernel launches of this crate live here.

use cudarc::driver::{LaunchConfig, PushKernelArg};
use pinion_kernels::Entry;

use crate::{DeviceBuffer, Gpu, GpuError};

/// Threads per block for the field kernels (grid-stride loops cover any `n`).
const BLOCK_THREADS: u32 = 256;

/// Which field a buffer holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FieldKind {
    /// Base field, 381 bits, 12 words.
    Fp,
    /// Scalar field, 255 bits, 8 words.
    Fr,
    /// Quadratic extension of Fp, 24 words (c0 then c1).
    Fp2,
}

impl FieldKind {
    /// Every field.
    pub const ALL: [FieldKind; 3] = [FieldKind::Fp, FieldKind::Fr, FieldKind::Fp2];

    /// 32-bit words per element.
    pub const fn words(self) -> usize {
        match self {
            FieldKind::Fp => 12,
            FieldKind::Fr => 8,
            FieldKind::Fp2 => 24,
        }
    }

    /// Lowercase name.
    pub const fn name(self) -> &'static str {
        match self {
            FieldKind::Fp => "fp",
            FieldKind::Fr => "fr",
            FieldKind::Fp2 => "fp2",
        }
    }
}

/// Two-input operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// a + b
    Add,
    /// a - b
    Sub,
    /// a * b
    Mul,
}

/// One-input operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// -a
    Neg,
    /// a^2
    Sqr,
    /// a^-1, with 0 mapped to 0
    Inv,
}

impl BinaryOp {
    /// Every binary op.
    pub const ALL: [BinaryOp; 3] = [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul];

    /// The kernel for this op over `field`.
    pub const fn entry(self, field: FieldKind) -> Entry {
        use {BinaryOp::*, FieldKind::*};
        match (field, self) {
            (Fp, Add) => Entry::FpAdd,
            (Fp, Sub) => Entry::FpSub,
            (Fp, Mul) => Entry::FpMul,
            (Fr, Add) => Entry::FrAdd,
            (Fr, Sub) => Entry::FrSub,
            (Fr, Mul) => Entry::FrMul,
            (Fp2, Add) => Entry::Fp2Add,
            (Fp2, Sub) => Entry::Fp2Sub,
            (Fp2, Mul) => Entry::Fp2Mul,
        }
    }
}

impl UnaryOp {
    /// Every unary op.
    pub const ALL: [UnaryOp; 3] = [UnaryOp::Neg, UnaryOp::Sqr, UnaryOp::Inv];

    /// The kernel for this op over `field`.
    pub const fn entry(self, field: FieldKind) -> Entry {
        use {FieldKind::*, UnaryOp::*};
        match (field, self) {
            (Fp, Neg) => Entry::FpNeg,
            (Fp, Sqr) => Entry::FpSqr,
            (Fp, Inv) => Entry::FpInv,
            (Fr, Neg) => Entry::FrNeg,
            (Fr, Sqr) => Entry::FrSqr,
            (Fr, Inv) => Entry::FrInv,
            (Fp2, Neg) => Entry::Fp2Neg,
            (Fp2, Sqr) => Entry::Fp2Sqr,
            (Fp2, Inv) => Entry::Fp2Inv,
        }
    }
}

/// Number of elements in `buf`, checking it is whole elements and fits a `u32` index.
fn n_elements(
    field: FieldKind,
    buf: &DeviceBuffer<u32>,
    what: &'static str,
) -> Result<u32, GpuError> {
    let words = field.words();
    if buf.len() % words != 0 {
        return Err(GpuError::LengthMismatch {
            what,
            expected: buf.len() / words * words,
            found: buf.len(),
        });
    }
    u32::try_from(buf.len() / words).map_err(|_| GpuError::LengthMismatch {
        what,
        expected: u32::MAX as usize * words,
        found: buf.len(),
    })
}

fn same_len(
    expected: &DeviceBuffer<u32>,
    found: &DeviceBuffer<u32>,
    what: &'static str,
) -> Result<(), GpuError> {
    if expected.len() == found.len() {
        Ok(())
    } else {
        Err(GpuError::LengthMismatch {
            what,
            expected: expected.len(),
            found: found.len(),
        })
    }
}

/// One thread per element.
pub fn launch_config(n: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (n.div_ceil(BLOCK_THREADS).max(1), 1, 1),
        block_dim: (BLOCK_THREADS, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// `out[i] = op(a[i], b[i])` for every element, queued on the device's stream.
pub fn binary(
    gpu: &Gpu,
    field: FieldKind,
    op: BinaryOp,
    a: &DeviceBuffer<u32>,
    b: &DeviceBuffer<u32>,
    out: &mut DeviceBuffer<u32>,
) -> Result<(), GpuError> {
    let n = n_elements(field, a, "input a (u32 words)")?;
    same_len(a, b, "input b (u32 words)")?;
    same_len(a, out, "output (u32 words)")?;
    let f = gpu.function(op.entry(field))?;
    let stream = gpu.stream();
    let mut launch = stream.launch_builder(&f);
    launch
        .arg(a.slice())
        .arg(b.slice())
        .arg(out.slice_mut())
        .arg(&n);
    // SAFETY: the kernel's signature is (const T*, const T*, T*, uint32_t) with T the
    // field's element (field.words() u32 words); all three buffers hold n elements
    // (checked above) and live until the launch completes (cudarc records their events).
    unsafe { launch.launch(launch_config(n)) }.map_err(GpuError::driver("cuLaunchKernel"))?;
    Ok(())
}

/// `out[i] = op(a[i])` for every element, queued on the device's stream.
pub fn unary(
    gpu: &Gpu,
    field: FieldKind,
    op: UnaryOp,
    a: &DeviceBuffer<u32>,
    out: &mut DeviceBuffer<u32>,
) -> Result<(), GpuError> {
    let n = n_elements(field, a, "input a (u32 words)")?;
    same_len(a, out, "output (u32 words)")?;
    let f = gpu.function(op.entry(field))?;
    let stream = gpu.stream();
    let mut launch = stream.launch_builder(&f);
    launch.arg(a.slice()).arg(out.slice_mut()).arg(&n);
    // SAFETY: signature (const T*, T*, uint32_t); both buffers hold n elements (checked).
    unsafe { launch.launch(launch_config(n)) }.map_err(GpuError::driver("cuLaunchKernel"))?;
    Ok(())
}

/// The multiplication-chain (throughput) kernels: which field, which product, how many
/// independent chains per thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChainKernel {
    /// Fp, `fe_mul` (one accumulator), 4 chains.
    Fp,
    /// Fr, `fe_mul`, 4 chains.
    Fr,
    /// Fp2 (Karatsuba over `fe_mul_ab`), 2 chains.
    Fp2,
    /// Fp, `fe_mul_ab` (two accumulators), 4 chains.
    FpAb,
    /// Fr, `fe_mul_ab`, 4 chains.
    FrAb,
    /// Fp with 64-bit limbs, 4 chains.
    Fp64,
    /// Fr with the product on the FP64 pipe (52-bit limbs in doubles), 4 chains.
    FrF64,
    /// Fp with the product on the FP64 pipe, 4 chains.
    FpF64,
    /// Fp squarings (`fe_sqr`) in the rounds, 4 chains.
    FpSqr,
    /// Fr squarings in the rounds, 4 chains.
    FrSqr,
}

impl ChainKernel {
    /// Every chain kernel.
    pub const ALL: [ChainKernel; 10] = [
        ChainKernel::Fp,
        ChainKernel::Fr,
        ChainKernel::Fp2,
        ChainKernel::FpSqr,
        ChainKernel::FrSqr,
        ChainKernel::FpAb,
        ChainKernel::FrAb,
        ChainKernel::Fp64,
        ChainKernel::FrF64,
        ChainKernel::FpF64,
    ];

    /// The kernel's entry point.
    pub const fn entry(self) -> Entry {
        match self {
            ChainKernel::Fp => Entry::FpMulChain,
            ChainKernel::Fr => Entry::FrMulChain,
            ChainKernel::Fp2 => Entry::Fp2MulChain,
            ChainKernel::FpAb => Entry::FpAbMulChain,
            ChainKernel::FrAb => Entry::FrAbMulChain,
            ChainKernel::Fp64 => Entry::Fp64MulChain,
            ChainKernel::FrF64 => Entry::FrF64MulChain,
            ChainKernel::FpF64 => Entry::FpF64MulChain,
            ChainKernel::FpSqr => Entry::FpSqrChain,
            ChainKernel::FrSqr => Entry::FrSqrChain,
        }
    }

    /// The field its buffers hold.
    pub const fn field(self) -> FieldKind {
        match self {
            ChainKernel::Fp
            | ChainKernel::FpAb
            | ChainKernel::Fp64
            | ChainKernel::FpF64
            | ChainKernel::FpSqr => FieldKind::Fp,
            ChainKernel::Fr | ChainKernel::FrAb | ChainKernel::FrF64 | ChainKernel::FrSqr => {
                FieldKind::Fr
            }
            ChainKernel::Fp2 => FieldKind::Fp2,
        }
    }

    /// Independent chains per thread.
    pub const fn chains(self) -> u32 {
        match self {
            ChainKernel::Fp2 => 2,
            _ => 4,
        }
    }

    /// A short label for tables.
    pub const fn label(self) -> &'static str {
        match self {
            ChainKernel::Fp => "fp",
            ChainKernel::Fr => "fr",
            ChainKernel::Fp2 => "fp2",
            ChainKernel::FpAb => "fp (fe_mul_ab)",
            ChainKernel::FrAb => "fr (fe_mul_ab)",
            ChainKernel::Fp64 => "fp (64-bit limbs)",
            ChainKernel::FrF64 => "fr (FP64 pipe)",
            ChainKernel::FpF64 => "fp (FP64 pipe)",
            ChainKernel::FpSqr => "fp sqr",
            ChainKernel::FrSqr => "fr sqr",
        }
    }

    /// Whether the rounds square (x_j = x_j^2) rather than multiply by b.
    pub const fn squares(self) -> bool {
        matches!(self, ChainKernel::FpSqr | ChainKernel::FrSqr)
    }

    /// Field multiplications per element for `iters` rounds: (k - 1) to start the chains,
    /// k per round, (k - 1) to combine them (Fp2: each is 3 Fp products).
    pub const fn muls_per_element(self, iters: u32) -> u64 {
        let k = self.chains() as u64;
        2 * (k - 1) + k * iters as u64
    }
}

/// The throughput kernel: per element, k = [`ChainKernel::chains`] chains x_0 = a,
/// x_j = x_{j-1} * b, then `iters` rounds of x_j *= b (x_j = x_j^2 for the squaring
/// kernels, see [`ChainKernel::squares`]), then out = x_0 * ... * x_{k-1}.
pub fn mul_chain(
    gpu: &Gpu,
    kernel: ChainKernel,
    a: &DeviceBuffer<u32>,
    b: &DeviceBuffer<u32>,
    out: &mut DeviceBuffer<u32>,
    iters: u32,
) -> Result<(), GpuError> {
    let n = n_elements(kernel.field(), a, "input a (u32 words)")?;
    same_len(a, b, "input b (u32 words)")?;
    same_len(a, out, "output (u32 words)")?;
    let f = gpu.function(kernel.entry())?;
    let stream = gpu.stream();
    let mut launch = stream.launch_builder(&f);
    launch
        .arg(a.slice())
        .arg(b.slice())
        .arg(out.slice_mut())
        .arg(&n)
        .arg(&iters);
    // SAFETY: signature (const T*, const T*, T*, uint32_t, uint32_t) with T the element
    // type of `kernel.field()`; the buffers hold n elements each (checked above).
    unsafe { launch.launch(launch_config(n)) }.map_err(GpuError::driver("cuLaunchKernel"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_match_their_field_and_op() {
        for field in FieldKind::ALL {
            for op in BinaryOp::ALL {
                let name = op.entry(field).name();
                assert!(name.starts_with(&format!("{}_", field.name())), "{name}");
                let op_name = format!("{op:?}").to_lowercase();
                assert!(name.ends_with(&op_name), "{name} vs {op_name}");
            }
            for op in UnaryOp::ALL {
                let name = op.entry(field).name();
                assert!(name.starts_with(&format!("{}_", field.name())), "{name}");
                let op_name = format!("{op:?}").to_lowercase();
                assert!(name.ends_with(&op_name), "{name} vs {op_name}");
            }
        }
    }

    #[test]
    fn chain_kernels_match_their_field() {
        for k in ChainKernel::ALL {
            let name = k.entry().name();
            let suffix = if k.squares() {
                "_sqr_chain"
            } else {
                "_mul_chain"
            };
            assert!(
                name.starts_with(k.field().name()) && name.ends_with(suffix),
                "{name}"
            );
            assert_eq!(k.muls_per_element(0), 2 * (u64::from(k.chains()) - 1));
        }
    }

    #[test]
    fn launch_covers_every_element() {
        for n in [0u32, 1, 255, 256, 257, 1 << 20] {
            let c = launch_config(n);
            assert!(u64::from(c.grid_dim.0) * u64::from(c.block_dim.0) >= u64::from(n));
            assert!(c.grid_dim.0 >= 1);
        }
    }
}
