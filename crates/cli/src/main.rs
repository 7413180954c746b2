//! `pinion`: prove, verify and set up Groth16 over BLS12-381 from circom's `.r1cs`/`.wtns`,
//! run the SHA-256 demo, inspect parameter files and PCEs, probe memory, and serve the
//! engine as a daemon (`serve`) with its client (`submit`, `await`, `status`, `cancel`).
//!
//! Results go to stdout (`--json` where it applies); progress and log lines to stderr.
//! Every failure is one line on stderr (`pinion: error: ...` with its cause chain) and
//! exit status 1. `verify` exits 0 on a valid proof, 1 on an invalid one, 2 on input it
//! cannot read or that does not match. Usage errors exit 2 (clap).
#![forbid(unsafe_code)]

mod cmd;
mod ui;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use srs_store::PointCheck;

/// `--check none|curve|full`.
fn parse_check(s: &str) -> Result<PointCheck, String> {
    s.parse()
}

const AFTER_HELP: &str = "\
Examples:
  pinion demo                                   # SHA-256 demo: setup (cached), PCE, prove, verify
  pinion setup --r1cs c.r1cs --out c.params --seed 1
  pinion prove --params c.params --r1cs c.r1cs --witness w.wtns --out proof.bin --public-out public.json
  pinion verify --params c.params --proof proof.bin --public public.json
  pinion prove --zkey c.zkey --witness w.wtns --out proof.json --public-out public.json
  pinion zkey export-vk c.zkey vk.json && pinion verify --vk vk.json --proof proof.json --public public.json
  pinion srs inspect c.params --check full --json
  pinion pce extract --r1cs c.r1cs --out c.pce && pinion pce inspect c.pce
  pinion filecoin c2 --c1 c1.json --miner-id 1000 --params-dir DIR --out proof.bin
  pinion memprobe --probe
  pinion serve --listen unix:///run/pinion.sock --status-listen 127.0.0.1:9821
  pinion submit --addr unix:///run/pinion.sock --params c.params --r1cs c.r1cs --witness w.wtns --out proof.bin";

#[derive(Parser, Debug)]
#[command(
    name = "pinion",
    version,
    about = "Groth16 over BLS12-381 under a memory budget",
    after_help = AFTER_HELP
)]
struct Cli {
    /// Host memory budget: bytes with a unit ("8GiB") or a share of the detected limit
    /// ("80%"); default: the detected limit minus a safety margin.
    #[arg(long, global = true, value_name = "SIZE")]
    memory_budget: Option<String>,
    #[command(subcommand)]
    command: Command,
}

