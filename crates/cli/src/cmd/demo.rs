//! `pinion demo`: the main job on a built-in SHA-256 preimage circuit: parameters (made
//! once, cached), PCE (recorded once, cached), one proof, verification, a timing breakdown
//! and a memory report.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use groth16_prover::testing::Sha256Circuit;
use groth16_prover::{BackendChoice, Prover, ProverConfig, Randomness, SelfCheck, Synthesis};
use pce_cache::{CacheConfig, CircuitKey, PceCache, PceSource};
use serde_json::json;
use srs_store::PointCheck;

use super::memory::MemoryReport;
use super::prove::{check_name, is_budget_refusal, load_error, load_key};

use crate::ui::{self, Stage};
use crate::Outcome;

/// Seed of the demo's preimage (the circuit is the same on every run and machine).
const CIRCUIT_SEED: u64 = 0x7069_6e69_6f6e;
/// Constraints of this circuit: `PER_BLOCK · n_blocks − SAVED` (bellman's SHA-256 gadget;
/// measured with `pinion pce extract --demo`; only used to pick n_blocks). Two blocks,
/// the default, are 52,736 constraints: an H domain of 2^16.
const PER_BLOCK: u64 = 26_704;
const SAVED: u64 = 672;
/// Bumped when the circuit or file layout changes, so old cache files are not reused.
const CACHE_VERSION: u32 = 1;

/// Arguments of `pinion demo`.
pub struct DemoArgs<'a> {
    pub constraints: u64,
    pub cache_dir: Option<PathBuf>,
    pub backend: BackendChoice,
    pub check: PointCheck,
    pub json: bool,
    pub budget: Option<&'a str>,
}

/// The demo circuit closest to `n_constraints` (at least one block), and its block count.
pub fn circuit_for(n_constraints: u64) -> (Sha256Circuit, usize) {
    let n_blocks = ((n_constraints + SAVED + PER_BLOCK / 2) / PER_BLOCK).max(1);
    let n_blocks = usize::try_from(n_blocks).unwrap_or(usize::MAX).min(1 << 16);
    (Sha256Circuit::with_blocks(n_blocks, CIRCUIT_SEED), n_blocks)
}

/// `$PINION_CACHE_DIR`, else `$XDG_CACHE_HOME/pinion`, else `~/.cache/pinion`.
fn default_cache_dir() -> anyhow::Result<PathBuf> {
    let var = |k| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(d) = var("PINION_CACHE_DIR") {
        return Ok(d);
    }
    if let Some(d) = var("XDG_CACHE_HOME") {
        return Ok(d.join("pinion"));
    }
    var("HOME")
        .map(|h| h.join(".cache").join("pinion"))
        .context("no cache folder: set PINION_CACHE_DIR or HOME, or pass --cache-dir")
}

/// The common memory report plus the demo's budget figures.
fn with_budget(
    mut memory: serde_json::Value,
    snapshot: &memory_budget::BudgetSnapshot,
    det: &Option<memory_budget::Detection>,
    proof_peak: u64,
) -> serde_json::Value {
    memory["budget_bytes"] = json!(snapshot.total_bytes);
    memory["limit_bytes"] = json!(det.as_ref().map(|d| d.limits.limit_bytes));
    memory["limit_source"] = json!(det
        .as_ref()
        .map(|d| d.limits.winning_source().kind.as_str()));
    memory["proof_peak_charged_bytes"] = json!(proof_peak);
    memory
}

/// Whether a GPU is visible (driver and at least one device).
fn gpu_present() -> bool {
    gpu_device::driver_present() && gpu_device::device_count().is_ok_and(|n| n > 0)
}

