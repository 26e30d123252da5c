#!/bin/bash
# 2026-12-07 (second session), one device call: the main job LJ38 for seeds 0-3 (not run on the final
# tree before), LJ75 from lattice-searched starts (seed 0), the warp layout's CUDA tests and its
# benchmark against the thread layout, then the GPU tests of the optimize and JAX paths.
export PYTHONPATH=. PYTHONUNBUFFERED=1
R=$OUT/c; mkdir -p $R
{ date -u; nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; python -c "import jax; print('jax', jax.__version__)"; nproc; cat /proc/loadavg; git log --oneline -1; } > $R/environment.txt 2>&1
timeout 130 python -m benchmarks optimize --device cuda --cases lj --seeds 0 2 --time-limit 15 --out $R/lj38 > $R/lj38.log 2>&1
grep -h '"case": "lj' $R/lj38.log | cut -c1-420
timeout 140 python -m benchmarks optimize --device cuda --cases lj75 --seeds 0 --time-limit 100 --out $R/lj75 > $R/lj75.log 2>&1
grep -h '"case": "lj' $R/lj75.log | cut -c1-600
timeout 80 python -m pytest -q -p no:cacheprovider tests/optimize/test_warp_layout.py -k cuda > $R/warp_test.log 2>&1
tail -3 $R/warp_test.log
timeout 120 python benchmarks/results/2026-12-07-gpu/warp_layout.py --out $R/warp > $R/warp.log 2>&1
tail -20 $R/warp.log
timeout 80 python -m pytest -q -p no:cacheprovider -n 8 tests/optimize tests/jax tests/gpu > $R/tests.log 2>&1
grep -E "passed|failed" $R/tests.log | tail -1; grep -E "^(FAILED|ERROR)" $R/tests.log | head -20
cd $OUT && tar czf c.tgz c && rm -rf c
