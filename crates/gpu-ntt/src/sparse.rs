//! The R1CS's sparse mat-vec on the device: a = A·w, b = B·w, c = C·w from matrices in
//! pce-cache's compact layout (given here as plain slices, [`SparseParts`]), and the
//! witness check `a·b = c` (kernels in `cuda-kernels/pce.cu`). The H step's inputs made
//! where the H step runs: a proof then moves its witness to the device (32 bytes a value)
//! instead of a, b and c (96 bytes a domain point), and the host computes no mat-vec.

use bls_repr::FrRepr;
use cudarc::driver::{DeviceRepr, LaunchConfig, PushKernelArg};
use gpu_device::{DeviceBuffer, Entry, Gpu, GpuError};

use crate::gpu::{GpuNttError, WORDS_PER_ELEMENT};

/// Rows per CUDA block of `pce_eval` (pce-cache's row block: one block per row block).
pub const SPARSE_ROW_BLOCK: usize = 256;

/// Rows of at least this many terms (and fewer than 255, the long ones) are summed a warp
/// a row from a list made at upload instead of one thread a row: PoRep's C has ≈ 127,000
/// rows of 128–254 terms at 32 GiB, each of which held its thread block for that many
/// dependent steps.
const WIDE_MIN: u32 = 32;

/// The rows of `p` with `WIDE_MIN..255` terms: (rows, starts, lengths), read as the kernel
/// reads the layout (a block's first non-zero plus the lengths before the row).
fn wide_rows(p: &SparseParts<'_>, n_rows: usize) -> (Vec<u64>, Vec<u64>, Vec<u64>) {
    let (mut rows, mut starts, mut lens) = (Vec::new(), Vec::new(), Vec::new());
    let mut li = 0;
    let mut at = 0u64;
    for (r, &len8) in p.row_len.iter().take(n_rows).enumerate() {
        if r % SPARSE_ROW_BLOCK == 0 {
            at = p.block_ptr.get(r / SPARSE_ROW_BLOCK).copied().unwrap_or(0);
        }
        let len = if len8 == u8::MAX {
            li += 1;
            p.long_len.get(li - 1).copied().unwrap_or(0)
        } else {
            u64::from(len8)
        };
        if len8 != u8::MAX && u32::from(len8) >= WIDE_MIN {
            rows.push(r as u64);
            starts.push(at);
            lens.push(len);
        }
        at = at.wrapping_add(len);
    }
    (rows, starts, lens)
}

/// One matrix in the compact CSR layout (pce-cache's `MatrixParts`, field for field): row
/// `r` of row block `k = r / SPARSE_ROW_BLOCK` starts at non-zero `block_ptr[k]` plus the
/// lengths of the rows before it in its block; a length byte of 255 means the row's length
/// is the next entry of `long_len` (`long_row` holds those rows, ascending). Non-zero `j`
/// has column `cols[j]` (inputs first, then aux) and coefficient code `j` of `codes`
/// (`code_bytes` little-endian bytes each: 0 is +1, 1 is −1, others index the table).
#[derive(Clone, Copy, Debug)]
pub struct SparseParts<'a> {
    /// One non-zero index per row block.
    pub block_ptr: &'a [u64],
    /// One length byte per row.
    pub row_len: &'a [u8],
    /// Rows whose length byte is 255, ascending.
    pub long_row: &'a [u64],
    /// Their lengths.
    pub long_len: &'a [u64],
    /// Column of each non-zero.
    pub cols: &'a [u32],
    /// Coefficient codes.
    pub codes: &'a [u8],
    /// 1, 2 or 4.
    pub code_bytes: u32,
}

/// Which kernel evaluates the rows ([`DeviceR1cs::queue_evaluate_with`]); both give the
/// same values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SparseKernel {
    /// One term after another (`pce_eval`).
    #[default]
    Serial,
    /// Four terms' loads issued together (`pce_eval_batched`): more gathers in flight, more
    /// registers.
    Batched,
}

impl SparseKernel {
    /// Both, for tests and benchmarks.
    pub const ALL: [SparseKernel; 2] = [SparseKernel::Serial, SparseKernel::Batched];

