//! Parameter files: the full load path of `pinion prove`, and the verifying-key read of
//! `pinion verify`.

use std::sync::Arc;

use bls12_381::{Bls12, G1Projective, Scalar};
use groth16::VerifyingKey;
use groth16_prover::{ProvingKey, Synthesis};
use pinion::CircomCircuit;
use srs_store::{LoadOptions, ParamsFile, PointCheck};

use super::{self_checking_prover, Input, Target, Verdict};
use crate::fixtures::{params_layout, Fixtures};
use crate::mutate::Seed;

/// `srs-store` open, point check and load, then the prover over the loaded key.
pub struct Params {
    fx: Arc<Fixtures>,
}

impl Params {
    pub fn new(fx: &Arc<Fixtures>) -> Params {
        Params { fx: fx.clone() }
    }
}

impl Target for Params {
    fn name(&self) -> &'static str {
        "params"
    }

    fn about(&self) -> &'static str {
        "parameter files: srs-store open, check, load (random check level and window), a proving key, a self-checked proof"
    }

    fn seeds(&self) -> Vec<Seed> {
        vec![Seed {
            name: "cubic",
            layout: params_layout(&self.fx.files.params),
            bytes: self.fx.files.params.clone(),
        }]
    }

    fn run(&self, input: &Input<'_>) -> Verdict {
        let Ok(file) = ParamsFile::open(input.path) else {
            return Verdict::Rejected;
        };
        let check =
            [PointCheck::None, PointCheck::Curve, PointCheck::Full][(input.knob % 3) as usize];
        let options = LoadOptions {
            check,
            // Small windows: many of them, so the streaming and its error paths run.
            chunk_bytes: 1 + (input.knob >> 8) % 4096,
            ..LoadOptions::default()
        };
        if input.knob & 0x80 != 0 && file.check_points(check, &options).is_err() {
            return Verdict::Rejected;
        }
        let Ok(loaded) = file.load(input.budget, &options) else {
            return Verdict::Rejected;
        };
        assert!(
            input.budget.used_bytes() >= loaded.charged_bytes(),
            "a load holds {} bytes but the budget has {} charged",
            loaded.charged_bytes(),
            input.budget.used_bytes()
        );
        let Ok(key) = ProvingKey::from_loaded(loaded) else {
            return Verdict::Rejected;
        };
        assert_no_identity(key.vk());
        let Some(prover) = self_checking_prover(Arc::new(key), input.budget) else {
            return Verdict::Rejected;
        };
        let circuit = CircomCircuit::with_witness(&self.fx.r1cs, &self.fx.witness)
            .expect("the fixture witness satisfies the fixture circuit");
        match prover.prove(Synthesis::Plain, circuit, self.fx.randomness) {
            Err(_) => Verdict::Rejected,
            Ok(out) => {
                // Self-checked: a returned proof verifies under the key it was made with.
                assert!(
                    groth16::verify_proof(prover.key().prepared_vk(), &out.proof, &self.fx.public)
                        .is_ok(),
                    "the prover returned a proof that its own verifying key refuses"
                );
                Verdict::Accepted
            }
        }
    }
}

/// `pinion verify`'s key read (`pinion::statement::read_verifying_key`), then the original
/// proof verified under the key read: accepting it under a key whose verification points
/// differ from the original's is a finding.
pub struct VerifyingKeyRead {
    fx: Arc<Fixtures>,
}

impl VerifyingKeyRead {
    pub fn new(fx: &Arc<Fixtures>) -> VerifyingKeyRead {
        VerifyingKeyRead { fx: fx.clone() }
    }
}

/// Every key read refuses the point at infinity in all of the key's points.
fn assert_no_identity(vk: &VerifyingKey<Bls12>) {
    let g1 = [
        ("alpha_g1", vk.alpha_g1),
        ("beta_g1", vk.beta_g1),
        ("delta_g1", vk.delta_g1),
    ];
    for (name, p) in g1 {
        assert!(
            !bool::from(p.is_identity()),
            "a key with an identity {name} was read"
        );
    }
    let g2 = [
        ("beta_g2", vk.beta_g2),
        ("gamma_g2", vk.gamma_g2),
        ("delta_g2", vk.delta_g2),
    ];
    for (name, p) in g2 {
        assert!(
            !bool::from(p.is_identity()),
            "a key with an identity {name} was read"
        );
    }
    for (i, p) in vk.ic.iter().enumerate() {
        assert!(
            !bool::from(p.is_identity()),
            "a key with an identity ic[{i}] was read"
        );
    }
}

/// `ic[0] + Σ public[i]·ic[i + 1]`: the only use verification makes of `ic`, or `None`
/// when the lengths disagree (verification refuses those).
fn public_combination(vk: &VerifyingKey<Bls12>, public: &[Scalar]) -> Option<G1Projective> {
    if vk.ic.len() != public.len() + 1 {
        return None;
    }
    let mut acc = G1Projective::from(vk.ic[0]);
    for (x, p) in public.iter().zip(&vk.ic[1..]) {
        acc += *p * *x;
    }
    Some(acc)
}

/// What verification reads differs (`beta_g1` and `delta_g1` are the prover's only). `ic`
/// counts only through the combination with the public values: an `ic[i]` whose public
/// value is 0 may take any value and the proof still verifies, rightly.
fn verification_points_differ(
    a: &VerifyingKey<Bls12>,
    b: &VerifyingKey<Bls12>,
    public: &[Scalar],
) -> bool {
    a.alpha_g1 != b.alpha_g1
        || a.beta_g2 != b.beta_g2
        || a.gamma_g2 != b.gamma_g2
        || a.delta_g2 != b.delta_g2
        || public_combination(a, public) != public_combination(b, public)
}

impl Target for VerifyingKeyRead {
    fn name(&self) -> &'static str {
        "verifying-key"
    }

    fn about(&self) -> &'static str {
        "the verifying key at the start of a parameter file, as pinion verify reads it, then the original proof"
    }

    fn seeds(&self) -> Vec<Seed> {
        // Only the key and the header walk are read: cut the seed's layout to them.
        let mut layout = params_layout(&self.fx.files.params);
        let vk_end = srs_store::ParamsLayout::parse(&self.fx.files.params)
            .map_or(0, |l| l.vk_bytes() as usize);
        layout.points.retain(|p| p.offset < vk_end);
        vec![Seed {
            name: "cubic",
            layout,
            bytes: self.fx.files.params.clone(),
        }]
    }

    fn run(&self, input: &Input<'_>) -> Verdict {
        let Ok(vk) = pinion::statement::read_verifying_key(input.path) else {
            return Verdict::Rejected;
        };
        assert_no_identity(&vk);
        let pvk = groth16::prepare_verifying_key(&vk);
        if groth16::verify_proof(&pvk, &self.fx.proof, &self.fx.public).is_err() {
            return Verdict::Rejected;
        }
        if verification_points_differ(&vk, &self.fx.params.vk, &self.fx.public) {
            return Verdict::WronglyAccepted(
                "the original proof verified under a verifying key whose alpha_g1, beta_g2, gamma_g2, delta_g2 or ic (combined with the public values) differ from the key it was made for".into(),
            );
        }
        Verdict::Accepted
    }
}
