#!/usr/bin/env bash
# 2026-12-05 (tenth session), about 2 minutes, no carry: HEAD (bd2eb97) + call1_fwd_trace.diff
# (norm_modulate's forward with per-block %globaltimer stamps under RLK_FWD_TRACE), trace_fwd.py at
# S = 2048, 4097 and 32768.
set -u
export PYTHONPATH=$PWD RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_fwdtrace10
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; E=docs/evidence/h200; T0=$(date +%s)
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
git apply $E/rows_fwd_trace/call1_fwd_trace.diff 2>/dev/null || patch -s -p1 < $E/rows_fwd_trace/call1_fwd_trace.diff || exit 3
MAX_JOBS=16 python3 -c 'from rl_kernel_ops import _build; _build.load_extension()' > $L/build.log 2>&1 || { tail -5 $L/build.log; exit 3; }
echo "built at $(( $(date +%s) - T0 )) s"
timeout 120 python3 $E/rows_fwd_trace/trace_fwd.py 2048,4097,32768 > $L/trace_fwd.txt 2>&1; echo "trace exit $?"
cut -c1-330 $L/trace_fwd.txt | grep -v "active every" ; rm -f $L/build.log
echo "done at $(( $(date +%s) - T0 )) s"
