//! PoRep commit phase 2 from Curio's C1 output.

use std::convert::TryInto;
use std::sync::Arc;

use bellperson::gadgets::{num::AllocatedNum, uint32::UInt32};
use filecoin_hashers::{Domain, Hasher};
use filecoin_hashers::{PoseidonArity, POSEIDON_CONSTANTS_11, POSEIDON_CONSTANTS_2};
use filecoin_proofs::constants::DefaultPieceHasher;
use filecoin_proofs::parameters::setup_params;
use filecoin_proofs::{as_safe_commitment, DefaultPieceDomain, PoRepConfig};
use filecoin_proofs_api::seal::SealCommitPhase1Output;
use filecoin_proofs_api::RegisteredSealProof;
use neptune::circuit::poseidon_hash;
use serde::Deserialize;
use storage_proofs_core::api_version::ApiFeature;
use storage_proofs_core::compound_proof::{CompoundProof, SetupParams};
use storage_proofs_core::gadgets::por::{AuthPath, PoRCircuit};
use storage_proofs_core::gadgets::{encode::encode, uint64::UInt64, variables::Root};
use storage_proofs_core::merkle::{DiskTree, MerkleTreeTrait};
use storage_proofs_core::proof::ProofScheme;
use storage_proofs_core::util::reverse_bit_numbering;
use storage_proofs_porep::stacked::{self, generate_replica_id, StackedCompound, StackedDrg, Tau};

use bls12_381::Scalar;
use pce_cache::{Shape, Witness};
use rayon::prelude::*;

use crate::bridge::{PieceCs, WitnessCs};
use crate::job::{
    one_pass, witness_error, CircuitId, Job, PartitionCircuit, PartitionJob, ProofKind,
};
use crate::FilecoinError;

/// Go's wrapper around the C1 output as Curio hands it to cuzk: `Phase1Out` is the base64
/// of the serde JSON of `SealCommitPhase1Output` (Go encodes `[]byte` as base64).
#[derive(Deserialize)]
struct Wrapper {
    #[serde(rename = "SectorNum")]
    sector_num: u64,
    #[serde(rename = "Phase1Out")]
    phase1_out: String,
    #[serde(rename = "SectorSize")]
    sector_size: u64,
}

/// A decoded C1 output.
pub struct C1 {
    /// filecoin-proofs-api's commit phase 1 output.
    pub output: SealCommitPhase1Output,
    /// The wrapper's sector number, when the input was wrapped.
    pub sector_number: Option<u64>,
}

/// Decodes a C1 output: the wrapper `{"SectorNum": n, "Phase1Out": "<base64>",
/// "SectorSize": bytes}` or the bare JSON of `SealCommitPhase1Output`. A wrapper whose
/// sector size disagrees with the proof type is refused.
pub fn parse_c1(bytes: &[u8]) -> Result<C1, FilecoinError> {
    let (json, wrapper) = match serde_json::from_slice::<Wrapper>(bytes) {
        Ok(w) => {
            use base64::Engine as _;
            let json = base64::engine::general_purpose::STANDARD
                .decode(w.phase1_out.as_bytes())
                .map_err(|e| FilecoinError::decode("c1 wrapper's Phase1Out (base64)", e))?;
            (json, Some((w.sector_num, w.sector_size)))
        }
        Err(_) => (bytes.to_vec(), None),
    };
    let output: SealCommitPhase1Output = serde_json::from_slice(&json)
        .map_err(|e| FilecoinError::decode("c1 output (SealCommitPhase1Output json)", e))?;
    if let Some((_, size)) = wrapper {
        let found = u64::from(output.registered_proof.sector_size());
        if size != found {
            return Err(FilecoinError::SectorSizeMismatch {
                what: "the c1 output's proof type",
                expected: size,
                found,
            });
        }
    }
    Ok(C1 {
        output,
        sector_number: wrapper.map(|(n, _)| n),
    })
}

/// The prover id of an ID address (`f0<miner_id>`): its payload, the miner id as an
/// unsigned LEB128 varint, zero-padded to 32 bytes.
pub fn prover_id(miner_id: u64) -> [u8; 32] {
    let mut out = [0u8; 32];
    let mut v = miner_id;
    for b in out.iter_mut() {
        let low = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            *b = low;
            break;
        }
        *b = low | 0x80;
    }
    out
}

/// What a PoRep C2 request carries besides the C1 output.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct C2Target {
    /// The miner (prover id = its ID address payload).
    pub miner_id: u64,
    /// The sector number; the wrapper's when `None`.
    pub sector_number: Option<u64>,
    /// Refuse a C1 of any other proof type (sector size and version).
    pub expect: Option<RegisteredSealProof>,
}

/// The partitions of a PoRep C2 (interactive PoRep: `partitions` proofs of 192 bytes).
/// Checks the proof type, the commitments, the replica id against the miner, sector and
/// ticket, and the vanilla proofs (filecoin-proofs' own verifier) before anything is
/// synthesized.
pub fn porep_job(c1: C1, target: &C2Target) -> Result<Box<dyn PartitionJob>, FilecoinError> {
    let proof = c1.output.registered_proof;
    if let Some(expected) = target.expect {
        if expected != proof {
            return Err(FilecoinError::ProofTypeMismatch {
                what: "c1 output",
                expected: format!("{expected:?}"),
                found: format!("{proof:?}"),
            });
        }
    }
    let sector_number = match (target.sector_number, c1.sector_number) {
        (Some(a), Some(b)) if a != b => {
            return Err(FilecoinError::CountMismatch {
                what: "sector number (request vs c1 wrapper)",
                expected: a as usize,
                found: b as usize,
            })
        }
        (Some(a), _) | (None, Some(a)) => a,
        (None, None) => {
            return Err(FilecoinError::Decode {
                what: "c2 request".into(),
                reason: "no sector number given and the c1 output is not wrapped".into(),
            })
        }
    };
    let config = proof.as_v1_config();
    if config.feature_enabled(ApiFeature::NonInteractivePoRep) {
        return Err(FilecoinError::Unsupported(format!(
            "{proof:?}: non-interactive PoRep (aggregated output)"
        )));
    }
    let prover_id = prover_id(target.miner_id);
    filecoin_proofs::with_shape!(
        u64::from(config.sector_size),
        porep_job_for,
        c1.output,
        config,
        prover_id,
        sector_number,
    )
}

struct Porep<Tree: 'static + MerkleTreeTrait> {
    params: stacked::PublicParams<Tree>,
    inputs: stacked::PublicInputs<<Tree::Hasher as Hasher>::Domain, DefaultPieceDomain>,
    vanilla: Vec<Vec<stacked::Proof<Tree, DefaultPieceHasher>>>,
}

