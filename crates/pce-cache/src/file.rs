//! The on-disk format: one memory-mappable file per circuit.
//!
//! ```text
//! offset  size  field
//!      0     8  magic "PINIONPC"
//!      8     4  version (u32 LE)
//!     12     4  flags (0)
//!     16     8  header_bytes: offset of the first section (multiple of 64)
//!     24    32  n_inputs, n_aux, n_constraints, n_rows (u64 LE each)
//!     56     4  row_block (rows per block pointer)
//!     60     4  n_sections
//!     64    32  fingerprint (see `fingerprint_of`)
//!     96    32  header checksum: sha256 of bytes 0..96 and the section table
//!    128  64·n  section table: kind u32, elem_bytes u32, offset u64, n_elems u64,
//!               reserved u64, sha256 of the section's bytes [32]
//! ```
//! Sections start at multiples of 64 bytes, so every `u64`/`u32`/`u16` section can be cast
//! in place over the map (the map itself is page aligned). All integers are little-endian;
//! big-endian hosts are refused at compile time.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bls12_381::Scalar;
use ff::Field;
use memmap2::Mmap;
use rayon::prelude::*;
use sha2::{Digest, Sha256};

use crate::storage::{
    Buf, Codes, CoeffTable, Densities, Density, Matrix, MatrixId, Shape, LONG_ROW, ROW_BLOCK,
};
use crate::{Fingerprint, Pce, PceError};

#[cfg(target_endian = "big")]
compile_error!("the pce file format is little-endian and is cast in place");

/// First bytes of every PCE file.
pub const MAGIC: [u8; 8] = *b"PINIONPC";
/// Format version this build reads and writes.
pub const FORMAT_VERSION: u32 = 1;
const FIXED_HEADER_BYTES: usize = 128;
const SECTION_ENTRY_BYTES: usize = 64;
const ALIGN: usize = 64;
const PER_MATRIX: usize = 6;
pub(crate) const N_SECTIONS: usize = 1 + 3 * PER_MATRIX + 4;
const DENSITY_NAMES: [&str; 4] = ["a_input", "a_aux", "b_input", "b_aux"];
const MATRIX_PARTS: [&str; PER_MATRIX] = [
    "block_ptr",
    "row_len",
    "long_row",
    "long_len",
    "cols",
    "codes",
];

pub(crate) fn section_name(kind: usize) -> String {
    match kind {
        0 => "coeff_table".to_string(),
        k if k < 1 + 3 * PER_MATRIX => {
            let m = MatrixId::ALL[(k - 1) / PER_MATRIX];
            format!("{}.{}", m.name(), MATRIX_PARTS[(k - 1) % PER_MATRIX])
        }
        k if k < N_SECTIONS => format!("density.{}", DENSITY_NAMES[k - 1 - 3 * PER_MATRIX]),
        k => format!("unknown section {k}"),
    }
}

/// A section's raw bytes and element size, in file order.
pub(crate) struct SectionRef<'a> {
    pub(crate) elem_bytes: u32,
    pub(crate) bytes: &'a [u8],
}

fn align_up(x: usize) -> usize {
    x.div_ceil(ALIGN) * ALIGN
}

pub(crate) fn table_bytes(table: &[Scalar]) -> Vec<u8> {
    table.iter().flat_map(|s| s.to_bytes()).collect()
}

