#!/usr/bin/env bash
# 2026-12-05 (eleventh session), about 3 minutes, no carry: HEAD's kernels (357382a) only. Which
# part of L2 holds the overlapped backward at its ~83 % of peak: ncu's breakdown of
# lts__throughput (its sub-metrics, each as % of its own peak) for the no-plan forward, the split
# dx kernel, the split partials kernel and the overlapped kernel (variant 2) at S = 4097
# (../rows_hints/ncu_l2.py: the forward once, then the three backward launches twice; all seven
# profiled).
set -u
export PYTHONPATH=$PWD RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_call2_11
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; E=docs/evidence/h200; T0=$(date +%s)
trap 'cd $OUT && tar czf logs.tgz logs && rm -rf logs' EXIT
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
MAX_JOBS=16 python3 -c 'from rl_kernel_ops import _build; _build.load_extension()' > $L/build.log 2>&1 || { tail -5 $L/build.log; exit 3; }
echo "built at $(( $(date +%s) - T0 )) s"
M=breakdown:lts__throughput.avg.pct_of_peak_sustained_elapsed,breakdown:l1tex__throughput.avg.pct_of_peak_sustained_active,gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
timeout 200 ncu --clock-control none --metrics $M -k regex:"overlap|bwd_dx|partials|fwd_kernel" --launch-count 7 \
  python3 $E/rows_hints/ncu_l2.py 4097 2 > $L/ncu_breakdown.txt 2>&1; echo "ncu exit $?"
grep -E "==ERR|rror" $L/ncu_breakdown.txt | head -3
sed -e 's/(const unsigned short.*//' -e 's/ \{8,\}/  /g' $L/ncu_breakdown.txt | grep -vE "^==PROF|^ *-+ *$" | cut -c1-110 | tail -120
echo "done at $(( $(date +%s) - T0 )) s"