/// Which backend computes H and the MSMs.
#[derive(Args, Debug, Clone, Copy)]
#[group(multiple = false)]
pub struct BackendArgs {
    /// Prove on the CPU.
    #[arg(long)]
    cpu: bool,
    /// Prove on the GPU (an error when the GPU backend cannot run).
    #[arg(long)]
    gpu: bool,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Parameters for a circom circuit with random toxic waste (for testing only: insecure).
    #[command(
        after_help = "Examples:\n  pinion setup --r1cs circuit.r1cs --out circuit.params --seed 7\n  pinion setup --r1cs circuit.r1cs --out circuit.zkey     # snarkjs's format"
    )]
    Setup {
        /// The circuit (`circom --r1cs --prime bls12381`).
        #[arg(long, value_name = "FILE")]
        r1cs: PathBuf,
        /// Where to write the parameters (`groth16::Parameters::write` layout).
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
        /// Derive the toxic waste from this seed (reproducible files); default: random.
        #[arg(long)]
        seed: Option<u64>,
        /// What to write: `params` (groth16/bellman layout, for --params) or `zkey`
        /// (snarkjs's Groth16 proving key, for `snarkjs groth16 prove` and --zkey);
        /// default: `zkey` when --out ends in `.zkey`, else `params`.
        #[arg(long, value_enum, value_name = "FORMAT")]
        format: Option<cmd::setup::SetupFormat>,
    },
    /// Prove a circom circuit: from a parameter file and its .r1cs (writes the 192-byte
    /// `groth16::Proof::write` encoding), or from a snarkjs .zkey (writes snarkjs's
    /// proof.json; `--proof-format bin` for the 192 bytes).
    #[command(
        after_help = "Examples:\n  pinion prove --zkey c.zkey --witness w.wtns --out proof.json --public-out public.json\n  pinion prove --params c.params --r1cs c.r1cs --witness w.wtns --out proof.bin\n  pinion prove ... --r 12345 --s 678       # fixed (r, s): byte-comparable with groth16::create_proof\n  pinion prove ... --seed 3 --public-out public.json"
    )]
    Prove {
        /// Parameters (from `pinion setup` or `groth16::Parameters::write`); needs --r1cs.
        #[arg(
            long,
            value_name = "FILE",
            required_unless_present = "zkey",
            requires = "r1cs"
        )]
        params: Option<PathBuf>,
        /// The circuit (with --params).
        #[arg(long, value_name = "FILE", requires = "params")]
        r1cs: Option<PathBuf>,
        /// A snarkjs Groth16 proving key (BLS12-381): parameters and constraints in one file.
        #[arg(long, value_name = "FILE", conflicts_with_all = ["params", "r1cs"])]
        zkey: Option<PathBuf>,
        /// Proof encoding: json (snarkjs's proof.json) or bin (192 bytes); default json
        /// with --zkey, bin with --params.
        #[arg(long, value_enum, value_name = "FORMAT")]
        proof_format: Option<cmd::prove::ProofFormat>,
        /// The witness (`.wtns` version 2).
        #[arg(long, value_name = "FILE")]
        witness: PathBuf,
        /// Where to write the proof.
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
        /// Also write the public values (outputs then inputs) as a JSON array of decimals.
        #[arg(long, value_name = "FILE")]
        public_out: Option<PathBuf>,
        /// Derive (r, s) from this seed: r, then s, drawn from `StdRng::seed_from_u64`.
        #[arg(long, conflicts_with_all = ["r", "s"])]
        seed: Option<u64>,
        /// The blinding r, a decimal field element (needs --s).
        #[arg(long, requires = "s", value_name = "DEC")]
        r: Option<String>,
        /// The blinding s, a decimal field element (needs --r).
        #[arg(long, requires = "r", value_name = "DEC")]
        s: Option<String>,
        #[command(flatten)]
        backend: BackendArgs,
        /// Point checks while loading the parameters: none (encoding only), curve (the
        /// default), full (curve and subgroup; remembered beside the file once passed).
        #[arg(long, default_value = "curve", value_parser = parse_check, value_name = "CHECK")]
        check: PointCheck,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Verify a proof. Exit status: 0 valid, 1 invalid, 2 unreadable or mismatched input
    /// (under --json the error is printed as JSON too).
    #[command(
        after_help = "Exit status: 0 valid, 1 invalid, 2 unreadable or mismatched input.\n\nExamples:\n  pinion verify --vk verification_key.json --proof proof.json --public public.json\n  pinion verify --params c.params --proof proof.bin --public public.json"
    )]
    Verify {
        /// Parameters (only the verifying key at their start is read).
        #[arg(
            long,
            value_name = "FILE",
            required_unless_present = "vk",
            conflicts_with = "vk"
        )]
        params: Option<PathBuf>,
        /// snarkjs's verification_key.json (`pinion zkey export-vk`, `snarkjs zkey export
        /// verificationkey`).
        #[arg(long, value_name = "FILE")]
        vk: Option<PathBuf>,
        /// The proof: 192 bytes, or snarkjs's proof.json.
        #[arg(long, value_name = "FILE")]
        proof: PathBuf,
        /// Public values: a JSON array of canonical decimal strings (outputs then inputs).
        #[arg(long, value_name = "FILE")]
        public: PathBuf,
        /// Print the verdict as JSON.
        #[arg(long)]
        json: bool,
    },
    /// The main job on a built-in circuit: SHA-256 preimage, parameters (cached), PCE,
    /// proof, verification, timings and memory.
    #[command(
        after_help = "Examples:\n  pinion demo\n  pinion demo --constraints 30000 --json\n  PINION_CACHE_DIR=/tmp/pc pinion demo"
    )]
    Demo {
        /// Approximate circuit size; the circuit has whole SHA-256 blocks (~27k
        /// constraints each, at least one).
        #[arg(long, default_value_t = 1 << 16)]
        constraints: u64,
        /// Cache folder for parameters and PCEs (default: $PINION_CACHE_DIR, else
        /// $XDG_CACHE_HOME/pinion, else ~/.cache/pinion).
        #[arg(long, value_name = "DIR")]
        cache_dir: Option<PathBuf>,
        #[command(flatten)]
        backend: BackendArgs,
        /// Point checks while loading the parameters: none, curve (the default), full.
        #[arg(long, default_value = "curve", value_parser = parse_check, value_name = "CHECK")]
        check: PointCheck,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// snarkjs proving keys (.zkey).
    Zkey {
        #[command(subcommand)]
        command: ZkeyCommand,
    },
    /// Parameter files.
    Srs {
        #[command(subcommand)]
        command: SrsCommand,
    },
    /// Pre-compiled constraint files.
    Pce {
        #[command(subcommand)]
        command: PceCommand,
    },
    /// Filecoin's circuits (PoRep C2, Window/Winning PoSt, SnapDeals) from Curio's inputs.
    Filecoin {
        #[command(subcommand)]
        command: FilecoinCommand,
    },
    /// What limits this process's memory, the budget derived from them, each GPU's VRAM;
    /// `--probe` really allocates to find where the machine stops.
    #[command(
        after_help = "Examples:\n  pinion memprobe --json\n  pinion memprobe --probe --memory-budget 4GiB"
    )]
    Memprobe {
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Allocate and touch pageable, then pinned, memory in steps up to the budget, in
        /// a child process, and report where it stopped and why.
        #[arg(long)]
        probe: bool,
        /// Probe step.
        #[arg(long, default_value = "1GiB", value_name = "SIZE")]
        step: String,
    },
    /// The engine as a daemon: gRPC cuzk.v1 (Curio's cuzk protocol) and pinion.v1 (any
    /// circom circuit), Prometheus /metrics and /status over HTTP. Flags override the
    /// config file; SIGTERM/SIGINT stops (running jobs finish; twice: they are cancelled).
    #[command(
        after_help = "Examples:\n  pinion serve --listen 127.0.0.1:9820 --status-listen 127.0.0.1:9821\n  pinion serve --config pinion.toml --listen unix:///run/pinion/pinion.sock --cpu\n  pinion --memory-budget 64GiB serve --abort"
    )]
    Serve {
        /// TOML settings (cuzk's keys where they mean the same; see the README).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// gRPC address: HOST:PORT or unix:///PATH (default 127.0.0.1:9820).
        #[arg(long, value_name = "ADDR")]
        listen: Option<String>,
        /// HTTP address of /metrics, /status and /healthz (default: off).
        #[arg(long, value_name = "HOST:PORT")]
        status_listen: Option<String>,
        #[command(flatten)]
        backend: BackendArgs,
        /// The first SIGTERM/SIGINT cancels running jobs instead of letting them finish.
        #[arg(long)]
        abort: bool,
    },
    /// Prove through a daemon: registers the circuit (idempotent), submits the witness,
    /// waits with a progress display and writes the 192-byte proof.
    #[command(
        after_help = "Examples:\n  pinion submit --addr 127.0.0.1:9820 --params c.params --r1cs c.r1cs --witness w.wtns --out proof.bin\n  pinion submit --addr unix:///run/pinion.sock ... --priority high --no-wait   # prints the job id"
    )]
    Submit {
        /// The daemon: HOST:PORT or unix:///PATH.
        #[arg(long, value_name = "ADDR")]
        addr: String,
        /// Parameters (sent as a path the daemon reads, or with --upload as bytes).
        #[arg(long, value_name = "FILE")]
        params: PathBuf,
        /// The circuit.
        #[arg(long, value_name = "FILE")]
        r1cs: PathBuf,
        /// The witness (`.wtns` version 2; always sent as bytes).
        #[arg(long, value_name = "FILE")]
        witness: PathBuf,
        /// Where to write the proof (required unless --no-wait).
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// Also write the public values as a JSON array of decimals.
        #[arg(long, value_name = "FILE")]
        public_out: Option<PathBuf>,
        /// low, normal, high or critical.
        #[arg(long, default_value = "normal", value_parser = cmd::client::parse_priority_name)]
        priority: String,
        /// Print the job id and return at once.
        #[arg(long)]
        no_wait: bool,
        /// Send the circuit and parameters as bytes (the daemon cannot read the paths).
        #[arg(long)]
        upload: bool,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Wait for a daemon's job and write its proof.
    #[command(
        after_help = "Example:\n  pinion await --addr 127.0.0.1:9820 --job job-3 --out proof.bin"
    )]
    Await {
        /// The daemon: HOST:PORT or unix:///PATH.
        #[arg(long, value_name = "ADDR")]
        addr: String,
        /// The job id (`pinion submit --no-wait` prints it).
        #[arg(long)]
        job: String,
        /// Where to write the proof.
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
        /// Also write the public values as a JSON array of decimals.
        #[arg(long, value_name = "FILE")]
        public_out: Option<PathBuf>,
        /// Give up after this many seconds (the job goes on).
        #[arg(long, value_name = "SECS")]
        timeout: Option<u64>,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// A daemon's state (devices, circuits, budget), or one job's.
    #[command(
        after_help = "Examples:\n  pinion status --addr 127.0.0.1:9820\n  pinion status --addr 127.0.0.1:9820 --job job-3 --json"
    )]
    Status {
        /// The daemon: HOST:PORT or unix:///PATH.
        #[arg(long, value_name = "ADDR")]
        addr: String,
        /// One job instead of the daemon.
        #[arg(long)]
        job: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Cancel a daemon's job (queued: it leaves; running: it stops at its next phase).
    #[command(after_help = "Example:\n  pinion cancel --addr 127.0.0.1:9820 --job job-3")]
    Cancel {
        /// The daemon: HOST:PORT or unix:///PATH.
        #[arg(long, value_name = "ADDR")]
        addr: String,
        /// The job id.
        #[arg(long)]
        job: String,
    },
    /// The probe's child process (internal).
    #[command(hide = true)]
    ProbeChild {
        #[arg(long)]
        max_bytes: u64,
        #[arg(long)]
        step_bytes: u64,
    },
}

