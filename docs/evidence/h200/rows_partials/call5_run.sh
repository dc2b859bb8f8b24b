#!/usr/bin/env bash
# The overlapped backward's partial-block ring (variant 3; variant 0 takes it at <= 2 partial blocks
# per SM) against HEAD (.dev/head): probe with bits, graphed A/B, 132-tensor bits, row tests, bench.
set -u
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; E=docs/evidence/h200; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
build='from rl_kernel_ops import _build; _build.load_extension()'
H="PYTHONSAFEPATH=1 PYTHONPATH=.dev/head:$PYTHONPATH RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_head"
( env $H MAX_JOBS=8 python3 -c "$build" > $L/build_head.log 2>&1 ) &
( env PYTHONSAFEPATH=1 MAX_JOBS=8 python3 -c "$build" > $L/build.log 2>&1 ) ; wait
echo "built at $(el) s"; grep -iE "error" $L/build.log | head -5
env PYTHONSAFEPATH=1 timeout 100 python3 $E/rows_cols/probe_cols.py 257,1024,2048,2200,2500,3000,4097 over=2,ring=3,chosen=0 > $L/probe.txt 2>&1
grep "S=" $L/probe.txt | cut -c1-120; echo "probe at $(el) s"; tar czf $OUT/logs.tgz -C $OUT logs
for S in 4097 2048 4097 1024; do
  env $H timeout 40 python3 .dev/fwd_ab.py head $S 2>&1 | grep graphed >> $L/fwd_ab.txt
  env PYTHONSAFEPATH=1 timeout 40 python3 .dev/fwd_ab.py tree $S 2>&1 | grep graphed >> $L/fwd_ab.txt
done; cut -c1-100 $L/fwd_ab.txt; echo "ab at $(el) s"; tar czf $OUT/logs.tgz -C $OUT logs
( env $H timeout 150 python3 $E/dump_rl_kernel_bits.py dump /tmp/bits_head.pt > $L/bits_head.txt 2>&1 ) &
( env PYTHONSAFEPATH=1 timeout 150 python3 $E/dump_rl_kernel_bits.py dump /tmp/bits_new.pt > $L/bits.txt 2>&1 ) &
wait
env PYTHONSAFEPATH=1 timeout 60 python3 $E/dump_rl_kernel_bits.py compare /tmp/bits_head.pt /tmp/bits_new.pt >> $L/bits.txt 2>&1; echo "compare: exit $?" >> $L/bits.txt
tail -n 2 $L/bits.txt; echo "bits at $(el) s"; tar czf $OUT/logs.tgz -C $OUT logs
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/cuda/test_rl_kernel_rows.py > $L/cuda_rows_tests.log 2>&1; tail -n 1 $L/cuda_rows_tests.log
echo "tests at $(el) s"; tar czf $OUT/logs.tgz -C $OUT logs
timeout 100 python3 benchmarks/bench_row_ops.py --rows 4097 --out $L/bench_row_ops.s4097.json > $L/bench_row_ops.s4097.txt 2>&1; grep -E "graphed|copy" $L/bench_row_ops.s4097.txt | cut -c1-90
echo "done at $(el) s"; tar czf $OUT/logs.tgz -C $OUT logs
