#!/usr/bin/env bash
# Tile-dx backward (.dev/inb): probe against the overlapped kernel, graphed fwd+bwd, ncu DRAM bytes.
set -u
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; T0=$(date +%s)
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv | tee $L/machine13.txt
build='import rl_kernel_ops; print(rl_kernel_ops.__file__); from rl_kernel_ops import _build; _build.load_extension()'
I="PYTHONSAFEPATH=1 PYTHONPATH=.dev/inb:$PYTHONPATH RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_inb"
( time env $I MAX_JOBS=16 python3 -c "$build" ) > $L/build_inb.log 2>&1
echo "built at $(( $(date +%s) - T0 )) s"; head -1 $L/build_inb.log; grep -i error $L/build_inb.log | head -5
env $I timeout 150 python3 .dev/probe_tiledx.py 1024,2048,4097,6144 > $L/probe_tiledx.txt 2>&1; cat $L/probe_tiledx.txt | cut -c1-250
for i in 1 2; do for v in 2 3 4 5; do
  env $I RLK_NM_VARIANT=$v timeout 60 python3 .dev/graphed_nm.py v$v 2>&1 | grep -v Warn >> $L/tiledx_graphed.txt
done; done
cut -c1-220 $L/tiledx_graphed.txt
for v in 2 3 4; do
  env $I RLK_NM_VARIANT=$v timeout 90 ncu --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__warps_active.avg.pct_of_peak_sustained_active \
    -k regex:"overlap|tiledx" python3 .dev/graphed_nm.py --once > $L/ncu_v$v.txt 2>&1
  grep -E "tiledx|overlap|duration|dram__|warps_active" $L/ncu_v$v.txt | tail -8 | cut -c1-150
done
echo "done at $(( $(date +%s) - T0 )) s"
tar czf $OUT/logs13.tgz -C $OUT logs
