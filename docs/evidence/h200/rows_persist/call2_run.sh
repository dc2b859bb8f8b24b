#!/usr/bin/env bash
# Session 10 call 2: norm_modulate's forward kernel compiled for 12, 14 and 16 blocks per SM
# (__launch_bounds__ min blocks; RLK_FWD_MINBLOCKS) against HEAD's 10 (48 registers), in one process.
set -u
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; T0=$(date +%s)
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
python3 -c 'import torch; print(torch.__version__, torch.version.cuda)' | tee -a $L/machine.txt
PYTHONSAFEPATH=1 MAX_JOBS=8 python3 -c 'from rl_kernel_ops import _build; _build.load_extension()' > $L/build.log 2>&1
echo "built at $(( $(date +%s) - T0 )) s"; tail -3 $L/build.log
PYTHONSAFEPATH=1 timeout 200 python3 .dev/probe_persist.py 4097,2048,8192,32768 "0;12;16;0;12;16" 1 RLK_FWD_MINBLOCKS 2>&1 | tee $L/probe_minblocks.txt
echo "probe done at $(( $(date +%s) - T0 )) s"