/// Runs the demo.
pub fn run(a: DemoArgs<'_>) -> anyhow::Result<Outcome> {
    let start = Instant::now();
    let budget = super::host_budget(a.budget)?;
    let cache_dir = match a.cache_dir {
        Some(d) => d,
        None => default_cache_dir()?,
    };
    std::fs::create_dir_all(&cache_dir)
        .with_context(|| format!("cannot create cache folder {}", cache_dir.display()))?;
    let (circuit, n_blocks) = circuit_for(a.constraints);
    let id = format!("demo-sha256-{n_blocks}b-v{CACHE_VERSION}");
    let params_path = cache_dir.join(format!("{id}.params"));
    ui::note(format!(
        "sha-256 preimage circuit, {n_blocks} blocks ({} bytes of preimage); cache folder {}",
        circuit.preimage.len(),
        cache_dir.display()
    ));

    // PCE: recorded once, then mapped from the cache folder.
    let stage = Stage::start("pce: record or load");
    let cache = PceCache::new(budget.clone(), CacheConfig::with_dir(&cache_dir))
        .context("cannot open the pce cache")?;
    let pce = cache
        .get_or_extract(&CircuitKey::new(id.clone()), || circuit.clone())
        .context("cannot record the demo circuit's pce")?;
    let pce_time = stage.finish();
    let pce_source = match pce.source() {
        PceSource::Memory => "memory",
        PceSource::Disk => "loaded from the cache",
        PceSource::Extracted => "recorded now",
    };
    let shape = pce.shape();
    ui::note(format!(
        "pce {pce_source}: {} constraints, {} rows, {} non-zeros",
        shape.n_constraints,
        shape.n_rows,
        pce.n_nonzeros()
    ));

    // Parameters: generated once (slow), then loaded through the store. A file that does
    // not load for lack of budget is not judged (and never overwritten); only a file that
    // is unusable is made again.
    let mut setup_time = None;
    let load = || {
        let t = Instant::now();
        load_key(&params_path, &budget, a.check).map(|k| (k, t.elapsed()))
    };
    let ((_store, key), load_time) = match params_path.exists().then(load) {
        Some(Ok(loaded)) => loaded,
        Some(Err(e)) if is_budget_refusal(&e) => return Err(load_error(e, &params_path)),
        found => {
            if let Some(Err(e)) = found {
                ui::note(format!(
                    "cached parameters unusable ({}); generating them again",
                    ui::error_line(&load_error(e, &params_path))
                ));
            }
            let stage = Stage::start(format!(
                "generating parameters (once; for testing only: insecure) into {}",
                params_path.display()
            ));
            // Pinion's generator from the recorded PCE (all cores; charges what it holds).
            super::write_atomic(&params_path, |w| {
                groth16_prover::setup::generate(&pce, &mut rand::rng(), &budget, w)
                    .map(|_| ())
                    .map_err(std::io::Error::other)
            })
            .context("parameter generation failed")?;
            setup_time = Some(stage.finish());
            load().map_err(|e| load_error(e, &params_path))?
        }
    };

    let backend = match a.backend {
        BackendChoice::Auto if gpu_present() => {
            match groth16_prover::GpuBackend::new(budget.clone()) {
                Ok(_) => BackendChoice::Gpu,
                Err(e) => {
                    ui::note(format!(
                        "a gpu is present but cannot be used ({e}); proving on the cpu"
                    ));
                    BackendChoice::Cpu
                }
            }
        }
        other => other,
    };
    let config = ProverConfig {
        backend,
        self_check: SelfCheck::Never,
    };
    let prover =
        Prover::new(Arc::new(key), budget.clone(), config).context("cannot start the prover")?;
    let rs = Randomness::random(&mut rand::rng());
    let public = circuit.public_inputs();
    let stage = Stage::start(format!("proving on the {}", prover.backend_name()));
    let out = prover
        .prove(Synthesis::Pce(&pce), circuit, rs)
        .context("proving failed")?;
    stage.finish();

    let t = Instant::now();
    let verdict = groth16::verify_proof(prover.key().prepared_vk(), &out.proof, &public);
    let verify_time = t.elapsed();
    let total = start.elapsed();
    let snapshot = budget.snapshot();
    let memory = MemoryReport::now(&budget);
    let det = budget.detection().cloned();

    let tm = out.timings;
    // (json key, label, time)
    let phases: Vec<(&str, &str, Duration)> = vec![
        (
            "setup",
            "parameters (generate, once)",
            setup_time.unwrap_or_default(),
        ),
        ("pce", "pce (record or load)", pce_time),
        ("srs_load", "parameters (load)", load_time),
        ("synthesis", "synthesis (witness only)", tm.synthesis),
        ("abc", "a, b, c (pce mat-vec)", tm.abc_evaluation),
        ("witness_check", "witness check", tm.witness_check),
        ("h", "h (6 ntts)", tm.h),
        ("msm_h", "msm h", tm.msm_h),
        ("msm_l", "msm l", tm.msm_l),
        ("msm_a", "msm a", tm.msm_a),
        ("msm_b_g1", "msm b_g1", tm.msm_b_g1),
        ("msm_b_g2", "msm b_g2", tm.msm_b_g2),
        ("assembly", "assembly", tm.assembly),
        ("prove", "proof total", tm.total),
        ("verify", "verify", verify_time),
        ("total", "demo total", total),
    ];
    if a.json {
        let timings: serde_json::Map<String, serde_json::Value> = phases
            .iter()
            .map(|(k, _, d)| (k.to_string(), json!(d.as_secs_f64())))
            .collect();
        super::print_json(&json!({
            "valid": verdict.is_ok(),
            "n_blocks": n_blocks,
            "n_constraints": shape.n_constraints,
            "n_rows": shape.n_rows,
            "domain_size": out.shape.domain_size,
            "backend": out.backend,
            "cache_dir": cache_dir.display().to_string(),
            "params": params_path.display().to_string(),
            "params_generated": setup_time.is_some(),
            "pce_source": pce_source,
            "check": check_name(a.check),
            "seconds": timings,
            "memory": with_budget(memory.json(), &snapshot, &det, out.peak_charged_bytes),
        }));
    } else {
        println!(
            "demo: sha-256 preimage, {n_blocks} blocks: {} constraints, {} rows (domain {}), {} public inputs",
            shape.n_constraints,
            shape.n_rows,
            out.shape.domain_size,
            public.len()
        );
        println!("cache folder: {}", cache_dir.display());
        println!(
            "parameters: {} ({})",
            params_path.display(),
            if setup_time.is_some() {
                "generated now; for testing only: insecure"
            } else {
                "reused"
            }
        );
        println!("pce: {pce_source}");
        println!("backend: {}", out.backend);
        println!(
            "proof: {}",
            match &verdict {
                Ok(()) => "valid".to_string(),
                Err(e) => format!("INVALID ({e})"),
            }
        );
        println!("timings:");
        for (_, name, d) in &phases {
            println!("  {name:<28} {:>10}", ui::secs(*d));
        }
        memory.print();
        match &det {
            Some(d) => println!(
                "  budget {} (limit {} from {}); this proof's working set peaked at {}",
                ui::bytes(snapshot.total_bytes),
                memory_budget::format_bytes(d.limits.limit_bytes),
                d.limits.winning_source().kind.as_str(),
                memory_budget::format_bytes(out.peak_charged_bytes)
            ),
            None => println!(
                "  budget {}; this proof's working set peaked at {}",
                ui::bytes(snapshot.total_bytes),
                memory_budget::format_bytes(out.peak_charged_bytes)
            ),
        }
    }
    Ok(if verdict.is_ok() {
        Outcome::Success
    } else {
        Outcome::Failure
    })
}
