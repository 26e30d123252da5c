#!/bin/sh
# CUDA C kernels (issue #16) on the H200, run from the repository root:
#   sh benchmarks/gpu_cuda.sh        (writes under $OUT/cuda/)
# 1. tests/foreign_cuda (host-CPU tests plus test_gpu.py: primal vs host and derivative checks on the GPU);
# 2. benchmarks/cuda_foreign.py: primal/JVP/VJP times of CUDA-source kernels vs the same kernels in the
#    kernel language (JAX calls on the GPU), after checking that both agree.
mkdir -p "$OUT/cuda"
PYTHONPATH=. timeout 150 python -m pytest -q -rs tests/foreign_cuda > "$OUT/cuda/pytest.txt" 2>&1
echo "pytest exit $?" >> "$OUT/cuda/pytest.txt"
tail -3 "$OUT/cuda/pytest.txt"
PYTHONPATH=. timeout 80 python benchmarks/cuda_foreign.py --out "$OUT/cuda" --reps 10 > "$OUT/cuda/bench.txt" 2>&1
echo "bench exit $?" >> "$OUT/cuda/bench.txt"
tail -5 "$OUT/cuda/bench.txt"