#[derive(Subcommand, Debug)]
enum SrsCommand {
    /// Section counts, sizes and what a load charges; exit 1 with the reason when invalid.
    #[command(after_help = "Example:\n  pinion srs inspect c.params --check curve --json")]
    Inspect {
        /// The parameter file.
        file: PathBuf,
        /// Point checks: none (encoding), curve, full (curve and subgroup).
        #[arg(long, default_value = "none", value_parser = ["none", "curve", "full"])]
        check: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
enum ZkeyCommand {
    /// Write snarkjs's verification_key.json from a zkey (its verifying key, fully checked).
    #[command(
        name = "export-vk",
        after_help = "Example:\n  pinion zkey export-vk circuit.zkey verification_key.json"
    )]
    ExportVk {
        /// The zkey.
        zkey: PathBuf,
        /// Where to write the JSON.
        out: PathBuf,
        /// Print a JSON summary.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
enum PceCommand {
    /// Record a circuit's R1CS into a PCE file.
    #[command(
        after_help = "Examples:\n  pinion pce extract --r1cs c.r1cs --out c.pce\n  pinion pce extract --demo --constraints 60000 --out sha.pce"
    )]
    Extract {
        /// A circom circuit.
        #[arg(
            long,
            value_name = "FILE",
            required_unless_present = "demo",
            conflicts_with = "demo"
        )]
        r1cs: Option<PathBuf>,
        /// The demo's SHA-256 circuit instead.
        #[arg(long)]
        demo: bool,
        /// Size of the demo circuit.
        #[arg(long, default_value_t = 1 << 16, requires = "demo")]
        constraints: u64,
        /// Where to write the PCE.
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Shape, non-zeros, storage and fingerprint of a PCE file (checksums verified).
    #[command(after_help = "Example:\n  pinion pce inspect c.pce --json")]
    Inspect {
        /// The PCE file.
        file: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// What every `pinion filecoin` proving subcommand takes.
#[derive(Args, Debug)]
struct FilecoinProveArgs {
    /// The Filecoin parameter folder (`v28-<circuit>.params` files).
    #[arg(long, value_name = "DIR")]
    params_dir: PathBuf,
    /// Where to write the proof: the partition proofs concatenated, 192 bytes each.
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    #[command(flatten)]
    backend: BackendArgs,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Subcommand, Debug)]