impl Pce {
    pub(crate) fn section_refs(&self) -> Vec<SectionRef<'_>> {
        let mut v = Vec::with_capacity(N_SECTIONS);
        v.push(SectionRef {
            elem_bytes: 32,
            bytes: &self.table_bytes,
        });
        for m in &self.mats {
            v.push(SectionRef {
                elem_bytes: 8,
                bytes: bytemuck::cast_slice(m.block_ptr.as_slice()),
            });
            v.push(SectionRef {
                elem_bytes: 1,
                bytes: m.row_len.as_slice(),
            });
            v.push(SectionRef {
                elem_bytes: 8,
                bytes: bytemuck::cast_slice(m.long_row.as_slice()),
            });
            v.push(SectionRef {
                elem_bytes: 8,
                bytes: bytemuck::cast_slice(m.long_len.as_slice()),
            });
            v.push(SectionRef {
                elem_bytes: 4,
                bytes: bytemuck::cast_slice(m.cols.as_slice()),
            });
            v.push(SectionRef {
                elem_bytes: m.codes.elem_bytes(),
                bytes: m.codes.as_bytes(),
            });
        }
        for d in self.dens.all() {
            v.push(SectionRef {
                elem_bytes: 8,
                bytes: bytemuck::cast_slice(d.words.as_slice()),
            });
        }
        v
    }

    /// Writes the PCE to `path` atomically: a temporary file in the same directory, fsync,
    /// rename over `path`, fsync of the directory. Readers see the old file or the new one.
    pub fn write_to(&self, path: &Path) -> Result<(), PceError> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let file_name = path.file_name().ok_or_else(|| {
            PceError::io(
                path,
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "path has no file name"),
            )
        })?;
        let tmp = dir.join(format!(
            ".{}.tmp-{}-{}",
            file_name.to_string_lossy(),
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let result = self.write_file(&tmp).and_then(|()| {
            std::fs::rename(&tmp, path).map_err(|e| PceError::io(path, e))?;
            // The rename is durable only once the directory entry is.
            File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| PceError::io(dir, e))
        });
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result
    }

    fn write_file(&self, tmp: &Path) -> Result<(), PceError> {
        let sections = self.section_refs();
        let header_bytes = align_up(FIXED_HEADER_BYTES + SECTION_ENTRY_BYTES * sections.len());
        let mut offsets = Vec::with_capacity(sections.len());
        let mut at = header_bytes;
        for s in &sections {
            offsets.push(at);
            at = align_up(at + s.bytes.len());
        }
        let header = encode_header(
            &self.shape,
            header_bytes,
            &self.fingerprint,
            sections
                .iter()
                .zip(&offsets)
                .zip(&self.checksums)
                .map(|((s, &off), sum)| (s.elem_bytes, off, s.bytes.len(), *sum)),
        );
        let io = |e| PceError::io(tmp, e);
        let file = File::create(tmp).map_err(io)?;
        let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
        w.write_all(&header).map_err(io)?;
        let mut pos = header.len();
        let zeros = [0u8; ALIGN];
        for (s, &off) in sections.iter().zip(&offsets) {
            w.write_all(&zeros[..off - pos]).map_err(io)?;
            w.write_all(s.bytes).map_err(io)?;
            pos = off + s.bytes.len();
        }
        let file = w.into_inner().map_err(|e| io(e.into_error()))?;
        file.sync_all().map_err(io)?;
        Ok(())
    }

    /// Opens a cache file, verifies every section checksum and the fingerprint (against
    /// `expected` too, when given), validates the structure, and uses the mapped sections
    /// in place. Cost: one sha256 pass and one validation pass over the file.
    pub fn load(path: &Path, expected: Option<&Fingerprint>) -> Result<Pce, PceError> {
        Self::open(path, expected, true)
    }

    /// Like [`Pce::load`] but trusts the section checksums in the header (the header's own
    /// checksum and the structure are still verified, so evaluation cannot go out of bounds).
    pub fn load_unchecked(path: &Path, expected: Option<&Fingerprint>) -> Result<Pce, PceError> {
        Self::open(path, expected, false)
    }

    fn open(path: &Path, expected: Option<&Fingerprint>, verify: bool) -> Result<Pce, PceError> {
        let start = std::time::Instant::now();
        let file = File::open(path).map_err(|e| PceError::io(path, e))?;
        // SAFETY: the map is read-only and private to this process's view. Cache files are
        // only ever replaced by rename, never modified in place, by this crate; a file
        // changed in place by someone else is outside the contract (documented on the crate).
        #[allow(unsafe_code)]
        let map = unsafe { Mmap::map(&file) }.map_err(|e| PceError::io(path, e))?;
        let map = Arc::new(map);
        let pce = parse(path, map, expected, verify)?;
        metrics::histogram!("pinion_pce_load_seconds").record(start.elapsed().as_secs_f64());
        Ok(pce)
    }
}

fn encode_header(
    shape: &Shape,
    header_bytes: usize,
    fingerprint: &Fingerprint,
    sections: impl Iterator<Item = (u32, usize, usize, [u8; 32])>,
) -> Vec<u8> {
    let mut h = Vec::with_capacity(header_bytes);
    h.extend_from_slice(&MAGIC);
    h.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    h.extend_from_slice(&0u32.to_le_bytes());
    h.extend_from_slice(&(header_bytes as u64).to_le_bytes());
    for x in [
        shape.n_inputs,
        shape.n_aux,
        shape.n_constraints,
        shape.n_rows,
    ] {
        h.extend_from_slice(&x.to_le_bytes());
    }
    h.extend_from_slice(&(ROW_BLOCK as u32).to_le_bytes());
    let mut table = Vec::new();
    let mut n = 0u32;
    for (elem_bytes, offset, len, sum) in sections {
        table.extend_from_slice(&n.to_le_bytes());
        table.extend_from_slice(&elem_bytes.to_le_bytes());
        n += 1;
        table.extend_from_slice(&(offset as u64).to_le_bytes());
        table.extend_from_slice(&((len / elem_bytes as usize) as u64).to_le_bytes());
        table.extend_from_slice(&0u64.to_le_bytes());
        table.extend_from_slice(&sum);
    }
    h.extend_from_slice(&n.to_le_bytes());
    h.extend_from_slice(&fingerprint.0);
    let sum = header_checksum(&h, &table);
    h.extend_from_slice(&sum);
    h.extend_from_slice(&table);
    h.resize(header_bytes, 0);
    h
}

fn header_checksum(fixed: &[u8], table: &[u8]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(fixed);
    hasher.update(table);
    hasher.finalize().into()
}

