#!/usr/bin/env bash
# The chain-replay evidence of issue 12, for a later session on the H200 (run from the repository
# root, with the wheelhouse carried in .whl exactly as for collect.sh):
#   bash docs/evidence/h200/collect_chain.sh OUT_DIR [rl_kernel|liger|mode|tmlp_provider|all]
# Four runs of `audit chain --backward` at the real block sizes (56 x 128 heads, ffn 14336,
# hidden 5376) and lengths 257 and 4097:
#   rl_kernel  --candidate all=rl_kernel
#   liger      --candidate all=rl_kernel --candidate norm1_modulate=liger
#   mode       --candidate all=rl_kernel --mode plain --mode sglang  (a GEMM mode the H200 has)
#   tmlp_provider  --candidate all=rl_kernel --candidate timestep_mlp=provider  (diffusers' time MLP kept)
# Each writes OUT_DIR/h3_conditioning_chain_replay.NAME.{json,md,png} and its table (.txt; the GPU,
# torch and CUDA versions are in each report's environment); the exit
# status and wall time of each go to OUT_DIR/chain_stderr.txt. Pick one run per call where a call
# is limited to 10 minutes.
set -uo pipefail
out=${1:?output directory}; what=${2:-all}
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 COLUMNS=200

replay() {
  local name=$1; shift
  local report="$out/h3_conditioning_chain_replay.$name.json" start=$SECONDS
  python3 -m audit chain --device cuda --backward --length 257 --length 4097 --timeout 1800 --out "$report" "$@" \
    > "${report%.json}.txt" 2>> "$out/chain_stderr.txt"
  echo "audit chain --backward $*: exit $?, $((SECONDS - start)) s" >> "$out/chain_stderr.txt"
  python3 -m audit show -f markdown "$report" > "${report%.json}.md" 2>> "$out/chain_stderr.txt"
  python3 -m audit plot "$report" --out "${report%.json}.png" >/dev/null 2>> "$out/chain_stderr.txt"
}

case $what in rl_kernel|all) replay rl_kernel --candidate all=rl_kernel ;; esac
case $what in liger|all) replay liger --candidate all=rl_kernel --candidate norm1_modulate=liger ;; esac
case $what in mode|all) replay mode_sglang --candidate all=rl_kernel --mode plain --mode sglang ;; esac
case $what in tmlp_provider|all) replay tmlp_provider --candidate all=rl_kernel --candidate timestep_mlp=provider ;; esac
python3 -m audit validate "$out"/h3_conditioning_chain_replay.*.json > "$out/chain_validate.txt" 2>&1
tail -n 5 "$out/chain_stderr.txt"; cat "$out/chain_validate.txt"
