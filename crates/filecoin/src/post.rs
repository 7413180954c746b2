//! Window PoSt and Winning PoSt from vanilla proofs (bincode `FallbackPoStSectorProof`s)
//! and 32 bytes of randomness, as cuzk receives them.

use std::sync::Arc;

use filecoin_hashers::{Domain, Hasher};
use filecoin_proofs::parameters::{window_post_setup_params, winning_post_setup_params};
use filecoin_proofs::{
    as_safe_commitment, partition_vanilla_proofs, single_partition_vanilla_proofs,
    FallbackPoStSectorProof, PoStConfig, PoStType,
};
use filecoin_proofs_api::RegisteredPoStProof;
use storage_proofs_core::compound_proof::{CompoundProof, SetupParams};
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_post::fallback::{
    self, FallbackPoSt, FallbackPoStCircuit, FallbackPoStCompound, PublicSector,
};

use crate::job::{CircuitId, Job, PartitionCircuit, PartitionJob, ProofKind};
use crate::porep::prover_id;
use crate::FilecoinError;

/// A PoSt request as cuzk gets it.
#[derive(Clone, Debug)]
pub struct PostRequest {
    /// The proof type (Window or Winning, with its sector size).
    pub proof: RegisteredPoStProof,
    /// bincode-serialized `FallbackPoStSectorProof`s, one per sector.
    pub vanilla_proofs: Vec<Vec<u8>>,
    /// The challenge randomness (a field element's 32 bytes).
    pub randomness: [u8; 32],
    /// The miner (prover id = its ID address payload).
    pub miner_id: u64,
    /// Window PoSt only: prove this one partition (the vanilla proofs are its sectors');
    /// `None` proves every partition.
    pub partition: Option<usize>,
}

/// The partitions of a Window or Winning PoSt. `kind` is what the caller asked for: a
/// proof type of the other kind is refused. Vanilla proofs are decoded and verified with
/// filecoin-proofs' own code before anything is synthesized.
pub fn post_job(
    kind: ProofKind,
    req: &PostRequest,
) -> Result<Box<dyn PartitionJob>, FilecoinError> {
    let config = req.proof.as_v1_config();
    let found = match config.typ {
        PoStType::Window => ProofKind::WindowPost,
        PoStType::Winning => ProofKind::WinningPost,
    };
    if found != kind {
        return Err(FilecoinError::ProofTypeMismatch {
            what: "registered post proof",
            expected: kind.name().into(),
            found: format!("{:?} ({})", req.proof, found.name()),
        });
    }
    if req.partition.is_some() && kind != ProofKind::WindowPost {
        return Err(FilecoinError::Unsupported(
            "a partition index is for Window PoSt only".into(),
        ));
    }
    filecoin_proofs::with_shape!(
        u64::from(config.sector_size),
        post_job_for,
        config,
        kind,
        req,
    )
}

type Params = fallback::PublicParams;

pub(crate) fn circuit_id<Tree: 'static + MerkleTreeTrait>(
    config: &PoStConfig,
    kind: ProofKind,
) -> Result<CircuitId, FilecoinError> {
    Ok(CircuitId {
        kind,
        sector_size: u64::from(config.sector_size),
        cache_id: config
            .get_cache_identifier::<Tree>()
            .map_err(|e| FilecoinError::filecoin("post parameter identifier", e))?,
    })
}

fn public_params<Tree: 'static + MerkleTreeTrait>(
    config: &PoStConfig,
    partitions: Option<usize>,
) -> Result<Params, FilecoinError> {
    let vanilla_params = match config.typ {
        PoStType::Window => window_post_setup_params(config),
        PoStType::Winning => winning_post_setup_params(config)
            .map_err(|e| FilecoinError::filecoin("winning post setup", e))?,
    };
    let setup = SetupParams {
        vanilla_params,
        partitions,
        priority: config.priority,
    };
    let pp = <FallbackPoStCompound<Tree> as CompoundProof<
        FallbackPoSt<'_, Tree>,
        FallbackPoStCircuit<Tree>,
    >>::setup(&setup)
    .map_err(|e| FilecoinError::filecoin("post public parameters", e))?;
    Ok(pp.vanilla_params)
}