type Compound<Tree> = StackedCompound<Tree, DefaultPieceHasher>;

fn public_params<Tree: 'static + MerkleTreeTrait>(
    config: &PoRepConfig,
) -> Result<stacked::PublicParams<Tree>, FilecoinError> {
    let setup = SetupParams {
        vanilla_params: setup_params(config)
            .map_err(|e| FilecoinError::filecoin("porep setup", e))?,
        partitions: Some(usize::from(config.partitions)),
        priority: false,
    };
    let pp = <Compound<Tree> as CompoundProof<StackedDrg<'_, Tree, DefaultPieceHasher>, _>>::setup(
        &setup,
    )
    .map_err(|e| FilecoinError::filecoin("porep public parameters", e))?;
    Ok(pp.vanilla_params)
}

pub(crate) fn circuit_id<Tree: 'static + MerkleTreeTrait>(
    config: &PoRepConfig,
) -> Result<CircuitId, FilecoinError> {
    Ok(CircuitId {
        kind: ProofKind::PorepC2,
        sector_size: u64::from(config.sector_size),
        cache_id: config
            .get_cache_identifier::<Tree>()
            .map_err(|e| FilecoinError::filecoin("porep parameter identifier", e))?,
    })
}

fn porep_job_for<Tree: 'static + MerkleTreeTrait>(
    c1: SealCommitPhase1Output,
    config: PoRepConfig,
    prover_id: [u8; 32],
    sector_number: u64,
) -> Result<Box<dyn PartitionJob>, FilecoinError> {
    let id = circuit_id::<Tree>(&config)?;
    let n_partitions = usize::from(config.partitions);
    if c1.comm_d == [0; 32] || c1.comm_r == [0; 32] || c1.seed == [0; 32] {
        return Err(FilecoinError::Decode {
            what: "c1 output".into(),
            reason: "comm_d, comm_r or the seed is all zero".into(),
        });
    }
    let comm_r: <Tree::Hasher as Hasher>::Domain = as_safe_commitment(&c1.comm_r, "comm_r")
        .map_err(|e| FilecoinError::filecoin("c1 comm_r", e))?;
    let comm_d: DefaultPieceDomain = as_safe_commitment(&c1.comm_d, "comm_d")
        .map_err(|e| FilecoinError::filecoin("c1 comm_d", e))?;
    let replica_id = generate_replica_id::<Tree::Hasher, _>(
        &prover_id,
        sector_number,
        &c1.ticket,
        comm_d,
        &config.porep_id,
    );
    let c1_replica: <Tree::Hasher as Hasher>::Domain =
        <Tree::Hasher as Hasher>::Domain::try_from_bytes(&c1.replica_id.into_bytes())
            .map_err(|e| FilecoinError::filecoin("c1 replica id", e))?;
    if replica_id != c1_replica {
        return Err(FilecoinError::Filecoin {
            what: "c1 replica id",
            reason: format!(
                "does not match miner's prover id, sector {sector_number}, ticket and comm_d"
            ),
        });
    }
    let vanilla: Vec<Vec<stacked::Proof<Tree, DefaultPieceHasher>>> =
        c1.vanilla_proofs.try_into().map_err(|e| {
            FilecoinError::decode(
                "c1 vanilla proofs (another sector size than the proof type?)",
                format!("{e:#}"),
            )
        })?;
    if vanilla.len() != n_partitions {
        return Err(FilecoinError::CountMismatch {
            what: "c1 vanilla proof partitions",
            expected: n_partitions,
            found: vanilla.len(),
        });
    }
    let params = public_params::<Tree>(&config)?;
    let inputs = stacked::PublicInputs {
        replica_id: c1_replica,
        tau: Some(Tau { comm_d, comm_r }),
        k: None,
        seed: Some(c1.seed),
    };
    let valid =
        StackedDrg::<Tree, DefaultPieceHasher>::verify_all_partitions(&params, &inputs, &vanilla)
            .map_err(|e| FilecoinError::filecoin("porep vanilla proof verification", e))?;
    if !valid {
        return Err(FilecoinError::InvalidVanillaProof { kind: "porep c1" });
    }
    let s = Arc::new(Porep {
        params,
        inputs,
        vanilla,
    });
    let (b, p, i) = (s.clone(), s.clone(), s);
    Ok(Box::new(Job {
        id,
        n_partitions,
        blank: move || Ok(PorepCircuit::Blank(blank_circuit::<Tree>(&b.params))),
        partition: move |k: usize| PorepCircuit::partition(&p.inputs, &p.vanilla[k]),
        inputs: move |k| {
            <Compound<Tree> as CompoundProof<StackedDrg<'_, Tree, DefaultPieceHasher>, _>>::generate_public_inputs(
                &i.inputs,
                &i.params,
                Some(k),
            )
            .map_err(|e| FilecoinError::filecoin("porep public inputs", e))
        },
        _circuit: std::marker::PhantomData,
    }))
}

fn blank_circuit<Tree: 'static + MerkleTreeTrait>(
    params: &stacked::PublicParams<Tree>,
) -> stacked::StackedCircuit<Tree, DefaultPieceHasher> {
    <Compound<Tree> as CompoundProof<StackedDrg<'_, Tree, DefaultPieceHasher>, _>>::blank_circuit(
        params,
    )
}

/// The blank PoRep circuit of a proof type (for recording and parameter generation).
pub fn blank_job(proof: RegisteredSealProof) -> Result<Box<dyn PartitionJob>, FilecoinError> {
    let config = proof.as_v1_config();
    filecoin_proofs::with_shape!(u64::from(config.sector_size), blank_job_for, config,)
}

fn blank_job_for<Tree: 'static + MerkleTreeTrait>(
    config: PoRepConfig,
) -> Result<Box<dyn PartitionJob>, FilecoinError> {
    let id = circuit_id::<Tree>(&config)?;
    let params = Arc::new(public_params::<Tree>(&config)?);
    Ok(Box::new(Job {
        id,
        n_partitions: usize::from(config.partitions),
        blank: move || Ok(PorepCircuit::Blank(blank_circuit::<Tree>(&params))),
        partition: |_| Err(crate::job::no_witness()),
        inputs: |_| Err(crate::job::no_witness()),
        _circuit: std::marker::PhantomData,
    }))
}

