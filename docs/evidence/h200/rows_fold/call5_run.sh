#!/usr/bin/env bash
# f6a4456 + the zero-row test: build, then the zero-row and fold tests.
set -u
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; T0=$(date +%s)
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
env PYTHONSAFEPATH=1 MAX_JOBS=16 python3 -c 'from rl_kernel_ops import _build; _build.load_extension()' > $L/build.log 2>&1
echo "built at $(( $(date +%s) - T0 )) s"; grep -iE "error" $L/build.log | head -5
timeout 90 python3 -m pytest -q -p no:cacheprovider tests/cuda/test_rl_kernel_rows.py -k "no_rows or folds or forward_bitwise_equal_to_eager" > $L/cuda_tests.log 2>&1; tail -n 3 $L/cuda_tests.log
echo "done at $(( $(date +%s) - T0 )) s"