struct Post<Tree: 'static + MerkleTreeTrait> {
    params: Params,
    inputs: fallback::PublicInputs<<Tree::Hasher as Hasher>::Domain>,
    /// The public inputs filecoin-proofs' verifier derives the circuit inputs from: for
    /// Winning PoSt the sector repeated once per unrolled challenge (its verifier does
    /// so), else `inputs`.
    verifier_inputs: fallback::PublicInputs<<Tree::Hasher as Hasher>::Domain>,
    /// Per circuit: its vanilla proof and the partition index the circuit is built with.
    partitions: Vec<(fallback::Proof<Tree::Proof>, usize)>,
}

fn post_job_for<Tree: 'static + MerkleTreeTrait>(
    config: PoStConfig,
    kind: ProofKind,
    req: &PostRequest,
) -> Result<Box<dyn PartitionJob>, FilecoinError> {
    let id = circuit_id::<Tree>(&config, kind)?;
    if req.vanilla_proofs.is_empty() {
        return Err(FilecoinError::CountMismatch {
            what: "vanilla proofs (at least one)",
            expected: 1,
            found: 0,
        });
    }
    let vanilla: Vec<FallbackPoStSectorProof<Tree>> = req
        .vanilla_proofs
        .iter()
        .enumerate()
        .map(|(i, bytes)| {
            bincode::deserialize(bytes)
                .map_err(|e| FilecoinError::decode(format!("post vanilla proof {i} (bincode)"), e))
        })
        .collect::<Result<_, _>>()?;
    // filecoin-proofs indexes and pads these without checking (it would panic).
    if let Some(i) = vanilla
        .iter()
        .position(|p| p.vanilla_proof.sectors.is_empty())
    {
        return Err(FilecoinError::decode(
            format!("post vanilla proof {i}"),
            "holds no sector proof",
        ));
    }
    let randomness = as_safe_commitment(&req.randomness, "randomness")
        .map_err(|e| FilecoinError::filecoin("post randomness", e))?;
    let prover = as_safe_commitment(&prover_id(req.miner_id), "prover_id")
        .map_err(|e| FilecoinError::filecoin("prover id", e))?;
    let sectors: Vec<PublicSector<_>> = vanilla
        .iter()
        .map(|p| PublicSector {
            id: p.sector_id,
            comm_r: p.comm_r,
        })
        .collect();
    let invalid = |e| invalid_vanilla(kind, e);
    let (params, inputs, verifier, partitions) = match (kind, req.partition) {
        (ProofKind::WindowPost, Some(index)) => {
            if vanilla.len() > config.sector_count {
                return Err(FilecoinError::CountMismatch {
                    what: "vanilla proofs of one window post partition (at most)",
                    expected: config.sector_count,
                    found: vanilla.len(),
                });
            }
            let n_all = None;
            let params = public_params::<Tree>(&config, n_all)?;
            let inputs = fallback::PublicInputs {
                randomness,
                prover_id: prover,
                sectors,
                k: Some(index),
            };
            let proof = single_partition_vanilla_proofs(&config, &params, &inputs, &vanilla)
                .map_err(invalid)?;
            // filecoin-proofs builds this circuit as partition 0 of the given sectors.
            let verifier = verifier_inputs(kind, &params, &inputs);
            (params, inputs, verifier, vec![(proof, 0)])
        }
        _ => {
            let n = match kind {
                ProofKind::WindowPost => vanilla.len().div_ceil(config.sector_count),
                _ => 1,
            };
            if kind == ProofKind::WinningPost && vanilla.len() != config.sector_count {
                return Err(FilecoinError::CountMismatch {
                    what: "winning post vanilla proofs",
                    expected: config.sector_count,
                    found: vanilla.len(),
                });
            }
            let params = public_params::<Tree>(&config, (n > 1).then_some(n))?;
            let inputs = fallback::PublicInputs {
                randomness,
                prover_id: prover,
                sectors,
                k: None,
            };
            // Checked against the public inputs the verifier uses. For Winning PoSt those
            // repeat the sector once per unrolled challenge: filecoin-proofs' check zips the
            // public sectors with the 66 unrolled sector proofs, so with the one real sector
            // it would look at the first challenge only, and a vanilla proof made for other
            // randomness that happens to share that first leaf (1 time in 64 on a 2 KiB
            // sector) would be proved, and fail only at the verifier.
            let verifier = verifier_inputs(kind, &params, &inputs);
            let proofs = partition_vanilla_proofs(&config, &params, &verifier, n, &vanilla)
                .map_err(invalid)?;
            let partitions = proofs
                .into_iter()
                .enumerate()
                .map(|(k, p)| (p, k))
                .collect();
            (params, inputs, verifier, partitions)
        }
    };
    let n_partitions = partitions.len();
    let s = Arc::new(Post::<Tree> {
        verifier_inputs: verifier,
        params,
        inputs,
        partitions,
    });
    let (b, p, i) = (s.clone(), s.clone(), s);
    Ok(Box::new(Job {
        id,
        n_partitions,
        blank: move || Ok(blank_circuit::<Tree>(&b.params)),
        partition: move |k| {
            let (proof, index) = &p.partitions[k];
            <FallbackPoStCompound<Tree> as CompoundProof<FallbackPoSt<'_, Tree>, _>>::circuit(
                &p.inputs,
                Default::default(),
                proof,
                &p.params,
                Some(*index),
            )
            .map_err(|e| FilecoinError::filecoin("post partition circuit", e))
        },
        inputs: move |k| {
            let (_, index) = &i.partitions[k];
            <FallbackPoStCompound<Tree> as CompoundProof<FallbackPoSt<'_, Tree>, _>>::generate_public_inputs(
                &i.verifier_inputs,
                &i.params,
                Some(*index),
            )
            .map_err(|e| FilecoinError::filecoin("post public inputs", e))
        },
        _circuit: std::marker::PhantomData,
    }))
}

