//! `pinion serve`: the engine as a daemon (pinion-daemon), with circom as its circuit
//! format.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use bellman::{Circuit, ConstraintSystem, SynthesisError};
use bls12_381::Scalar;
use daemon::frontend::{Frontend, FrontendCircuit, Witness, WitnessCharge, WitnessReader};
use daemon::{Config, DaemonError, Devices, Listen, Server, Stop};
use ff::Field;
use memory_budget::{Budget, BudgetError, Category, Reservation, SizeSpec};
use pce_cache::{CircuitKey, PceCache, PceError, PceHandle};
use pinion::circom::{parse_wtns, R1cs};
use pinion::decimal::scalar_to_decimal;
use pinion::CircomCircuit;

use crate::{ui, Outcome};

/// Arguments of `pinion serve`.
pub struct ServeArgs {
    pub config: Option<PathBuf>,
    pub listen: Option<String>,
    pub status_listen: Option<String>,
    pub memory_budget: Option<String>,
    pub cpu: bool,
    pub gpu: bool,
    pub abort: bool,
}

/// The settings: the file's (or the defaults), then the flags.
fn config(a: &ServeArgs) -> anyhow::Result<Config> {
    let mut c = match &a.config {
        Some(p) => Config::load(p)?,
        None => Config::default(),
    };
    if let Some(l) = &a.listen {
        c.listen = Listen::parse("--listen", l)?;
    }
    if let Some(s) = &a.status_listen {
        c.status_listen = match Listen::parse("--status-listen", s)? {
            Listen::Tcp(addr) => Some(addr),
            Listen::Unix(_) => {
                anyhow::bail!("--status-listen: the status server listens on TCP (HOST:PORT)")
            }
        };
    }
    if let Some(b) = &a.memory_budget {
        c.total_budget = Some(SizeSpec::parse(b).context("bad --memory-budget")?);
    }
    if a.cpu {
        c.devices = Devices::Cpu;
    }
    if a.gpu {
        c.devices = Devices::Gpu;
    }
    Ok(c)
}

/// Runs the daemon until SIGTERM/SIGINT.
pub fn run(a: ServeArgs) -> anyhow::Result<Outcome> {
    let config = config(&a)?;
    for key in &config.ignored {
        ui::note(format!(
            "config: {key} is a cuzk setting this daemon ignores"
        ));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("pinion-serve")
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let server = Server::start(config, Arc::new(CircomFrontend), None).await?;
        let first = if a.abort { Stop::Abort } else { Stop::Graceful };
        let _signals = daemon::stop_on_signals(server.stopper(), first)?;
        let status = server
            .status_addr()
            .map_or("off".to_string(), |s| format!("http://{s}"));
        // One line on stdout: what a supervisor (or a test) waits for.
        println!("pinion serve: grpc {} status {status}", server.grpc_addr());
        ui::note(format!(
            "serving cuzk.v1 and pinion.v1 on {}; budget {}; SIGTERM/SIGINT stops (twice: cancel running jobs)",
            server.grpc_addr(),
            ui::bytes(server.daemon().budget().total_bytes())
        ));
        server.wait().await?;
        ui::note("stopped");
        Ok::<(), DaemonError>(())
    })?;
    Ok(Outcome::Success)
}

/// circom `.r1cs` circuits and `.wtns` witnesses.
pub struct CircomFrontend;

fn unusable(what: &str, e: impl std::fmt::Display) -> DaemonError {
    DaemonError::Unusable {
        what: what.to_string(),
        reason: e.to_string(),
    }
}

fn budget_error(what: &str, bytes: u64, e: BudgetError) -> DaemonError {
    DaemonError::Budget {
        what: what.to_string(),
        requested_bytes: bytes,
        reason: e.to_string(),
    }
}

