//! Witness values of a PoRep challenge's pieces without the gadgets.
//!
//! filecoin-proofs' `create_label_circuit` hashes a node's 37 parents with bellperson's
//! SHA-256 gadget: ~27,000 allocations a compression block, 20 blocks a label, 11 labels a
//! challenge; the data leaf's inclusion in comm_d's tree is 2 more blocks a level, 60 at
//! 32 GiB. Through the gadget each allocation costs a closure, a linear combination and
//! `MultiEq`'s clones of ever longer combinations (157 ms a label on a 2-core VM). Here the
//! same allocations are made on plain bits (3.4 ms a label): each value the gadget would
//! allocate is written, in the gadget's order, as 0 or 1 (packed numbers where the circuit
//! packs), and nothing else is built. The Poseidon side (the parents' columns, their
//! inclusions in comm_c's tree, the tail's inclusions) goes the same way: neptune's
//! circuit allocates ≈ 500 numbers a hash through linear combinations (≈ 1.2 ms a hash
//! here); [`poseidon`] computes the same numbers with neptune's own constants.
//!
//! The order is the gadgets' exactly because their decisions are mirrored: a bit is a
//! constant, a variable or a variable's negation ([`Bit`]), and every operation allocates
//! in the same cases as bellpepper's `Boolean` (`xor`, `and`, `sha256_ch`, `sha256_maj`),
//! bellperson's `UInt32::addmany` and `sha256_compression_function` (deferred sums
//! included), neptune's S-boxes (an input allocated when it is a linear combination) and
//! storage-proofs-core's `insert` picks. Callers check the count against the piece's
//! place, and the PoRep witness compares each piece kind against the gadgets on the first
//! challenge of a circuit before using it (`porep::challenges_into`); the tests compare
//! them on random and extreme values.

use bls12_381::Scalar;
use ff::Field as _;

/// A bit as bellpepper's `Boolean` sees it: a constant, an allocated variable (its value),
/// or the negation of one (the variable's value, not the bit's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Bit {
    Const(bool),
    Is(bool),
    Not(bool),
}

impl Bit {
    fn value(self) -> bool {
        match self {
            Bit::Const(b) | Bit::Is(b) => b,
            Bit::Not(b) => !b,
        }
    }

    fn not(self) -> Bit {
        match self {
            Bit::Const(b) => Bit::Const(!b),
            Bit::Is(b) => Bit::Not(b),
            Bit::Not(b) => Bit::Is(b),
        }
    }

    fn is_const(self) -> bool {
        matches!(self, Bit::Const(_))
    }
}

/// Where the allocations go: a piece's place in the witness. Allocations past its end
/// are counted, not written, so the caller can report the count it found.
struct Out<'a> {
    aux: &'a mut [Scalar],
    at: usize,
}

impl Out<'_> {
    #[inline]
    fn value(&mut self, v: Scalar) {
        if let Some(slot) = self.aux.get_mut(self.at) {
            *slot = v;
        }
        self.at += 1;
    }

    /// An allocated boolean variable holding `v`.
    #[inline]
    fn var(&mut self, v: bool) -> bool {
        self.value(if v { Scalar::ONE } else { Scalar::ZERO });
        v
    }

    /// `Boolean::xor`.
    #[inline]
    fn xor(&mut self, a: Bit, b: Bit) -> Bit {
        use Bit::*;
        match (a, b) {
            (Const(false), x) | (x, Const(false)) => x,
            (Const(true), x) | (x, Const(true)) => x.not(),
            // `xor(is, not.not()).not()`: the variable holds the variables' xor.
            (Is(u), Not(v)) | (Not(v), Is(u)) => Not(self.var(u ^ v)),
            (Is(u), Is(v)) | (Not(u), Not(v)) => Is(self.var(u ^ v)),
        }
    }

    /// `Boolean::and` (its `and_not` and `nor` cases allocate the bits' and as well).
    #[inline]
    fn and(&mut self, a: Bit, b: Bit) -> Bit {
        use Bit::*;
        match (a, b) {
            (Const(false), _) | (_, Const(false)) => Const(false),
            (Const(true), x) | (x, Const(true)) => x,
            _ => Is(self.var(a.value() & b.value())),
        }
    }

    /// `Boolean::sha256_ch`, its cases in its order.
    fn ch(&mut self, a: Bit, b: Bit, c: Bit) -> Bit {
        use Bit::*;
        let v = (a.value() & b.value()) ^ (!a.value() & c.value());
        match (a, b, c) {
            (Const(_), Const(_), Const(_)) => Const(v),
            (Const(false), _, c) => c,
            (a, Const(false), c) => self.and(a.not(), c),
            (a, b, Const(false)) => self.and(a, b),
            (a, b, Const(true)) => self.and(a, b.not()).not(),
            (a, Const(true), c) => self.and(a.not(), c.not()).not(),
            _ => Is(self.var(v)),
        }
    }

    /// `Boolean::sha256_maj`, its cases in its order.
    fn maj(&mut self, a: Bit, b: Bit, c: Bit) -> Bit {
        use Bit::*;
        let (x, y, z) = (a.value(), b.value(), c.value());
        let v = (x & y) ^ (x & z) ^ (y & z);
        match (a, b, c) {
            (Const(_), Const(_), Const(_)) => Const(v),
            (Const(false), b, c) => self.and(b, c),
            (a, Const(false), c) => self.and(a, c),
            (a, b, Const(false)) => self.and(a, b),
            (a, b, Const(true)) => self.and(a.not(), b.not()).not(),
            (a, Const(true), c) => self.and(a.not(), c.not()).not(),
            (Const(true), b, c) => self.and(b.not(), c.not()).not(),
            _ => {
                let maj = self.var(v);
                self.and(b, c); // the gadget's `b and c`, allocated after `maj`
                Is(maj)
            }
        }
    }

    /// `UInt32::xor`.
    fn xor_word(&mut self, a: &Word, b: &Word) -> Word {
        let mut bits = [Bit::Const(false); 32];
        for (i, bit) in bits.iter_mut().enumerate() {
            *bit = self.xor(a.bits[i], b.bits[i]);
        }
        Word {
            bits,
            value: a.value ^ b.value,
        }
    }

    /// `UInt32::sha256_ch` / `sha256_maj`, bit by bit from the least significant.
    fn triop(&mut self, a: &Word, b: &Word, c: &Word, maj: bool) -> Word {
        let mut bits = [Bit::Const(false); 32];
        for (i, bit) in bits.iter_mut().enumerate() {
            *bit = if maj {
                self.maj(a.bits[i], b.bits[i], c.bits[i])
            } else {
                self.ch(a.bits[i], b.bits[i], c.bits[i])
            };
        }
        let value = if maj {
            (a.value & b.value) ^ (a.value & c.value) ^ (b.value & c.value)
        } else {
            (a.value & b.value) ^ (!a.value & c.value)
        };
        Word { bits, value }
    }

    /// `UInt32::addmany`: a constant when every operand bit is, otherwise the sum's bits
    /// up to the largest possible sum's width, the carries dropped after allocation.
    fn addmany(&mut self, operands: &[Word]) -> Word {
        let max = operands.len() as u64 * u64::from(u32::MAX);
        let sum: u64 = operands.iter().map(|w| u64::from(w.value)).sum();
        if operands.iter().all(|w| w.bits.iter().all(|b| b.is_const())) {
            return Word::constant(sum as u32);
        }
        let mut bits = [Bit::Const(false); 32];
        for i in 0..(64 - max.leading_zeros()) as usize {
            let bit = Bit::Is(self.var((sum >> i) & 1 == 1));
            if let Some(slot) = bits.get_mut(i) {
                *slot = bit;
            }
        }
        Word {
            bits,
            value: sum as u32,
        }
    }
}

