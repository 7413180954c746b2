//! The crate's one error type and the small enums that give its variants context.

use std::fmt;

/// Which field element of a value an error refers to.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Coordinate {
    /// A standalone field element (no point around it).
    Element,
    /// The `c0` half of a standalone Fp2 element.
    C0,
    /// The `c1` half of a standalone Fp2 element.
    C1,
    /// The x coordinate of a G1 point.
    X,
    /// The y coordinate of a G1 point.
    Y,
    /// `x.c0` of a G2 point.
    XC0,
    /// `x.c1` of a G2 point.
    XC1,
    /// `y.c0` of a G2 point.
    YC0,
    /// `y.c1` of a G2 point.
    YC1,
}

impl fmt::Display for Coordinate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Coordinate::Element => "field element",
            Coordinate::C0 => "c0",
            Coordinate::C1 => "c1",
            Coordinate::X => "x",
            Coordinate::Y => "y",
            Coordinate::XC0 => "x.c0",
            Coordinate::XC1 => "x.c1",
            Coordinate::YC0 => "y.c0",
            Coordinate::YC1 => "y.c1",
        })
    }
}

/// The group a point error refers to.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Group {
    /// G1 (over Fp, 96-byte uncompressed encoding).
    G1,
    /// G2 (over Fp2, 192-byte uncompressed encoding).
    G2,
}

impl fmt::Display for Group {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Group::G1 => "g1",
            Group::G2 => "g2",
        })
    }
}

/// Formats little-endian limbs as one big-endian hex number (only on the error path).
pub(crate) fn hex_limbs(limbs: &[u64]) -> String {
    let mut s = String::from("0x");
    for l in limbs.iter().rev() {
        s.push_str(&format!("{l:016x}"));
    }
    s
}

/// Everything that can go wrong converting, parsing or checking a representation.
///
/// Values that are out of range carry the offending number (canonical or Montgomery
/// limbs, little-endian) so the message shows what was found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReprError {
    /// A canonical (non-Montgomery) Fp value was not below p.
    #[error("{coordinate}: value {} is not below the base field modulus p", hex_limbs(.found))]
    FpNotCanonical {
        /// Which element of the value.
        coordinate: Coordinate,
        /// The canonical value found (little-endian limbs, flag bits already removed).
        found: [u64; 6],
    },
    /// A canonical (non-Montgomery) Fr value was not below r.
    #[error("scalar value {} is not below the scalar field modulus r", hex_limbs(.found))]
    FrNotCanonical {
        /// The canonical value found (little-endian limbs).
        found: [u64; 4],
    },
    /// An `FpRepr` held Montgomery limbs >= p (e.g. read back from unchecked memory).
    #[error("{coordinate}: montgomery limbs {} are not reduced below p", hex_limbs(.limbs))]
    FpNotReduced {
        /// Which element of the value.
        coordinate: Coordinate,
        /// The Montgomery limbs found.
        limbs: [u64; 6],
    },
    /// An `FrRepr` held Montgomery limbs >= r.
    #[error("scalar montgomery limbs {} are not reduced below r", hex_limbs(.limbs))]
    FrNotReduced {
        /// The Montgomery limbs found.
        limbs: [u64; 4],
    },
    /// The compression flag (0x80) was set where an uncompressed point was expected.
    #[error("{group} point: compression flag set (first byte {first_byte:#04x}), expected an uncompressed point")]
    CompressedFlag {
        /// The group being parsed.
        group: Group,
        /// The first byte of the encoding.
        first_byte: u8,
    },
    /// The sort flag (0x20) was set on an uncompressed point.
    #[error(
        "{group} point: sort flag set on an uncompressed point (first byte {first_byte:#04x})"
    )]
    SortFlag {
        /// The group being parsed.
        group: Group,
        /// The first byte of the encoding.
        first_byte: u8,
    },
    /// The infinity flag (0x40) was set but the rest of the encoding was not zero.
    #[error(
        "{group} point: infinity flag set but byte {offset} is {byte:#04x}, expected all zero"
    )]
    InfinityWithPayload {
        /// The group being parsed.
        group: Group,
        /// Offset of the first non-zero byte (flag bits of byte 0 excluded).
        offset: usize,
        /// The value of that byte.
        byte: u8,
    },
    /// All coordinates zero without the infinity flag: (0, 0) is on neither curve and
    /// would otherwise be indistinguishable from the all-zero infinity representation.
    #[error("{group} point: coordinates are all zero but the infinity flag is not set")]
    ZeroWithoutInfinityFlag {
        /// The group being parsed.
        group: Group,
    },
    /// The point does not satisfy the curve equation.
    #[error("{group} point is not on the curve")]
    NotOnCurve {
        /// The group being checked.
        group: Group,
    },
    /// The point is on the curve but not in the prime-order subgroup.
    #[error("{group} point is on the curve but not in the prime-order subgroup")]
    NotInSubgroup {
        /// The group being checked.
        group: Group,
    },
    /// A slice helper got a byte slice whose length does not match the output slice.
    #[error("{group} slice: {found_bytes} bytes given for {n_points} points, expected {expected_bytes} bytes")]
    SliceLength {
        /// The group being parsed or written.
        group: Group,
        /// Number of points in the point slice.
        n_points: usize,
        /// Bytes the point slice needs (`n_points * encoded size`).
        expected_bytes: usize,
        /// Bytes actually given.
        found_bytes: usize,
    },
}

impl ReprError {
    /// Re-labels the coordinate of a field-element error (used when an element is part
    /// of a point or an Fp2 value).
    pub(crate) fn at(self, c: Coordinate) -> Self {
        match self {
            ReprError::FpNotCanonical { found, .. } => ReprError::FpNotCanonical {
                coordinate: c,
                found,
            },
            ReprError::FpNotReduced { limbs, .. } => ReprError::FpNotReduced {
                coordinate: c,
                limbs,
            },
            other => other,
        }
    }
}
