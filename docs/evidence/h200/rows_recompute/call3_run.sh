#!/usr/bin/env bash
# 2026-12-05 (ninth session), about 5 minutes, no carry: HEAD (4966ab4) against HEAD +
# call3_minblocks_attempt.diff, whose RLK_OVL_MB (6, 7, 8) sets the overlapped kernel's minimum
# blocks per SM where its partial blocks use no ring (its dx blocks then reserve no shared memory,
# so registers alone bound them: 80 registers, 6 blocks; 7 and 8 spill 60 and 116 bytes in a compile
# on the CPU machine); the ring branch becomes `if constexpr`. One sha256 of every output and
# gradient per setting (../rows_dx_regs/grads_bits.py), graphed fwd+bwd at S = 4097 (twice) and
# 3000 (../rows_fold/fwd_ab.py), bench_row_ops --rows 4097 for HEAD.
set -u
export PYTHONPATH=$PWD
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; E=docs/evidence/h200; T0=$(date +%s)
keep() { echo "$1 at $(( $(date +%s) - T0 )) s"; tar czf $OUT/logs.tgz -C $OUT logs; }
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
mkdir -p /tmp/head && cp -r rl_kernel_ops /tmp/head/ || exit 3
git apply $E/rows_recompute/call3_minblocks_attempt.diff 2>/dev/null || patch -s -p1 < $E/rows_recompute/call3_minblocks_attempt.diff || exit 3
build='from rl_kernel_ops import _build; _build.load_extension()'
H="PYTHONSAFEPATH=1 PYTHONPATH=/tmp/head:$PYTHONPATH RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_head"
( env $H MAX_JOBS=8 python3 -c "$build" > $L/build_head.log 2>&1 ) &
( env PYTHONSAFEPATH=1 MAX_JOBS=8 python3 -c "$build" > $L/build.log 2>&1 ) ; wait
grep -iE " error" $L/build*.log | head -5; keep built
ab() {  # setting, S
  if [ "$1" = head ]; then env $H timeout 40 python3 $E/rows_fold/fwd_ab.py head $2
  else env PYTHONSAFEPATH=1 RLK_OVL_MB=${1:1} timeout 40 python3 $E/rows_fold/fwd_ab.py $1 $2; fi 2>&1 | grep graphed >> $L/fwd_ab.txt
}
ALL="head m6 m7 m8"
for v in $ALL; do ab $v 4097; done; keep "S=4097"
for v in $ALL; do
  if [ $v = head ]; then env $H timeout 60 python3 $E/rows_dx_regs/grads_bits.py head
  else env PYTHONSAFEPATH=1 RLK_OVL_MB=${v:1} timeout 60 python3 $E/rows_dx_regs/grads_bits.py $v; fi
done > $L/grads_bits.txt 2>&1
cat $L/grads_bits.txt; keep bits
for v in $ALL; do ab $v 4097; done
for v in $ALL; do ab $v 3000; done
cut -c1-150 $L/fwd_ab.txt; keep ab
env PYTHONPATH=/tmp/head:$PYTHONPATH RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_head timeout 90 python3 benchmarks/bench_row_ops.py --rows 4097 --out $L/bench_row_ops.head.s4097.json > $L/bench_row_ops.head.s4097.txt 2>&1
grep -E "copy:|norm_modulate +graphed" $L/bench_row_ops.head.s4097.txt | cut -c1-120; keep done
