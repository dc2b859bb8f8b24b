#!/usr/bin/env bash
# Forward A/B: HEAD (.dev/head), the tree (smem-x forward at 16 blocks/SM + one-launch fold), and
# .dev/v12 (the tree with 12 blocks/SM for the forward): fwd_ab.py alternating, S = 4097 x3, 32768 x1.
set -u
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
build='from rl_kernel_ops import _build; _build.load_extension()'
H="PYTHONSAFEPATH=1 PYTHONPATH=.dev/head:$PYTHONPATH RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_head"
V="PYTHONSAFEPATH=1 PYTHONPATH=.dev/v12:$PYTHONPATH RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_v12"
( env $H MAX_JOBS=5 python3 -c "$build" > $L/build_head.log 2>&1 ) &
( env $V MAX_JOBS=5 python3 -c "$build" > $L/build_v12.log 2>&1 ) &
( env PYTHONSAFEPATH=1 MAX_JOBS=6 python3 -c "$build" > $L/build.log 2>&1 ) ; wait
echo "built at $(el) s"; grep -iE "error" $L/build*.log | head -5
for S in 4097 4097 4097 32768; do
  env $H timeout 40 python3 .dev/fwd_ab.py head $S >> $L/fwd_ab.txt 2>&1
  env PYTHONSAFEPATH=1 timeout 40 python3 .dev/fwd_ab.py tree $S >> $L/fwd_ab.txt 2>&1
  env $V timeout 40 python3 .dev/fwd_ab.py v12 $S >> $L/fwd_ab.txt 2>&1
  echo "S=$S at $(el) s"
done
cut -c1-110 $L/fwd_ab.txt
echo "done at $(el) s"
tar czf $OUT/logs.tgz -C $OUT logs
