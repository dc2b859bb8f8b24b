#!/usr/bin/env bash
# dx_row_by_quad keeping a in registers (the fused kernel and the column-split one), against the
# overlapped kernel; bench_row_ops at 4097 and 32768; bits against HEAD (.dev/head); row tests.
set -u
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; E=docs/evidence/h200; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
build='from rl_kernel_ops import _build; _build.load_extension()'
H="PYTHONSAFEPATH=1 PYTHONPATH=.dev/head:$PYTHONPATH RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_head"
( env $H MAX_JOBS=8 python3 -c "$build" > $L/build_head.log 2>&1 ) &
( env PYTHONSAFEPATH=1 MAX_JOBS=8 python3 -c "$build" > $L/build.log 2>&1 ) ; wait
echo "built at $(el) s"; grep -iE "error:" $L/build.log | head -5
P="env PYTHONSAFEPATH=1 timeout 40 python3 .dev/probe_cols.py"
$P 1024 overlapped=2,cols7=17 > $L/probe_cols.txt 2>&1
$P 3968 overlapped=2,cols2=12 >> $L/probe_cols.txt 2>&1
$P 4097 overlapped=2,cols2=12,cols3=13 >> $L/probe_cols.txt 2>&1
$P 6144,8192 fused=1,overlapped=2 >> $L/probe_cols.txt 2>&1
env $H timeout 40 python3 .dev/probe_cols.py 6144,8192 head_fused=1,head_overlapped=2 >> $L/probe_cols.txt 2>&1
grep "S=" $L/probe_cols.txt | cut -c1-200; grep -c Error $L/probe_cols.txt; echo "at $(el) s"
tar czf $OUT/logs.tgz -C $OUT logs
for S in 4097 32768; do
  timeout 80 python3 benchmarks/bench_row_ops.py --rows $S --out $L/bench_row_ops.s$S.json > $L/bench_row_ops.s$S.txt 2>&1
  grep -iE "copy|norm_modulate" $L/bench_row_ops.s$S.txt | cut -c1-160 | head -4
done; echo "at $(el) s"
tar czf $OUT/logs.tgz -C $OUT logs
( env $H timeout 150 python3 $E/dump_rl_kernel_bits.py dump /tmp/bits_head.pt > $L/bits_head.txt 2>&1 ) &
( env PYTHONSAFEPATH=1 timeout 150 python3 $E/dump_rl_kernel_bits.py dump /tmp/bits_new.pt > $L/bits.txt 2>&1 ) &
wait
env PYTHONSAFEPATH=1 timeout 60 python3 $E/dump_rl_kernel_bits.py compare /tmp/bits_head.pt /tmp/bits_new.pt >> $L/bits.txt 2>&1; echo "compare: exit $?" >> $L/bits.txt
tail -n 2 $L/bits.txt; echo "at $(el) s"
tar czf $OUT/logs.tgz -C $OUT logs
timeout $(( 560 - $(el) )) python3 -m pytest -q -p no:cacheprovider tests/cuda/test_rl_kernel_rows.py > $L/cuda_rows_tests.log 2>&1; tail -n 1 $L/cuda_rows_tests.log
echo "done at $(el) s"
tar czf $OUT/logs.tgz -C $OUT logs
