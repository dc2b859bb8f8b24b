#!/usr/bin/env bash
# Compact call 1 (2026-12-05 fifth session): build, the attempt's variant tests, the gradients' bits per knob setting.
set -u
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; T0=$(date +%s)
export RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_build
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
python3 -c 'import torch; print(torch.__version__, torch.version.cuda)' | tee -a $L/machine.txt
PYTHONSAFEPATH=1 MAX_JOBS=16 python3 -c 'from rl_kernel_ops import _build; _build.load_extension()' > $L/build.log 2>&1
echo "built at $(el) s"; grep -iE "error" $L/build.log | head -5
PYTHONSAFEPATH=1 timeout 230 python3 -m pytest -q -x .dev/test_dx_rows.py > $L/test_dx_rows.log 2>&1
echo "attempt tests exit $? at $(el) s"; tail -2 $L/test_dx_rows.log
for s in "0 0 0 0" "1 0 0 0" "0 1 0 0" "0 0 2 0" "0 0 0 8" "1 1 2 0" "1 1 0 8"; do
  set -- $s
  env PYTHONSAFEPATH=1 RLK_DX2=$1 RLK_FWD_PRE=$2 RLK_TWO_STREAMS=$3 RLK_PACE=$4 timeout 60 python3 .dev/grads_bits.py d$1p$2t$3k$4
done 2>&1 | tee $L/grads_bits.txt | cut -c1-200
echo "done at $(el) s"
