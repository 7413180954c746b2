//! Shared test helpers: seeded randomness, a sizeable toy circuit, temp files, and an
//! element-by-element comparison against `groth16::Parameters::read`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use bellman::{Circuit, ConstraintSystem, SynthesisError};
use bls12_381::{Bls12, G1Affine, G2Affine, Scalar};
use bls_repr::{G1AffineRepr, G2AffineRepr};
use groth16::Parameters;
use rand::rngs::StdRng;
use rand::SeedableRng;
use srs_store::{LoadedParams, VerifyingKeyRepr};

/// Seed from `PINION_SEED`, else the clock; printed so a failure replays.
pub fn seed() -> u64 {
    let seed = std::env::var("PINION_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        });
    eprintln!("seed = {seed}");
    seed
}

pub fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

/// `n_inputs` public inputs each multiplied by a secret, and a chain of `n_squarings`
/// squarings of it: every auxiliary variable is constrained, as the generator requires.
pub struct Chain {
    pub n_inputs: usize,
    pub n_squarings: usize,
}

impl Circuit<Scalar> for Chain {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let a = cs.alloc(|| "a", || Ok(Scalar::from(3u64)))?;
        for j in 0..self.n_inputs {
            let x = cs.alloc_input(|| format!("x{j}"), || Ok(Scalar::from(j as u64 + 1)))?;
            let t = cs.alloc(|| format!("t{j}"), || Ok(Scalar::from(3 * (j as u64 + 1))))?;
            cs.enforce(
                || format!("x{j}*a=t{j}"),
                |lc| lc + x,
                |lc| lc + a,
                |lc| lc + t,
            );
        }
        let mut v = a;
        for i in 0..self.n_squarings {
            let next = cs.alloc(|| format!("v{i}"), || Ok(Scalar::from(0u64)))?;
            cs.enforce(
                || format!("sq{i}"),
                |lc| lc + v,
                |lc| lc + v,
                |lc| lc + next,
            );
            v = next;
        }
        Ok(())
    }
}

pub fn generate(seed: u64, n_inputs: usize, n_squarings: usize) -> Parameters<Bls12> {
    let mut rng = rng(seed);
    groth16::generate_random_parameters::<Bls12, _, _>(
        Chain {
            n_inputs,
            n_squarings,
        },
        &mut rng,
    )
    .expect("parameter generation")
}

pub fn to_bytes(params: &Parameters<Bls12>) -> Vec<u8> {
    let mut v = Vec::new();
    params.write(&mut v).expect("write to vec");
    v
}

/// A temp directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let p =
            std::env::temp_dir().join(format!("pinion-srs-{tag}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&p).expect("create temp dir");
        TempDir(p)
    }
    pub fn write(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, bytes).expect("write temp file");
        p
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn same_g1(what: &str, i: usize, ours: &G1AffineRepr, theirs: &G1Affine) {
    assert_eq!(
        *ours,
        G1AffineRepr::from_affine(theirs),
        "{what}[{i}] repr differs"
    );
    assert_eq!(
        ours.to_affine().expect("valid point"),
        *theirs,
        "{what}[{i}] point differs"
    );
}

fn same_g2(what: &str, i: usize, ours: &G2AffineRepr, theirs: &G2Affine) {
    assert_eq!(
        *ours,
        G2AffineRepr::from_affine(theirs),
        "{what}[{i}] repr differs"
    );
    assert_eq!(
        ours.to_affine().expect("valid point"),
        *theirs,
        "{what}[{i}] point differs"
    );
}

pub fn assert_same_vk(vk: &VerifyingKeyRepr, r: &groth16::VerifyingKey<Bls12>) {
    same_g1("alpha_g1", 0, &vk.alpha_g1, &r.alpha_g1);
    same_g1("beta_g1", 0, &vk.beta_g1, &r.beta_g1);
    same_g2("beta_g2", 0, &vk.beta_g2, &r.beta_g2);
    same_g2("gamma_g2", 0, &vk.gamma_g2, &r.gamma_g2);
    same_g1("delta_g1", 0, &vk.delta_g1, &r.delta_g1);
    same_g2("delta_g2", 0, &vk.delta_g2, &r.delta_g2);
    assert_eq!(vk.ic.len(), r.ic.len(), "ic length");
    for (i, (o, t)) in vk.ic.iter().zip(&r.ic).enumerate() {
        same_g1("ic", i, o, t);
    }
}

/// Compares every element of `loaded` with what the reference reader returns for `bytes`.
pub fn assert_same(loaded: &LoadedParams, bytes: &[u8]) {
    let r = Parameters::<Bls12>::read(bytes, true).expect("reference reader accepts the file");
    assert_same_vk(loaded.vk(), &r.vk);
    let g1s = [
        ("h_query", loaded.h_query(), &r.h),
        ("l_query", loaded.l_query(), &r.l),
        ("a_query", loaded.a_query(), &r.a),
        ("b_g1_query", loaded.b_g1_query(), &r.b_g1),
    ];
    for (what, ours, theirs) in g1s {
        let ours = ours.as_host().expect("host bases");
        assert_eq!(ours.len(), theirs.len(), "{what} length");
        for (i, (o, t)) in ours.iter().zip(theirs.iter()).enumerate() {
            same_g1(what, i, o, t);
        }
    }
    let ours = loaded.b_g2_query().as_host().expect("host bases");
    assert_eq!(ours.len(), r.b_g2.len(), "b_g2_query length");
    for (i, (o, t)) in ours.iter().zip(r.b_g2.iter()).enumerate() {
        same_g2("b_g2_query", i, o, t);
    }
}

/// The committed fixture, relative to this crate.
pub fn fixture_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/srs/chain-2-12.params")
}

/// Seed and shape the fixture was generated with.
pub const FIXTURE_SEED: u64 = 20261130;
pub const FIXTURE_INPUTS: usize = 2;
pub const FIXTURE_SQUARINGS: usize = 12;
