#!/bin/sh
# CUDA C kernels (issue #16) on the H200, run from the repository root (about 4 minutes at most):
#   sh benchmarks/gpu_cuda.sh        (writes under $OUT/cuda/)
# 1. tests/foreign_cuda/test_gpu.py (the corpus on the GPU: primal vs host, JVP vs differences, VJP vs JVP)
#    and test_jax.py (on a GPU machine JAX's default backend is the GPU);
# 2. benchmarks/cuda_foreign.py: primal/JVP/VJP times of CUDA-source kernels vs the same kernels in the
#    kernel language (jitted JAX calls on the GPU), after checking that both agree.
mkdir -p "$OUT/cuda"
PYTHONPATH=. timeout 130 python -m pytest -q -rs tests/foreign_cuda/test_gpu.py tests/foreign_cuda/test_jax.py \
    > "$OUT/cuda/pytest.txt" 2>&1
echo "pytest exit $?" >> "$OUT/cuda/pytest.txt"
tail -3 "$OUT/cuda/pytest.txt"
PYTHONPATH=. timeout 100 python benchmarks/cuda_foreign.py --out "$OUT/cuda" --reps 10 > "$OUT/cuda/bench.txt" 2>&1
echo "bench exit $?" >> "$OUT/cuda/bench.txt"
tail -6 "$OUT/cuda/bench.txt"
