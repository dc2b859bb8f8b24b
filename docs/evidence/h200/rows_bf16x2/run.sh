#!/usr/bin/env bash
# bf16x2 forms in norm_modulate (forward's 1 + scale, product, + shift; backward's 1 + scale) and the
# paired conversion in pack4: exhaustive identity check, then HEAD (.dev/head) against the tree.
set -u
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; E=docs/evidence/h200; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" | tee -a $L/machine.txt
build='from rl_kernel_ops import _build; _build.load_extension()'
H="PYTHONSAFEPATH=1 PYTHONPATH=.dev/head:$PYTHONPATH RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_head"
N="PYTHONSAFEPATH=1"
( env $H MAX_JOBS=8 python3 -c "$build" > $L/build_head.log 2>&1 ) &
( env $N MAX_JOBS=8 python3 -c "$build" > $L/build_new.log 2>&1 ) &
( nvcc -O3 -arch=sm_90a $E/rows_bf16x2/check_bf16x2.cu -o /tmp/check_bf16x2 && timeout 60 /tmp/check_bf16x2 > $L/check_bf16x2.txt 2>&1; echo "exit $?" >> $L/check_bf16x2.txt ) &
wait
echo "built at $(el) s"; grep -i " error" $L/build_new.log | head -5; cat $L/check_bf16x2.txt
for i in 1 2 3; do
  env $H timeout 30 python3 .dev/graphed_nm.py head 2>&1 | grep graphed >> $L/graphed_ab.txt
  env $N timeout 30 python3 .dev/graphed_nm.py bf16x2 2>&1 | grep graphed >> $L/graphed_ab.txt
done; cut -c1-240 $L/graphed_ab.txt; echo "at $(el) s"
tar czf $OUT/logs.tgz -C $OUT logs
( env $H timeout 150 python3 $E/dump_rl_kernel_bits.py dump /tmp/bits_head.pt > $L/bits_head.txt 2>&1 ) &
( env $N timeout 150 python3 $E/dump_rl_kernel_bits.py dump /tmp/bits_new.pt > $L/bits.txt 2>&1 ) &
wait
env $N timeout 60 python3 $E/dump_rl_kernel_bits.py compare /tmp/bits_head.pt /tmp/bits_new.pt >> $L/bits.txt 2>&1; echo "compare: exit $?" >> $L/bits.txt
tail -n 2 $L/bits.txt; echo "at $(el) s"
tar czf $OUT/logs.tgz -C $OUT logs
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/cuda > $L/cuda_tests.log 2>&1; tail -n 2 $L/cuda_tests.log; echo "at $(el) s"
tar czf $OUT/logs.tgz -C $OUT logs
env $N timeout 70 python3 benchmarks/bench_row_ops.py --rows 4097 --out $L/bench_row_ops.s4097.json > $L/bench_row_ops.s4097.txt 2>&1
grep -iE "norm_modulate|copy" $L/bench_row_ops.s4097.txt | cut -c1-200 | head -8
echo "done at $(el) s"
tar czf $OUT/logs.tgz -C $OUT logs
