//! `pinion prove`: a circom circuit and witness, a parameter file, one proof.

use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context};
use groth16_prover::{
    BackendChoice, Prover, ProverConfig, ProverError, ProvingKey, Randomness, SelfCheck, Synthesis,
    ZkeyProver,
};
use memory_budget::Budget;
use pinion::decimal::{parse_scalar, scalar_to_decimal};
use pinion::CircomCircuit;
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::json;
use srs_store::{ParamsFile, PointCheck, SrsError, SrsSpec, SrsStore, StoreConfig};

use super::memory::MemoryReport;

use crate::ui::{self, Stage};
use crate::Outcome;

/// How `pinion prove` writes the proof.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ProofFormat {
    /// snarkjs's `proof.json`.
    Json,
    /// The 192-byte `groth16::Proof::write` encoding.
    Bin,
}

/// Arguments of `pinion prove --zkey`.
pub struct ZkeyProveArgs<'a> {
    pub zkey: &'a Path,
    pub witness: &'a Path,
    pub out: &'a Path,
    pub public_out: Option<&'a Path>,
    pub format: ProofFormat,
    pub seed: Option<u64>,
    pub rs: Option<(String, String)>,
    pub backend: BackendChoice,
    pub check: PointCheck,
    pub json: bool,
    pub budget: Option<&'a str>,
}

/// Proves from a snarkjs zkey and a circom witness; writes snarkjs's `proof.json` (or the
/// 192-byte encoding) and `public.json`.
pub fn run_zkey(a: ZkeyProveArgs<'_>) -> anyhow::Result<Outcome> {
    let budget = super::host_budget(a.budget)?;
    let (witness, _witness_charge) = super::read_wtns(a.witness, &budget)?;
    let rs = randomness(a.rs, a.seed)?;
    let stage = Stage::start(format!("loading zkey {}", a.zkey.display()));
    let config = ProverConfig {
        backend: a.backend,
        // One pairing check: a zkey holds no C matrix, so a witness that does not satisfy
        // the circuit is caught here.
        self_check: SelfCheck::Always,
    };
    let zk = ZkeyProver::open(a.zkey, &budget, config, a.check)
        .map_err(|e| super::name_format(anyhow::Error::new(e), a.zkey, "zkey"))?;
    stage.finish();
    let stage = Stage::start(format!("proving on the {}", zk.prover().backend_name()));
    let out = zk.prove(&witness, rs).map_err(|e| match e {
        ProverError::SelfCheckFailed { reason, .. } => anyhow::anyhow!(
            "the proof does not verify with the zkey's verifying key ({reason}): the witness does not satisfy this circuit (or the zkey is corrupt)"
        ),
        e => anyhow::Error::new(e).context(format!(
            "witness {} does not fit zkey {}",
            a.witness.display(),
            a.zkey.display()
        )),
    })?;
    stage.finish();
    let public = &witness[1..=zk.n_public()];
    match a.format {
        ProofFormat::Json => {
            let text = json_text(&pinion::snarkjs::proof_json(&out.proof));
            super::write_atomic(a.out, |w| std::io::Write::write_all(w, text.as_bytes()))?;
        }
        ProofFormat::Bin => super::write_atomic(a.out, |w| out.proof.write(w))?,
    }
    if let Some(p) = a.public_out {
        let text = json_text(&pinion::snarkjs::public_json(public));
        super::write_atomic(p, |w| std::io::Write::write_all(w, text.as_bytes()))?;
    }
    let t = out.timings;
    let memory = MemoryReport::now(&budget);
    if a.json {
        super::print_json(&json!({
            "proof": a.out.display().to_string(),
            "format": format!("{:?}", a.format).to_lowercase(),
            "public": public.iter().map(scalar_to_decimal).collect::<Vec<_>>(),
            "backend": out.backend,
            "domain_size": out.shape.domain_size,
            "n_vars": zk.n_vars(),
            "prove_seconds": t.total.as_secs_f64(),
            "self_checked": out.self_checked,
            "check": check_name(a.check),
            "memory": memory.json(),
        }));
    } else {
        println!(
            "wrote proof {} ({}): {} signals, {} public values, domain {}, backend {}, {} (verified against the zkey's key)",
            a.out.display(),
            match a.format {
                ProofFormat::Json => "snarkjs proof.json",
                ProofFormat::Bin => "192 bytes",
            },
            zk.n_vars(),
            zk.n_public(),
            out.shape.domain_size,
            out.backend,
            ui::secs(t.total)
        );
        if let Some(p) = a.public_out {
            println!("wrote public values {}", p.display());
        }
        memory.print();
    }
    Ok(Outcome::Success)
}

