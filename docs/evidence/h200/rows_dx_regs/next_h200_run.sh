#!/usr/bin/env bash
# Prepared 2026-12-05 (seventh session), for an H200, not run: HEAD ("head") against HEAD +
# dx_recompute.diff + next_knobs_attempt.diff, whose knobs (0 or 1) load with L1::no_allocate, so
# that L1 keeps w and the table rows: RLK_DX_NA grad and x in the dx blocks and the split dx kernel,
# RLK_PART_NA grad and x in the partial blocks (without the ring), RLK_FWD_NA x in the forward.
# Setting kDPF names the three knobs; k000 is dx_recompute.diff's code. One sha256 of the output
# and every gradient per setting (grads_bits.py), graphed fwd+bwd (../rows_fold/fwd_ab.py) at
# S = 4097 (twice), 3000, 5000 and 2048, then bench_row_ops --rows 4097 for k000.
# Run as `bash docs/evidence/h200/rows_dx_regs/next_h200_run.sh` (no carry). About 8 minutes of command.
set -u
export PYTHONPATH=$PWD
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; D=docs/evidence/h200/rows_dx_regs; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
keep() { echo "$1 at $(el) s"; tar czf $OUT/logs.tgz -C $OUT logs; }
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
mkdir -p /tmp/head && cp -r rl_kernel_ops /tmp/head/ || exit 3
apply() { git apply "$1" 2>/dev/null || patch -s -p1 < "$1"; }
apply $D/dx_recompute.diff && apply $D/next_knobs_attempt.diff || { echo "a diff does not apply"; exit 3; }
build='from rl_kernel_ops import _build; _build.load_extension()'
H="PYTHONSAFEPATH=1 PYTHONPATH=/tmp/head:$PYTHONPATH RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_head"
( env $H MAX_JOBS=8 python3 -c "$build" > $L/build_head.log 2>&1 ) &
( env PYTHONSAFEPATH=1 MAX_JOBS=8 python3 -c "$build" > $L/build.log 2>&1 ) ; wait
grep -iE " error" $L/build*.log | head -5; keep built
ab() {  # setting, S
  if [ "$1" = head ]; then env $H timeout 40 python3 docs/evidence/h200/rows_fold/fwd_ab.py head $2
  else env PYTHONSAFEPATH=1 RLK_DX_NA=${1:1:1} RLK_PART_NA=${1:2:1} RLK_FWD_NA=${1:3:1} \
         timeout 40 python3 docs/evidence/h200/rows_fold/fwd_ab.py $1 $2; fi 2>&1 | grep graphed >> $L/fwd_ab.txt
}
ALL="head k000 k100 k010 k110 k001 k111"
for v in $ALL; do ab $v 4097; done; keep "S=4097"
for v in k000 k100 k010 k110 k001 k111; do
  env PYTHONSAFEPATH=1 RLK_DX_NA=${v:1:1} RLK_PART_NA=${v:2:1} RLK_FWD_NA=${v:3:1} timeout 40 python3 $D/grads_bits.py $v
done > $L/grads_bits.txt 2>&1; env $H timeout 40 python3 $D/grads_bits.py head >> $L/grads_bits.txt 2>&1
cat $L/grads_bits.txt; keep bits
for S in 3000 5000; do for v in $ALL; do ab $v $S; done; done
for v in head k000 k001; do ab $v 2048; done
for v in $ALL; do ab $v 4097; done
cut -c1-150 $L/fwd_ab.txt; keep ab
timeout 100 python3 benchmarks/bench_row_ops.py --rows 4097 --out $L/bench_row_ops.s4097.json > $L/bench_row_ops.s4097.txt 2>&1
grep -E "graphed|copy" $L/bench_row_ops.s4097.txt | cut -c1-120; keep done
