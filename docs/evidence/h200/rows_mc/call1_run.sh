#!/usr/bin/env bash
# 2026-12-05 (eleventh session), about 7 minutes, no carry: HEAD (357382a) against HEAD +
# call1_mc_attempt.diff: the overlapped backward's dx blocks in clusters of CL = 2, 4, 8 (variants
# 4, 5, 6; RLK_MC=CL for variant 0) whose blocks take CL rows of one tile and share w and the tile's
# scale row: each block multicasts 1/CL of both into every block's shared memory, so the cluster
# reads the tables from L2 once (../rows_hints/ call 4: the tables' traffic cost the backward about
# 7 us on the H200). Bits (check_variants.py against the split pair, the sha256 of every output and
# gradient), times (../rows_cols/probe_cols.py, graphed ../rows_fold/fwd_ab.py), bench_row_ops
# --rows 4097, ncu's traffic of variants 2 and 5.
set -u
export PYTHONPATH=$PWD
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; E=docs/evidence/h200; T0=$(date +%s)
keep() { echo "$1 at $(( $(date +%s) - T0 )) s"; }
trap 'cd $OUT && tar czf logs.tgz logs && rm -rf logs' EXIT
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
mkdir -p /tmp/head && cp -r rl_kernel_ops /tmp/head/ || exit 3
git apply $E/rows_mc/call1_mc_attempt.diff 2>/dev/null || patch -s -p1 < $E/rows_mc/call1_mc_attempt.diff || exit 3
build='from rl_kernel_ops import _build; _build.load_extension()'
H="PYTHONSAFEPATH=1 PYTHONPATH=/tmp/head:$PYTHONPATH RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_head11"
T="PYTHONSAFEPATH=1 RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_mc11"
( env $H MAX_JOBS=8 python3 -c "$build" > $L/build_head.log 2>&1 ) &
( env $T MAX_JOBS=8 python3 -c "$build" > $L/build.log 2>&1 ) ; wait
grep -iE " error" $L/build*.log | head -5; keep built
env $T timeout 150 python3 $E/rows_mc/check_variants.py 4,5,6 > $L/check_variants.txt 2>&1; echo "check exit $?"
grep -c "DIFFERENT" $L/check_variants.txt; tail -2 $L/check_variants.txt; keep check
grep -q "^0 shapes differ" $L/check_variants.txt || { echo "bits differ or the check failed: stop"; exit 1; }
env $T timeout 90 python3 $E/rows_cols/probe_cols.py 257,1024,2048,3000,4097,6144 overlapped=2,mc2=4,mc4=5,mc8=6 > $L/probe.txt 2>&1
cut -c1-170 $L/probe.txt; keep probe
ab() { env $1 timeout 40 python3 $E/rows_fold/fwd_ab.py $2 $3 2>&1 | grep graphed >> $L/fwd_ab.txt; }
for S in 4097 4097; do ab "$H" head $S; for c in 2 4 8; do ab "$T RLK_MC=$c" mc$c $S; done; done
cut -c1-200 $L/fwd_ab.txt; keep ab
env PYTHONPATH=/tmp/head:$PYTHONPATH RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_head11 timeout 90 python3 benchmarks/bench_row_ops.py --rows 4097 --out $L/bench_row_ops.head.s4097.json > $L/bench_row_ops.head.s4097.txt 2>&1
env RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_mc11 RLK_MC=4 timeout 90 python3 benchmarks/bench_row_ops.py --rows 4097 --out $L/bench_row_ops.mc4.s4097.json > $L/bench_row_ops.mc4.s4097.txt 2>&1
for v in head mc4; do echo $v; grep -E "copy:|norm_modulate +graphed" $L/bench_row_ops.$v.s4097.txt | cut -c1-120; done; keep bench
M=gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_hit.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active
env $T timeout 100 ncu --clock-control none --metrics $M -k regex:"overlap" --launch-skip 2 --launch-count 2 \
  python3 $E/rows_hints/ncu_l2.py 4097 2,5 > $L/ncu.txt 2>&1; echo "ncu exit $?"
grep -E "overlap_kernel|duration|dram__bytes|lts__t_sectors|l1tex__t_sectors|throughput|inst_executed|issue_active|warps_active" $L/ncu.txt | sed -e 's/(const unsigned short.*//' -e 's/ \{8,\}/  /g' | cut -c1-100
keep ncu
{ env $H timeout 60 python3 $E/rows_dx_regs/grads_bits.py head; env $T RLK_MC=4 timeout 60 python3 $E/rows_dx_regs/grads_bits.py mc4; } > $L/grads_bits.txt 2>&1
cat $L/grads_bits.txt; keep bits
for S in 3000 2048; do ab "$H" head $S; ab "$T RLK_MC=4" mc4 $S; done
tail -4 $L/fwd_ab.txt | cut -c1-200; keep ab2
