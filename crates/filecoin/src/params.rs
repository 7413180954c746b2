//! Parameter files under Filecoin's names, and insecure ones for tests and benchmarks.

use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use groth16_prover::setup::{self, SetupReport};
use memory_budget::Budget;
use rand::SeedableRng;
use srs_store::ParamsFile;

use crate::job::{record, PartitionJob};
use crate::FilecoinError;

/// Paths of a generated parameter set.
#[derive(Clone, Debug)]
pub struct GeneratedParams {
    /// `v28-<id>.params`.
    pub params: PathBuf,
    /// `v28-<id>.vk` (the verifying key: the params file's first section).
    pub vk: PathBuf,
    /// What the generator wrote.
    pub report: SetupReport,
}

/// **INSECURE: for tests and benchmarks only.** Records the circuit of `job` (blank) and
/// writes Groth16 parameters for it under Filecoin's file names in `dir`, with toxic waste
/// drawn from a seeded RNG: anyone who knows `seed` can forge proofs. The `.vk` file beside
/// them is what filecoin-proofs' verifiers read. Files are written under a temporary name
/// and renamed, so a reader never sees a partial file.
pub fn generate_insecure(
    job: &dyn PartitionJob,
    dir: &Path,
    seed: u64,
    budget: &Budget,
) -> Result<GeneratedParams, FilecoinError> {
    let id = job.circuit_id();
    let (pce, _charge) = record(job, budget)?;
    std::fs::create_dir_all(dir).map_err(|source| FilecoinError::Io {
        what: "creating the parameter folder",
        path: dir.to_path_buf(),
        source,
    })?;
    let params = dir.join(id.params_file_name());
    let vk = dir.join(id.vk_file_name());
    let io = |what, path: &Path| {
        let path = path.to_path_buf();
        move |source| FilecoinError::Io { what, path, source }
    };
    let tmp = params.with_extension("params.partial");
    let file = std::fs::File::create(&tmp).map_err(io("creating", &tmp))?;
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let report =
        setup::generate(&pce, &mut rng, budget, BufWriter::new(file)).map_err(|source| {
            FilecoinError::Setup {
                circuit: id.to_string(),
                source: Box::new(source),
            }
        })?;
    std::fs::rename(&tmp, &params).map_err(io("renaming into place", &params))?;
    let vk_bytes = ParamsFile::open(&params)?.layout().ic().end_offset();
    let mut head = vec![0u8; vk_bytes as usize];
    std::fs::File::open(&params)
        .and_then(|mut f| f.read_exact(&mut head))
        .map_err(io("reading the verifying key of", &params))?;
    let tmp = vk.with_extension("vk.partial");
    std::fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(&head))
        .map_err(io("writing", &tmp))?;
    std::fs::rename(&tmp, &vk).map_err(io("renaming into place", &vk))?;
    Ok(GeneratedParams { params, vk, report })
}
