#!/usr/bin/env bash
# Call C (the same warm machine, after next_b.sh): bench_row_ops at S = 4097 with the knobs off and on (about 160 s).
# Edit the second setting to the best of next_b.sh's A/B before running.
set -u
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; T0=$(date +%s)
export RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_build
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
for k in "0 0 0 0" "1 1 0 8"; do
  set -- $k
  n=d$1p$2t$3k$4
  env RLK_DX2=$1 RLK_FWD_PRE=$2 RLK_TWO_STREAMS=$3 RLK_PACE=$4 timeout 150 python3 benchmarks/bench_row_ops.py --rows 4097 --out $L/bench_row_ops.s4097.$n.json > $L/bench_row_ops.s4097.$n.txt 2>&1
  echo "bench $k exit $? at $(el) s"; grep -E "copy:|^norm_modulate +graphed|^targets norm" $L/bench_row_ops.s4097.$n.txt | cut -c1-160
done
echo "done at $(el) s"