/// `UInt32`: bits from the least significant, and the value.
#[derive(Clone, Copy)]
struct Word {
    bits: [Bit; 32],
    value: u32,
}

impl Word {
    fn constant(value: u32) -> Word {
        let mut bits = [Bit::Const(false); 32];
        for (i, bit) in bits.iter_mut().enumerate() {
            *bit = Bit::Const((value >> i) & 1 == 1);
        }
        Word { bits, value }
    }

    /// `UInt32::from_bits_be`.
    fn from_bits_be(be: &[Bit]) -> Word {
        let mut bits = [Bit::Const(false); 32];
        let mut value = 0u32;
        for (i, &bit) in be.iter().rev().enumerate() {
            bits[i] = bit;
            value |= u32::from(bit.value()) << i;
        }
        Word { bits, value }
    }

    fn rotr(&self, by: usize) -> Word {
        let mut bits = [Bit::Const(false); 32];
        for (i, bit) in bits.iter_mut().enumerate() {
            *bit = self.bits[(i + by) % 32];
        }
        Word {
            bits,
            value: self.value.rotate_right(by as u32),
        }
    }

    fn shr(&self, by: usize) -> Word {
        let mut bits = [Bit::Const(false); 32];
        bits[..32 - by].copy_from_slice(&self.bits[by..]);
        Word {
            bits,
            value: self.value >> by,
        }
    }
}

const ROUND_CONSTANTS: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

const IV: [u32; 8] = [
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
];

/// The gadget's `Maybe`: a word computed, or the operands of a sum not yet allocated.
enum Maybe {
    Concrete(Word),
    Deferred(Vec<Word>),
}

impl Maybe {
    fn compute(self, out: &mut Out<'_>, others: &[Word]) -> Word {
        match self {
            Maybe::Concrete(w) => w,
            Maybe::Deferred(mut v) => {
                v.extend_from_slice(others);
                out.addmany(&v)
            }
        }
    }
}

/// `sha256_compression_function` over 512 bits (big-endian words).
fn compress(out: &mut Out<'_>, input: &[Bit], current: &[Word; 8]) -> [Word; 8] {
    let mut w: Vec<Word> = input.chunks(32).map(Word::from_bits_be).collect();
    for i in 16..64 {
        let mut s0 = w[i - 15].rotr(7);
        s0 = out.xor_word(&s0, &w[i - 15].rotr(18));
        s0 = out.xor_word(&s0, &w[i - 15].shr(3));
        let mut s1 = w[i - 2].rotr(17);
        s1 = out.xor_word(&s1, &w[i - 2].rotr(19));
        s1 = out.xor_word(&s1, &w[i - 2].shr(10));
        let next = out.addmany(&[w[i - 16], s0, w[i - 7], s1]);
        w.push(next);
    }
    let mut a = Maybe::Concrete(current[0]);
    let [_, mut b, mut c, mut d, _, mut f, mut g, mut h] = *current;
    let mut e = Maybe::Concrete(current[4]);
    for (&k, &wi) in ROUND_CONSTANTS.iter().zip(&w) {
        let new_e = e.compute(out, &[]);
        let mut s1 = new_e.rotr(6);
        s1 = out.xor_word(&s1, &new_e.rotr(11));
        s1 = out.xor_word(&s1, &new_e.rotr(25));
        let ch = out.triop(&new_e, &f, &g, false);
        let temp1 = [h, s1, ch, Word::constant(k), wi];
        let new_a = a.compute(out, &[]);
        let mut s0 = new_a.rotr(2);
        s0 = out.xor_word(&s0, &new_a.rotr(13));
        s0 = out.xor_word(&s0, &new_a.rotr(22));
        let maj = out.triop(&new_a, &b, &c, true);
        h = g;
        g = f;
        f = new_e;
        let mut deferred_e = temp1.to_vec();
        deferred_e.push(d);
        e = Maybe::Deferred(deferred_e);
        d = c;
        c = b;
        b = new_a;
        let mut deferred_a = temp1.to_vec();
        deferred_a.extend_from_slice(&[s0, maj]);
        a = Maybe::Deferred(deferred_a);
    }
    let h0 = a.compute(out, &[current[0]]);
    let h1 = out.addmany(&[current[1], b]);
    let h2 = out.addmany(&[current[2], c]);
    let h3 = out.addmany(&[current[3], d]);
    let h4 = e.compute(out, &[current[4]]);
    let h5 = out.addmany(&[current[5], f]);
    let h6 = out.addmany(&[current[6], g]);
    let h7 = out.addmany(&[current[7], h]);
    [h0, h1, h2, h3, h4, h5, h6, h7]
}

