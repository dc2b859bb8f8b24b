#!/usr/bin/env bash
# Compact call 2 (same warm machine): graphed fwd+bwd A/B at S = 4097 over the knob settings, two rounds.
set -u
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; T0=$(date +%s)
export RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_build
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,uuid --format=csv,noheader | tee $L/machine_b.txt
PYTHONSAFEPATH=1 MAX_JOBS=16 python3 -c 'from rl_kernel_ops import _build; _build.load_extension()' > $L/build_b.log 2>&1
echo "built at $(el) s"
for round in 1 2; do
  for s in "0 0 0 0" "1 0 0 0" "0 1 0 0" "0 0 1 0" "0 0 2 0" "0 0 0 8" "0 0 0 16" "1 0 0 8" "1 0 2 0" "1 1 2 0" "0 1 0 8" "1 1 0 8"; do
    set -- $s
    env PYTHONSAFEPATH=1 RLK_DX2=$1 RLK_FWD_PRE=$2 RLK_TWO_STREAMS=$3 RLK_PACE=$4 timeout 40 python3 .dev/fwd_ab.py d$1p$2t$3k$4 4097 2>&1 | grep graphed >> $L/fwd_ab.txt
  done
  echo "round $round at $(el) s"
done
cut -c1-220 $L/fwd_ab.txt; echo "done at $(el) s"
