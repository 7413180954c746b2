//! Circuits for tests and benchmarks: SHA-256 (bellman's gadget), a MiMC-style chain and
//! random R1CS, each able to compute its own public inputs and to corrupt its witness.
//!
//! They are deterministic (a seed, no global randomness), so a test or a benchmark can
//! rebuild the same circuit for parameter generation, the reference prover and ours.

use bellman::gadgets::boolean::{AllocatedBit, Boolean};
use bellman::gadgets::{multipack, sha256};
use bellman::{Circuit, ConstraintSystem, SynthesisError, Variable};
use bls12_381::{Bls12, G1Projective, G2Projective, Scalar};
use ff::Field;

/// The seed of a randomized test: `PINION_SEED` when set (to replay a failure), else the
/// clock; printed either way.
pub fn test_seed() -> u64 {
    let seed = std::env::var("PINION_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    eprintln!("seed = {seed}");
    seed
}

/// A small deterministic generator (splitmix64): circuits must not depend on a global
/// RNG, and this crate does not need `rand` outside tests.
#[derive(Clone, Debug)]
pub struct SplitMix(u64);

impl SplitMix {
    /// Starts from `seed`.
    pub fn new(seed: u64) -> SplitMix {
        SplitMix(seed)
    }
    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (n > 0; a tiny bias is fine for circuit shapes).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
    /// A field element from 4 words (reduced by wide reduction).
    pub fn scalar(&mut self) -> Scalar {
        let mut bytes = [0u8; 64];
        for chunk in bytes.chunks_mut(8) {
            chunk.copy_from_slice(&self.next_u64().to_le_bytes());
        }
        Scalar::from_bytes_wide(&bytes)
    }
}

/// SHA-256 of `preimage` with bellman's gadget (padding included, so `⌈(8·len + 65)/512⌉`
/// compressions of ~27k constraints each); the digest's 256 bits are packed into two
/// public inputs. One extra variable is constrained to equal the first preimage bit;
/// `corrupt` gives it the value 2 instead, so the witness is unsatisfied while the shape
/// (and so the parameters and the PCE) stays the same.
#[derive(Clone, Debug)]
pub struct Sha256Circuit {
    /// The message.
    pub preimage: Vec<u8>,
    /// Give the first preimage bit an invalid value (an unsatisfied witness).
    pub corrupt: bool,
}

impl Sha256Circuit {
    /// A circuit over a deterministic message of `n_blocks` padded blocks.
    pub fn with_blocks(n_blocks: usize, seed: u64) -> Sha256Circuit {
        // 55 bytes is the most that fits one padded block (8·55 + 65 ≤ 512).
        let len = 64 * n_blocks.max(1) - 9;
        let mut g = SplitMix::new(seed);
        Sha256Circuit {
            preimage: (0..len).map(|_| g.next_u64() as u8).collect(),
            corrupt: false,
        }
    }

    /// The public inputs (ONE excluded): the digest bits packed as groth16 expects.
    pub fn public_inputs(&self) -> Vec<Scalar> {
        let digest = sha256_digest(&self.preimage);
        multipack::compute_multipacking::<Scalar>(&multipack::bytes_to_bits(&digest))
    }
}

impl Circuit<Scalar> for Sha256Circuit {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let bits = multipack::bytes_to_bits(&self.preimage);
        let mut input = Vec::with_capacity(bits.len());
        for (i, b) in bits.into_iter().enumerate() {
            let bit = AllocatedBit::alloc(cs.namespace(|| format!("bit {i}")), Some(b))?;
            input.push(Boolean::from(bit));
        }
        let digest = sha256::sha256(cs.namespace(|| "sha256"), &input)?;
        let first_bit = self.preimage.first().map_or(0, |b| u64::from(b >> 7));
        let copy_val = if self.corrupt { 2 } else { first_bit };
        let copy = cs.alloc(|| "copy of bit 0", || Ok(Scalar::from(copy_val)))?;
        let first = match input.first() {
            Some(Boolean::Is(b)) => b.get_variable(),
            _ => CS::one(),
        };
        cs.enforce(
            || "copy = bit 0",
            |lc| lc + copy,
            |lc| lc + CS::one(),
            |lc| lc + first,
        );
        multipack::pack_into_inputs(cs.namespace(|| "digest"), &digest)
    }
}

