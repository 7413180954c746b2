//! placeholder: gpu-ntt