/// The circuit fingerprint: a hash over the shape and every section's checksum, so it
/// identifies the matrices (and densities) exactly while costing nothing beyond them.
pub(crate) fn fingerprint_of(shape: &Shape, sections: &[(u32, u64, [u8; 32])]) -> Fingerprint {
    let mut hasher = Sha256::new();
    hasher.update(b"pinion-pce-fingerprint-v1");
    for x in [
        shape.n_inputs,
        shape.n_aux,
        shape.n_constraints,
        shape.n_rows,
        ROW_BLOCK as u64,
    ] {
        hasher.update(x.to_le_bytes());
    }
    for (kind, (elem_bytes, n_elems, sum)) in sections.iter().enumerate() {
        hasher.update((kind as u32).to_le_bytes());
        hasher.update(elem_bytes.to_le_bytes());
        hasher.update(n_elems.to_le_bytes());
        hasher.update(sum);
    }
    Fingerprint(hasher.finalize().into())
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut x = [0u8; 4];
    x.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(x)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

struct Entry {
    elem_bytes: u32,
    offset: usize,
    n_elems: u64,
    byte_len: usize,
    sum: [u8; 32],
}

fn parse(
    path: &Path,
    map: Arc<Mmap>,
    expected: Option<&Fingerprint>,
    verify: bool,
) -> Result<Pce, PceError> {
    let bytes: &[u8] = &map;
    let file_len = bytes.len() as u64;
    let truncated = |need: u64| PceError::Truncated {
        path: path.to_path_buf(),
        expected_bytes: need,
        found_bytes: file_len,
    };
    if bytes.len() < 12 {
        return Err(truncated(FIXED_HEADER_BYTES as u64));
    }
    let mut magic = [0u8; 8];
    magic.copy_from_slice(&bytes[..8]);
    if magic != MAGIC {
        return Err(PceError::BadMagic {
            path: path.to_path_buf(),
            found: magic,
        });
    }
    // Version before the header checksum: another version may lay its header out otherwise.
    let version = u32_at(bytes, 8);
    if version != FORMAT_VERSION {
        return Err(PceError::UnsupportedVersion {
            path: path.to_path_buf(),
            expected: FORMAT_VERSION,
            found: version,
        });
    }
    if bytes.len() < FIXED_HEADER_BYTES {
        return Err(truncated(FIXED_HEADER_BYTES as u64));
    }
    // Version 1 always has N_SECTIONS entries, so the checksum can be verified before any
    // other header field is believed.
    let table_end = FIXED_HEADER_BYTES + SECTION_ENTRY_BYTES * N_SECTIONS;
    if bytes.len() < table_end {
        return Err(truncated(table_end as u64));
    }
    let table = &bytes[FIXED_HEADER_BYTES..table_end];
    if header_checksum(&bytes[..96], table)[..] != bytes[96..128] {
        return Err(PceError::ChecksumMismatch {
            path: path.to_path_buf(),
            section: "header".into(),
        });
    }
    let n_sections = u32_at(bytes, 60) as usize;
    if n_sections != N_SECTIONS {
        return Err(PceError::MalformedAt {
            path: path.to_path_buf(),
            part: "header",
            offset: 60,
            reason: format!("expected {N_SECTIONS} sections, found {n_sections}"),
        });
    }
    let header_bytes = u64_at(bytes, 16);
    let shape = Shape {
        n_inputs: u64_at(bytes, 24),
        n_aux: u64_at(bytes, 32),
        n_constraints: u64_at(bytes, 40),
        n_rows: u64_at(bytes, 48),
    };
    let row_block = u32_at(bytes, 56);
    let flags = u32_at(bytes, 12);
    let mut header_fp = [0u8; 32];
    header_fp.copy_from_slice(&bytes[64..96]);
    let header_fp = Fingerprint(header_fp);
    let bad_header = |offset: u64, reason: String| PceError::MalformedAt {
        path: path.to_path_buf(),
        part: "header",
        offset,
        reason,
    };
    if flags != 0 {
        return Err(bad_header(12, format!("unknown flags {flags:#x}")));
    }
    if row_block as usize != ROW_BLOCK {
        return Err(bad_header(
            56,
            format!("row block {row_block}, this build uses {ROW_BLOCK}"),
        ));
    }
    if header_bytes < table_end as u64 || header_bytes % ALIGN as u64 != 0 {
        return Err(bad_header(16, format!("header size {header_bytes}")));
    }
    if shape.n_inputs == 0
        || shape.n_constraints.checked_add(shape.n_inputs) != Some(shape.n_rows)
        || shape
            .n_inputs
            .checked_add(shape.n_aux)
            .is_none_or(|n| n > u64::from(u32::MAX))
    {
        return Err(bad_header(24, format!("inconsistent shape {shape:?}")));
    }

    let mut entries = Vec::with_capacity(n_sections);
    for k in 0..n_sections {
        let e = &table[k * SECTION_ENTRY_BYTES..(k + 1) * SECTION_ENTRY_BYTES];
        let kind = u32_at(e, 0);
        let elem_bytes = u32_at(e, 4);
        let offset = u64_at(e, 8);
        let n_elems = u64_at(e, 16);
        let mut sum = [0u8; 32];
        sum.copy_from_slice(&e[32..64]);
        // Byte offset of a field of this entry (kind 0, element size 4, offset 8, count 16).
        let bad = |field: usize, reason: String| PceError::MalformedAt {
            path: path.to_path_buf(),
            part: "section table",
            offset: (FIXED_HEADER_BYTES + k * SECTION_ENTRY_BYTES + field) as u64,
            reason: format!("entry {k} ({}): {reason}", section_name(k)),
        };
        if kind as usize != k {
            return Err(bad(0, format!("section kind {kind}, expected {k}")));
        }
        if !matches!(elem_bytes, 1 | 2 | 4 | 8 | 32) {
            return Err(bad(4, format!("element size {elem_bytes}")));
        }
        if offset % ALIGN as u64 != 0 || offset < header_bytes {
            return Err(bad(
                8,
                format!("section offset {offset} (must be a multiple of {ALIGN}, at least {header_bytes})"),
            ));
        }
        let end = n_elems
            .checked_mul(u64::from(elem_bytes))
            .and_then(|l| l.checked_add(offset))
            .ok_or_else(|| bad(16, format!("{n_elems} elements overflow")))?;
        if end > file_len {
            return Err(truncated(end));
        }
        entries.push(Entry {
            elem_bytes,
            offset: offset as usize,
            n_elems,
            byte_len: (end - offset) as usize,
            sum,
        });
    }

    if verify {
        // Bytes outside every section (header padding, alignment gaps, a tail) carry nothing
        // and no checksum covers them: they must be zero.
        let mut ranges: Vec<(usize, usize)> = entries
            .iter()
            .map(|e| (e.offset, e.offset + e.byte_len))
            .collect();
        ranges.sort_unstable();
        let mut at = table_end;
        for (start, end) in ranges.into_iter().chain([(bytes.len(), bytes.len())]) {
            if start > at {
                if let Some(i) = bytes[at..start].iter().position(|&b| b != 0) {
                    return Err(PceError::MalformedAt {
                        path: path.to_path_buf(),
                        part: "padding",
                        offset: (at + i) as u64,
                        reason: "non-zero byte outside every section".into(),
                    });
                }
            }
            at = at.max(end);
        }
        let bad = entries.par_iter().enumerate().find_map_first(|(k, e)| {
            let got: [u8; 32] = Sha256::digest(&bytes[e.offset..e.offset + e.byte_len]).into();
            (got != e.sum).then_some(k)
        });
        if let Some(k) = bad {
            return Err(PceError::ChecksumMismatch {
                path: path.to_path_buf(),
                section: section_name(k),
            });
        }
    }
    let fp = fingerprint_of(
        &shape,
        &entries
            .iter()
            .map(|e| (e.elem_bytes, e.n_elems, e.sum))
            .collect::<Vec<_>>(),
    );
    if fp != header_fp {
        return Err(PceError::FingerprintMismatch {
            path: path.to_path_buf(),
            expected: header_fp,
            found: fp,
        });
    }
    if let Some(want) = expected {
        if *want != fp {
            return Err(PceError::FingerprintMismatch {
                path: path.to_path_buf(),
                expected: *want,
                found: fp,
            });
        }
    }

    // Typed views over the map; alignment is checked here once.
    fn mapped<T: bytemuck::Pod>(
        path: &Path,
        map: &Arc<Mmap>,
        k: usize,
        e: &Entry,
        want_elem: u32,
    ) -> Result<Buf<T>, PceError> {
        if e.elem_bytes != want_elem || std::mem::size_of::<T>() as u32 != want_elem {
            return Err(PceError::malformed(
                path,
                section_name(k),
                0,
                format!("element size {}, expected {want_elem}", e.elem_bytes),
            ));
        }
        let range = e.offset..e.offset + e.byte_len;
        bytemuck::try_cast_slice::<u8, T>(&map[range.clone()]).map_err(|err| {
            PceError::malformed(path, section_name(k), 0, format!("cannot view: {err}"))
        })?;
        Ok(Buf::Mapped {
            map: map.clone(),
            range,
        })
    }

    // Coefficient table: small, so it is decoded into Scalars (and must be canonical).
    let te = &entries[0];
    if te.elem_bytes != 32 || te.n_elems < 2 {
        return Err(PceError::malformed(
            path,
            "coeff_table",
            0,
            format!("{} entries of {} bytes", te.n_elems, te.elem_bytes),
        ));
    }
    let table_bytes = bytes[te.offset..te.offset + te.byte_len].to_vec();
    let mut table = Vec::with_capacity(te.n_elems as usize);
    for (i, chunk) in table_bytes.chunks_exact(32).enumerate() {
        let mut b = [0u8; 32];
        b.copy_from_slice(chunk);
        let s: Option<Scalar> = Scalar::from_bytes(&b).into();
        let s = s.ok_or_else(|| {
            PceError::malformed(path, "coeff_table", i as u64, "non-canonical scalar")
        })?;
        table.push(s);
    }
    if table[0] != Scalar::ONE || table[1] != -Scalar::ONE {
        return Err(PceError::malformed(
            path,
            "coeff_table",
            0,
            "entries 0 and 1 must be +1 and -1",
        ));
    }

    let mut mats = Vec::with_capacity(3);
    for m in 0..3 {
        let k = 1 + m * PER_MATRIX;
        let codes_entry = &entries[k + 5];
        let codes = match codes_entry.elem_bytes {
            1 => Codes::U8(mapped(path, &map, k + 5, codes_entry, 1)?),
            2 => Codes::U16(mapped(path, &map, k + 5, codes_entry, 2)?),
            4 => Codes::U32(mapped(path, &map, k + 5, codes_entry, 4)?),
            other => {
                return Err(PceError::malformed(
                    path,
                    section_name(k + 5),
                    0,
                    format!("code width {other}"),
                ))
            }
        };
        mats.push(Matrix {
            block_ptr: mapped(path, &map, k, &entries[k], 8)?,
            row_len: mapped(path, &map, k + 1, &entries[k + 1], 1)?,
            long_row: mapped(path, &map, k + 2, &entries[k + 2], 8)?,
            long_len: mapped(path, &map, k + 3, &entries[k + 3], 8)?,
            cols: mapped(path, &map, k + 4, &entries[k + 4], 4)?,
            codes,
        });
    }
    let d0 = 1 + 3 * PER_MATRIX;
    let dens_bits = [shape.n_inputs, shape.n_aux, shape.n_inputs, shape.n_aux];
    let mut dens = Vec::with_capacity(4);
    for (i, &n_bits) in dens_bits.iter().enumerate() {
        dens.push(Density {
            words: mapped(path, &map, d0 + i, &entries[d0 + i], 8)?,
            n_bits: n_bits as usize,
        });
    }
    let mut dens = dens.into_iter();
    let (Some(a_input), Some(a_aux), Some(b_input), Some(b_aux)) =
        (dens.next(), dens.next(), dens.next(), dens.next())
    else {
        unreachable!("four densities were pushed")
    };
    let mut mats = mats.into_iter();
    let (Some(a), Some(b), Some(c)) = (mats.next(), mats.next(), mats.next()) else {
        unreachable!("three matrices were pushed")
    };
    let pce = Pce {
        shape,
        table: CoeffTable::new(table),
        table_bytes,
        mats: [a, b, c],
        dens: Densities {
            a_input,
            a_aux,
            b_input,
            b_aux,
        },
        checksums: entries.iter().map(|e| e.sum).collect(),
        fingerprint: fp,
        source: Some(path.to_path_buf()),
        needs: crate::pipeline::Needs::new(),
    };
    validate(&pce, path)?;
    Ok(pce)
}

/// Structural checks that make evaluation of untrusted data panic-free: every index is in
/// range and every row's extent agrees with the block pointers.
pub(crate) fn validate(pce: &Pce, path: &Path) -> Result<(), PceError> {
    let shape = pce.shape;
    let n_rows = shape.n_rows as usize;
    let n_blocks = n_rows.div_ceil(ROW_BLOCK);
    let n_cols = shape.n_columns();
    let n_table = pce.table.len();
    for (mi, m) in pce.mats.iter().enumerate() {
        let base = 1 + mi * PER_MATRIX;
        let bad = |part: usize, index: u64, reason: String| {
            PceError::malformed(path, section_name(base + part), index, reason)
        };
        let bp = m.block_ptr.as_slice();
        let rl = m.row_len.as_slice();
        let lr = m.long_row.as_slice();
        let ll = m.long_len.as_slice();
        let nnz = m.cols.len() as u64;
        if bp.len() != n_blocks + 1 {
            return Err(bad(
                0,
                0,
                format!("{} pointers for {n_blocks} blocks", bp.len()),
            ));
        }
        if bp[0] != 0 || bp[n_blocks] != nnz {
            return Err(bad(0, 0, format!("pointers must span 0..{nnz}")));
        }
        if rl.len() != n_rows {
            return Err(bad(1, 0, format!("{} lengths for {n_rows} rows", rl.len())));
        }
        if lr.len() != ll.len() {
            return Err(bad(
                3,
                0,
                format!("{} long rows, {} lengths", lr.len(), ll.len()),
            ));
        }
        if m.codes.len() as u64 != nnz {
            return Err(bad(
                5,
                0,
                format!("{} codes for {nnz} non-zeros", m.codes.len()),
            ));
        }
        if let Some(i) = (1..lr.len()).find(|&i| lr[i] <= lr[i - 1]) {
            return Err(bad(2, i as u64, "long rows not ascending".into()));
        }
        let block_err = (0..n_blocks).into_par_iter().find_map_first(|blk| {
            let r0 = blk * ROW_BLOCK;
            let r1 = (r0 + ROW_BLOCK).min(n_rows);
            let (start, end) = (bp[blk], bp[blk + 1]);
            if end < start {
                return Some(bad(0, blk as u64, "pointers decrease".into()));
            }
            let mut li = lr.partition_point(|&r| r < r0 as u64);
            let mut sum = 0u64;
            for (r, &len) in rl.iter().enumerate().take(r1).skip(r0) {
                let len = if len == LONG_ROW {
                    if li >= lr.len() || lr[li] != r as u64 {
                        return Some(bad(2, r as u64, "long row missing from list".into()));
                    }
                    li += 1;
                    ll[li - 1]
                } else {
                    u64::from(len)
                };
                sum = match sum.checked_add(len) {
                    Some(s) => s,
                    None => return Some(bad(3, r as u64, "row length overflow".into())),
                };
            }
            if li < lr.len() && lr[li] < r1 as u64 {
                return Some(bad(2, li as u64, "listed row is not marked long".into()));
            }
            if sum != end - start {
                return Some(bad(
                    1,
                    r0 as u64,
                    format!(
                        "block {blk} rows hold {sum} entries, pointers say {}",
                        end - start
                    ),
                ));
            }
            None
        });
        if let Some(e) = block_err {
            return Err(e);
        }
        if let Some(i) = m
            .cols
            .as_slice()
            .par_iter()
            .position_first(|&c| u64::from(c) >= n_cols)
        {
            return Err(bad(4, i as u64, format!("column >= {n_cols}")));
        }
        let code_bad = (0..m.codes.len())
            .into_par_iter()
            .with_min_len(1 << 16)
            .find_first(|&i| m.codes.get(i) >= n_table);
        if let Some(i) = code_bad {
            return Err(bad(5, i as u64, format!("code >= table size {n_table}")));
        }
    }
    for (i, d) in pce.dens.all().into_iter().enumerate() {
        let words = d.words.as_slice();
        let k = 1 + 3 * PER_MATRIX + i;
        if words.len() != d.n_bits.div_ceil(64) {
            return Err(PceError::malformed(
                path,
                section_name(k),
                0,
                format!("{} words for {} bits", words.len(), d.n_bits),
            ));
        }
        if d.n_bits % 64 != 0 && words[words.len() - 1] >> (d.n_bits % 64) != 0 {
            return Err(PceError::malformed(
                path,
                section_name(k),
                (words.len() - 1) as u64,
                "bits set past the end",
            ));
        }
    }
    Ok(())
}

/// The file name a circuit id maps to.
pub(crate) fn file_name_for(id: &str) -> Result<PathBuf, PceError> {
    let ok = !id.is_empty()
        && id.len() <= 200
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && !id.starts_with('.');
    if !ok {
        return Err(PceError::BadKey {
            id: id.to_string(),
            reason: "use 1-200 of [A-Za-z0-9._-], not starting with '.'",
        });
    }
    Ok(PathBuf::from(format!("{id}.pce")))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::Recorder;
    use bellman::{Circuit, ConstraintSystem, SynthesisError};

    /// The seed of a randomized unit test (`PINION_SEED` replays one), printed.
    pub(crate) fn seed() -> u64 {
        let seed = std::env::var("PINION_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u64)
                    .unwrap_or(1)
            });
        eprintln!("seed = {seed}");
        seed
    }

    /// xorshift; enough to pick bytes and values.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// Every section non-empty: a long row, 300 distinct coefficients (u16 codes in A),
    /// inputs and aux in A and B.
    struct Small(u64);
    impl Circuit<Scalar> for Small {
        fn synthesize<CS: ConstraintSystem<Scalar>>(
            self,
            cs: &mut CS,
        ) -> Result<(), SynthesisError> {
            let mut rng = Rng(self.0 | 1);
            let x = cs.alloc_input(|| "x", || Ok(Scalar::from(3u64)))?;
            let vars: Vec<_> = (0..400)
                .map(|i| cs.alloc(|| "v", || Ok(Scalar::from(i as u64))))
                .collect::<Result<_, _>>()?;
            for (i, &v) in vars.iter().enumerate().take(300) {
                let k = Scalar::from(rng.next() | 2);
                cs.enforce(
                    || "r",
                    |lc| lc + (k, v) + x,
                    |lc| lc + v - CS::one(),
                    |lc| lc + vars[i + 1],
                );
            }
            cs.enforce(
                || "long",
                |lc| vars.iter().fold(lc, |lc, &v| lc + v),
                |lc| vars.iter().fold(lc + x, |lc, &v| lc + v),
                |lc| vars.iter().fold(lc, |lc, &v| lc - v),
            );
            Ok(())
        }
    }

    fn fixture(tag: &str) -> (PathBuf, Pce, Vec<u8>) {
        let s = seed();
        let dir = std::env::temp_dir().join(format!("pce-file-{tag}-{}-{s}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (pce, _) = Recorder::record(Small(s), None).unwrap();
        let path = dir.join("orig.pce");
        pce.write_to(&path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        (dir, pce, bytes)
    }

    fn load_bytes(
        dir: &Path,
        name: &str,
        bytes: &[u8],
    ) -> (Result<Pce, PceError>, Result<Pce, PceError>) {
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        (Pce::load(&p, None), Pce::load_unchecked(&p, None))
    }

    /// Evaluation of whatever `load_unchecked` accepted must not panic.
    fn exercise(pce: &Pce) {
        let s = pce.shape();
        let inputs = vec![Scalar::ONE; s.n_inputs as usize];
        let aux = vec![Scalar::ONE; s.n_aux as usize];
        let n = s.n_rows as usize;
        let (mut a, mut b, mut c) = (
            vec![Scalar::ZERO; n],
            vec![Scalar::ZERO; n],
            vec![Scalar::ZERO; n],
        );
        pce.evaluate_into(&inputs, &aux, &mut a, &mut b, &mut c)
            .unwrap();
        let _ = pce.check(&inputs, &aux);
    }

    #[test]
    fn every_section_corruption_is_detected() {
        let (dir, pce, bytes) = fixture("sections");
        let header_bytes = u64_at(&bytes, 16) as usize;
        let mut rng = Rng(seed() | 1);
        let sections = pce.section_refs();
        assert_eq!(sections.len(), N_SECTIONS);
        let mut at = header_bytes;
        for (k, s) in sections.iter().enumerate() {
            assert!(
                !s.bytes.is_empty(),
                "fixture leaves section {} empty",
                section_name(k)
            );
            let off = at + rng.below(s.bytes.len() as u64) as usize;
            at = align_up(at + s.bytes.len());
            let mut bad = bytes.clone();
            bad[off] ^= 1 << rng.below(8);
            let (checked, unchecked) = load_bytes(&dir, "bad.pce", &bad);
            match checked {
                Err(PceError::ChecksumMismatch { section, .. }) => {
                    assert_eq!(section, section_name(k))
                }
                other => panic!("section {}: {:?}", section_name(k), other.err()),
            }
            match unchecked {
                Ok(p) => exercise(&p),
                Err(e) => assert!(e.is_stale_file(), "{e}"),
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn header_corruption_is_detected() {
        let (dir, _pce, bytes) = fixture("header");
        let header_bytes = u64_at(&bytes, 16) as usize;
        let check = |bad: &[u8], what: &str, pred: &dyn Fn(&PceError) -> bool| {
            let (checked, unchecked) = load_bytes(&dir, "bad.pce", bad);
            for r in [checked, unchecked] {
                match r {
                    Err(e) => assert!(pred(&e), "{what}: {e}"),
                    Ok(_) => panic!("{what}: accepted"),
                }
            }
        };
        let mut bad = bytes.clone();
        bad[3] ^= 0x20;
        check(&bad, "magic", &|e| matches!(e, PceError::BadMagic { .. }));
        let (checked, _) = load_bytes(&dir, "bad.pce", &bad);
        let msg = checked.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            msg.ends_with(r#"is not a pce file: magic "PINiONPC", expected "PINIONPC""#),
            "{msg}"
        );
        // Non-ASCII bytes are escaped, and the path is said once.
        let mut bin = bytes.clone();
        bin[..8].copy_from_slice(b"\x89PNG\r\n\x1a\n");
        let (checked, _) = load_bytes(&dir, "png.pce", &bin);
        let msg = checked.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(msg.contains(r#"magic "\x89PNG\r\n\x1a\n""#), "{msg}");
        assert_eq!(msg.matches("png.pce").count(), 1, "{msg}");
        let mut bad = bytes.clone();
        bad[8..12].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
        check(
            &bad,
            "version",
            &|e| matches!(e, PceError::UnsupportedVersion { expected: FORMAT_VERSION, found, .. } if *found == FORMAT_VERSION + 1),
        );
        // A header field (with a matching header checksum) is named by its byte offset.
        let mut bad = bytes.clone();
        bad[12] = 1; // flags
        let table_end = FIXED_HEADER_BYTES + SECTION_ENTRY_BYTES * N_SECTIONS;
        let sum = header_checksum(&bad[..96], &bad[FIXED_HEADER_BYTES..table_end]);
        bad[96..128].copy_from_slice(&sum);
        check(&bad, "flags", &|e| {
            matches!(
                e,
                PceError::MalformedAt {
                    part: "header",
                    offset: 12,
                    ..
                }
            ) && e
                .to_string()
                .contains("malformed header at byte offset 12: unknown flags")
        });
        // every other header byte is covered by the header checksum
        for i in (12..table_end).step_by(7) {
            let mut bad = bytes.clone();
            bad[i] ^= 0x01;
            check(
                &bad,
                &format!("header byte {i}"),
                &|e| matches!(e, PceError::ChecksumMismatch { section, .. } if section == "header"),
            );
        }
        assert!(header_bytes >= table_end);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Random byte flips anywhere: `load` refuses them all; `load_unchecked` may accept a
    /// flip inside a section, and then evaluation must still not panic.
    #[test]
    fn random_flips_never_panic() {
        let (dir, _pce, bytes) = fixture("flips");
        let mut rng = Rng(seed() | 1);
        for _ in 0..100 {
            let mut bad = bytes.clone();
            // Distinct positions, each XORed with a nonzero byte: two flips of one byte
            // could cancel and leave the file intact.
            let flips = 1 + rng.below(3) as usize;
            let mut at: Vec<usize> = Vec::new();
            while at.len() < flips {
                let i = rng.below(bad.len() as u64) as usize;
                if !at.contains(&i) {
                    at.push(i);
                }
            }
            for i in at {
                bad[i] ^= 1 + rng.below(255) as u8;
            }
            let (checked, unchecked) = load_bytes(&dir, "flip.pce", &bad);
            assert!(checked.is_err(), "a corrupted file passed the checked load");
            if let Ok(p) = unchecked {
                exercise(&p);
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn truncation_is_detected() {
        let (dir, _pce, bytes) = fixture("truncate");
        let mut rng = Rng(seed() | 1);
        let mut lens: Vec<usize> = (0..20)
            .map(|_| rng.below(bytes.len() as u64) as usize)
            .collect();
        lens.extend([0, 7, 12, 127, 128, bytes.len() - 1]);
        for len in lens {
            let (checked, unchecked) = load_bytes(&dir, "short.pce", &bytes[..len]);
            for r in [checked, unchecked] {
                let e = r
                    .err()
                    .unwrap_or_else(|| panic!("accepted {len} of {} bytes", bytes.len()));
                assert!(e.is_stale_file(), "{len}: {e}");
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn fingerprint_mismatch_is_detected() {
        let (dir, pce, bytes) = fixture("fingerprint");
        let path = dir.join("orig.pce");
        let mut other = pce.fingerprint();
        other.0[0] ^= 1;
        let e = Pce::load(&path, Some(&other)).err().unwrap();
        assert!(
            matches!(e, PceError::FingerprintMismatch { expected, found, .. } if expected == other && found == pce.fingerprint())
        );
        // a header claiming another fingerprint (with a valid header checksum) is refused
        let mut bad = bytes.clone();
        bad[64] ^= 1;
        let table_end = FIXED_HEADER_BYTES + SECTION_ENTRY_BYTES * N_SECTIONS;
        let sum = header_checksum(&bad[..96], &bad[FIXED_HEADER_BYTES..table_end]);
        bad[96..128].copy_from_slice(&sum);
        let (checked, unchecked) = load_bytes(&dir, "fp.pce", &bad);
        for r in [checked, unchecked] {
            assert!(matches!(r, Err(PceError::FingerprintMismatch { .. })));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Structurally bad content with valid checksums (a buggy writer) is still refused.
    #[test]
    fn structural_errors_are_detected_despite_valid_checksums() {
        let (dir, pce, _) = fixture("structure");
        let n_cols = pce.shape().n_columns() as u32;
        let mut rng = Rng(seed() | 1);
        type Mutation = fn(&mut Pce, u32, u64);
        let mutations: [(&str, Mutation); 4] = [
            ("a.cols", |p, n, r| {
                if let Buf::Owned(v) = &mut p.mats[0].cols {
                    let i = r as usize % v.len();
                    v[i] = n;
                }
            }),
            ("b.row_len", |p, _, r| {
                if let Buf::Owned(v) = &mut p.mats[1].row_len {
                    let i = r as usize % v.len();
                    v[i] = v[i].wrapping_add(1);
                }
            }),
            ("c.block_ptr", |p, _, _| {
                if let Buf::Owned(v) = &mut p.mats[2].block_ptr {
                    let last = v.len() - 1;
                    v[last] += 1;
                }
            }),
            ("a.codes", |p, _, r| {
                if let Codes::U16(Buf::Owned(v)) = &mut p.mats[0].codes {
                    let i = r as usize % v.len();
                    v[i] = u16::MAX;
                }
            }),
        ];
        for (name, mutate) in mutations {
            let (mut bad, _) = Recorder::record(Small(rng.next()), None).unwrap();
            mutate(&mut bad, n_cols, rng.next());
            let shape = bad.shape;
            let bad = Pce::from_parts(
                shape,
                CoeffTable::new(bad.table.scalars.clone()),
                std::mem::replace(&mut bad.mats, fresh_mats()),
                std::mem::replace(&mut bad.dens, fresh_dens()),
            );
            let p = dir.join("structure.pce");
            bad.write_to(&p).unwrap();
            for r in [Pce::load(&p, None), Pce::load_unchecked(&p, None)] {
                match r {
                    Err(PceError::Malformed { section, .. }) => {
                        assert_eq!(&section[..1], &name[..1], "{name}: {section}")
                    }
                    other => panic!("{name}: {:?}", other.err()),
                }
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn fresh_mats() -> [Matrix; 3] {
        std::array::from_fn(|_| Matrix {
            block_ptr: Buf::Owned(vec![]),
            row_len: Buf::Owned(vec![]),
            long_row: Buf::Owned(vec![]),
            long_len: Buf::Owned(vec![]),
            cols: Buf::Owned(vec![]),
            codes: Codes::U8(Buf::Owned(vec![])),
        })
    }

    fn fresh_dens() -> Densities {
        let d = || Density {
            words: Buf::Owned(vec![]),
            n_bits: 0,
        };
        Densities {
            a_input: d(),
            a_aux: d(),
            b_input: d(),
            b_aux: d(),
        }
    }

    #[test]
    fn bad_circuit_ids_are_refused() {
        for id in ["", ".hidden", "a/b", "../x", "sp ace"] {
            assert!(
                matches!(file_name_for(id), Err(PceError::BadKey { .. })),
                "{id:?}"
            );
        }
        assert_eq!(
            file_name_for("porep-32g_v1.2").unwrap(),
            PathBuf::from("porep-32g_v1.2.pce")
        );
    }
}
