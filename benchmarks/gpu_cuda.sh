#!/bin/sh
# CUDA C kernels (issue #16) on the H200: the host tests and the GPU tests of tests/foreign_cuda.
# Run from the repository root with PYTHONPATH=. ; results under $OUT/cuda/.
set -e
mkdir -p "$OUT/cuda"
PYTHONPATH=. python -m pytest -q -rs tests/foreign_cuda 2>&1 | tee "$OUT/cuda/pytest.txt"
