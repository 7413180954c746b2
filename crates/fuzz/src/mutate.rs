//! Mutations of a seed file, guided by what its target says about its layout.
//!
//! One input is a seed with 1 to 4 stacked mutations: bit flips, byte overwrites with
//! interesting values, truncation at a section boundary (or anywhere), junk extension,
//! huge or off-by-one values in count fields, duplicated and deleted chunks, the identity
//! point or another point's bytes written over a point, a compressed point's sign flipped,
//! and dictionary tokens (text formats). Offsets come from the seed's [`Layout`] and go
//! stale as a mutation moves bytes; that is fine, the next one still lands somewhere.

use groth16_prover::testing::SplitMix;

/// An integer field of a seed: a count or a size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntField {
    /// Byte offset.
    pub offset: usize,
    /// 4 or 8 bytes.
    pub width: usize,
    /// Big-endian (parameter files) or little-endian (everything else).
    pub big_endian: bool,
}

/// How a point slot is encoded (what its identity looks like).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PointEncoding {
    /// Uncompressed (`.params`): infinity is `0x40` then zeros.
    Uncompressed,
    /// Compressed (proofs): infinity is `0xc0` then zeros; `0x20` is the sign of y.
    Compressed,
}

/// A point encoding inside a seed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PointSlot {
    /// Byte offset.
    pub offset: usize,
    /// 48, 96 or 192 bytes.
    pub len: usize,
    /// Its encoding.
    pub encoding: PointEncoding,
}

/// What a target knows about a seed's structure.
#[derive(Clone, Debug, Default)]
pub struct Layout {
    /// Offsets where sections and fields start or end (truncations and splices cut here).
    pub boundaries: Vec<usize>,
    /// Counts and sizes.
    pub counts: Vec<IntField>,
    /// Point encodings.
    pub points: Vec<PointSlot>,
    /// Tokens worth inserting (text formats).
    pub dictionary: Vec<Vec<u8>>,
}

/// A valid input a target mutates.
#[derive(Clone, Debug)]
pub struct Seed {
    /// Short name (`cubic`, `wide`, ...).
    pub name: &'static str,
    /// The bytes.
    pub bytes: Vec<u8>,
    /// Its structure.
    pub layout: Layout,
}

/// The mutation kinds, for statistics and tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mutation {
    /// One bit flipped.
    BitFlip,
    /// A few bytes overwritten with random or interesting values.
    Overwrite,
    /// Cut at a boundary (give or take a byte) or anywhere.
    Truncate,
    /// Junk, zeros or a copy of a chunk appended.
    Extend,
    /// A count or size field set to a huge, zero, off-by-one or random value.
    HugeCount,
    /// A chunk between boundaries copied in again at a boundary.
    Duplicate,
    /// A chunk between boundaries removed.
    Delete,
    /// A point replaced by the identity.
    Identity,
    /// A point replaced by another point of the seed (a valid point in the wrong place).
    CopyPoint,
    /// The y-sign flag of a compressed point flipped (the point negated).
    Negate,
    /// A dictionary token written over or inserted at a boundary.
    Token,
}

const ALL: [Mutation; 11] = [
    Mutation::BitFlip,
    Mutation::Overwrite,
    Mutation::Truncate,
    Mutation::Extend,
    Mutation::HugeCount,
    Mutation::Duplicate,
    Mutation::Delete,
    Mutation::Identity,
    Mutation::CopyPoint,
    Mutation::Negate,
    Mutation::Token,
];

const INTERESTING_BYTES: [u8; 8] = [0x00, 0xff, 0x7f, 0x80, 0x40, 0xc0, 0x20, 0x01];

/// Applies 1 to 4 mutations to a copy of `seed` (the first one is `first` when given).
pub fn mutate(seed: &Seed, rng: &mut SplitMix, first: Option<Mutation>) -> Vec<u8> {
    let mut b = seed.bytes.clone();
    let n = 1 + rng.below(4);
    for k in 0..n {
        let m = match (k, first) {
            (0, Some(m)) => m,
            _ => pick(seed, rng),
        };
        apply(m, &mut b, &seed.layout, rng);
    }
    b
}

/// A mutation this seed can take (point mutations need points, tokens a dictionary).
fn pick(seed: &Seed, rng: &mut SplitMix) -> Mutation {
    loop {
        let m = ALL[rng.below(ALL.len())];
        let l = &seed.layout;
        let ok = match m {
            Mutation::HugeCount => !l.counts.is_empty(),
            Mutation::Identity | Mutation::CopyPoint => !l.points.is_empty(),
            Mutation::Negate => l
                .points
                .iter()
                .any(|p| p.encoding == PointEncoding::Compressed),
            Mutation::Token => !l.dictionary.is_empty(),
            _ => true,
        };
        if ok {
            return m;
        }
    }
}

