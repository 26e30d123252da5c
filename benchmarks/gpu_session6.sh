#!/usr/bin/env bash
# Session 6's GPU calls (each under 10 minutes), from the repository root with .device_cache (clang's
# IR: the GPU machine has no clang) and .whl (jax-md) carried:
#   bash benchmarks/gpu_session6.sh tests    every GPU test folder at the merged code
#   bash benchmarks/gpu_session6.sh benches  RAJAPerf's eos, hydro_1d and trap_int rows; a device trace of
#                                            the 10,976-atom force-matching gradient
# (The "spread" stage of commit 1fb12c0 measured small-grid spreading: results/2026-12-01-h200-session6.)
# Each stage writes under $OUT/<stage>/ and packs it into $OUT/<stage>.tgz.
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export ADOFFLOAD_CACHE_DIR="$PWD/.device_cache"
stage=$1
base=$OUT
export OUT="$base/$stage"
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt" 2>&1
python3 -c "import jax, llvmlite, numpy; print('jax', jax.__version__, 'llvmlite', llvmlite.__version__, 'numpy', numpy.__version__)" >> "$OUT/gpu.txt" 2>&1
echo "commit ${GIT_REV:-unknown}" >> "$OUT/gpu.txt"
if ls .whl/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    > /dev/null 2>&1 && export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi

case "$stage" in
tests)
  timeout 80 python3 -m pytest -q -rs -p no:cacheprovider tests/foreign_cuda > "$OUT/foreign_cuda.txt" 2>&1
  echo "pytest exit $?" >> "$OUT/foreign_cuda.txt"; tail -2 "$OUT/foreign_cuda.txt"
  timeout 300 python3 -m pytest -q -p no:cacheprovider -rfE tests/gpu tests/codegen/test_cuda_run.py \
    tests/codegen/test_reductions_cuda.py tests/codegen/test_reductions.py tests/determinism tests/reliability/test_integer_division.py \
    tests/blocks tests/jax tests/test_readme.py tests/test_tape_scan.py tests/chemistry/test_fused_forces.py \
    > "$OUT/gpu_tests.txt" 2>&1
  echo "pytest exit $?" >> "$OUT/gpu_tests.txt"; tail -4 "$OUT/gpu_tests.txt"
  ;;
benches)
  # the kernels this session changed: lane-combined stencil adjoints, trap_int with ado.rsqrt
  timeout 110 python3 benchmarks/run.py --only rajaperf --rajaperf-budget 95 --big-reps 10 --out "$OUT/rajaperf" \
    --rajaperf-kernels lcals_eos lcals_hydro_1d basic_trap_int basic_trap_int_rsqrt > "$OUT/rajaperf_log.txt" 2>&1
  echo "run.py exit $?" >> "$OUT/rajaperf_log.txt"
  grep -E "lcals_eos|hydro|trap_int" "$OUT/rajaperf/report.md" | grep -E "^\| n=" | head -20
  # where the time of the 10,976-atom force-matching gradient goes: a device trace (jax.profiler)
  timeout 100 python3 benchmarks/fm_trace.py --out "$OUT/fm_trace" > "$OUT/fm_trace_log.txt" 2>&1
  echo "fm_trace exit $?" >> "$OUT/fm_trace_log.txt"; tail -25 "$OUT/fm_trace_log.txt"
  ;;
esac
tar czf "$base/$stage.tgz" -C "$base" "$stage"
