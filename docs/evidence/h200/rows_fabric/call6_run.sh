#!/usr/bin/env bash
# 2026-12-05 (eleventh session), about 2 minutes, no carry: homes.py, the home side of 2 x 1024
# consecutive 128-byte lines (how finely the partitions interleave the addresses).
set -u
OUT=${OUT:-/tmp/out}; E=docs/evidence/h200/rows_fabric
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee $OUT/machine.txt
timeout 200 python3 $E/homes.py $OUT/homes.json > $OUT/homes.txt 2>&1; echo "exit $?"
grep -v "^ *$" $OUT/homes.txt | tail -12 | cut -c1-300
