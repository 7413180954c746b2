//! placeholder: bls-repr