/// SHA-256 in plain Rust (the gadget's oracle for the public inputs): FIPS 180-4.
pub fn sha256_digest(msg: &[u8]) -> [u8; 32] {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];
    let mut h: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];
    let mut data = msg.to_vec();
    data.push(0x80);
    while data.len() % 64 != 56 {
        data.push(0);
    }
    data.extend_from_slice(&((msg.len() as u64) * 8).to_be_bytes());
    for block in data.chunks(64) {
        let mut w = [0u32; 64];
        for (i, word) in block.chunks(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16]
                .wrapping_add(s0)
                .wrapping_add(w[i - 7])
                .wrapping_add(s1);
        }
        let mut v = h;
        for i in 0..64 {
            let s1 = v[4].rotate_right(6) ^ v[4].rotate_right(11) ^ v[4].rotate_right(25);
            let ch = (v[4] & v[5]) ^ (!v[4] & v[6]);
            let t1 = v[7]
                .wrapping_add(s1)
                .wrapping_add(ch)
                .wrapping_add(K[i])
                .wrapping_add(w[i]);
            let s0 = v[0].rotate_right(2) ^ v[0].rotate_right(13) ^ v[0].rotate_right(22);
            let maj = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
            let t2 = s0.wrapping_add(maj);
            v = [
                t1.wrapping_add(t2),
                v[0],
                v[1],
                v[2],
                v[3].wrapping_add(t1),
                v[4],
                v[5],
                v[6],
            ];
        }
        for (x, y) in h.iter_mut().zip(v) {
            *x = x.wrapping_add(y);
        }
    }
    let mut out = [0u8; 32];
    for (o, x) in out.chunks_mut(4).zip(h) {
        o.copy_from_slice(&x.to_be_bytes());
    }
    out
}

/// A MiMC-style chain: `x_{i+1} = (x_i + k_i)^3` for `n_rounds` rounds with fixed round
/// constants; `x_0` is secret, `x_n` is the one public input. Two constraints per round.
#[derive(Clone, Debug)]
pub struct MimcChain {
    /// The secret start value.
    pub x0: Scalar,
    /// Round constants (one per round).
    pub constants: Vec<Scalar>,
    /// Assign a wrong value to the last round's output (an unsatisfied witness).
    pub corrupt: bool,
}

impl MimcChain {
    /// `n_rounds` rounds, constants and start value from `seed`.
    pub fn new(n_rounds: usize, seed: u64) -> MimcChain {
        let mut g = SplitMix::new(seed);
        MimcChain {
            x0: g.scalar(),
            constants: (0..n_rounds).map(|_| g.scalar()).collect(),
            corrupt: false,
        }
    }

    /// The chain's output (the public input).
    pub fn output(&self) -> Scalar {
        self.constants
            .iter()
            .fold(self.x0, |x, k| (x + k).square() * (x + k))
    }
}

impl Circuit<Scalar> for MimcChain {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let mut x_val = self.x0;
        let mut x = cs.alloc(|| "x0", || Ok(x_val))?;
        let n = self.constants.len();
        for (i, k) in self.constants.iter().enumerate() {
            let t = x_val + k;
            let sq_val = t.square();
            let sq = cs.alloc(|| format!("sq{i}"), || Ok(sq_val))?;
            cs.enforce(
                || format!("sq{i}"),
                |lc| lc + x + (*k, CS::one()),
                |lc| lc + x + (*k, CS::one()),
                |lc| lc + sq,
            );
            let mut next_val = sq_val * t;
            if self.corrupt && i + 1 == n {
                next_val += Scalar::ONE;
            }
            let next = if i + 1 == n {
                cs.alloc_input(|| "out", || Ok(next_val))?
            } else {
                cs.alloc(|| format!("x{}", i + 1), || Ok(next_val))?
            };
            cs.enforce(
                || format!("cube{i}"),
                |lc| lc + sq,
                |lc| lc + x + (*k, CS::one()),
                |lc| lc + next,
            );
            x = next;
            x_val = next_val;
        }
        Ok(())
    }
}

