#!/usr/bin/env bash
# Lane-combined stencil atomics (codegen/lane_combining.py, issue #12's lcals_eos adjoint), one device
# call of about 3 minutes from the repository root: the GPU tests of the pass, then RAJAPerf's
# lcals_eos and lcals_hydro_1d (lean and full adjoints / primal, as run3 measured them) at 10^6 and
# 2^26. Results under $OUT/combine: tests.txt, log.txt, bench/{report.md,results.csv,results.json}.
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
out="$OUT/combine"
mkdir -p "$out"
log="$out/log.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$log" 2>&1
echo "=== tests $(date -u +%T)" >> "$log"
timeout 90 python3 -m pytest -q -p no:cacheprovider -rfE tests/gpu/test_lane_combining_cuda.py \
  tests/gpu/test_lean_cuda.py > "$out/tests.txt" 2>&1
echo "pytest exit $?" >> "$out/tests.txt"
echo "=== run.py $(date -u +%T)" >> "$log"
timeout 120 python3 benchmarks/run.py --only rajaperf --rajaperf-budget 90 --big-reps 10 --out "$out/bench" \
  --rajaperf-kernels lcals_eos lcals_hydro_1d >> "$log" 2>&1
echo "=== run.py exit $? $(date -u +%T)" >> "$log"
tail -3 "$out/tests.txt"
grep -E "adjoint|JVP|lcals" "$out/bench/report.md" 2>/dev/null | head -24
grep -E "===" "$log"
