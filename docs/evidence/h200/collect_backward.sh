#!/usr/bin/env bash
# The provider's backward made repeatable, and the drift along a denoising trajectory (issue 23), on
# the H200 at the full block sizes. Run from the repository root with the wheelhouse carried in .whl
# (Liger is in it):
#   bash docs/evidence/h200/collect_backward.sh OUT_DIR probe|chain|trajectory
#   probe       probe_sdpa_backward.py at L = 513 and 2053, once with torch's default algorithms and
#               once deterministic (CUBLAS_WORKSPACE_CONFIG=:4096:8): sdpa_backward.{default,
#               deterministic}.json and sdpa_table.txt
#   chain       audit chain --backward (the default setting for --backward) at L = 257 and 4097 for
#               all=rl_kernel, Liger's norm in both norm stages (provider elsewhere) and
#               all=rl_kernel with diffusers' time MLP kept
#   trajectory  audit trajectory (8 steps, L = 257 and 4097) for the same three chains
# Reports are h3_conditioning_chain_replay.NAME.json / h3_denoising_trajectory.NAME.json with their
# tables (.txt) and Markdown (.md); each command's exit status and time go to OUT_DIR/times.txt.
set -uo pipefail
out=${1:?output directory}; what=${2:?probe, chain or trajectory}
mkdir -p "$out"
[ -d /tmp/site ] || python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 COLUMNS=200
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch,sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version(), 'python', sys.version.split()[0])"
} > "$out/machine.txt" 2>&1
timed() {  # NAME COMMAND...: run, its output to OUT/NAME.txt, its exit status and time to times.txt
  local name=$1; shift; local start=$SECONDS
  "$@" > "$out/$name.txt" 2>&1
  echo "$name: $*: exit $?, $((SECONDS - start)) s" >> "$out/times.txt"
}
chains=(
  "rl_kernel --candidate all=rl_kernel"
  "liger --candidate all=provider --candidate norm1_modulate=liger --candidate norm2_modulate=liger"
  "tmlp_provider --candidate all=rl_kernel --candidate timestep_mlp=provider"
)
case $what in
probe)
  probe=docs/evidence/h200/sdpa_backward/probe_sdpa_backward.py
  timed sdpa_default env -u CUBLAS_WORKSPACE_CONFIG python3 $probe "$out/sdpa_backward.default.json"
  timed sdpa_deterministic env CUBLAS_WORKSPACE_CONFIG=:4096:8 python3 $probe "$out/sdpa_backward.deterministic.json" \
    --deterministic
  cat "$out/sdpa_default.txt" "$out/sdpa_deterministic.txt" | grep "L=" > "$out/sdpa_table.txt" ;;
chain|trajectory)
  kind=$([ "$what" = chain ] && echo h3_conditioning_chain_replay || echo h3_denoising_trajectory)
  extra=$([ "$what" = chain ] && echo --backward)
  for spec in "${chains[@]}"; do
    read -r name args <<< "$spec"
    report="$out/$kind.$name.json"
    # shellcheck disable=SC2086
    timed "$kind.$name" python3 -m audit "$what" --device cuda $extra $args --timeout 900 --out "$report"
    python3 -m audit show -f markdown "$report" > "${report%.json}.md" 2>&1
  done
  python3 -m audit validate "$out"/*.json > "$out/validate_$what.txt" 2>&1 ;;
esac
cat "$out/times.txt"; [ "$what" = probe ] && cat "$out/sdpa_table.txt"; cat "$out"/validate_*.txt 2>/dev/null
