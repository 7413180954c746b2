//! Parameter generation benchmark: `groth16_prover::setup::generate` (insecure, for testing)
//! against `groth16::generate_random_parameters` on the same circuit and RNG seed, and the
//! two files compared byte for byte.
//!
//! `cargo run --release -p groth16-prover --example setup_bench -- [n_blocks]` (SHA-256 of
//! `n_blocks` compression blocks, ~27k constraints each; 2 by default, 1 with
//! `PINION_BENCH_QUICK=1`).

use std::time::Instant;

use bls12_381::Bls12;
use groth16_prover::setup;
use groth16_prover::testing::Sha256Circuit;
use memory_budget::Budget;
use pce_cache::Pce;
use pinion_bench::{quick, BenchLine};
use rand::rngs::StdRng;
use rand::SeedableRng;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n_blocks: usize = match std::env::args().nth(1) {
        Some(a) => a.parse()?,
        None if quick() => 1,
        None => 2,
    };
    let circuit = Sha256Circuit::with_blocks(n_blocks, 1);
    let pce = Pce::record(circuit.clone())?;
    let size = format!("{} constraints", pce.shape().n_constraints);
    let budget = Budget::fixed(16 << 30);

    let t = Instant::now();
    let mut ours = Vec::new();
    let report = setup::generate(&pce, &mut StdRng::seed_from_u64(9), &budget, &mut ours)?;
    let ours_s = t.elapsed().as_secs_f64();

    let t = Instant::now();
    let params =
        groth16::generate_random_parameters::<Bls12, _, _>(circuit, &mut StdRng::seed_from_u64(9))?;
    let mut reference = Vec::new();
    params.write(&mut reference)?;
    let peer_s = t.elapsed().as_secs_f64();

    let identical = ours == reference;
    println!(
        "sha256 x{n_blocks} ({size}, {} threads): ours {ours_s:.3} s (qap {:?}, tables {:?} at w = {:?}, points {:?}; peak charged {} MiB), groth16 {peer_s:.3} s, {:.1}x, identical: {identical}",
        rayon::current_num_threads(),
        report.qap_time,
        report.table_time,
        report.windows,
        report.points_time,
        report.peak_charged_bytes >> 20,
        peer_s / ours_s
    );
    BenchLine {
        what: "parameter generation (sha256)",
        size,
        ours: ours_s * 1e3,
        peer: Some(peer_s * 1e3),
        unit: "ms",
        lower_is_better: true,
        target: Some("identical bytes"),
        pass: Some(identical),
    }
    .emit();
    if !identical {
        return Err("parameters differ from groth16's".into());
    }
    Ok(())
}
