//! Shared by the 2 KiB Filecoin tests: `pinion_filecoin::testing` (the `test-support`
//! feature) with this suite's gate message.
#![allow(dead_code, unused_imports)]

pub use pinion_filecoin::testing::{
    bytes32, insecure_params, params_dir, seal, wrapped, Sealed, TempDir, MINER, PROOF, SECTOR,
};

pub fn enabled() -> bool {
    pinion_filecoin::testing::enabled("seal and prove a 2 KiB sector")
}
