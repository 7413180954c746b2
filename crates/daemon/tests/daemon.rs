//! The daemon over real sockets with tonic clients built from the proto files: both
//! services, hostile messages, cancellation, timeouts, eviction, hundreds of clients,
//! disconnects, the HTTP status server and stopping. Circuits come from a test front end
//! (MiMC chains), so the daemon's own logic is what is tested; circom's front end is
//! tested end to end by the `pinion` binary's smoke test.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bls12_381::{Bls12, Scalar};
use daemon::frontend::{Frontend, FrontendCircuit, Witness, WitnessCharge, WitnessReader};
use daemon::proto::cuzk::v1 as cuzk;
use daemon::proto::pinion::v1 as pb;
use daemon::{Config, DaemonError, Server, Stop};
use groth16_prover::testing::MimcChain;
use memory_budget::Budget;
use pce_cache::{CircuitKey, PceCache, PceError, PceHandle};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use tonic::transport::Channel;

// ---------------------------------------------------------------------------------------
// A test front end: a circuit is 16 bytes (MiMC rounds, constants seed, little-endian
// u64s); a witness is 8 bytes (the start value), or 9 with a last byte 1 for a witness
// that does not satisfy the circuit.

struct Mimc;

struct MimcSource {
    rounds: usize,
    seed: u64,
}

struct MimcReader {
    rounds: usize,
    seed: u64,
}

fn chain(rounds: usize, seed: u64, x0: u64, corrupt: bool) -> MimcChain {
    let mut c = MimcChain::new(rounds, seed);
    c.x0 = Scalar::from(x0);
    c.corrupt = corrupt;
    c
}

fn unusable(reason: &str) -> DaemonError {
    DaemonError::Unusable {
        what: "circuit".into(),
        reason: reason.into(),
    }
}

impl Frontend for Mimc {
    fn name(&self) -> &'static str {
        "mimc"
    }
    fn load_circuit(
        &self,
        bytes: &[u8],
        _budget: &Budget,
    ) -> Result<Box<dyn FrontendCircuit>, DaemonError> {
        let b: [u8; 16] = bytes.try_into().map_err(|_| unusable("not 16 bytes"))?;
        let rounds = u64::from_le_bytes(b[..8].try_into().unwrap()) as usize;
        if !(1..=100_000).contains(&rounds) {
            return Err(unusable("rounds out of range"));
        }
        Ok(Box::new(MimcSource {
            rounds,
            seed: u64::from_le_bytes(b[8..].try_into().unwrap()),
        }))
    }
}

impl FrontendCircuit for MimcSource {
    fn n_public(&self) -> u32 {
        1
    }
    fn n_constraints(&self) -> u64 {
        2 * self.rounds as u64
    }
    fn record(&self, pces: &PceCache, key: &CircuitKey) -> Result<PceHandle, DaemonError> {
        pces.get_or_extract(key, || chain(self.rounds, self.seed, 0, false))
            .map_err(|e: PceError| unusable(&e.to_string()))
    }
    fn witness_reader(&self) -> Arc<dyn WitnessReader> {
        Arc::new(MimcReader {
            rounds: self.rounds,
            seed: self.seed,
        })
    }
}

/// A partition's circuit holding its charge, as a real front end's does.
#[derive(Clone)]
struct Charged {
    circuit: MimcChain,
    _charge: Arc<WitnessCharge>,
}

impl bellman::Circuit<Scalar> for Charged {
    fn synthesize<CS: bellman::ConstraintSystem<Scalar>>(
        self,
        cs: &mut CS,
    ) -> Result<(), bellman::SynthesisError> {
        self.circuit.synthesize(cs)
    }
}

impl WitnessReader for MimcReader {
    fn read(&self, bytes: &[u8], mut charge: WitnessCharge) -> Result<Witness, DaemonError> {
        let (x0, corrupt) = match bytes.len() {
            8 => (u64::from_le_bytes(bytes.try_into().unwrap()), false),
            9 if bytes[8] == 1 => (u64::from_le_bytes(bytes[..8].try_into().unwrap()), true),
            n => {
                return Err(DaemonError::Unusable {
                    what: "witness".into(),
                    reason: format!("{n} bytes, expected 8"),
                })
            }
        };
        charge.shrink_to(8);
        let c = chain(self.rounds, self.seed, x0, corrupt);
        let public_values = vec![format!("{:?}", c.output())];
        Ok(Witness {
            partition: engine::Partition::circuit(Charged {
                circuit: c,
                _charge: Arc::new(charge),
            }),
            public_values,
        })
    }
}