    fn entry(self) -> Entry {
        match self {
            SparseKernel::Serial => Entry::PceEval,
            SparseKernel::Batched => Entry::PceEvalBatched,
        }
    }
}

/// What the device found in one evaluation ([`DeviceR1cs::evaluate`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SparseCheck {
    /// The first row with `a·b ≠ c`, if any.
    pub first_unsatisfied: Option<usize>,
    /// Whether some row length, column or code was out of range (a damaged matrix: the
    /// values of a, b, c are then meaningless).
    pub damaged: bool,
}

/// One matrix on the device.
struct DeviceMatrix {
    block_ptr: DeviceBuffer<u64>,
    row_len: DeviceBuffer<u8>,
    long_row: DeviceBuffer<u64>,
    long_len: DeviceBuffer<u64>,
    cols: DeviceBuffer<u32>,
    codes: DeviceBuffer<u8>,
    code_bytes: u32,
    n_long: u32,
    n_nonzeros: u64,
    /// Rows of `WIDE_MIN..255` terms, their starts and lengths.
    wide_row: DeviceBuffer<u64>,
    wide_start: DeviceBuffer<u64>,
    wide_len: DeviceBuffer<u64>,
    n_wide: u32,
}

/// An R1CS's three matrices and coefficient table in VRAM (charged to the device's VRAM
/// budget while it lives).
pub struct DeviceR1cs {
    mats: [DeviceMatrix; 3],
    table: DeviceBuffer<u64>,
    n_table: u32,
    n_rows: u32,
    n_inputs: u32,
    n_aux: u32,
    bytes: u64,
}

impl std::fmt::Debug for DeviceR1cs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceR1cs")
            .field("n_rows", &self.n_rows)
            .field("n_inputs", &self.n_inputs)
            .field("n_aux", &self.n_aux)
            .field("bytes", &self.bytes)
            .finish_non_exhaustive()
    }
}

/// A copy of `data` on the device (at least one element: empty sections, e.g. no long
/// rows, still get a valid pointer; the kernel never reads past the real length).
fn upload<T: DeviceRepr + bytemuck::Pod>(
    gpu: &Gpu,
    data: &[T],
    label: &str,
) -> Result<DeviceBuffer<T>, GpuError> {
    if data.is_empty() {
        gpu.upload(&[T::zeroed()], label)
    } else {
        gpu.upload(data, label)
    }
}

fn too_large(what: &'static str, expected: usize, found: usize) -> GpuNttError {
    GpuNttError::Gpu(GpuError::LengthMismatch {
        what,
        expected,
        found,
    })
}

fn u32_len(what: &'static str, n: usize) -> Result<u32, GpuNttError> {
    u32::try_from(n).map_err(|_| too_large(what, u32::MAX as usize, n))
}