/// Random R1CS with public inputs: each constraint multiplies two random linear
/// combinations of earlier variables into a fresh one; witness values are often 0 or 1
/// (like real circuits), variables never picked again appear only in C (gaps in the A
/// and B densities), and coefficients are 0, 1 or arbitrary. The shape depends on
/// `shape_seed` only, the values on `value_seed`, so two circuits with the same shape
/// seed are partitions of one statement.
#[derive(Clone, Debug)]
pub struct RandomR1cs {
    /// Public inputs (ONE excluded).
    pub n_inputs: usize,
    /// Product constraints.
    pub n_constraints: usize,
    /// Seed of the structure (which variables, which coefficients).
    pub shape_seed: u64,
    /// Seed of the free values (inputs and the seed variables).
    pub value_seed: u64,
    /// Make the last constraint's output wrong (an unsatisfied witness).
    pub corrupt: bool,
}

impl RandomR1cs {
    /// The public inputs (ONE excluded) this circuit allocates.
    pub fn public_inputs(&self) -> Vec<Scalar> {
        let mut values = SplitMix::new(self.value_seed);
        (0..self.n_inputs)
            .map(|_| small_or_random(&mut values))
            .collect()
    }
}

fn small_or_random(g: &mut SplitMix) -> Scalar {
    match g.below(10) {
        0..3 => Scalar::ZERO,
        3..6 => Scalar::ONE,
        _ => g.scalar(),
    }
}

impl Circuit<Scalar> for RandomR1cs {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let mut shape = SplitMix::new(self.shape_seed);
        let mut values = SplitMix::new(self.value_seed);
        let mut vars: Vec<(Variable, Scalar)> = vec![(CS::one(), Scalar::ONE)];
        for i in 0..self.n_inputs {
            let v = small_or_random(&mut values);
            vars.push((cs.alloc_input(|| format!("in{i}"), || Ok(v))?, v));
        }
        for i in 0..3 {
            let v = small_or_random(&mut values);
            let var = cs.alloc(|| format!("seed{i}"), || Ok(v))?;
            // Every aux variable must occur somewhere, or parameter generation refuses.
            cs.enforce(
                || format!("s{i}"),
                |lc| lc + var,
                |lc| lc + CS::one(),
                |lc| lc + var,
            );
            vars.push((var, v));
        }
        for t in 0..self.n_constraints {
            let mut pick = || vars[shape.below(vars.len())];
            let ((x, xv), (y, yv), (u, uv)) = (pick(), pick(), pick());
            let k = small_or_random(&mut shape);
            let left = xv + k * yv;
            let mut out = left * uv;
            if self.corrupt && t + 1 == self.n_constraints {
                out += Scalar::ONE;
            }
            let z = cs.alloc(|| format!("z{t}"), || Ok(out))?;
            cs.enforce(
                || format!("c{t}"),
                |lc| lc + x + (k, y),
                |lc| lc + u,
                |lc| lc + z,
            );
            vars.push((z, out));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::Digest;

    #[test]
    fn sha256_digest_matches_sha2() {
        let mut g = SplitMix::new(test_seed());
        for len in [0usize, 1, 55, 56, 63, 64, 65, 119, 200] {
            let msg: Vec<u8> = (0..len).map(|_| g.next_u64() as u8).collect();
            let want: [u8; 32] = sha2::Sha256::digest(&msg).into();
            assert_eq!(sha256_digest(&msg), want, "length {len}");
        }
    }
}

/// A multiplication chain for large synthetic benchmarks: `x_{i+1} = (x_i + c_i)·k_{i mod
/// n_keys}` for `n_constraints` constraints, one per row, with a few secret keys `k_j`.
/// Every aux value is a uniformly spread field element (the worst case for an MSM), A and
/// C are dense, and B touches only the keys, so the G2 MSM is tiny. Nothing public but
/// ONE. Witness generation is one multiplication per constraint.
#[derive(Clone, Debug)]
pub struct KeyedChain {
    /// Constraints (rows are one more: groth16's input row for ONE).
    pub n_constraints: usize,
    /// Keys the B side cycles through.
    pub n_keys: usize,
    /// Seed of the start value, keys and constants.
    pub seed: u64,
}

impl Circuit<Scalar> for KeyedChain {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let mut g = SplitMix::new(self.seed);
        let mut keys = Vec::with_capacity(self.n_keys.max(1));
        for j in 0..self.n_keys.max(1) {
            let v = g.scalar();
            keys.push((cs.alloc(|| format!("k{j}"), || Ok(v))?, v));
        }
        let mut x_val = g.scalar();
        let mut x = cs.alloc(|| "x0", || Ok(x_val))?;
        for i in 0..self.n_constraints {
            // Constants from the counter so the shape needs no stored table.
            let c = Scalar::from(g.next_u64());
            let (k, k_val) = keys[i % keys.len()];
            let y_val = (x_val + c) * k_val;
            let y = cs.alloc(|| "x", || Ok(y_val))?;
            cs.enforce(
                || "step",
                |lc| lc + x + (c, CS::one()),
                |lc| lc + k,
                |lc| lc + y,
            );
            x = y;
            x_val = y_val;
        }
        Ok(())
    }
}

