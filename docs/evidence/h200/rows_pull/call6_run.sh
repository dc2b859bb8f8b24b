#!/usr/bin/env bash
# 2026-12-05 (twelfth session), about 1.5 minutes, no carry: call 5's kernel with %globaltimer
# stamps of one tile's cluster (call6_trace_attempt.diff, RLK_PULL_TRACE=tile, read back by the
# attempt-only op norm_modulate_pull_trace), printed by trace_pull.py for tiles 30 and 60.
set -u
export PYTHONPATH=$PWD
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; E=docs/evidence/h200; T0=$(date +%s)
keep() { echo "$1 at $(( $(date +%s) - T0 )) s"; }
trap 'cd $OUT && tar czf logs.tgz logs && rm -rf logs' EXIT
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
git apply $E/rows_pull/call6_trace_attempt.diff 2>/dev/null || patch -s -p1 < $E/rows_pull/call6_trace_attempt.diff || exit 3
T="PYTHONSAFEPATH=1 RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_pull12f"
env $T MAX_JOBS=8 python3 -c 'from rl_kernel_ops import _build; _build.load_extension()' > $L/build.log 2>&1
grep -iE " error" $L/build.log | head -5; keep built
for tile in 30 60; do env $T timeout 60 python3 $E/rows_pull/trace_pull.py $tile > $L/trace_$tile.txt 2>&1; done
grep -vE "^rl_kernel_ops from" $L/trace_30.txt | cut -c1-240; grep median $L/trace_60.txt; keep trace
