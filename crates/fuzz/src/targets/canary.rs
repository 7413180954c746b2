//! Canary targets: deliberately broken entry points the harness's own tests run, to show
//! that each detector fires (a panic, a hang, a memory-cap overrun, a signal death, a
//! wrong acceptance). Never part of a default run; selected only by name.

use super::{Input, Target, Verdict};
use crate::mutate::{Layout, Seed};

/// What a canary does with inputs whose bytes XOR to an odd value (about half of the
/// mutated inputs; the others, and the seed, are rejected, so a run sees both outcomes).
#[derive(Clone, Copy)]
enum Misbehaviour {
    Panic,
    Hang,
    Allocate,
    Abort,
    Accept,
}

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
            bytes: (0u8..64).collect(),
            layout: Layout::default(),
        }]
    }

    fn run(&self, input: &Input<'_>) -> Verdict {
        if input.bytes.iter().fold(0u8, |acc, b| acc ^ b) & 1 == 0 {
            return Verdict::Rejected;
        }
        match self.what {
            Misbehaviour::Panic => panic!("canary: odd parity"),
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
