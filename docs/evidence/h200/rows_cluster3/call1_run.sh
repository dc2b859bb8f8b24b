#!/usr/bin/env bash
# 2026-12-05 (tenth session), about 6 minutes, no carry: HEAD (94a3cff) against HEAD +
# call1_cluster3_attempt.diff: the clustered backward (variant 4; RLK_CL=1 makes variant 0 take it
# where it would take the overlapped kernel): one cluster of ceil(H / 8 / 256) blocks per tile (3
# at H = 5376), block m owning a slice of at most 256 8-column vectors, its thread t those of the
# dx kernel's thread t (at most two), the dx chain handed from block to block by st.async, a ring
# of up to 16 slices per block. Bits (check_cluster.py against the split pair; the sha256 of every
# output and gradient, ../rows_dx_regs/grads_bits.py), times (../rows_cols/probe_cols.py, graphed
# fwd+bwd ../rows_fold/fwd_ab.py), bench_row_ops --rows 4097 for both.
set -u
export PYTHONPATH=$PWD
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; E=docs/evidence/h200; T0=$(date +%s)
keep() { echo "$1 at $(( $(date +%s) - T0 )) s"; }
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
mkdir -p /tmp/head && cp -r rl_kernel_ops /tmp/head/ || exit 3
git apply $E/rows_cluster3/call1_cluster3_attempt.diff 2>/dev/null || patch -s -p1 < $E/rows_cluster3/call1_cluster3_attempt.diff || exit 3
build='from rl_kernel_ops import _build; _build.load_extension()'
H="PYTHONSAFEPATH=1 PYTHONPATH=/tmp/head:$PYTHONPATH RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_head10"
T="PYTHONSAFEPATH=1 RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_cl10"
( env $H MAX_JOBS=8 python3 -c "$build" > $L/build_head.log 2>&1 ) &
( env $T MAX_JOBS=8 python3 -c "$build" > $L/build.log 2>&1 ) ; wait
grep -iE " error" $L/build*.log | head -5; keep built
env $T timeout 120 python3 $E/rows_cluster3/check_cluster.py > $L/check_cluster.txt 2>&1; echo "check exit $?"
tail -4 $L/check_cluster.txt; keep check
grep -q "^0 shapes differ" $L/check_cluster.txt || { echo "bits differ or the check failed: stop"; exit 1; }
env $T timeout 90 python3 $E/rows_cols/probe_cols.py 257,1024,2048,3000,4097,6144 overlapped=2,clustered=4 > $L/probe.txt 2>&1
cut -c1-150 $L/probe.txt; keep probe
{ env $H timeout 60 python3 $E/rows_dx_regs/grads_bits.py head; env $T RLK_CL=1 timeout 60 python3 $E/rows_dx_regs/grads_bits.py cl; } > $L/grads_bits.txt 2>&1
cat $L/grads_bits.txt; keep bits
ab() { env $1 timeout 40 python3 $E/rows_fold/fwd_ab.py $2 $3 2>&1 | grep graphed >> $L/fwd_ab.txt; }
for S in 4097 4097 3000 2048; do ab "$H" head $S; ab "$T RLK_CL=1" cl $S; done
cut -c1-160 $L/fwd_ab.txt; keep ab
env PYTHONPATH=/tmp/head:$PYTHONPATH RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_head10 timeout 90 python3 benchmarks/bench_row_ops.py --rows 4097 --out $L/bench_row_ops.head.s4097.json > $L/bench_row_ops.head.s4097.txt 2>&1
env RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_cl10 RLK_CL=1 timeout 90 python3 benchmarks/bench_row_ops.py --rows 4097 --out $L/bench_row_ops.cl.s4097.json > $L/bench_row_ops.cl.s4097.txt 2>&1
for v in head cl; do echo $v; grep -E "copy:|norm_modulate +graphed" $L/bench_row_ops.$v.s4097.txt | cut -c1-120; done; keep bench
