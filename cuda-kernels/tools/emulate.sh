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
# build NAME SOURCE [flags...]: cuda-kernels/tools/SOURCE as $out/NAME.
build() {
  local name=$1 src=$2
  shift 2
  g++ -O2 -std=c++17 -pthread -DPINION_HOST_EMULATION "$@" -I cuda-kernels/include \
    "cuda-kernels/tools/$src" -o "$out/$name"
}
build field_emu field_emu.cpp
"$out/field_emu" 2000 "$seed" | python3 cuda-kernels/tools/check_field_emu.py | tee "$out/field.txt"
grep -q ' 0 mismatches' "$out/field.txt"
build msm_emu msm_emu.cpp
for s in $seed $((seed + 1)) $((seed + 2)); do "$out/msm_emu" "$s"; done
build ntt_emu ntt_emu.cpp
"$out/ntt_emu" "$seed" 64 | python3 cuda-kernels/tools/check_ntt_emu.py
build msm_sort_emu msm_sort_emu.cpp
"$out/msm_sort_emu" "$seed" 30 | python3 cuda-kernels/tools/check_msm_sort_emu.py
