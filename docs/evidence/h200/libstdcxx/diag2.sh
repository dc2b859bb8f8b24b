#!/usr/bin/env bash
# Second look: which std:: symbols the extension defines and needs, and whether linking libstdc++
# explicitly (no --as-needed) stops a number-formatting TORCH_CHECK from killing the process.
set -u
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader > $L/machine.txt
sed -n '/^cat > rl_kernel_ops\/csrc\/zz_diag.cu/,/^CU$/p' .dev/diag_check.sh | sed '1d;$d' > rl_kernel_ops/csrc/zz_diag.cu
mkdir -p /tmp/tiny && cp rl_kernel_ops/csrc/zz_diag.cu /tmp/tiny/zz_diag.cu
cat > /tmp/build.py <<'PY'
import sys, glob, torch
from torch.utils import cpp_extension
from rl_kernel_ops import _build
which, ld = sys.argv[1], sys.argv[2:]
srcs = sorted(glob.glob("rl_kernel_ops/csrc/*.cu")) if which == "full" else ["/tmp/tiny/zz_diag.cu"]
name = f"rlk_{which}_{'ld' if ld else 'plain'}"
cpp_extension.load(name=name, sources=srcs, extra_cflags=["-O3", "-std=c++17"],
    extra_cuda_cflags=["-O3", "-std=c++17", "-lineinfo", *_build._arch_flags(torch.cuda.get_device_capability())],
    extra_ldflags=ld, build_directory=f"/tmp/b_{name}", is_python_module=False, verbose=True)
print("built", name)
PY
for d in /tmp/b_rlk_full_plain /tmp/b_rlk_full_ld /tmp/b_rlk_tiny_plain /tmp/b_rlk_tiny_ld; do mkdir -p $d; done
( python3 /tmp/build.py full > $L/build_full_plain.log 2>&1 ) &
( python3 /tmp/build.py full -Wl,--no-as-needed -lstdc++ > $L/build_full_ld.log 2>&1 ) &
( python3 /tmp/build.py tiny > $L/build_tiny_plain.log 2>&1; python3 /tmp/build.py tiny -Wl,--no-as-needed -lstdc++ > $L/build_tiny_ld.log 2>&1 ) &
wait
grep -h "^built\|rror" $L/build_*.log | head; grep -h -m1 "\-shared" $L/build_full_plain.log | cut -c1-600 > $L/link_line.txt; cat $L/link_line.txt
T=$(python3 -c 'import torch, os; print(os.path.dirname(torch.__file__))')/lib
for v in full_plain full_ld tiny_plain tiny_ld; do
  SO=/tmp/b_rlk_$v/rlk_$v.so
  echo "== $v NEEDED: $(readelf -d $SO | grep NEEDED | sed 's/.*\[\(.*\)\]/\1/' | tr '\n' ' ')"
  echo "   std symbols defined: $(nm -D --defined-only $SO | grep -c ' _ZNSt\| _ZSt\| _ZNSo\| _ZNKSt\| _ZNSi')"
  nm -D --defined-only $SO | grep -E 'locale|num_put|_ZNSo|ios_base|basic_ostringstream' | head -8
  for f in diag_one diag_str diag_num diag_fmt diag_throw; do
    timeout 60 python3 -c "
import torch
torch.ops.load_library('$SO')
try:
    getattr(torch.ops.rl_kernel_ops, '$f')(torch.ones(1), 5)
except RuntimeError as e:
    print('raised:', str(e).splitlines()[0])
" > $L/run_${v}_$f.txt 2>&1; echo "   $f exit $? $(grep -m1 raised $L/run_${v}_$f.txt)"
  done
done 2>&1 | tee $L/summary.txt
echo "== which libraries define the ostream/num_put symbols the plain build needs"
SO=/tmp/b_rlk_full_plain/rlk_full_plain.so
nm -D --undefined-only $SO | grep -E '_ZNSo|num_put|locale|ostringstream|_ZNSt7__cxx1119basic_ostringstream' | head -12 | tee $L/undef.txt
for s in $(awk '{print $2}' $L/undef.txt | head -12); do
  for lib in $T/libc10.so $T/libc10_cuda.so $T/libtorch_cpu.so $T/libtorch_cuda.so /lib/x86_64-linux-gnu/libstdc++.so.6; do
    nm -D --defined-only $lib 2>/dev/null | grep -q " $s$" && echo "$s in $(basename $lib)"
  done
done | tee $L/providers.txt
timeout 60 python3 -c "
import torch
torch.ops.load_library('/tmp/b_rlk_full_ld/rlk_full_ld.so')
ops = torch.ops.rl_kernel_ops
B = torch.bfloat16
try:
    ops.adaln_proj_forward(torch.ones(2, 8, dtype=B, device='cuda'), torch.ones(16, 9, dtype=B, device='cuda'), torch.ones(16, dtype=B, device='cuda'))
except RuntimeError as e:
    print('adaln_shape raised:', str(e).splitlines()[0])
try:
    ops.row_sort_plan(torch.zeros(64, dtype=torch.long, device='cuda'), 257, 64)
except RuntimeError as e:
    print('sort257 raised:', str(e).splitlines()[0])
" > $L/real_checks_ld.txt 2>&1; echo "real checks, explicit libstdc++: exit $?"; cat $L/real_checks_ld.txt | tail -3
tar czf $OUT/logs.tgz -C $OUT logs
