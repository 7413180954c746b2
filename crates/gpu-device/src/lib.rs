//! placeholder: gpu-device
