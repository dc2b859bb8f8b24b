#!/usr/bin/env bash
# 2026-12-05 (eleventh session), about 7 minutes, no carry: HEAD (357382a) against HEAD +
# call3_sides_attempt.diff: the overlapped backward's blocks claim their items by L2 side (variant
# 7; RLK_SIDES for variant 0): tiles alternate between the sides, each block takes the next item
# of its SM's side (partials, then dx rows by position), so both reads of a row go through one L2
# partition (call 2: a far read leaves a copy in the reader's partition). The sides come from
# sm_sides.py on this machine. Bits (../rows_mc/check_variants.py, the sha256 of every output and
# gradient), times (../rows_cols/probe_cols.py, graphed ../rows_fold/fwd_ab.py), ncu's L2 fabric
# and DRAM figures, bench_row_ops --rows 4097.
set -u
export PYTHONPATH=$PWD
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; E=docs/evidence/h200; T0=$(date +%s)
keep() { echo "$1 at $(( $(date +%s) - T0 )) s"; }
trap 'cd $OUT && tar czf logs.tgz logs && rm -rf logs' EXIT
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
mkdir -p /tmp/head && cp -r rl_kernel_ops /tmp/head/ || exit 3
git apply $E/rows_fabric/call3_sides_attempt.diff 2>/dev/null || patch -s -p1 < $E/rows_fabric/call3_sides_attempt.diff || exit 3
build='from rl_kernel_ops import _build; _build.load_extension()'
H="PYTHONSAFEPATH=1 PYTHONPATH=/tmp/head:$PYTHONPATH RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_head11b"
( env $H MAX_JOBS=8 python3 -c "$build" > $L/build_head.log 2>&1 ) &
( env PYTHONSAFEPATH=1 RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_sides11 MAX_JOBS=8 python3 -c "$build" > $L/build.log 2>&1 ) &
timeout 120 python3 $E/rows_fabric/sm_sides.py $L/sm_sides.json $L/sides.txt > $L/sm_sides.txt 2>&1; echo "probe exit $?"
wait
grep -iE " error" $L/build*.log | head -5; tail -12 $L/sm_sides.txt | cut -c1-200; keep built
export RLK_SIDES=$(cat $L/sides.txt)
T="PYTHONSAFEPATH=1 RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_sides11"
env $T timeout 150 python3 $E/rows_mc/check_variants.py 7 > $L/check_variants.txt 2>&1; echo "check exit $?"
grep -c "DIFFERENT" $L/check_variants.txt; tail -1 $L/check_variants.txt; keep check
grep -q "^0 shapes differ" $L/check_variants.txt || { echo "bits differ or the check failed: stop"; exit 1; }
env $T timeout 90 python3 $E/rows_cols/probe_cols.py 257,1024,2048,3000,4097,6144 overlapped=2,sides=7 > $L/probe.txt 2>&1
cut -c1-170 $L/probe.txt; keep probe
ab() { env $1 timeout 40 python3 $E/rows_fold/fwd_ab.py $2 $3 2>&1 | grep graphed >> $L/fwd_ab.txt; }
for S in 4097 4097; do ab "$H RLK_SIDES=" head $S; ab "$T" sides $S; done
cut -c1-200 $L/fwd_ab.txt; keep ab
M=gpu__time_duration.sum,dram__bytes_read.sum,lts__ltcfabric2ltc_cycles_active.avg.pct_of_peak_sustained_elapsed,lts__t_sectors_srcunit_tex_op_read.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum
env $T timeout 100 ncu --clock-control none --metrics $M -k regex:"overlap" --launch-skip 2 --launch-count 2 \
  python3 $E/rows_hints/ncu_l2.py 4097 2,7 > $L/ncu.txt 2>&1; echo "ncu exit $?"
grep -E "overlap_kernel|duration|dram__|lts__|inst_executed" $L/ncu.txt | sed -e 's/(const unsigned short.*//' -e 's/ \{8,\}/  /g' | cut -c1-100
keep ncu
env PYTHONPATH=/tmp/head:$PYTHONPATH RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_head11b RLK_SIDES= timeout 90 python3 benchmarks/bench_row_ops.py --rows 4097 --out $L/bench_row_ops.head.s4097.json > $L/bench_row_ops.head.s4097.txt 2>&1
env RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_sides11 timeout 90 python3 benchmarks/bench_row_ops.py --rows 4097 --out $L/bench_row_ops.sides.s4097.json > $L/bench_row_ops.sides.s4097.txt 2>&1
for v in head sides; do echo $v; grep -E "copy:|norm_modulate +graphed" $L/bench_row_ops.$v.s4097.txt | cut -c1-120; done; keep bench
{ env $H RLK_SIDES= timeout 60 python3 $E/rows_dx_regs/grads_bits.py head; env $T timeout 60 python3 $E/rows_dx_regs/grads_bits.py sides; } > $L/grads_bits.txt 2>&1
cat $L/grads_bits.txt; keep bits
