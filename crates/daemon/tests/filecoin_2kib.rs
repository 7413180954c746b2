//! A real PoRep C2 through the daemon: a 2 KiB sector sealed by filecoin-proofs inside the
//! test (add piece, pre-commit 1 and 2, commit 1), its C1 output sent over cuzk.v1 as
//! Curio sends it, the proof checked by filecoin-proofs' `verify_seal`. Also over the same
//! socket: bad inputs of a real sector refused with the field and the reason, the
//! circuit's parameters in GetStatus, PreloadSRS and EvictSRS, and missing parameters
//! answered FAILED_PRECONDITION naming the file.
//!
//! Sealing, parameters and the C1 wrapper come from `pinion_filecoin::testing` (its
//! `test-support` feature), which pinion-filecoin's own tests use too: insecure parameters
//! from groth16-prover's generator, made once and shared under
//! `target/pinion-filecoin-params/`.
//!
//! Slow (sealing, parameter generation the first time, a proof): runs when
//! `PINION_FILECOIN_TESTS=1` (`.ci/run` sets it), else says it is skipped.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use daemon::frontend::{Frontend, FrontendCircuit};
use daemon::proto::cuzk::v1 as cuzk;
use daemon::{Config, DaemonError, Server, Stop};
use filecoin_proofs_api::seal::verify_seal;
use filecoin_proofs_api::SectorId;
use groth16_prover::testing::{test_seed, SplitMix};
use memory_budget::Budget;
use pinion_filecoin::porep;
use pinion_filecoin::testing::{
    self, insecure_params, params_dir, seal, wrapped, TempDir, MINER, PROOF, SECTOR,
};
use tonic::transport::Channel;

fn enabled() -> bool {
    testing::enabled("seal a 2 KiB sector and prove its C2 through the daemon")
}

/// Changes the low bit of the first array of 32 small numbers (a serialized domain
/// element) found depth-first.
fn tamper(v: &mut serde_json::Value) -> bool {
    match v {
        serde_json::Value::Array(items) => {
            if items.len() == 32 && items.iter().all(|x| x.as_u64().is_some_and(|n| n < 256)) {
                let x = items[0].as_u64().unwrap_or(0);
                items[0] = serde_json::Value::from(x ^ 1);
                return true;
            }
            items.iter_mut().any(tamper)
        }
        serde_json::Value::Object(map) => map.values_mut().any(tamper),
        _ => false,
    }
}

/// The daemon needs a circom front end for pinion.v1; this test registers no circuit.
struct NoCircuits;

impl Frontend for NoCircuits {
    fn name(&self) -> &'static str {
        "none"
    }
    fn load_circuit(&self, _: &[u8], _: &Budget) -> Result<Box<dyn FrontendCircuit>, DaemonError> {
        Err(DaemonError::Unusable {
            what: "circuit".into(),
            reason: "this test registers no circuits".into(),
        })
    }
}

async fn start(param_cache: &Path) -> Server {
    daemon::metrics::install().unwrap();
    let mut config = Config::from_toml("[daemon]\nlisten = \"127.0.0.1:0\"").unwrap();
    config.param_cache = param_cache.to_path_buf();
    Server::start(config, Arc::new(NoCircuits), Some(Budget::fixed(8 << 30)))
        .await
        .unwrap()
}

async fn client(server: &Server) -> cuzk::proving_engine_client::ProvingEngineClient<Channel> {
    let channel = daemon::client::connect(&server.grpc_addr().to_string())
        .await
        .unwrap();
    daemon::client::cuzk_client(channel, 64 << 20)
}

