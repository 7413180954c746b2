// Pippenger point kernels for G2 (coordinates in Fp2): the same bodies as the G1 kernels
// of msm.cu (include/msm_kernels.cuh), in their own PTX module because nvcc needs ~10
// minutes for them here. The scalar kernels (from_montgomery, count, scan, scatter) are
// curve-independent and only exist in msm.cu; crates/gpu-msm loads both modules for G2.
//   g2_accumulate, g2_accumulate_capped, g2_reduce_segments, g2_sum_groups
#include <stdint.h>

#include "msm_kernels.cuh"

using namespace pinion;

POINT_KERNELS(g2, Fp2)
