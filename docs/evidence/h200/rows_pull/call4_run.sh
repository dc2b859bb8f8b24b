#!/usr/bin/env bash
# 2026-12-05 (twelfth session), about 2 minutes, no carry: call 3's kernel with a knob that leaves
# out one of its two jobs (call4_bounds_attempt.diff; RLK_PULL_SKIP=1: no dx, 2: no partial sums and
# no reads of the partners' rings; the bits are wrong by design), to see which job sets its pace.
# Times only (../rows_cols/probe_cols.py, whose bit comparison reports the skipped job's outputs).
set -u
export PYTHONPATH=$PWD
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; E=docs/evidence/h200; T0=$(date +%s)
keep() { echo "$1 at $(( $(date +%s) - T0 )) s"; }
trap 'cd $OUT && tar czf logs.tgz logs && rm -rf logs' EXIT
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
git apply $E/rows_pull/call4_bounds_attempt.diff 2>/dev/null || patch -s -p1 < $E/rows_pull/call4_bounds_attempt.diff || exit 3
T="PYTHONSAFEPATH=1 RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_pull12d"
env $T MAX_JOBS=8 python3 -c 'from rl_kernel_ops import _build; _build.load_extension()' > $L/build.log 2>&1
grep -iE " error" $L/build.log | head -5; keep built
for r in 1 2; do for k in 0 1 2; do
  echo "RLK_PULL_SKIP=$k round $r" >> $L/probe.txt
  env $T RLK_PULL_SKIP=$k timeout 60 python3 $E/rows_cols/probe_cols.py 2048,4097 overlapped=2,pull=4 >> $L/probe.txt 2>&1
done; done
grep -vE "^rl_kernel_ops from" $L/probe.txt | cut -c1-150; keep probe
