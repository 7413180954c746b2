//! The Pinion engine as a daemon: gRPC `cuzk.v1.ProvingEngine` (wire-compatible with
//! Curio's cuzk), gRPC `pinion.v1.Pinion` for any circuit, and an HTTP status server
//! (`/metrics`, `/status`, `/healthz`). `pinion serve` runs it; `pinion submit`, `await`,
//! `status` and `cancel` are its client.
//!
//! # Example
//! A daemon on a free local port, a client asking for its status, a graceful stop:
//! ```
//! use std::sync::Arc;
//! use daemon::frontend::{Frontend, FrontendCircuit};
//! use daemon::{Config, DaemonError, Server, Stop};
//!
//! /// A front end that knows no circuit (the `pinion` binary gives circom's).
//! struct NoCircuits;
//! impl Frontend for NoCircuits {
//!     fn name(&self) -> &'static str { "none" }
//!     fn load_circuit(&self, _: &[u8], _: &memory_budget::Budget)
//!         -> Result<Box<dyn FrontendCircuit>, DaemonError> {
//!         Err(DaemonError::Unusable { what: "circuit".into(), reason: "no format".into() })
//!     }
//! }
//!
//! # tokio::runtime::Runtime::new()?.block_on(async {
//! let config = Config::from_toml("[daemon]\nlisten = \"127.0.0.1:0\"")?;
//! let budget = memory_budget::Budget::fixed(1 << 30);
//! let server = Server::start(config, Arc::new(NoCircuits), Some(budget)).await?;
//! let addr = server.grpc_addr().to_string();
//! let mut client = daemon::client::cuzk_client(daemon::client::connect(&addr).await?, 1 << 20);
//! let status = client
//!     .get_status(daemon::proto::cuzk::v1::GetStatusRequest {})
//!     .await
//!     .map_err(|e| DaemonError::Internal(e.to_string()))?
//!     .into_inner();
//! assert_eq!(status.gpus.len(), 1); // the CPU device when no GPU is present
//! server.stop(Stop::Graceful);
//! server.wait().await?;
//! # Ok::<(), DaemonError>(())
//! # })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Guarantees
//! - **The engine knows no protocol**: gRPC and HTTP types stay in this crate; the engine
//!   is driven through its public calls and one hook (a job's end).
//! - **Jobs**: one id space for both services (the client's `request_id` when given:
//!   a second submission with it gets the first job). Waiting holds no thread; a client
//!   that goes away while awaiting leaves nothing behind (a cuzk `Prove` cancels its job).
//!   A job's witness is dropped, and its bytes returned, when the job ends; ended jobs are
//!   forgotten beyond `[daemon] keep_finished`.
//! - **Hostile input**: every request field is checked before use (INVALID_ARGUMENT naming
//!   the field), messages over `[daemon] max_message_size` are RESOURCE_EXHAUSTED, bytes
//!   that do not decode INVALID_ARGUMENT; the daemon keeps serving.
//! - **Memory**: a request's bytes are charged to the budget as soon as a handler sees
//!   them (a refusal is RESOURCE_EXHAUSTED); parsed witnesses, circuits' PCEs and keys are
//!   charged by the front end, pce-cache and srs-store.
//! - **Filecoin kinds** ([`filecoin`]): a request's inputs are parsed and verified by
//!   pinion-filecoin (filecoin-proofs' own checks) before a job exists, so garbage is
//!   INVALID_ARGUMENT with the reason; a circuit is recorded once into the state folder
//!   and registered with its parameters from `[srs] param_cache` (filecoin-proofs' file
//!   names; missing ones are FAILED_PRECONDITION); each partition's public inputs are
//!   checked against filecoin-proofs' before it is proved, and the engine verifies every
//!   proof with them.
//! - **Stop**: the first SIGTERM/SIGINT stops taking jobs (UNAVAILABLE) and lets the
//!   submitted ones finish while clients can still await them; the second (or `--abort`)
//!   cancels them. Once every job has ended the gRPC server closes, then the status
//!   server; the unix socket is removed.
//!
//! # Non-goals
//! No TLS or authentication (listen on a unix socket or localhost); paths in
//! `pinion.v1` registrations are read with the daemon's permissions. No persistence of
//! jobs across restarts.
//!
//! # Cost model
//! Per request: one decode by tonic, one budget charge, a few map lookups; waiting is a
//! `watch` channel per job. The work is the engine's.
//!
//! # Known gaps
//! tonic decodes a message before a handler sees it: up to `max_message_size` bytes per
//! concurrent upload exist for a moment before they are charged. A Filecoin circuit is
//! registered by its first request: PreloadSRS/EvictSRS take the ids GetStatus lists
//! (filecoin-proofs' cache ids), not before. `registered_proof` is read for PoSt and
//! SnapDeals (Go's `abi` numbers); a PoRep's proof type comes from its C1 output.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod client;
pub mod config;
pub mod cuzk;
mod daemon;
mod error;
pub mod filecoin;
pub mod frontend;
mod http;
pub mod metrics;
pub mod pinion;
mod server;
pub mod status;

/// The generated gRPC code (tonic-build, from `proto/`).
#[allow(missing_docs, clippy::all)]
pub mod proto {
    /// `cuzk.v1`.
    pub mod cuzk {
        /// `cuzk.v1`.
        pub mod v1 {
            tonic::include_proto!("cuzk.v1");
        }
    }
    /// `pinion.v1`.
    pub mod pinion {
        /// `pinion.v1`.
        pub mod v1 {
            tonic::include_proto!("pinion.v1");
        }
    }
}

pub use config::{Config, Devices, Listen};
pub use daemon::{detect_budget, Daemon};
pub use error::DaemonError;
pub use server::{stop_on_signals, Server, Stop};