/// Pretty JSON with a final newline, as snarkjs writes its files.
pub fn json_text(v: &serde_json::Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string()) + "\n"
}

/// Arguments of `pinion prove`.
pub struct ProveArgs<'a> {
    pub params: &'a Path,
    pub r1cs: &'a Path,
    pub witness: &'a Path,
    pub out: &'a Path,
    pub public_out: Option<&'a Path>,
    pub seed: Option<u64>,
    pub rs: Option<(String, String)>,
    pub backend: BackendChoice,
    pub check: PointCheck,
    pub json: bool,
    pub budget: Option<&'a str>,
}

/// (r, s): given in decimal, derived from a seed, or fresh.
pub fn randomness(rs: Option<(String, String)>, seed: Option<u64>) -> anyhow::Result<Randomness> {
    Ok(match (rs, seed) {
        (Some((r, s)), _) => Randomness::new(
            parse_scalar(&r).context("bad --r")?,
            parse_scalar(&s).context("bad --s")?,
        ),
        (None, Some(seed)) => Randomness::random(&mut StdRng::seed_from_u64(seed)),
        (None, None) => Randomness::random(&mut rand::rng()),
    })
}

/// The process's parameter store and a key over its entry for `path`: loaded into host
/// memory under `budget` (charged at the load's peak first) with `check`; the GPU backend
/// moves it to the device tier on its first proof. The entry's id is the path.
pub fn load_key(
    path: &Path,
    budget: &Budget,
    check: PointCheck,
) -> Result<(SrsStore, ProvingKey), ProverError> {
    let stage = Stage::start(format!(
        "loading parameters {} (check: {})",
        path.display(),
        check_name(check)
    ));
    let store = SrsStore::new(budget.clone(), StoreConfig::default());
    let mut spec = SrsSpec::new(path.display().to_string(), path);
    spec.options.check = check;
    let key = ProvingKey::from_store(&store, spec.clone())?;
    store.preload(&spec)?;
    stage.finish();
    Ok((store, key))
}

/// `none`, `curve` or `full`.
pub fn check_name(check: PointCheck) -> &'static str {
    match check {
        PointCheck::None => "none",
        PointCheck::Curve => "curve",
        PointCheck::Full => "full",
    }
}

/// Whether loading failed because the memory budget had no room (the file may be fine).
pub fn is_budget_refusal(err: &ProverError) -> bool {
    matches!(err.root(), ProverError::Srs(SrsError::Budget { .. }))
}

/// A load failure as the user should read it: a refusal names the sizes and says the
/// file was not judged; anything else says the file is not usable.
pub fn load_error(err: ProverError, path: &Path) -> anyhow::Error {
    if is_budget_refusal(&err) {
        anyhow::Error::new(err).context(format!(
            "not enough memory budget to load parameters {} (the file was not judged; raise --memory-budget)",
            path.display()
        ))
    } else {
        super::name_format(
            anyhow::Error::new(err)
                .context(format!("parameters {} are not usable", path.display())),
            path,
            "parameters",
        )
    }
}

