#!/usr/bin/env bash
# Cache hints on the row loads of norm_modulate's overlapped backward (variants 4, 5, 6; variant 0
# with RLK_OVERLAP_HINTS) and forward (RLK_FWD_HINT=1): bits and time, L1/L2 traffic, graphed A/B.
set -u
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; E=docs/evidence/h200; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
PYTHONSAFEPATH=1 MAX_JOBS=16 python3 -c 'from rl_kernel_ops import _build; _build.load_extension()' > $L/build.log 2>&1
echo "built at $(el) s"; grep -iE "error" $L/build.log | head -5
PYTHONSAFEPATH=1 timeout 100 python3 $E/rows_cols/probe_cols.py 4097,3000,2048,1024,8192 over=2,l1=4,keep=5,keepst=6 > $L/probe.txt 2>&1
grep "S=" $L/probe.txt | cut -c1-140; echo "probe at $(el) s"
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,lts__t_sectors.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_hit.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum
PYTHONSAFEPATH=1 timeout 120 ncu --clock-control none --metrics $M -k regex:"overlap" --launch-skip 4 --launch-count 4 \
  python3 .dev/ncu_l2.py 4097 2,4,5,6 > $L/ncu.txt 2>&1; echo "ncu exit $?"
grep -E "overlap_kernel|duration|dram__bytes_read|lts__t_sectors_srcunit_tex_op_read.sum|l1tex__t_sectors_pipe_lsu_mem_global_op_ld|throughput" $L/ncu.txt | sed -e 's/(const unsigned short.*//' -e 's/ \{8,\}/  /g' | cut -c1-100
echo "ncu at $(el) s"
for round in 1 2; do
  for h in 0 1 2 3; do
    env PYTHONSAFEPATH=1 RLK_OVERLAP_HINTS=$h timeout 40 python3 .dev/fwd_ab.py bwd$h 4097 2>&1 | grep graphed >> $L/fwd_ab.txt
  done
  env PYTHONSAFEPATH=1 RLK_FWD_HINT=1 timeout 40 python3 .dev/fwd_ab.py fwd1 4097 2>&1 | grep graphed >> $L/fwd_ab.txt
done
cut -c1-100 $L/fwd_ab.txt; echo "done at $(el) s"