/// **TIMING ONLY: proofs of these partitions do not verify.** The PoRep C2 circuit of
/// `proof` (the same blank circuit [`blank_job`] records) with partitions whose witness is
/// synthetic: filecoin-proofs' own partition circuit built from vanilla proofs of the
/// right shape whose leaves, column rows, Merkle path siblings, commitments and challenges
/// are random field elements (path positions follow each challenge's digits, as in a real
/// proof). Witness-only synthesis runs the real gadgets (SHA-256 labelling, Poseidon
/// columns and paths, encoding) on them, so the aux values have a real proof's mix of bits
/// and field elements; only the equalities that tie computed roots and labels to the
/// random ones fail (a few rows per challenge), so the prover's witness check refuses
/// these witnesses unless a benchmark turns it off
/// (`groth16_prover::timing_only`). For timing at sector sizes whose commit phase 1
/// cannot be run (32 GiB); partition `k` of seed `seed` is always the same witness.
/// `public_inputs` is an error: nothing can verify these partitions.
pub fn synthetic_job(
    proof: RegisteredSealProof,
    seed: u64,
) -> Result<Box<dyn PartitionJob>, FilecoinError> {
    let config = proof.as_v1_config();
    filecoin_proofs::with_shape!(
        u64::from(config.sector_size),
        synthetic_job_for,
        config,
        seed,
    )
}

fn synthetic_job_for<Tree: 'static + MerkleTreeTrait>(
    config: PoRepConfig,
    seed: u64,
) -> Result<Box<dyn PartitionJob>, FilecoinError> {
    let id = circuit_id::<Tree>(&config)?;
    let params = Arc::new(public_params::<Tree>(&config)?);
    let (b, p) = (Arc::clone(&params), params);
    Ok(Box::new(Job {
        id,
        n_partitions: usize::from(config.partitions),
        blank: move || Ok(PorepCircuit::Blank(blank_circuit::<Tree>(&b))),
        partition: move |k| synthetic_partition::<Tree>(&p, seed, k),
        inputs: |_| {
            Err(FilecoinError::Unsupported(
                "a synthetic (timing-only) partition has no public inputs".into(),
            ))
        },
        _circuit: std::marker::PhantomData,
    }))
}

/// Random field elements for the synthetic witness (splitmix64 over `seed`).
struct Draw(u64);

impl Draw {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// A uniform-looking field element (the top two bits cleared, so always canonical).
    fn fr(&mut self) -> blstrs::Scalar {
        let mut b = [0u8; 32];
        for c in b.chunks_mut(8) {
            c.copy_from_slice(&self.next_u64().to_le_bytes());
        }
        b[31] &= 0x3f;
        Option::from(blstrs::Scalar::from_bytes_le(&b))
            .unwrap_or_else(|| unreachable!("a value below 2^254 is a canonical scalar"))
    }

    fn domain<D: Domain>(&mut self) -> D {
        D::from(self.fr())
    }
}

/// A path of random siblings to node `index` of a tree with `leaves` leaves and the
/// arities `(base, sub, top)` (0: no such level), positions from `index`'s digits, in
/// the order `MerkleProof::from_parts` takes.
fn random_path<D: Domain>(
    draw: &mut Draw,
    index: u64,
    leaves: usize,
    arities: (usize, usize, usize),
) -> Vec<(Vec<D>, usize)> {
    let (base, sub, top) = arities;
    // Leaves per base tree: the sector's nodes split over sub × top base trees.
    let trees = sub.max(1) * top.max(1);
    let base_leaves = (leaves / trees).max(1);
    let mut n_base = 0;
    let mut covered = 1usize;
    while covered < base_leaves {
        covered = covered.saturating_mul(base.max(2));
        n_base += 1;
    }
    let mut rest = index;
    let mut out = Vec::with_capacity(n_base + 2);
    for &(arity, n) in &[
        (base, n_base),
        (sub, usize::from(sub > 0)),
        (top, usize::from(top > 0)),
    ] {
        for _ in 0..n {
            let position = (rest % arity as u64) as usize;
            rest /= arity as u64;
            let siblings = (0..arity - 1).map(|_| draw.domain()).collect();
            out.push((siblings, position));
        }
    }
    out
}

/// The challenged node's column: one random label per layer.
fn random_column<H: Hasher>(
    draw: &mut Draw,
    node: u64,
    layers: usize,
) -> Result<stacked::Column<H>, FilecoinError> {
    let rows = (0..layers).map(|_| draw.domain()).collect();
    stacked::Column::new(node as u32, rows).map_err(|e| FilecoinError::filecoin("column", e))
}

type TreeProof<Tree> = storage_proofs_core::merkle::MerkleProof<
    <Tree as MerkleTreeTrait>::Hasher,
    <Tree as MerkleTreeTrait>::Arity,
    <Tree as MerkleTreeTrait>::SubTreeArity,
    <Tree as MerkleTreeTrait>::TopTreeArity,
>;

/// The tree's (base, sub, top) arities (0: no such level), read off one-level proofs
/// (the arities are type-level numbers).
fn arities<Tree: 'static + MerkleTreeTrait>() -> (usize, usize, usize) {
    use storage_proofs_core::merkle::{MerkleProof, MerkleProofTrait};
    fn arity<H: 'static + Hasher, A: 'static + filecoin_hashers::PoseidonArity>() -> usize {
        MerkleProof::<H, A>::new(1)
            .path()
            .first()
            .map_or(0, |(hashes, _)| hashes.len())
    }
    (
        arity::<Tree::Hasher, Tree::Arity>(),
        arity::<Tree::Hasher, Tree::SubTreeArity>(),
        arity::<Tree::Hasher, Tree::TopTreeArity>(),
    )
}

/// A column opening of node `node` in tree C (root `comm_c`), built through serde: the
/// vanilla type keeps its fields to its crate, its serialized form is public.
fn random_column_proof<Tree: 'static + MerkleTreeTrait>(
    draw: &mut Draw,
    node: u64,
    layers: usize,
    leaves: usize,
    comm_c: <Tree::Hasher as Hasher>::Domain,
) -> Result<stacked::ColumnProof<TreeProof<Tree>>, FilecoinError> {
    let column = random_column::<Tree::Hasher>(draw, node, layers)?;
    let path = random_path(draw, node, leaves, arities::<Tree>());
    let inclusion = TreeProof::<Tree>::from_parts(draw.domain(), comm_c, path);
    let value = serde_json::json!({ "column": column, "inclusion_proof": inclusion });
    serde_json::from_value(value).map_err(|e| FilecoinError::decode("synthetic column proof", e))
}

