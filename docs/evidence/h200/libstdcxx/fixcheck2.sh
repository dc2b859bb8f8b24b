#!/usr/bin/env bash
# tests/cuda on the tree linked with -Wl,--exclude-libs,ALL (the wheels installed, as tests/cuda needs diffusers).
set -u
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; T0=$(date +%s)
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
( time python3 -c 'from rl_kernel_ops import _build; _build.load_extension()' ) > $L/build.log 2>&1; tail -3 $L/build.log
timeout 300 python3 -m pytest -q -p no:cacheprovider tests/cuda > $L/cuda_tests.log 2>&1; tail -2 $L/cuda_tests.log
echo "done at $(( $(date +%s) - T0 )) s"