/// bellperson's `sha256`: the message padded with constants, then compressed block by
/// block from the constant IV.
fn sha256(out: &mut Out<'_>, message: &[Bit]) -> [Word; 8] {
    let mut padded = message.to_vec();
    let length = message.len() as u64;
    padded.push(Bit::Const(true));
    while (padded.len() + 64) % 512 != 0 {
        padded.push(Bit::Const(false));
    }
    padded.extend((0..64).rev().map(|i| Bit::Const((length >> i) & 1 == 1)));
    let mut current = IV.map(Word::constant);
    for block in padded.chunks(512) {
        current = compress(out, block, &current);
    }
    current
}

/// A field element's 255 low bits from the least significant (`to_bits_le`), the bytes'
/// bits then reversed byte by byte (`reverse_bit_numbering`, padded to 256 with a constant
/// zero): the order the label hashes them in. `var` makes each bit.
fn element_bits(bytes: &[u8; 32], mut var: impl FnMut(bool) -> Bit) -> Vec<Bit> {
    let le: Vec<Bit> = (0..255)
        .map(|i| var((bytes[i / 8] >> (i % 8)) & 1 == 1))
        .collect();
    let mut padded = le;
    padded.push(Bit::Const(false));
    padded
        .chunks(8)
        .flat_map(|c| c.iter().rev().copied())
        .collect()
}

/// The inclusion of a data leaf in comm_d's binary SHA-256 tree, as storage-proofs-core's
/// `PoRCircuit` allocates it after the piece's scratch (comm_d): the leaf, then per level
/// the index bit, the sibling, the pair in order (`insert_2`'s two picks), both elements'
/// 255 bits, the SHA-256 gadget's values and the hash packed into one element. `path`:
/// each level's sibling (canonical little-endian bytes) and whether the node is the right
/// one. Returns the public input it packs the index bits into (the challenged leaf's
/// index) and how many aux values it allocated; only the first `aux.len()` are written.
pub(crate) fn data_witness(
    aux: &mut [Scalar],
    leaf: &[u8; 32],
    path: &[([u8; 32], bool)],
) -> (Vec<Scalar>, usize) {
    let mut out = Out { aux, at: 0 };
    let element = |bytes: &[u8; 32]| Scalar::from_bytes(bytes).unwrap_or(Scalar::ZERO);
    out.value(element(leaf));
    let mut cur = *leaf;
    for (sibling, right) in path {
        out.var(*right);
        out.value(element(sibling));
        let (left, right) = if *right {
            (sibling, &cur)
        } else {
            (&cur, sibling)
        };
        out.value(element(left));
        out.value(element(right));
        let mut message = element_bits(left, |v| Bit::Is(out.var(v)));
        message.extend(element_bits(right, |v| Bit::Is(out.var(v))));
        cur = digest_element(&sha256(&mut out, &message));
        out.value(element(&cur));
    }
    let bits: Vec<bool> = path.iter().map(|(_, right)| *right).collect();
    (pack_inputs(&bits), out.at)
}

/// A digest as filecoin-proofs packs it into an element: its bytes little-endian, the top
/// two bits dropped (below 2^254, always canonical).
fn digest_element(digest: &[Word; 8]) -> [u8; 32] {
    let mut bytes = [0u8; 32];
    for (chunk, word) in bytes.chunks_mut(4).zip(digest) {
        chunk.copy_from_slice(&word.value.to_be_bytes());
    }
    bytes[31] &= 0b0011_1111;
    bytes
}

/// Number of parents a label hashes (filecoin-proofs' `TOTAL_PARENTS`).
pub(crate) const HASHED_PARENTS: usize = 37;

