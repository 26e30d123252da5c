#!/bin/sh
# Issues #13/#16 on the H200 (under 3 minutes), from the repository root:
#   sh benchmarks/gpu_bvmap.sh        (writes under $OUT/bvmap/)
# 1. tests/blocks/test_vmap.py: jax.vmap of block kernels (values, vmap(grad), jacfwd/jacrev/hessian,
#    CUDA-source kernels); on a GPU machine JAX's default device is the GPU, so the batched block
#    kernels run through the CUDA handlers (blocks of (1, *B) threads).
# 2. tests/determinism/test_gpu_blocks.py (-s: prints the default mode's spread and both modes' times):
#    deterministic block kernels on the GPU, shared-memory adds in thread order.
OUT=${OUT:-/tmp/adoffload-out}
mkdir -p "$OUT/bvmap"
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD" PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/bvmap/gpu.txt" 2>&1
timeout 100 python3 -m pytest -q -p no:cacheprovider -rs tests/blocks/test_vmap.py > "$OUT/bvmap/vmap.txt" 2>&1
echo "vmap exit $?" >> "$OUT/bvmap/vmap.txt"
timeout 70 python3 -m pytest -q -s -p no:cacheprovider -rs tests/determinism/test_gpu_blocks.py \
  > "$OUT/bvmap/determinism.txt" 2>&1
echo "determinism exit $?" >> "$OUT/bvmap/determinism.txt"
tail -n 5 "$OUT/bvmap/vmap.txt"
grep -E "^\[determinism\]|passed|failed|error|exit" "$OUT/bvmap/determinism.txt" | tail -n 12
