#!/usr/bin/env bash
# 2026-12-05 (thirteenth session), about 2 minutes, no carry. ../rows_pull/ call 8 found that the
# device holds at most 62 of the pulled kernel's clusters of 4 at once, against 68 tiles at S = 4097.
# 1. cluster_residency.cu: cudaOccupancyMaxActiveClusters by cluster size, threads per block and
#    blocks per SM (set by dynamic shared memory), for an empty kernel.
# 2. ../rows_cluster3/call3_groups_attempt.diff (clusters of 3 blocks of 512 threads, two per SM,
#    with RLK_TRACE stamps): trace_waves.py, when each tile's cluster started and ended, at
#    S = 2048 and 4097, and ../rows_cols/probe_cols.py's times beside the overlapped kernel.
set -u
export PYTHONPATH=$PWD
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; E=docs/evidence/h200; T0=$(date +%s)
keep() { echo "$1 at $(( $(date +%s) - T0 )) s"; }
trap 'cd $OUT && tar czf logs.tgz logs && rm -rf logs' EXIT
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
mkdir -p /tmp/cr && nvcc -O2 -arch=sm_90a -o /tmp/cr/cr $E/rows_residency/cluster_residency.cu > $L/residency_build.log 2>&1
/tmp/cr/cr > $L/residency.txt 2>&1; cat $L/residency.txt; keep residency
git apply $E/rows_cluster3/call3_groups_attempt.diff 2>/dev/null || patch -s -p1 < $E/rows_cluster3/call3_groups_attempt.diff || exit 3
T="PYTHONSAFEPATH=1 RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_groups13"
env $T MAX_JOBS=8 python3 -c 'from rl_kernel_ops import _build; _build.load_extension()' > $L/build.log 2>&1
grep -iE " error" $L/build.log | head -5; keep built
env $T timeout 90 python3 $E/rows_residency/trace_waves.py 2048,4097 > $L/waves.txt 2>&1; echo "waves exit $?"
grep -E "^S=|started by|Error" $L/waves.txt | cut -c1-300; keep waves
env $T timeout 90 python3 $E/rows_cols/probe_cols.py 2048,4097 overlapped=2,clustered=4 > $L/probe.txt 2>&1
cut -c1-150 $L/probe.txt; keep probe
