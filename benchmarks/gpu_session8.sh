#!/usr/bin/env bash
# Session 8's GPU calls (each under 10 minutes), from the repository root with .device_cache (clang's IR:
# the GPU machine has no clang; fill it with benchmarks/warm_clang_cache.py and by running the CUDA-source
# test folders here with the same ADOFFLOAD_CACHE_DIR) and .whl (jax-md, pytest-xdist) carried:
#   bash benchmarks/gpu_session8.sh bench   RAJAPerf's derivative columns at 2^26 (16 kernels, lcals_diff_predict
#                                           included) and the block-kernel benchmark (matmul at 4096, DOT, stencil)
#   bash benchmarks/gpu_session8.sh tests   every GPU test folder, 6 pytest workers; random block kernels, GPU vs host
# Each stage writes under $OUT/<stage>/.
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export ADOFFLOAD_CACHE_DIR="$PWD/.device_cache"
stage=$1
shift
export OUT="$OUT/$stage"
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt" 2>&1
python3 -c "import jax, llvmlite, numpy; print('jax', jax.__version__, 'llvmlite', llvmlite.__version__, 'numpy', numpy.__version__)" >> "$OUT/gpu.txt" 2>&1
echo "commit ${GIT_REV:-unknown}" >> "$OUT/gpu.txt"
if ls .whl/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    > /dev/null 2>&1 && export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi
case "$stage" in
bench)
  timeout 330 python3 benchmarks/run.py --only rajaperf --rajaperf-budget 300 --big-reps 10 --rajaperf-sizes 67108864 \
    --out "$OUT/derivs" --rajaperf-kernels lcals_eos lcals_hydro_1d basic_if_quad stream_copy stream_add stream_mul \
    stream_triad basic_daxpy basic_init3 basic_muladdsub lcals_planckian lcals_first_diff stream_dot basic_pi_reduce \
    basic_trap_int lcals_diff_predict > "$OUT/derivs_log.txt" 2>&1
  echo "run.py exit $?" >> "$OUT/derivs_log.txt"
  grep -E "adjoint|JVP|geomean" "$OUT/derivs/report.md" 2>/dev/null | head -20
  timeout 200 python3 benchmarks/blocks.py --out "$OUT/blocks" --reps 10 --matmul-sizes 4096 --matmul-vjp-sizes 4096 \
    > "$OUT/blocks_log.txt" 2>&1
  echo "blocks exit $?" >> "$OUT/blocks_log.txt"; tail -2 "$OUT/blocks_log.txt"
  ;;
tests)
  # the CUDA hunt's whole set (its GPU variants included); then random block kernels, GPU against host
  ADOFFLOAD_CUDA_HUNT=all timeout ${TESTS_SECONDS:-480} python3 -m pytest -q -p no:cacheprovider -rfE -n 6 tests/gpu \
    tests/codegen tests/determinism tests/reliability/test_integer_division.py tests/blocks tests/jax \
    tests/test_readme.py tests/test_tape_scan.py tests/chemistry tests/foreign_cuda "$@" > "$OUT/gpu_tests.txt" 2>&1
  echo "pytest exit $?" >> "$OUT/gpu_tests.txt"; tail -25 "$OUT/gpu_tests.txt"
  timeout ${FUZZ_SECONDS:-70} python3 -m adoffload.testing.block_fuzz_gpu --count 400 --seed 9 \
    --seconds $(( ${FUZZ_SECONDS:-70} - 20 )) > "$OUT/block_fuzz_gpu.txt" 2>&1
  echo "block_fuzz_gpu exit $?" >> "$OUT/block_fuzz_gpu.txt"; tail -3 "$OUT/block_fuzz_gpu.txt"
  ;;
esac
