//! The `pinion` command line (work in progress).
fn main() {
    eprintln!("pinion: not built yet");
    std::process::exit(1);
}
