#!/usr/bin/env bash
# Why does a failing TORCH_CHECK that formats a number kill the process in rl_kernel_ops's build?
set -u
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
{ which gdb; gcc --version | head -1; nvcc --version | tail -2; python3 -c 'import torch;print(torch.__version__, torch._C._GLIBCXX_USE_CXX11_ABI)'; } > $L/tools.txt 2>&1; cat $L/tools.txt
cat > rl_kernel_ops/csrc/zz_diag.cu <<'CU'
#include <ATen/ATen.h>
#include <torch/library.h>
#include <sstream>
namespace {
at::Tensor diag_num(const at::Tensor& x, int64_t n) { TORCH_CHECK(n < 3, "diag_num: at most ", 3, " rows, not ", n); return x; }
at::Tensor diag_str(const at::Tensor& x, int64_t n) { TORCH_CHECK(n < 3, "diag_str: ", "too many rows"); return x; }
at::Tensor diag_one(const at::Tensor& x, int64_t n) { TORCH_CHECK(n < 3, "diag_one: too many rows"); return x; }
at::Tensor diag_fmt(const at::Tensor& x, int64_t n) {  // formats a number without throwing, then throws a literal
  std::ostringstream s; s << "n=" << n;
  TORCH_CHECK(s.str().size() > 100, "diag_fmt: formatted fine");
  return x;
}
at::Tensor diag_throw(const at::Tensor& x, int64_t n) {  // a plain std::runtime_error with a formatted number
  std::ostringstream s; s << "diag_throw: n=" << n;
  throw std::runtime_error(s.str());
}
}
TORCH_LIBRARY_FRAGMENT(rl_kernel_ops, m) {
  m.def("diag_num(Tensor x, int n) -> Tensor");
  m.def("diag_str(Tensor x, int n) -> Tensor");
  m.def("diag_one(Tensor x, int n) -> Tensor");
  m.def("diag_fmt(Tensor x, int n) -> Tensor");
  m.def("diag_throw(Tensor x, int n) -> Tensor");
}
TORCH_LIBRARY_IMPL(rl_kernel_ops, CompositeExplicitAutograd, m) {
  m.impl("diag_num", &diag_num);
  m.impl("diag_str", &diag_str);
  m.impl("diag_one", &diag_one);
  m.impl("diag_fmt", &diag_fmt);
  m.impl("diag_throw", &diag_throw);
}
CU
export RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_diag
( time python3 -c 'from rl_kernel_ops import _build; _build.load_extension()' ) > $L/build.log 2>&1; tail -3 $L/build.log
SO=$(ls /tmp/rlk_diag/*/rl_kernel_ops_cuda.so); ldd $SO > $L/ldd.txt; grep -E "stdc|c10|torch" $L/ldd.txt
for f in diag_one diag_str diag_num diag_fmt diag_throw; do for dev in cpu cuda; do
  timeout 60 python3 -X faulthandler -c "
import torch
from rl_kernel_ops import _build; _build.load_extension()
try:
    getattr(torch.ops.rl_kernel_ops, '$f')(torch.ones(1, device='$dev'), 5)
except RuntimeError as e:
    print('raised:', str(e).splitlines()[0])
" > $L/$f.$dev.txt 2>&1; echo "$f $dev exit $? : $(grep -m1 -E 'raised|Fatal' $L/$f.$dev.txt)"
done; done | tee $L/summary.txt
cat > /tmp/crash.py <<'PY'
import torch
from rl_kernel_ops import _build; _build.load_extension()
torch.ops.rl_kernel_ops.diag_num(torch.ones(1), 5)
PY
if which gdb >/dev/null; then
  timeout 120 gdb -q -batch -ex run -ex bt -ex "info sharedlibrary" --args python3 /tmp/crash.py > $L/gdb.txt 2>&1; grep -E "^#|signal" $L/gdb.txt | head -30
fi
TORCH_SHOW_CPP_STACKTRACES=1 timeout 60 python3 /tmp/crash.py > $L/cpp_stack.txt 2>&1; echo "with TORCH_SHOW_CPP_STACKTRACES=1: exit $?"; tail -5 $L/cpp_stack.txt
tar czf $OUT/logs.tgz -C $OUT logs
