#!/usr/bin/env bash
# The device code's arithmetic, the MSM's scalar side and accumulation, and the NTT kernels
# run on the CPU (PINION_HOST_EMULATION)
# and checked against big-integer results: no GPU or CUDA toolkit needed, only g++ and
# python3. Used by .ci/run; seeds printed.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${TARGET_DIR:-target}/emulate
mkdir -p "$out"
seed=${1:-$(date +%s)}
echo "emulate: seed $seed"
g++ -O2 -std=c++17 -DPINION_HOST_EMULATION -I cuda-kernels/include \
  cuda-kernels/tools/field_emu.cpp -o "$out/field_emu"
"$out/field_emu" 2000 "$seed" | python3 cuda-kernels/tools/check_field_emu.py | tee "$out/field.txt"
grep -q ' 0 mismatches' "$out/field.txt"
# The Fp inversion's variant with 32-bit transition coefficients (fp_inv.cuh,
# PINION_GCD_I32: not the default until timed), in the field checks and in one MSM run.
g++ -O2 -std=c++17 -DPINION_HOST_EMULATION -DPINION_GCD_I32 -I cuda-kernels/include \
  cuda-kernels/tools/field_emu.cpp -o "$out/field_emu_gcd_i32"
"$out/field_emu_gcd_i32" 2000 "$seed" | python3 cuda-kernels/tools/check_field_emu.py | tee "$out/field_gcd_i32.txt"
grep -q ' 0 mismatches' "$out/field_gcd_i32.txt"
g++ -O2 -std=c++17 -DPINION_HOST_EMULATION -I cuda-kernels/include \
  cuda-kernels/tools/msm_emu.cpp -o "$out/msm_emu"
for s in $seed $((seed + 1)) $((seed + 2)); do "$out/msm_emu" "$s"; done
g++ -O2 -std=c++17 -DPINION_HOST_EMULATION -DPINION_GCD_I32 -I cuda-kernels/include \
  cuda-kernels/tools/msm_emu.cpp -o "$out/msm_emu_gcd_i32"
"$out/msm_emu_gcd_i32" "$seed"
g++ -O2 -std=c++17 -pthread -DPINION_HOST_EMULATION -I cuda-kernels/include \
  cuda-kernels/tools/ntt_emu.cpp -o "$out/ntt_emu"
"$out/ntt_emu" "$seed" 64 | python3 cuda-kernels/tools/check_ntt_emu.py
g++ -O2 -std=c++17 -pthread -DPINION_HOST_EMULATION -I cuda-kernels/include \
  cuda-kernels/tools/msm_sort_emu.cpp -o "$out/msm_sort_emu"
"$out/msm_sort_emu" "$seed" 30 | python3 cuda-kernels/tools/check_msm_sort_emu.py
