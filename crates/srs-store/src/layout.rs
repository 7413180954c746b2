//! The `.params` byte layout and the header walk that validates it before anything is allocated.
//!
//! Layout (as written by `groth16::Parameters::write`, bellman/bellperson and Filecoin alike):
//! `alpha_g1 beta_g1 beta_g2 gamma_g2 delta_g1 delta_g2` (uncompressed points), then six
//! count-prefixed sections: the verifying key's `ic` (big-endian u32 count,
//! G1 points), then `h`, `l`, `a`, `b_g1` (G1, 96 bytes each) and `b_g2` (G2, 192 bytes each),
//! each a big-endian u32 count followed by its points.

use std::fmt;

use crate::error::{Result, SrsError};

/// Bytes of an uncompressed G1 point.
pub const G1_BYTES: u64 = 96;
/// Bytes of an uncompressed G2 point.
pub const G2_BYTES: u64 = 192;
/// Bytes of the verifying key's fixed points (3 G1 + 3 G2), before the `ic` count.
pub const VK_FIXED_BYTES: u64 = 3 * G1_BYTES + 3 * G2_BYTES;
/// Bytes of a section count.
pub const COUNT_BYTES: u64 = 4;

/// A named part of the file, used in errors and reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Section {
    /// `vk.alpha_g1`.
    AlphaG1,
    /// `vk.beta_g1`.
    BetaG1,
    /// `vk.beta_g2`.
    BetaG2,
    /// `vk.gamma_g2`.
    GammaG2,
    /// `vk.delta_g1`.
    DeltaG1,
    /// `vk.delta_g2`.
    DeltaG2,
    /// `vk.ic`, one G1 point per public input.
    Ic,
    /// `h_query`.
    H,
    /// `l_query`.
    L,
    /// `a_query`.
    A,
    /// `b_g1_query`.
    BG1,
    /// `b_g2_query` (G2).
    BG2,
}

impl Section {
    /// The five bulk sections after the verifying key, in file order.
    pub const BULK: [Section; 5] = [
        Section::H,
        Section::L,
        Section::A,
        Section::BG1,
        Section::BG2,
    ];

    /// The field name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Section::AlphaG1 => "alpha_g1",
            Section::BetaG1 => "beta_g1",
            Section::BetaG2 => "beta_g2",
            Section::GammaG2 => "gamma_g2",
            Section::DeltaG1 => "delta_g1",
            Section::DeltaG2 => "delta_g2",
            Section::Ic => "ic",
            Section::H => "h_query",
            Section::L => "l_query",
            Section::A => "a_query",
            Section::BG1 => "b_g1_query",
            Section::BG2 => "b_g2_query",
        }
    }

    /// Whether the section holds G2 points.
    pub fn is_g2(self) -> bool {
        matches!(
            self,
            Section::BetaG2 | Section::GammaG2 | Section::DeltaG2 | Section::BG2
        )
    }

    /// Encoded bytes per point of this section.
    pub fn point_bytes(self) -> u64 {
        if self.is_g2() {
            G2_BYTES
        } else {
            G1_BYTES
        }
    }
}

impl fmt::Display for Section {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where one count-prefixed section lies in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SectionSpan {
    section: Section,
    count_offset: u64,
    n_points: u32,
}

impl SectionSpan {
    /// Which section.
    pub fn section(&self) -> Section {
        self.section
    }
    /// Offset of the u32 count.
    pub fn count_offset(&self) -> u64 {
        self.count_offset
    }
    /// Offset of the first point.
    pub fn data_offset(&self) -> u64 {
        self.count_offset + COUNT_BYTES
    }
    /// Number of points.
    pub fn n_points(&self) -> u32 {
        self.n_points
    }
    /// Encoded bytes of the points (without the count).
    pub fn data_bytes(&self) -> u64 {
        u64::from(self.n_points) * self.section.point_bytes()
    }
    /// Offset just past the last point.
    pub fn end_offset(&self) -> u64 {
        self.data_offset() + self.data_bytes()
    }
    /// Byte offset of point `index`.
    pub fn point_offset(&self, index: u64) -> u64 {
        self.data_offset() + index * self.section.point_bytes()
    }
}

/// Point counts a caller expects for its circuit; `None` fields are not checked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExpectedSizes {
    /// Public inputs (`ic`).
    pub n_ic: Option<u32>,
    /// `h_query` length.
    pub n_h: Option<u32>,
    /// `l_query` length.
    pub n_l: Option<u32>,
    /// `a_query` length.
    pub n_a: Option<u32>,
    /// `b_g1_query` length.
    pub n_b_g1: Option<u32>,
    /// `b_g2_query` length.
    pub n_b_g2: Option<u32>,
}

