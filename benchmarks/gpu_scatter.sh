#!/usr/bin/env bash
# Issue #12 items 3/6 on one GPU (under 4 minutes): LJ energy+forces through the energy kernel's
# adjoint and the force-matching gradient, per-site shadow updates (ADOFFLOAD_DEFER_ADDS=0) against
# updates summed per thread (default); basic_if_quad / lcals_hydro_1d primal and vjp at 2^26.
# Run from the repository root: PYTHONPATH=. bash benchmarks/gpu_scatter.sh   (writes $OUT/scatter/)
set -euo pipefail
OUT_DIR="${OUT:-/tmp}/scatter"
mkdir -p "$OUT_DIR"
for mode in 0 1; do
  label=$([ "$mode" = 0 ] && echo per-site || echo deferred)
  ADOFFLOAD_DEFER_ADDS=$mode ADOFFLOAD_CACHE_DIR="$(mktemp -d)" PYTHONPATH=. \
    timeout 110 python benchmarks/scatter_adjoints.py --label "$label" --out "$OUT_DIR" 2>&1 | tee -a "$OUT_DIR/log.txt"
done