fn boundary(l: &Layout, rng: &mut SplitMix, len: usize) -> usize {
    if l.boundaries.is_empty() || rng.below(4) == 0 {
        rng.below(len + 1)
    } else {
        l.boundaries[rng.below(l.boundaries.len())].min(len)
    }
}

/// Applies one mutation in place.
pub fn apply(m: Mutation, b: &mut Vec<u8>, l: &Layout, rng: &mut SplitMix) {
    let len = b.len();
    match m {
        Mutation::BitFlip => {
            if len > 0 {
                let i = rng.below(len);
                b[i] ^= 1 << rng.below(8);
            }
        }
        Mutation::Overwrite => {
            if len > 0 {
                let at = rng.below(len);
                let n = (1 + rng.below(8)).min(len - at);
                for x in &mut b[at..at + n] {
                    *x = if rng.below(2) == 0 {
                        INTERESTING_BYTES[rng.below(INTERESTING_BYTES.len())]
                    } else {
                        rng.next_u64() as u8
                    };
                }
            }
        }
        Mutation::Truncate => {
            let at = boundary(l, rng, len);
            let at = match rng.below(4) {
                0 => at.saturating_sub(1),
                1 => (at + 1).min(len),
                _ => at,
            };
            b.truncate(at);
        }
        Mutation::Extend => {
            let max = if rng.below(8) == 0 { 65536 } else { 512 };
            let n = 1 + rng.below(max);
            match rng.below(3) {
                0 => b.extend((0..n).map(|_| rng.next_u64() as u8)),
                1 => b.resize(len + n, 0),
                _ => {
                    let start = rng.below(len + 1);
                    let end = (start + n).min(len);
                    let chunk = b[start..end].to_vec();
                    b.extend_from_slice(&chunk);
                }
            }
        }
        Mutation::HugeCount => {
            let f = l.counts[rng.below(l.counts.len())];
            if f.offset + f.width > len {
                return;
            }
            let old = read_int(b, f);
            let v: u64 = match rng.below(12) {
                0 => u64::MAX,
                1 => u64::from(u32::MAX),
                2 => u64::from(u32::MAX) - 1,
                3 => 1 << 31,
                4 => 1 << 24,
                5 => 0,
                6 => old.wrapping_add(1),
                7 => old.wrapping_sub(1),
                8 => old.wrapping_mul(2),
                9 => len as u64,
                10 => (len / f.width) as u64,
                _ => rng.next_u64(),
            };
            write_int(b, f, v);
        }
        Mutation::Duplicate => {
            let (start, end) = chunk(b, l, rng);
            let piece = b[start..end].to_vec();
            let at = boundary(l, rng, b.len());
            b.splice(at..at, piece);
        }
        Mutation::Delete => {
            let (start, end) = chunk(b, l, rng);
            b.drain(start..end);
        }
        Mutation::Identity => {
            let p = l.points[rng.below(l.points.len())];
            if p.offset + p.len <= len {
                b[p.offset..p.offset + p.len].fill(0);
                b[p.offset] = match p.encoding {
                    PointEncoding::Uncompressed => 0x40,
                    PointEncoding::Compressed => 0xc0,
                };
            }
        }
        Mutation::CopyPoint => {
            let to = l.points[rng.below(l.points.len())];
            // A source of the same size and encoding (there always is one: `to` itself).
            let same: Vec<&PointSlot> = l
                .points
                .iter()
                .filter(|p| p.len == to.len && p.encoding == to.encoding)
                .collect();
            let from = *same[rng.below(same.len())];
            if from.offset + from.len <= len && to.offset + to.len <= len {
                let piece = b[from.offset..from.offset + from.len].to_vec();
                b[to.offset..to.offset + to.len].copy_from_slice(&piece);
            }
        }
        Mutation::Negate => {
            let compressed: Vec<&PointSlot> = l
                .points
                .iter()
                .filter(|p| p.encoding == PointEncoding::Compressed)
                .collect();
            let p = compressed[rng.below(compressed.len())];
            if p.offset < len {
                b[p.offset] ^= 0x20;
            }
        }
        Mutation::Token => {
            let t = &l.dictionary[rng.below(l.dictionary.len())];
            let at = boundary(l, rng, len);
            if rng.below(2) == 0 {
                b.splice(at..at, t.iter().copied());
            } else {
                let end = (at + t.len()).min(len);
                b.splice(at..end, t.iter().copied());
            }
        }
    }
}

