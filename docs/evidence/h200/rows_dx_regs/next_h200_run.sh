#!/usr/bin/env bash
# Prepared 2026-12-05 (seventh session), for an H200: HEAD against HEAD + rows_dx_regs/dx_recompute.diff
# (the dx blocks compute a again instead of keeping it in shared memory, where no ring is reserved).
# Run as `bash docs/evidence/h200/rows_dx_regs/next_h200_run.sh` (no carry). About 5 minutes of command.
set -u
export PYTHONPATH=$PWD
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; E=docs/evidence/h200; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
mkdir -p /tmp/head && cp -r rl_kernel_ops /tmp/head/ && git apply $E/rows_dx_regs/dx_recompute.diff || exit 3
build='from rl_kernel_ops import _build; _build.load_extension()'
H="PYTHONSAFEPATH=1 PYTHONPATH=/tmp/head:$PYTHONPATH RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_head"
( env $H MAX_JOBS=8 python3 -c "$build" > $L/build_head.log 2>&1 ) &
( env PYTHONSAFEPATH=1 MAX_JOBS=8 python3 -c "$build" > $L/build.log 2>&1 ) ; wait
echo "built at $(el) s"; grep -iE " error" $L/build.log $L/build_head.log | head -5
for S in 4097 3000 4097 2500 3500 5000 2048 4097; do
  env $H timeout 40 python3 $E/rows_fold/fwd_ab.py head $S 2>&1 | grep graphed >> $L/fwd_ab.txt
  env PYTHONSAFEPATH=1 timeout 40 python3 $E/rows_fold/fwd_ab.py tree $S 2>&1 | grep graphed >> $L/fwd_ab.txt
done; cut -c1-150 $L/fwd_ab.txt; echo "ab at $(el) s"
timeout 100 python3 benchmarks/bench_row_ops.py --rows 4097 --out $L/bench_row_ops.s4097.json > $L/bench_row_ops.s4097.txt 2>&1; grep -E "graphed|copy" $L/bench_row_ops.s4097.txt | cut -c1-90
echo "done at $(el) s"
