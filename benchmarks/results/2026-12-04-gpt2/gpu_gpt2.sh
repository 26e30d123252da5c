#!/bin/bash
# GPU check of branch gpt2's reverse-mode changes (tape fields at natural size, loop invariants taped
# once per loop at its exits, lane moves recomputed, loads of unwritten arguments re-loaded): the
# CUDA tests that build reverse kernels with static and dynamic tapes. No clang there: C tests skip.
# Run from the repo root: PYTHONPATH=. bash benchmarks/results/2026-12-04-gpt2/gpu_gpt2.sh ; results in $OUT/gpu_gpt2.txt
set -u
OUT=${OUT:-/tmp/gpu_gpt2_out}; mkdir -p "$OUT"
nvidia-smi > "$OUT/nvidia_smi.txt" 2>&1
JOBS=""; python -c "import xdist" 2>/dev/null && JOBS="-n 8"
PYTHONPATH=. timeout 560 python -m pytest -q $JOBS -p no:cacheprovider \
  tests/gpu/test_device_path.py tests/gpu/test_table.py tests/gpu/test_deferred_cuda.py tests/gpu/test_lean_cuda.py \
  tests/jax/test_dynamic_tape.py tests/test_tape_scan.py tests/blocks/test_cuda.py tests/ad/test_reverse_gpu_code.py \
  tests/ad/test_second_order.py tests/enzyme/test_tape.py \
  > "$OUT/gpu_gpt2.txt" 2>&1
echo "rc=$?" >> "$OUT/gpu_gpt2.txt"
tail -5 "$OUT/gpu_gpt2.txt"
