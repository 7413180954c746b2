#!/usr/bin/env bash
# A directory for PINION_PTX_DIR: the committed modules, with a module rebuilt from the
# working tree with extra nvcc flags (a variant behind a macro, e.g. -DPINION_SOME_EXPERIMENT)
# the way `cargo xtask kernels` builds modules (nvcc -ptx, then ptxas for the sm_90 cubin,
# both zlib-compressed). For timing a variant beside the default build in one device call:
#   NVCC=/path/to/nvcc bash cuda-kernels/tools/variant_ptx.sh OUTDIR MODULE [nvcc flags...]
#   PINION_PTX_DIR=$PWD/OUTDIR bundle/bench/gpu_ntt_bench
# Run it once per module to rebuild several into one OUTDIR.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ $# -lt 2 ]; then
  echo "usage: variant_ptx.sh OUTDIR MODULE [nvcc flags...]" >&2
  exit 2
fi
out=$1 mod=$2
shift 2
[ -f "cuda-kernels/$mod.cu" ] || { echo "variant_ptx: no cuda-kernels/$mod.cu" >&2; exit 2; }
nvcc=$(command -v "${NVCC:-nvcc}")
ptxas=$(dirname "$nvcc")/ptxas
mkdir -p "$out"
# The committed modules where OUTDIR has none yet (an earlier variant there is kept).
for f in cuda-kernels/ptx/*.zlib; do
  [ -e "$out/$(basename "$f")" ] || cp "$f" "$out"/
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$nvcc" -arch=sm_90 -ptx -O3 -std=c++17 -I cuda-kernels/include "$@" \
  -o "$tmp/$mod.ptx" "cuda-kernels/$mod.cu"
"$ptxas" -arch=sm_90 -O3 "$tmp/$mod.ptx" -o "$tmp/$mod.cubin"
python3 - "$tmp" "$out" "$mod" <<'PY'
import sys, zlib
tmp, out, mod = sys.argv[1:]
for src, dst in ((f"{mod}.ptx", f"{mod}.ptx.zlib"), (f"{mod}.cubin", f"{mod}.sm_90.cubin.zlib")):
    with open(f"{tmp}/{src}", "rb") as f, open(f"{out}/{dst}", "wb") as g:
        g.write(zlib.compress(f.read(), 9))
PY
echo "variant_ptx: $out/$mod.{ptx,sm_90.cubin}.zlib built with: $*"
