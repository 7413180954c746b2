//! placeholder: groth16-prover
