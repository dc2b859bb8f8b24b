#!/usr/bin/env bash
# Where the overlapped backward's L1/L2 traffic goes at S = 4097: ncu memory metrics of the split dx
# kernel, the split partials kernel and the overlapped kernel (variant 2), HEAD's tree.
set -u
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; T0=$(date +%s)
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
python3 -c 'import torch; print(torch.__version__, torch.version.cuda)' | tee -a $L/machine.txt
PYTHONSAFEPATH=1 MAX_JOBS=16 python3 -c 'from rl_kernel_ops import _build; _build.load_extension()' > $L/build.log 2>&1
echo "built at $(( $(date +%s) - T0 )) s"; tail -3 $L/build.log
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,lts__t_sectors_srcunit_tex_op_write.sum,lts__t_sectors.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_hit.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__throughput.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem,smsp__issue_active.avg.pct_of_peak_sustained_active
for clk in base none; do
PYTHONSAFEPATH=1 timeout 150 ncu --clock-control $clk --metrics $M -k regex:"bwd_dx|bwd_partials|overlap" --launch-skip 3 --launch-count 3 \
  python3 .dev/ncu_l2.py 4097 2 > $L/ncu_$clk.txt 2>&1
echo "ncu $clk exit $?"
done
grep -E "bwd_dx|bwd_partials|overlap_kernel|duration|dram__bytes|lts__t_sectors|l1tex__t_sectors|l1tex__t_requests|throughput|inst_executed|warps_active|registers|occupancy|issue_active" $L/ncu_none.txt | sed -e 's/(const unsigned short.*//' | cut -c1-110
echo "done at $(( $(date +%s) - T0 )) s"
