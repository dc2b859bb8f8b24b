#!/usr/bin/env bash
# 2026-12-05 (eleventh session), on an H200 only (stops at once on any other GPU), about 4 minutes,
# no carry: calls 1, 3 and 4 where the item is judged. HEAD's kernels' lts__throughput breakdown
# (../rows_fabric/call1's metrics), the SM sides (sm_sides.py), then call3_sides_attempt.diff's
# variant 7 with the true map and a shuffled one against variant 2 (probe_cols.py, two rounds), and
# bench_row_ops --rows 4097 for HEAD.
set -u
export PYTHONPATH=$PWD
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; E=docs/evidence/h200; T0=$(date +%s)
keep() { echo "$1 at $(( $(date +%s) - T0 )) s"; }
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $OUT/machine.txt
grep -q H200 $OUT/machine.txt || { echo "not an H200: stop"; exit 0; }
trap 'cd $OUT && tar czf logs.tgz logs && rm -rf logs' EXIT
mkdir -p /tmp/head && cp -r rl_kernel_ops /tmp/head/ || exit 3
git apply $E/rows_fabric/call3_sides_attempt.diff 2>/dev/null || patch -s -p1 < $E/rows_fabric/call3_sides_attempt.diff || exit 3
build='from rl_kernel_ops import _build; _build.load_extension()'
H="PYTHONSAFEPATH=1 PYTHONPATH=/tmp/head:$PYTHONPATH RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_head11e"
T="PYTHONSAFEPATH=1 RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_sides11e"
( env $H MAX_JOBS=6 python3 -c "$build" > $L/build_head.log 2>&1 ) &
( env $T MAX_JOBS=6 python3 -c "$build" > $L/build.log 2>&1 ) &
timeout 120 python3 $E/rows_fabric/sm_sides.py $L/sm_sides.json $L/sides.txt > $L/sm_sides.txt 2>&1; echo "probe exit $?"
wait; grep -iE " error" $L/build*.log | head -3; grep -E "side by smid|singular|cold read|SM " $L/sm_sides.txt | cut -c1-200; keep built
M=breakdown:lts__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum
env $H timeout 120 ncu --clock-control none --metrics $M -k regex:"overlap|bwd_dx|partials|fwd_kernel" --launch-count 4 \
  python3 $E/rows_hints/ncu_l2.py 4097 2 > $L/ncu_breakdown.txt 2>&1; echo "ncu exit $?"
grep -E "void|ltcfabric|lts__t_sectors.avg|dram__|duration" $L/ncu_breakdown.txt | sed -e 's/(const unsigned short.*//' -e 's/ \{8,\}/  /g' | cut -c1-100; keep ncu
TRUE=$(cat $L/sides.txt)
SHUF=$(python3 -c "import random; s=list('$TRUE'); random.Random(7).shuffle(s); print(''.join(s))")
printf 'true %s\nshuffled %s\n' $TRUE $SHUF | tee $L/maps.txt
for r in 1 2; do for m in TRUE SHUF; do
  echo "map $m round $r" >> $L/probe.txt
  env $T RLK_SIDES=${!m} timeout 60 python3 $E/rows_cols/probe_cols.py 3000,4097 overlapped=2,sides=7 >> $L/probe.txt 2>&1
done; done
grep -vE "^rl_kernel_ops from" $L/probe.txt | cut -c1-120; keep probe
env PYTHONPATH=/tmp/head:$PYTHONPATH RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_head11e timeout 90 python3 benchmarks/bench_row_ops.py --rows 4097 --out $L/bench_row_ops.head.s4097.json > $L/bench_row_ops.head.s4097.txt 2>&1
grep -E "copy:|norm_modulate +graphed" $L/bench_row_ops.head.s4097.txt | cut -c1-120; keep bench
