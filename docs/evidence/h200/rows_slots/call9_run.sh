#!/usr/bin/env bash
# Call 9: norm_modulate's forward at fewer blocks per SM (dynamic shared memory padded by
# RLK_FWD_PAD_SMEM: the plan-sorting forward at 10 (0), 9 (15000), 8 (18000), 7 (22500), 6 (28000)
# blocks per SM), graphed at S = 4097 and 32768 (.dev/fwd_ab.py = ../rows_fold/fwd_ab.py).
set -u
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; T0=$(date +%s)
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
PYTHONSAFEPATH=1 MAX_JOBS=8 python3 -c 'from rl_kernel_ops import _build; _build.load_extension()' > $L/build.log 2>&1
echo "built at $(( $(date +%s) - T0 )) s (exit $?)"; tail -3 $L/build.log
for rep in 1 2; do
  for pad in 0 15000 18000 22500 28000; do
    for S in 4097 32768; do
      RLK_FWD_PAD_SMEM=$pad PYTHONSAFEPATH=1 timeout 60 python3 .dev/fwd_ab.py pad$pad $S 2>&1 | tail -1 | tee -a $L/fwd_pad.txt
    done
  done
done
echo "done at $(( $(date +%s) - T0 )) s"
