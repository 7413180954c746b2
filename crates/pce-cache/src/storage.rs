//! Compact matrix storage, owned or borrowed from a memory map.

use std::ops::Range;
use std::sync::Arc;

use bls12_381::Scalar;
use memmap2::Mmap;

/// Rows per row block. Each block has one u64 pointer to its first non-zero; rows inside a
/// block are found by summing one-byte row lengths. 256 keeps the pointer cost at 1/32 byte
/// per row per matrix while a block is still a reasonable unit of parallel work.
pub const ROW_BLOCK: usize = 256;

/// Row length byte meaning "long row: the length is in the long-row list".
pub const LONG_ROW: u8 = u8::MAX;

/// One matrix's sections as stored ([`crate::Pce::matrix_parts`]), the compact CSR layout:
/// row `r` of row block `k = r / ROW_BLOCK` starts at non-zero `block_ptr[k]` plus the
/// lengths of the rows before it in its block; a length byte of [`LONG_ROW`] means the
/// row's length is the next entry of `long_len` (`long_row` holds those rows, ascending).
/// Non-zero `j` has column `cols[j]` (inputs first, then aux) and coefficient code `j` of
/// `codes` (little-endian, `code_bytes` each: 0 is +1, 1 is −1, others index
/// [`crate::Pce::coefficients`]). A PCE loaded from a file was validated against this
/// layout when it was opened.
#[derive(Clone, Copy, Debug)]
pub struct MatrixParts<'a> {
    /// One non-zero index per row block.
    pub block_ptr: &'a [u64],
    /// One length byte per row.
    pub row_len: &'a [u8],
    /// Rows whose length byte is [`LONG_ROW`], ascending.
    pub long_row: &'a [u64],
    /// Their lengths.
    pub long_len: &'a [u64],
    /// Column of each non-zero.
    pub cols: &'a [u32],
    /// Coefficient code of each non-zero, `code_bytes` little-endian bytes each.
    pub codes: &'a [u8],
    /// 1, 2 or 4.
    pub code_bytes: u32,
}

/// A section of plain-old-data elements, either owned or inside a shared memory map.
pub(crate) enum Buf<T: bytemuck::Pod> {
    Owned(Vec<T>),
    /// `range` is a byte range of `map` whose start is aligned for `T` (checked at load) and
    /// whose length is a multiple of `size_of::<T>()`.
    Mapped {
        map: Arc<Mmap>,
        range: Range<usize>,
    },
}

impl<T: bytemuck::Pod> Buf<T> {
    pub(crate) fn as_slice(&self) -> &[T] {
        match self {
            Buf::Owned(v) => v,
            // Alignment and length were checked by `try_cast_slice` when the file was
            // opened; the map is immutable, so this cannot fail afterwards.
            Buf::Mapped { map, range } => bytemuck::cast_slice(&map[range.clone()]),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.as_slice().len()
    }

    /// Bytes of host memory (or page cache) this section occupies.
    pub(crate) fn bytes(&self) -> u64 {
        (self.len() * std::mem::size_of::<T>()) as u64
    }
}

/// Coefficient codes of one matrix: index into the coefficient table, in the narrowest
/// width that holds the largest code the matrix uses. Code 0 is +1 and code 1 is -1.
pub(crate) enum Codes {
    U8(Buf<u8>),
    U16(Buf<u16>),
    U32(Buf<u32>),
}

impl Codes {
    pub(crate) fn len(&self) -> usize {
        match self {
            Codes::U8(b) => b.len(),
            Codes::U16(b) => b.len(),
            Codes::U32(b) => b.len(),
        }
    }

    pub(crate) fn bytes(&self) -> u64 {
        match self {
            Codes::U8(b) => b.bytes(),
            Codes::U16(b) => b.bytes(),
            Codes::U32(b) => b.bytes(),
        }
    }

    pub(crate) fn elem_bytes(&self) -> u32 {
        match self {
            Codes::U8(_) => 1,
            Codes::U16(_) => 2,
            Codes::U32(_) => 4,
        }
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        match self {
            Codes::U8(b) => b.as_slice(),
            Codes::U16(b) => bytemuck::cast_slice(b.as_slice()),
            Codes::U32(b) => bytemuck::cast_slice(b.as_slice()),
        }
    }

    pub(crate) fn get(&self, i: usize) -> usize {
        match self {
            Codes::U8(b) => b.as_slice()[i] as usize,
            Codes::U16(b) => b.as_slice()[i] as usize,
            Codes::U32(b) => b.as_slice()[i] as usize,
        }
    }
}

/// One sparse matrix (A, B or C) in the two-level compact CSR layout.
///
/// Row `r` of block `k = r / ROW_BLOCK` starts at `block_ptr[k]` plus the lengths of the rows
/// before it in the block. A length byte of [`LONG_ROW`] means the row's length is the next
/// entry of `long_len` (`long_row` holds the row indices, ascending).
pub(crate) struct Matrix {
    pub(crate) block_ptr: Buf<u64>,
    pub(crate) row_len: Buf<u8>,
    pub(crate) long_row: Buf<u64>,
    pub(crate) long_len: Buf<u64>,
    pub(crate) cols: Buf<u32>,
    pub(crate) codes: Codes,
}

impl Matrix {
    pub(crate) fn n_nonzeros(&self) -> u64 {
        self.cols.len() as u64
    }

