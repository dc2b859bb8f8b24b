#!/usr/bin/env bash
# Call 1 (2026-12-05 sixth session): HEAD against paced_attempt.diff's knobs, graphed, and the streaming bound.
set -u
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
python3 -c 'import torch; print(torch.__version__, torch.version.cuda)' | tee -a $L/machine.txt
mkdir -p /tmp/head && cp -r audit benchmarks rl_kernel_ops /tmp/head/
git apply docs/evidence/h200/rows_paced/paced_attempt.diff 2>/dev/null || patch -p1 < docs/evidence/h200/rows_paced/paced_attempt.diff > /dev/null || { echo "diff does not apply"; exit 3; }
(cd /tmp/head && PYTHONPATH=/tmp/head RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_head PYTHONSAFEPATH=1 MAX_JOBS=8 python3 -c 'from rl_kernel_ops import _build; _build.load_extension()' > $L/build_head.log 2>&1) &
RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_build PYTHONSAFEPATH=1 MAX_JOBS=8 python3 -c 'from rl_kernel_ops import _build; _build.load_extension()' > $L/build.log 2>&1
wait; echo "built at $(el) s"; grep -iE " error" $L/build*.log | head -5
(cd /tmp/head && env PYTHONPATH=/tmp/head RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_head PYTHONSAFEPATH=1 timeout 90 python3 $OLDPWD/.dev/sol.py 2048 4097 8192) > $L/sol.txt 2>&1; cat $L/sol.txt
run() {  # label S knobs...
  local n=$1 S=$2; shift 2
  if [ $n = head ]; then
    (cd /tmp/head && env PYTHONPATH=/tmp/head RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_head PYTHONSAFEPATH=1 timeout 40 python3 $OLDPWD/.dev/fwd_ab.py head $S)
  else
    set -- $@
    env RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_build PYTHONSAFEPATH=1 RLK_DX2=$1 RLK_FWD_PRE=$2 RLK_TWO_STREAMS=0 RLK_PACE=$3 timeout 40 python3 .dev/fwd_ab.py $n $S
  fi 2>&1 | grep graphed >> $L/fwd_ab.txt
}
for S in 4097 3000 2048 8192 4097; do
  run head $S; run d0p0k0 $S 0 0 0; run d0p1k0 $S 0 1 0; run d1p1k8 $S 1 1 8
  echo "S=$S at $(el) s"
done
cut -c1-200 $L/fwd_ab.txt; echo "done at $(el) s"
