#!/usr/bin/env bash
# Session 4's GPU batch in two device calls (each under 10 minutes), from the repository root:
#   bash benchmarks/gpu_session4.sh benches    reductions/RAJAPerf, block kernels, CUDA-source kernels
#   bash benchmarks/gpu_session4.sh tests      the GPU tests, the chemistry comparison, scatter adjoints
#   bash benchmarks/gpu_session4.sh final      the GPU tests at the merged code, scatter adjoints (per-site vs summed)
# Each stage has its own time limit and writes its results under $OUT before the next starts.
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# The GPU tests: from_cuda's (its clang IR comes from the carried cache .device_cache: the GPU
# machine has no clang), then the GPU test folders; $1 and $2 are their time limits.
gpu_tests() {
  mkdir -p "$OUT/tests"
  ADOFFLOAD_CACHE_DIR="$PWD/.device_cache" timeout "$1" python3 -m pytest -q -rs -p no:cacheprovider \
    tests/foreign_cuda/test_gpu.py tests/foreign_cuda/test_jax.py > "$OUT/tests/foreign_cuda.txt" 2>&1
  echo "pytest exit $?" >> "$OUT/tests/foreign_cuda.txt"
  tail -3 "$OUT/tests/foreign_cuda.txt"
  timeout "$2" python3 -m pytest -q -p no:cacheprovider -rfE tests/gpu tests/codegen/test_cuda_run.py \
    tests/codegen/test_reductions_cuda.py tests/determinism/test_gpu.py tests/reliability/test_integer_division.py \
    tests/blocks tests/jax tests/test_readme.py > "$OUT/tests/gpu_tests.txt" 2>&1
  echo "pytest exit $?" >> "$OUT/tests/gpu_tests.txt"
  tail -5 "$OUT/tests/gpu_tests.txt"
}

case "$1" in
benches)
  TESTS_TIMEOUT=45 BENCH_TIMEOUT=150 RAJAPERF_BUDGET=105 bash benchmarks/gpu_reduce.sh
  o="$OUT/tiles"; mkdir -p "$o"
  timeout 120 python3 benchmarks/blocks.py --out "$o" --reps 10 > "$o/log.txt" 2>&1
  echo "=== blocks exit $?" >> "$o/log.txt"
  ADOFFLOAD_CACHE_DIR=/tmp/adoffload-unroll2000 timeout 35 python3 benchmarks/blocks.py --out "$o/unroll2000" \
    --reps 10 --only matmul --matmul-sizes 4096 --matmul-vjp-sizes 4096 --unroll-threshold 2000 >> "$o/log.txt" 2>&1
  echo "=== unroll2000 exit $?" >> "$o/log.txt"
  mkdir -p "$OUT/cuda"
  timeout 100 python3 -m pytest -q -rs -p no:cacheprovider tests/foreign_cuda/test_gpu.py tests/foreign_cuda/test_jax.py \
    > "$OUT/cuda/pytest.txt" 2>&1
  echo "pytest exit $?" >> "$OUT/cuda/pytest.txt"
  timeout 95 python3 benchmarks/cuda_foreign.py --out "$OUT/cuda" --reps 10 > "$OUT/cuda/bench.txt" 2>&1
  echo "bench exit $?" >> "$OUT/cuda/bench.txt"
  tail -3 "$OUT/cuda/pytest.txt"; tail -8 "$OUT/cuda/bench.txt"; grep -E "===|rror" "$o/log.txt" | tail -8
  ;;
tests)
  gpu_tests 90 230
  if ls .whl/*.whl > /dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
      > /dev/null 2>&1 && export PYTHONPATH="$PYTHONPATH:/tmp/site"
  fi
  timeout 200 python3 benchmarks/chemistry.py --device cuda --reps 10 \
    --sides adoffload jax "jax-md Dense" cuda --out "$OUT/chem" > "$OUT/chem_log.txt" 2>&1
  echo "chemistry exit $?" >> "$OUT/chem_log.txt"
  grep -E "^\| (ratio|adoffload|jax|plain)" "$OUT/chem/chemistry.md" 2>/dev/null | head -30
  [ -f benchmarks/gpu_scatter.sh ] && timeout 100 bash benchmarks/gpu_scatter.sh > "$OUT/scatter_log.txt" 2>&1
  ;;
final)
  gpu_tests 60 200
  bash benchmarks/gpu_scatter.sh 2>&1 | tail -20
  ;;
esac
