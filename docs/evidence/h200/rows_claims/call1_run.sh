#!/usr/bin/env bash
# dx blocks that claim rows of one table row per SM (variants 4-7: S, 6, 4, 8 dx blocks per SM;
# RLK_CLAIMS for variant 0): bits against the split pair, time, graphed fwd+bwd A/B, L1/L2 traffic.
set -u
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; E=docs/evidence/h200; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
python3 -c 'import torch; print(torch.__version__, torch.version.cuda)' | tee -a $L/machine.txt
PYTHONSAFEPATH=1 MAX_JOBS=16 python3 -c 'from rl_kernel_ops import _build; _build.load_extension()' > $L/build.log 2>&1
echo "built at $(el) s"; grep -iE "error" $L/build.log | head -5
PYTHONSAFEPATH=1 timeout 120 python3 $E/rows_cols/probe_cols.py 4097,3000,2048,1024,257,8192 over=2,cS=4,c6=5,c4=6,c8=7 > $L/probe.txt 2>&1
echo "probe exit $?"; grep "S=" $L/probe.txt | cut -c1-170; tail -3 $L/probe.txt | grep -v "S=" ; echo "probe at $(el) s"
for round in 1 2; do
  for c in 0 5 6 7 4; do
    env PYTHONSAFEPATH=1 RLK_CLAIMS=$c timeout 40 python3 .dev/fwd_ab.py c$c 4097 2>&1 | grep graphed >> $L/fwd_ab.txt
  done
done
cut -c1-60,250-330 $L/fwd_ab.txt; echo "ab at $(el) s"
M=gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_hit.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active
PYTHONSAFEPATH=1 timeout 120 ncu --clock-control none --metrics $M -k regex:"overlap" --launch-skip 3 --launch-count 3 \
  python3 .dev/ncu_l2.py 4097 2,5,7 > $L/ncu.txt 2>&1; echo "ncu exit $?"
grep -E "overlap_kernel|duration|dram__bytes_read|lts__t_sectors|l1tex__t_sectors|throughput|inst_executed|issue_active|warps_active" $L/ncu.txt | sed -e 's/(const unsigned short.*//' -e 's/ \{8,\}/  /g' | cut -c1-100
echo "done at $(el) s"