/// The public inputs filecoin-proofs' verifier derives the circuit inputs from: for Winning
/// PoSt the sector repeated once per unrolled challenge (its verifier does so), else `inputs`.
fn verifier_inputs<D: Domain>(
    kind: ProofKind,
    params: &Params,
    inputs: &fallback::PublicInputs<D>,
) -> fallback::PublicInputs<D> {
    let mut v = inputs.clone();
    if kind == ProofKind::WinningPost {
        v.sectors = (0..params.sector_count)
            .flat_map(|_| inputs.sectors.iter().cloned())
            .collect();
    }
    v
}

/// filecoin-proofs reports vanilla proofs that fail its verifier with this message.
fn invalid_vanilla(kind: ProofKind, e: impl std::fmt::Display) -> FilecoinError {
    let reason = format!("{e:#}");
    if reason.contains("failed to verify") {
        FilecoinError::InvalidVanillaProof { kind: kind.name() }
    } else {
        FilecoinError::Filecoin {
            what: "post vanilla proofs",
            reason,
        }
    }
}

fn blank_circuit<Tree: 'static + MerkleTreeTrait>(params: &Params) -> FallbackPoStCircuit<Tree> {
    <FallbackPoStCompound<Tree> as CompoundProof<FallbackPoSt<'_, Tree>, _>>::blank_circuit(params)
}

/// The blank PoSt circuit of a proof type (for recording and parameter generation).
pub fn blank_job(proof: RegisteredPoStProof) -> Result<Box<dyn PartitionJob>, FilecoinError> {
    let config = proof.as_v1_config();
    filecoin_proofs::with_shape!(u64::from(config.sector_size), blank_job_for, config,)
}

fn blank_job_for<Tree: 'static + MerkleTreeTrait>(
    config: PoStConfig,
) -> Result<Box<dyn PartitionJob>, FilecoinError> {
    let kind = match config.typ {
        PoStType::Window => ProofKind::WindowPost,
        PoStType::Winning => ProofKind::WinningPost,
    };
    let id = circuit_id::<Tree>(&config, kind)?;
    let params = Arc::new(public_params::<Tree>(&config, None)?);
    Ok(Box::new(Job {
        id,
        n_partitions: 1,
        blank: move || Ok(blank_circuit::<Tree>(&params)),
        partition: |_| Err(crate::job::no_witness()),
        inputs: |_| Err(crate::job::no_witness()),
        _circuit: std::marker::PhantomData,
    }))
}

/// One witness-only pass.
impl<Tree: 'static + MerkleTreeTrait> PartitionCircuit for FallbackPoStCircuit<Tree> {}