/// A chunk between two boundaries (or a random short range).
fn chunk(b: &[u8], l: &Layout, rng: &mut SplitMix) -> (usize, usize) {
    let len = b.len();
    let x = boundary(l, rng, len);
    let y = if rng.below(2) == 0 {
        boundary(l, rng, len)
    } else {
        (x + 1 + rng.below(256)).min(len)
    };
    (x.min(y), x.max(y))
}

fn read_int(b: &[u8], f: IntField) -> u64 {
    let s = &b[f.offset..f.offset + f.width];
    let mut w = [0u8; 8];
    if f.big_endian {
        w[8 - f.width..].copy_from_slice(s);
        u64::from_be_bytes(w)
    } else {
        w[..f.width].copy_from_slice(s);
        u64::from_le_bytes(w)
    }
}

fn write_int(b: &mut [u8], f: IntField, v: u64) {
    let s = &mut b[f.offset..f.offset + f.width];
    if f.big_endian {
        s.copy_from_slice(&v.to_be_bytes()[8 - f.width..]);
    } else {
        s.copy_from_slice(&v.to_le_bytes()[..f.width]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use groth16_prover::testing::test_seed;

    fn seed() -> Seed {
        let mut bytes = vec![0u8; 300];
        bytes[10..14].copy_from_slice(&7u32.to_be_bytes());
        for (i, x) in bytes.iter_mut().enumerate().skip(100) {
            *x = i as u8;
        }
        Seed {
            name: "test",
            bytes,
            layout: Layout {
                boundaries: vec![0, 10, 14, 100, 148, 196, 300],
                counts: vec![IntField {
                    offset: 10,
                    width: 4,
                    big_endian: true,
                }],
                points: vec![
                    PointSlot {
                        offset: 100,
                        len: 48,
                        encoding: PointEncoding::Compressed,
                    },
                    PointSlot {
                        offset: 148,
                        len: 48,
                        encoding: PointEncoding::Compressed,
                    },
                ],
                dictionary: vec![b"null".to_vec()],
            },
        }
    }

    #[test]
    fn every_mutation_changes_the_bytes_somewhere() {
        let mut rng = SplitMix::new(test_seed());
        let s = seed();
        for m in ALL {
            // Some draws are no-ops (a truncation at the end, a copy of a point onto
            // itself: half of CopyPoint's draws with this seed's two points); most are
            // not. 200 draws, so that at one in two fewer than 10 changes never happen
            // (with 50 it did about 3 runs in a million).
            let changed = (0..200)
                .filter(|_| {
                    let mut b = s.bytes.clone();
                    apply(m, &mut b, &s.layout, &mut rng);
                    b != s.bytes
                })
                .count();
            assert!(changed >= 10, "{m:?} changed only {changed} of 200 inputs");
        }
    }

    #[test]
    fn field_helpers_round_trip_both_endians() {
        let mut b = vec![0u8; 16];
        for (width, big_endian) in [(4, true), (4, false), (8, true), (8, false)] {
            let f = IntField {
                offset: 3,
                width,
                big_endian,
            };
            let v = if width == 4 {
                0x0102_0304
            } else {
                0x0102_0304_0506_0708
            };
            write_int(&mut b, f, v);
            assert_eq!(read_int(&b, f), v);
        }
        let f = IntField {
            offset: 0,
            width: 4,
            big_endian: true,
        };
        write_int(&mut b, f, 7);
        assert_eq!(&b[..4], &[0, 0, 0, 7]);
    }

    #[test]
    fn identity_and_negate_write_the_flags() {
        let mut rng = SplitMix::new(test_seed());
        let s = seed();
        let mut b = s.bytes.clone();
        apply(Mutation::Identity, &mut b, &s.layout, &mut rng);
        let at = [100, 148]
            .into_iter()
            .find(|&o| b[o] == 0xc0)
            .expect("one point is the identity");
        assert!(b[at + 1..at + 48].iter().all(|&x| x == 0));
        let mut b = s.bytes.clone();
        apply(Mutation::Negate, &mut b, &s.layout, &mut rng);
        let flipped: Vec<usize> = (0..b.len()).filter(|&i| b[i] != s.bytes[i]).collect();
        assert!(flipped == [100] || flipped == [148], "{flipped:?}");
        assert_eq!(b[flipped[0]] ^ s.bytes[flipped[0]], 0x20);
    }
}
