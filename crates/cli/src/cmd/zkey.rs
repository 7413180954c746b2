//! `pinion zkey export-vk`: snarkjs's `verification_key.json` from a zkey.

use std::path::Path;

use anyhow::Context;
use srs_store::ZkeyFile;

use crate::Outcome;

/// Reads the zkey's verifying key (fully checked) and writes it as snarkjs does.
pub fn export_vk(zkey: &Path, out: &Path, json: bool) -> anyhow::Result<Outcome> {
    let what = || format!("zkey {} is not usable", zkey.display());
    let file = ZkeyFile::open(zkey)
        .map_err(|e| super::name_format(anyhow::Error::new(e).context(what()), zkey, "zkey"))?;
    let repr = file.verifying_key().with_context(what)?;
    let vk = groth16_prover::verifying_key_from_repr(&repr).with_context(what)?;
    let text = super::prove::json_text(&pinion::snarkjs::verification_key_json(&vk)?);
    super::write_atomic(out, |w| std::io::Write::write_all(w, text.as_bytes()))?;
    if json {
        super::print_json(&serde_json::json!({
            "verification_key": out.display().to_string(),
            "n_public": file.layout().n_public(),
        }));
    } else {
        println!(
            "wrote {} ({} public values)",
            out.display(),
            file.layout().n_public()
        );
    }
    Ok(Outcome::Success)
}
