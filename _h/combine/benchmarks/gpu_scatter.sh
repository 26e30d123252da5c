#!/usr/bin/env bash
# Issue #12 items 1/3/6 on one GPU, under 4 minutes. From the repository root:
#   PYTHONPATH=. bash benchmarks/gpu_scatter.sh            (writes $OUT/scatter/)
# 1. the deferred adjoint updates under real warps (tests/gpu/test_deferred_cuda.py);
# 2. LJ energy+forces through the energy kernel's adjoint, basic_if_quad / lcals_hydro_1d primal
#    and vjp at 2^26, the force-matching gradient: per-site shadow updates (ADOFFLOAD_DEFER_ADDS=0)
#    against updates summed per thread (default), each with a cache of its own.
set -uo pipefail
export PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH}
OUT_DIR="${OUT:-/tmp}/scatter"
mkdir -p "$OUT_DIR"
timeout 40 python -m pytest -q tests/gpu/test_deferred_cuda.py -rs 2>&1 | tail -3 | tee "$OUT_DIR/gpu_test.txt"
for mode in 0 1; do
  label=$([ "$mode" = 0 ] && echo per-site || echo deferred)
  ADOFFLOAD_DEFER_ADDS=$mode ADOFFLOAD_CACHE_DIR="$(mktemp -d)" \
    timeout 95 python benchmarks/scatter_adjoints.py --label "$label" --out "$OUT_DIR" 2>&1 | tail -20 >> "$OUT_DIR/log.txt"
done
cat "$OUT_DIR/scatter_adjoints.csv"
