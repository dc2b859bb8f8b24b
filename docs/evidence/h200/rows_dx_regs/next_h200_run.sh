#!/usr/bin/env bash
# Prepared 2026-12-05 (seventh session), for an H200, not run: HEAD ("head") against HEAD +
# dx_recompute.diff ("tree": the dx blocks compute a again instead of keeping it in shared memory,
# where no ring is reserved) and the tree + next_fwd_noalloc_attempt.diff ("fwdna": the forward
# loads x L1::no_allocate, so that L1 keeps w and the table rows). Graphed fwd+bwd at S = 2048 to
# 5000, then bench_row_ops at S = 4097 for the tree and fwdna.
# Run as `bash docs/evidence/h200/rows_dx_regs/next_h200_run.sh` (no carry). About 6 minutes of command.
set -u
export PYTHONPATH=$PWD
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; D=docs/evidence/h200/rows_dx_regs; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
mkdir -p /tmp/head /tmp/fwdna && cp -r rl_kernel_ops /tmp/head/ && git apply $D/dx_recompute.diff || exit 3
cp -r rl_kernel_ops /tmp/fwdna/ && (cd /tmp/fwdna && patch -s -p1 < $OLDPWD/$D/next_fwd_noalloc_attempt.diff) || exit 3
build='from rl_kernel_ops import _build; _build.load_extension()'
H="PYTHONSAFEPATH=1 PYTHONPATH=/tmp/head:$PYTHONPATH RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_head"
F="PYTHONSAFEPATH=1 PYTHONPATH=/tmp/fwdna:$PYTHONPATH RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_fwdna"
T="PYTHONSAFEPATH=1"
( env $H MAX_JOBS=5 python3 -c "$build" > $L/build_head.log 2>&1 ) &
( env $F MAX_JOBS=5 python3 -c "$build" > $L/build_fwdna.log 2>&1 ) &
( env $T MAX_JOBS=6 python3 -c "$build" > $L/build.log 2>&1 ) ; wait
echo "built at $(el) s"; grep -iE " error" $L/build*.log | head -5
for S in 4097 3000 4097 2500 3500 5000 2048 4097; do
  for v in head tree fwdna; do
    case $v in head) E=$H;; fwdna) E=$F;; *) E=$T;; esac
    env $E timeout 40 python3 docs/evidence/h200/rows_fold/fwd_ab.py $v $S 2>&1 | grep graphed >> $L/fwd_ab.txt
  done
done; cut -c1-150 $L/fwd_ab.txt; echo "ab at $(el) s"
timeout 100 python3 benchmarks/bench_row_ops.py --rows 4097 --out $L/bench_row_ops.s4097.json > $L/bench_row_ops.s4097.txt 2>&1
PYTHONPATH=/tmp/fwdna:$PYTHONPATH RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_fwdna timeout 100 python3 benchmarks/bench_row_ops.py --rows 4097 --out $L/fwdna_bench_row_ops.s4097.json > $L/fwdna_bench_row_ops.s4097.txt 2>&1
grep -E "graphed|copy" $L/bench_row_ops.s4097.txt $L/fwdna_bench_row_ops.s4097.txt | cut -c1-120
echo "done at $(el) s"
