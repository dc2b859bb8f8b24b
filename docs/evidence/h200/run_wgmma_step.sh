#!/usr/bin/env bash
# One step of issue 13 on the H200, one device call (repository root; $OUT from the device tool):
#   bash docs/evidence/h200/run_wgmma_step.sh STEP
# 1. cold build of rl_kernel_ops and the `cuobjdump -sass` counts of HGMMA and TMA instructions;
#    with OLD_TREE=DIR (a directory holding an earlier rl_kernel_ops package), that tree is built
#    beside it, in parallel;
# 2. check_adaln_wgmma_bwd.py: the wgmma backward against mma.sync, bitwise, batch invariance,
#    and the backward's times;
#    check_adaln_smallt.py: the forward's small-T kernels side by side (bits, batch invariance,
#    times, host launch time);
# 3. bench_gemm_ops.py for adaln_projection at T = $SIZES (default 1, 64, 256, 2048, 8192) against
#    cuBLAS;
# 4. with OLD_TREE: every rl_kernel output and gradient of every op (dump_rl_kernel_bits.py) from
#    both trees, compared bit for bit;
# 5. tests/cuda, if every check passed.
# CHECKS=0 leaves out steps 2 and 3 (the bit comparison and tests/cuda alone).
# The audit's own imports (pydantic, for the bit dump) come from the caller's PYTHONPATH, kept
# after the repository (the wheelhouse in /tmp/site, see README "GPU evidence").
# All with the default kernels (wgmma forward and backward on sm_90). Logs are named after STEP;
# the summary is printed last. About 5-6 minutes after a cold start.
step=${1:?step name, e.g. step4}
OUT=${OUT:-/tmp/out_$step}; mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} RL_KERNEL_OPS_BUILD_DIR=${RL_KERNEL_OPS_BUILD_DIR:-/tmp/rlk} PYTHONUNBUFFERED=1
E=docs/evidence/h200; nvidia-smi -L
build='from rl_kernel_ops import _build; _build.load_extension()'
if [ -n "${OLD_TREE:-}" ]; then
  ( PYTHONPATH=$OLD_TREE:$PYTHONPATH RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_old python3 -c "$build" > $OUT/build_old_$step.log 2>&1 ) &
fi
( time python3 -c "$build" ) > $OUT/build_$step.log 2>&1; wait
cuobjdump -sass $RL_KERNEL_OPS_BUILD_DIR/*/rl_kernel_ops_cuda.so | grep -o "HGMMA[.A-Za-z0-9x]*\|UTM[A-Z]*[.A-Z0-9]*" | sort | uniq -c >> $OUT/build_$step.log
checks_ok=1
if [ "${CHECKS:-1}" != 0 ]; then
  timeout 150 python3 $E/check_adaln_wgmma_bwd.py --json $OUT/check_bwd_$step.json > $OUT/check_bwd_$step.log 2>&1; echo "check rc=$?"
  timeout 120 python3 $E/check_adaln_smallt.py --json $OUT/check_smallt_$step.json > $OUT/check_smallt_$step.log 2>&1; smallt_rc=$?
  timeout 240 python3 benchmarks/bench_gemm_ops.py --ops adaln_projection --sizes ${SIZES:-1,64,256,2048,8192} --out $OUT/bench_$step.json > $OUT/bench_$step.log 2>&1
  grep -q '"all_checks_pass": true' $OUT/check_bwd_$step.json 2>/dev/null && [ "$smallt_rc" = 0 ] || checks_ok=0
fi
bits_rc=none
if [ -n "${OLD_TREE:-}" ]; then
  # 132 tensors now, both dumps at once; a dump cut by its timeout prints nothing, so each one's
  # exit status is kept
  ( PYTHONPATH=$OLD_TREE:$PYTHONPATH RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_old timeout 300 python3 $E/dump_rl_kernel_bits.py dump /tmp/bits_old.pt > $OUT/bits_old_$step.txt 2>&1
    echo "old tree's dump: exit $?" >> $OUT/bits_old_$step.txt ) &
  timeout 300 python3 $E/dump_rl_kernel_bits.py dump /tmp/bits_new.pt > $OUT/bits_$step.txt 2>&1
  echo "new tree's dump: exit $?" >> $OUT/bits_$step.txt; wait; cat $OUT/bits_old_$step.txt >> $OUT/bits_$step.txt
  python3 $E/dump_rl_kernel_bits.py compare /tmp/bits_old.pt /tmp/bits_new.pt >> $OUT/bits_$step.txt 2>&1; bits_rc=$?
fi
if [ "$checks_ok" = 1 ] && [ "$bits_rc" != 1 ]; then
  timeout ${TESTS_TIMEOUT:-220} python3 -m pytest -q -p no:cacheprovider tests/cuda > $OUT/cuda_tests_$step.log 2>&1
fi
echo "== SUMMARY"; tail -8 $OUT/build_$step.log; grep -v "^T=" $OUT/check_bwd_$step.log | tail -12
grep "^T=" $OUT/check_bwd_$step.log | cut -c1-160; grep -v "^  v\|^T=" $OUT/check_smallt_$step.log | cut -c1-240
grep "^T=\|^  v0\|^  wrapper\|^  fn_v1\|^  cublas" $OUT/check_smallt_$step.log; tail -12 $OUT/bench_$step.log
echo "bits: rc=$bits_rc $(tail -1 $OUT/bits_$step.txt 2>/dev/null)"; tail -4 $OUT/cuda_tests_$step.log 2>/dev/null
