#!/bin/bash
# 2026-12-07 (second session), the last device call, cut to ~170 s: JAX's GPU start-up alone, the
# main job (LJ38, FIRE, 16384 walkers, seed 0) with each layout of minimize (fresh processes, empty
# caches), then the optimize GPU tests (XLA's preallocation off: part C's workers ran out of memory).
export PYTHONPATH=. PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
R=$OUT/e; mkdir -p $R
{ date -u; nvidia-smi -L; nproc; cat /proc/loadavg; git log --oneline -1; } > $R/environment.txt 2>&1
python -c "import time; t=time.perf_counter(); import jax; a=time.perf_counter(); jax.devices(); b=time.perf_counter(); import jax.numpy as jnp; jnp.ones(3).block_until_ready(); print(f'import jax {a-t:.2f} s, jax.devices() {b-a:.2f} s, first op {time.perf_counter()-b:.2f} s')" 2>&1 | tee $R/jax_start.txt
for layout in thread warp; do
  ADOFFLOAD_CACHE_DIR=$(mktemp -d) CUDA_CACHE_DISABLE=1 timeout 28 python examples/chemistry/lj_clusters.py --device cuda --atoms 38 --until-reached --time-limit 12 --seed 0 --layout $layout --out /tmp/o > $R/lj38_fire_${layout}_seed0.txt 2>&1
  echo "$layout: $(grep -E 'reached the published|^time' $R/lj38_fire_${layout}_seed0.txt | tr '\n' ' ')"
done
timeout 80 python -m pytest -q -p no:cacheprovider -n 6 tests/optimize > $R/tests.log 2>&1
grep -E "passed|failed" $R/tests.log | tail -1; grep -E "^(FAILED|ERROR)" $R/tests.log | head -10
cd $OUT && tar czf e.tgz e && rm -rf e
