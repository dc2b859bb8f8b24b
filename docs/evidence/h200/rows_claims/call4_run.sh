#!/usr/bin/env bash
# norm_modulate's forward with the tables' vectors loaded into registers before the statistic's
# barrier (RLK_FWD_MODE 3: w, shift, scale, 128 registers; 4: shift and scale, 96 registers) against
# HEAD's (0): bits across modes, graphed A/B, bench_row_ops at S = 4097 for each.
set -u
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
python3 -c 'import torch; print(torch.__version__, torch.version.cuda)' | tee -a $L/machine.txt
PYTHONSAFEPATH=1 MAX_JOBS=16 python3 -c 'from rl_kernel_ops import _build; _build.load_extension()' > $L/build.log 2>&1
echo "built at $(el) s"; grep -iE "error" $L/build.log | head -5
for m in 0 3 4; do env PYTHONSAFEPATH=1 RLK_FWD_MODE=$m timeout 60 python3 .dev/fwd_bits.py mode$m; done | tee $L/bits.txt
echo "bits at $(el) s"
for round in 1 2; do
  for m in 0 3 4; do
    env PYTHONSAFEPATH=1 RLK_FWD_MODE=$m timeout 40 python3 .dev/fwd_ab.py m$m 4097 2>&1 | grep graphed >> $L/fwd_ab.txt
  done
done
cut -c1-90 $L/fwd_ab.txt; echo "ab at $(el) s"
for m in 0 3 4; do
  env PYTHONSAFEPATH=1 RLK_FWD_MODE=$m timeout 120 python3 benchmarks/bench_row_ops.py --rows 4097 --out $L/bench_row_ops.s4097.m$m.json > $L/bench_row_ops.s4097.m$m.txt 2>&1
  echo "bench mode $m exit $? at $(el) s"; grep -E "copy:|norm_modulate +graphed" $L/bench_row_ops.s4097.m$m.txt | cut -c1-120
done
echo "done at $(el) s"
