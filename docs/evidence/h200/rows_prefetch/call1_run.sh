#!/usr/bin/env bash
# 2026-12-05 (tenth session), about 6 minutes, no carry: HEAD (94a3cff) against HEAD +
# call1_prefetch_attempt.diff, whose knobs (read on every call; the attempt's only):
#   RLK_PF=D        the overlapped kernel's partial blocks (no ring) ask L2 for their column slice
#                   of the rows D positions ahead (cp.async.bulk.prefetch.L2, thread 0, two per row);
#   RLK_FOLD_SMEM=1 the fold's last plane adds the segment sums from shared memory, not from out;
#   RLK_FWD_CS=1    the forward stores out with st.global.cs (evict first), so x may stay in L2.
# One sha256 of every output and gradient per setting (../rows_dx_regs/grads_bits.py), graphed
# fwd+bwd at S = 4097 (two rounds), 3000 and 2048 (../rows_fold/fwd_ab.py), bench_row_ops --rows
# 4097 for HEAD and for all three knobs, and (on an H200) ncu of the overlapped kernel, D = 0 and 8.
set -u
export PYTHONPATH=$PWD
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; E=docs/evidence/h200; T0=$(date +%s)
keep() { echo "$1 at $(( $(date +%s) - T0 )) s"; }
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
mkdir -p /tmp/head && cp -r rl_kernel_ops /tmp/head/ || exit 3
git apply $E/rows_prefetch/call1_prefetch_attempt.diff 2>/dev/null || patch -s -p1 < $E/rows_prefetch/call1_prefetch_attempt.diff || exit 3
build='from rl_kernel_ops import _build; _build.load_extension()'
H="PYTHONSAFEPATH=1 PYTHONPATH=/tmp/head:$PYTHONPATH RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_head10"
T="PYTHONSAFEPATH=1 RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_pf10"
( env $H MAX_JOBS=8 python3 -c "$build" > $L/build_head.log 2>&1 ) &
( env $T MAX_JOBS=8 python3 -c "$build" > $L/build.log 2>&1 ) ; wait
grep -iE " error" $L/build*.log | head -5; keep built
knobs() {  # setting name -> environment
  case $1 in
    head) echo "$H" ;;
    off) echo "$T" ;;
    p4) echo "$T RLK_PF=4" ;; p8) echo "$T RLK_PF=8" ;; p12) echo "$T RLK_PF=12" ;;
    f) echo "$T RLK_FOLD_SMEM=1" ;; c) echo "$T RLK_FWD_CS=1" ;;
    p8fc) echo "$T RLK_PF=8 RLK_FOLD_SMEM=1 RLK_FWD_CS=1" ;;
  esac
}
ab() { env $(knobs $1) timeout 40 python3 $E/rows_fold/fwd_ab.py $1 $2 2>&1 | grep graphed >> $L/fwd_ab.txt; }
ALL="head off p4 p8 p12 f c p8fc"
for v in $ALL; do ab $v 4097; done; keep "S=4097"
for v in head off p8fc p4 p12; do env $(knobs $v) timeout 60 python3 $E/rows_dx_regs/grads_bits.py $v; done > $L/grads_bits.txt 2>&1
cat $L/grads_bits.txt; keep bits
for v in $ALL; do ab $v 4097; done
for v in head off p8 p8fc; do ab $v 3000; ab $v 2048; done
cut -c1-160 $L/fwd_ab.txt; keep ab
for v in head p8fc; do
  env $(knobs $v) timeout 90 python3 benchmarks/bench_row_ops.py --rows 4097 --out $L/bench_row_ops.$v.s4097.json > $L/bench_row_ops.$v.s4097.txt 2>&1
  echo $v; grep -E "copy:|norm_modulate +graphed" $L/bench_row_ops.$v.s4097.txt | cut -c1-120
done; keep bench
grep -q H200 $L/machine.txt || { echo "not an H200: no ncu"; exit 0; }
M=gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active
for v in off p8; do
  env $(knobs $v) timeout 60 ncu --clock-control none --metrics $M -k regex:"overlap" --launch-skip 1 --launch-count 1 \
    python3 $E/rows_hints/ncu_l2.py 4097 2 > $L/ncu.$v.txt 2>&1
  echo "ncu $v"; grep -E "duration|dram__bytes|lts__t_sectors|throughput|inst_executed|issue_active" $L/ncu.$v.txt | sed 's/ \{8,\}/  /g' | cut -c1-100
done; keep done
