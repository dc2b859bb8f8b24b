#!/usr/bin/env bash
# Does a failing TORCH_CHECK that formats a number kill the process when the host code is compiled
# by nvcc with -std=c++17 (as _build.py does) and not with c++20? Builds k.cu's two host-only ops
# both ways and calls each with a refused argument (run on the GPU machine, about 1 min).
cd "$(dirname "$0")"
T=$(python3 -c 'import torch, os; print(os.path.dirname(torch.__file__))')
ABI=$(python3 -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')
for std in c++17 c++20; do
  nvcc -std=$std -O3 -Xcompiler -fPIC -shared -D_GLIBCXX_USE_CXX11_ABI=$ABI -DTORCH_API_INCLUDE_EXTENSION_H \
    -I$T/include -I$T/include/torch/csrc/api/include k.cu -o /tmp/k_$std.so -L$T/lib -lc10 -ltorch_cpu -ltorch \
    > /tmp/k_$std.log 2>&1 || { echo "$std: build failed"; tail -3 /tmp/k_$std.log; continue; }
  python3 - <<PY
import torch
torch.ops.load_library("/tmp/k_$std.so")
for f in ("check_str", "check_num"):
    try:
        getattr(torch.ops.tcu, f)(torch.ones(1), 5)
    except RuntimeError as e:
        print("$std", f, "raised:", str(e).splitlines()[0], flush=True)
PY
  echo "$std: exit $?"
done
