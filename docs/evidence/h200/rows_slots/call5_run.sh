#!/usr/bin/env bash
# Call 5: the pipelined slot kernel with one vector per thread (4, call 4) and with two threads per
# vector, 4 columns each (5: 384 threads, 55 registers), against the overlapped kernel (2); bits
# against the split pair; ncu of variant 5 at S = 4097.
set -u
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; T0=$(date +%s)
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
PYTHONSAFEPATH=1 MAX_JOBS=8 python3 -c 'from rl_kernel_ops import _build; _build.load_extension()' > $L/build.log 2>&1
echo "built at $(( $(date +%s) - T0 )) s (exit $?)"; tail -3 $L/build.log
timeout 150 python3 docs/evidence/h200/rows_cols/probe_cols.py 257,1024,2048,3968,4097,6144 over=2,s8=4,s4=5 > $L/probe.txt 2>&1; echo "probe exit $?" >> $L/probe.txt
cat $L/probe.txt | tail -8
for v in 5; do
  PYTHONSAFEPATH=1 timeout 90 ncu --section SpeedOfLight --section Occupancy --section SchedulerStats --section WarpStateStats \
    --metrics dram__bytes_read.sum,smsp__inst_executed.sum -k regex:"slots|overlap" --launch-skip 1 --launch-count 1 \
    python3 docs/evidence/h200/rows_cols/probe_cols.py --ncu 4097 $v > $L/ncu_$v.txt 2>&1
  echo "ncu variant $v exit $?"
  grep -E "Duration|dram__bytes_read|inst_executed|Issued Warp Per|Achieved Occupancy|No Eligible" $L/ncu_$v.txt | head -8
done
echo "done at $(( $(date +%s) - T0 )) s"
