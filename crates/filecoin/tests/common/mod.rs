//! Shared by the 2 KiB Filecoin tests: the gate, the parameter folder, sealing.
#![allow(dead_code)]

use std::io::{Cursor, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use filecoin_proofs_api::seal::{
    add_piece, seal_commit_phase1, seal_pre_commit_phase1, seal_pre_commit_phase2,
    SealCommitPhase1Output,
};
use filecoin_proofs_api::{PieceInfo, RegisteredSealProof, SectorId, UnpaddedBytesAmount};
use groth16_prover::testing::SplitMix;
use memory_budget::Budget;
use pinion_filecoin::{params, porep, PartitionJob};

pub const PROOF: RegisteredSealProof = RegisteredSealProof::StackedDrg2KiBV1_1;
pub const MINER: u64 = 1000;
pub const SECTOR: u64 = 7;

pub fn enabled() -> bool {
    if std::env::var("PINION_FILECOIN_TESTS").as_deref() == Ok("1") {
        return true;
    }
    eprintln!("skipped: set PINION_FILECOIN_TESTS=1 to seal and prove a 2 KiB sector");
    false
}

/// The shared parameter folder (filecoin-proofs reads its verifying keys from it too).
pub fn params_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let dir = target.join("pinion-filecoin-params");
    std::fs::create_dir_all(&dir).unwrap();
    // filecoin-proofs reads its settings once per process, from the environment; every
    // test of this file sets the same values.
    std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", &dir);
    std::env::set_var("FIL_PROOFS_PARENT_CACHE", dir.join("parents"));
    dir
}

/// A field element's 32 bytes (the top bits cleared).
pub fn bytes32(g: &mut SplitMix) -> [u8; 32] {
    let mut b = [0u8; 32];
    for c in b.chunks_mut(8) {
        c.copy_from_slice(&g.next_u64().to_le_bytes());
    }
    b[31] &= 0x3f;
    b
}

pub struct Sealed {
    pub c1: SealCommitPhase1Output,
    pub ticket: [u8; 32],
    pub seed: [u8; 32],
    /// The sealed replica and its cache (tree files), for PoSt and SnapDeals.
    pub sealed: PathBuf,
    pub cache: PathBuf,
    pub pieces: Vec<PieceInfo>,
    pub dir: TempDir,
}

pub struct TempDir(pub PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Seals a 2 KiB sector of random data and runs commit phase 1.
pub fn seal(g: &mut SplitMix) -> Sealed {
    let dir = std::env::temp_dir().join(format!(
        "pinion-seal-{}-{}",
        std::process::id(),
        g.next_u64()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let dir = TempDir(dir);
    let piece_bytes = 2032usize;
    let data: Vec<u8> = (0..piece_bytes).map(|_| g.next_u64() as u8).collect();
    let staged = dir.0.join("staged");
    let sealed = dir.0.join("sealed");
    let cache = dir.0.join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    let mut staged_file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&staged)
        .unwrap();
    let (piece, _) = add_piece(
        PROOF,
        Cursor::new(&data),
        &mut staged_file,
        UnpaddedBytesAmount(piece_bytes as u64),
        &[],
    )
    .expect("add piece");
    staged_file.flush().unwrap();
    staged_file.seek(SeekFrom::Start(0)).unwrap();
    std::fs::File::create(&sealed).unwrap();
    let prover_id = porep::prover_id(MINER);
    let ticket = bytes32(g);
    let seed = bytes32(g);
    let pieces = [piece];
    let t = Instant::now();
    let pc1 = seal_pre_commit_phase1(
        PROOF,
        &cache,
        &staged,
        &sealed,
        prover_id,
        SectorId::from(SECTOR),
        ticket,
        &pieces,
    )
    .expect("pre-commit 1");
    let pc2 = seal_pre_commit_phase2(pc1, &cache, &sealed).expect("pre-commit 2");
    let c1 = seal_commit_phase1(
        &cache,
        &sealed,
        prover_id,
        SectorId::from(SECTOR),
        ticket,
        seed,
        pc2,
        &pieces,
    )
    .expect("commit 1");
    eprintln!("sealed a 2 KiB sector (pc1, pc2, c1) in {:?}", t.elapsed());
    Sealed {
        c1,
        ticket,
        seed,
        sealed,
        cache,
        pieces: pieces.to_vec(),
        dir,
    }
}

/// Insecure parameters for `job`'s circuit in `dir`, generated once.
pub fn insecure_params(job: &dyn PartitionJob, dir: &Path, budget: &Budget) -> PathBuf {
    let path = dir.join(job.circuit_id().params_file_name());
    let vk = dir.join(job.circuit_id().vk_file_name());
    if path.is_file() && vk.is_file() {
        eprintln!("reusing {}", path.display());
        return path;
    }
    let t = Instant::now();
    let generated = params::generate_insecure(job, dir, 0x5eed, budget).unwrap();
    eprintln!(
        "INSECURE parameters for {} generated in {:?}: {} ({} bytes, h {}, l {}, a {}, b {})",
        job.circuit_id(),
        t.elapsed(),
        generated.params.display(),
        generated.report.bytes_written,
        generated.report.n_h,
        generated.report.n_l,
        generated.report.n_a,
        generated.report.n_b
    );
    generated.params
}
