#!/usr/bin/env bash
# Issue #16 (helper cudaops): the CUDA-source kernels on the GPU, from the repository root, under 3 minutes:
#   bash benchmarks/gpu_cudaops.sh        (writes $OUT/cudaops/pytest.txt)
# tests/foreign_cuda/test_gpu.py runs the corpus and the new constructs (warp votes, __syncwarp, shared
# arrays of structs, struct parameters by value) on the CUDA device: primal results against the host's,
# JVP against differences and VJP against the JVP, on the device; test_jax.py the JAX calls.
# The GPU machine has no clang: the clang-IR cache must travel as .device_cache (carry it), warmed at this
# commit where clang is (the header changed, so older caches miss):
#   ADOFFLOAD_CACHE_DIR=$PWD/.device_cache PYTHONPATH=. python benchmarks/warm_clang_cache.py
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$OUT/cudaops"
[ -d .device_cache/clang-ir ] || echo "no .device_cache/clang-ir: the CUDA sources cannot compile here" >> "$OUT/cudaops/pytest.txt"
ADOFFLOAD_CACHE_DIR="$PWD/.device_cache" timeout 170 python3 -m pytest -q -rs -p no:cacheprovider \
  tests/foreign_cuda/test_gpu.py tests/foreign_cuda/test_jax.py >> "$OUT/cudaops/pytest.txt" 2>&1
echo "pytest exit $?" >> "$OUT/cudaops/pytest.txt"
tail -5 "$OUT/cudaops/pytest.txt"
