#!/usr/bin/env bash
# Next session, first call: validate 51a7a93 (tests/cuda; 132 tensors against fd8fab1's build in
# .dev/old), bench_row_ops at 4097, PDL off/on (.dev/pdl) and the min-blocks probe of .dev/exp.
# PYTHONSAFEPATH=1: no cwd on sys.path, so PYTHONPATH picks the tree (python3 -c / - put cwd first).
set -u
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; E=docs/evidence/h200; T0=$(date +%s)
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv | tee $L/machine.txt
git log -1 --format='%H %s' | cut -c1-100 | tee $L/head.txt
build='import rl_kernel_ops; print(rl_kernel_ops.__file__); from rl_kernel_ops import _build; _build.load_extension()'
O="PYTHONSAFEPATH=1 PYTHONPATH=.dev/old:$PYTHONPATH RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_old"
X="PYTHONSAFEPATH=1 PYTHONPATH=.dev/exp:$PYTHONPATH RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_exp"
D="PYTHONSAFEPATH=1 PYTHONPATH=.dev/pdl:$PYTHONPATH RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_pdl"
( env $O MAX_JOBS=5 python3 -c "$build" > $L/build_old.log 2>&1 ) &
( env $X MAX_JOBS=4 python3 -c "$build" > $L/build_exp.log 2>&1 ) &
( env $D MAX_JOBS=4 python3 -c "$build" > $L/build_pdl.log 2>&1 ) &
( time env PYTHONSAFEPATH=1 MAX_JOBS=4 python3 -c "$build" ) > $L/build.log 2>&1; wait
echo "built at $(( $(date +%s) - T0 )) s"; head -1 $L/build.log $L/build_old.log $L/build_exp.log
# programmatic dependent launch (.dev/pdl), off and on in one build, alternating
for i in 1 2 3; do
  env $D RLK_PDL=0 timeout 60 python3 .dev/graphed_nm.py pdl_off 2>&1 | grep -v Warn >> $L/pdl_ab.txt
  env $D RLK_PDL=1 timeout 60 python3 .dev/graphed_nm.py pdl_on 2>&1 | grep -v Warn >> $L/pdl_ab.txt
done
cut -c1-200 $L/pdl_ab.txt
env $X timeout 90 python3 .dev/probe_minblocks.py 1024,2048,4097,6144 > $L/probe_minblocks.txt 2>&1; cat $L/probe_minblocks.txt
for s in 4097; do
  timeout 100 python3 benchmarks/bench_row_ops.py --rows $s --out $L/bench_row_ops.s$s.json > $L/bench_row_ops.s$s.txt 2>&1
  grep "copy:\|graphed" $L/bench_row_ops.s$s.txt | cut -c1-120
done
tar czf $OUT/logs.tgz -C $OUT logs
( env $O timeout 200 python3 $E/dump_rl_kernel_bits.py dump /tmp/bits_old.pt > $L/bits_old.txt 2>&1 ) &
( env PYTHONSAFEPATH=1 timeout 200 python3 $E/dump_rl_kernel_bits.py dump /tmp/bits_new.pt > $L/bits.txt 2>&1 ) &
( env $D RLK_PDL=1 timeout 200 python3 $E/dump_rl_kernel_bits.py dump /tmp/bits_pdl.pt > $L/bits_pdl.txt 2>&1 ) &
timeout 330 python3 -m pytest -q -p no:cacheprovider tests/cuda > $L/cuda_tests.log 2>&1; wait
python3 $E/dump_rl_kernel_bits.py compare /tmp/bits_old.pt /tmp/bits_new.pt >> $L/bits.txt 2>&1; echo "compare: exit $?" >> $L/bits.txt
python3 $E/dump_rl_kernel_bits.py compare /tmp/bits_new.pt /tmp/bits_pdl.pt >> $L/bits_pdl.txt 2>&1; echo "compare: exit $?" >> $L/bits_pdl.txt
tail -2 $L/bits.txt $L/bits_pdl.txt; tail -3 $L/cuda_tests.log; echo "done at $(( $(date +%s) - T0 )) s"
tar czf $OUT/logs.tgz -C $OUT logs
