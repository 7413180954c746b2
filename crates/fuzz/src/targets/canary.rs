//! Canary targets: deliberately broken entry points the harness's own tests run, to show
//! that each detector fires (a panic, a hang, a memory-cap overrun, a signal death, a
//! wrong acceptance). Never part of a default run; selected only by name.

use super::{Input, Target, Verdict};
use crate::mutate::{Layout, Seed};

/// What a canary does with three mutated inputs in four: those whose knob (a hash of the
/// bytes) is not a multiple of 4. The others, and the seed itself, are rejected, so a run
/// sees both outcomes. A hash rather than a property of the bytes, because most mutations
/// keep a simple property (the parity of the bytes' low bits, say) of the seed: with that
/// rule one run of 12 inputs in about 1,300 had no misbehaviour at all (seeds 1..=1300), and
/// the harness's tests, which ask for at least one, failed CI now and then. With the hash,
/// 11 mutated inputs all miss with probability 4^-11.
#[derive(Clone, Copy)]
enum Misbehaviour {
    Panic,
    Hang,
    Allocate,
    Abort,
    Accept,
}

/// The one seed every canary starts from: 0, 1, ..., 63.
const SEED_BYTES: [u8; 64] = {
    let mut b = [0u8; 64];
    let mut i = 0;
    while i < b.len() {
        b[i] = i as u8;
        i += 1;
    }
    b
};

struct Canary {
    name: &'static str,
    about: &'static str,
    what: Misbehaviour,
}

/// The canaries: `canary-panic`, `canary-hang`, `canary-alloc`, `canary-abort`,
/// `canary-accept`.
pub fn canaries() -> Vec<Box<dyn Target>> {
    [
        ("canary-panic", "panics", Misbehaviour::Panic),
        ("canary-hang", "never returns", Misbehaviour::Hang),
        (
            "canary-alloc",
            "allocates 8 GiB without charging it",
            Misbehaviour::Allocate,
        ),
        ("canary-abort", "aborts the process", Misbehaviour::Abort),
        (
            "canary-accept",
            "accepts a mutated statement",
            Misbehaviour::Accept,
        ),
    ]
    .into_iter()
    .map(|(name, about, what)| Box::new(Canary { name, about, what }) as Box<dyn Target>)
    .collect()
}

impl Target for Canary {
    fn name(&self) -> &'static str {
        self.name
    }

    fn about(&self) -> &'static str {
        self.about
    }

    fn seeds(&self) -> Vec<Seed> {
        vec![Seed {
            name: "bytes",
            bytes: SEED_BYTES.to_vec(),
            layout: Layout::default(),
        }]
    }

    fn run(&self, input: &Input<'_>) -> Verdict {
        if input.knob % 4 == 0 || input.bytes == SEED_BYTES {
            return Verdict::Rejected;
        }
        match self.what {
            Misbehaviour::Panic => panic!("canary: a misbehaving input"),
            Misbehaviour::Hang => loop {
                std::thread::sleep(std::time::Duration::from_millis(50));
            },
            Misbehaviour::Allocate => {
                let v = vec![1u8; 8 << 30];
                Verdict::WronglyAccepted(format!("unreachable: {} bytes", v.len()))
            }
            Misbehaviour::Abort => std::process::abort(),
            Misbehaviour::Accept => Verdict::WronglyAccepted("canary: accepted".into()),
        }
    }
}
