#!/usr/bin/env bash
# Next session, first call. Apply .dev/sliced.diff to the working tree FIRST (git apply docs/evidence/h200/rows_reuse/sliced_corrected.diff),
# so the checkout carries the corrected sliced backward; .dev/head is 596550e's rl_kernel_ops.
# Guards: every step has a timeout well under the call's; the probe runs S = 64 (tiles of few rows) first.
set -u
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; E=docs/evidence/h200; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv | tee $L/machine.txt
git diff --stat | tail -1 | tee $L/tree.txt
build='import rl_kernel_ops; print(rl_kernel_ops.__file__); from rl_kernel_ops import _build; _build.load_extension()'
H="PYTHONSAFEPATH=1 PYTHONPATH=.dev/head:$PYTHONPATH RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_head"
N="PYTHONSAFEPATH=1"
( env $H MAX_JOBS=8 python3 -c "$build" > $L/build_head.log 2>&1 ) &
( time env $N MAX_JOBS=8 python3 -c "$build" ) > $L/build_new.log 2>&1; wait
echo "built at $(el) s"; head -1 $L/build_new.log $L/build_head.log; grep -i "error" $L/build_new.log | head -5
env $N timeout 40 python3 .dev/probe_tiledx.py 64,300 sliced=2 > $L/probe_small.txt 2>&1; echo "small: exit $?"; cut -c1-200 $L/probe_small.txt
env $N timeout 60 python3 .dev/probe_tiledx.py 1024,2048,4097,6144,8192 sliced=2,fused=1,chosen=0 > $L/probe_sliced.txt 2>&1; cut -c1-220 $L/probe_sliced.txt
env $H timeout 40 python3 .dev/probe_tiledx.py 1024,2048,4097,6144,8192 overlapped=2 > $L/probe_head.txt 2>&1; cut -c1-220 $L/probe_head.txt
for i in 1 2; do
  env $H timeout 30 python3 .dev/graphed_nm.py head 2>&1 | grep graphed >> $L/ab_graphed.txt
  env $N timeout 30 python3 .dev/graphed_nm.py sliced 2>&1 | grep graphed >> $L/ab_graphed.txt
done; cut -c1-200 $L/ab_graphed.txt; echo "at $(el) s"
env $N timeout 60 ncu --metrics gpu__time_duration.sum,dram__bytes_read.sum,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active \
  -k regex:"sliced" python3 .dev/graphed_nm.py --once > $L/ncu_sliced.txt 2>&1; grep -E "duration|dram__|warps_active|issue" $L/ncu_sliced.txt | tail -4
tar czf $OUT/logs.tgz -C $OUT logs
( env $H timeout 150 python3 $E/dump_rl_kernel_bits.py dump /tmp/bits_head.pt > $L/bits_head.txt 2>&1 ) &
( env $N timeout 150 python3 $E/dump_rl_kernel_bits.py dump /tmp/bits_new.pt > $L/bits.txt 2>&1 ) &
wait
env $N timeout 60 python3 $E/dump_rl_kernel_bits.py compare /tmp/bits_head.pt /tmp/bits_new.pt >> $L/bits.txt 2>&1; echo "compare: exit $?" >> $L/bits.txt
tail -n 2 $L/bits.txt; echo "at $(el) s"
tar czf $OUT/logs.tgz -C $OUT logs
timeout 250 python3 -m pytest -q -p no:cacheprovider -x tests/cuda > $L/cuda_tests.log 2>&1; tail -n 3 $L/cuda_tests.log
echo "done at $(el) s"
tar czf $OUT/logs.tgz -C $OUT logs
