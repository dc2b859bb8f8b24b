#!/usr/bin/env bash
# Call 4 (the same warm machine): ncu of the overlapped kernels (variants 2, 4, 10, 13) at S = 4097, and the
# knobs off / best at S = 2048 and 8192, graphed. Run as `export PYTHONPATH=$PWD RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_build`.
L=$OUT/logs; mkdir -p $L; M=gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,sm__warps_active.avg.pct_of_peak_sustained_active
PYTHONSAFEPATH=1 timeout 150 ncu --clock-control none --metrics $M -k regex:"overlap" --launch-skip 4 --launch-count 4 python3 .dev/ncu_l2.py 4097 2,4,10,13 > $L/ncu_pace.txt 2>&1; echo "ncu exit $?"
grep -E "overlap|duration|dram__bytes_read|lts__t_sectors|warps_active" $L/ncu_pace.txt | sed -e 's/(const unsigned short.*//' -e 's/ \{8,\}/  /g' | cut -c1-100 | tail -24
for S in 2048 8192; do for s in "0 0 0 0" "1 1 0 8"; do set -- $s; env PYTHONSAFEPATH=1 RLK_DX2=$1 RLK_FWD_PRE=$2 RLK_TWO_STREAMS=$3 RLK_PACE=$4 timeout 40 python3 .dev/fwd_ab.py d$1p$2t$3k$4 $S 2>&1 | grep graphed | cut -c1-120; done; done | tee $L/fwd_ab_other.txt
