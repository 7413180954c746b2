//! circom's `.wtns` (version 2).
//!
//! Layout: magic `wtns`, version u32 = 2, section count u32, then sections (type u32,
//! size u64, content). Header (type 1): field size u32 (32), prime (32 bytes), n_witness
//! u32. Values (type 2): n_witness field elements. Little-endian, canonical.

use bls12_381::Scalar;

use super::reader::{self, put_field, put_section};
use super::{CircomError, FileKind};

const KIND: FileKind = FileKind::Wtns;
const MAGIC: &str = "wtns";
const VERSION: u32 = 2;

/// Parses a whole `.wtns` file into its values (wire 0 first).
pub fn parse_wtns(bytes: &[u8]) -> Result<Vec<Scalar>, CircomError> {
    let (file, entries) = reader::sections(KIND, bytes, MAGIC, VERSION)?;
    let header = reader::require(KIND, &entries, 1, "header")?;
    let values = reader::require(KIND, &entries, 2, "values")?;
    let mut h = file.sub(header.start, header.len);
    reader::field(&mut h, KIND)?;
    let n_witness = h.u32("witness count")?;
    if h.remaining() != 0 {
        return Err(CircomError::SectionSize {
            kind: KIND,
            section: "header",
            offset: header.start as u64,
            declared_bytes: header.len as u64,
            expected_bytes: h.pos() as u64,
        });
    }
    let expected = u64::from(n_witness) * 32;
    if values.len as u64 != expected {
        return Err(CircomError::SectionSize {
            kind: KIND,
            section: "values",
            offset: values.start as u64,
            declared_bytes: values.len as u64,
            expected_bytes: expected,
        });
    }
    let mut v = file.sub(values.start, values.len);
    let mut out = Vec::with_capacity(n_witness as usize);
    for i in 0..n_witness {
        out.push(v.scalar(|| format!("witness value {i}"))?);
    }
    Ok(out)
}

/// The `.wtns` encoding of `values`.
pub fn wtns_bytes(values: &[Scalar]) -> Vec<u8> {
    let mut header = Vec::new();
    put_field(&mut header);
    header.extend_from_slice(&(values.len() as u32).to_le_bytes());
    let data: Vec<u8> = values.iter().flat_map(|v| v.to_bytes()).collect();
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC.as_bytes());
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&2u32.to_le_bytes());
    put_section(&mut out, 1, &header);
    put_section(&mut out, 2, &data);
    out
}
