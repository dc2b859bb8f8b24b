#!/usr/bin/env bash
# Diagnostic: where the overlapped backward's time goes (trace_attempt.diff; variant 2, HEAD's code
# plus %globaltimer records and block skipping); nothing here is kept.
set -u
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
PYTHONSAFEPATH=1 MAX_JOBS=8 python3 -c 'from rl_kernel_ops import _build; _build.load_extension()' > $L/build.log 2>&1
echo "built at $(el) s"; grep -iE "error" $L/build.log | head -5
PYTHONSAFEPATH=1 timeout 120 python3 .dev/trace_bwd.py 4097,3968,2048,8192 > $L/trace.txt 2>&1; cut -c1-400 $L/trace.txt
echo "done at $(el) s"; tar czf $OUT/logs.tgz -C $OUT logs
