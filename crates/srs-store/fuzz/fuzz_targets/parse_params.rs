//! Any byte string: the header walk, the full check and a load must return (never panic)
//! and leave nothing charged.
#![no_main]

use std::io::Write;

use libfuzzer_sys::fuzz_target;
use memory_budget::Budget;
use srs_store::{LoadOptions, ParamsFile, ParamsLayout, PointCheck};

fuzz_target!(|data: &[u8]| {
    let _ = ParamsLayout::parse(data);
    // The loader works on files (it maps them); one scratch file per fuzzing process.
    let path = std::env::temp_dir().join(format!("srs-fuzz-{}.params", std::process::id()));
    let Ok(mut f) = std::fs::File::create(&path) else { return };
    if f.write_all(data).is_err() {
        return;
    }
    drop(f);
    let budget = Budget::fixed(1 << 30);
    if let Ok(file) = ParamsFile::open(&path) {
        let options = LoadOptions { check: PointCheck::Full, chunk_bytes: 4096, ..LoadOptions::default() };
        let _ = file.check_points(PointCheck::Full, &options);
        let _ = file.load(&budget, &options);
    }
    assert_eq!(budget.used_bytes(), 0);
});
