#!/usr/bin/env bash
# 2026-12-05 (thirteenth session), about 2 minutes, no carry, the H200 of call 8 still warm: HEAD's
# bench_row_ops at S = 4097 (HEAD's build of call 8, /tmp/head), then call 6's traced kernel
# (call6_trace_attempt.diff, call 5's kernel with %globaltimer stamps) on this H200, tiles 30 and 60,
# to compare a tile's pace with the H100's (call 6).
set -u
export PYTHONPATH=$PWD
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; E=docs/evidence/h200; T0=$(date +%s)
keep() { echo "$1 at $(( $(date +%s) - T0 )) s"; }
trap 'cd $OUT && tar czf logs.tgz logs && rm -rf logs' EXIT
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
env PYTHONPATH=/tmp/head:$PYTHONPATH RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_head13 timeout 120 python3 benchmarks/bench_row_ops.py --rows 4097 --out $L/bench_row_ops.head.s4097.json > $L/bench_row_ops.head.s4097.txt 2>&1
grep -E "copy:|norm_modulate +graphed" $L/bench_row_ops.head.s4097.txt | cut -c1-120; keep bench
git apply $E/rows_pull/call6_trace_attempt.diff 2>/dev/null || patch -s -p1 < $E/rows_pull/call6_trace_attempt.diff || exit 3
T="PYTHONSAFEPATH=1 RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_trace13"
env $T MAX_JOBS=8 python3 -c 'from rl_kernel_ops import _build; _build.load_extension()' > $L/build.log 2>&1
grep -iE " error" $L/build.log | head -5; keep built
for tile in 30 60; do env $T timeout 60 python3 $E/rows_pull/trace_pull.py $tile > $L/trace_$tile.txt 2>&1; done
grep -vE "^rl_kernel_ops from" $L/trace_30.txt | cut -c1-240; grep median $L/trace_60.txt; keep trace
