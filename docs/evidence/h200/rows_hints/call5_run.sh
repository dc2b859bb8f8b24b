#!/usr/bin/env bash
# dx blocks of R rows of one tile (R = 2, 4, 8: variants 4, 5, 6; RLK_DX_ROWS for variant 0) that
# read w and the scale row once and keep them in shared memory: bits against the split pair, time,
# graphed fwd+bwd A/B, L2 traffic.
set -u
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; E=docs/evidence/h200; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
PYTHONSAFEPATH=1 MAX_JOBS=16 python3 -c 'from rl_kernel_ops import _build; _build.load_extension()' > $L/build.log 2>&1
echo "built at $(el) s"; grep -iE "error" $L/build.log | head -5
PYTHONSAFEPATH=1 timeout 120 python3 $E/rows_cols/probe_cols.py 4097,3000,2048,1024,257,6144 over=2,r2=4,r4=5,r8=6 > $L/probe.txt 2>&1
grep "S=" $L/probe.txt | cut -c1-150; echo "probe at $(el) s"
for round in 1 2; do
  for r in 1 2 4 8; do
    env PYTHONSAFEPATH=1 RLK_DX_ROWS=$r timeout 40 python3 .dev/fwd_ab.py rows$r 4097 2>&1 | grep graphed >> $L/fwd_ab.txt
  done
done
cut -c1-60,250-330 $L/fwd_ab.txt; echo "ab at $(el) s"
M=gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active
PYTHONSAFEPATH=1 timeout 100 ncu --clock-control none --metrics $M -k regex:"overlap" --launch-skip 3 --launch-count 3 \
  python3 .dev/ncu_l2.py 4097 2,5,6 > $L/ncu.txt 2>&1; echo "ncu exit $?"
grep -E "overlap_kernel|duration|dram__bytes_read|lts__t_sectors_srcunit|throughput|inst_executed|issue_active|warps_active" $L/ncu.txt | sed -e 's/(const unsigned short.*//' -e 's/ \{8,\}/  /g' | cut -c1-100
PYTHONSAFEPATH=1 timeout 150 python3 -m pytest -q -p no:cacheprovider .dev/test_dx_rows.py > $L/test_dx_rows.log 2>&1; echo "tests exit $?"; tail -n 3 $L/test_dx_rows.log
echo "done at $(el) s"
