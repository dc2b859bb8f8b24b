#!/usr/bin/env bash
# The column-split backward with longest-first tiles and a kept in registers (variant 10 + splits)
# against the overlapped kernel; the fused kernel (dx_row_by_quad<false>) against HEAD's.
set -u
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
build='from rl_kernel_ops import _build; _build.load_extension()'
H="PYTHONSAFEPATH=1 PYTHONPATH=.dev/head:$PYTHONPATH RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_head"
( env $H MAX_JOBS=8 python3 -c "$build" > $L/build_head.log 2>&1 ) &
( env PYTHONSAFEPATH=1 MAX_JOBS=8 python3 -c "$build" > $L/build.log 2>&1 ) ; wait
echo "built at $(el) s"; grep -iE "error:" $L/build.log | head -5
P="env PYTHONSAFEPATH=1 timeout 60 python3 .dev/probe_cols.py"
$P 64,257,1024,2048 overlapped=2,cols2=12,cols4=14 > $L/probe_cols.txt 2>&1
$P 3968,4097,4300,4600,5000,5400 overlapped=2,cols2=12 >> $L/probe_cols.txt 2>&1
$P 6144 fused=1,overlapped=2 >> $L/probe_cols.txt 2>&1
env $H timeout 40 python3 .dev/probe_cols.py 6144 head_fused=1,head_overlapped=2 >> $L/probe_cols.txt 2>&1
grep "S=" $L/probe_cols.txt | cut -c1-200; grep -c Error $L/probe_cols.txt; echo "done at $(el) s"
tar czf $OUT/logs.tgz -C $OUT logs
