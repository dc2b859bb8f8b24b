#!/usr/bin/env bash
# 2026-12-05 (eleventh session), about 2 minutes, no carry: sm_sides.py twice (is the map stable?),
# the L2 partition each SM is near and where each probed line lives, from cold-read latencies.
set -u
export PYTHONPATH=$PWD
OUT=${OUT:-/tmp/out}; E=docs/evidence/h200/rows_fabric
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $OUT/machine.txt
for r in 1 2; do timeout 200 python3 $E/sm_sides.py $OUT/sm_sides.run$r.json > $OUT/sm_sides.run$r.txt 2>&1; echo "run $r exit $?"; grep -v "^ *$" $OUT/sm_sides.run$r.txt | tail -14 | cut -c1-400; done
