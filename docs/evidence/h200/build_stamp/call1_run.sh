#!/usr/bin/env bash
# 2026-12-05 (ninth session), about 3 minutes, no carry: rl_kernel_ops/_build.py keyed on the
# sources' sha256, on the GPU. Each step loads the extension in a process of its own, in one fresh
# build directory, runs one op, and prints whether the library was rebuilt (its mtime) and the stamp.
set -u
export PYTHONPATH=$PWD RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_stamp
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; T0=$(date +%s)
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
step() {  # label
  python3 - "$1" <<'PY'
import sys, time
t0 = time.time()
import torch
from rl_kernel_ops import _build
d = _build.build_directory(torch.cuda.get_device_capability())
so = d / f"{_build.EXTENSION_NAME}.so"
before = so.stat().st_mtime_ns if so.exists() else None
_build.load_extension()
perm, *_ = torch.ops.rl_kernel_ops.row_sort_plan(torch.tensor([2, 0, 1, 0], device="cuda"), 3, 64)
after = so.stat().st_mtime_ns
stamp = (d / _build.STAMP_NAME).read_text()
print(f"{sys.argv[1]:28s} {time.time() - t0:5.1f} s  rebuilt={before != after}  stamp={stamp[:12]}"
      f"  perm={perm.tolist()}", flush=True)
PY
}
F=rl_kernel_ops/csrc/row_segments.cu
old_time() { python3 -c "import os,sys; s=os.stat(sys.argv[1]); os.utime(sys.argv[1], ns=(s.st_atime_ns, s.st_mtime_ns - 3600 * 10**9))" $F; }
{
step "fresh directory"
step "again, nothing changed"
cp $F /tmp/row_segments.cu.orig
echo "// a changed byte" >> $F; old_time
step "changed, time an hour back"
cp /tmp/row_segments.cu.orig $F; old_time
( step "restored, process A" & step "restored, process B" & wait )
step "again, nothing changed"
} 2>&1 | tee $L/steps.txt
echo "done at $(( $(date +%s) - T0 )) s"
