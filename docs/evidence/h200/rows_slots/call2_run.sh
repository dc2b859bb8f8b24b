#!/usr/bin/env bash
# Call 2: variant 5, the same kernel without the row sums (phase A and the cluster barrier; its dx
# is wrong by design), beside variant 4 and the overlapped kernel: what the per-row exchange costs.
set -u
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; T0=$(date +%s)
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
PYTHONSAFEPATH=1 MAX_JOBS=8 python3 -c 'from rl_kernel_ops import _build; _build.load_extension()' > $L/build.log 2>&1
echo "built at $(( $(date +%s) - T0 )) s (exit $?)"; tail -3 $L/build.log
timeout 150 python3 docs/evidence/h200/rows_cols/probe_cols.py 257,2048,4097,6144 over=2,slots=4,nosums=5 > $L/probe.txt 2>&1; echo "probe exit $?" >> $L/probe.txt
cat $L/probe.txt | tail -12; echo "done at $(( $(date +%s) - T0 )) s"