/// Query lengths of a parameter set for one circuit shape (what groth16's generator would
/// produce for it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamShape {
    /// Public inputs, ONE included (the `ic` length).
    pub n_inputs: usize,
    /// `h_query`: domain size − 1.
    pub n_h: usize,
    /// `l_query`: aux variables.
    pub n_l: usize,
    /// `a_query`: inputs plus aux with an A coefficient.
    pub n_a: usize,
    /// `b_g1_query` and `b_g2_query`: inputs and aux with a B coefficient.
    pub n_b: usize,
}

impl ParamShape {
    /// The shape a recorded circuit needs.
    pub fn of(pce: &pce_cache::Pce) -> ParamShape {
        let s = pce.shape();
        let d = pce.densities();
        let n_inputs = s.n_inputs as usize;
        ParamShape {
            n_inputs,
            n_h: (s.n_rows as usize).next_power_of_two().max(1) - 1,
            n_l: s.n_aux as usize,
            n_a: n_inputs + d.a_aux().count_ones(),
            n_b: d.b_input().count_ones() + d.b_aux().count_ones(),
        }
    }
}

/// **INSECURE, BENCHMARKS ONLY: proofs made with these parameters do not verify.**
/// Parameters of the right shape whose points are cheap, known multiples of the
/// generators (`(seed + i)·G`, one running sum per chunk), unrelated to any circuit: the
/// discrete logs are public, so anyone can forge. Both `groth16::create_proof` and this
/// crate compute the same function of them, so a benchmark can still time the provers
/// and compare their proofs byte for byte, at a tiny fraction of the cost of
/// `groth16::generate_random_parameters` (one point addition per base instead of a
/// scalar multiplication plus the QAP evaluation).
pub fn insecure_bench_parameters(shape: ParamShape, seed: u64) -> groth16::Parameters<Bls12> {
    use group::{Curve, Group};
    use rayon::prelude::*;
    use std::sync::Arc;

    const CHUNK: usize = 1 << 14;
    fn points<G>(n: usize, start: u64) -> Vec<<G as Curve>::Affine>
    where
        G: Curve + Group<Scalar = Scalar> + Send + Sync,
        <G as Curve>::Affine: Send + Sync + Default + Copy,
    {
        let mut out = vec![<G as Curve>::Affine::default(); n];
        out.par_chunks_mut(CHUNK).enumerate().for_each(|(c, dst)| {
            let g = G::generator();
            let mut acc = g * Scalar::from(start + (c * CHUNK) as u64);
            let proj: Vec<G> = (0..dst.len())
                .map(|_| {
                    acc += g;
                    acc
                })
                .collect();
            G::batch_normalize(&proj, dst);
        });
        out
    }
    let g1 = |n: usize, tag: u64| points::<G1Projective>(n, seed.wrapping_add(tag << 40));
    let g2 = |n: usize, tag: u64| points::<G2Projective>(n, seed.wrapping_add(tag << 40));
    let one_g1 = |tag: u64| g1(1, tag)[0];
    let one_g2 = |tag: u64| g2(1, tag)[0];
    groth16::Parameters {
        vk: groth16::VerifyingKey {
            alpha_g1: one_g1(1),
            beta_g1: one_g1(2),
            beta_g2: one_g2(3),
            gamma_g2: one_g2(4),
            delta_g1: one_g1(5),
            delta_g2: one_g2(6),
            ic: g1(shape.n_inputs, 7),
        },
        h: Arc::new(g1(shape.n_h, 8)),
        l: Arc::new(g1(shape.n_l, 9)),
        a: Arc::new(g1(shape.n_a, 10)),
        b_g1: Arc::new(g1(shape.n_b, 11)),
        b_g2: Arc::new(g2(shape.n_b, 12)),
    }
}
