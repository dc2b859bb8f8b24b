#!/usr/bin/env bash
# Written in the eighth session as rows_pdl/next_run.sh; ran 2026-12-05 (ninth session) on an H100
# from the tree of 26f7e42 as `bash docs/evidence/h200/rows_pdl/next_run.sh` (348 s, no carry): the
# decisive call for ../rows_dx_regs/dx_recompute.diff. HEAD's
# rl_kernel_ops is copied to /tmp/head, then the diff is applied to the tree. The 132-tensor bits
# of both builds compared, bench_row_ops --rows 4097 tree / HEAD / tree (each process measures its
# own copy bandwidth), graphed fwd+bwd at S = 3000 for both, then the row tests of tests/cuda on
# the tree to their summary line.
set -u
export PYTHONPATH=$PWD
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; E=docs/evidence/h200; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
keep() { echo "$1 at $(el) s"; tar czf $OUT/logs.tgz -C $OUT logs; }
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
mkdir -p /tmp/head && cp -r rl_kernel_ops /tmp/head/ || exit 3
git apply $E/rows_dx_regs/dx_recompute.diff 2>/dev/null || patch -s -p1 < $E/rows_dx_regs/dx_recompute.diff || exit 3
build='from rl_kernel_ops import _build; _build.load_extension()'
H="PYTHONSAFEPATH=1 PYTHONPATH=/tmp/head:$PYTHONPATH RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_head"
( env $H MAX_JOBS=8 python3 -c "$build" > $L/build_head.log 2>&1 ) &
( env PYTHONSAFEPATH=1 MAX_JOBS=8 python3 -c "$build" > $L/build.log 2>&1 ) ; wait
grep -iE " error" $L/build*.log | head -5; keep built
( env $H timeout 100 python3 $E/dump_rl_kernel_bits.py dump /tmp/bits_head.pt > $L/bits_head.txt 2>&1 ) &
( env PYTHONSAFEPATH=1 timeout 100 python3 $E/dump_rl_kernel_bits.py dump /tmp/bits_new.pt > $L/bits.txt 2>&1 ) ; wait
env PYTHONSAFEPATH=1 timeout 30 python3 $E/dump_rl_kernel_bits.py compare /tmp/bits_head.pt /tmp/bits_new.pt >> $L/bits.txt 2>&1
echo "compare: exit $?" >> $L/bits.txt; tail -n 2 $L/bits.txt; keep bits
bench() {  # name, then the environment's assignments
  local n=$1; shift
  env "$@" timeout 90 python3 benchmarks/bench_row_ops.py --rows 4097 --out $L/bench_row_ops.$n.s4097.json > $L/bench_row_ops.$n.s4097.txt 2>&1
}
bench tree; bench head PYTHONPATH=/tmp/head:$PYTHONPATH RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_head; bench tree2
grep -h -E "copy:|norm_modulate +graphed" $L/bench_row_ops.*.txt | cut -c1-120; keep bench
env $H timeout 40 python3 $E/rows_fold/fwd_ab.py head 3000 2>&1 | grep graphed >> $L/fwd_ab.txt
env PYTHONSAFEPATH=1 timeout 40 python3 $E/rows_fold/fwd_ab.py tree 3000 2>&1 | grep graphed >> $L/fwd_ab.txt
cut -c1-110 $L/fwd_ab.txt; keep ab
env PYTHONSAFEPATH=1 timeout 300 python3 -m pytest -q -p no:cacheprovider tests/cuda/test_rl_kernel_rows.py > $L/cuda_rows_tests.log 2>&1
echo "pytest exit $?" >> $L/cuda_rows_tests.log; tail -n 2 $L/cuda_rows_tests.log; keep done
