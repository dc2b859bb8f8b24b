#!/usr/bin/env bash
# Both prepared changes in one tree (smem-x forward; fold in the overlapped backward's launch, as a
# separate op not yet used): forward graphed A/B vs HEAD (.dev/head), the fold probe, 132-tensor
# bits vs HEAD, the forward's tests.
set -u
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p $L; E=docs/evidence/h200; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $L/machine.txt
build='from rl_kernel_ops import _build; _build.load_extension()'
H="PYTHONSAFEPATH=1 PYTHONPATH=.dev/head:$PYTHONPATH RL_KERNEL_OPS_BUILD_DIR=/tmp/rlk_head"
( env $H MAX_JOBS=8 python3 -c "$build" > $L/build_head.log 2>&1 ) &
( env PYTHONSAFEPATH=1 MAX_JOBS=8 python3 -c "$build" > $L/build.log 2>&1 ) ; wait
echo "built at $(el) s"; grep -iE "error" $L/build.log | head -5
for i in 1 2; do
  env $H timeout 25 python3 .dev/graphed_nm.py head 2>&1 | grep graphed >> $L/graphed_ab.txt
  env PYTHONSAFEPATH=1 timeout 25 python3 .dev/graphed_nm.py smem_x 2>&1 | grep graphed >> $L/graphed_ab.txt
done; cut -c1-260 $L/graphed_ab.txt; echo "at $(el) s"
tar czf $OUT/logs.tgz -C $OUT logs
env PYTHONSAFEPATH=1 timeout 120 python3 .dev/probe_folded.py > $L/probe_folded.txt 2>&1; cut -c1-220 $L/probe_folded.txt | tail -8
echo "probe at $(el) s"; tar czf $OUT/logs.tgz -C $OUT logs
( env $H timeout 150 python3 $E/dump_rl_kernel_bits.py dump /tmp/bits_head.pt > $L/bits_head.txt 2>&1 ) &
( env PYTHONSAFEPATH=1 timeout 150 python3 $E/dump_rl_kernel_bits.py dump /tmp/bits_new.pt > $L/bits.txt 2>&1 ) &
wait
env PYTHONSAFEPATH=1 timeout 60 python3 $E/dump_rl_kernel_bits.py compare /tmp/bits_head.pt /tmp/bits_new.pt >> $L/bits.txt 2>&1; echo "compare: exit $?" >> $L/bits.txt
tail -n 2 $L/bits.txt; echo "bits at $(el) s"; tar czf $OUT/logs.tgz -C $OUT logs
timeout 90 python3 -m pytest -q -p no:cacheprovider tests/cuda/test_rl_kernel_rows.py -k "forward or rstd" > $L/cuda_fwd_tests.log 2>&1; tail -n 1 $L/cuda_fwd_tests.log
echo "done at $(el) s"
tar czf $OUT/logs.tgz -C $OUT logs