/// The label of `node` at `layer` into `aux`, as `create_label_circuit` allocates it after
/// the piece's scratch (the replica id's bits and the node's `UInt64` allocated before):
/// each parent's 255 bits (drg parents, then expander parents from layer 2), the SHA-256
/// gadget's values, and the label packed into one element.
///
/// `replica_id` and `parents` are canonical little-endian bytes of field elements; parents
/// are 6 drg parents at layer 1, 6 + 8 after (at least one), repeated to 37 as the
/// circuit repeats them.
/// Returns the label (canonical bytes, top two bits cleared as the packing drops them) and
/// how many values were allocated; only the first `aux.len()` are written.
pub(crate) fn label_witness(
    aux: &mut [Scalar],
    replica_id: &[u8; 32],
    layer: u32,
    node: u64,
    parents: &[[u8; 32]],
) -> ([u8; 32], usize) {
    let mut out = Out { aux, at: 0 };
    let parent_bits: Vec<Vec<Bit>> = parents
        .iter()
        .map(|p| element_bits(p, |v| Bit::Is(out.var(v))))
        .collect();
    let mut message = element_bits(replica_id, Bit::Is);
    message.extend((0..32).rev().map(|i| Bit::Const((layer >> i) & 1 == 1)));
    message.extend((0..64).rev().map(|i| Bit::Is((node >> i) & 1 == 1)));
    message.resize(512, Bit::Const(false));
    // Repeated to 37 in turn, as the circuit repeats them (14 + 14 + 9, or 6 × 6 + 1).
    for i in 0..HASHED_PARENTS {
        message.extend_from_slice(&parent_bits[i % parent_bits.len()]);
    }
    let label = digest_element(&sha256(&mut out, &message));
    out.value(Scalar::from_bytes(&label).unwrap_or(Scalar::ZERO));
    (label, out.at)
}

/// A field element of filecoin-proofs' circuits (blstrs, as neptune computes in it).
type Fr = blstrs::Scalar;

impl Out<'_> {
    /// An allocated number holding `v`.
    #[inline]
    fn num(&mut self, v: Fr) -> Fr {
        self.value(crate::bridge::to_bls(&v));
        v
    }

    /// storage-proofs-core's `pick`: `cond ? a : b`, allocated.
    #[inline]
    fn pick(&mut self, cond: bool, a: Fr, b: Fr) -> Fr {
        self.num(if cond { a } else { b })
    }
}

/// neptune's circuit `poseidon_hash` (its first, "legacy" circuit, the one filecoin-proofs
/// uses): the domain tag as a constant, the preimage allocated; each S-box allocates its
/// input when that is a linear combination (after a matrix product), then x², x⁴ and
/// x⁵ (+ key); the result allocated last. Values computed with neptune's own constants.
fn poseidon<A: neptune::Arity<Fr>>(
    out: &mut Out<'_>,
    preimage: &[Fr],
    c: &neptune::poseidon::PoseidonConstants<Fr, A>,
) -> Fr {
    let width = c.width();
    let mut p = Poseidon {
        c,
        state: std::iter::once(c.domain_tag)
            .chain(preimage.iter().copied())
            .collect(),
        allocated: (0..width).map(|i| i > 0).collect(),
        offset: 0,
        round: 0,
    };
    p.full_round(out, true, false);
    for _ in 1..c.full_rounds / 2 {
        p.full_round(out, false, false);
    }
    for _ in 0..c.partial_rounds {
        let key = c.compressed_round_constants[p.offset];
        p.offset += 1;
        p.s_box(out, 0, None, Some(key));
        p.product();
    }
    for _ in 0..(c.full_rounds / 2) - 1 {
        p.full_round(out, false, false);
    }
    p.full_round(out, false, true);
    p.ensure(out, 1)
}

/// neptune's `PoseidonCircuit` state: the elements, whether each is an allocated number
/// (else a linear combination), the next round constant and the round.
struct Poseidon<'c, A: neptune::Arity<Fr>> {
    c: &'c neptune::poseidon::PoseidonConstants<Fr, A>,
    state: Vec<Fr>,
    allocated: Vec<bool>,
    offset: usize,
    round: usize,
}

impl<A: neptune::Arity<Fr>> Poseidon<'_, A> {
    /// `Elt::ensure_allocated`: a linear combination is allocated.
    fn ensure(&mut self, out: &mut Out<'_>, i: usize) -> Fr {
        if !self.allocated[i] {
            out.num(self.state[i]);
            self.allocated[i] = true;
        }
        self.state[i]
    }

    /// `quintic_s_box` (`pre` absent) or `quintic_s_box_pre_add`: the input allocated if it
    /// is a combination, then (x + pre)², x⁴ and x⁴·(x + pre) + post, each allocated.
    fn s_box(&mut self, out: &mut Out<'_>, i: usize, pre: Option<Fr>, post: Option<Fr>) {
        use ff013::Field as _;
        let x = self.ensure(out, i) + pre.unwrap_or(Fr::ZERO);
        let x2 = out.num(x.square());
        let x4 = out.num(x2.square());
        self.state[i] = out.num(x4 * x + post.unwrap_or(Fr::ZERO));
    }

    fn full_round(&mut self, out: &mut Out<'_>, first: bool, last: bool) {
        use ff013::Field as _;
        let width = self.c.width();
        let keys = |offset: &mut usize| {
            let at = *offset;
            *offset += width;
            &self.c.compressed_round_constants[at..at + width]
        };
        let pre = first.then(|| keys(&mut self.offset));
        let post = (first || !last).then(|| keys(&mut self.offset));
        for i in 0..width {
            let post_key = post.map(|k| k[i]);
            match pre {
                // The tag: a constant S-box, nothing allocated.
                Some(pre) if i == 0 => {
                    let x = self.state[0] + pre[0];
                    self.state[0] = x.square().square() * x + post_key.unwrap_or(Fr::ZERO);
                }
                Some(pre) => self.s_box(out, i, Some(pre[i]), post_key),
                None => self.s_box(out, i, None, post_key),
            }
        }
        self.product();
    }

    /// `product_mds`: the pre-sparse matrix, then the sparse ones through the partial
    /// rounds, else the MDS matrix; every element becomes a linear combination.
    fn product(&mut self) {
        use ff013::Field as _;
        let c = self.c;
        let width = c.width();
        let sparse_offset = c.half_full_rounds - 1;
        let dense = |state: &[Fr], m: &[Vec<Fr>]| -> Vec<Fr> {
            (0..width)
                .map(|j| {
                    state
                        .iter()
                        .enumerate()
                        .fold(Fr::ZERO, |acc, (i, x)| acc + *x * m[i][j])
                })
                .collect()
        };
        self.state = if self.round == sparse_offset {
            dense(&self.state, &c.pre_sparse_matrix)
        } else if self.round > sparse_offset && self.round < c.half_full_rounds + c.partial_rounds {
            let m = &c.sparse_matrixes[self.round - sparse_offset - 1];
            let first = self
                .state
                .iter()
                .zip(&m.w_hat)
                .fold(Fr::ZERO, |acc, (x, w)| acc + *x * w);
            let x0 = self.state[0];
            std::iter::once(first)
                .chain((1..width).map(|j| self.state[j] + x0 * m.v_rest[j - 1]))
                .collect()
        } else {
            dense(&self.state, &c.mds_matrices.m)
        };
        self.allocated.iter_mut().for_each(|a| *a = false);
        self.round += 1;
    }
}