async fn stop(server: Server) {
    server.stop(Stop::Graceful);
    tokio::time::timeout(Duration::from_secs(120), server.wait())
        .await
        .expect("the server stops")
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn porep_c2_of_a_2kib_sector_through_cuzk_v1() {
    if !enabled() {
        return;
    }
    let mut g = SplitMix::new(test_seed());
    let dir = params_dir();
    let blank = porep::blank_job(PROOF).unwrap();
    let circuit_id = blank.circuit_id().cache_id.clone();
    insecure_params(blank.as_ref(), &dir, &Budget::fixed(8 << 30));
    let sealed = tokio::task::spawn_blocking({
        let mut g = SplitMix::new(g.next_u64());
        move || seal(&mut g)
    })
    .await
    .unwrap();

    let server = start(&dir).await;
    let mut c = client(&server).await;
    let request = |vanilla_proof: Vec<u8>| cuzk::SubmitProofRequest {
        proof_kind: cuzk::ProofKind::PorepSealCommit as i32,
        sector_size: 2048,
        vanilla_proof,
        sector_number: SECTOR,
        miner_id: MINER,
        ..Default::default()
    };

    // SubmitProof with Go's wrapper, as Curio sends it; AwaitProof that times out first
    // (loading the parameters alone takes longer than a millisecond), then waits.
    let t = Instant::now();
    let submitted = c
        .submit_proof(cuzk::SubmitProofRequest {
            request_id: "c2-wrapped".into(),
            ..request(wrapped(&sealed.c1, 2048))
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(submitted.job_id, "c2-wrapped");
    let await_proof = |timeout_ms| cuzk::AwaitProofRequest {
        job_id: submitted.job_id.clone(),
        timeout_ms,
    };
    let early = c.await_proof(await_proof(1)).await.unwrap().into_inner();
    assert_eq!(
        early.status,
        cuzk::await_proof_response::Status::Timeout as i32,
        "{early:?}"
    );
    let result = c.await_proof(await_proof(0)).await.unwrap().into_inner();
    eprintln!(
        "SubmitProof + AwaitProof: {:?} (total_ms {}, srs_load_ms {}, synthesis_ms {}, gpu_compute_ms {})",
        t.elapsed(),
        result.total_ms,
        result.srs_load_ms,
        result.synthesis_ms,
        result.gpu_compute_ms
    );
    assert_eq!(
        result.status,
        cuzk::await_proof_response::Status::Completed as i32,
        "{}",
        result.error_message
    );
    assert_eq!(result.proof.len(), pinion_filecoin::PARTITION_PROOF_BYTES);
    let verify = |proof: &[u8]| {
        verify_seal(
            PROOF,
            sealed.c1.comm_r,
            sealed.c1.comm_d,
            porep::prover_id(MINER),
            SectorId::from(SECTOR),
            sealed.ticket,
            sealed.seed,
            proof,
        )
    };
    assert!(
        verify(&result.proof).unwrap(),
        "verify_seal accepts the daemon's proof"
    );
    let mut bad = result.proof.clone();
    let at = g.next_u64() as usize % bad.len();
    bad[at] ^= 1;
    assert!(!verify(&bad).unwrap_or(false), "a changed byte is refused");

    // The circuit is registered under filecoin-proofs' cache id: status, preload, evict.
    let status = c
        .get_status(cuzk::GetStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    let srs = status
        .loaded_srs
        .iter()
        .find(|s| s.circuit_id == circuit_id)
        .unwrap_or_else(|| panic!("{circuit_id} in {:?}", status.loaded_srs));
    assert!(srs.size_bytes > 0);
    assert_eq!(srs.ref_count, 0, "no proof holds the key now");
    assert_eq!(status.total_proofs_completed, 1);
    let evicted = c
        .evict_srs(cuzk::EvictSrsRequest {
            circuit_id: circuit_id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(evicted.was_loaded && evicted.freed_bytes > 0, "{evicted:?}");
    let preloaded = c
        .preload_srs(cuzk::PreloadSrsRequest {
            circuit_id: circuit_id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!preloaded.already_loaded, "{preloaded:?}");

    // The same request id again: the same job, not a second proof.
    let again = c
        .submit_proof(cuzk::SubmitProofRequest {
            request_id: "c2-wrapped".into(),
            ..request(wrapped(&sealed.c1, 2048))
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(again.job_id, "c2-wrapped");
    let bare = serde_json::to_vec(&sealed.c1).unwrap();

    // A real sector's inputs (the bare C1 JSON, or the wrapper), each made wrong in one
    // way: refused with the field and why.
    let mut json: serde_json::Value = serde_json::from_slice(&bare).unwrap();
    assert!(tamper(&mut json["vanilla_proofs"]), "a value to change");
    let refusals = [
        (
            request(serde_json::to_vec(&json).unwrap()),
            "vanilla_proof",
            "does not verify",
        ),
        (
            cuzk::SubmitProofRequest {
                miner_id: MINER + 1 + g.next_u64() % 1000,
                ..request(bare.clone())
            },
            "vanilla_proof",
            "replica id",
        ),
        (
            cuzk::SubmitProofRequest {
                sector_number: SECTOR + 1,
                ..request(wrapped(&sealed.c1, 2048))
            },
            "vanilla_proof",
            "sector number",
        ),
        (
            cuzk::SubmitProofRequest {
                sector_size: 8 << 20,
                ..request(bare.clone())
            },
            "sector_size",
            "2KiB",
        ),
        (
            request(wrapped(&sealed.c1, 8 << 20)),
            "vanilla_proof",
            "sector size",
        ),
    ];
    for (req, field, why) in refusals {
        let e = c.submit_proof(req).await.unwrap_err();
        eprintln!("{field}: {}", e.message());
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
        assert!(e.message().starts_with(field), "{e:?}");
        assert!(e.message().contains(why), "{e:?}");
    }
    let status = server.daemon().engine().status();
    assert_eq!((status.jobs_completed, status.jobs_failed), (1, 0));
    stop(server).await;

    // A daemon whose parameter folder lacks the file: FAILED_PRECONDITION naming it.
    let empty = TempDir::new("no-params", &mut g);
    let server = start(&empty.0).await;
    let mut c = client(&server).await;
    let e = c.submit_proof(request(bare)).await.unwrap_err();
    eprintln!("{}", e.message());
    assert_eq!(e.code(), tonic::Code::FailedPrecondition, "{e:?}");
    assert!(
        e.message().contains(&blank.circuit_id().params_file_name()),
        "{e:?}"
    );
    assert_eq!(server.daemon().engine().status().jobs_failed, 0);
    stop(server).await;
}
