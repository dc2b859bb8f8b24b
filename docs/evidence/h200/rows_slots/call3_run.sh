#!/usr/bin/env bash
# Call 3: the slot kernel with one vector per thread (192 threads: variants 6, and 7 without the row
# sums) beside call 1's 128 threads (4, 5) and the overlapped kernel (2); then ncu's issue, stall and
# memory figures of variants 2, 4, 6 at S = 4097.
set -u
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; T0=$(date +%s)
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
PYTHONSAFEPATH=1 MAX_JOBS=8 python3 -c 'from rl_kernel_ops import _build; _build.load_extension()' > $L/build.log 2>&1
echo "built at $(( $(date +%s) - T0 )) s (exit $?)"; tail -3 $L/build.log
timeout 150 python3 docs/evidence/h200/rows_cols/probe_cols.py 257,2048,4097,6144 over=2,s128=4,s192=6,nosums128=5,nosums192=7 > $L/probe.txt 2>&1; echo "probe exit $?" >> $L/probe.txt
cat $L/probe.txt | tail -6
for v in 2 4 6; do
  PYTHONSAFEPATH=1 timeout 90 ncu --section SpeedOfLight --section Occupancy --section SchedulerStats --section WarpStateStats \
    --metrics dram__bytes_read.sum,dram__bytes_write.sum -k regex:"slots|overlap" --launch-skip 1 --launch-count 1 \
    python3 docs/evidence/h200/rows_cols/probe_cols.py --ncu 4097 $v > $L/ncu_$v.txt 2>&1
  echo "ncu variant $v exit $?"
  grep -E "Duration|Issue Slots Busy|Achieved Occupancy|Theoretical Occupancy|dram__bytes_read|Warp Cycles Per Issued|No Eligible|Stall|Registers Per|Block Limit" $L/ncu_$v.txt | head -14
done
echo "done at $(( $(date +%s) - T0 )) s"
