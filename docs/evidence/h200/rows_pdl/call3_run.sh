#!/usr/bin/env bash
# On an H200 only (else it says so and stops): HEAD against HEAD + ../rows_dx_regs/dx_recompute.diff,
# bench_row_ops --rows 4097 for each, in one call of at most about 2 minutes.
set -u
export PYTHONPATH=$PWD
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; T0=$(date +%s)
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
grep -q H200 $L/machine.txt || { echo "not an H200"; exit 0; }
mkdir -p /tmp/head && cp -r rl_kernel_ops /tmp/head/ || exit 3
git apply docs/evidence/h200/rows_dx_regs/dx_recompute.diff || exit 3
build='from rl_kernel_ops import _build; _build.load_extension()'
( env PYTHONSAFEPATH=1 PYTHONPATH=/tmp/head:$PWD RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_head MAX_JOBS=8 python3 -c "$build" > $L/build_head.log 2>&1 ) &
( env PYTHONSAFEPATH=1 MAX_JOBS=8 python3 -c "$build" > $L/build.log 2>&1 ) ; wait
echo "built at $(( $(date +%s) - T0 )) s"
bench() {  # name, then the environment's assignments
  local n=$1; shift
  env "$@" timeout 45 python3 benchmarks/bench_row_ops.py --rows 4097 --out $L/bench_row_ops.$n.s4097.json > $L/bench_row_ops.$n.s4097.txt 2>&1
}
bench tree; bench head PYTHONPATH=/tmp/head:$PWD RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_head
grep -H -E "copy:|norm_modulate +graphed" $L/bench_row_ops.*.txt | cut -c1-150; echo "done at $(( $(date +%s) - T0 )) s"
