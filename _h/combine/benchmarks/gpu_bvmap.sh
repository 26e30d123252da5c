#!/bin/sh
# Issues #13/#16 on the H200 (under 3 minutes), from the repository root:
#   sh benchmarks/gpu_bvmap.sh        (writes under $OUT/bvmap/)
# The GPU machine has no clang: the CUDA sources these tests compile (tests/foreign_cuda/sources.py)
# come from the carried clang-IR cache .device_cache, filled before the call with
#   ADOFFLOAD_CACHE_DIR="$PWD/.device_cache" python benchmarks/warm_clang_cache.py
# 1. tests/blocks/test_vmap.py: jax.vmap of block kernels (values, vmap(grad), jacfwd/jacrev/hessian,
#    CUDA-source kernels); on a GPU machine JAX's default device is the GPU, so the batched block
#    kernels run through the CUDA handlers (blocks of (1, *B) threads).
# 2. tests/blocks/test_deterministic_gpu.py: the CUDA-source tiled matmul's deterministic adjoint.
# 3. tests/determinism/test_gpu_blocks.py (-s: prints the default mode's spread and both modes' times):
#    deterministic block kernels on the GPU, shared-memory adds in thread order. (Its conftest gives
#    each test a fresh compile cache; it compiles no CUDA source.)
OUT=${OUT:-/tmp/adoffload-out}
mkdir -p "$OUT/bvmap"
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD" PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/bvmap/gpu.txt" 2>&1
ADOFFLOAD_CACHE_DIR="$PWD/.device_cache" timeout 100 python3 -m pytest -q -p no:cacheprovider -rs \
  tests/blocks/test_vmap.py tests/blocks/test_deterministic_gpu.py > "$OUT/bvmap/vmap.txt" 2>&1
echo "vmap exit $?" >> "$OUT/bvmap/vmap.txt"
timeout 60 python3 -m pytest -q -s -p no:cacheprovider -rs tests/determinism/test_gpu_blocks.py \
  > "$OUT/bvmap/determinism.txt" 2>&1
echo "determinism exit $?" >> "$OUT/bvmap/determinism.txt"
tail -n 5 "$OUT/bvmap/vmap.txt"
grep -E "^\[determinism\]|passed|failed|error|exit" "$OUT/bvmap/determinism.txt" | tail -n 12
