#!/usr/bin/env bash
# Issue 13 step 3 on the H200, one device call (repository root; $OUT from the device tool):
# build, cuobjdump HGMMA count, the bitwise/invariance/timing check of the wgmma backward against
# mma.sync, then (if the kernels ran) the adaln benchmark and (if every check passed) tests/cuda with
# the wgmma backward switched on. Prints a summary last. About 3-4 minutes after a cold start.
OUT=${OUT:-/tmp/out_step3}; mkdir -p "$OUT"
export PYTHONPATH=$PWD RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk PYTHONUNBUFFERED=1; E=docs/evidence/h200; nvidia-smi -L
( time python3 -c "from rl_kernel_ops import _build; _build.load_extension()" ) > $OUT/build_step3.log 2>&1; tail -4 $OUT/build_step3.log
cuobjdump -sass /tmp/rlk/*/rl_kernel_ops_cuda.so | grep -o "HGMMA[.A-Za-z0-9x]*\|UTMALDG[.A-Z0-9]*" | sort | uniq -c >> $OUT/build_step3.log
timeout 120 python3 $E/check_adaln_wgmma_bwd_step3.py --json $OUT/check_bwd_step3.json > $OUT/check_bwd_step3.log 2>&1; rc=$?; echo "check rc=$rc"
V=0; grep -q "desc_swap=1" $OUT/check_bwd_step3.log && V=16; export RL_KERNEL_OPS_ADALN_WGMMA_BWD=1 RL_KERNEL_OPS_ADALN_WGMMA_BWD_VARIANT=$V
if [ $rc -le 1 ]; then timeout 110 python3 benchmarks/bench_gemm_ops.py --ops adaln_projection --sizes 1,64,256,2048,8192 --warmup 5 --iters 20 --out $OUT/bench_step3.json > $OUT/bench_step3.log 2>&1; fi
if [ $rc -eq 0 ]; then timeout 130 python3 -m pytest -q -p no:cacheprovider tests/cuda/test_rl_kernel_gemm.py > $OUT/cuda_tests_step3.log 2>&1; fi
echo "== SUMMARY"; cat $OUT/build_step3.log | tail -8; grep -v "^T=" $OUT/check_bwd_step3.log | tail -22; grep "^T=" $OUT/check_bwd_step3.log | cut -c1-160; cat $OUT/bench_step3.log; tail -4 $OUT/cuda_tests_step3.log