enum FilecoinCommand {
    /// PoRep commit phase 2 from a C1 output (filecoin-proofs-api's JSON, bare or in Go's
    /// `{"SectorNum", "Phase1Out" (base64), "SectorSize"}` wrapper).
    #[command(
        after_help = "Example:\n  pinion filecoin c2 --c1 c1.json --miner-id 1000 --params-dir /var/tmp/filecoin-proof-parameters --out proof.bin"
    )]
    C2 {
        /// The C1 output.
        #[arg(long, value_name = "FILE")]
        c1: PathBuf,
        /// The miner's actor id (the prover id is its ID address payload).
        #[arg(long)]
        miner_id: u64,
        /// The sector number (default: the wrapper's `SectorNum`).
        #[arg(long)]
        sector_number: Option<u64>,
        /// Refuse a C1 of another proof type, e.g. `StackedDrg32GiBV1_1`.
        #[arg(long, value_name = "PROOF")]
        expect: Option<String>,
        #[command(flatten)]
        common: FilecoinProveArgs,
    },
    /// Window PoSt from bincode `FallbackPoStSectorProof` files.
    #[command(
        after_help = "Example:\n  pinion filecoin window-post --proof-type StackedDrgWindow32GiBV1_2 --vanilla s1.bin --vanilla s2.bin --randomness <64 hex> --miner-id 1000 --partition 0 --params-dir DIR --out proof.bin"
    )]
    WindowPost {
        /// filecoin-proofs-api's PoSt proof type.
        #[arg(long, value_name = "PROOF")]
        proof_type: String,
        /// One vanilla proof file per sector, in sector order.
        #[arg(long, value_name = "FILE", required = true)]
        vanilla: Vec<PathBuf>,
        /// The challenge randomness, 64 hex digits.
        #[arg(long, value_name = "HEX")]
        randomness: String,
        /// The miner's actor id.
        #[arg(long)]
        miner_id: u64,
        /// Prove this partition only (the vanilla proofs are its sectors').
        #[arg(long)]
        partition: Option<usize>,
        #[command(flatten)]
        common: FilecoinProveArgs,
    },
    /// Winning PoSt from a bincode `FallbackPoStSectorProof` file.
    #[command(
        after_help = "Example:\n  pinion filecoin winning-post --proof-type StackedDrgWinning32GiBV1 --vanilla s.bin --randomness <64 hex> --miner-id 1000 --params-dir DIR --out proof.bin"
    )]
    WinningPost {
        /// filecoin-proofs-api's PoSt proof type.
        #[arg(long, value_name = "PROOF")]
        proof_type: String,
        /// The vanilla proof file(s).
        #[arg(long, value_name = "FILE", required = true)]
        vanilla: Vec<PathBuf>,
        /// The challenge randomness, 64 hex digits.
        #[arg(long, value_name = "HEX")]
        randomness: String,
        /// The miner's actor id.
        #[arg(long)]
        miner_id: u64,
        #[command(flatten)]
        common: FilecoinProveArgs,
    },
    /// SnapDeals update proof from bincode partition proof files and the commitments.
    #[command(
        after_help = "Example:\n  pinion filecoin snap --proof-type StackedDrg32GiBV1 --partition-proof p0.bin ... --comm-r-old HEX --comm-r-new HEX --comm-d-new HEX --params-dir DIR --out proof.bin"
    )]
    Snap {
        /// filecoin-proofs-api's update proof type.
        #[arg(long, value_name = "PROOF")]
        proof_type: String,
        /// One partition proof file per partition, in order.
        #[arg(long, value_name = "FILE", required = true)]
        partition_proof: Vec<PathBuf>,
        /// comm_r before the update, 64 hex digits.
        #[arg(long, value_name = "HEX")]
        comm_r_old: String,
        /// comm_r after the update.
        #[arg(long, value_name = "HEX")]
        comm_r_new: String,
        /// comm_d of the new data.
        #[arg(long, value_name = "HEX")]
        comm_d_new: String,
        #[command(flatten)]
        common: FilecoinProveArgs,
    },
    /// INSECURE parameters (tests and benchmarks only) for a circuit, under Filecoin's file
    /// names (`.params` and `.vk`).
    #[command(
        after_help = "Example:\n  pinion filecoin params --insecure --kind porep --proof-type StackedDrg2KiBV1_1 --params-dir params --seed 1"
    )]
    Params {
        /// Required: says you know anyone with the seed can forge proofs.
        #[arg(long, required = true)]
        insecure: bool,
        /// porep, window-post, winning-post or snap.
        #[arg(long, value_parser = ["porep", "window-post", "winning-post", "snap"])]
        kind: String,
        /// filecoin-proofs-api's proof type of that kind.
        #[arg(long, value_name = "PROOF")]
        proof_type: String,
        /// The folder to write to.
        #[arg(long, value_name = "DIR")]
        params_dir: PathBuf,
        /// Toxic waste seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
}