fn synthetic_partition<Tree: 'static + MerkleTreeTrait>(
    params: &stacked::PublicParams<Tree>,
    seed: u64,
    k: usize,
) -> Result<PorepCircuit<Tree>, FilecoinError> {
    use storage_proofs_core::drgraph::Graph;
    let mut draw = Draw(seed ^ (k as u64).wrapping_mul(0x2545_f491_4f6c_dd1d));
    let leaves = params.graph.size();
    let layers = params.num_layers;
    let n_challenges = params.challenges.num_challenges_per_partition();
    let drg = params.graph.base_graph().degree();
    let exp = params.graph.expansion_degree();
    let comm_r_last: <Tree::Hasher as Hasher>::Domain = draw.domain();
    let comm_c: <Tree::Hasher as Hasher>::Domain = draw.domain();
    let comm_d: DefaultPieceDomain = draw.domain();
    let mut vanilla = Vec::with_capacity(n_challenges);
    for _ in 0..n_challenges {
        let challenge = draw.below(leaves as u64);
        let d_path = random_path(&mut draw, challenge, leaves, (2, 0, 0));
        let r_path = random_path(&mut draw, challenge, leaves, arities::<Tree>());
        // Parents as the graph picks them: DRG parents before the node, expander
        // parents anywhere in the layer.
        let drg_nodes: Vec<u64> = (0..drg).map(|_| draw.below(challenge.max(1))).collect();
        let exp_nodes: Vec<u64> = (0..exp).map(|_| draw.below(leaves as u64)).collect();
        let mut column_proof =
            |node: u64| random_column_proof::<Tree>(&mut draw, node, layers, leaves, comm_c);
        let c_x = column_proof(challenge)?;
        let drg_parents = drg_nodes
            .into_iter()
            .map(&mut column_proof)
            .collect::<Result<Vec<_>, _>>()?;
        let exp_parents = exp_nodes
            .into_iter()
            .map(&mut column_proof)
            .collect::<Result<Vec<_>, _>>()?;
        vanilla.push(stacked::Proof::<Tree, DefaultPieceHasher> {
            comm_d_proofs: storage_proofs_core::merkle::MerkleProof::from_parts(
                draw.domain(),
                comm_d,
                d_path,
            ),
            comm_r_last_proof: TreeProof::<Tree>::from_parts(draw.domain(), comm_r_last, r_path),
            replica_column_proofs: stacked::ReplicaColumnProof {
                c_x,
                drg_parents,
                exp_parents,
            },
            labeling_proofs: (1..=layers)
                .map(|layer| stacked::LabelingProof::new(layer as u32, challenge, Vec::new()))
                .collect(),
            encoding_proof: stacked::EncodingProof::new(layers as u32, challenge, Vec::new()),
        });
    }
    let mut seed_bytes = [0u8; 32];
    for c in seed_bytes.chunks_mut(8) {
        c.copy_from_slice(&draw.next_u64().to_le_bytes());
    }
    let inputs = stacked::PublicInputs {
        replica_id: draw.domain(),
        tau: Some(Tau {
            comm_d,
            comm_r: draw.domain(),
        }),
        k: Some(k),
        seed: Some(seed_bytes),
    };
    PorepCircuit::partition(&inputs, &vanilla)
}

/// The PoRep circuit of one partition: the blank circuit (for recording), or a partition's
/// commitments and per-challenge vanilla proofs, which synthesize exactly as
/// filecoin-proofs' `StackedCompound::circuit` of them does (its circuit is built from
/// these parts by the same public `StackedCircuit::synthesize`).
pub(crate) enum PorepCircuit<Tree: 'static + MerkleTreeTrait> {
    /// filecoin-proofs' blank circuit.
    Blank(stacked::StackedCircuit<Tree, DefaultPieceHasher>),
    /// One partition.
    Partition(PorepPartition<Tree>),
}

/// The parts of one partition's circuit.
pub(crate) struct PorepPartition<Tree: 'static + MerkleTreeTrait> {
    replica_id: <Tree::Hasher as Hasher>::Domain,
    comm_d: Option<DefaultPieceDomain>,
    comm_r: Option<<Tree::Hasher as Hasher>::Domain>,
    comm_r_last: <Tree::Hasher as Hasher>::Domain,
    comm_c: <Tree::Hasher as Hasher>::Domain,
    challenges: Vec<stacked::Proof<Tree, DefaultPieceHasher>>,
}

impl<Tree: 'static + MerkleTreeTrait> PorepCircuit<Tree> {
    /// Partition circuit of `vanilla` (one vanilla proof per challenge), refused as
    /// `StackedCompound::circuit` refuses it: no challenges, or challenges that disagree on
    /// comm_r_last or comm_c.
    fn partition(
        inputs: &stacked::PublicInputs<<Tree::Hasher as Hasher>::Domain, DefaultPieceDomain>,
        vanilla: &[stacked::Proof<Tree, DefaultPieceHasher>],
    ) -> Result<Self, FilecoinError> {
        let refuse = |reason: &str| FilecoinError::Filecoin {
            what: "porep partition circuit",
            reason: reason.into(),
        };
        let first = vanilla
            .first()
            .ok_or_else(|| refuse("a partition without vanilla proofs"))?;
        let (comm_r_last, comm_c) = (first.comm_r_last(), first.comm_c());
        if vanilla.iter().any(|p| p.comm_r_last() != comm_r_last) {
            return Err(refuse("inconsistent comm_r_lasts"));
        }
        if vanilla.iter().any(|p| p.comm_c() != comm_c) {
            return Err(refuse("inconsistent comm_cs"));
        }
        Ok(PorepCircuit::Partition(PorepPartition {
            replica_id: inputs.replica_id,
            comm_d: inputs.tau.as_ref().map(|t| t.comm_d),
            comm_r: inputs.tau.as_ref().map(|t| t.comm_r),
            comm_r_last,
            comm_c,
            challenges: vanilla.to_vec(),
        }))
    }
}

impl<Tree: 'static + MerkleTreeTrait> PorepPartition<Tree> {
    /// Synthesizes the partition's circuit with these challenges' proofs only (none: the
    /// prologue alone, the commitments and comm_r = H(comm_c, comm_r_last)).
    fn synthesize_with<CS: bellperson::ConstraintSystem<blstrs::Scalar>>(
        &self,
        cs: &mut CS,
        challenges: &[stacked::Proof<Tree, DefaultPieceHasher>],
    ) -> Result<(), bellperson::SynthesisError> {
        stacked::StackedCircuit::<Tree, DefaultPieceHasher>::synthesize(
            cs,
            Some(self.replica_id),
            self.comm_d,
            self.comm_r,
            Some(self.comm_r_last),
            Some(self.comm_c),
            challenges.iter().cloned().map(Into::into).collect(),
        )
    }
}

impl<Tree: 'static + MerkleTreeTrait> bellperson::Circuit<blstrs::Scalar> for PorepCircuit<Tree> {
    fn synthesize<CS: bellperson::ConstraintSystem<blstrs::Scalar>>(
        self,
        cs: &mut CS,
    ) -> Result<(), bellperson::SynthesisError> {
        match self {
            PorepCircuit::Blank(c) => c.synthesize(cs),
            PorepCircuit::Partition(p) => p.synthesize_with(cs, &p.challenges),
        }
    }
}

