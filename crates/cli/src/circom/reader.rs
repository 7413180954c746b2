//! Bounds-checked little-endian reads and the section table shared by `.r1cs` and `.wtns`.

use bls12_381::Scalar;

use super::{CircomError, FileKind};
use crate::decimal::{le_bytes_to_decimal, BLS12_381_R_LE};

/// A cursor over one file's bytes; every read checks the bounds first.
pub(crate) struct Reader<'a> {
    kind: FileKind,
    bytes: &'a [u8],
    /// Absolute offset of `bytes[0]` in the file (for messages).
    base: u64,
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(kind: FileKind, bytes: &'a [u8]) -> Reader<'a> {
        Reader {
            kind,
            bytes,
            base: 0,
            pos: 0,
        }
    }

    /// A reader over `len` bytes of this one starting at its position (a section's
    /// content); the caller has checked that they exist.
    pub(crate) fn sub(&self, start: usize, len: usize) -> Reader<'a> {
        Reader {
            kind: self.kind,
            bytes: &self.bytes[start..start + len],
            base: self.base + start as u64,
            pos: 0,
        }
    }

    pub(crate) fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    pub(crate) fn take(
        &mut self,
        n: usize,
        what: impl FnOnce() -> String,
    ) -> Result<&'a [u8], CircomError> {
        if self.remaining() < n {
            return Err(CircomError::Truncated {
                kind: self.kind,
                what: what(),
                offset: self.offset(),
                needed_bytes: n as u64,
                available_bytes: self.remaining() as u64,
            });
        }
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub(crate) fn u32(&mut self, what: &str) -> Result<u32, CircomError> {
        let b = self.take(4, || what.to_string())?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn u64(&mut self, what: &str) -> Result<u64, CircomError> {
        let b = self.take(8, || what.to_string())?;
        let mut w = [0u8; 8];
        w.copy_from_slice(b);
        Ok(u64::from_le_bytes(w))
    }

    /// A canonical field element (32 bytes, little-endian, below r).
    pub(crate) fn scalar(&mut self, what: impl Fn() -> String) -> Result<Scalar, CircomError> {
        let offset = self.offset();
        let b = self.take(32, &what)?;
        let mut w = [0u8; 32];
        w.copy_from_slice(b);
        Option::from(Scalar::from_bytes(&w)).ok_or_else(|| CircomError::NonCanonical {
            kind: self.kind,
            what: what(),
            offset,
        })
    }
}

/// One entry of the section table.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SectionEntry {
    pub(crate) section_type: u32,
    /// Position of the content inside the file.
    pub(crate) start: usize,
    pub(crate) len: usize,
}

/// Checks magic and version, then walks `n_sections` section headers, checking that each
/// section fits in the file and that nothing follows the last one.
pub(crate) fn sections<'a>(
    kind: FileKind,
    bytes: &'a [u8],
    magic: &'static str,
    version: u32,
) -> Result<(Reader<'a>, Vec<SectionEntry>), CircomError> {
    let mut r = Reader::new(kind, bytes);
    let found = r
        .take(4, || "magic".into())
        .map_err(|_| CircomError::BadMagic {
            kind,
            expected: magic,
            found: super::error::magic_text(bytes),
        })?;
    if found != magic.as_bytes() {
        return Err(CircomError::BadMagic {
            kind,
            expected: magic,
            found: super::error::magic_text(found),
        });
    }
    let found_version = r.u32("format version")?;
    if found_version != version {
        return Err(CircomError::UnsupportedVersion {
            kind,
            expected: version,
            found: found_version,
        });
    }
    let n_sections = r.u32("section count")?;
    let mut entries = Vec::new();
    for i in 0..n_sections {
        let section_type = r.u32(&format!("header of section {i}"))?;
        let declared = r.u64(&format!("size of section {i} (type {section_type})"))?;
        let start = r.pos();
        let len = usize::try_from(declared)
            .ok()
            .filter(|&l| l <= r.remaining())
            .ok_or_else(|| CircomError::Truncated {
                kind,
                what: format!("section {i} (type {section_type})"),
                offset: r.offset(),
                needed_bytes: declared,
                available_bytes: r.remaining() as u64,
            })?;
        r.take(len, String::new)?;
        entries.push(SectionEntry {
            section_type,
            start,
            len,
        });
    }
    if r.remaining() != 0 {
        return Err(CircomError::TrailingBytes {
            kind,
            offset: r.offset(),
            extra_bytes: r.remaining() as u64,
        });
    }
    Ok((r, entries))
}

/// The one section of a type; duplicates are an error, absence is `None`.
pub(crate) fn find(
    kind: FileKind,
    entries: &[SectionEntry],
    section_type: u32,
    name: &'static str,
) -> Result<Option<SectionEntry>, CircomError> {
    let mut it = entries.iter().filter(|e| e.section_type == section_type);
    let first = it.next().copied();
    if let Some(second) = it.next() {
        return Err(CircomError::DuplicateSection {
            kind,
            section: name,
            section_type,
            offset: second.start as u64,
        });
    }
    Ok(first)
}

/// Like [`find`], but absence is [`CircomError::MissingSection`].
pub(crate) fn require(
    kind: FileKind,
    entries: &[SectionEntry],
    section_type: u32,
    name: &'static str,
) -> Result<SectionEntry, CircomError> {
    find(kind, entries, section_type, name)?.ok_or(CircomError::MissingSection {
        kind,
        section: name,
        section_type,
    })
}

/// Reads the field size and prime of a header; both must be BLS12-381's scalar field.
pub(crate) fn field(r: &mut Reader<'_>, kind: FileKind) -> Result<(), CircomError> {
    let n8 = r.u32("field element size")?;
    if n8 != 32 {
        // Name the prime when it is there: it tells the user which --prime was used.
        let prime = usize::try_from(n8)
            .ok()
            .filter(|&n| n <= r.remaining())
            .map_or_else(
                || "unreadable".to_string(),
                |n| le_bytes_to_decimal(&r.bytes[r.pos..r.pos + n]),
            );
        return Err(CircomError::FieldSize {
            kind,
            found: n8,
            prime,
        });
    }
    let prime = r.take(32, || "prime".into())?;
    if prime != BLS12_381_R_LE {
        return Err(CircomError::WrongPrime {
            kind,
            found: le_bytes_to_decimal(prime),
            expected: le_bytes_to_decimal(&BLS12_381_R_LE),
        });
    }
    Ok(())
}

/// Little-endian writer helpers for the encoders (fixtures, tests).
pub(crate) fn put_section(out: &mut Vec<u8>, section_type: u32, content: &[u8]) {
    out.extend_from_slice(&section_type.to_le_bytes());
    out.extend_from_slice(&(content.len() as u64).to_le_bytes());
    out.extend_from_slice(content);
}

pub(crate) fn put_field(out: &mut Vec<u8>) {
    out.extend_from_slice(&32u32.to_le_bytes());
    out.extend_from_slice(&BLS12_381_R_LE);
}
