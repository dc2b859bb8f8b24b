#!/usr/bin/env bash
# The register-preloading forward (mode 3) against HEAD's (0) at other S: graphed fwd(grad) and fwd+bwd.
set -u
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; T0=$(date +%s)
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
PYTHONSAFEPATH=1 MAX_JOBS=16 python3 -c 'from rl_kernel_ops import _build; _build.load_extension()' > $L/build.log 2>&1
for s in 1024 2048 8192 257; do for m in 0 3 0 3; do
  env PYTHONSAFEPATH=1 RLK_FWD_MODE=$m timeout 40 python3 .dev/fwd_ab.py m$m $s 2>&1 | grep graphed | cut -c1-80 | tee -a $L/fwd_ab.txt
done; done
echo "done at $(( $(date +%s) - T0 )) s"
