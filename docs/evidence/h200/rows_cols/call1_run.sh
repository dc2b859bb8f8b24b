#!/usr/bin/env bash
# The column-split backward (variant 3 / 10 + splits): bits against the split pair, times against
# the overlapped and fused kernels; ncu DRAM bytes at S = 3968 (66 tiles, 2 splits).
set -u
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
( time env PYTHONSAFEPATH=1 MAX_JOBS=16 python3 -c 'from rl_kernel_ops import _build; _build.load_extension()' ) > $L/build.log 2>&1
echo "built at $(el) s"; grep -iE " error|error:" $L/build.log | head -5
P="env PYTHONSAFEPATH=1 timeout 40 python3 .dev/probe_cols.py"
$P 1024 overlapped=2,cols4=14,cols6=16,cols7=17 > $L/probe_cols.txt 2>&1
$P 2048 overlapped=2,cols2=12,cols3=13 >> $L/probe_cols.txt 2>&1
$P 3968 overlapped=2,cols2=12,auto=3 >> $L/probe_cols.txt 2>&1
$P 4097 overlapped=2,cols2=12,cols3=13,auto=3 >> $L/probe_cols.txt 2>&1
$P 6144 fused=1,overlapped=2,cols2=12 >> $L/probe_cols.txt 2>&1
grep -v "^rl_kernel_ops from" $L/probe_cols.txt | cut -c1-200; echo "at $(el) s"
tar czf $OUT/logs.tgz -C $OUT logs
for v in 12 2; do
  env PYTHONSAFEPATH=1 timeout 60 ncu --metrics gpu__time_duration.sum,dram__bytes_read.sum,lts__t_bytes.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active \
    -k regex:"cols|overlap" python3 .dev/probe_cols.py --ncu 3968 $v > $L/ncu_$v.txt 2>&1
  grep -E "norm_modulate|duration|dram__|lts__|issue|warps_active" $L/ncu_$v.txt | tail -6 | cut -c1-150
done
echo "done at $(el) s"
tar czf $OUT/logs.tgz -C $OUT logs
