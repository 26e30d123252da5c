#!/usr/bin/env bash
# Helper "halving" (issues 13/16) GPU check, under 4 minutes, from the repository root with the
# clang-IR cache .device_cache carried (the GPU machine has no clang; benchmarks/warm_clang_cache.py):
#   bash benchmarks/gpu_halving.sh        results under $OUT/halving/
# 1. benchmarks/halving.py: the block-sum VJP (CUDA source vs ours, now a static tape), the same
#    kernel with a dynamic tape and a data-dependent recurrence (counts scanned on the device).
# 2. the GPU tests of dynamic tapes: the device scan itself, JAX's dynamic-tape handler (reverse over
#    reverse on CUDA), the numpy launcher on CUDA (parity table, tapes of per-thread sizes),
#    deterministic logs (still sized on the host), CUDA-source kernels through JAX.
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
o="$OUT/halving"; mkdir -p "$o"
ADOFFLOAD_CACHE_DIR="$PWD/.device_cache" timeout 110 python3 benchmarks/halving.py --out "$o" --reps 10 \
  > "$o/bench.txt" 2>&1
echo "bench exit $?" >> "$o/bench.txt"
tail -4 "$o/bench.txt"
ADOFFLOAD_CACHE_DIR="$PWD/.device_cache" timeout 110 python3 -m pytest -q -rfEs -p no:cacheprovider \
  tests/test_tape_scan.py tests/jax/test_dynamic_tape.py tests/gpu/test_cuda_parity.py tests/gpu/test_cuda_launch.py \
  tests/determinism/test_gpu.py tests/foreign_cuda/test_jax.py \
  > "$o/tests.txt" 2>&1
echo "pytest exit $?" >> "$o/tests.txt"
tail -6 "$o/tests.txt"
