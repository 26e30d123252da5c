#!/bin/bash
# Issue 31 item 2 (tapesize): the vjp launch of a kernel with a dynamic tape on the GPU, its counting
# kernel the full primal ("full") vs the control slice ("slice"). Each variant in its own process and
# compile-cache folder (the cache key is the source digest; the "full" variant monkeypatches).
# Run from the repo root: PYTHONPATH=. bash tmp_probe/gpu_tapesize.sh ; results in $OUT/gpu_tapesize.txt
set -e
OUT=${OUT:-/tmp}
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu_tapesize.txt"
for variant in full slice; do
  ADOFFLOAD_CACHE_DIR=$(mktemp -d) PYTHONPATH=. python tmp_probe/gpu_tapesize.py $variant 2>&1 | tee -a "$OUT/gpu_tapesize.txt"
done
