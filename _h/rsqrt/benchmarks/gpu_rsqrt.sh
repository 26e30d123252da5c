#!/usr/bin/env bash
# ado.rsqrt on the GPU (helper "rsqrt", session 6): one device call of about 2-3 minutes, run from the
# repository root. The GPU tests of ado.rsqrt (device vs host ulp distance, special values, an adjoint
# through it) and libdevice math, then RAJAPerf's trap_int in its IEEE form (basic_trap_int: 1.0 / sqrt)
# and with the device rsqrt (basic_trap_int_rsqrt), at 10^6 and 2^26: ours vs the tuned CUDA kernels
# vs XLA (which rewrites 1/sqrt into rsqrt in both), with the report's "tuned CUDA time / ours" and
# "XLA time / ours" rows. Results under $OUT/rsqrt: log.txt, bench/{report.md,results.csv,results.json}.
# TESTS_TIMEOUT (60 s), BENCH_TIMEOUT (150 s) and BIG_REPS (10) adjust it.
export PYTHONUNBUFFERED=1
export XLA_PYTHON_CLIENT_PREALLOCATE=false      # JAX takes memory as it goes; our runtime and CUDA share the GPU
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
out="$OUT/rsqrt"
mkdir -p "$out"
log="$out/log.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$log" 2>&1
echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)" >> "$log"
echo "=== gpu tests $(date -u +%T)" >> "$log"
timeout "${TESTS_TIMEOUT:-60}" python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_rsqrt.py \
  "tests/codegen/test_cuda_run.py::test_libdevice_math" >> "$log" 2>&1
echo "=== gpu tests exit $? $(date -u +%T)" >> "$log"
timeout "${BENCH_TIMEOUT:-150}" python3 benchmarks/run.py --only rajaperf \
  --rajaperf-kernels basic_trap_int basic_trap_int_rsqrt --big-reps "${BIG_REPS:-10}" --out "$out/bench" >> "$log" 2>&1
echo "=== run.py exit $? $(date -u +%T)" >> "$log"
grep -E "passed|failed|error|ulp" "$log" | head -12
grep -E "trap_int" "$out/bench/report.md" 2>/dev/null | head -30
grep -E "===" "$log"
