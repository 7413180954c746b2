//! The daemon's gRPC requests, decoded as tonic decodes them (prost) and checked as the
//! daemon checks them before any work: cuzk.v1 SubmitProof (and Prove's inner request:
//! the field checks, then pinion-filecoin's parsing and filecoin-proofs' verification),
//! pinion.v1 RegisterCircuit and SubmitWitness. The first byte picks the message type, so
//! a mutation can also hand one message's bytes to another's decoder.

use daemon::proto::cuzk::v1 as cuzk;
use daemon::proto::pinion::v1 as pb;
use prost::Message;

use super::{Input, Target, Verdict};
use crate::mutate::{Layout, Seed};

/// gRPC request messages and the daemon's field checks.
pub struct GrpcMessages;

const TYPES: u8 = 4;

fn seed(name: &'static str, tag: u8, body: Vec<u8>) -> Seed {
    let mut bytes = vec![tag];
    bytes.extend_from_slice(&body);
    Seed {
        name,
        layout: Layout {
            boundaries: vec![1, bytes.len()],
            dictionary: vec![b"{}".to_vec(), vec![0x0a, 0x20], vec![0x52, 0x20]],
            ..Layout::default()
        },
        bytes,
    }
}

fn submit(kind: cuzk::ProofKind) -> cuzk::SubmitProofRequest {
    cuzk::SubmitProofRequest {
        request_id: "fuzz".into(),
        proof_kind: kind as i32,
        sector_size: 2048,
        registered_proof: 0,
        priority: cuzk::Priority::High as i32,
        vanilla_proof: br#"{"SectorNum": 1, "Phase1Out": "e30=", "SectorSize": 2048}"#.to_vec(),
        vanilla_proofs: vec![vec![0; 40], vec![1; 8]],
        sector_number: 1,
        miner_id: 1000,
        randomness: vec![3; 32],
        partition_index: 0,
        comm_r_old: vec![4; 32],
        comm_r_new: vec![5; 32],
        comm_d_new: vec![6; 32],
    }
}

/// Checks one cuzk submission the way the daemon does, and what acceptance promises.
fn cuzk_submit(req: &cuzk::SubmitProofRequest, body: &[u8]) -> Verdict {
    assert!(
        daemon::cuzk::request_bytes(req) <= body.len() as u64,
        "the daemon would charge more bytes than the message holds"
    );
    match daemon::cuzk::check_submit(req) {
        Err(e) => {
            assert!(!e.to_string().is_empty());
            Verdict::Rejected
        }
        Ok(checked) => {
            assert_ne!(checked.kind, cuzk::ProofKind::Unspecified);
            // Then what the daemon does next: pinion-filecoin parses the inputs and
            // filecoin-proofs verifies them. The seeds carry no real sector's inputs (a
            // C1 output needs a sealed sector), so this stage refuses them all: what is
            // checked here is that it refuses without a panic, naming the field. The
            // verdict stays the field checks'.
            match daemon::filecoin::partition_job(req, checked) {
                Err(daemon::DaemonError::InvalidArgument { field, reason }) => {
                    assert!(!field.is_empty() && !reason.is_empty());
                }
                Err(e) => panic!("a request's inputs refused as other than invalid: {e}"),
                Ok(job) => assert!(job.n_partitions() > 0),
            }
            Verdict::Accepted
        }
    }
}

impl Target for GrpcMessages {
    fn name(&self) -> &'static str {
        "grpc"
    }

    fn about(&self) -> &'static str {
        "the daemon's gRPC requests: prost decode and the daemon's field checks"
    }

    fn seeds(&self) -> Vec<Seed> {
        let mut seeds = Vec::new();
        for (name, kind) in [
            ("porep", cuzk::ProofKind::PorepSealCommit),
            ("snap", cuzk::ProofKind::SnapDealsUpdate),
            ("window-post", cuzk::ProofKind::WindowPostPartition),
            ("winning-post", cuzk::ProofKind::WinningPost),
        ] {
            seeds.push(seed(name, 0, submit(kind).encode_to_vec()));
        }
        seeds.push(seed(
            "prove",
            1,
            cuzk::ProveRequest {
                submit: Some(submit(cuzk::ProofKind::PorepSealCommit)),
            }
            .encode_to_vec(),
        ));
        seeds.push(seed(
            "register",
            2,
            pb::RegisterCircuitRequest {
                r1cs: Some(pb::register_circuit_request::R1cs::R1csPath(
                    "/tmp/c.r1cs".into(),
                )),
                params: Some(pb::register_circuit_request::Params::ParamsBytes(vec![
                    7;
                    64
                ])),
            }
            .encode_to_vec(),
        ));
        seeds.push(seed(
            "submit-witness",
            3,
            pb::SubmitWitnessRequest {
                circuit_id: "circom-0123".into(),
                witness: b"wtns".to_vec(),
                priority: pb::Priority::Critical as i32,
                request_id: "r".into(),
            }
            .encode_to_vec(),
        ));
        seeds
    }

    fn run(&self, input: &Input<'_>) -> Verdict {
        let Some((&tag, body)) = input.bytes.split_first() else {
            return Verdict::Rejected;
        };
        match tag % TYPES {
            0 => match cuzk::SubmitProofRequest::decode(body) {
                Err(_) => Verdict::Rejected,
                Ok(req) => {
                    // prost round-trips what it decoded.
                    let again = cuzk::SubmitProofRequest::decode(req.encode_to_vec().as_slice())
                        .expect("a re-encoded message decodes");
                    assert_eq!(again, req, "a decoded message changed through re-encoding");
                    cuzk_submit(&req, body)
                }
            },
            1 => match cuzk::ProveRequest::decode(body) {
                Err(_) => Verdict::Rejected,
                Ok(cuzk::ProveRequest { submit: None }) => Verdict::Rejected,
                Ok(cuzk::ProveRequest { submit: Some(req) }) => cuzk_submit(&req, body),
            },
            2 => match pb::RegisterCircuitRequest::decode(body) {
                Err(_) => Verdict::Rejected,
                Ok(req) => match daemon::pinion::check_register(&req) {
                    Err(_) => Verdict::Rejected,
                    Ok((r1cs, params)) => {
                        for named in [r1cs, params] {
                            match named {
                                daemon::pinion::Named::Path(p) => assert!(!p.is_empty()),
                                daemon::pinion::Named::Bytes(b) => assert!(!b.is_empty()),
                            }
                        }
                        Verdict::Accepted
                    }
                },
            },
            _ => match pb::SubmitWitnessRequest::decode(body) {
                Err(_) => Verdict::Rejected,
                Ok(req) => match daemon::pinion::check_submit(&req) {
                    Err(_) => Verdict::Rejected,
                    Ok(_) => {
                        assert!(!req.witness.is_empty() && !req.circuit_id.is_empty());
                        Verdict::Accepted
                    }
                },
            },
        }
    }
}