/// A partition's witness on all cores. After a short prologue its challenges are
/// independent, and each challenge is a chain of pieces that only read values allocated
/// before them ([`Piece`]): its data leaf's inclusion in comm_d's tree, its parents'
/// columns, the labeling of each layer (one SHA-256 over 37 parents: most of the work),
/// and a tail over the labels. Every piece is synthesized on its own (what it reads
/// allocated as scratch, see [`PieceCs`]) straight into its place in the witness: 14
/// pieces a challenge at 32 GiB instead of one, so 18 challenges keep 16 cores busy.
/// Every challenge has the same shape (the blank circuit's challenges are all
/// `Proof::empty`), so the places follow from the prologue's counts, the recorded shape
/// and the pieces' counts (learned from a circuit's first partition and kept for the
/// process); a piece that allocates another count is an error, and a circuit that does not
/// split this way is synthesized in one pass.
impl<Tree: 'static + MerkleTreeTrait> PartitionCircuit for PorepCircuit<Tree> {
    const PARALLEL_WITNESS: bool = true;

    fn witness(self, k: usize, shape: Shape) -> Result<Witness, FilecoinError> {
        let p = match self {
            PorepCircuit::Partition(p) if p.challenges.len() > 1 => p,
            whole => return one_pass(whole, k, shape),
        };
        let n = p.challenges.len();
        let layers = p.challenges[0].labeling_proofs.len();
        if !p.splits(layers) {
            return one_pass(PorepCircuit::Partition(p), k, shape);
        }
        let mut prologue = WitnessCs::with_capacity(0, 0);
        p.synthesize_with(&mut prologue, &[])
            .map_err(|e| witness_error(k, e))?;
        let Witness {
            mut inputs,
            aux: head,
        } = prologue.into_witness();
        let (n_inputs, n_aux) = (shape.n_inputs as usize, shape.n_aux as usize);
        let rest = match (
            n_inputs.checked_sub(inputs.len()),
            n_aux.checked_sub(head.len()),
        ) {
            (Some(i), Some(a)) if i % n == 0 && a % n == 0 && a > 0 => (i / n, a / n),
            _ => return one_pass(PorepCircuit::Partition(p), k, shape),
        };
        let skip_aux = head.len();
        let mut aux = pce_cache::zeroed(n_aux);
        aux[..skip_aux].copy_from_slice(&head);
        drop(head);
        let challenge_inputs = p.challenges_into(k, layers, rest, &mut aux[skip_aux..])?;
        inputs.reserve(n * rest.0);
        inputs.extend(challenge_inputs.into_iter().flatten());
        Ok(Witness { inputs, aux })
    }
}

/// A piece of one PoRep challenge, in the order filecoin-proofs' `Proof::synthesize`
/// allocates them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Piece {
    /// The data leaf and its inclusion in comm_d's tree (SHA-256 all the way up).
    Data,
    /// The drg and expander parents' columns, their hashes and inclusions in comm_c's
    /// tree, and the challenged node as a public input.
    Columns,
    /// The label of layer `l` (from 1): the parents' bits and one SHA-256 over them.
    Label(usize),
    /// The encoded node and its inclusion in comm_r_last's tree, the labels' column hash
    /// and its inclusion in comm_c's tree.
    Tail,
}

/// A challenge's pieces for `layers` layers.
fn pieces(layers: usize) -> Vec<Piece> {
    let mut pieces = vec![Piece::Data, Piece::Columns];
    pieces.extend((1..=layers).map(Piece::Label));
    pieces.push(Piece::Tail);
    pieces
}

/// What the first challenge of a circuit taught: (inputs, aux) allocated by each of its
/// pieces, and for each whether its native witness ([`crate::native`]) gave the gadgets'
/// values there (a piece without one, or one that differed, goes through the gadgets).
#[derive(Clone, Debug)]
struct Layout {
    counts: Vec<(usize, usize)>,
    native: Vec<bool>,
}

/// Layouts learned, by tree type, layers and a challenge's (inputs, aux).
type LayoutKey = (&'static str, usize, (usize, usize));

static LAYOUTS: std::sync::Mutex<Vec<(LayoutKey, Layout)>> = std::sync::Mutex::new(Vec::new());

/// filecoin-proofs' circuit form of vanilla challenge proofs. Its type has no public name
/// (it is `StackedCircuit::synthesize`'s last argument), so it is inferred from there.
#[allow(clippy::type_complexity)] // the signature it is inferred from
fn circuit_proofs<S, A, B, C, D, E, P>(
    _: fn(S, A, B, C, D, E, Vec<P>) -> Result<(), bellperson::SynthesisError>,
    proofs: Vec<P>,
) -> Vec<P> {
    proofs
}

/// A scratch number: a value a piece reads, allocated before the piece starts.
fn scratch_num(
    cs: &mut PieceCs<'_>,
    value: Option<blstrs::Scalar>,
) -> Result<AllocatedNum<blstrs::Scalar>, bellperson::SynthesisError> {
    AllocatedNum::alloc(cs, || {
        value.ok_or(bellperson::SynthesisError::AssignmentMissing)
    })
}

/// `leaf`'s inclusion under `root` by `path`, as the PoRep circuit encloses it.
fn inclusion<H, U, V, W>(
    cs: &mut PieceCs<'_>,
    path: AuthPath<H, U, V, W>,
    root: &AllocatedNum<blstrs::Scalar>,
    leaf: &AllocatedNum<blstrs::Scalar>,
) -> Result<(), bellperson::SynthesisError>
where
    H: 'static + Hasher,
    U: 'static + PoseidonArity,
    V: 'static + PoseidonArity,
    W: 'static + PoseidonArity,
{
    PoRCircuit::<DiskTree<H, U, V, W>>::synthesize(
        cs,
        Root::from_allocated::<PieceCs<'_>>(leaf.clone()),
        path,
        Root::from_allocated::<PieceCs<'_>>(root.clone()),
        true,
    )
}

/// The labels' column hash, as the PoRep circuit hashes a column (2 or 11 layers).
fn column_hash(
    cs: &mut PieceCs<'_>,
    labels: &[AllocatedNum<blstrs::Scalar>],
) -> Result<AllocatedNum<blstrs::Scalar>, bellperson::SynthesisError> {
    match labels.len() {
        2 => poseidon_hash(cs, labels.to_vec(), &*POSEIDON_CONSTANTS_2),
        11 => poseidon_hash(cs, labels.to_vec(), &*POSEIDON_CONSTANTS_11),
        _ => Err(bellperson::SynthesisError::Unsatisfiable),
    }
}

/// A Merkle path as `MerkleProofTrait::as_options` gives it, every value present.
fn options_path(
    options: Vec<(Vec<Option<blstrs::Scalar>>, Option<usize>)>,
) -> Option<Vec<(Vec<blstrs::Scalar>, usize)>> {
    options
        .into_iter()
        .map(|(hashes, index)| Some((hashes.into_iter().collect::<Option<Vec<_>>>()?, index?)))
        .collect()
}

/// A column proof's inclusion path. filecoin-proofs keeps the proof crate-private; it is
/// read back from the column proof's serde form (the column, then the proof).
fn column_path<Tree: 'static + MerkleTreeTrait>(
    column: &stacked::ColumnProof<TreeProof<Tree>>,
) -> Option<Vec<(Vec<blstrs::Scalar>, usize)>> {
    use storage_proofs_core::merkle::MerkleProofTrait as _;
    let bytes = bincode::serialize(column).ok()?;
    let (_, proof): (stacked::Column<Tree::Hasher>, TreeProof<Tree>) =
        bincode::deserialize(&bytes).ok()?;
    options_path(proof.as_options())
}

