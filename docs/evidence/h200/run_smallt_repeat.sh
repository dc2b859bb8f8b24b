#!/usr/bin/env bash
# A repeat of the small-T forward's timings on a fresh H200 (repository root; $OUT from the device
# tool): cold build, bench_gemm_ops.py for adaln_projection at T = 1, 3, 8, 64, 256, 2048, 8192,
# check_adaln_smallt.py. With EXP_TREE=DIR (a directory holding another rl_kernel_ops package),
# that tree is built beside it, in parallel, and check_adaln_smallt.py --variants 0,1 runs on it
# too, for a side-by-side look at an experiment. Summary last.
OUT=${OUT:-/tmp/out_repeat}; mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} RL_KERNEL_OPS_BUILD_DIR=${RL_KERNEL_OPS_BUILD_DIR:-/tmp/rlk} PYTHONUNBUFFERED=1
E=docs/evidence/h200; nvidia-smi -L
build='from rl_kernel_ops import _build; _build.load_extension()'
if [ -n "${EXP_TREE:-}" ]; then
  PYTHONPATH=$EXP_TREE:$PYTHONPATH RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_exp python3 -c "$build" > $OUT/build_exp.log 2>&1 & exp_pid=$!
fi
( time python3 -c "$build" ) > $OUT/build.log 2>&1; [ -n "${EXP_TREE:-}" ] && wait $exp_pid
timeout 150 python3 benchmarks/bench_gemm_ops.py --ops adaln_projection --sizes 1,3,8,64,256,2048,8192 --warmup 5 --iters 20 --out $OUT/bench_repeat.json > $OUT/bench_repeat.log 2>&1
timeout 100 python3 $E/check_adaln_smallt.py --json $OUT/check_smallt_repeat.json > $OUT/check_smallt_repeat.log 2>&1
if [ -n "${EXP_TREE:-}" ]; then
  PYTHONPATH=$EXP_TREE:$PYTHONPATH RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_exp timeout 100 python3 $E/check_adaln_smallt.py --variants 0,1 --json $OUT/check_smallt_exp.json > $OUT/check_smallt_exp.log 2>&1
fi
echo "== SUMMARY"; tail -3 $OUT/build.log; cat $OUT/bench_repeat.log; cat $OUT/check_smallt_repeat.log | cut -c1-200
[ -n "${EXP_TREE:-}" ] && { echo "== EXP"; cat $OUT/check_smallt_exp.log | cut -c1-200; }