impl FilecoinProveArgs {
    fn common<'a>(&'a self, budget: Option<&'a str>) -> cmd::filecoin::Common<'a> {
        cmd::filecoin::Common {
            params_dir: &self.params_dir,
            out: &self.out,
            backend: self.backend.choice(),
            json: self.json,
            budget,
        }
    }
}

/// How a subcommand ended without an error.
pub enum Outcome {
    /// Exit 0.
    Success,
    /// Exit 1 without an error message (an invalid proof; the verdict is printed).
    Failure,
}

fn run(cli: Cli) -> anyhow::Result<Outcome> {
    let budget = cli.memory_budget.as_deref();
    match cli.command {
        Command::Setup {
            r1cs,
            out,
            seed,
            format,
        } => cmd::setup::run(&r1cs, &out, seed, format, budget),
        Command::Prove {
            params,
            r1cs,
            zkey,
            proof_format,
            witness,
            out,
            public_out,
            seed,
            r,
            s,
            backend,
            check,
            json,
        } => match (zkey, params, r1cs) {
            (Some(zkey), _, _) => cmd::prove::run_zkey(cmd::prove::ZkeyProveArgs {
                zkey: &zkey,
                witness: &witness,
                out: &out,
                public_out: public_out.as_deref(),
                format: proof_format.unwrap_or(cmd::prove::ProofFormat::Json),
                seed,
                rs: r.zip(s),
                backend: backend.choice(),
                check,
                json,
                budget,
            }),
            (None, Some(params), Some(r1cs)) => {
                if proof_format == Some(cmd::prove::ProofFormat::Json) {
                    anyhow::bail!("--proof-format json needs --zkey (the snarkjs flow)");
                }
                cmd::prove::run(cmd::prove::ProveArgs {
                    params: &params,
                    r1cs: &r1cs,
                    witness: &witness,
                    out: &out,
                    public_out: public_out.as_deref(),
                    seed,
                    rs: r.zip(s),
                    backend: backend.choice(),
                    check,
                    json,
                    budget,
                })
            }
            _ => anyhow::bail!("give --zkey FILE, or --params FILE with --r1cs FILE"),
        },
        Command::Verify { .. } => unreachable!("verify is run by main for its exit codes"),
        Command::Zkey {
            command: ZkeyCommand::ExportVk { zkey, out, json },
        } => cmd::zkey::export_vk(&zkey, &out, json),
        Command::Demo {
            constraints,
            cache_dir,
            backend,
            check,
            json,
        } => cmd::demo::run(cmd::demo::DemoArgs {
            constraints,
            cache_dir,
            backend: backend.choice(),
            check,
            json,
            budget,
        }),
        Command::Srs {
            command: SrsCommand::Inspect { file, check, json },
        } => cmd::srs::inspect(&file, &check, json),
        Command::Pce { command } => match command {
            PceCommand::Extract {
                r1cs,
                demo,
                constraints,
                out,
                json,
            } => cmd::pce::extract(
                r1cs.as_deref(),
                demo.then_some(constraints),
                &out,
                json,
                budget,
            ),
            PceCommand::Inspect { file, json } => cmd::pce::inspect(&file, json),
        },
        Command::Filecoin { command } => run_filecoin(command, budget),
        Command::Memprobe { json, probe, step } => {
            cmd::memprobe::run(cmd::memprobe::MemprobeArgs {
                json,
                probe,
                step: &step,
                budget,
            })
        }
        Command::ProbeChild {
            max_bytes,
            step_bytes,
        } => cmd::memprobe::child(max_bytes, step_bytes),
        Command::Serve {
            config,
            listen,
            status_listen,
            backend,
            abort,
        } => cmd::serve::run(cmd::serve::ServeArgs {
            config,
            listen,
            status_listen,
            memory_budget: budget.map(str::to_string),
            cpu: backend.cpu,
            gpu: backend.gpu,
            abort,
        }),
        Command::Submit {
            addr,
            params,
            r1cs,
            witness,
            out,
            public_out,
            priority,
            no_wait,
            upload,
            json,
        } => cmd::client::submit(cmd::client::SubmitArgs {
            addr,
            params,
            r1cs,
            witness,
            out,
            public_out,
            priority,
            no_wait,
            upload,
            json,
        }),
        Command::Await {
            addr,
            job,
            out,
            public_out,
            timeout,
            json,
        } => cmd::client::await_job(cmd::client::AwaitArgs {
            addr,
            job,
            out,
            public_out,
            timeout,
            json,
        }),
        Command::Status { addr, job, json } => cmd::client::status(&addr, job.as_deref(), json),
        Command::Cancel { addr, job } => cmd::client::cancel(&addr, &job),
    }
}

