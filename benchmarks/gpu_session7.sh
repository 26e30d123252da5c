#!/usr/bin/env bash
# Session 7's GPU calls (each under 10 minutes), from the repository root with .device_cache (clang's
# IR: the GPU machine has no clang; fill it with benchmarks/warm_clang_cache.py and by running
# tests/foreign_cuda, tests/blocks, tests/determinism, tests/gpu here with the same ADOFFLOAD_CACHE_DIR)
# and .whl (jax-md, pytest-xdist) carried:
#   bash benchmarks/gpu_session7.sh verify   the GPU tests session 6 could not run at its final code
#   bash benchmarks/gpu_session7.sh probe    LJ energy + forces and the force-matching gradient, G lanes per atom
#   bash benchmarks/gpu_session7.sh tests    every GPU test folder
#   bash benchmarks/gpu_session7.sh derivs   RAJAPerf's derivative columns at 2^26 in one run
#   bash benchmarks/gpu_session7.sh chem     the fused-force tests, then the chemistry benchmark (further arguments: chemistry.py's options)
# Each stage writes under $OUT/<stage>/ and packs it into $OUT/<stage>.tgz.
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export ADOFFLOAD_CACHE_DIR="$PWD/.device_cache"
stage=$1
shift                     # the rest: options for the stage's benchmark (chem: chemistry.py's)
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
verify)
  timeout 280 python3 -m pytest -q -p no:cacheprovider -rfE tests/gpu/test_lane_combining_cuda.py tests/jax \
    tests/test_readme.py tests/test_tape_scan.py tests/chemistry/test_fused_forces.py > "$OUT/verify.txt" 2>&1
  echo "pytest exit $?" >> "$OUT/verify.txt"; tail -15 "$OUT/verify.txt"
  ;;
probe)
  timeout ${PROBE_SECONDS:-250} python3 benchmarks/lanes_probe.py ${PROBE_SIZES:-} > "$OUT/probe.jsonl" 2> "$OUT/probe_err.txt"
  echo "probe exit $?" >> "$OUT/probe_err.txt"; cat "$OUT/probe.jsonl"; tail -3 "$OUT/probe_err.txt"
  ;;
tests)
  timeout 100 python3 -m pytest -q -rfE -p no:cacheprovider tests/foreign_cuda > "$OUT/foreign_cuda.txt" 2>&1
  echo "pytest exit $?" >> "$OUT/foreign_cuda.txt"; tail -4 "$OUT/foreign_cuda.txt"
  timeout 420 python3 -m pytest -q -p no:cacheprovider -rfE tests/gpu tests/codegen/test_cuda_run.py \
    tests/codegen/test_reductions_cuda.py tests/codegen/test_reductions.py tests/determinism tests/reliability/test_integer_division.py \
    tests/blocks tests/jax tests/test_readme.py tests/test_tape_scan.py tests/chemistry \
    > "$OUT/gpu_tests.txt" 2>&1
  echo "pytest exit $?" >> "$OUT/gpu_tests.txt"; tail -12 "$OUT/gpu_tests.txt"
  ;;
derivs)
  # the RAJAPerf kernels with derivatives at 2^26 in one run (lane combining on): lean JVP / adjoint over primal
  timeout ${DERIVS_SECONDS:-300} python3 benchmarks/run.py --only rajaperf --rajaperf-budget $(( ${DERIVS_SECONDS:-300} - 30 )) \
    --big-reps 10 --rajaperf-sizes 67108864 --out "$OUT/bench" --rajaperf-kernels lcals_eos lcals_hydro_1d basic_if_quad \
    stream_copy stream_add stream_mul stream_triad basic_daxpy basic_init3 basic_muladdsub lcals_planckian \
    lcals_first_diff stream_dot basic_pi_reduce basic_trap_int "$@" > "$OUT/log.txt" 2>&1
  echo "run.py exit $?" >> "$OUT/log.txt"
  grep -E "adjoint|JVP|geomean" "$OUT/bench/report.md" 2>/dev/null | head -30; tail -3 "$OUT/log.txt"
  ;;
chem)
  timeout 150 python3 -m pytest -q -p no:cacheprovider -rfE tests/chemistry/test_fused_forces.py \
    tests/chemistry/test_backend_errors.py > "$OUT/tests.txt" 2>&1
  echo "pytest exit $?" >> "$OUT/tests.txt"; tail -4 "$OUT/tests.txt"
  timeout ${CHEM_SECONDS:-400} python3 benchmarks/chemistry.py --device cuda --out "$OUT/chem" "$@" > "$OUT/chem_log.txt" 2>&1
  echo "chemistry exit $?" >> "$OUT/chem_log.txt"; tail -40 "$OUT/chem/chemistry.md" 2>/dev/null; tail -3 "$OUT/chem_log.txt"
  ;;
esac
tar czf "$base/$stage.tgz" -C "$base" "$stage"
