#!/usr/bin/env bash
# Call 6: the stall reasons (ncu) of the pipelined slot kernel (4) and the overlapped kernel (2) at
# S = 4097, the tree of call 5.
set -u
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; T0=$(date +%s)
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
PYTHONSAFEPATH=1 MAX_JOBS=8 python3 -c 'from rl_kernel_ops import _build; _build.load_extension()' > $L/build.log 2>&1
echo "built at $(( $(date +%s) - T0 )) s (exit $?)"; tail -3 $L/build.log
for v in 2 4; do
  PYTHONSAFEPATH=1 timeout 90 ncu --section WarpStateStats --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio" \
    -k regex:"slots|overlap" --launch-skip 1 --launch-count 1 \
    python3 docs/evidence/h200/rows_cols/probe_cols.py --ncu 4097 $v > $L/ncu_$v.txt 2>&1
  echo "ncu variant $v exit $?"
  grep -E "stalled|Duration|Warp Cycles" $L/ncu_$v.txt | sort -k3 -g -r | head -12
done
echo "done at $(( $(date +%s) - T0 )) s"
