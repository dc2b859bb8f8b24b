#!/usr/bin/env bash
# Call 8: the slot kernel whose vector threads hand the products a x to the sum warps (variant 4:
# 2 sum warps only add, 192 vector threads; 2-row steps; 80 registers, 3 blocks per SM) against
# the overlapped kernel (2); bits against the split pair; ncu of variant 4 at S = 4097 with its
# stall reasons.
set -u
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; T0=$(date +%s)
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
PYTHONSAFEPATH=1 MAX_JOBS=8 python3 -c 'from rl_kernel_ops import _build; _build.load_extension()' > $L/build.log 2>&1
echo "built at $(( $(date +%s) - T0 )) s (exit $?)"; tail -3 $L/build.log
timeout 150 python3 docs/evidence/h200/rows_cols/probe_cols.py 257,1024,2048,3968,4097,6144 over=2,slots=4 > $L/probe.txt 2>&1; echo "probe exit $?" >> $L/probe.txt
cat $L/probe.txt | tail -8
PYTHONSAFEPATH=1 timeout 90 ncu --section SpeedOfLight --section Occupancy --section SchedulerStats --section WarpStateStats  \
  --metrics "smsp__inst_executed.sum,dram__bytes_read.sum,regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio" -k regex:"slots" --launch-skip 1 --launch-count 1 \
  python3 docs/evidence/h200/rows_cols/probe_cols.py --ncu 4097 4 > $L/ncu_4.txt 2>&1
echo "ncu exit $?"
grep -E "Duration|Issued Warp Per|Achieved Occupancy|No Eligible|inst_executed|dram__bytes" $L/ncu_4.txt | head -7
grep -E "stalled" $L/ncu_4.txt | sort -k3 -g -r | head -6
echo "done at $(( $(date +%s) - T0 )) s"