fn run_filecoin(command: FilecoinCommand, budget: Option<&str>) -> anyhow::Result<Outcome> {
    use pinion_filecoin::ProofKind;
    match command {
        FilecoinCommand::C2 {
            c1,
            miner_id,
            sector_number,
            expect,
            common,
        } => cmd::filecoin::c2(
            &c1,
            miner_id,
            sector_number,
            expect.as_deref(),
            &common.common(budget),
        ),
        FilecoinCommand::WindowPost {
            proof_type,
            vanilla,
            randomness,
            miner_id,
            partition,
            common,
        } => cmd::filecoin::post(
            ProofKind::WindowPost,
            &proof_type,
            &vanilla,
            &randomness,
            miner_id,
            partition,
            &common.common(budget),
        ),
        FilecoinCommand::WinningPost {
            proof_type,
            vanilla,
            randomness,
            miner_id,
            common,
        } => cmd::filecoin::post(
            ProofKind::WinningPost,
            &proof_type,
            &vanilla,
            &randomness,
            miner_id,
            None,
            &common.common(budget),
        ),
        FilecoinCommand::Snap {
            proof_type,
            partition_proof,
            comm_r_old,
            comm_r_new,
            comm_d_new,
            common,
        } => cmd::filecoin::snap(
            &proof_type,
            &partition_proof,
            &comm_r_old,
            &comm_r_new,
            &comm_d_new,
            &common.common(budget),
        ),
        FilecoinCommand::Params {
            insecure: _,
            kind,
            proof_type,
            params_dir,
            seed,
        } => cmd::filecoin::insecure_params(&kind, &proof_type, &params_dir, seed, budget),
    }
}

