#!/usr/bin/env bash
# The fix: rl_kernel_ops linked with -Wl,--exclude-libs,ALL. Built fresh; which std:: symbols it
# exports; the diag ops in a tiny extension linked the same way; then tests/cuda (the new test first).
set -u
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; T0=$(date +%s)
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
echo "CXX=${CXX:-unset} CC=${CC:-unset} c++=$(readlink -f $(which c++))" | tee $L/toolchain.txt
/opt/gcc/bin/g++ --version | head -1 | tee -a $L/toolchain.txt
git diff --stat | tail -3 > $L/tree.txt
mkdir -p /tmp/tiny && sed -n '/^cat > rl_kernel_ops\/csrc\/zz_diag.cu/,/^CU$/p' .dev/diag_check.sh | sed '1d;$d' > /tmp/tiny/zz_diag.cu
cat > /tmp/tiny/build.py <<'PY'
import torch
from torch.utils import cpp_extension
from rl_kernel_ops import _build
cpp_extension.load(name="rlk_tiny_excl", sources=["/tmp/tiny/zz_diag.cu"], extra_cflags=["-O3", "-std=c++17"],
    extra_cuda_cflags=["-O3", "-std=c++17", *_build._arch_flags(torch.cuda.get_device_capability())],
    extra_ldflags=["-Wl,--exclude-libs,ALL"], build_directory="/tmp/tiny", is_python_module=False)
PY
( python3 /tmp/tiny/build.py > $L/build_tiny.log 2>&1 ) &
( time python3 -c 'from rl_kernel_ops import _build; _build.load_extension()' ) > $L/build.log 2>&1; wait
tail -3 $L/build.log; grep -i error $L/build_tiny.log | head -3
SO=$(python3 -c 'import torch; from rl_kernel_ops import _build; print(_build.build_directory(torch.cuda.get_device_capability()) / (_build.EXTENSION_NAME + ".so"))')
for so in $SO /tmp/tiny/rlk_tiny_excl.so; do
  echo "$(basename $so): NEEDED $(readelf -d $so | grep NEEDED | sed 's/.*\[\(.*\)\]/\1/' | tr '\n' ' ')"
  echo "   exported std symbols: $(nm -D --defined-only $so | grep -c ' _ZNSt\| _ZSt\| _ZNSo\| _ZNKSt\| _ZNSi'), local std symbols: $(nm $so | grep -c ' [tTbBdDrRuVW] _ZNSt6locale')"
done | tee $L/symbols.txt
for f in diag_one diag_str diag_num diag_fmt diag_throw; do
  timeout 60 python3 -c "
import torch
torch.ops.load_library('/tmp/tiny/rlk_tiny_excl.so')
try:
    getattr(torch.ops.rl_kernel_ops, '$f')(torch.ones(1), 5)
except RuntimeError as e:
    print('raised:', str(e).splitlines()[0])
" > $L/tiny_$f.txt 2>&1; echo "$f exit $? $(grep -m1 raised $L/tiny_$f.txt)"
done 2>&1 | tee $L/tiny_summary.txt
echo "at $(( $(date +%s) - T0 )) s"
tar czf $OUT/logs.tgz -C $OUT logs
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/cuda/test_rl_kernel_build.py > $L/build_test.log 2>&1; tail -2 $L/build_test.log
timeout 260 python3 -m pytest -q -p no:cacheprovider tests/cuda > $L/cuda_tests.log 2>&1; tail -2 $L/cuda_tests.log
echo "done at $(( $(date +%s) - T0 )) s"
tar czf $OUT/logs.tgz -C $OUT logs
