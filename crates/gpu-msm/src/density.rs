//! Which bases a sparse query uses.

use crate::MsmError;

/// One bit per scalar: set when the query has a base for that scalar.
///
/// This is the shape of Groth16's A and B queries: the parameters hold a base only for
/// the variables that occur in some constraint's A (or B) linear combination, while the
/// prover's assignment has every variable. With a mask of `len` bits, an MSM takes
/// `len` scalars and exactly `count_ones()` bases, and pairs the k-th set bit with the
/// k-th base (the same walk as bellman's `DensityTracker` with `multiexp`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DensityMask {
    /// Little-endian bit order inside each word; bits past `len` are zero.
    words: Vec<u64>,
    len: usize,
    n_ones: usize,
}

impl DensityMask {
    /// A mask of `len` bits, all clear.
    pub fn new(len: usize) -> Self {
        Self {
            words: vec![0; len.div_ceil(64)],
            len,
            n_ones: 0,
        }
    }

    /// A mask of `len` bits, all set (every scalar has a base).
    pub fn full(len: usize) -> Self {
        let mut words = vec![u64::MAX; len.div_ceil(64)];
        if len % 64 != 0 {
            if let Some(last) = words.last_mut() {
                *last = (1u64 << (len % 64)) - 1;
            }
        }
        Self {
            words,
            len,
            n_ones: len,
        }
    }

    /// Builds a mask from one `bool` per scalar, e.g. `(&tracker).iter()` for a
    /// bellman `DensityTracker` (through its `QueryDensity` impl).
    pub fn from_bools<I: IntoIterator<Item = bool>>(bits: I) -> Self {
        let mut mask = Self::new(0);
        for bit in bits {
            mask.push(bit);
        }
        mask
    }

    /// Builds a mask from packed words (bit i of the mask is bit `i % 64` of word `i / 64`).
    pub fn from_words(words: Vec<u64>, len: usize) -> Result<Self, MsmError> {
        let expected_words = len.div_ceil(64);
        if words.len() != expected_words {
            return Err(MsmError::DensityWordCount {
                len,
                expected_words,
                found_words: words.len(),
            });
        }
        if len % 64 != 0 {
            let last = words[expected_words - 1];
            if last >> (len % 64) != 0 {
                return Err(MsmError::DensityTrailingBits {
                    len,
                    word_index: expected_words - 1,
                });
            }
        }
        let n_ones = words.iter().map(|w| w.count_ones() as usize).sum();
        Ok(Self { words, len, n_ones })
    }

    /// Appends one bit.
    pub fn push(&mut self, bit: bool) {
        if self.len % 64 == 0 {
            self.words.push(0);
        }
        if bit {
            self.words[self.len / 64] |= 1 << (self.len % 64);
            self.n_ones += 1;
        }
        self.len += 1;
    }

    /// Sets bit `i`; `false` when `i` is out of range.
    pub fn set(&mut self, i: usize) -> bool {
        if i >= self.len {
            return false;
        }
        let word = &mut self.words[i / 64];
        let bit = 1u64 << (i % 64);
        if *word & bit == 0 {
            *word |= bit;
            self.n_ones += 1;
        }
        true
    }

    /// Bit `i`; `false` past the end.
    pub fn get(&self, i: usize) -> bool {
        i < self.len && self.words[i / 64] >> (i % 64) & 1 == 1
    }

    /// Number of bits (scalars).
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the mask has no bits.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of set bits (bases the query holds).
    pub fn count_ones(&self) -> usize {
        self.n_ones
    }

    /// The packed words (what a GPU backend uploads).
    pub fn words(&self) -> &[u64] {
        &self.words
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_get_count_agree() {
        let bits: Vec<bool> = (0..200).map(|i| i % 3 == 0 || i % 7 == 1).collect();
        let mask = DensityMask::from_bools(bits.iter().copied());
        assert_eq!(mask.len(), bits.len());
        assert_eq!(mask.count_ones(), bits.iter().filter(|b| **b).count());
        for (i, b) in bits.iter().enumerate() {
            assert_eq!(mask.get(i), *b, "bit {i}");
        }
        assert!(!mask.get(200));
        let again = DensityMask::from_words(mask.words().to_vec(), mask.len()).unwrap();
        assert_eq!(again, mask);
    }

    #[test]
    fn full_and_set() {
        for len in [0, 1, 63, 64, 65, 130] {
            let full = DensityMask::full(len);
            assert_eq!(full.count_ones(), len);
            assert_eq!(
                full,
                DensityMask::from_bools(std::iter::repeat_n(true, len))
            );
            let mut m = DensityMask::new(len);
            for i in (0..len).step_by(2) {
                assert!(m.set(i));
                assert!(m.set(i), "setting twice keeps the count");
            }
            assert_eq!(m.count_ones(), len.div_ceil(2));
            assert!(!m.set(len));
        }
    }

    #[test]
    fn from_words_rejects_bad_input() {
        assert_eq!(
            DensityMask::from_words(vec![0b1000], 3),
            Err(MsmError::DensityTrailingBits {
                len: 3,
                word_index: 0
            })
        );
        assert_eq!(
            DensityMask::from_words(vec![], 3),
            Err(MsmError::DensityWordCount {
                len: 3,
                expected_words: 1,
                found_words: 0
            })
        );
    }
}