// ---------------------------------------------------------------------------------------
// Helpers.

fn seed() -> u64 {
    groth16_prover::testing::test_seed()
}

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let p = std::env::temp_dir().join(format!(
            "pinion-daemon-test-{tag}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A MiMC circuit's description and parameter file.
struct Setup {
    circuit: Vec<u8>,
    params_path: PathBuf,
    vk: groth16::PreparedVerifyingKey<Bls12>,
    rounds: usize,
    seed: u64,
}

fn setup(dir: &TempDir, rounds: usize, rng: &mut StdRng) -> Setup {
    let seed: u64 = rng.random();
    let params =
        groth16::generate_random_parameters::<Bls12, _, _>(chain(rounds, seed, 0, false), rng)
            .unwrap();
    let params_path = dir.0.join(format!("mimc-{rounds}-{seed}.params"));
    let mut bytes = Vec::new();
    params.write(&mut bytes).unwrap();
    std::fs::write(&params_path, bytes).unwrap();
    let mut circuit = (rounds as u64).to_le_bytes().to_vec();
    circuit.extend_from_slice(&seed.to_le_bytes());
    Setup {
        circuit,
        params_path,
        vk: groth16::prepare_verifying_key(&params.vk),
        rounds,
        seed,
    }
}

impl Setup {
    fn verifies(&self, proof: &[u8], x0: u64) -> bool {
        let Ok(p) = groth16::Proof::<Bls12>::read(proof) else {
            return false;
        };
        let output = chain(self.rounds, self.seed, x0, false).output();
        groth16::verify_proof(&self.vk, &p, &[output]).is_ok()
    }
}

const GIB: u64 = 1 << 30;

async fn start(toml: &str, budget_bytes: u64) -> Server {
    // The recorder first, so the budget's series are recorded.
    daemon::metrics::install().unwrap();
    let config = Config::from_toml(toml).unwrap();
    Server::start(config, Arc::new(Mimc), Some(Budget::fixed(budget_bytes)))
        .await
        .unwrap()
}

async fn tcp_server() -> Server {
    start("[daemon]\nlisten = \"127.0.0.1:0\"", GIB).await
}

async fn channel(server: &Server) -> Channel {
    daemon::client::connect(&server.grpc_addr().to_string())
        .await
        .unwrap()
}

async fn pinion(server: &Server) -> pb::pinion_client::PinionClient<Channel> {
    daemon::client::pinion_client(channel(server).await, 64 << 20)
}

async fn cuzk(server: &Server) -> cuzk::proving_engine_client::ProvingEngineClient<Channel> {
    daemon::client::cuzk_client(channel(server).await, 64 << 20)
}

async fn register(
    client: &mut pb::pinion_client::PinionClient<Channel>,
    s: &Setup,
) -> pb::RegisterCircuitResponse {
    client
        .register_circuit(pb::RegisterCircuitRequest {
            r1cs: Some(pb::register_circuit_request::R1cs::R1csBytes(
                s.circuit.clone(),
            )),
            params: Some(pb::register_circuit_request::Params::ParamsPath(
                s.params_path.display().to_string(),
            )),
        })
        .await
        .unwrap()
        .into_inner()
}

async fn submit(
    client: &mut pb::pinion_client::PinionClient<Channel>,
    circuit: &str,
    witness: Vec<u8>,
    priority: pb::Priority,
) -> Result<pb::SubmitWitnessResponse, tonic::Status> {
    client
        .submit_witness(pb::SubmitWitnessRequest {
            circuit_id: circuit.to_string(),
            witness,
            priority: priority as i32,
            request_id: String::new(),
        })
        .await
        .map(|r| r.into_inner())
}

async fn await_job(
    client: &mut pb::pinion_client::PinionClient<Channel>,
    job: &str,
    timeout_ms: u64,
) -> pb::AwaitJobResponse {
    client
        .await_job(pb::AwaitJobRequest {
            job_id: job.to_string(),
            timeout_ms,
        })
        .await
        .unwrap()
        .into_inner()
}

async fn stop(server: Server) {
    server.stop(Stop::Graceful);
    tokio::time::timeout(Duration::from_secs(60), server.wait())
        .await
        .expect("the server stops")
        .unwrap();
}

// ---------------------------------------------------------------------------------------
// Tests.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn register_submit_await_and_cuzk_sees_the_same_jobs() {
    let mut rng = StdRng::seed_from_u64(seed());
    let dir = TempDir::new("basic");
    let s = setup(&dir, 20, &mut rng);
    let server = tcp_server().await;
    let mut client = pinion(&server).await;
    let reg = register(&mut client, &s).await;
    assert!(!reg.already_registered);
    assert_eq!((reg.n_public, reg.n_constraints), (1, 40));
    let again = register(&mut client, &s).await;
    assert_eq!(again.circuit_id, reg.circuit_id);
    assert!(again.already_registered);

    let x0: u64 = rng.random();
    let sub = submit(
        &mut client,
        &reg.circuit_id,
        x0.to_le_bytes().to_vec(),
        pb::Priority::High,
    )
    .await
    .unwrap();
    assert_eq!(sub.assigned_device, "cpu0", "one device: nothing to choose");
    let done = await_job(&mut client, &sub.job_id, 0).await;
    assert_eq!(
        done.state,
        pb::JobState::Completed as i32,
        "{}",
        done.error_message
    );
    assert_eq!(done.proof.len(), 192);
    assert!(s.verifies(&done.proof, x0));
    assert_eq!(
        done.public_values,
        [format!("{:?}", chain(s.rounds, s.seed, x0, false).output())]
    );
    assert_eq!(done.device, "cpu0");

    // cuzk.v1 awaits the same job id and says the same.
    let mut c = cuzk(&server).await;
    let r = c
        .await_proof(cuzk::AwaitProofRequest {
            job_id: sub.job_id.clone(),
            timeout_ms: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        r.status,
        cuzk::await_proof_response::Status::Completed as i32
    );
    assert_eq!(r.proof, done.proof);

    // GetJob of an ended job; an unknown job is NOT_FOUND.
    let j = client
        .get_job(pb::GetJobRequest {
            job_id: sub.job_id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(j.state, pb::JobState::Completed as i32);
    assert_eq!(j.priority, pb::Priority::High as i32);
    assert_eq!(j.circuit_id, reg.circuit_id);
    let err = client
        .get_job(pb::GetJobRequest {
            job_id: "job-999999".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::NotFound);

    // A witness that does not satisfy the circuit: a FAILED job with the reason.
    let mut bad = x0.to_le_bytes().to_vec();
    bad.push(1);
    let sub = submit(&mut client, &reg.circuit_id, bad, pb::Priority::Normal)
        .await
        .unwrap();
    let failed = await_job(&mut client, &sub.job_id, 0).await;
    assert_eq!(failed.state, pb::JobState::Failed as i32);
    assert!(
        failed.error_message.contains("unsatisfied") || failed.error_message.contains("row"),
        "{}",
        failed.error_message
    );
    // A witness the front end refuses, an unknown circuit, an empty witness.
    let e = submit(
        &mut client,
        &reg.circuit_id,
        vec![1, 2, 3],
        pb::Priority::Normal,
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
    assert!(e.message().contains("3 bytes"), "{}", e.message());
    let e = submit(&mut client, "nope", vec![0; 8], pb::Priority::Normal)
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::NotFound);
    let e = submit(&mut client, &reg.circuit_id, vec![], pb::Priority::Normal)
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    stop(server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cuzk_requests_are_checked_and_garbage_filecoin_inputs_refused_with_the_reason() {
    let seed = seed();
    let mut rng = StdRng::seed_from_u64(seed);
    let server = tcp_server().await;
    let mut c = cuzk(&server).await;
    let mut bytes = |n: usize| -> Vec<u8> { (0..n).map(|_| rng.random()).collect() };
    // Fresh garbage of the right shapes: random vanilla proofs, randomness and
    // commitments; C1 outputs that are JSON but not a C1 (Go's wrapper around random
    // base64, and a bare object).
    let vanilla: Vec<Vec<u8>> = (0..3).map(|i| bytes(1 + 97 * i)).collect();
    let (randomness, comm_r_old, comm_r_new, comm_d_new) =
        (bytes(32), bytes(32), bytes(32), bytes(32));
    let hex: String = bytes(40).iter().map(|b| format!("{b:02x}")).collect();
    let c1s = [
        format!(r#"{{"SectorNum": 1, "Phase1Out": "{hex}", "SectorSize": 2048}}"#),
        format!(r#"{{"registered_proof": "StackedDrg2KiBV1_1", "comm_r": "{hex}"}}"#),
    ];
    let good = |kind: cuzk::ProofKind| cuzk::SubmitProofRequest {
        request_id: "r1".into(),
        proof_kind: kind as i32,
        sector_size: 2048,
        vanilla_proof: c1s[0].clone().into_bytes(),
        vanilla_proofs: vanilla.clone(),
        randomness: randomness.clone(),
        comm_r_old: comm_r_old.clone(),
        comm_r_new: comm_r_new.clone(),
        comm_d_new: comm_d_new.clone(),
        sector_number: 1,
        miner_id: 1000,
        ..Default::default()
    };
    let code = |r: Result<tonic::Response<cuzk::SubmitProofResponse>, tonic::Status>| {
        let e = r.unwrap_err();
        (e.code(), e.message().to_string())
    };
    // Well-formed fields, garbage inside: pinion-filecoin's parsers and filecoin-proofs'
    // verifiers refuse them, naming the field and the reason.
    let bare_c1 = cuzk::SubmitProofRequest {
        vanilla_proof: c1s[1].clone().into_bytes(),
        ..good(cuzk::ProofKind::PorepSealCommit)
    };
    for (req, registered, field) in [
        (good(cuzk::ProofKind::PorepSealCommit), 0, "vanilla_proof"),
        (bare_c1, 0, "vanilla_proof"),
        (good(cuzk::ProofKind::SnapDealsUpdate), 0, "vanilla_proofs"),
        (
            good(cuzk::ProofKind::WindowPostPartition),
            10,
            "vanilla_proofs",
        ),
        (good(cuzk::ProofKind::WinningPost), 0, "vanilla_proofs"),
        // A Winning PoSt proof type for a Window PoSt.
        (
            good(cuzk::ProofKind::WindowPostPartition),
            0,
            "vanilla_proofs",
        ),
        (good(cuzk::ProofKind::WinningPost), 99, "registered_proof"),
        (
            good(cuzk::ProofKind::SnapDealsUpdate),
            5,
            "registered_proof",
        ),
    ] {
        let kind = req.proof_kind;
        let req = cuzk::SubmitProofRequest {
            registered_proof: registered,
            ..req
        };
        let (c_, m) = code(c.submit_proof(req).await);
        eprintln!("kind {kind}, registered_proof {registered}: {m}");
        assert_eq!(c_, tonic::Code::InvalidArgument, "kind {kind}: {m}");
        assert!(m.starts_with(field), "kind {kind}: {m}");
        assert!(m.len() > field.len() + 2, "a reason follows the field: {m}");
    }
    // Prove answers the same, and the refused requests left no job and no byte.
    let e = c
        .prove(cuzk::ProveRequest {
            submit: Some(good(cuzk::ProofKind::WinningPost)),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
    assert_eq!(server.daemon().budget().used_bytes(), 0);
    let status = server.daemon().engine().status();
    assert_eq!(
        (status.jobs_failed, status.jobs_completed),
        (0, 0),
        "no job was made"
    );
    let cases: Vec<(cuzk::SubmitProofRequest, &str)> = vec![
        (
            cuzk::SubmitProofRequest {
                proof_kind: 0,
                ..good(cuzk::ProofKind::WinningPost)
            },
            "proof_kind",
        ),
        (
            cuzk::SubmitProofRequest {
                proof_kind: 77,
                ..good(cuzk::ProofKind::WinningPost)
            },
            "proof_kind",
        ),
        (
            cuzk::SubmitProofRequest {
                priority: 9,
                ..good(cuzk::ProofKind::WinningPost)
            },
            "priority",
        ),
        (
            cuzk::SubmitProofRequest {
                sector_size: 1000,
                ..good(cuzk::ProofKind::WinningPost)
            },
            "sector_size",
        ),
        (
            cuzk::SubmitProofRequest {
                vanilla_proof: b"\x00\xffgarbage{".to_vec(),
                ..good(cuzk::ProofKind::PorepSealCommit)
            },
            "vanilla_proof",
        ),
        (
            cuzk::SubmitProofRequest {
                vanilla_proof: vec![],
                ..good(cuzk::ProofKind::PorepSealCommit)
            },
            "vanilla_proof",
        ),
        (
            cuzk::SubmitProofRequest {
                randomness: vec![0; 31],
                ..good(cuzk::ProofKind::WindowPostPartition)
            },
            "randomness",
        ),
        (
            cuzk::SubmitProofRequest {
                vanilla_proofs: vec![],
                ..good(cuzk::ProofKind::WinningPost)
            },
            "vanilla_proofs",
        ),
        (
            cuzk::SubmitProofRequest {
                comm_d_new: vec![0; 33],
                ..good(cuzk::ProofKind::SnapDealsUpdate)
            },
            "comm_d_new",
        ),
    ];
    for (req, field) in cases {
        let (c_, m) = code(c.submit_proof(req).await);
        assert_eq!(c_, tonic::Code::InvalidArgument, "{field}: {m}");
        assert!(m.starts_with(field), "{field}: {m}");
    }
    let e = c
        .prove(cuzk::ProveRequest { submit: None })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    // Unknown ids.
    let e = c
        .cancel_proof(cuzk::CancelProofRequest {
            job_id: "nope".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::NotFound);
    let e = c
        .evict_srs(cuzk::EvictSrsRequest {
            circuit_id: "nope".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::NotFound);
    // Still serving.
    let status = c
        .get_status(cuzk::GetStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status.gpus.len(), 1);
    assert_eq!(status.gpus[0].name, "cpu0");
    stop(server).await;
}

/// A codec for raw bytes: sends whatever it is given as a message.
#[derive(Clone, Default)]
struct Raw;

impl tonic::codec::Codec for Raw {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = Raw;
    type Decoder = Raw;
    fn encoder(&mut self) -> Raw {
        Raw
    }
    fn decoder(&mut self) -> Raw {
        Raw
    }
}

impl tonic::codec::Encoder for Raw {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn encode(
        &mut self,
        item: Vec<u8>,
        dst: &mut tonic::codec::EncodeBuf<'_>,
    ) -> Result<(), tonic::Status> {
        use bytes_put::BufMutExt;
        dst.put_all(&item);
        Ok(())
    }
}

impl tonic::codec::Decoder for Raw {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn decode(
        &mut self,
        src: &mut tonic::codec::DecodeBuf<'_>,
    ) -> Result<Option<Vec<u8>>, tonic::Status> {
        use prost::bytes::Buf;
        let mut v = vec![0; src.remaining()];
        src.copy_to_slice(&mut v);
        Ok(Some(v))
    }
}

mod bytes_put {
    /// `put_slice` through prost's re-export of `bytes`.
    pub trait BufMutExt {
        fn put_all(&mut self, b: &[u8]);
    }
    impl<T: prost::bytes::BufMut> BufMutExt for T {
        fn put_all(&mut self, b: &[u8]) {
            self.put_slice(b);
        }
    }
}

async fn raw_call(server: &Server, path: &'static str, body: Vec<u8>) -> tonic::Status {
    let mut grpc = tonic::client::Grpc::new(channel(server).await);
    grpc.ready().await.unwrap();
    grpc.unary(
        tonic::Request::new(body),
        tonic::codegen::http::uri::PathAndQuery::from_static(path),
        Raw,
    )
    .await
    .unwrap_err()
}

/// Whether `bytes` decode as the request message of the method at `path`.
fn decodes_as_request(path: &str, bytes: &[u8]) -> bool {
    use prost::Message;
    match path {
        "/cuzk.v1.ProvingEngine/SubmitProof" => cuzk::SubmitProofRequest::decode(bytes).is_ok(),
        "/cuzk.v1.ProvingEngine/AwaitProof" => cuzk::AwaitProofRequest::decode(bytes).is_ok(),
        "/pinion.v1.Pinion/RegisterCircuit" => pb::RegisterCircuitRequest::decode(bytes).is_ok(),
        "/pinion.v1.Pinion/SubmitWitness" => pb::SubmitWitnessRequest::decode(bytes).is_ok(),
        other => panic!("no request type known for {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_and_oversized_messages_are_refused_and_serving_goes_on() {
    let mut rng = StdRng::seed_from_u64(seed());
    let server = start(
        "[daemon]\nlisten = \"127.0.0.1:0\"\nmax_message_size = \"64KiB\"",
        GIB,
    )
    .await;
    for path in [
        "/cuzk.v1.ProvingEngine/SubmitProof",
        "/cuzk.v1.ProvingEngine/AwaitProof",
        "/pinion.v1.Pinion/RegisterCircuit",
        "/pinion.v1.Pinion/SubmitWitness",
    ] {
        // Random bytes that are no message of the method's request type: a truncated
        // varint field at the end, and drawn again in the rare case (1 in 500 for
        // AwaitProof) that an unknown length-delimited field at the front swallows it and
        // the bytes decode after all (to an empty request, which an AwaitProof handler
        // answers with NotFound).
        let junk = std::iter::repeat_with(|| {
            let mut junk: Vec<u8> = (0..rng.random_range(1..200))
                .map(|_| rng.random())
                .collect();
            junk.extend_from_slice(&[0x08, 0xff]);
            junk
        })
        .take(1000)
        .find(|j| !decodes_as_request(path, j))
        .expect("undecodable junk in 1,000 draws");
        let s = raw_call(&server, path, junk).await;
        assert_eq!(s.code(), tonic::Code::InvalidArgument, "{path}: {s:?}");
        // Over the limit: refused before decoding.
        let s = raw_call(&server, path, vec![0x0a; 100 << 10]).await;
        assert_eq!(s.code(), tonic::Code::ResourceExhausted, "{path}: {s:?}");
    }
    let mut c = cuzk(&server).await;
    assert!(c.get_status(cuzk::GetStatusRequest {}).await.is_ok());
    assert_eq!(
        server.daemon().budget().used_bytes(),
        0,
        "nothing stays charged"
    );
    stop(server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_timeout_preload_and_evict() {
    let mut rng = StdRng::seed_from_u64(seed());
    let dir = TempDir::new("cancel");
    let s = setup(&dir, 3000, &mut rng);
    let server = start(
        "[daemon]\nlisten = \"127.0.0.1:0\"\n[pipeline]\nsynthesis_concurrency = 1",
        GIB,
    )
    .await;
    let mut client = pinion(&server).await;
    let mut c = cuzk(&server).await;
    let reg = register(&mut client, &s).await;
    let id = reg.circuit_id.clone();

    // Not loaded yet: evict says so; preload loads.
    let e = c
        .evict_srs(cuzk::EvictSrsRequest {
            circuit_id: id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!e.was_loaded);
    let p = c
        .preload_srs(cuzk::PreloadSrsRequest {
            circuit_id: id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!p.already_loaded);
    let p = c
        .preload_srs(cuzk::PreloadSrsRequest {
            circuit_id: id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(p.already_loaded);
    let st = c
        .get_status(cuzk::GetStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    let srs = st.loaded_srs.iter().find(|e| e.circuit_id == id).unwrap();
    assert_eq!(srs.tier, cuzk::srs_status::Tier::Hot as i32);
    assert!(srs.size_bytes > 0);
    let charged = server.daemon().budget().used_bytes();
    let e = c
        .evict_srs(cuzk::EvictSrsRequest {
            circuit_id: id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(e.was_loaded);
    assert_eq!(e.freed_bytes, srs.size_bytes);
    assert_eq!(
        server.daemon().budget().used_bytes(),
        charged - e.freed_bytes
    );
    let st = c
        .get_status(cuzk::GetStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    let srs = st.loaded_srs.iter().find(|e| e.circuit_id == id).unwrap();
    assert_eq!(srs.tier, cuzk::srs_status::Tier::Warm as i32);

    // A long job, then one behind it: the second is cancelled before it could end.
    let first = submit(
        &mut client,
        &id,
        1u64.to_le_bytes().to_vec(),
        pb::Priority::Normal,
    )
    .await
    .unwrap();
    let second = submit(
        &mut client,
        &id,
        2u64.to_le_bytes().to_vec(),
        pb::Priority::Normal,
    )
    .await
    .unwrap();
    let timed = c
        .await_proof(cuzk::AwaitProofRequest {
            job_id: first.job_id.clone(),
            timeout_ms: 1,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        timed.status,
        cuzk::await_proof_response::Status::Timeout as i32
    );
    let cancelled = c
        .cancel_proof(cuzk::CancelProofRequest {
            job_id: second.job_id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(cancelled.was_running);
    let r = await_job(&mut client, &second.job_id, 0).await;
    assert_eq!(r.state, pb::JobState::Cancelled as i32);
    let r = await_job(&mut client, &first.job_id, 0).await;
    assert_eq!(
        r.state,
        pb::JobState::Completed as i32,
        "{}",
        r.error_message
    );
    assert!(s.verifies(&r.proof, 1));
    // Cancelling an ended job: it was not running.
    let again = c
        .cancel_proof(cuzk::CancelProofRequest {
            job_id: first.job_id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!again.was_running);
    let st = c
        .get_status(cuzk::GetStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(st.total_proofs_completed, 1);
    assert_eq!(
        st.queues,
        [cuzk::QueueStatus {
            proof_kind: id.clone(),
            pending: 0,
            in_progress: 0
        }]
    );
    stop(server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundreds_of_clients_and_disconnected_awaits_leak_nothing() {
    let mut rng = StdRng::seed_from_u64(seed());
    let dir = TempDir::new("many");
    let s = Arc::new(setup(&dir, 10, &mut rng));
    let server = tcp_server().await;
    let mut client = pinion(&server).await;
    let id = register(&mut client, &s).await.circuit_id;
    // One proof first: the key is loaded and the backend's tables made; what stays charged
    // after it is the baseline.
    let warm = submit(
        &mut client,
        &id,
        5u64.to_le_bytes().to_vec(),
        pb::Priority::Normal,
    )
    .await
    .unwrap();
    await_job(&mut client, &warm.job_id, 0).await;
    let baseline = server.daemon().budget().used_bytes();

    // Clients that give up while awaiting: their jobs still end, and nothing stays.
    let mut abandoned = Vec::new();
    for x0 in 0..8u64 {
        let mut cl = pinion(&server).await;
        let sub = submit(
            &mut cl,
            &id,
            (100 + x0).to_le_bytes().to_vec(),
            pb::Priority::Low,
        )
        .await
        .unwrap();
        let name = sub.job_id.clone();
        let waiting = tokio::spawn(async move { await_job(&mut cl, &name, 0).await });
        tokio::time::sleep(Duration::from_millis(2)).await;
        waiting.abort();
        abandoned.push(sub.job_id);
    }

    let n = 200usize;
    let addr = server.grpc_addr().to_string();
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let (addr, id, s) = (addr.clone(), id.clone(), Arc::clone(&s));
            tokio::spawn(async move {
                // Its own connection per client.
                let ch = daemon::client::connect(&addr).await.unwrap();
                let mut cl = daemon::client::pinion_client(ch, 1 << 20);
                let x0 = 1000 + i as u64;
                let sub = submit(
                    &mut cl,
                    &id,
                    x0.to_le_bytes().to_vec(),
                    pb::Priority::Normal,
                )
                .await
                .unwrap();
                let r = await_job(&mut cl, &sub.job_id, 0).await;
                assert_eq!(
                    r.state,
                    pb::JobState::Completed as i32,
                    "{}",
                    r.error_message
                );
                assert!(s.verifies(&r.proof, x0), "client {i}");
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    for job in &abandoned {
        let r = await_job(&mut client, job, 0).await;
        assert_eq!(
            r.state,
            pb::JobState::Completed as i32,
            "{}",
            r.error_message
        );
    }
    // Every witness went with its job.
    assert_eq!(server.daemon().budget().used_bytes(), baseline);
    let st = server.daemon().engine().status();
    assert_eq!(st.jobs_completed as usize, 1 + abandoned.len() + n);
    assert_eq!(st.queued, [0; 4]);
    stop(server).await;
}

async fn http_get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    let code = out[9..12].parse().unwrap();
    let body = out
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    (code, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_server_and_graceful_stop_on_a_unix_socket() {
    let mut rng = StdRng::seed_from_u64(seed());
    let dir = TempDir::new("unix");
    let s = setup(&dir, 200, &mut rng);
    let sock = dir.0.join("d.sock");
    let server = start(
        &format!(
            "[daemon]\nlisten = \"unix://{}\"\nstatus_listen = \"127.0.0.1:0\"",
            sock.display()
        ),
        GIB,
    )
    .await;
    assert!(sock.exists());
    let http = server.status_addr().unwrap();
    let mut client = pinion(&server).await;
    let id = register(&mut client, &s).await.circuit_id;
    let first = submit(
        &mut client,
        &id,
        77u64.to_le_bytes().to_vec(),
        pb::Priority::Normal,
    )
    .await
    .unwrap();
    assert_eq!(
        await_job(&mut client, &first.job_id, 0).await.state,
        pb::JobState::Completed as i32
    );
    let (code, metrics) = http_get(http, "/metrics").await;
    assert_eq!(code, 200);
    for series in [
        "pinion_engine_jobs_total",
        "pinion_daemon_requests_total",
        "pinion_budget_used_bytes",
    ] {
        assert!(metrics.contains(series), "{series} missing from /metrics");
    }
    let jobs: Vec<String> = {
        let mut v = Vec::new();
        for x0 in 0..4u64 {
            v.push(
                submit(
                    &mut client,
                    &id,
                    x0.to_le_bytes().to_vec(),
                    pb::Priority::Normal,
                )
                .await
                .unwrap()
                .job_id,
            );
        }
        v
    };
    let (code, body) = http_get(http, "/healthz").await;
    assert_eq!((code, body.as_str()), (200, "ok\n"));
    let (code, status) = http_get(http, "/status").await;
    assert_eq!(code, 200);
    let v: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert_eq!(v["devices"][0]["name"], "cpu0");
    assert_eq!(v["circuits"][0]["id"], id.as_str());
    assert!(
        v["budget"]["by_category"]["pce"]["charged_bytes"]
            .as_u64()
            .unwrap()
            > 0
    );
    // Waiters on the queued jobs, then a graceful stop: they all get their proofs.
    let waiters: Vec<_> = jobs
        .iter()
        .map(|j| {
            let (mut cl, j) = (client.clone(), j.clone());
            tokio::spawn(async move { await_job(&mut cl, &j, 0).await })
        })
        .collect();
    server.stop(Stop::Graceful);
    // New work is refused while the old finishes.
    let e = submit(
        &mut client,
        &id,
        9u64.to_le_bytes().to_vec(),
        pb::Priority::Normal,
    )
    .await;
    if let Err(e) = e {
        assert!(matches!(e.code(), tonic::Code::Unavailable), "{e:?}");
    }
    for (w, x0) in waiters.into_iter().zip(0u64..) {
        let r = w.await.unwrap();
        assert_eq!(
            r.state,
            pb::JobState::Completed as i32,
            "{}",
            r.error_message
        );
        assert!(s.verifies(&r.proof, x0));
    }
    tokio::time::timeout(Duration::from_secs(60), server.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(!sock.exists(), "the socket is removed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_cancels_running_jobs() {
    let mut rng = StdRng::seed_from_u64(seed());
    let dir = TempDir::new("abort");
    let s = setup(&dir, 3000, &mut rng);
    let server = start(
        "[daemon]\nlisten = \"127.0.0.1:0\"\n[pipeline]\nsynthesis_concurrency = 1",
        GIB,
    )
    .await;
    let mut client = pinion(&server).await;
    let id = register(&mut client, &s).await.circuit_id;
    let mut waiters = Vec::new();
    for x0 in 0..3u64 {
        let job = submit(
            &mut client,
            &id,
            x0.to_le_bytes().to_vec(),
            pb::Priority::Normal,
        )
        .await
        .unwrap()
        .job_id;
        let mut cl = client.clone();
        waiters.push(tokio::spawn(
            async move { await_job(&mut cl, &job, 0).await },
        ));
    }
    server.stop(Stop::Graceful);
    server.stop(Stop::Abort);
    let budget = server.daemon().budget().clone();
    let mut cancelled = 0;
    for w in waiters {
        let r = w.await.unwrap();
        if r.state == pb::JobState::Cancelled as i32 {
            cancelled += 1;
        } else {
            assert_eq!(
                r.state,
                pb::JobState::Completed as i32,
                "{}",
                r.error_message
            );
        }
    }
    assert!(
        cancelled >= 1,
        "the last of three long jobs cannot have finished"
    );
    tokio::time::timeout(Duration::from_secs(60), server.wait())
        .await
        .unwrap()
        .unwrap();
    // Only the circuit's PCE and key stay charged (the daemon is still alive here).
    assert_eq!(
        budget
            .snapshot()
            .used_in(memory_budget::Category::WorkingSet),
        0
    );
}
