#!/usr/bin/env bash
# 2026-12-05 (ninth session), about 3 minutes, no carry: the committed kernels (4966ab4) on a fresh
# machine: bench_row_ops --rows 4097, then (on an H200 only) ncu's DRAM, L2 and L1 traffic of the
# overlapped backward (variant 2, what S = 4097 runs) and of the split dx kernel at S = 4097
# (../rows_hints/ncu_l2.py; the metrics of ../rows_claims/ call 1).
set -u
export PYTHONPATH=$PWD
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; E=docs/evidence/h200; T0=$(date +%s)
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
MAX_JOBS=16 python3 -c 'from rl_kernel_ops import _build; _build.load_extension()' > $L/build.log 2>&1 || { tail -5 $L/build.log; exit 3; }
echo "built at $(( $(date +%s) - T0 )) s"
timeout 120 python3 benchmarks/bench_row_ops.py --rows 4097 --out $L/bench_row_ops.s4097.json > $L/bench_row_ops.s4097.txt 2>&1
grep -E "copy:|norm_modulate +graphed" $L/bench_row_ops.s4097.txt | cut -c1-120
grep -q H200 $L/machine.txt || { echo "not an H200: no ncu"; exit 0; }
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_hit.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active
timeout 150 ncu --clock-control none --metrics $M -k regex:"overlap|bwd_dx" --launch-skip 2 --launch-count 2 \
  python3 $E/rows_hints/ncu_l2.py 4097 2 > $L/ncu.txt 2>&1; echo "ncu exit $?"
grep -E "overlap_kernel|bwd_dx_kernel|duration|dram__bytes|lts__t_sectors|l1tex__t_sectors|throughput|inst_executed|issue_active|warps_active" $L/ncu.txt | sed -e 's/(const unsigned short.*//' -e 's/ \{8,\}/  /g' | cut -c1-100
echo "done at $(( $(date +%s) - T0 )) s"
