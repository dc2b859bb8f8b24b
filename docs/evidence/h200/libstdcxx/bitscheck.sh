#!/usr/bin/env bash
# The 132-tensor check of the link fix: HEAD (linked with --exclude-libs) against 596550e's tree (.dev/head).
set -u
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; E=docs/evidence/h200; T0=$(date +%s)
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
build='from rl_kernel_ops import _build; _build.load_extension()'
H="PYTHONSAFEPATH=1 PYTHONPATH=.dev/head:$PYTHONPATH RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_head"
( env $H MAX_JOBS=8 python3 -c "$build" > $L/build_head.log 2>&1 ) &
( env PYTHONSAFEPATH=1 MAX_JOBS=8 python3 -c "$build" > $L/build_new.log 2>&1 ); wait
echo "built at $(( $(date +%s) - T0 )) s"
( env $H timeout 150 python3 $E/dump_rl_kernel_bits.py dump /tmp/bits_head.pt > $L/bits_head.txt 2>&1 ) &
( env PYTHONSAFEPATH=1 timeout 150 python3 $E/dump_rl_kernel_bits.py dump /tmp/bits_new.pt > $L/bits.txt 2>&1 ) &
wait
env PYTHONSAFEPATH=1 timeout 60 python3 $E/dump_rl_kernel_bits.py compare /tmp/bits_head.pt /tmp/bits_new.pt >> $L/bits.txt 2>&1; echo "compare: exit $?" >> $L/bits.txt
tail -n 2 $L/bits.txt; echo "done at $(( $(date +%s) - T0 )) s"
