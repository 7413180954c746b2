//! Helpers for tests that prove Filecoin's 2 KiB circuits (this crate's, the daemon's),
//! behind the `test-support` feature: the gate, the shared parameter folder, a sector
//! sealed by filecoin-proofs, insecure parameters made once, Curio's C1 wrapper.
//!
//! Nothing here is for production: the parameters are **insecure**, and
//! [`params_dir`] sets filecoin-proofs' environment for the whole process.

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

use crate::{params, porep, PartitionJob};

/// The proof type of the sealed test sector.
pub const PROOF: RegisteredSealProof = RegisteredSealProof::StackedDrg2KiBV1_1;
/// Its miner id.
pub const MINER: u64 = 1000;
/// Its sector number.
pub const SECTOR: u64 = 7;
/// The seed of the insecure parameters every test makes and shares.
pub const PARAMS_SEED: u64 = 0x5eed;

/// Whether the slow 2 KiB tests run (`PINION_FILECOIN_TESTS=1`, which `.ci/run` sets);
/// otherwise says that `what` is skipped.
pub fn enabled(what: &str) -> bool {
    if std::env::var("PINION_FILECOIN_TESTS").as_deref() == Ok("1") {
        return true;
    }
    eprintln!("skipped: set PINION_FILECOIN_TESTS=1 to {what}");
    false
}

/// The parameter folder the workspace's tests share, `target/pinion-filecoin-params`
/// (under `$CARGO_TARGET_DIR` when set), created; filecoin-proofs reads its verifying keys
/// and parent caches there too. Sets `FIL_PROOFS_PARAMETER_CACHE` and
/// `FIL_PROOFS_PARENT_CACHE`: filecoin-proofs reads them once per process, so every
/// caller in a process must agree (every test does).
pub fn params_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let dir = target.join("pinion-filecoin-params");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
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

/// A folder under the system's temporary folder, removed on drop.
#[derive(Debug)]
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// A fresh folder named after `tag`, the process and a draw from `g`.
    pub fn new(tag: &str, g: &mut SplitMix) -> TempDir {
        let p = std::env::temp_dir().join(format!(
            "pinion-fil-{tag}-{}-{:x}",
            std::process::id(),
            g.next_u64()
        ));
        std::fs::create_dir_all(&p).unwrap_or_else(|e| panic!("create {}: {e}", p.display()));
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A 2 KiB sector sealed by filecoin-proofs, with its commit-phase-1 output.
pub struct Sealed {
    /// The C1 output (what Curio hands to C2).
    pub c1: SealCommitPhase1Output,
    /// The ticket it was sealed with.
    pub ticket: [u8; 32],
    /// The interactive seed of C1.
    pub seed: [u8; 32],
    /// The sealed replica (for PoSt and SnapDeals).
    pub sealed: PathBuf,
    /// Its cache folder (tree files).
    pub cache: PathBuf,
    /// Its one piece.
    pub pieces: Vec<PieceInfo>,
    /// The folder that holds them, removed on drop.
    pub dir: TempDir,
}

/// Seals a 2 KiB sector of random data (add piece, pre-commit 1 and 2) and runs commit
/// phase 1. Under a second on two cores; needs [`params_dir`] set first.
pub fn seal(g: &mut SplitMix) -> Sealed {
    let dir = TempDir::new("seal", g);
    let piece_bytes = 2032usize;
    let data: Vec<u8> = (0..piece_bytes).map(|_| g.next_u64() as u8).collect();
    let (staged, sealed, cache) = (
        dir.0.join("staged"),
        dir.0.join("sealed"),
        dir.0.join("cache"),
    );
    std::fs::create_dir_all(&cache).expect("create the cache folder");
    let mut staged_file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&staged)
        .expect("create the staged file");
    let (piece, _) = add_piece(
        PROOF,
        Cursor::new(&data),
        &mut staged_file,
        UnpaddedBytesAmount(piece_bytes as u64),
        &[],
    )
    .expect("add piece");
    staged_file.flush().expect("flush the staged file");
    staged_file
        .seek(SeekFrom::Start(0))
        .expect("rewind the staged file");
    std::fs::File::create(&sealed).expect("create the sealed file");
    let prover_id = porep::prover_id(MINER);
    let (ticket, seed) = (bytes32(g), bytes32(g));
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

/// Insecure parameters (and `.vk`) for `job`'s circuit in `dir` under Filecoin's names,
/// made once with [`PARAMS_SEED`]. One process makes them while the others wait on a lock
/// file beside them (two test binaries that both need the 1.1 GB PoRep file would
/// otherwise make it twice at once, doubling the disk and the cores it takes); it writes
/// into a private folder, then renames into place, so no process ever sees a partial file.
/// Returns the parameter file.
pub fn insecure_params(job: &dyn PartitionJob, dir: &Path, budget: &Budget) -> PathBuf {
    let id = job.circuit_id();
    let (path, vk) = (dir.join(id.params_file_name()), dir.join(id.vk_file_name()));
    let lock_path = dir.join(format!("{}.lock", id.params_file_name()));
    let lock = std::fs::File::create(&lock_path)
        .unwrap_or_else(|e| panic!("create {}: {e}", lock_path.display()));
    let waited = Instant::now();
    fs2::FileExt::lock_exclusive(&lock)
        .unwrap_or_else(|e| panic!("lock {}: {e}", lock_path.display()));
    if path.is_file() && vk.is_file() {
        eprintln!(
            "reusing {} (waited {:?} for its lock)",
            path.display(),
            waited.elapsed()
        );
        return path;
    }
    // Under the lock no other process is making these files: a private folder for them left
    // here is from a process that died while making them, and only takes disk.
    let prefix = format!(".making-{}-", id.params_file_name());
    for stale in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if stale.file_name().to_string_lossy().starts_with(&prefix) {
            eprintln!(
                "removing {}, left by a process that died",
                stale.path().display()
            );
            let _ = std::fs::remove_dir_all(stale.path());
        }
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let private = TempDir(dir.join(format!("{prefix}{}-{nanos:x}", std::process::id())));
    let t = Instant::now();
    let made = params::generate_insecure(job, &private.0, PARAMS_SEED, budget)
        .expect("insecure parameters");
    std::fs::rename(&made.vk, &vk).expect("move the verifying key into place");
    std::fs::rename(&made.params, &path).expect("move the parameters into place");
    eprintln!(
        "INSECURE parameters for {id} generated in {:?}: {} ({} bytes, h {}, l {}, a {}, b {})",
        t.elapsed(),
        path.display(),
        made.report.bytes_written,
        made.report.n_h,
        made.report.n_l,
        made.report.n_a,
        made.report.n_b
    );
    path
}

/// Go's wrapper around the C1 JSON, as Curio sends it to cuzk.
pub fn wrapped(c1: &SealCommitPhase1Output, sector_size: u64) -> Vec<u8> {
    use base64::Engine as _;
    let json = serde_json::to_vec(c1).expect("C1 output as JSON");
    serde_json::to_vec(&serde_json::json!({
        "SectorNum": SECTOR,
        "Phase1Out": base64::engine::general_purpose::STANDARD.encode(json),
        "SectorSize": sector_size,
    }))
    .expect("the wrapper as JSON")
}
