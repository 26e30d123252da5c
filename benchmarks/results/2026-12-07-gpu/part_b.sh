#!/bin/bash
# 2026-12-07, the one device call left: LJ75 from lattice-searched starts (seed 0, a fresh process with
# empty caches), the warp layout's CUDA test and its benchmark against the thread layout, then LJ38 (seed 0).
export PYTHONPATH=.
mkdir -p $OUT/part_b
{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; python -c "import jax; print('jax', jax.__version__)"; nproc; cat /proc/loadavg; git log --oneline -1; } > $OUT/part_b/environment.txt 2>&1
timeout 160 python -m benchmarks optimize --device cuda --cases lj75 --seeds 0 --out $OUT/part_b/lj75 > $OUT/part_b/lj75.log 2>&1
tail -2 $OUT/part_b/lj75.log; grep -h '"case": "lj' $OUT/part_b/lj75.log | cut -c1-700
timeout 90 python -m pytest -q -p no:cacheprovider tests/optimize/test_warp_layout.py -k cuda > $OUT/part_b/warp_test.log 2>&1
tail -2 $OUT/part_b/warp_test.log
timeout 150 python benchmarks/results/2026-12-07-gpu/warp_layout.py --out $OUT/part_b/warp > $OUT/part_b/warp.log 2>&1
tail -25 $OUT/part_b/warp.log
timeout 100 python -m benchmarks optimize --device cuda --cases lj --seeds 0 --out $OUT/part_b/lj38 > $OUT/part_b/lj38.log 2>&1
tail -2 $OUT/part_b/lj38.log; grep -h '"case": "lj' $OUT/part_b/lj38.log | cut -c1-700
