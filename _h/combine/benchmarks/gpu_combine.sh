#!/usr/bin/env bash
# Lane-combined stencil atomics (codegen/lane_combining.py, issue #12's lcals_eos adjoint), one device
# call of under 4 minutes from the repository root: the GPU tests of the pass (and the lean kernels'),
# then RAJAPerf's lcals_eos and lcals_hydro_1d (lean and full adjoints / primal, as run3 measured them)
# at 10^6 and 2^26, with the pass (bench_on) and, for lcals_eos, without it (bench_off:
# ADOFFLOAD_LANE_COMBINING=0).
# Results under $OUT/combine: tests.txt, log.txt, bench_{on,off}/{report.md,results.csv,results.json}.
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
out="$OUT/combine"
mkdir -p "$out"
log="$out/log.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$log" 2>&1
echo "=== tests $(date -u +%T)" >> "$log"
timeout 80 python3 -m pytest -q -p no:cacheprovider -rfEs tests/gpu/test_lane_combining_cuda.py \
  tests/gpu/test_lean_cuda.py > "$out/tests.txt" 2>&1
echo "pytest exit $?" >> "$out/tests.txt"
# run3 took about 21 s (lcals_eos) and 12 s (lcals_hydro_1d) for both sizes; "off" measures lcals_eos only
echo "=== run.py lane combining on $(date -u +%T)" >> "$log"
timeout 75 python3 benchmarks/run.py --only rajaperf --rajaperf-budget 55 --big-reps 10 --out "$out/bench_on" \
  --rajaperf-kernels lcals_eos lcals_hydro_1d >> "$log" 2>&1
echo "=== run.py exit $? $(date -u +%T)" >> "$log"
echo "=== run.py lane combining off $(date -u +%T)" >> "$log"
ADOFFLOAD_LANE_COMBINING=0 timeout 55 python3 benchmarks/run.py --only rajaperf --rajaperf-budget 35 --big-reps 10 \
  --out "$out/bench_off" --rajaperf-kernels lcals_eos >> "$log" 2>&1
echo "=== run.py exit $? $(date -u +%T)" >> "$log"
tail -3 "$out/tests.txt"
for mode in on off; do echo "--- lane combining $mode"; grep -E "adjoint|JVP|lcals" "$out/bench_$mode/report.md" 2>/dev/null | head -16; done
grep -E "===" "$log"
