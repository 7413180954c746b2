// Pippenger point kernels for G2 (coordinates in Fp2): the same bodies as the G1 kernels
// of msm.cu (include/msm_kernels.cuh), in their own PTX module so that G1-only changes do
// not rebuild them (nvcc took ~10 minutes before the Fp product became a call; ~30 s of
// nvcc and ptxas on a 2-core machine since). The scalar kernels (from_montgomery, count,
// scan, scatter) are curve-independent and only exist in msm.cu; crates/gpu-msm loads both
// modules for G2.
//   g2_accumulate, g2_accumulate_capped, g2_reduce_segments, g2_sum_groups,
//   g2_accumulate_chunks_affine
#include <stdint.h>

#include "msm_affine.cuh"
#include "msm_kernels.cuh"

using namespace pinion;

POINT_KERNELS(g2, Fp2)

// Affine accumulation with batched inversions (msm_affine.cuh) on G2: 32 streams a thread
// (chunk_len a multiple of 32), whose state is ~22 KB of local memory as G1's 64 are; two
// blocks of 128 an SM, as G2's XYZZ accumulation (255 registers).
AFFINE_KERNEL(g2, Fp2, 32, 2)
