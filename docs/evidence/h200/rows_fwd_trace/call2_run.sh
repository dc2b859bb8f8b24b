#!/usr/bin/env bash
# 2026-12-05 (tenth session), about 2 minutes, no carry: HEAD (bd2eb97) + call2_stagger_attempt.diff
# (RLK_FWD_STAGGER=N: the forward's first wave of blocks starts in turn, slot k of each SM after
# k * N ns, so that its blocks do not all load, then all compute and store, together): graphed
# fwd+bwd (../rows_fold/fwd_ab.py) at S = 4097 for N = 0, 300, 500, 800, twice, at 2048, 3000 and
# 32768 for 0 and 500; one sha256 of every output and gradient for 0 and 500.
set -u
export PYTHONPATH=$PWD RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_stagger10
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; E=docs/evidence/h200; T0=$(date +%s)
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
git apply $E/rows_fwd_trace/call2_stagger_attempt.diff 2>/dev/null || patch -s -p1 < $E/rows_fwd_trace/call2_stagger_attempt.diff || exit 3
MAX_JOBS=16 python3 -c 'from rl_kernel_ops import _build; _build.load_extension()' > $L/build.log 2>&1 || { tail -5 $L/build.log; exit 3; }
echo "built at $(( $(date +%s) - T0 )) s"
ab() { RLK_FWD_STAGGER=$1 timeout 60 python3 $E/rows_fold/fwd_ab.py s$1 $2 2>&1 | grep graphed >> $L/fwd_ab.txt; }
for r in 1 2; do for n in 0 300 500 800; do ab $n 4097; done; done
for S in 2048 3000 32768; do ab 0 $S; ab 500 $S; done
cut -c1-160 $L/fwd_ab.txt
for n in 0 500; do RLK_FWD_STAGGER=$n timeout 60 python3 $E/rows_dx_regs/grads_bits.py s$n; done | tee $L/grads_bits.txt
rm -f $L/build.log; echo "done at $(( $(date +%s) - T0 )) s"
