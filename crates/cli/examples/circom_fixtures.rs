//! Writes `fixtures/circom/` from `pinion::fixtures` (the test `fixtures_are_fresh` fails
//! when the committed files differ): `cargo run -p pinion --example circom_fixtures`.

fn main() -> std::io::Result<()> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/circom");
    std::fs::create_dir_all(&dir)?;
    for (name, bytes) in pinion::fixtures::cubic_files() {
        std::fs::write(dir.join(name), &bytes)?;
        println!("wrote {} ({} bytes)", dir.join(name).display(), bytes.len());
    }
    Ok(())
}
