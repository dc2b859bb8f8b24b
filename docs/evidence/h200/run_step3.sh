#!/usr/bin/env bash
# Issue 13 step 3 on the H200, one device call (repository root; $OUT from the device tool):
# build, cuobjdump HGMMA count, the bitwise/invariance/timing check of the wgmma backward against
# mma.sync, the adaln benchmark, then (if every check passed) tests/cuda,
# all with the default kernels (wgmma forward and backward on sm_90). Prints a summary last.
# About 4-5 minutes after a cold start.
OUT=${OUT:-/tmp/out_step3}; mkdir -p "$OUT"
export PYTHONPATH=$PWD RL_KERNEL_OPS_BUILD_DIR=${RL_KERNEL_OPS_BUILD_DIR:-/tmp/rlk} PYTHONUNBUFFERED=1; E=docs/evidence/h200; nvidia-smi -L
( time python3 -c "from rl_kernel_ops import _build; _build.load_extension()" ) > $OUT/build_step3.log 2>&1; tail -4 $OUT/build_step3.log
cuobjdump -sass $RL_KERNEL_OPS_BUILD_DIR/*/rl_kernel_ops_cuda.so | grep -o "HGMMA[.A-Za-z0-9x]*\|UTMALDG[.A-Z0-9]*" | sort | uniq -c >> $OUT/build_step3.log
timeout 150 python3 $E/check_adaln_wgmma_bwd_step3.py --json $OUT/check_bwd_step3.json > $OUT/check_bwd_step3.log 2>&1; rc=$?; echo "check rc=$rc"
timeout 110 python3 benchmarks/bench_gemm_ops.py --ops adaln_projection --sizes 1,64,256,2048,8192 --warmup 5 --iters 20 --out $OUT/bench_step3.json > $OUT/bench_step3.log 2>&1
if grep -q '"all_checks_pass": true' $OUT/check_bwd_step3.json 2>/dev/null; then timeout 200 python3 -m pytest -q -p no:cacheprovider tests/cuda > $OUT/cuda_tests_step3.log 2>&1; fi
echo "== SUMMARY"; tail -8 $OUT/build_step3.log; grep -v "^T=" $OUT/check_bwd_step3.log | tail -12; grep "^T=" $OUT/check_bwd_step3.log | cut -c1-160; tail -12 $OUT/bench_step3.log; tail -4 $OUT/cuda_tests_step3.log
