//! placeholder: srs-store