    pub(crate) fn bytes(&self) -> u64 {
        self.block_ptr.bytes()
            + self.row_len.bytes()
            + self.long_row.bytes()
            + self.long_len.bytes()
            + self.cols.bytes()
            + self.codes.bytes()
    }
}

/// Which of the three matrices.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum MatrixId {
    /// The A matrix (left factor).
    A,
    /// The B matrix (right factor).
    B,
    /// The C matrix (product).
    C,
}

impl MatrixId {
    /// All three, in order.
    pub const ALL: [MatrixId; 3] = [MatrixId::A, MatrixId::B, MatrixId::C];

    pub(crate) fn index(self) -> usize {
        self as usize
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            MatrixId::A => "a",
            MatrixId::B => "b",
            MatrixId::C => "c",
        }
    }
}

/// A bit vector over variables: bit `i` is word `i / 64`, bit `i % 64` (LSB first).
pub struct Density {
    pub(crate) words: Buf<u64>,
    pub(crate) n_bits: usize,
}

impl Density {
    /// Number of variables covered.
    pub fn len(&self) -> usize {
        self.n_bits
    }

    /// Whether it covers no variable.
    pub fn is_empty(&self) -> bool {
        self.n_bits == 0
    }

    /// Whether variable `i` is dense (its base is used). Out of range is `false`.
    pub fn get(&self, i: usize) -> bool {
        i < self.n_bits && (self.words.as_slice()[i / 64] >> (i % 64)) & 1 == 1
    }

    /// Number of dense variables: the `*_density_total` groth16 passes to `ParameterSource`.
    pub fn count_ones(&self) -> usize {
        self.words
            .as_slice()
            .iter()
            .map(|w| w.count_ones() as usize)
            .sum()
    }

    /// The packed words (bits past `len()` are zero).
    pub fn words(&self) -> &[u64] {
        self.words.as_slice()
    }

    /// The bits in variable order.
    pub fn iter(&self) -> impl Iterator<Item = bool> + '_ {
        (0..self.n_bits).map(move |i| self.get(i))
    }
}

/// Query densities exactly as groth16 0.2's prover computes them.
///
/// groth16 marks a variable dense when some constraint has a non-zero coefficient for it in
/// that matrix (it checks each term as written, before any merging, so a variable whose
/// terms cancel inside one linear combination is still dense). `a_input` is all ones there
/// (`FullDensity`, because of the `input·0 = 0` rows); it is stored here for completeness.
pub struct Densities {
    pub(crate) a_input: Density,
    pub(crate) a_aux: Density,
    pub(crate) b_input: Density,
    pub(crate) b_aux: Density,
}

impl Densities {
    /// A over inputs (all ones for groth16 circuits).
    pub fn a_input(&self) -> &Density {
        &self.a_input
    }
    /// A over aux: which `a_query` aux bases are used.
    pub fn a_aux(&self) -> &Density {
        &self.a_aux
    }
    /// B over inputs: which `b_g1_query`/`b_g2_query` input bases are used.
    pub fn b_input(&self) -> &Density {
        &self.b_input
    }
    /// B over aux.
    pub fn b_aux(&self) -> &Density {
        &self.b_aux
    }

    pub(crate) fn all(&self) -> [&Density; 4] {
        [&self.a_input, &self.a_aux, &self.b_input, &self.b_aux]
    }

    pub(crate) fn bytes(&self) -> u64 {
        self.all().iter().map(|d| d.words.bytes()).sum()
    }
}

/// Sizes of a recorded circuit.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Public inputs, including the constant ONE at index 0.
    pub n_inputs: u64,
    /// Auxiliary (private) variables.
    pub n_aux: u64,
    /// Constraints the circuit enforced.
    pub n_constraints: u64,
    /// Matrix rows: `n_constraints + n_inputs` (groth16 appends `input_i · 0 = 0`).
    pub n_rows: u64,
}

impl Shape {
    /// Columns: inputs then aux.
    pub fn n_columns(&self) -> u64 {
        self.n_inputs + self.n_aux
    }
}

/// Largest k for which ±2^k is applied by doublings rather than a multiplication
/// (a doubling costs about a fifth of a Montgomery multiplication).
const MAX_POW2_DOUBLINGS: u32 = 4;

/// Coefficient table (entry 0 is +1, entry 1 is -1) kept in memory: it is small.
pub(crate) struct CoeffTable {
    pub(crate) scalars: Vec<Scalar>,
    /// Per entry: k > 0 when the entry is 2^k, -k when it is -2^k (1 <= k <= 4), else 0.
    pub(crate) pow2: Vec<i8>,
}

impl CoeffTable {
    pub(crate) fn new(scalars: Vec<Scalar>) -> Self {
        let pow2 = scalars
            .iter()
            .map(|c| {
                (1..=MAX_POW2_DOUBLINGS)
                    .find_map(|k| {
                        let p = Scalar::from(1u64 << k);
                        if *c == p {
                            Some(k as i8)
                        } else if *c == -p {
                            Some(-(k as i8))
                        } else {
                            None
                        }
                    })
                    .unwrap_or(0)
            })
            .collect();
        CoeffTable { scalars, pow2 }
    }

    pub(crate) fn len(&self) -> usize {
        self.scalars.len()
    }
}