/// A Poseidon hash of `preimage` by the constants of its length (filecoin-hashers'
/// `PoseidonArity::PARAMETERS` for tree arities, the column constants for 11).
fn poseidon_by_arity(out: &mut Out<'_>, preimage: &[Fr]) -> Option<Fr> {
    use filecoin_hashers::{
        POSEIDON_CONSTANTS_11, POSEIDON_CONSTANTS_2, POSEIDON_CONSTANTS_4, POSEIDON_CONSTANTS_8,
    };
    Some(match preimage.len() {
        2 => poseidon(out, preimage, &POSEIDON_CONSTANTS_2),
        4 => poseidon(out, preimage, &POSEIDON_CONSTANTS_4),
        8 => poseidon(out, preimage, &POSEIDON_CONSTANTS_8),
        11 => poseidon(out, preimage, &POSEIDON_CONSTANTS_11),
        _ => return None,
    })
}

/// storage-proofs-core's `insert` for 2 and 8 elements (the arities of Filecoin's trees):
/// `cur` put at `index` among `siblings`, through its picks (and for 8 the two bits' nor
/// and and) in its order. Other sizes have no native path here.
fn insert(out: &mut Out<'_>, cur: Fr, index: usize, siblings: &[Fr]) -> Option<Vec<Fr>> {
    let bit = |i: usize| (index >> i) & 1 == 1;
    let a = cur;
    Some(match *siblings {
        [b] => {
            let b0 = bit(0);
            vec![out.pick(b0, b, a), out.pick(b0, a, b)]
        }
        [b, c, d, e, f, g, h] => {
            let (b0, b1, b2) = (bit(0), bit(1), bit(2));
            let nor = out.var(!b0 & !b1);
            let and = out.var(b0 & b1);
            let p0_xx0 = out.pick(nor, a, b);
            let p0 = out.pick(b2, b, p0_xx0);
            let p1_x00 = out.pick(b0, a, b);
            let p1_xx0 = out.pick(b1, c, p1_x00);
            let p1 = out.pick(b2, c, p1_xx0);
            let p2_x10 = out.pick(b0, d, a);
            let p2_xx0 = out.pick(b1, p2_x10, c);
            let p2 = out.pick(b2, d, p2_xx0);
            let p3_xx0 = out.pick(and, a, d);
            let p3 = out.pick(b2, e, p3_xx0);
            let p4_xx1 = out.pick(nor, a, f);
            let p4 = out.pick(b2, p4_xx1, e);
            let p5_x01 = out.pick(b0, a, f);
            let p5_xx1 = out.pick(b1, g, p5_x01);
            let p5 = out.pick(b2, p5_xx1, f);
            let p6_x11 = out.pick(b0, h, a);
            let p6_xx1 = out.pick(b1, p6_x11, g);
            let p6 = out.pick(b2, p6_xx1, g);
            let p7_xx1 = out.pick(and, a, h);
            let p7 = out.pick(b2, p7_xx1, h);
            vec![p0, p1, p2, p3, p4, p5, p6, p7]
        }
        _ => return None,
    })
}

/// A path of a Poseidon tree as `MerkleProofTrait::as_options` gives it: per level (base,
/// then sub and top tree levels) the siblings and the node's index among them.
pub(crate) type PoseidonPath = [(Vec<Fr>, usize)];

/// `leaf`'s inclusion by `path` in a Poseidon tree, as `PoRCircuit` allocates it (the leaf
/// and the root already allocated): per level the index bits, the siblings, the insertion
/// and the hash; the index bits are packed into public inputs. Returns the inputs, or
/// `None` for an arity without a native path here.
fn poseidon_inclusion(out: &mut Out<'_>, leaf: Fr, path: &PoseidonPath) -> Option<Vec<Scalar>> {
    let mut cur = leaf;
    let mut bits = Vec::new();
    for (siblings, index) in path {
        let arity = siblings.len() + 1;
        if !arity.is_power_of_two() || *index >= arity {
            return None;
        }
        for i in 0..arity.trailing_zeros() as usize {
            bits.push(out.var((index >> i) & 1 == 1));
        }
        for s in siblings {
            out.num(*s);
        }
        let inserted = insert(out, cur, *index, siblings)?;
        cur = poseidon_by_arity(out, &inserted)?;
    }
    Some(pack_inputs(&bits))
}

/// `pack_into_inputs`: bits, least significant first, 254 to an input.
fn pack_inputs(bits: &[bool]) -> Vec<Scalar> {
    bits.chunks(254)
        .map(|chunk| {
            let mut bytes = [0u8; 32];
            for (i, b) in chunk.iter().enumerate() {
                bytes[i / 8] |= u8::from(*b) << (i % 8);
            }
            Scalar::from_bytes(&bytes).unwrap_or(Scalar::ZERO)
        })
        .collect()
}

