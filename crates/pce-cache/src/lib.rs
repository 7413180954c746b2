//! placeholder: pce-cache
