#!/usr/bin/env bash
# Session 10 call 1: the persistent forward attempt (RLK_FWD_PERSIST), bits and graphed times
# against HEAD's forward in one process; then the forward tests with two settings.
set -u
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; T0=$(date +%s)
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
python3 -c 'import torch; print(torch.__version__, torch.version.cuda)' | tee -a $L/machine.txt
PYTHONSAFEPATH=1 MAX_JOBS=8 python3 -c 'from rl_kernel_ops import _build; _build.load_extension()' > $L/build.log 2>&1
echo "built at $(( $(date +%s) - T0 )) s"; tail -3 $L/build.log
PYTHONSAFEPATH=1 timeout 240 python3 .dev/probe_persist.py 4097,1024,2048,8192,32768 "0;10,2;8,2;6,3;5,4;16,1" 2>&1 | tee $L/probe_persist.txt
echo "probe done at $(( $(date +%s) - T0 )) s"
for st in 10,2 6,3; do
  RLK_FWD_PERSIST=$st PYTHONSAFEPATH=1 timeout 120 python3 -m pytest -q -x tests/cuda/test_rl_kernel_rows.py \
    -k "rstd_is or forward_bitwise or other_widths or forward_sorts or batch_invariant or deterministic" > $L/cuda_fwd_tests_$st.log 2>&1
  echo "tests $st: $(tail -1 $L/cuda_fwd_tests_$st.log)"
done
echo "done at $(( $(date +%s) - T0 )) s"