impl Frontend for CircomFrontend {
    fn name(&self) -> &'static str {
        "circom"
    }

    fn load_circuit(
        &self,
        bytes: &[u8],
        budget: &Budget,
    ) -> Result<Box<dyn FrontendCircuit>, DaemonError> {
        let bound = R1cs::parsed_bytes_bound(bytes).map_err(|e| unusable("circuit", e))?;
        let mut charge = budget
            .try_reserve(bound, Category::Transient, "circuit parse")
            .map_err(|e| budget_error("parsing the circuit", bound, e))?;
        let r1cs = R1cs::parse(bytes).map_err(|e| unusable("circuit", e))?;
        charge.shrink_to(r1cs.heap_bytes());
        Ok(Box::new(CircomSource {
            r1cs,
            _charge: charge,
        }))
    }
}

struct CircomSource {
    r1cs: R1cs,
    _charge: Reservation,
}

impl FrontendCircuit for CircomSource {
    fn n_public(&self) -> u32 {
        self.r1cs.n_public()
    }

    fn n_constraints(&self) -> u64 {
        self.r1cs.constraints().len() as u64
    }

    fn record(&self, pces: &PceCache, key: &CircuitKey) -> Result<PceHandle, DaemonError> {
        pces.get_or_extract(key, || CircomCircuit::shape_only(&self.r1cs))
            .map_err(|e| match e {
                PceError::Budget {
                    requested_bytes, ..
                } => DaemonError::Budget {
                    what: "recording the circuit".into(),
                    requested_bytes,
                    reason: e.to_string(),
                },
                other => unusable("circuit", other),
            })
    }

    fn witness_reader(&self) -> Arc<dyn WitnessReader> {
        Arc::new(CircomWitnessReader {
            n_wires: self.r1cs.n_wires(),
            n_public: self.r1cs.n_public(),
        })
    }
}

/// What reading a witness needs of its circuit.
struct CircomWitnessReader {
    n_wires: u32,
    n_public: u32,
}

impl WitnessReader for CircomWitnessReader {
    fn read(&self, bytes: &[u8], mut charge: WitnessCharge) -> Result<Witness, DaemonError> {
        // `charge` holds the file's size: the values take at most that.
        let values = parse_wtns(bytes).map_err(|e| unusable("witness", e))?;
        if values.len() != self.n_wires as usize {
            return Err(unusable(
                "witness",
                format!(
                    "it has {} values, the circuit has {} wires",
                    values.len(),
                    self.n_wires
                ),
            ));
        }
        if values.first() != Some(&Scalar::ONE) {
            return Err(unusable("witness", "value 0 (the constant wire) is not 1"));
        }
        charge.shrink_to(values.len() as u64 * 32);
        let public_values = values[1..=self.n_public as usize]
            .iter()
            .map(scalar_to_decimal)
            .collect();
        let circuit = WitnessOnly {
            n_public: self.n_public,
            values: Arc::new(values),
            _charge: Arc::new(charge),
        };
        Ok(Witness {
            partition: engine::Partition::circuit(circuit),
            public_values,
        })
    }
}

/// A circom witness as a bellman circuit for witness-only synthesis: wires allocated in
/// [`CircomCircuit`]'s order (public outputs and inputs as inputs, the rest aux), no
/// constraints. Valid only with a PCE recorded from [`CircomCircuit::shape_only`] of the
/// same `.r1cs` (the engine always synthesizes through the circuit's PCE, and its witness
/// check catches values that do not satisfy the constraints). It keeps no copy of the
/// constraints, so a queued job holds only its values.
#[derive(Clone)]
struct WitnessOnly {
    n_public: u32,
    values: Arc<Vec<Scalar>>,
    _charge: Arc<WitnessCharge>,
}

impl Circuit<Scalar> for WitnessOnly {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        for (w, value) in self.values.iter().enumerate().skip(1) {
            let value = || Ok(*value);
            if w <= self.n_public as usize {
                cs.alloc_input(|| "public wire", value)?;
            } else {
                cs.alloc(|| "wire", value)?;
            }
        }
        Ok(())
    }
}