impl BackendArgs {
    fn choice(self) -> groth16_prover::BackendChoice {
        use groth16_prover::BackendChoice;
        match (self.cpu, self.gpu) {
            (true, _) => BackendChoice::Cpu,
            (_, true) => BackendChoice::Gpu,
            _ => BackendChoice::Auto,
        }
    }
}

/// `pinion verify`: 0 valid, 1 invalid, 2 for input that cannot be read or does not
/// match (printed as JSON under `--json`).
fn verify(
    params: Option<PathBuf>,
    vk: Option<PathBuf>,
    proof: &std::path::Path,
    public: &std::path::Path,
    json: bool,
) -> ExitCode {
    let source = match (&vk, &params) {
        (Some(v), _) => cmd::verify::VkSource::Json(v),
        (None, Some(p)) => cmd::verify::VkSource::Params(p),
        // clap requires one of them.
        (None, None) => return ExitCode::from(2),
    };
    match cmd::verify::run(source, proof, public, json) {
        Ok(Outcome::Success) => ExitCode::SUCCESS,
        Ok(Outcome::Failure) => ExitCode::from(1),
        Err(err) => {
            if json {
                cmd::print_json(&serde_json::json!({
                    "valid": serde_json::Value::Null,
                    "error": ui::error_line(&err),
                }));
            } else {
                eprintln!("pinion: error: {}", ui::error_line(&err));
            }
            ExitCode::from(2)
        }
    }
}

fn main() -> ExitCode {
    // Freed working sets go back to the kernel, so what the cgroup charges follows what
    // the budget charges (memory_budget::tune_allocator).
    memory_budget::tune_allocator();
    let cli = Cli::parse();
    if let Command::Verify {
        params,
        vk,
        proof,
        public,
        json,
    } = cli.command
    {
        return verify(params, vk, &proof, &public, json);
    }
    match run(cli) {
        Ok(Outcome::Success) => ExitCode::SUCCESS,
        Ok(Outcome::Failure) => ExitCode::from(1),
        Err(err) => {
            eprintln!("pinion: error: {}", ui::error_line(&err));
            ExitCode::from(1)
        }
    }
}