impl DeviceR1cs {
    /// Uploads the matrices A, B, C (`mats`) of `n_rows` rows over `n_inputs` inputs and
    /// `n_aux` aux columns with their coefficient table, on `gpu`'s stream, and waits for
    /// the copies (the host sections may be a mapped file's pages). Sizes of 2^32 or more
    /// (rows, columns, long rows, table entries) are an error; the structure is checked by
    /// the kernel as it reads (see [`SparseCheck::damaged`]).
    pub fn upload(
        gpu: &Gpu,
        mats: [SparseParts<'_>; 3],
        table: &[FrRepr],
        (n_rows, n_inputs, n_aux): (usize, usize, usize),
    ) -> Result<DeviceR1cs, GpuNttError> {
        let n_rows = u32_len("R1CS rows on the device", n_rows)?;
        let n_inputs = u32_len("R1CS inputs on the device", n_inputs)?;
        let n_aux = u32_len("R1CS aux columns on the device", n_aux)?;
        u32_len(
            "R1CS columns on the device",
            n_inputs as usize + n_aux as usize,
        )?;
        let mut bytes = 0;
        let mut on = Vec::with_capacity(3);
        for p in mats {
            if ![1, 2, 4].contains(&p.code_bytes)
                || p.codes.len() != p.cols.len() * p.code_bytes as usize
            {
                return Err(too_large(
                    "coefficient code bytes (1, 2 or 4 per non-zero)",
                    p.cols.len() * p.code_bytes as usize,
                    p.codes.len(),
                ));
            }
            if p.row_len.len() < n_rows as usize
                || p.block_ptr.len() < (n_rows as usize).div_ceil(SPARSE_ROW_BLOCK)
                || p.long_len.len() != p.long_row.len()
            {
                return Err(too_large(
                    "R1CS row lengths and block pointers for its rows",
                    n_rows as usize,
                    p.row_len.len(),
                ));
            }
            let (rows, starts, lens) = wide_rows(&p, n_rows as usize);
            let m = DeviceMatrix {
                wide_row: upload(gpu, &rows, "r1cs wide rows")?,
                wide_start: upload(gpu, &starts, "r1cs wide row starts")?,
                wide_len: upload(gpu, &lens, "r1cs wide row lengths")?,
                n_wide: u32_len("R1CS wide rows on the device", rows.len())?,
                block_ptr: upload(gpu, p.block_ptr, "r1cs block pointers")?,
                row_len: upload(gpu, p.row_len, "r1cs row lengths")?,
                long_row: upload(gpu, p.long_row, "r1cs long rows")?,
                long_len: upload(gpu, p.long_len, "r1cs long row lengths")?,
                cols: upload(gpu, p.cols, "r1cs columns")?,
                codes: upload(gpu, p.codes, "r1cs coefficient codes")?,
                code_bytes: p.code_bytes,
                n_long: u32_len("R1CS long rows on the device", p.long_row.len())?,
                n_nonzeros: p.cols.len() as u64,
            };
            bytes += [
                m.block_ptr.reserved_bytes(),
                m.row_len.reserved_bytes(),
                m.long_row.reserved_bytes(),
                m.long_len.reserved_bytes(),
                m.cols.reserved_bytes(),
                m.codes.reserved_bytes(),
                m.wide_row.reserved_bytes(),
                m.wide_start.reserved_bytes(),
                m.wide_len.reserved_bytes(),
            ]
            .iter()
            .sum::<u64>();
            on.push(m);
        }
        let table_dev = upload(
            gpu,
            bytemuck::cast_slice::<FrRepr, u64>(table),
            "r1cs coefficients",
        )?;
        bytes += table_dev.reserved_bytes();
        gpu.synchronize()?;
        let Ok(mats) = <[DeviceMatrix; 3]>::try_from(on) else {
            unreachable!("three matrices were pushed");
        };
        Ok(DeviceR1cs {
            mats,
            table: table_dev,
            n_table: u32_len("R1CS coefficient table on the device", table.len())?,
            n_rows,
            n_inputs,
            n_aux,
            bytes,
        })
    }

    /// VRAM it holds.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Rows.
    pub fn n_rows(&self) -> usize {
        self.n_rows as usize
    }

    /// [`DeviceR1cs::queue_evaluate`], then waits for what it found.
    pub fn evaluate(
        &self,
        gpu: &Gpu,
        witness: &DeviceBuffer<u64>,
        out: [&mut DeviceBuffer<u64>; 3],
        m: usize,
    ) -> Result<SparseCheck, GpuNttError> {
        self.queue_evaluate(gpu, witness, out, m)?.wait(gpu)
    }

    /// a, b, c = A·w, B·w, C·w into `out` (`m` elements each, m ≥ the rows; rows past the
    /// last are zero), then the check of `a·b = c` on every row, queued on `gpu`'s stream
    /// (nothing waited for: work queued after it on the stream reads a, b, c in order).
    /// `witness`: `aux ++ inputs`, Montgomery form (4 words a value). What the check found
    /// is read by [`PendingCheck::wait`].
    pub fn queue_evaluate(
        &self,
        gpu: &Gpu,
        witness: &DeviceBuffer<u64>,
        out: [&mut DeviceBuffer<u64>; 3],
        m: usize,
    ) -> Result<PendingCheck, GpuNttError> {
        self.queue_evaluate_with(SparseKernel::default(), gpu, witness, out, m)
    }

    /// [`DeviceR1cs::queue_evaluate`] with the given kernel.
    pub fn queue_evaluate_with(
        &self,
        kernel: SparseKernel,
        gpu: &Gpu,
        witness: &DeviceBuffer<u64>,
        out: [&mut DeviceBuffer<u64>; 3],
        m: usize,
    ) -> Result<PendingCheck, GpuNttError> {
        let n_w = self.n_inputs as usize + self.n_aux as usize;
        if witness.len() < WORDS_PER_ELEMENT * n_w {
            return Err(too_large(
                "witness on the device (u64 words)",
                WORDS_PER_ELEMENT * n_w,
                witness.len(),
            ));
        }
        if m < self.n_rows as usize {
            return Err(too_large(
                "a, b, c elements (the domain) for the rows",
                self.n_rows as usize,
                m,
            ));
        }
        for o in &out {
            if o.len() < WORDS_PER_ELEMENT * m {
                return Err(too_large(
                    "a, b or c on the device (u64 words)",
                    WORDS_PER_ELEMENT * m,
                    o.len(),
                ));
            }
        }
        let m32 = u32_len("a domain on the device", m)?;
        let mut status = gpu.upload(&[u32::MAX, 0u32], "r1cs evaluation status")?;
        // Each long row's first non-zero, written by the row kernel for the long-row one.
        let n_long: Vec<usize> = self.mats.iter().map(|m| m.n_long as usize).collect();
        let total_long: usize = n_long.iter().sum();
        let mut long_start =
            gpu.alloc_for_overwrite::<u64>(total_long + 1, "r1cs long row starts")?;
        let offsets = [0, n_long[0], n_long[0] + n_long[1]];
        let stream = gpu.stream();
        let eval = gpu.function(kernel.entry())?;
        let launch_err = |c| {
            GpuNttError::Gpu(GpuError::Driver {
                call: "cuLaunchKernel",
                code: c,
            })
        };
        let mut out = out;
        for (k, (mat, dst)) in self.mats.iter().zip(out.iter_mut()).enumerate() {
            let at = offsets[k];
            let mut starts = long_start.slice_mut().slice_mut(at..at + n_long[k].max(1));
            let mut l = stream.launch_builder(&eval);
            l.arg(dst.slice_mut())
                .arg(&m32)
                .arg(&self.n_rows)
                .arg(mat.block_ptr.slice())
                .arg(mat.row_len.slice())
                .arg(mat.long_row.slice())
                .arg(mat.long_len.slice())
                .arg(&mat.n_long)
                .arg(mat.cols.slice())
                .arg(mat.codes.slice())
                .arg(&mat.code_bytes)
                .arg(&mat.n_nonzeros)
                .arg(self.table.slice())
                .arg(&self.n_table)
                .arg(witness.slice())
                .arg(&self.n_inputs)
                .arg(&self.n_aux)
                .arg(&mut starts)
                .arg(&WIDE_MIN)
                .arg(status.slice_mut());
            let cfg = LaunchConfig {
                grid_dim: (m32.div_ceil(SPARSE_ROW_BLOCK as u32), 1, 1),
                block_dim: (SPARSE_ROW_BLOCK as u32, 1, 1),
                shared_mem_bytes: 0,
            };
            // SAFETY: `pce_eval`'s arguments (pce.cu): `dst` holds m elements (checked
            // above), the witness n_inputs + n_aux (checked above), status two words; the
            // kernel bounds every index it reads from the matrix by `n_nonzeros`, `n_long`,
            // `n_table`, the column count and the row count (row_len and block_ptr cover
            // the rows: checked at upload). One block per row block of 256 threads;
            // `starts` holds the matrix's n_long long rows (at least one entry).
            unsafe { l.launch(cfg) }.map_err(launch_err)?;
            // The long rows (starts from the launch above, on this stream), then the wide
            // ones (starts from the host), a warp each.
            let long = gpu.function(Entry::PceEvalLong)?;
            let long_starts = long_start.slice().slice(at..at + n_long[k].max(1));
            for (rows, lens, starts, n) in [
                (
                    mat.long_row.slice(),
                    mat.long_len.slice(),
                    &long_starts,
                    mat.n_long,
                ),
                (
                    mat.wide_row.slice(),
                    mat.wide_len.slice(),
                    &mat.wide_start.slice().slice(..),
                    mat.n_wide,
                ),
            ] {
                if n == 0 {
                    continue;
                }
                let mut l = stream.launch_builder(&long);
                l.arg(dst.slice_mut())
                    .arg(&self.n_rows)
                    .arg(rows)
                    .arg(lens)
                    .arg(starts)
                    .arg(&n)
                    .arg(mat.cols.slice())
                    .arg(mat.codes.slice())
                    .arg(&mat.code_bytes)
                    .arg(&mat.n_nonzeros)
                    .arg(self.table.slice())
                    .arg(&self.n_table)
                    .arg(witness.slice())
                    .arg(&self.n_inputs)
                    .arg(&self.n_aux)
                    .arg(status.slice_mut());
                let warps_per_block = 256 / 32;
                let cfg = LaunchConfig {
                    grid_dim: (n.div_ceil(warps_per_block), 1, 1),
                    block_dim: (256, 1, 1),
                    shared_mem_bytes: 0,
                };
                // SAFETY: `pce_eval_long`'s arguments (pce.cu): `dst` holds m >= n_rows
                // elements and the kernel writes only rows below n_rows; the rows, lengths
                // and starts hold n entries (long starts written by the launch above, on
                // this stream; wide ones made at upload); every non-zero index is bounded
                // by n_nonzeros, codes by n_table, columns by n_inputs + n_aux. A warp a row.
                unsafe { l.launch(cfg) }.map_err(launch_err)?;
            }
        }
        let check = gpu.function(Entry::PceCheck)?;
        let [a, b, c] = out;
        let mut l = stream.launch_builder(&check);
        l.arg(a.slice())
            .arg(b.slice())
            .arg(c.slice())
            .arg(&self.n_rows)
            .arg(status.slice_mut());
        let threads = 256u32;
        let cfg = LaunchConfig {
            grid_dim: (self.n_rows.div_ceil(threads).clamp(1, 1 << 16), 1, 1),
            block_dim: (threads, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: (a, b, c, n, status): a, b, c hold m >= n_rows elements (checked above),
        // status two words; the kernel's loop is grid-strided over n.
        unsafe { l.launch(cfg) }.map_err(launch_err)?;
        Ok(PendingCheck { status })
    }
}

/// The check of an evaluation queued on the device ([`DeviceR1cs::queue_evaluate`]).
pub struct PendingCheck {
    status: DeviceBuffer<u32>,
}

impl std::fmt::Debug for PendingCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingCheck").finish_non_exhaustive()
    }
}

impl PendingCheck {
    /// Waits for `gpu`'s stream (the one the evaluation was queued on) and reads what the
    /// check found.
    pub fn wait(self, gpu: &Gpu) -> Result<SparseCheck, GpuNttError> {
        let got = gpu.download(&self.status)?;
        let (first, damaged) = match got[..] {
            [f, d] => (f, d),
            _ => unreachable!("a two-word buffer was downloaded"),
        };
        Ok(SparseCheck {
            first_unsatisfied: (first != u32::MAX).then_some(first as usize),
            damaged: damaged != 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wide-row list reads starts as the kernel does: a block's first non-zero plus
    /// the lengths before the row, long rows' lengths from their list; long rows are not
    /// wide, and a new row block restarts from its pointer.
    #[test]
    fn wide_rows_are_listed_with_their_starts() {
        let mut row_len = vec![1u8, 40, 255, 3, 200, 31, 32];
        row_len.resize(SPARSE_ROW_BLOCK, 0);
        row_len.extend([254u8, 2, 255, 33]);
        let p = SparseParts {
            block_ptr: &[0, 1000],
            row_len: &row_len,
            long_row: &[2, SPARSE_ROW_BLOCK as u64 + 2],
            long_len: &[300, 500],
            cols: &[],
            codes: &[],
            code_bytes: 1,
        };
        let (rows, starts, lens) = wide_rows(&p, row_len.len());
        let b = SPARSE_ROW_BLOCK as u64;
        assert_eq!(rows, vec![1, 4, 6, b, b + 3]);
        assert_eq!(starts, vec![1, 344, 575, 1000, 1000 + 254 + 2 + 500]);
        assert_eq!(lens, vec![40, 200, 32, 254, 33]);
        // Rows past n_rows are not read.
        assert_eq!(wide_rows(&p, 2).0, vec![1]);
    }
}
