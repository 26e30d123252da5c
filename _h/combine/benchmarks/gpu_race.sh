#!/usr/bin/env bash
# Helper "race" (issues 13/16) GPU check, under 4 minutes, from the repository root with the clang-IR
# cache .device_cache carried (the GPU machine has no clang; fill it here first with
# `ADOFFLOAD_CACHE_DIR=$PWD/.device_cache python benchmarks/warm_clang_cache.py`):
#   bash benchmarks/gpu_race.sh        results under $OUT/race/
# The shared-memory race check (codegen/shared_races.py) runs when every block kernel is made; the GPU
# tests of block kernels (ours and CUDA sources) must still pass with it: none of their kernels may
# be refused, and their results on the H200 must still match the host's.
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
o="$OUT/race"; mkdir -p "$o"
ADOFFLOAD_CACHE_DIR="$PWD/.device_cache" timeout 220 python3 -m pytest -q -rfEs -p no:cacheprovider \
  tests/blocks/test_cuda.py tests/foreign_cuda/test_gpu.py > "$o/tests.txt" 2>&1
echo "tests exit $?" >> "$o/tests.txt"
tail -5 "$o/tests.txt"
