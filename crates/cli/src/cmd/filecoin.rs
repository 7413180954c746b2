//! `pinion filecoin ...`: Filecoin's circuits from the inputs Curio hands cuzk, proved with
//! the parameters of a Filecoin parameter folder; insecure parameters for tests.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context};
use groth16_prover::{BackendChoice, ProverConfig};
use pinion_filecoin::porep::C2Target;
use pinion_filecoin::post::PostRequest;
use pinion_filecoin::snap::SnapRequest;
use pinion_filecoin::{job, params, porep, post, snap, PartitionJob, ProofKind, ProveOptions};
use serde::de::DeserializeOwned;

use crate::cmd::{host_budget, print_json, read_charged, write_atomic};
use crate::Outcome;

/// What every proving subcommand shares.
pub struct Common<'a> {
    /// The Filecoin parameter folder.
    pub params_dir: &'a Path,
    /// Where the proof bytes go.
    pub out: &'a Path,
    /// CPU, GPU or whichever runs.
    pub backend: BackendChoice,
    /// Print a JSON report.
    pub json: bool,
    /// `--memory-budget`.
    pub budget: Option<&'a str>,
}

/// A proof type by its filecoin-proofs-api name (`StackedDrg32GiBV1_1`, ...).
fn proof_type<T: DeserializeOwned>(name: &str, what: &str) -> anyhow::Result<T> {
    serde_json::from_value(serde_json::Value::String(name.to_string())).with_context(|| {
        format!("{name:?} is not a {what} proof type (filecoin-proofs-api's names, e.g. StackedDrg2KiBV1_1)")
    })
}

/// 32 bytes from 64 hex digits.
pub fn hex32(s: &str, what: &str) -> anyhow::Result<[u8; 32]> {
    let s = s.strip_prefix("0x").unwrap_or(s);
    if s.len() != 64 {
        bail!(
            "{what} must be 64 hex digits (32 bytes), found {} characters",
            s.len()
        );
    }
    let mut out = [0u8; 32];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16)
            .with_context(|| format!("{what}: {:?} is not hex", &s[2 * i..2 * i + 2]))?;
    }
    Ok(out)
}

fn read_all(
    paths: &[PathBuf],
    budget: &memory_budget::Budget,
    what: &'static str,
) -> anyhow::Result<Vec<Vec<u8>>> {
    paths
        .iter()
        .map(|p| read_charged(p, budget, what).map(|(bytes, _)| bytes))
        .collect()
}

fn prove(
    job: &dyn PartitionJob,
    c: &Common<'_>,
    budget: memory_budget::Budget,
) -> anyhow::Result<Outcome> {
    let id = job.circuit_id().clone();
    let mut opts = ProveOptions::new(c.params_dir, budget);
    opts.config = ProverConfig {
        backend: c.backend,
        ..ProverConfig::default()
    };
    let start = Instant::now();
    let proof = job::prove(job, &opts).with_context(|| format!("cannot prove {id}"))?;
    let took = start.elapsed();
    write_atomic(c.out, |w| std::io::Write::write_all(w, &proof))?;
    if c.json {
        print_json(&serde_json::json!({
            "circuit": id.to_string(),
            "params_file": id.params_file_name(),
            "partitions": job.n_partitions(),
            "proof_bytes": proof.len(),
            "out": c.out.display().to_string(),
            "seconds": took.as_secs_f64(),
        }));
    } else {
        println!(
            "{id}: {} partition proof(s), {} bytes in {:.2} s -> {}",
            job.n_partitions(),
            proof.len(),
            took.as_secs_f64(),
            c.out.display()
        );
    }
    Ok(Outcome::Success)
}

/// `pinion filecoin c2`.
pub fn c2(
    c1: &Path,
    miner_id: u64,
    sector_number: Option<u64>,
    expect: Option<&str>,
    c: &Common<'_>,
) -> anyhow::Result<Outcome> {
    let budget = host_budget(c.budget)?;
    let (bytes, charge) = read_charged(c1, &budget, "c1 output")?;
    let expect = expect.map(|e| proof_type(e, "seal")).transpose()?;
    let parsed = porep::parse_c1(&bytes)
        .with_context(|| format!("c1 output {} is not usable", c1.display()))?;
    drop(bytes);
    drop(charge);
    let job = porep::porep_job(
        parsed,
        &C2Target {
            miner_id,
            sector_number,
            expect,
        },
    )
    .with_context(|| format!("c1 output {} is refused", c1.display()))?;
    prove(job.as_ref(), c, budget)
}

/// `pinion filecoin window-post` and `winning-post`.
pub fn post(
    kind: ProofKind,
    proof: &str,
    vanilla: &[PathBuf],
    randomness: &str,
    miner_id: u64,
    partition: Option<usize>,
    c: &Common<'_>,
) -> anyhow::Result<Outcome> {
    let budget = host_budget(c.budget)?;
    let req = PostRequest {
        proof: proof_type(proof, "PoSt")?,
        vanilla_proofs: read_all(vanilla, &budget, "vanilla proof")?,
        randomness: hex32(randomness, "--randomness")?,
        miner_id,
        partition,
    };
    let job = post::post_job(kind, &req).context("the PoSt inputs are refused")?;
    prove(job.as_ref(), c, budget)
}

/// `pinion filecoin snap`.
pub fn snap(
    proof: &str,
    partition_proofs: &[PathBuf],
    comm_r_old: &str,
    comm_r_new: &str,
    comm_d_new: &str,
    c: &Common<'_>,
) -> anyhow::Result<Outcome> {
    let budget = host_budget(c.budget)?;
    let req = SnapRequest {
        proof: proof_type(proof, "update")?,
        partition_proofs: read_all(partition_proofs, &budget, "partition proof")?,
        comm_r_old: hex32(comm_r_old, "--comm-r-old")?,
        comm_r_new: hex32(comm_r_new, "--comm-r-new")?,
        comm_d_new: hex32(comm_d_new, "--comm-d-new")?,
    };
    let job = snap::snap_job(&req).context("the SnapDeals inputs are refused")?;
    prove(job.as_ref(), c, budget)
}

/// `pinion filecoin params --insecure`: parameters under Filecoin's names, printed as
/// insecure.
pub fn insecure_params(
    kind: &str,
    proof: &str,
    params_dir: &Path,
    seed: u64,
    budget: Option<&str>,
) -> anyhow::Result<Outcome> {
    let budget = host_budget(budget)?;
    let job = match kind {
        "porep" => porep::blank_job(proof_type(proof, "seal")?),
        "window-post" | "winning-post" => post::blank_job(proof_type(proof, "PoSt")?),
        "snap" => snap::blank_job(proof_type(proof, "update")?),
        other => bail!("unknown circuit kind {other:?} (porep, window-post, winning-post, snap)"),
    }
    .context("cannot build the blank circuit")?;
    eprintln!(
        "pinion: generating INSECURE parameters for {} (seed {seed}): anyone who knows the seed can forge proofs; for tests and benchmarks only",
        job.circuit_id()
    );
    let start = Instant::now();
    let out = params::generate_insecure(job.as_ref(), params_dir, seed, &budget)
        .context("parameter generation failed")?;
    println!(
        "INSECURE parameters for {} in {:.1} s: {} ({} bytes) and {}",
        job.circuit_id(),
        start.elapsed().as_secs_f64(),
        out.params.display(),
        out.report.bytes_written,
        out.vk.display()
    );
    Ok(Outcome::Success)
}