/// A piece's counts against what its place holds.
fn check_piece(found: (usize, usize), expected: (usize, usize)) -> Result<(), FilecoinError> {
    if found.1 != expected.1 {
        return Err(FilecoinError::CountMismatch {
            what: "aux values of one piece of a porep challenge",
            expected: expected.1,
            found: found.1,
        });
    }
    if found.0 != expected.0 {
        return Err(FilecoinError::CountMismatch {
            what: "public inputs of one piece of a porep challenge",
            expected: expected.0,
            found: found.0,
        });
    }
    Ok(())
}

impl<Tree: 'static + MerkleTreeTrait> PorepPartition<Tree> {
    /// Challenge `i`'s `piece` into `place` without the gadgets, where a native witness is
    /// written for its kind ([`crate::native`]): its label (a label's), its public inputs
    /// and how many aux values it allocated.
    #[allow(clippy::type_complexity)]
    fn native_piece(
        &self,
        i: usize,
        piece: Piece,
        node: Option<u64>,
        labels: &[blstrs::Scalar],
        place: &mut [Scalar],
    ) -> Option<Result<(Option<blstrs::Scalar>, Vec<Scalar>, usize), bellperson::SynthesisError>>
    {
        match piece {
            Piece::Label(layer) => Some(
                self.native_label(i, layer, node, place)
                    .map(|(label, count)| (Some(label), Vec::new(), count)),
            ),
            Piece::Data => Some(self.native_data(i, place)),
            Piece::Columns => {
                let columns = &self.challenges[i].replica_column_proofs;
                let layers = self.challenges[i].labeling_proofs.len();
                let parts = columns
                    .drg_parents
                    .iter()
                    .chain(&columns.exp_parents)
                    .map(|c| {
                        let rows = (1..=layers)
                            .map(|l| c.get_node_at_layer(l).ok().map(|d| (*d).into()))
                            .collect::<Option<Vec<blstrs::Scalar>>>()?;
                        Some((rows, column_path::<Tree>(c)?))
                    })
                    .collect::<Option<Vec<_>>>()?;
                let parents: Vec<_> = parts
                    .iter()
                    .map(|(rows, path)| crate::native::ColumnIn { rows, path })
                    .collect();
                let (inputs, count) = crate::native::columns_witness(place, &parents, node?)?;
                Some(Ok((None, inputs, count)))
            }
            Piece::Tail => {
                use storage_proofs_core::merkle::MerkleProofTrait as _;
                let proof = &self.challenges[i];
                let leaf: blstrs::Scalar = proof.comm_d_proofs.leaf().into();
                let replica = options_path(proof.comm_r_last_proof.as_options())?;
                let column = column_path::<Tree>(&proof.replica_column_proofs.c_x)?;
                let (inputs, count) =
                    crate::native::tail_witness(place, leaf, labels, &replica, &column)?;
                Some(Ok((None, inputs, count)))
            }
        }
    }

    /// Challenge `i`'s data leaf inclusion into `place` ([`crate::native::data_witness`]).
    #[allow(clippy::type_complexity)]
    fn native_data(
        &self,
        i: usize,
        place: &mut [Scalar],
    ) -> Result<(Option<blstrs::Scalar>, Vec<Scalar>, usize), bellperson::SynthesisError> {
        use storage_proofs_core::merkle::MerkleProofTrait as _;
        let proof = &self.challenges[i].comm_d_proofs;
        let leaf: blstrs::Scalar = proof.leaf().into();
        let path = options_path(proof.as_options())
            .ok_or(bellperson::SynthesisError::Unsatisfiable)?
            .into_iter()
            .map(|(hashes, index)| match (hashes.as_slice(), index) {
                ([sibling], index @ (0 | 1)) => Ok((sibling.to_bytes_le(), index == 1)),
                _ => Err(bellperson::SynthesisError::Unsatisfiable),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let (inputs, count) = crate::native::data_witness(place, &leaf.to_bytes_le(), &path);
        Ok((None, inputs, count))
    }

    /// Challenge `i`'s label at `layer` into `place` without the gadget
    /// ([`crate::native::label_witness`]): the label and how many values it allocated.
    fn native_label(
        &self,
        i: usize,
        layer: usize,
        node: Option<u64>,
        place: &mut [Scalar],
    ) -> Result<(blstrs::Scalar, usize), bellperson::SynthesisError> {
        use bellperson::SynthesisError as E;
        let bytes = |d: &<Tree::Hasher as Hasher>::Domain| {
            let x: blstrs::Scalar = (*d).into();
            x.to_bytes_le()
        };
        let columns = &self.challenges[i].replica_column_proofs;
        let mut parents = Vec::with_capacity(columns.drg_parents.len() + columns.exp_parents.len());
        for p in &columns.drg_parents {
            parents.push(bytes(
                p.get_node_at_layer(layer)
                    .map_err(|_| E::AssignmentMissing)?,
            ));
        }
        if layer > 1 {
            for p in &columns.exp_parents {
                parents.push(bytes(
                    p.get_node_at_layer(layer - 1)
                        .map_err(|_| E::AssignmentMissing)?,
                ));
            }
        }
        let (label, count) = crate::native::label_witness(
            place,
            &bytes(&self.replica_id),
            layer as u32,
            node.ok_or(E::AssignmentMissing)?,
            &parents,
        );
        let label = Option::from(blstrs::Scalar::from_bytes_le(&label)).ok_or(E::Unsatisfiable)?;
        Ok((label, count))
    }

    /// Whether the challenges split into [`Piece`]s as filecoin-proofs' circuit allocates
    /// them: every challenge with `layers` labels, columns of a hashable height and 37
    /// parents a label. Otherwise the circuit is synthesized in one pass, as it is.
    fn splits(&self, layers: usize) -> bool {
        let same = |c: &stacked::Proof<Tree, DefaultPieceHasher>| {
            let columns = &c.replica_column_proofs;
            let (drg, exp) = (columns.drg_parents.len(), columns.exp_parents.len());
            c.labeling_proofs.len() == layers
                && drg > 0
                && drg * 6 + 1 == stacked::TOTAL_PARENTS
                && (drg + exp) * 2 + 9 == stacked::TOTAL_PARENTS
        };
        matches!(layers, 2 | 11) && self.challenges.iter().all(same)
    }

    /// The challenges' pieces on all cores into `place` (the aux values after the
    /// prologue, `rest.1` a challenge), returning each challenge's public inputs.
    fn challenges_into(
        &self,
        k: usize,
        layers: usize,
        rest: (usize, usize),
        place: &mut [Scalar],
    ) -> Result<Vec<Vec<Scalar>>, FilecoinError> {
        let n = self.challenges.len();
        let proofs = circuit_proofs(
            stacked::StackedCircuit::<Tree, DefaultPieceHasher>::synthesize::<WitnessCs>,
            self.challenges.iter().cloned().map(Into::into).collect(),
        );
        let replica_id: blstrs::Scalar = self.replica_id.into();
        let comm_d: Option<blstrs::Scalar> = self.comm_d.map(Into::into);
        let comm_r_last: blstrs::Scalar = self.comm_r_last.into();
        let comm_c: blstrs::Scalar = self.comm_c.into();
        use bellperson::SynthesisError as E;
        // One piece of challenge `i` (`labels`: its layers' labels, for the tail).
        let run = |i: usize,
                   piece: Piece,
                   labels: &[blstrs::Scalar],
                   cs: &mut PieceCs<'_>|
         -> Result<Option<blstrs::Scalar>, E> {
            let proof = &proofs[i];
            match piece {
                Piece::Data => {
                    let comm_d = scratch_num(cs, comm_d)?;
                    cs.start_here();
                    let leaf = AllocatedNum::alloc(&mut *cs, || {
                        proof.data_leaf.ok_or(E::AssignmentMissing)
                    })?;
                    inclusion(cs, proof.comm_d_path.clone(), &comm_d, &leaf)?;
                    Ok(None)
                }
                Piece::Columns => {
                    let comm_c = scratch_num(cs, Some(comm_c))?;
                    cs.start_here();
                    for parent in proof
                        .drg_parents_proofs
                        .iter()
                        .chain(&proof.exp_parents_proofs)
                    {
                        let (column, path) = parent.clone().alloc(&mut *cs)?;
                        let hash = column.hash(&mut *cs)?;
                        inclusion(cs, path, &comm_c, &hash)?;
                    }
                    let challenge = UInt64::alloc(&mut *cs, proof.challenge)?;
                    challenge.pack_into_input(&mut *cs)?;
                    Ok(None)
                }
                Piece::Label(layer) => {
                    let replica = scratch_num(cs, Some(replica_id))?;
                    let replica_bits = reverse_bit_numbering(replica.to_bits_le(&mut *cs)?);
                    let mut columns = Vec::new();
                    for parent in proof
                        .drg_parents_proofs
                        .iter()
                        .chain(&proof.exp_parents_proofs)
                    {
                        columns.push(parent.clone().alloc(&mut *cs)?.0);
                    }
                    let (drg, exp) = columns.split_at(proof.drg_parents_proofs.len());
                    let challenge = UInt64::alloc(&mut *cs, proof.challenge)?;
                    cs.start_here();
                    let mut parents = Vec::with_capacity(drg.len() + exp.len());
                    for column in drg {
                        let bits = column.get_value(layer).to_bits_le(&mut *cs)?;
                        parents.push(reverse_bit_numbering(bits));
                    }
                    if layer > 1 {
                        for column in exp {
                            let bits = column.get_value(layer - 1).to_bits_le(&mut *cs)?;
                            parents.push(reverse_bit_numbering(bits));
                        }
                    }
                    // Repeated to 37, as the circuit (and the labeling) repeats them.
                    let mut expanded = parents.clone();
                    if layer > 1 {
                        expanded.extend_from_slice(&parents);
                        expanded.extend_from_slice(&parents[..9]);
                    } else {
                        for _ in 0..5 {
                            expanded.extend_from_slice(&parents);
                        }
                        expanded.push(parents[0].clone());
                    }
                    let label = stacked::create_label_circuit(
                        &mut *cs,
                        &replica_bits,
                        expanded,
                        UInt32::constant(layer as u32),
                        challenge,
                    )?;
                    label.get_value().ok_or(E::AssignmentMissing).map(Some)
                }
                Piece::Tail => {
                    let leaf = scratch_num(cs, proof.data_leaf)?;
                    let comm_r_last = scratch_num(cs, Some(comm_r_last))?;
                    let comm_c = scratch_num(cs, Some(comm_c))?;
                    let labels = labels
                        .iter()
                        .map(|&label| scratch_num(cs, Some(label)))
                        .collect::<Result<Vec<_>, E>>()?;
                    cs.start_here();
                    let key = labels.last().ok_or(E::AssignmentMissing)?;
                    let encoded = encode(&mut *cs, key, &leaf)?;
                    inclusion(cs, proof.comm_r_last_path.clone(), &comm_r_last, &encoded)?;
                    let hash = column_hash(cs, &labels)?;
                    inclusion(cs, proof.comm_c_path.clone(), &comm_c, &hash)?;
                    Ok(None)
                }
            }
        };
        let kinds = pieces(layers);
        let key: LayoutKey = (std::any::type_name::<Tree>(), layers, rest);
        let known = LAYOUTS
            .lock()
            .ok()
            .and_then(|l| l.iter().find(|(k, _)| *k == key).map(|(_, l)| l.clone()));
        let mut inputs: Vec<Vec<Scalar>> = vec![Vec::new(); n];
        let mut labels: Vec<Vec<blstrs::Scalar>> = vec![Vec::new(); n];
        let (layout, first) = match known {
            Some(layout) => (layout, 0),
            None => {
                // The first challenge into vectors of its own: its pieces' counts place
                // every other challenge's pieces.
                let grown = |pieces: &[Piece], labels: &[blstrs::Scalar]| {
                    pieces
                        .par_iter()
                        .map(|&piece| {
                            let mut cs = PieceCs::growing();
                            let label = run(0, piece, labels, &mut cs)?;
                            let counts = cs.counts();
                            let (inputs, aux) = cs.into_parts();
                            Ok((label, counts, inputs, aux.unwrap_or_default()))
                        })
                        .collect::<Result<Vec<_>, E>>()
                        .map_err(|e| witness_error(k, e))
                };
                let (tail, heads) = kinds.split_last().expect("a challenge has pieces");
                let mut grown_pieces = grown(heads, &[])?;
                labels[0] = grown_pieces.iter().filter_map(|g| g.0).collect();
                grown_pieces.extend(grown(std::slice::from_ref(tail), &labels[0])?);
                let counts: Vec<(usize, usize)> = grown_pieces.iter().map(|g| g.1).collect();
                let total = counts
                    .iter()
                    .fold((0, 0), |(i, a), &(pi, pa)| (i + pi, a + pa));
                check_piece(total, rest).map_err(|e| match e {
                    FilecoinError::CountMismatch {
                        expected, found, ..
                    } => FilecoinError::CountMismatch {
                        what: "values of one porep challenge (sum of its pieces)",
                        expected,
                        found,
                    },
                    other => other,
                })?;
                // Each native witness against the gadgets', on this challenge: every
                // value, the count, the inputs and the label.
                let native = kinds
                    .par_iter()
                    .zip(&grown_pieces)
                    .map(|(&piece, (label, (_, a), inputs, aux))| {
                        let mut mine = vec![Scalar::zero(); *a];
                        let made =
                            self.native_piece(0, piece, proofs[0].challenge, &labels[0], &mut mine);
                        matches!(made, Some(Ok((l, ref i, count))) if count == *a
                                && l == *label
                                && i == inputs
                                && mine == *aux)
                    })
                    .collect();
                let layout = Layout { counts, native };
                let mut at = 0;
                for (_, (_, a), piece_inputs, piece_aux) in grown_pieces {
                    place[at..at + a].copy_from_slice(&piece_aux);
                    inputs[0].extend(piece_inputs);
                    at += a;
                }
                if let Ok(mut known) = LAYOUTS.lock() {
                    known.push((key, layout.clone()));
                }
                (layout, 1)
            }
        };
        // Every other piece's place; labels before tails (the tails read them).
        let mut heads = Vec::with_capacity((n - first) * (kinds.len() - 1));
        let mut tails = Vec::with_capacity(n - first);
        for (i, mut chunk) in (first..n).zip(place[first * rest.1..].chunks_mut(rest.1)) {
            for ((&piece, &counts), &native) in kinds.iter().zip(&layout.counts).zip(&layout.native)
            {
                let (mine, after) = std::mem::take(&mut chunk).split_at_mut(counts.1);
                chunk = after;
                let task = (i, piece, mine, counts, native);
                if piece == Piece::Tail {
                    tails.push(task);
                } else {
                    heads.push(task);
                }
            }
        }
        let in_place =
            |(i, piece, mine, counts, native): (usize, Piece, &mut [Scalar], _, bool),
             labels: &[blstrs::Scalar]| {
                if native {
                    if let Some(made) =
                        self.native_piece(i, piece, proofs[i].challenge, labels, mine)
                    {
                        let (label, inputs, count) = made.map_err(|e| witness_error(k, e))?;
                        check_piece((inputs.len(), count), counts)?;
                        return Ok((i, label, inputs));
                    }
                }
                let mut cs = PieceCs::into_place(mine);
                let label = run(i, piece, labels, &mut cs).map_err(|e| witness_error(k, e))?;
                check_piece(cs.counts(), counts)?;
                Ok((i, label, cs.into_parts().0))
            };
        // In order of challenges and pieces (collected in that order): each core's share
        // mixes a data leaf's inclusion (60 SHA-256 blocks at 32 GiB, three labels' work)
        // with labels. Largest first measured the same on the H200 (4.11–4.20 against
        // 4.16–4.29 s).
        let done = heads
            .into_par_iter()
            .map(|task| in_place(task, &[]))
            .collect::<Result<Vec<_>, FilecoinError>>()?;
        for (i, label, piece_inputs) in done {
            labels[i].extend(label);
            inputs[i].extend(piece_inputs);
        }
        let done = tails
            .into_par_iter()
            .map(|task| {
                let i = task.0;
                in_place(task, &labels[i])
            })
            .collect::<Result<Vec<_>, FilecoinError>>()?;
        for (i, _, piece_inputs) in done {
            inputs[i].extend(piece_inputs);
        }
        Ok(inputs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use filecoin_proofs::SectorShape2KiB;

    /// The witness of a 2 KiB partition in pieces equals one witness-only pass over the
    /// same circuit, for the partition that teaches the pieces' layout and for one after
    /// it (placed by that layout), and a shape its challenges do not divide falls back to
    /// that pass.
    #[test]
    fn challenges_on_all_cores_give_the_one_pass_witness() {
        if !crate::testing::enabled("synthesize 2 KiB PoRep partitions") {
            return;
        }
        let seed = groth16_prover::testing::test_seed();
        let config = RegisteredSealProof::StackedDrg2KiBV1_1.as_v1_config();
        let params = public_params::<SectorShape2KiB>(&config).expect("public params");
        let circuit = |k| synthetic_partition::<SectorShape2KiB>(&params, seed, k).unwrap();
        let challenges = match circuit(0) {
            PorepCircuit::Partition(p) => p.challenges.len(),
            PorepCircuit::Blank(_) => unreachable!(),
        };
        assert!(
            challenges > 1,
            "{challenges} challenge(s): nothing to split"
        );
        let one_pass = WitnessCs::synthesize(circuit(0), 0, 0).expect("one pass");
        let shape = Shape {
            n_inputs: one_pass.inputs.len() as u64,
            n_aux: one_pass.aux.len() as u64,
            n_constraints: 0,
            n_rows: 0,
        };
        assert_eq!(circuit(0).witness(0, shape).expect("pieces"), one_pass);
        let learned = LAYOUTS
            .lock()
            .unwrap()
            .iter()
            .any(|((tree, layers, _), layout)| {
                *tree == std::any::type_name::<SectorShape2KiB>()
                    && layout.counts.len() == layers + 3
                    && layout.native.iter().all(|&n| n)
            });
        assert!(
            learned,
            "the witness did not go by pieces, or not every piece natively"
        );
        let other = WitnessCs::synthesize(circuit(1), 0, 0).expect("one pass");
        assert_ne!(other, one_pass, "two partitions' witnesses should differ");
        assert_eq!(circuit(1).witness(1, shape).expect("placed"), other);
        let odd = Shape {
            n_aux: shape.n_aux + 1,
            ..shape
        };
        assert_eq!(circuit(0).witness(0, odd).expect("fallback"), one_pass);
    }
}
