#!/usr/bin/env bash
# fwd+bwd with and without the L2 flushed between forward and backward, HEAD's forward (mode 0) and
# the register-preloading forward (3), at S = 4097.
set -u
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
PYTHONSAFEPATH=1 MAX_JOBS=16 python3 -c 'from rl_kernel_ops import _build; _build.load_extension()' > $L/build.log 2>&1
echo "built at $(el) s"; grep -iE "error" $L/build.log | head -5
for m in 0 3 0 3 0 3; do
  env PYTHONSAFEPATH=1 RLK_FWD_MODE=$m timeout 60 python3 .dev/flush_ab.py m$m 4097 2>&1 | tail -2 | tee -a $L/flush_ab.txt
done
echo "done at $(el) s"
