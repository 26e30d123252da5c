#!/bin/bash
# 2026-12-07 (second session), device call 2: where the LJ38 main job's time goes on this machine
# (JAX's GPU start-up alone), the two layouts of minimize on the main job itself (FIRE seeds 0-1, L-BFGS
# seed 0, 16384 walkers, thread against warp, alternating, each a fresh process with empty
# caches), LJ75 with the warp layout, then the optimize/JAX/GPU tests (part C's ran out of GPU memory:
# XLA preallocated it in every worker).
export PYTHONPATH=. PYTHONUNBUFFERED=1
R=$OUT/d; mkdir -p $R
{ date -u; nvidia-smi -L; nproc; cat /proc/loadavg; git log --oneline -1; } > $R/environment.txt 2>&1
for k in 1 2; do python -c "import time; t=time.perf_counter(); import jax; a=time.perf_counter(); jax.devices(); b=time.perf_counter(); import jax.numpy as jnp; jnp.ones(3).block_until_ready(); print(f'import jax {a-t:.2f} s, jax.devices() {b-a:.2f} s, first op {time.perf_counter()-b:.2f} s')" >> $R/jax_start.txt 2>&1; done
cat $R/jax_start.txt
lj() { ADOFFLOAD_CACHE_DIR=$(mktemp -d) CUDA_CACHE_DISABLE=1 timeout 30 python examples/chemistry/lj_clusters.py --device cuda --atoms $1 --until-reached --time-limit 15 --seed $2 --minimizer $3 --layout $4 --out /tmp/o > $R/lj$1_$3_$4_seed$2.txt 2>&1; echo "lj$1 $3 $4 seed $2: $(grep -E 'reached the published' $R/lj$1_$3_$4_seed$2.txt) $(grep -oE 'basin hopping: [0-9]+/[0-9]+ \([0-9.]+ s\)' $R/lj$1_$3_$4_seed$2.txt | tail -1)"; }
for seed in 0 1; do for layout in thread warp; do lj 38 $seed fire $layout; done; done
for layout in thread warp; do lj 38 0 lbfgs $layout; done
lj 75 0 fire warp
export XLA_PYTHON_CLIENT_PREALLOCATE=false
timeout 130 python -m pytest -q -p no:cacheprovider -n 6 tests/optimize tests/jax tests/gpu > $R/tests.log 2>&1
grep -E "passed|failed" $R/tests.log | tail -1; grep -E "^(FAILED|ERROR)" $R/tests.log | head -20
cd $OUT && tar czf d.tgz d && rm -rf d
