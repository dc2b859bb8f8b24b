#!/usr/bin/env bash
# Tile-dx backward with two groups (.dev/inb variants 7, 8) against the overlapped kernel.
set -u
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; T0=$(date +%s)
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv | tee $L/machine14.txt
build='import rl_kernel_ops; print(rl_kernel_ops.__file__); from rl_kernel_ops import _build; _build.load_extension()'
I="PYTHONSAFEPATH=1 PYTHONPATH=.dev/inb:$PYTHONPATH RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_inb"
( time env $I MAX_JOBS=16 python3 -c "$build" ) > $L/build_inb14.log 2>&1
echo "built at $(( $(date +%s) - T0 )) s"; head -1 $L/build_inb14.log; grep -i error $L/build_inb14.log | head -5
env $I timeout 150 python3 .dev/probe_tiledx.py 1024,2048,4097,6144,8192 overlapped=2,grp_min4=7,grp_min3=8 > $L/probe_tiledx2.txt 2>&1; cut -c1-250 $L/probe_tiledx2.txt
for i in 1 2; do for v in 2 7 8; do
  env $I RLK_NM_VARIANT=$v timeout 60 python3 .dev/graphed_nm.py v$v 2>&1 | grep -v Warn >> $L/tiledx2_graphed.txt
done; done
grep -v _warn $L/tiledx2_graphed.txt | cut -c1-220
for v in 7 8; do
  env $I RLK_NM_VARIANT=$v timeout 90 ncu --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__occupancy_limit_registers \
    -k regex:"tiledx2" python3 .dev/graphed_nm.py --once > $L/ncu14_v$v.txt 2>&1
  grep -E "duration|dram__|warps_active|registers" $L/ncu14_v$v.txt | tail -6 | cut -c1-150
done
echo "done at $(( $(date +%s) - T0 )) s"
tar czf $OUT/logs14.tgz -C $OUT logs
