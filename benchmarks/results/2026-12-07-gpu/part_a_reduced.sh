#!/bin/bash
# 2026-12-07 part A, reduced to the device time left: LJ75 from lattice-searched starts (seed 0), the main
# job LJ38 (seed 0), each a fresh process with empty compile caches, then the JAX path's GPU tests.
export PYTHONPATH=.
mkdir -p $OUT/part_a
{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; python -c "import jax; print('jax', jax.__version__)"; nproc; cat /proc/loadavg; } > $OUT/part_a/environment.txt 2>&1
timeout 170 python -m benchmarks optimize --device cuda --cases lj75 --seeds 0 --out $OUT/part_a/lj75 > $OUT/part_a/lj75.log 2>&1
tail -3 $OUT/part_a/lj75.log
timeout 110 python -m benchmarks optimize --device cuda --cases lj --seeds 0 --out $OUT/part_a/lj38 > $OUT/part_a/lj38.log 2>&1
tail -3 $OUT/part_a/lj38.log
grep -h '"case": "lj' $OUT/part_a/lj75.log $OUT/part_a/lj38.log | cut -c1-700
timeout 140 python -m pytest -q -p no:cacheprovider -n 8 tests/jax tests/research > $OUT/part_a/tests_jax.log 2>&1
tail -3 $OUT/part_a/tests_jax.log
