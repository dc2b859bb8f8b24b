#!/usr/bin/env bash
# The dx blocks without the shared-memory a (the tree) against HEAD (.dev/head): graphed fwd+bwd A/B,
# bench_row_ops at S = 4097, the 132-tensor bits against HEAD's build, the row tests.
set -u
export PYTHONPATH=$PWD
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; E=docs/evidence/h200; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
build='from rl_kernel_ops import _build; _build.load_extension()'
H="PYTHONSAFEPATH=1 PYTHONPATH=.dev/head:$PYTHONPATH RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_head"
( env $H MAX_JOBS=8 python3 -c "$build" > $L/build_head.log 2>&1 ) &
( env PYTHONSAFEPATH=1 MAX_JOBS=8 python3 -c "$build" > $L/build.log 2>&1 ) ; wait
echo "built at $(el) s"; grep -iE " error" $L/build.log $L/build_head.log | head -5
for S in 4097 3000 4097 2048 4097; do
  env $H timeout 40 python3 .dev/fwd_ab.py head $S 2>&1 | grep graphed >> $L/fwd_ab.txt
  env PYTHONSAFEPATH=1 timeout 40 python3 .dev/fwd_ab.py tree $S 2>&1 | grep graphed >> $L/fwd_ab.txt
done; cut -c1-150 $L/fwd_ab.txt; echo "ab at $(el) s"; tar czf $OUT/logs.tgz -C $OUT logs
env PYTHONSAFEPATH=1 timeout 100 python3 benchmarks/bench_row_ops.py --rows 4097 --out $L/bench_row_ops.s4097.json > $L/bench_row_ops.s4097.txt 2>&1; grep -E "graphed|copy" $L/bench_row_ops.s4097.txt | cut -c1-90
echo "bench at $(el) s"; tar czf $OUT/logs.tgz -C $OUT logs
( env $H timeout 150 python3 $E/dump_rl_kernel_bits.py dump /tmp/bits_head.pt > $L/bits_head.txt 2>&1 ) &
( env PYTHONSAFEPATH=1 timeout 150 python3 $E/dump_rl_kernel_bits.py dump /tmp/bits_new.pt > $L/bits.txt 2>&1 ) &
wait
env PYTHONSAFEPATH=1 timeout 60 python3 $E/dump_rl_kernel_bits.py compare /tmp/bits_head.pt /tmp/bits_new.pt >> $L/bits.txt 2>&1; echo "compare: exit $?" >> $L/bits.txt
tail -n 2 $L/bits.txt; echo "bits at $(el) s"; tar czf $OUT/logs.tgz -C $OUT logs
env PYTHONSAFEPATH=1 timeout 240 python3 -m pytest -q -p no:cacheprovider tests/cuda/test_rl_kernel_rows.py > $L/cuda_rows_tests.log 2>&1; echo "pytest exit $?" >> $L/cuda_rows_tests.log; tail -n 2 $L/cuda_rows_tests.log
echo "done at $(el) s"; tar czf $OUT/logs.tgz -C $OUT logs
