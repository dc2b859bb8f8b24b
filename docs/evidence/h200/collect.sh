#!/usr/bin/env bash
# How the H200 evidence in this folder was produced (run from the repository root on the GPU
# machine, with the wheelhouse carried in .whl: see README "GPU evidence").
#   bash docs/evidence/h200/collect.sh OUT_DIR [bitwise|prior-art|all] [ops...]
# Each run is gated on the reports committed here (--baseline docs/evidence/h200): its exit status
# (0 no regression, 1 a regression) is recorded beside its time.
set -uo pipefail
out=${1:?output directory}; what=${2:-all}; shift 2 || true
mkdir -p "$out"
# Installation, timed apart from the audit (install.txt): the wheels, their bytecode (pip's default,
# left out by --no-compile; without it every worker compiles the same sources again), and the
# rl_kernel_ops extension (built once; otherwise the first rl_kernel candidate builds it).
start=$SECONDS
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>&1 | tail -2
echo "pip install: $((SECONDS - start)) s" > "$out/install.txt"; start=$SECONDS
python3 -m compileall -q -j 0 /tmp/site > /dev/null 2>&1
echo "compileall /tmp/site: exit $?, $((SECONDS - start)) s" >> "$out/install.txt"; start=$SECONDS
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 COLUMNS=160
python3 -c "from rl_kernel_ops import _build; _build.load_extension()" > "$out/build.log" 2>&1
echo "rl_kernel_ops build: exit $?, $((SECONDS - start)) s" >> "$out/install.txt"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch,sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'python', sys.version.split()[0])"
} > "$out/machine.txt"
python3 -m audit list --device cuda > "$out/list.txt" 2>&1
baseline=docs/evidence/h200
if [ "$what" = bitwise ] || [ "$what" = all ]; then
  for op in "${@:-all}"; do
    start=$SECONDS
    python3 -m audit run --op "$op" --device cuda --out "$out" --timeout 400 --baseline "$baseline" \
      >> "$out/run_tables.txt" 2>> "$out/run_stderr.txt"
    echo "audit run --op $op --device cuda --baseline $baseline: exit $?, $((SECONDS - start)) s" >> "$out/run_stderr.txt"
  done
fi
if [ "$what" = prior-art ] || [ "$what" = all ]; then
  for op in "${@:-all}"; do
    start=$SECONDS
    python3 -m audit prior-art --op "$op" --device cuda --out "$out" --timeout 400 --baseline "$baseline" \
      >> "$out/prior_art_tables.txt" 2>> "$out/prior_art_stderr.txt"
    echo "audit prior-art --op $op --device cuda --baseline $baseline: exit $?, $((SECONDS - start)) s" >> "$out/prior_art_stderr.txt"
  done
fi
python3 -m audit validate "$out"/*.json > "$out/validate.txt" 2>&1
for f in "$out"/*.json; do python3 -m audit plot "$f" --out "${f%.json}.png" >/dev/null 2>&1; done
tail -n 3 "$out"/*stderr.txt; cat "$out/validate.txt"
