#!/usr/bin/env bash
# H200 evidence for `audit parallel`: adaln_projection under tp_column, tp_row and sp_rows, and
# norm_modulate and gate_residual under sp_rows, each with the native, fixed-order and (rl_kernel)
# chunk-order reductions. CANDIDATES="rl_kernel diffusers" limits the candidates (faster). Run from the repository root on the GPU machine with the wheelhouse carried in
# .whl. On a machine with several GPUs NCCL runs one rank per GPU; on one GPU, pass BACKEND=gloo so
# the ranks share it (NCCL refuses two ranks on one device).
#   bash docs/evidence/h200/collect_parallel.sh OUT_DIR [RANKS]
set -uo pipefail
out=${1:?output directory}; ranks=${2:-2}; backend=${BACKEND:-nccl}
picked=(); for c in ${CANDIDATES:-}; do picked+=(--candidate "$c"); done
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>&1 | tail -1
export PYTHONPATH=/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 COLUMNS=200 NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/machine.txt"
for run in "adaln_projection tp_column" "adaln_projection tp_row" "adaln_projection sp_rows" "norm_modulate sp_rows" \
  "gate_residual sp_rows"; do
  set -- $run
  start=$SECONDS
  python3 -m audit parallel --op "$1" --layout "$2" --ranks "$ranks" --backend "$backend" --device cuda \
    "${picked[@]}" --out "$out" --timeout 500 > "$out/parallel.$1.$2.txt" 2>> "$out/parallel_stderr.txt"
  echo "audit parallel --op $1 --layout $2 --ranks $ranks --backend $backend: exit $?, $((SECONDS - start)) s" >> "$out/times.txt"
done
python3 -m audit validate "$out"/*.json > "$out/validate.txt" 2>&1
cat "$out/times.txt" "$out/validate.txt"
