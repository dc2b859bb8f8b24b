#!/usr/bin/env bash
# 2026-12-05 (tenth session), about 3 minutes, no carry: HEAD (94a3cff) + call2_trace_attempt.diff
# (call 1's clustered kernel with %globaltimer stamps under RLK_TRACE): trace_cluster.py at S =
# 1024 and 4097, and ncu's counters of the clustered kernel and of the overlapped one at S = 4097.
set -u
export PYTHONPATH=$PWD RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_trace10
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; E=docs/evidence/h200; T0=$(date +%s)
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
git apply $E/rows_cluster3/call2_trace_attempt.diff 2>/dev/null || patch -s -p1 < $E/rows_cluster3/call2_trace_attempt.diff || exit 3
MAX_JOBS=16 python3 -c 'from rl_kernel_ops import _build; _build.load_extension()' > $L/build.log 2>&1 || { tail -5 $L/build.log; exit 3; }
echo "built at $(( $(date +%s) - T0 )) s"
timeout 90 python3 $E/rows_cluster3/trace_cluster.py 1024,4097 > $L/trace.txt 2>&1; echo "trace exit $?"
grep -E "^S=|Error" $L/trace.txt | cut -c1-400
M=gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,launch__cluster_max_active_per_gpu
timeout 90 ncu --clock-control none --metrics $M -k regex:"cluster_kernel|overlap" --launch-skip 2 --launch-count 2 \
  python3 $E/rows_cluster3/ncu_cluster.py 4097 > $L/ncu.txt 2>&1; echo "ncu exit $?"
grep -E "cluster_kernel|overlap_kernel|duration|dram__bytes|lts__t_sectors|throughput|inst_executed|issue_active|warps_active|cluster_max" $L/ncu.txt | sed -e 's/(const unsigned short.*//' -e 's/ \{8,\}/  /g' | cut -c1-110
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $L/build.log
echo "done at $(( $(date +%s) - T0 )) s"