/// Explains the prover's refusals that mean "these parameters belong to another circuit".
pub fn explain(err: ProverError, params: &Path) -> anyhow::Error {
    let another = matches!(
        err.root(),
        ProverError::SelfCheckFailed { .. }
            | ProverError::KeyTooSmall { .. }
            | ProverError::InputCountMismatch { .. }
    );
    let err = match err.root() {
        // Its message names "partition 0", which means nothing for one proof.
        ProverError::SelfCheckFailed { reason, .. } => anyhow::anyhow!(
            "a proof made with them does not verify with their own verifying key ({reason})"
        ),
        _ => anyhow::Error::new(err),
    };
    if another {
        err.context(format!(
            "parameters {} do not fit this circuit (made for another circuit, or corrupt)",
            params.display()
        ))
    } else {
        err.context("proving failed")
    }
}

/// Proves and writes the proof.
pub fn run(a: ProveArgs<'_>) -> anyhow::Result<Outcome> {
    let budget = super::host_budget(a.budget)?;
    let (r1cs, _r1cs_charge) = super::read_r1cs(a.r1cs, &budget)?;
    let (witness, _witness_charge) = super::read_wtns(a.witness, &budget)?;
    let circuit = CircomCircuit::with_witness(&r1cs, &witness).with_context(|| {
        format!(
            "witness {} does not fit circuit {}",
            a.witness.display(),
            a.r1cs.display()
        )
    })?;
    let rs = randomness(a.rs, a.seed)?;

    // A cheap shape check from the headers before the load: one ic point per public value
    // plus ONE.
    let file = ParamsFile::open(a.params).map_err(|e| {
        super::name_format(
            anyhow::Error::new(e)
                .context(format!("parameters {} are not usable", a.params.display())),
            a.params,
            "parameters",
        )
    })?;
    let n_ic = u64::from(file.layout().ic().n_points());
    let n_expected = u64::from(r1cs.n_public()) + 1;
    if n_ic != n_expected {
        bail!(
            "parameters {} do not fit circuit {}: their verifying key has {n_ic} ic points, the circuit needs {n_expected} (one per public value, plus one)",
            a.params.display(),
            a.r1cs.display()
        );
    }
    drop(file);

    let (_store, key) =
        load_key(a.params, &budget, a.check).map_err(|e| load_error(e, a.params))?;
    let config = ProverConfig {
        backend: a.backend,
        // One pairing check: catches parameters of another circuit with the same sizes.
        self_check: SelfCheck::Always,
    };
    let prover =
        Prover::new(Arc::new(key), budget.clone(), config).context("cannot start the prover")?;
    let stage = Stage::start(format!("proving on the {}", prover.backend_name()));
    let out = prover
        .prove(Synthesis::Plain, circuit, rs)
        .map_err(|e| explain(e, a.params))?;
    stage.finish();

    super::write_atomic(a.out, |w| out.proof.write(w))?;
    let public: Vec<String> = r1cs
        .public_values(&witness)
        .iter()
        .map(scalar_to_decimal)
        .collect();
    if let Some(p) = a.public_out {
        let text = serde_json::to_string_pretty(&public).unwrap_or_default() + "\n";
        super::write_atomic(p, |w| std::io::Write::write_all(w, text.as_bytes()))?;
    }
    let t = out.timings;
    let memory = MemoryReport::now(&budget);
    if a.json {
        super::print_json(&json!({
            "proof": a.out.display().to_string(),
            "public": public,
            "backend": out.backend,
            "n_constraints": r1cs.constraints().len(),
            "n_wires": r1cs.n_wires(),
            "prove_seconds": t.total.as_secs_f64(),
            "self_checked": out.self_checked,
            "check": check_name(a.check),
            "memory": memory.json(),
        }));
    } else {
        println!(
            "wrote proof {} (192 bytes): {} constraints, {} public values, backend {}, {} (verified against the key)",
            a.out.display(),
            r1cs.constraints().len(),
            r1cs.n_public(),
            out.backend,
            ui::secs(t.total)
        );
        if let Some(p) = a.public_out {
            println!("wrote public values {}", p.display());
        }
        memory.print();
    }
    Ok(Outcome::Success)
}
