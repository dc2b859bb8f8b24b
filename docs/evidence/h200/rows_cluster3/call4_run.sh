#!/usr/bin/env bash
# 2026-12-05 (tenth session): call3_run.sh for call4_pairs_attempt.diff (call 3's kernel whose
# chain and dx groups take two rows at a time: both rows' loads and sums interleaved, the last
# block's two trees behind one barrier), against HEAD (94a3cff).
set -u
export PYTHONPATH=$PWD
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; E=docs/evidence/h200; T0=$(date +%s)
keep() { echo "$1 at $(( $(date +%s) - T0 )) s"; }
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
mkdir -p /tmp/head && cp -r rl_kernel_ops /tmp/head/ || exit 3
git apply $E/rows_cluster3/call4_pairs_attempt.diff 2>/dev/null || patch -s -p1 < $E/rows_cluster3/call4_pairs_attempt.diff || exit 3
build='from rl_kernel_ops import _build; _build.load_extension()'
H="PYTHONSAFEPATH=1 PYTHONPATH=/tmp/head:$PYTHONPATH RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_head10"
T="PYTHONSAFEPATH=1 RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_pairs10"
( env $H MAX_JOBS=8 python3 -c "$build" > $L/build_head.log 2>&1 ) &
( env $T MAX_JOBS=8 python3 -c "$build" > $L/build.log 2>&1 ) ; wait
grep -iE " error" $L/build*.log | head -5; keep built
env $T timeout 120 python3 $E/rows_cluster3/check_cluster.py > $L/check_cluster.txt 2>&1; echo "check exit $?"
tail -2 $L/check_cluster.txt; keep check
grep -q "^0 shapes differ" $L/check_cluster.txt || { echo "bits differ or the check failed: stop"; tar czf $OUT/logs.tgz -C $OUT logs; exit 1; }
env $T timeout 90 python3 $E/rows_cols/probe_cols.py 257,1024,2048,3000,4097,6144 overlapped=2,clustered=4 > $L/probe.txt 2>&1
cut -c1-150 $L/probe.txt; keep probe
env $T timeout 90 python3 $E/rows_cluster3/trace_cluster.py 1024,4097 > $L/trace.txt 2>&1; echo "trace exit $?"
grep -E "^S=|Error" $L/trace.txt | cut -c1-400
for S in 4097 4097; do
  env $H timeout 40 python3 $E/rows_fold/fwd_ab.py head $S 2>&1 | grep graphed >> $L/fwd_ab.txt
  env $T RLK_CL=1 timeout 40 python3 $E/rows_fold/fwd_ab.py cl $S 2>&1 | grep graphed >> $L/fwd_ab.txt
done
cut -c1-160 $L/fwd_ab.txt; keep ab
env RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_pairs10 RLK_CL=1 timeout 90 python3 benchmarks/bench_row_ops.py --rows 4097 --out $L/bench_row_ops.cl.s4097.json > $L/bench_row_ops.cl.s4097.txt 2>&1
grep -E "copy:|norm_modulate +graphed" $L/bench_row_ops.cl.s4097.txt | cut -c1-120
tar czf $OUT/logs.tgz -C $OUT logs; rm -f $L/build*.log; keep done
