#!/usr/bin/env bash
# Issue 12 item 5 (reductions at bandwidth) on the GPU, one device call of about 4 minutes, run from the
# repository root: the GPU tests of the grid-stride reduction entries, then the copy bandwidth and the
# RAJAPerf subset (reductions first; 10^6 and 2^26 reported separately; ours vs nvcc CUDA, tuned CUDA
# reductions and f64 XLA; JVP and adjoint over primal; medians with IQR/min/max; memory freed per case;
# failed and not-run cases as rows). The RAJAPerf suite stops starting cases after its budget, so
# the stage always ends with its report written. Results under $OUT/reduce: log.txt,
# bench/{report.md,results.csv,results.json,rajaperf.png}. TESTS_TIMEOUT (55 s), BENCH_TIMEOUT (190 s),
# RAJAPERF_BUDGET (140 s: cases not started by then are "not run" rows) and BIG_REPS (10) adjust it.
export PYTHONUNBUFFERED=1
export XLA_PYTHON_CLIENT_PREALLOCATE=false      # JAX takes memory as it goes; our runtime and CUDA share the GPU
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
out="$OUT/reduce"
mkdir -p "$out"
log="$out/log.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$log" 2>&1
echo "=== gpu tests $(date -u +%T)" >> "$log"
timeout "${TESTS_TIMEOUT:-55}" python3 -m pytest -q -p no:cacheprovider tests/gpu/test_grid_stride_launch.py \
  tests/codegen/test_reductions_cuda.py "tests/gpu/test_vectorized_launch.py::test_branchy_body_and_uniform_atomic_reduction" \
  "tests/gpu/test_vectorized_launch.py::test_adjoint_reductions" >> "$log" 2>&1
echo "=== gpu tests exit $? $(date -u +%T)" >> "$log"
timeout "${BENCH_TIMEOUT:-190}" python3 benchmarks/run.py --only bandwidth rajaperf \
  --rajaperf-budget "${RAJAPERF_BUDGET:-140}" --big-reps "${BIG_REPS:-10}" --out "$out/bench" >> "$log" 2>&1
echo "=== run.py exit $? $(date -u +%T)" >> "$log"
grep -E "passed|failed|error" "$log" | head -5
grep -E "stream_dot|pi_reduce|trap_int|reduce3|geomean|GB/s" "$out/bench/report.md" 2>/dev/null | head -40
grep -E "===" "$log"
