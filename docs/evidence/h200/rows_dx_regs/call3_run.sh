#!/usr/bin/env bash
# Where the dx blocks without the shared-memory a lose: HEAD + dx_regs_attempt.diff (.dev/attempt),
# RLK_DX_MODE 0 (HEAD's code), 1 (a recomputed), 2 (1 + grad and x loaded L1::no_allocate: the tree),
# graphed fwd+bwd at several S.
set -u
export PYTHONPATH=$PWD
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
A="PYTHONSAFEPATH=1 PYTHONPATH=.dev/attempt:$PYTHONPATH RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_attempt"
env $A MAX_JOBS=16 python3 -c 'from rl_kernel_ops import _build; _build.load_extension()' > $L/build.log 2>&1
echo "built at $(el) s"
for S in 3000 4097 2500 3500 5000 3000 4097; do
  for m in 0 1 2; do env $A RLK_DX_MODE=$m timeout 40 python3 .dev/fwd_ab.py m$m $S 2>&1 | grep graphed >> $L/fwd_ab.txt; done
  echo "S=$S at $(el) s"
done
cut -c1-150 $L/fwd_ab.txt; echo "done at $(el) s"