/// The validated shape of a parameter file: every count, and the proof that the counts
/// account for every byte of the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamsLayout {
    file_bytes: u64,
    ic: SectionSpan,
    bulk: [SectionSpan; 5],
}

/// Offsets of the verifying key's fixed points, in file order.
pub const VK_FIXED: [(Section, u64); 6] = [
    (Section::AlphaG1, 0),
    (Section::BetaG1, G1_BYTES),
    (Section::BetaG2, 2 * G1_BYTES),
    (Section::GammaG2, 2 * G1_BYTES + G2_BYTES),
    (Section::DeltaG1, 2 * G1_BYTES + 2 * G2_BYTES),
    (Section::DeltaG2, 3 * G1_BYTES + 2 * G2_BYTES),
];

impl ParamsLayout {
    /// Walks the headers of a file whose bytes are given by `bytes` (a mapping or a buffer
    /// holding at least the headers; its length is the file length). Touches only the six
    /// u32 counts, so on a mapping it faults in at most six pages.
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        Self::walk(bytes.len() as u64, |offset| {
            let start = usize::try_from(offset).ok()?;
            let word = bytes.get(start..start.checked_add(4)?)?;
            Some(u32::from_be_bytes([word[0], word[1], word[2], word[3]]))
        })
    }

    /// Walks the headers given the file length and a reader of big-endian u32 counts
    /// (returns `None` when it cannot read at that offset). All arithmetic is checked.
    pub fn walk(file_bytes: u64, mut read_count: impl FnMut(u64) -> Option<u32>) -> Result<Self> {
        let mut offset = 0u64;
        if let Some((section, at)) = VK_FIXED
            .iter()
            .find(|(s, at)| at + s.point_bytes() > file_bytes)
        {
            return Err(SrsError::HeaderTruncated {
                section: *section,
                offset: *at,
                needed_bytes: section.point_bytes(),
                file_bytes,
            });
        }
        offset += VK_FIXED_BYTES;
        let mut span = |section: Section, offset: &mut u64| -> Result<SectionSpan> {
            let count_offset = *offset;
            let header_end =
                count_offset
                    .checked_add(COUNT_BYTES)
                    .ok_or(SrsError::CountOverflow {
                        section,
                        offset: count_offset,
                        n_points: 0,
                    })?;
            if header_end > file_bytes {
                return Err(SrsError::HeaderTruncated {
                    section,
                    offset: count_offset,
                    needed_bytes: COUNT_BYTES,
                    file_bytes,
                });
            }
            let n_points = read_count(count_offset).ok_or(SrsError::HeaderTruncated {
                section,
                offset: count_offset,
                needed_bytes: COUNT_BYTES,
                file_bytes,
            })?;
            let overflow = SrsError::CountOverflow {
                section,
                offset: count_offset,
                n_points,
            };
            let needed_bytes = u64::from(n_points)
                .checked_mul(section.point_bytes())
                .ok_or(overflow)?;
            let end = header_end
                .checked_add(needed_bytes)
                .ok_or(SrsError::CountOverflow {
                    section,
                    offset: count_offset,
                    n_points,
                })?;
            if end > file_bytes {
                return Err(SrsError::SectionTruncated {
                    section,
                    offset: header_end,
                    n_points,
                    needed_bytes,
                    available_bytes: file_bytes - header_end,
                });
            }
            // The loader indexes host memory with usize; refuse what cannot be addressed.
            if usize::try_from(needed_bytes).is_err() {
                return Err(SrsError::CountOverflow {
                    section,
                    offset: count_offset,
                    n_points,
                });
            }
            *offset = end;
            Ok(SectionSpan {
                section,
                count_offset,
                n_points,
            })
        };
        let ic = span(Section::Ic, &mut offset)?;
        let mut bulk = [ic; 5];
        for (slot, section) in bulk.iter_mut().zip(Section::BULK) {
            *slot = span(section, &mut offset)?;
        }
        if offset != file_bytes {
            return Err(SrsError::TrailingBytes {
                expected_bytes: offset,
                file_bytes,
            });
        }
        Ok(ParamsLayout {
            file_bytes,
            ic,
            bulk,
        })
    }

    /// The layout a `.params` file with these counts has (`ic`, then `h`, `l`, `a`,
    /// `b_g1`, `b_g2`): what parameters read from another format (a snarkjs zkey) would
    /// take written as groth16 writes them. Offsets are those of that file.
    pub(crate) fn from_counts(n_ic: u32, bulk: [u32; 5]) -> ParamsLayout {
        let mut offset = VK_FIXED_BYTES;
        let mut span = |section: Section, n_points: u32| {
            let s = SectionSpan {
                section,
                count_offset: offset,
                n_points,
            };
            offset = s.end_offset();
            s
        };
        let ic = span(Section::Ic, n_ic);
        let mut spans = [ic; 5];
        for ((slot, section), n) in spans.iter_mut().zip(Section::BULK).zip(bulk) {
            *slot = span(section, n);
        }
        ParamsLayout {
            file_bytes: offset,
            ic,
            bulk: spans,
        }
    }

    /// Total length of the file.
    pub fn file_bytes(&self) -> u64 {
        self.file_bytes
    }

    /// The verifying key's `ic` span.
    pub fn ic(&self) -> SectionSpan {
        self.ic
    }

    /// Span of a count-prefixed section (`Ic`, `H`, `L`, `A`, `BG1`, `BG2`); `None` for the
    /// verifying key's fixed points.
    pub fn span(&self, section: Section) -> Option<SectionSpan> {
        match section {
            Section::Ic => Some(self.ic),
            Section::H => Some(self.bulk[0]),
            Section::L => Some(self.bulk[1]),
            Section::A => Some(self.bulk[2]),
            Section::BG1 => Some(self.bulk[3]),
            Section::BG2 => Some(self.bulk[4]),
            _ => None,
        }
    }

    /// The five bulk spans in file order.
    pub fn bulk(&self) -> [SectionSpan; 5] {
        self.bulk
    }

    /// Bytes of the verifying key in the file (fixed points, count, `ic`).
    pub fn vk_bytes(&self) -> u64 {
        self.ic.end_offset()
    }

    /// Bytes the loaded bulk sections occupy in the `bls-repr` layout (equal to their encoded
    /// size: 96 bytes per G1, 192 per G2).
    pub fn loaded_bulk_bytes(&self) -> u64 {
        self.bulk.iter().map(SectionSpan::data_bytes).sum()
    }

    /// Checks the counts against what the caller expects.
    pub fn check_expected(&self, expected: &ExpectedSizes) -> Result<()> {
        let pairs = [
            (Section::Ic, expected.n_ic),
            (Section::H, expected.n_h),
            (Section::L, expected.n_l),
            (Section::A, expected.n_a),
            (Section::BG1, expected.n_b_g1),
            (Section::BG2, expected.n_b_g2),
        ];
        for (section, want) in pairs {
            let found = self.span(section).map_or(0, |s| s.n_points());
            if let Some(expected) = want {
                if expected != found {
                    return Err(SrsError::ExpectedSizeMismatch {
                        section,
                        expected,
                        found,
                    });
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds a file image with the given counts and zeroed point bytes.
    fn image(counts: [u32; 6]) -> Vec<u8> {
        let mut v = vec![0u8; VK_FIXED_BYTES as usize];
        let sections = [
            Section::Ic,
            Section::H,
            Section::L,
            Section::A,
            Section::BG1,
            Section::BG2,
        ];
        for (n, s) in counts.iter().zip(sections) {
            v.extend_from_slice(&n.to_be_bytes());
            v.resize(v.len() + (*n as usize) * s.point_bytes() as usize, 0);
        }
        v
    }

    #[test]
    fn walk_accepts_exact_length_and_reports_spans() {
        let counts = [2, 3, 1, 4, 5, 6];
        let bytes = image(counts);
        let layout = ParamsLayout::parse(&bytes).unwrap();
        assert_eq!(layout.file_bytes(), bytes.len() as u64);
        assert_eq!(layout.ic().n_points(), 2);
        assert_eq!(layout.ic().data_offset(), VK_FIXED_BYTES + 4);
        let bg2 = layout.span(Section::BG2).unwrap();
        assert_eq!(bg2.n_points(), 6);
        assert_eq!(bg2.end_offset(), bytes.len() as u64);
        assert_eq!(bg2.data_bytes(), 6 * 192);
        assert_eq!(layout.loaded_bulk_bytes(), (3 + 1 + 4 + 5) * 96 + 6 * 192);
    }

    #[test]
    fn g2_section_uses_192_bytes_per_point() {
        // A file sized as if b_g2 were G1 points (the known loader bug) must be rejected.
        let mut bytes = image([0, 0, 0, 0, 0, 0]);
        let n = bytes.len();
        bytes[n - 4..].copy_from_slice(&2u32.to_be_bytes());
        bytes.resize(n + 2 * 96, 0);
        assert!(matches!(
            ParamsLayout::parse(&bytes),
            Err(SrsError::SectionTruncated {
                section: Section::BG2,
                needed_bytes: 384,
                ..
            })
        ));
    }

    #[test]
    fn every_truncation_is_a_typed_error() {
        let bytes = image([1, 2, 2, 2, 2, 2]);
        for len in 0..bytes.len() {
            let err = ParamsLayout::parse(&bytes[..len]).unwrap_err();
            assert!(
                matches!(
                    err,
                    SrsError::HeaderTruncated { .. } | SrsError::SectionTruncated { .. }
                ),
                "len {len}: {err}"
            );
        }
    }

    #[test]
    fn trailing_bytes_and_huge_counts() {
        let mut bytes = image([1, 1, 1, 1, 1, 1]);
        bytes.push(0);
        assert!(matches!(
            ParamsLayout::parse(&bytes),
            Err(SrsError::TrailingBytes { .. })
        ));
        let mut bytes = image([0, 0, 0, 0, 0, 0]);
        let at = VK_FIXED_BYTES as usize + 4; // h count
        bytes[at..at + 4].copy_from_slice(&u32::MAX.to_be_bytes());
        let err = ParamsLayout::parse(&bytes).unwrap_err();
        assert!(
            matches!(
                err,
                SrsError::SectionTruncated {
                    section: Section::H,
                    n_points: u32::MAX,
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn expected_sizes() {
        let layout = ParamsLayout::parse(&image([1, 2, 3, 4, 5, 6])).unwrap();
        assert!(layout
            .check_expected(&ExpectedSizes {
                n_l: Some(3),
                ..Default::default()
            })
            .is_ok());
        let err = layout.check_expected(&ExpectedSizes {
            n_b_g2: Some(7),
            ..Default::default()
        });
        assert!(matches!(
            err,
            Err(SrsError::ExpectedSizeMismatch {
                section: Section::BG2,
                expected: 7,
                found: 6
            })
        ));
    }
}
