#!/usr/bin/env bash
# 2026-12-05 (ninth session): the committed kernels (4966ab4) on whatever machine comes, no carry:
# bench_row_ops at S = 4097 twice and at its default S = 32768 once, each in its own process.
set -u
export PYTHONPATH=$PWD
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; T0=$(date +%s)
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
MAX_JOBS=8 python3 -c 'from rl_kernel_ops import _build; _build.load_extension()' > $L/build.log 2>&1 || { tail -5 $L/build.log; exit 3; }
echo "built at $(( $(date +%s) - T0 )) s"
for n in a b; do
  timeout 120 python3 benchmarks/bench_row_ops.py --rows 4097 --out $L/bench_row_ops.$n.s4097.json > $L/bench_row_ops.$n.s4097.txt 2>&1
done
timeout 200 python3 benchmarks/bench_row_ops.py --out $L/bench_row_ops.s32768.json > $L/bench_row_ops.s32768.txt 2>&1
grep -H -E "copy:|norm_modulate +graphed" $L/bench_row_ops.*.txt | sed 's|.*/||' | cut -c1-150
echo "done at $(( $(date +%s) - T0 )) s"
