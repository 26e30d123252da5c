#!/bin/bash
# 2026-12-07 part A: the main job (LJ38, three configurations) and LJ75 from lattice-searched starts,
# each run a fresh process with empty compile caches (python -m benchmarks optimize).
export PYTHONPATH=.
mkdir -p $OUT/part_a
{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; python -c "import jax; print('jax', jax.__version__)"; nproc; } > $OUT/part_a/environment.txt 2>&1
timeout 200 python -m benchmarks optimize --device cuda --cases lj75 --seeds 0 1 --out $OUT/part_a/lj75 > $OUT/part_a/lj75.log 2>&1
tail -3 $OUT/part_a/lj75.log
timeout 300 python -m benchmarks optimize --device cuda --cases lj --seeds 0 --out $OUT/part_a/lj38 > $OUT/part_a/lj38.log 2>&1
tail -3 $OUT/part_a/lj38.log
grep -h '"case": "lj"' $OUT/part_a/lj75.log $OUT/part_a/lj38.log | cut -c1-600
# the JAX path's GPU tests after the lazy forward-kernel merge (tangent calls derived at lowering)
timeout 150 python -m pytest -q -p no:cacheprovider -n 4 tests/jax tests/research tests/chemistry/test_lj75.py > $OUT/part_a/tests_jax.log 2>&1
tail -3 $OUT/part_a/tests_jax.log
