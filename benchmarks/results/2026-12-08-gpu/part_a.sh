#!/bin/bash
# 2026-12-08, device call 1: JAX's GPU start-up alone; the main job (LJ38) through its benchmark
# harness, seeds 0-3, after the compile-ahead fix (the build ahead was for int32 kernels, so the first
# call built its own serially); one run under the stack sampler (where the time goes); FIRE with each
# layout; then the GPU tests of the optimize, JAX, GPU and fault paths without XLA's preallocation.
export PYTHONPATH=. PYTHONUNBUFFERED=1
R=$OUT/a; mkdir -p $R
H=benchmarks/results/2026-12-08-gpu
{ date -u; nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; python -c "import jax; print('jax', jax.__version__)"; nproc; cat /proc/loadavg; git log --oneline -1; } > $R/environment.txt 2>&1
cat $R/environment.txt | head -3
for k in 1 2; do python -c "import time; t=time.perf_counter(); import jax; a=time.perf_counter(); jax.devices(); b=time.perf_counter(); import jax.numpy as jnp; jnp.ones(3).block_until_ready(); print(f'import jax {a-t:.2f} s, jax.devices() {b-a:.2f} s, first op {time.perf_counter()-b:.2f} s')" >> $R/jax_start.txt 2>&1; done
cat $R/jax_start.txt
ADOFFLOAD_CACHE_DIR=$(mktemp -d) CUDA_CACHE_DISABLE=1 timeout 40 python $H/sample_stacks.py $R/trace_fire_seed0.txt -- examples/chemistry/lj_clusters.py --device cuda --atoms 38 --until-reached --time-limit 15 --seed 0 --out /tmp/o > $R/trace_fire_seed0.log 2>&1
grep -E "reached the published|^time" $R/trace_fire_seed0.log; sed -n '/^\[MainThread\]/,/^$/p' $R/trace_fire_seed0.txt | head -14
timeout 170 python -m benchmarks optimize --device cuda --cases lj --seeds 0 1 2 3 --time-limit 15 --out $R/lj38 > $R/lj38.log 2>&1
grep -h '"case": "lj' $R/lj38.log | python -c "import sys,json; [print(r['walkers'], r['minimizer'], r['seed'], r['reached'], r.get('steps_to_minimum'), round(r.get('time_to_minimum_s') or -1, 2), round(r['script_s'], 2)) for r in map(json.loads, sys.stdin)]"
lj() { ADOFFLOAD_CACHE_DIR=$(mktemp -d) CUDA_CACHE_DISABLE=1 timeout 30 python examples/chemistry/lj_clusters.py --device cuda --atoms 38 --until-reached --time-limit 15 --seed $1 --minimizer $2 --layout $3 --out /tmp/o > $R/lj38_$2_$3_seed$1.txt 2>&1; echo "lj38 $2 $3 seed $1: $(grep -E 'reached the published|^time' $R/lj38_$2_$3_seed$1.txt | tr '\n' ' ')"; }
for seed in 0 1; do lj $seed fire warp; done
lj 0 lbfgs warp
export XLA_PYTHON_CLIENT_PREALLOCATE=false
timeout 200 python -m pytest -q -p no:cacheprovider -n 8 tests/optimize tests/jax tests/gpu tests/reliability/test_gpu_faults.py > $R/tests.log 2>&1
grep -E "passed|failed" $R/tests.log | tail -1; grep -E "^(FAILED|ERROR)" $R/tests.log | head -20
cd $OUT && tar czf a.tgz a && rm -rf a
