#!/usr/bin/env bash
# The sliced backward in the working tree: against HEAD's overlapped one (.dev/head), bits, tests/cuda.
set -u
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; E=docs/evidence/h200; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv | tee $L/machine16.txt
build='import rl_kernel_ops; print(rl_kernel_ops.__file__); from rl_kernel_ops import _build; _build.load_extension()'
H="PYTHONSAFEPATH=1 PYTHONPATH=.dev/head:$PYTHONPATH RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_head"
N="PYTHONSAFEPATH=1"
( env $H MAX_JOBS=8 python3 -c "$build" > $L/build_head.log 2>&1 ) &
( time env $N MAX_JOBS=8 python3 -c "$build" ) > $L/build_new.log 2>&1; wait
echo "built at $(el) s"; head -1 $L/build_new.log $L/build_head.log; grep -i "error" $L/build_new.log | head -5
env $N timeout 100 python3 .dev/probe_tiledx.py 1024,2048,4097,6144,8192 sliced=2,fused=1,chosen=0 > $L/probe_sliced.txt 2>&1; cut -c1-220 $L/probe_sliced.txt
env $H timeout 60 python3 .dev/probe_tiledx.py 1024,2048,4097,6144,8192 overlapped=2 > $L/probe_head.txt 2>&1; cut -c1-220 $L/probe_head.txt
for i in 1 2; do
  env $H timeout 60 python3 .dev/graphed_nm.py head 2>&1 | grep graphed >> $L/ab_graphed.txt
  env $N timeout 60 python3 .dev/graphed_nm.py sliced 2>&1 | grep graphed >> $L/ab_graphed.txt
done; cut -c1-200 $L/ab_graphed.txt; echo "at $(el) s"
tar czf $OUT/logs16.tgz -C $OUT logs
( env $H timeout 200 python3 $E/dump_rl_kernel_bits.py dump /tmp/bits_head.pt > $L/bits_head.txt 2>&1 ) &
( env $N timeout 200 python3 $E/dump_rl_kernel_bits.py dump /tmp/bits_new.pt > $L/bits.txt 2>&1 ) &
timeout 280 python3 -m pytest -q -p no:cacheprovider tests/cuda > $L/cuda_tests.log 2>&1; wait
python3 $E/dump_rl_kernel_bits.py compare /tmp/bits_head.pt /tmp/bits_new.pt >> $L/bits.txt 2>&1; echo "compare: exit $?" >> $L/bits.txt
tail -n 2 $L/bits.txt; tail -n 3 $L/cuda_tests.log; echo "at $(el) s"
tar czf $OUT/logs16.tgz -C $OUT logs
if [ $(el) -lt 420 ]; then
  timeout 70 python3 benchmarks/bench_row_ops.py --rows 4097 --out $L/bench_row_ops.s4097.json > $L/bench_row_ops.s4097.txt 2>&1
  grep "copy:\|graphed" $L/bench_row_ops.s4097.txt | cut -c1-110
fi
echo "done at $(el) s"
tar czf $OUT/logs16.tgz -C $OUT logs
