#!/usr/bin/env bash
# Bound: the overlapped backward with its dx blocks reading w and the scale row from 8 vectors only
# (variant 4; wrong dx by design), i.e. without their L2 traffic for the tables, against variant 2.
set -u
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; E=docs/evidence/h200; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
PYTHONSAFEPATH=1 MAX_JOBS=16 python3 -c 'from rl_kernel_ops import _build; _build.load_extension()' > $L/build.log 2>&1
echo "built at $(el) s"; grep -iE "error" $L/build.log | head -5
PYTHONSAFEPATH=1 timeout 100 python3 $E/rows_cols/probe_cols.py 4097,3000,2048,1024 over=2,fake=4,ring=3,fakering=5 > $L/probe.txt 2>&1
grep "S=" $L/probe.txt | cut -c1-150; echo "probe at $(el) s"
M=gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_hit.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active
PYTHONSAFEPATH=1 timeout 120 ncu --clock-control none --metrics $M -k regex:"overlap" --launch-skip 2 --launch-count 2 \
  python3 .dev/ncu_l2.py 4097 2,4 > $L/ncu.txt 2>&1; echo "ncu exit $?"
grep -E "overlap_kernel|duration|dram__bytes_read|lts__t_sectors|l1tex__t_sectors|throughput|inst_executed|issue_active" $L/ncu.txt | sed -e 's/(const unsigned short.*//' -e 's/ \{8,\}/  /g' | cut -c1-100
echo "done at $(el) s"
