#!/usr/bin/env bash
# Experiment: the overlapped backward's partial blocks streaming rows through a per-thread cp.async
# ring of 5 or 8 rows (RLK_EXP_RING=5, 8) against the register batches of 4 (0, HEAD's code); head = HEAD.
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
for ring in 0 5 8; do
  env PYTHONSAFEPATH=1 RLK_EXP_RING=$ring timeout 90 python3 $P 4097,3968,3000,2048,1024 over=2 > $L/probe_ring$ring.txt 2>&1
done
grep -h "S=" $L/probe_ring0.txt $L/probe_ring5.txt $L/probe_ring8.txt | cut -c1-120; echo "probes at $(el) s"
tar czf $OUT/logs.tgz -C $OUT logs
for rep in 1 2; do
  env $H timeout 40 python3 .dev/fwd_ab.py head 4097 2>&1 | grep graphed >> $L/fwd_ab.txt
  for ring in 0 5 8; do
    env PYTHONSAFEPATH=1 RLK_EXP_RING=$ring timeout 40 python3 .dev/fwd_ab.py ring$ring 4097 2>&1 | grep graphed >> $L/fwd_ab.txt
  done
done; cut -c1-200 $L/fwd_ab.txt; echo "done at $(el) s"
tar czf $OUT/logs.tgz -C $OUT logs
