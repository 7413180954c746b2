//! SnapDeals (empty-sector update) from partition proofs and the three commitments, as cuzk
//! receives them.

use std::sync::Arc;

use filecoin_hashers::{Domain, Hasher};
use filecoin_proofs::{DefaultPieceDomain, PoRepConfig, SectorUpdateConfig};
use filecoin_proofs_api::RegisteredUpdateProof;
use storage_proofs_core::compound_proof::{CompoundProof, SetupParams};
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_core::parameter_cache::CacheableParameters;
use storage_proofs_core::proof::ProofScheme;
use storage_proofs_update::constants::TreeRHasher;
use storage_proofs_update::{
    EmptySectorUpdate, EmptySectorUpdateCircuit, EmptySectorUpdateCompound, PartitionProof,
    PublicInputs, PublicParams,
};

use crate::job::{CircuitId, Job, PartitionCircuit, PartitionJob, ProofKind};
use crate::FilecoinError;

/// A SnapDeals request as cuzk gets it.
#[derive(Clone, Debug)]
pub struct SnapRequest {
    /// The update proof type (sector size).
    pub proof: RegisteredUpdateProof,
    /// bincode-serialized `PartitionProof`s, one per partition.
    pub partition_proofs: Vec<Vec<u8>>,
    /// comm_r of the sector before the update (32 raw bytes).
    pub comm_r_old: [u8; 32],
    /// comm_r after the update.
    pub comm_r_new: [u8; 32],
    /// comm_d of the new data.
    pub comm_d_new: [u8; 32],
}

/// The partitions of a SnapDeals update proof; the partition proofs are decoded and
/// verified with filecoin-proofs' own verifier before anything is synthesized.
pub fn snap_job(req: &SnapRequest) -> Result<Box<dyn PartitionJob>, FilecoinError> {
    let config = req.proof.as_v1_config();
    filecoin_proofs::with_shape!(u64::from(config.sector_size), snap_job_for, config, req,)
}

type Compound<Tree> = EmptySectorUpdateCompound<Tree>;

fn public_params<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    sector_bytes: u64,
    partitions: usize,
) -> Result<PublicParams, FilecoinError> {
    let setup = SetupParams {
        vanilla_params: storage_proofs_update::SetupParams { sector_bytes },
        partitions: Some(partitions),
        priority: false,
    };
    let pp = <Compound<Tree> as CompoundProof<EmptySectorUpdate<Tree>, _>>::setup(&setup)
        .map_err(|e| FilecoinError::filecoin("snap public parameters", e))?;
    Ok(pp.vanilla_params)
}

fn circuit_id<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    params: &PublicParams,
    sector_size: u64,
) -> CircuitId {
    CircuitId {
        kind: ProofKind::SnapDeals,
        sector_size,
        cache_id: <Compound<Tree> as CacheableParameters<EmptySectorUpdateCircuit<Tree>, _>>::cache_identifier(params),
    }
}

struct Snap<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>> {
    params: PublicParams,
    inputs: PublicInputs,
    proofs: Vec<PartitionProof<Tree>>,
}

fn commitment<D: Domain>(bytes: &[u8; 32], what: &'static str) -> Result<D, FilecoinError> {
    D::try_from_bytes(bytes).map_err(|e| FilecoinError::filecoin(what, e))
}

fn snap_job_for<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    config: PoRepConfig,
    req: &SnapRequest,
) -> Result<Box<dyn PartitionJob>, FilecoinError> {
    let update = SectorUpdateConfig::from_porep_config(&config);
    let n_partitions = usize::from(update.update_partitions);
    let sector_size = u64::from(update.sector_size);
    if req.partition_proofs.len() != n_partitions {
        return Err(FilecoinError::CountMismatch {
            what: "snap partition proofs",
            expected: n_partitions,
            found: req.partition_proofs.len(),
        });
    }
    let proofs: Vec<PartitionProof<Tree>> = req
        .partition_proofs
        .iter()
        .enumerate()
        .map(|(i, bytes)| {
            bincode::deserialize(bytes).map_err(|e| {
                FilecoinError::decode(format!("snap partition proof {i} (bincode)"), e)
            })
        })
        .collect::<Result<_, _>>()?;
    let inputs = PublicInputs {
        k: n_partitions,
        comm_r_old: commitment::<<TreeRHasher as Hasher>::Domain>(&req.comm_r_old, "comm_r_old")?,
        comm_d_new: commitment::<DefaultPieceDomain>(&req.comm_d_new, "comm_d_new")?,
        comm_r_new: commitment::<<TreeRHasher as Hasher>::Domain>(&req.comm_r_new, "comm_r_new")?,
        h: update.h,
    };
    let params = public_params::<Tree>(sector_size, n_partitions)?;
    let id = circuit_id::<Tree>(&params, sector_size);
    let valid = EmptySectorUpdate::<Tree>::verify_all_partitions(&params, &inputs, &proofs)
        .map_err(|e| FilecoinError::filecoin("snap vanilla proof verification", e))?;
    if !valid {
        return Err(FilecoinError::InvalidVanillaProof { kind: "snap-deals" });
    }
    let s = Arc::new(Snap::<Tree> {
        params,
        inputs,
        proofs,
    });
    let (b, p, i) = (s.clone(), s.clone(), s);
    Ok(Box::new(Job {
        id,
        n_partitions,
        blank: move || Ok(blank_circuit::<Tree>(&b.params)),
        partition: move |k| {
            <Compound<Tree> as CompoundProof<EmptySectorUpdate<Tree>, _>>::circuit(
                &p.inputs,
                (),
                &p.proofs[k],
                &p.params,
                Some(k),
            )
            .map_err(|e| FilecoinError::filecoin("snap partition circuit", e))
        },
        inputs: move |k| {
            <Compound<Tree> as CompoundProof<EmptySectorUpdate<Tree>, _>>::generate_public_inputs(
                &i.inputs,
                &i.params,
                Some(k),
            )
            .map_err(|e| FilecoinError::filecoin("snap public inputs", e))
        },
        _circuit: std::marker::PhantomData,
    }))
}

fn blank_circuit<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    params: &PublicParams,
) -> EmptySectorUpdateCircuit<Tree> {
    <Compound<Tree> as CompoundProof<EmptySectorUpdate<Tree>, _>>::blank_circuit(params)
}

/// The blank SnapDeals circuit of a proof type (for recording and parameter generation).
pub fn blank_job(proof: RegisteredUpdateProof) -> Result<Box<dyn PartitionJob>, FilecoinError> {
    let config = proof.as_v1_config();
    filecoin_proofs::with_shape!(u64::from(config.sector_size), blank_job_for, config,)
}

fn blank_job_for<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    config: PoRepConfig,
) -> Result<Box<dyn PartitionJob>, FilecoinError> {
    let update = SectorUpdateConfig::from_porep_config(&config);
    let n_partitions = usize::from(update.update_partitions);
    let sector_size = u64::from(update.sector_size);
    let params = Arc::new(public_params::<Tree>(sector_size, n_partitions)?);
    let id = circuit_id::<Tree>(&params, sector_size);
    Ok(Box::new(Job {
        id,
        n_partitions,
        blank: move || Ok(blank_circuit::<Tree>(&params)),
        partition: |_| Err(crate::job::no_witness()),
        inputs: |_| Err(crate::job::no_witness()),
        _circuit: std::marker::PhantomData,
    }))
}

/// One witness-only pass.
impl<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>> PartitionCircuit
    for EmptySectorUpdateCircuit<Tree>
{
}
