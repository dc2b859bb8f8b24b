#!/usr/bin/env bash
# 2026-12-05 (eleventh session), about 3 minutes, no carry: call 3's attempt again, to part the
# claims' cost from the sides' effect: variant 7 with this machine's sides (sm_sides.py) and with
# two maps that ignore them (alternating by %smid, and the true map shuffled; both 66/66), against
# variant 2 of the same build; probe_cols.py twice per map, then ncu's fabric and DRAM figures.
set -u
export PYTHONPATH=$PWD
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; E=docs/evidence/h200; T0=$(date +%s)
keep() { echo "$1 at $(( $(date +%s) - T0 )) s"; }
trap 'cd $OUT && tar czf logs.tgz logs && rm -rf logs' EXIT
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
git apply $E/rows_fabric/call3_sides_attempt.diff 2>/dev/null || patch -s -p1 < $E/rows_fabric/call3_sides_attempt.diff || exit 3
T="PYTHONSAFEPATH=1 RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_sides11c"
( env $T MAX_JOBS=12 python3 -c 'from rl_kernel_ops import _build; _build.load_extension()' > $L/build.log 2>&1 ) &
timeout 120 python3 $E/rows_fabric/sm_sides.py $L/sm_sides.json $L/sides.txt > $L/sm_sides.txt 2>&1; echo "probe exit $?"
wait; grep -iE " error" $L/build.log | head -3; grep -E "side by smid|singular|cold read" $L/sm_sides.txt; keep built
TRUE=$(cat $L/sides.txt)
ALT=$(python3 -c "print(''.join(str(i % 2) for i in range($(echo -n $TRUE | wc -c))))")
SHUF=$(python3 -c "import random; s=list('$TRUE'); random.Random(7).shuffle(s); print(''.join(s))")
printf 'true %s\nalternating %s\nshuffled %s\n' $TRUE $ALT $SHUF | tee $L/maps.txt
for r in 1 2; do for m in TRUE ALT SHUF; do
  echo "map $m round $r" >> $L/probe.txt
  env $T RLK_SIDES=${!m} timeout 60 python3 $E/rows_cols/probe_cols.py 2048,3000,4097 overlapped=2,sides=7 >> $L/probe.txt 2>&1
done; done
grep -vE "^rl_kernel_ops from" $L/probe.txt | cut -c1-120; keep probe
M=gpu__time_duration.sum,dram__bytes_read.sum,lts__ltcfabric2ltc_cycles_active.avg.pct_of_peak_sustained_elapsed,lts__t_sectors_srcunit_tex_op_read.sum
for m in TRUE SHUF; do
  env $T RLK_SIDES=${!m} timeout 60 ncu --clock-control none --metrics $M -k regex:"overlap" --launch-skip 2 --launch-count 2 \
    python3 $E/rows_hints/ncu_l2.py 4097 2,7 > $L/ncu_$m.txt 2>&1; echo "ncu $m exit $?"
  grep -E "duration|dram__|lts__" $L/ncu_$m.txt | sed -e 's/ \{8,\}/  /g' | cut -c1-100
done; keep ncu
