//! Shared by gpu-msm's tests: the seed every random input comes from.
#![allow(dead_code)]

use rand::rngs::StdRng;
use rand::SeedableRng;

/// `PINION_SEED` when set (to replay a run), else the clock; printed either way.
pub fn seed() -> u64 {
    let seed = std::env::var("PINION_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
        });
    eprintln!("seed = {seed}");
    seed
}

/// A generator seeded by [`seed`].
pub fn rng() -> StdRng {
    StdRng::seed_from_u64(seed())
}
