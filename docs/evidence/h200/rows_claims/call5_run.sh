#!/usr/bin/env bash
# bench_row_ops at S = 4097 and 32768 with HEAD's forward (RLK_FWD_MODE 0) and the forward that loads
# the tables' vectors into registers before the statistic's barrier (3); graphed A/B at 32768.
set -u
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
python3 -c 'import torch; print(torch.__version__, torch.version.cuda)' | tee -a $L/machine.txt
PYTHONSAFEPATH=1 MAX_JOBS=16 python3 -c 'from rl_kernel_ops import _build; _build.load_extension()' > $L/build.log 2>&1
echo "built at $(el) s"; grep -iE "error" $L/build.log | head -5
for s in 4097 32768; do
  for m in 0 3; do
    env RLK_FWD_MODE=$m timeout 150 python3 benchmarks/bench_row_ops.py --rows $s --out $L/bench_row_ops.s$s.m$m.json > $L/bench_row_ops.s$s.m$m.txt 2>&1
    echo "bench S=$s mode $m exit $? at $(el) s"; grep -E "copy:|^norm_modulate +graphed" $L/bench_row_ops.s$s.m$m.txt | cut -c1-110
  done
done
for m in 0 3 0 3; do
  env PYTHONSAFEPATH=1 RLK_FWD_MODE=$m timeout 60 python3 .dev/fwd_ab.py m$m 32768 2>&1 | grep graphed >> $L/fwd_ab.s32768.txt
done
cut -c1-90 $L/fwd_ab.s32768.txt; echo "done at $(el) s"
