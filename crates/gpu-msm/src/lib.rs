//! placeholder: gpu-msm
