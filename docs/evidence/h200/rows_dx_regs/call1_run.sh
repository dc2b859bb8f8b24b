#!/usr/bin/env bash
# Prepared 2026-12-05 (sixth session), not run: apply dx_regs_attempt.diff first
# (git apply .dev/dx_regs_attempt.diff), then run as `bash .dev/next_dx_regs.sh` with carry [".dev"].
# The split dx kernel and the overlapped kernel's dx blocks without the shared-memory a
# (RLK_DX_MODE 1), also with grad and x loaded L1::no_allocate and the L1 carveout at its largest
# (3), so that w and the scale rows stay in L1; bits against mode 0, graphed times; then the
# forward's L1/shared split (RLK_FWD_CARVEOUT). About 7 minutes of command.
set -u
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
export PYTHONPATH=$PWD RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_dx PYTHONSAFEPATH=1
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
MAX_JOBS=16 python3 -c 'from rl_kernel_ops import _build; _build.load_extension()' > $L/build.log 2>&1
echo "built at $(el) s"; grep -iE " error" $L/build.log | head -5
timeout 200 python3 .dev/dx_modes.py 4097 2048 8192 4097 > $L/dx_modes.txt 2>&1
echo "exit $? at $(el) s"; cat $L/dx_modes.txt
for m in 0 1 2 3; do RLK_DX_MODE=$m timeout 90 python3 .dev/grads_bits.py m$m; done > $L/grads_bits.txt 2>&1
echo "grads bits at $(el) s:"; cat $L/grads_bits.txt
for S in 4097 2048 8192 4097; do
  for m in 0 1 2 3; do RLK_DX_MODE=$m timeout 40 python3 .dev/fwd_ab.py m$m $S 2>&1 | grep graphed >> $L/fwd_ab.txt; done
  echo "S=$S at $(el) s"
done
for c in 28 100; do  # the forward's L1/shared split (RLK_FWD_CARVEOUT, percent shared: 28 keeps 10 blocks of 4 KB, 100 leaves L1 28 KB)
  for m in 0 3; do RLK_FWD_CARVEOUT=$c RLK_DX_MODE=$m timeout 40 python3 .dev/fwd_ab.py c${c}m$m 4097 2>&1 | grep graphed >> $L/fwd_ab.txt; done
done
cut -c1-180 $L/fwd_ab.txt; echo "done at $(el) s"