/// One parent's column in a challenge's columns piece: its rows allocated, their Poseidon
/// hash, and the hash's inclusion in comm_c's tree.
pub(crate) struct ColumnIn<'p> {
    pub(crate) rows: &'p [Fr],
    pub(crate) path: &'p PoseidonPath,
}

/// A challenge's columns piece (after comm_c, its scratch): every parent's column as
/// [`ColumnIn`] says, then the challenge's 64 bits packed into a public input. Returns
/// (inputs, how many aux values it allocated), or `None` where a shape has no native path.
pub(crate) fn columns_witness(
    aux: &mut [Scalar],
    parents: &[ColumnIn<'_>],
    challenge: u64,
) -> Option<(Vec<Scalar>, usize)> {
    let mut out = Out { aux, at: 0 };
    let mut inputs = Vec::new();
    for parent in parents {
        for row in parent.rows {
            out.num(*row);
        }
        let hash = poseidon_by_arity(&mut out, parent.rows)?;
        inputs.extend(poseidon_inclusion(&mut out, hash, parent.path)?);
    }
    let bits: Vec<bool> = (0..64)
        .map(|i| out.var((challenge >> i) & 1 == 1))
        .collect();
    inputs.extend(pack_inputs(&bits));
    Some((inputs, out.at))
}

/// A challenge's tail (after the data leaf, comm_r_last, comm_c and the labels, its
/// scratch): the encoded node (last label + data leaf), its inclusion in comm_r_last's
/// tree, the labels' column hash and its inclusion in comm_c's tree. Returns (inputs, how
/// many aux values it allocated), or `None` where a shape has no native path.
pub(crate) fn tail_witness(
    aux: &mut [Scalar],
    leaf: Fr,
    labels: &[Fr],
    replica_path: &PoseidonPath,
    column_path: &PoseidonPath,
) -> Option<(Vec<Scalar>, usize)> {
    let mut out = Out { aux, at: 0 };
    let encoded = out.num(*labels.last()? + leaf);
    let mut inputs = poseidon_inclusion(&mut out, encoded, replica_path)?;
    let hash = poseidon_by_arity(&mut out, labels)?;
    inputs.extend(poseidon_inclusion(&mut out, hash, column_path)?);
    Some((inputs, out.at))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bridge::{to_bls, PieceCs};
    use bellperson::gadgets::{num::AllocatedNum, uint32::UInt32};
    use groth16_prover::testing::{test_seed, SplitMix};
    use storage_proofs_core::gadgets::uint64::UInt64;
    use storage_proofs_core::merkle::MerkleTreeTrait;
    use storage_proofs_core::util::reverse_bit_numbering;
    use storage_proofs_porep::stacked;

    /// A field element drawn over the whole field (bit 254 included).
    fn element(g: &mut SplitMix) -> [u8; 32] {
        loop {
            let mut b = [0u8; 32];
            for c in b.chunks_mut(8) {
                c.copy_from_slice(&g.next_u64().to_le_bytes());
            }
            b[31] &= 0x7f;
            if bool::from(Scalar::from_bytes(&b).is_some()) {
                return b;
            }
        }
    }

    fn blstrs(bytes: &[u8; 32]) -> blstrs::Scalar {
        Option::from(blstrs::Scalar::from_bytes_le(bytes)).expect("canonical")
    }

    /// The label piece through filecoin-proofs' gadget, as the PoRep witness makes it.
    fn gadget(
        replica: &[u8; 32],
        layer: u32,
        node: u64,
        parents: &[[u8; 32]],
    ) -> (Vec<Scalar>, Scalar) {
        let mut cs = PieceCs::growing();
        let replica = AllocatedNum::alloc(&mut cs, || Ok(blstrs(replica))).unwrap();
        let replica_bits = reverse_bit_numbering(replica.to_bits_le(&mut cs).unwrap());
        let nums: Vec<_> = parents
            .iter()
            .map(|p| AllocatedNum::alloc(&mut cs, || Ok(blstrs(p))).unwrap())
            .collect();
        let node = UInt64::alloc(&mut cs, Some(node)).unwrap();
        cs.start_here();
        let bits: Vec<_> = nums
            .iter()
            .map(|n| reverse_bit_numbering(n.to_bits_le(&mut cs).unwrap()))
            .collect();
        let expanded = (0..HASHED_PARENTS)
            .map(|i| bits[i % bits.len()].clone())
            .collect();
        let label = stacked::create_label_circuit(
            &mut cs,
            &replica_bits,
            expanded,
            UInt32::constant(layer),
            node,
        )
        .unwrap();
        let label = to_bls(&label.get_value().unwrap());
        (cs.into_parts().1.unwrap(), label)
    }

    fn native(
        replica: &[u8; 32],
        layer: u32,
        node: u64,
        parents: &[[u8; 32]],
        len: usize,
    ) -> (Vec<Scalar>, Scalar, usize) {
        let mut aux = vec![-Scalar::ONE; len];
        let (label, count) = label_witness(&mut aux, replica, layer, node, parents);
        (aux, Scalar::from_bytes(&label).unwrap(), count)
    }

    /// Random labels of layer 1 (6 parents) and later layers (14), and extreme values:
    /// every value the gadget allocates, in its order, and the same label.
    #[test]
    fn labels_equal_the_gadgets_witness() {
        let seed = test_seed();
        let mut g = SplitMix::new(seed);
        let minus_one = (-Scalar::ONE).to_bytes();
        let cases: Vec<(u32, usize, bool)> = vec![
            (1, 6, false),
            (2, 14, false),
            (11, 14, false),
            (1, 6, true),
            (5, 14, true),
        ];
        for (layer, n, extreme) in cases {
            let (replica, parents, node) = if extreme {
                (minus_one, vec![minus_one; n], u64::MAX)
            } else {
                let parents = (0..n).map(|_| element(&mut g)).collect::<Vec<_>>();
                (
                    element(&mut g),
                    parents,
                    g.next_u64() >> (g.next_u64() % 64),
                )
            };
            let (expected, expected_label) = gadget(&replica, layer, node, &parents);
            let (aux, label, count) = native(&replica, layer, node, &parents, expected.len());
            assert_eq!(count, expected.len(), "seed {seed}, layer {layer}: count");
            let first = aux.iter().zip(&expected).position(|(a, b)| a != b);
            assert_eq!(
                first, None,
                "seed {seed}, layer {layer}: first differing value"
            );
            assert_eq!(label, expected_label, "seed {seed}, layer {layer}: label");
            assert_eq!(
                aux.last(),
                Some(&label),
                "the packed label is the last value"
            );
        }
        // Zero everywhere: constants meet variables holding zero.
        let zero = [0u8; 32];
        let (expected, _) = gadget(&zero, 3, 0, &[zero; 14]);
        let (aux, _, count) = native(&zero, 3, 0, &[zero; 14], expected.len());
        assert_eq!((count, aux), (expected.len(), expected));
    }

    /// The data leaf's inclusion through storage-proofs-core's `PoRCircuit`, as the PoRep
    /// witness makes it: (aux values, inputs).
    fn data_gadget(leaf: &[u8; 32], path: &[([u8; 32], bool)]) -> (Vec<Scalar>, Vec<Scalar>) {
        use filecoin_hashers::sha256::Sha256Hasher;
        use storage_proofs_core::gadgets::por::{AuthPath, PoRCircuit};
        use storage_proofs_core::gadgets::variables::Root;
        use storage_proofs_core::merkle::{BinaryMerkleTree, MerkleTreeTrait};
        type Tree = BinaryMerkleTree<Sha256Hasher>;
        let mut cs = PieceCs::growing();
        let comm_d = AllocatedNum::alloc(&mut cs, || Ok(blstrs(&[9u8; 32]))).unwrap();
        cs.start_here();
        let leaf = AllocatedNum::alloc(&mut cs, || Ok(blstrs(leaf))).unwrap();
        let options: Vec<(Vec<Option<blstrs::Scalar>>, Option<usize>)> = path
            .iter()
            .map(|(sibling, right)| (vec![Some(blstrs(sibling))], Some(usize::from(*right))))
            .collect();
        let path: AuthPath<
            Sha256Hasher,
            <Tree as MerkleTreeTrait>::Arity,
            <Tree as MerkleTreeTrait>::SubTreeArity,
            <Tree as MerkleTreeTrait>::TopTreeArity,
        > = options.into();
        PoRCircuit::<Tree>::synthesize(&mut cs, Root::Var(leaf), path, Root::Var(comm_d), true)
            .unwrap();
        let (inputs, aux) = cs.into_parts();
        (aux.unwrap(), inputs)
    }

    /// Random paths of a few heights (32 GiB's 30 among them), and extreme values.
    #[test]
    fn data_inclusions_equal_the_gadgets_witness() {
        let seed = test_seed();
        let mut g = SplitMix::new(seed);
        let minus_one = (-Scalar::ONE).to_bytes();
        for (height, extreme) in [(1, false), (5, false), (30, false), (4, true)] {
            let (leaf, path): ([u8; 32], Vec<([u8; 32], bool)>) = if extreme {
                (
                    minus_one,
                    (0..height).map(|l| (minus_one, l % 2 == 0)).collect(),
                )
            } else {
                let path = (0..height)
                    .map(|_| (element(&mut g), g.next_u64() % 2 == 1))
                    .collect();
                (element(&mut g), path)
            };
            let (expected, expected_inputs) = data_gadget(&leaf, &path);
            let mut aux = vec![-Scalar::ONE; expected.len()];
            let (inputs, count) = data_witness(&mut aux, &leaf, &path);
            assert_eq!(count, expected.len(), "seed {seed}, height {height}: count");
            let first = aux.iter().zip(&expected).position(|(a, b)| a != b);
            assert_eq!(
                first, None,
                "seed {seed}, height {height}: first differing value"
            );
            assert_eq!(
                inputs, expected_inputs,
                "seed {seed}, height {height}: inputs"
            );
        }
    }

    /// `leaf`'s inclusion through `PoRCircuit` over a Poseidon tree of `Tree`'s arities
    /// (leaf and root scratch, as in the columns and the tail): (aux, inputs).
    fn poseidon_gadget<Tree: MerkleTreeTrait>(
        leaf: Fr,
        path: &PoseidonPath,
    ) -> (Vec<Scalar>, Vec<Scalar>)
    where
        Tree::Hasher: 'static,
    {
        use storage_proofs_core::gadgets::por::{AuthPath, PoRCircuit};
        use storage_proofs_core::gadgets::variables::Root;
        let mut cs = PieceCs::growing();
        let leaf = AllocatedNum::alloc(&mut cs, || Ok(leaf)).unwrap();
        let root = AllocatedNum::alloc(&mut cs, || Ok(Fr::from(5u64))).unwrap();
        cs.start_here();
        let options: Vec<(Vec<Option<Fr>>, Option<usize>)> = path
            .iter()
            .map(|(s, i)| (s.iter().copied().map(Some).collect(), Some(*i)))
            .collect();
        let path: AuthPath<Tree::Hasher, Tree::Arity, Tree::SubTreeArity, Tree::TopTreeArity> =
            options.into();
        PoRCircuit::<Tree>::synthesize(&mut cs, Root::Var(leaf), path, Root::Var(root), true)
            .unwrap();
        let (inputs, aux) = cs.into_parts();
        (aux.unwrap(), inputs)
    }

    /// A gadget run: (aux, inputs) of a leaf's inclusion by a path.
    type Gadget = dyn Fn(Fr, &PoseidonPath) -> (Vec<Scalar>, Vec<Scalar>);

    fn random_path(g: &mut SplitMix, arities: &[usize]) -> Vec<(Vec<Fr>, usize)> {
        arities
            .iter()
            .map(|&a| {
                let siblings = (0..a - 1).map(|_| blstrs(&element(g))).collect();
                (siblings, (g.next_u64() % a as u64) as usize)
            })
            .collect()
    }

    /// Paths of Filecoin's tree shapes with sub-trees of 8 and 2 and a top of 2: every value
    /// of the insertions and hashes, the packed index, the count; an arity of 4 has no
    /// native path.
    #[test]
    fn poseidon_inclusions_equal_the_gadgets_witness() {
        use filecoin_proofs::{SectorShape32GiB, SectorShape4KiB, SectorShape64GiB};
        let seed = test_seed();
        let mut g = SplitMix::new(seed);
        let check = |name: &str, arities: &[usize], gadget: &Gadget, g: &mut SplitMix| {
            for _ in 0..2 {
                let path = random_path(g, arities);
                let leaf = blstrs(&element(g));
                let (expected, expected_inputs) = gadget(leaf, &path);
                let mut aux = vec![-Scalar::ONE; expected.len()];
                let mut out = Out {
                    aux: &mut aux,
                    at: 0,
                };
                let inputs = poseidon_inclusion(&mut out, leaf, &path).expect("native path");
                let count = out.at;
                assert_eq!(count, expected.len(), "seed {seed}, {name}: count");
                let first = aux.iter().zip(&expected).position(|(a, b)| a != b);
                assert_eq!(first, None, "seed {seed}, {name}: first differing value");
                assert_eq!(inputs, expected_inputs, "seed {seed}, {name}: inputs");
            }
        };
        let mut aux = vec![Scalar::ZERO; 1 << 12];
        let four = random_path(&mut g, &[4]);
        assert!(poseidon_inclusion(
            &mut Out {
                aux: &mut aux,
                at: 0
            },
            Fr::from(1u64),
            &four
        )
        .is_none());
        check(
            "8^3 then a sub-tree of 8 (32 GiB)",
            &[8, 8, 8, 8],
            &|l, p| poseidon_gadget::<SectorShape32GiB>(l, p),
            &mut g,
        );
        check(
            "8^2, 8, then a top of 2 (64 GiB)",
            &[8, 8, 8, 2],
            &|l, p| poseidon_gadget::<SectorShape64GiB>(l, p),
            &mut g,
        );
        check(
            "8^2 then a sub-tree of 2 (4 KiB)",
            &[8, 8, 2],
            &|l, p| poseidon_gadget::<SectorShape4KiB>(l, p),
            &mut g,
        );
    }

    /// A column of 11 and of 2 rows hashed as the columns piece and the tail hash them.
    #[test]
    fn column_hashes_equal_the_gadgets_witness() {
        let seed = test_seed();
        let mut g = SplitMix::new(seed);
        for n in [2, 11] {
            let rows: Vec<Fr> = (0..n).map(|_| blstrs(&element(&mut g))).collect();
            let mut cs = PieceCs::growing();
            let nums: Vec<_> = rows
                .iter()
                .map(|r| AllocatedNum::alloc(&mut cs, || Ok(*r)).unwrap())
                .collect();
            cs.start_here();
            let hash = match n {
                2 => neptune::circuit::poseidon_hash(
                    &mut cs,
                    nums,
                    &*filecoin_hashers::POSEIDON_CONSTANTS_2,
                ),
                _ => neptune::circuit::poseidon_hash(
                    &mut cs,
                    nums,
                    &*filecoin_hashers::POSEIDON_CONSTANTS_11,
                ),
            }
            .unwrap();
            let expected = cs.into_parts().1.unwrap();
            let mut aux = vec![-Scalar::ONE; expected.len()];
            let mut out = Out {
                aux: &mut aux,
                at: 0,
            };
            let native = poseidon_by_arity(&mut out, &rows).expect("an arity of a column");
            assert_eq!(out.at, expected.len(), "seed {seed}, {n} rows: count");
            assert_eq!(
                Some(native),
                hash.get_value(),
                "seed {seed}, {n} rows: hash"
            );
            assert_eq!(aux, expected, "seed {seed}, {n} rows: values");
        }
    }

    /// A place too short or too long: the count says so, nothing written past the place.
    #[test]
    fn a_wrong_place_is_counted_not_overrun() {
        let mut g = SplitMix::new(test_seed());
        let parents: Vec<_> = (0..14).map(|_| element(&mut g)).collect();
        let replica = element(&mut g);
        let mut whole = vec![Scalar::ZERO; 1 << 20];
        let (_, count) = label_witness(&mut whole, &replica, 4, 99, &parents);
        assert!(count < whole.len());
        let mut short = vec![Scalar::ZERO; count - 1];
        assert_eq!(
            label_witness(&mut short, &replica, 4, 99, &parents).1,
            count
        );
        assert_eq!(short[..], whole[..count - 1]);
    }
}
