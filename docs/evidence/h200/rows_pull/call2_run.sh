#!/usr/bin/env bash
# 2026-12-05 (twelfth session), about 6 minutes, no carry: call1_run.sh with call2_pull_attempt.diff,
# call 1's kernel changed where call 1 showed it waiting: w and bf16(1 + scale) in shared memory as
# in the fused kernel (call 1 read them from global memory in dx's loop, one miss after another),
# so the ring has 2 slots instead of 3; the loader warp's lane 1 tells the blocks of each landed row
# while lane 0 refills (call 1's single lane told of row i + 1 only after row i's slot was free).
set -u
export PYTHONPATH=$PWD
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; E=docs/evidence/h200; T0=$(date +%s)
keep() { echo "$1 at $(( $(date +%s) - T0 )) s"; }
trap 'cd $OUT && tar czf logs.tgz logs && rm -rf logs' EXIT
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
mkdir -p /tmp/head && cp -r rl_kernel_ops /tmp/head/ || exit 3
git apply $E/rows_pull/call2_pull_attempt.diff 2>/dev/null || patch -s -p1 < $E/rows_pull/call2_pull_attempt.diff || exit 3
build='from rl_kernel_ops import _build; _build.load_extension()'
H="PYTHONSAFEPATH=1 PYTHONPATH=/tmp/head:$PYTHONPATH RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_head12"
T="PYTHONSAFEPATH=1 RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_pull12b"
( env $H MAX_JOBS=8 python3 -c "$build" > $L/build_head.log 2>&1 ) &
( env $T MAX_JOBS=8 python3 -c "$build" > $L/build.log 2>&1 ) ; wait
grep -iE " error" $L/build*.log | head -5; keep built
env $T timeout 150 python3 $E/rows_mc/check_variants.py 4 > $L/check_variants.txt 2>&1; echo "check exit $?"
grep -c "DIFFERENT" $L/check_variants.txt; tail -3 $L/check_variants.txt | cut -c1-150; keep check
grep -q "^0 shapes differ" $L/check_variants.txt || { echo "bits differ or the check failed: stop"; exit 1; }
env $T timeout 90 python3 $E/rows_cols/probe_cols.py 257,1024,2048,3000,4097,6144 overlapped=2,pull=4 > $L/probe.txt 2>&1
cut -c1-170 $L/probe.txt; keep probe
ab() { env $1 timeout 40 python3 $E/rows_fold/fwd_ab.py $2 $3 2>&1 | grep graphed >> $L/fwd_ab.txt; }
for S in 4097 4097; do ab "$H" head $S; ab "$T RLK_PULL=1" pull $S; done
cut -c1-200 $L/fwd_ab.txt; keep ab
env PYTHONPATH=/tmp/head:$PYTHONPATH RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_head12 timeout 90 python3 benchmarks/bench_row_ops.py --rows 4097 --out $L/bench_row_ops.head.s4097.json > $L/bench_row_ops.head.s4097.txt 2>&1
env RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_pull12b RLK_PULL=1 timeout 90 python3 benchmarks/bench_row_ops.py --rows 4097 --out $L/bench_row_ops.pull.s4097.json > $L/bench_row_ops.pull.s4097.txt 2>&1
for v in head pull; do echo $v; grep -E "copy:|norm_modulate +graphed" $L/bench_row_ops.$v.s4097.txt | cut -c1-120; done; keep bench
{ env $H timeout 60 python3 $E/rows_dx_regs/grads_bits.py head; env $T RLK_PULL=1 timeout 60 python3 $E/rows_dx_regs/grads_bits.py pull; } > $L/grads_bits.txt 2>&1
cat $L/grads_bits.txt; keep bits
M=breakdown:lts__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active
env $T timeout 120 ncu --clock-control none --metrics $M -k regex:"overlap|pull" --launch-skip 2 --launch-count 2 \
  python3 $E/rows_hints/ncu_l2.py 4097 2,4 > $L/ncu.txt 2>&1; echo "ncu exit $?"
grep -E "void|ltcfabric|dram__|duration|inst_executed|issue_active|warps_active" $L/ncu.txt | sed -e 's/(const unsigned short.*//' -e 's/ \{8,\}/  /g' | cut -c1-100
keep ncu
