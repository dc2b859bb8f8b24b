#!/usr/bin/env bash
# Experiment: overlapped backward's partial blocks with 32-bit row offsets (tree's variant 2), and
# warp-aligned column slices (3: 128 vectors per block, 4: 96); head = HEAD's rl_kernel_ops.
set -u
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; E=docs/evidence/h200; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
build='from rl_kernel_ops import _build; _build.load_extension()'
H="PYTHONSAFEPATH=1 PYTHONPATH=.dev/head:$PYTHONPATH RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_head"
( env $H MAX_JOBS=8 python3 -c "$build" > $L/build_head.log 2>&1 ) &
( env PYTHONSAFEPATH=1 MAX_JOBS=8 python3 -c "$build" > $L/build.log 2>&1 ) ; wait
echo "built at $(el) s"; grep -iE "error" $L/build.log | head -5
P=$E/rows_cols/probe_cols.py
env $H timeout 60 python3 $P 4097,3968,2048 over=2 > $L/probe_head.txt 2>&1
env PYTHONSAFEPATH=1 timeout 90 python3 $P 4097,3968,2048,1024 over=2,w128=3,w96=4 > $L/probe_tree.txt 2>&1
cut -c1-160 $L/probe_head.txt $L/probe_tree.txt | grep -v "^rl_kernel"; echo "probes at $(el) s"
tar czf $OUT/logs.tgz -C $OUT logs
for rep in 1 2; do
  env $H timeout 40 python3 .dev/fwd_ab.py head 4097 2>&1 | grep graphed >> $L/fwd_ab.txt
  for v in 2 3 4; do
    env PYTHONSAFEPATH=1 RLK_EXP_OVERLAP=$v timeout 40 python3 .dev/fwd_ab.py tree$v 4097 2>&1 | grep graphed >> $L/fwd_ab.txt
  done
done; cut -c1-120 $L/fwd_ab.txt; echo "done at $(el) s"
tar czf $OUT/logs.tgz -C $OUT logs
