#!/usr/bin/env bash
# norm_modulate's forward: table lines prefetched into L1 before the statistic's barrier (mode 1),
# with x not allocated in L1 (2), table vectors in registers (3), a bound with tables from 8 vectors
# (9, wrong by design); RLK_FWD_MODE. Bits across modes, graphed A/B, ncu L1/L2 of the forward.
set -u
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
python3 -c 'import torch; print(torch.__version__, torch.version.cuda)' | tee -a $L/machine.txt
PYTHONSAFEPATH=1 MAX_JOBS=16 python3 -c 'from rl_kernel_ops import _build; _build.load_extension()' > $L/build.log 2>&1
echo "built at $(el) s"; grep -iE "error" $L/build.log | head -5
for m in 0 1 2 3 9; do env PYTHONSAFEPATH=1 RLK_FWD_MODE=$m timeout 60 python3 .dev/fwd_bits.py mode$m; done | tee $L/bits.txt
echo "bits at $(el) s"
for round in 1 2; do
  for m in 0 1 2 3 9; do
    env PYTHONSAFEPATH=1 RLK_FWD_MODE=$m timeout 40 python3 .dev/fwd_ab.py m$m 4097 2>&1 | grep graphed >> $L/fwd_ab.txt
  done
done
cut -c1-90 $L/fwd_ab.txt; echo "ab at $(el) s"
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_hit.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,launch__occupancy_limit_registers
for m in 0 1 9; do
  env PYTHONSAFEPATH=1 RLK_FWD_MODE=$m timeout 90 ncu --clock-control none --metrics $M -k regex:"norm_modulate_fwd" --launch-skip 2 --launch-count 2 \
    python3 .dev/ncu_fwd.py 4097 > $L/ncu_m$m.txt 2>&1; echo "ncu mode $m exit $?"
  grep -E "fwd_kernel|duration|dram__bytes|lts__t_sectors|l1tex__t_sectors|throughput|inst_executed|issue_active|warps_active|occupancy" $L/ncu_m$m.txt | sed -e 's/(const unsigned short.*//' -e 's/ \{8,\}/  /g' | cut -c1-100
done
echo "done at $(el) s"
