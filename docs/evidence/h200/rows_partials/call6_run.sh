#!/usr/bin/env bash
# The row tests of tests/cuda again, to their summary line (call 5's 200 s limit ended pytest after
# its last test and before the summary).
set -u
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; T0=$(date +%s)
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
PYTHONSAFEPATH=1 MAX_JOBS=8 python3 -c 'from rl_kernel_ops import _build; _build.load_extension()' > $L/build.log 2>&1
echo "built at $(( $(date +%s) - T0 )) s"
timeout 420 python3 -m pytest -q -p no:cacheprovider tests/cuda/test_rl_kernel_rows.py > $L/cuda_rows_tests.log 2>&1; echo "pytest exit $?" >> $L/cuda_rows_tests.log
tail -n 2 $L/cuda_rows_tests.log; echo "done at $(( $(date +%s) - T0 )) s"
