//! PoRep commit phase 2 from Curio's C1 output.

use std::convert::TryInto;
use std::sync::Arc;

use filecoin_hashers::{Domain, Hasher};
use filecoin_proofs::constants::DefaultPieceHasher;
use filecoin_proofs::parameters::setup_params;
use filecoin_proofs::{as_safe_commitment, DefaultPieceDomain, PoRepConfig};
use filecoin_proofs_api::seal::SealCommitPhase1Output;
use filecoin_proofs_api::RegisteredSealProof;
use serde::Deserialize;
use storage_proofs_core::api_version::ApiFeature;
use storage_proofs_core::compound_proof::{CompoundProof, SetupParams};
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_core::proof::ProofScheme;
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

/// A partition's witness on all cores: its challenges are independent pieces after a short
/// prologue, allocated one after another, so each is synthesized on its own (prologue
/// repeated and dropped, see [`PieceCs`]) straight into its place in the witness. Every
/// challenge has the same shape (the blank circuit's challenges are all
/// `Proof::empty`), so the places follow from the prologue's counts and the recorded
/// shape; a challenge that allocates another count is an error, and a shape the
/// challenges do not divide falls back to one pass in order.
impl<Tree: 'static + MerkleTreeTrait> PartitionCircuit for PorepCircuit<Tree> {
    const PARALLEL_WITNESS: bool = true;

    fn witness(self, k: usize, shape: Shape) -> Result<Witness, FilecoinError> {
        let p = match self {
            PorepCircuit::Partition(p) if p.challenges.len() > 1 => p,
            whole => return one_pass(whole, k, shape),
        };
        let n = p.challenges.len();
        let mut prologue = WitnessCs::with_capacity(0, 0);
        p.synthesize_with(&mut prologue, &[])
            .map_err(|e| witness_error(k, e))?;
        let Witness {
            mut inputs,
            aux: head,
        } = prologue.into_witness();
        let (n_inputs, n_aux) = (shape.n_inputs as usize, shape.n_aux as usize);
        let (rest_inputs, rest_aux) = match (
            n_inputs.checked_sub(inputs.len()),
            n_aux.checked_sub(head.len()),
        ) {
            (Some(i), Some(a)) if i % n == 0 && a % n == 0 && a > 0 => (i / n, a / n),
            _ => return one_pass(PorepCircuit::Partition(p), k, shape),
        };
        let (skip_inputs, skip_aux) = (inputs.len(), head.len());
        let mut aux = pce_cache::zeroed(n_aux);
        aux[..skip_aux].copy_from_slice(&head);
        drop(head);
        let pieces: Vec<Result<Vec<Scalar>, FilecoinError>> = aux[skip_aux..]
            .par_chunks_mut(rest_aux)
            .zip(p.challenges.par_iter())
            .map(|(place, challenge)| {
                let mut cs = PieceCs::new(skip_inputs, skip_aux, place);
                p.synthesize_with(&mut cs, std::slice::from_ref(challenge))
                    .map_err(|e| witness_error(k, e))?;
                let (found_inputs, found_aux) = cs.counts();
                if found_aux != rest_aux {
                    return Err(FilecoinError::CountMismatch {
                        what: "aux values of one porep challenge",
                        expected: rest_aux,
                        found: found_aux,
                    });
                }
                if found_inputs != rest_inputs {
                    return Err(FilecoinError::CountMismatch {
                        what: "public inputs of one porep challenge",
                        expected: rest_inputs,
                        found: found_inputs,
                    });
                }
                Ok(cs.into_inputs())
            })
            .collect();
        inputs.reserve(n * rest_inputs);
        for piece in pieces {
            inputs.extend(piece?);
        }
        Ok(Witness { inputs, aux })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use filecoin_proofs::SectorShape2KiB;

    /// The parallel witness of a 2 KiB partition equals one witness-only pass over the same
    /// circuit, and a shape its challenges do not divide falls back to that pass.
    #[test]
    fn challenges_on_all_cores_give_the_one_pass_witness() {
        if !crate::testing::enabled("synthesize 2 KiB PoRep partitions") {
            return;
        }
        let seed = groth16_prover::testing::test_seed();
        let config = RegisteredSealProof::StackedDrg2KiBV1_1.as_v1_config();
        let params = public_params::<SectorShape2KiB>(&config).expect("public params");
        let circuit = || synthetic_partition::<SectorShape2KiB>(&params, seed, 0).unwrap();
        let challenges = match circuit() {
            PorepCircuit::Partition(p) => p.challenges.len(),
            PorepCircuit::Blank(_) => unreachable!(),
        };
        assert!(
            challenges > 1,
            "{challenges} challenge(s): nothing to split"
        );
        let one_pass = WitnessCs::synthesize(circuit(), 0, 0).expect("one pass");
        let shape = Shape {
            n_inputs: one_pass.inputs.len() as u64,
            n_aux: one_pass.aux.len() as u64,
            n_constraints: 0,
            n_rows: 0,
        };
        assert_eq!(circuit().witness(0, shape).expect("parallel"), one_pass);
        let odd = Shape {
            n_aux: shape.n_aux + 1,
            ..shape
        };
        assert_eq!(circuit().witness(0, odd).expect("fallback"), one_pass);
    }
}
