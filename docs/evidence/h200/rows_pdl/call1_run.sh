#!/usr/bin/env bash
# About 6 minutes of command. HEAD ("head") against HEAD + rows_dx_regs/dx_recompute.diff + next_knobs_attempt.diff +
# docs/evidence/h200/rows_pdl/pdl_attempt.diff. Setting kDPFL: RLK_DX_NA, RLK_PART_NA, RLK_FWD_NA (0/1) and RLK_PDL
# (0 off; 1 programmatic dependent launch of the overlapped backward and the fold; 2, 3 also a
# kernel between forward and backward that prefetches into L2 the first 4 or 8 rows of each tile).
set -u
export PYTHONPATH=$PWD
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; D=docs/evidence/h200/rows_dx_regs; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
keep() { echo "$1 at $(el) s"; tar czf $OUT/logs.tgz -C $OUT logs; }
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
mkdir -p /tmp/head && cp -r rl_kernel_ops /tmp/head/ || exit 3
apply() { git apply "$1" 2>/dev/null || patch -s -p1 < "$1"; }
apply $D/dx_recompute.diff && apply $D/next_knobs_attempt.diff && apply docs/evidence/h200/rows_pdl/pdl_attempt.diff || { echo "a diff does not apply"; exit 3; }
build='from rl_kernel_ops import _build; _build.load_extension()'
H="PYTHONSAFEPATH=1 PYTHONPATH=/tmp/head:$PYTHONPATH RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_head"
( env $H MAX_JOBS=8 python3 -c "$build" > $L/build_head.log 2>&1 ) &
( env PYTHONSAFEPATH=1 MAX_JOBS=8 python3 -c "$build" > $L/build.log 2>&1 ) ; wait
grep -iE " error" $L/build*.log | head -5; keep built
knobs() { echo RLK_DX_NA=${1:1:1} RLK_PART_NA=${1:2:1} RLK_FWD_NA=${1:3:1} RLK_PDL=${1:4:1}; }
ab() {  # setting, S
  if [ "$1" = head ]; then env $H timeout 40 python3 docs/evidence/h200/rows_fold/fwd_ab.py head $2
  else env PYTHONSAFEPATH=1 $(knobs $1) timeout 40 python3 docs/evidence/h200/rows_fold/fwd_ab.py $1 $2; fi 2>&1 | grep graphed >> $L/fwd_ab.txt
}
ALL="head k0000 k0001 k0002 k0003 k0100 k0010"
for v in $ALL; do ab $v 4097; done; keep "S=4097"
for v in $ALL; do
  if [ $v = head ]; then env $H timeout 40 python3 $D/grads_bits.py head
  else env PYTHONSAFEPATH=1 $(knobs $v) timeout 40 python3 $D/grads_bits.py $v; fi
done > $L/grads_bits.txt 2>&1
cat $L/grads_bits.txt; keep bits
for v in $ALL; do ab $v 4097; done; keep "S=4097 again"
for v in $ALL; do ab $v 3000; done
cut -c1-150 $L/fwd_ab.txt; keep done
