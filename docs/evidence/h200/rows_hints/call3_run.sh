#!/usr/bin/env bash
# L2 policies without evict_last: the overlapped backward's dx blocks evict_first (variants 5-7;
# 4 = call 2's variant 6 for reference), with and without the forward's L1::no_allocate on x.
set -u
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; E=docs/evidence/h200; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
PYTHONSAFEPATH=1 MAX_JOBS=16 python3 -c 'from rl_kernel_ops import _build; _build.load_extension()' > $L/build.log 2>&1
echo "built at $(el) s"; grep -iE "error" $L/build.log | head -5
PYTHONSAFEPATH=1 timeout 100 python3 $E/rows_cols/probe_cols.py 4097,3000,2048 over=2,h3=4,h4=5,h5=6,h6=7 > $L/probe.txt 2>&1
grep "S=" $L/probe.txt | cut -c1-150; echo "probe at $(el) s"
for round in 1 2; do
  for hf in 0:0 0:1 3:0 4:1 5:1 6:1; do
    h=${hf%:*}; f=${hf#*:}
    env PYTHONSAFEPATH=1 RLK_OVERLAP_HINTS=$h RLK_FWD_HINT=$f timeout 40 python3 .dev/fwd_ab.py b${h}f$f 4097 2>&1 | grep graphed >> $L/fwd_ab.txt
  done
done
cut -c1-60,250-330 $L/fwd_ab.txt; echo "done at $(el) s"
