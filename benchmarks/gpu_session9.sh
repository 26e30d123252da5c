#!/usr/bin/env bash
# Session 9's GPU calls (each under 10 minutes), from the repository root with .device_cache (clang's IR:
# the GPU machine has no clang) and .whl (jax-md, pytest-xdist) carried:
#   bash benchmarks/gpu_session9.sh profile  the SGEMM probe at 4096 (jax.jit, blocks.py's timer), Nsight Compute
#                                            sections of the reverse kernels at 2048
#   bash benchmarks/gpu_session9.sh profile2 the probe again and Nsight Compute of sgemm_static's reverse kernel at 4096
#   bash benchmarks/gpu_session9.sh retest   the test groups that failed in the final tests call
#   bash benchmarks/gpu_session9.sh tests    every GPU test folder, 6 pytest workers; random block kernels, GPU vs host
#   bash benchmarks/gpu_session9.sh bench    blocks.py (matmul at 4096, DOT, stencil)
#   bash benchmarks/gpu_session9.sh quick    tests/blocks/test_cuda.py and test_codegen.py, the SGEMM probe at 4096
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
profile)
  timeout 120 python3 benchmarks/sgemm_vjp_probe.py --n 4096 --reps 10 --kernels sgemm sgemm_static sgemm_prefetch \
    > "$OUT/probe.txt" 2>&1; echo "probe exit $?" >> "$OUT/probe.txt"; cat "$OUT/probe.txt"
  for k in sgemm_static sgemm; do
    timeout 150 ncu --clock-control none -k regex:vjp -c 1 --section SpeedOfLight --section WarpStateStats \
      --section InstructionStats --section LaunchStats --section Occupancy --section MemoryWorkloadAnalysis \
      --metrics sass__inst_executed_per_opcode --print-metric-instances values \
      python3 benchmarks/sgemm_vjp_probe.py --n 2048 --reps 0 --kernels $k > "$OUT/ncu_$k.txt" 2>&1
    echo "ncu exit $?" >> "$OUT/ncu_$k.txt"; tail -5 "$OUT/ncu_$k.txt"
  done
  ;;
quick)
  timeout 200 python3 -m pytest -q -p no:cacheprovider -rfE -n 4 tests/blocks/test_cuda.py tests/blocks/test_codegen.py \
    > "$OUT/tests_blocks_cuda.txt" 2>&1; echo "pytest exit $?" >> "$OUT/tests_blocks_cuda.txt"; tail -6 "$OUT/tests_blocks_cuda.txt"
  timeout 150 python3 benchmarks/sgemm_vjp_probe.py --n 4096 --reps 10 --kernels sgemm_static sgemm_prefetch \
    > "$OUT/probe.txt" 2>&1; echo "probe exit $?" >> "$OUT/probe.txt"; cat "$OUT/probe.txt"
  ;;
profile2)
  timeout 120 python3 benchmarks/sgemm_vjp_probe.py --n 4096 --reps 10 --kernels sgemm_static sgemm_prefetch \
    > "$OUT/probe.txt" 2>&1; echo "probe exit $?" >> "$OUT/probe.txt"; cat "$OUT/probe.txt"
  timeout 150 ncu --clock-control none -k regex:vjp -c 1 --section SpeedOfLight --section WarpStateStats \
    --section InstructionStats --section LaunchStats --section Occupancy --section MemoryWorkloadAnalysis \
    --section SchedulerStats --section SourceCounters --metrics sass__inst_executed_per_opcode --print-metric-instances values \
    python3 benchmarks/sgemm_vjp_probe.py --n 4096 --reps 0 --kernels sgemm_static > "$OUT/ncu_sgemm_static.txt" 2>&1
  echo "ncu exit $?" >> "$OUT/ncu_sgemm_static.txt"; grep -E "Duration|Registers|Achieved Occupancy|Issued Instructions|ncu exit" "$OUT/ncu_sgemm_static.txt"
  ;;
retest)
  timeout 300 python3 -m pytest -q -p no:cacheprovider -rfE -n 2 tests/reliability/test_integer_division.py \
    tests/blocks/test_block_fuzz_gpu.py tests/blocks/test_deterministic_gpu.py tests/foreign_cuda/test_corpus.py \
    > "$OUT/gpu_tests.txt" 2>&1; echo "pytest exit $?" >> "$OUT/gpu_tests.txt"; tail -8 "$OUT/gpu_tests.txt"
  timeout 60 python3 -m adoffload.testing.block_fuzz_gpu --count 400 --seed 11 --seconds 40 > "$OUT/block_fuzz_gpu.txt" 2>&1
  echo "block_fuzz_gpu exit $?" >> "$OUT/block_fuzz_gpu.txt"; tail -3 "$OUT/block_fuzz_gpu.txt"
  ;;
bench)
  timeout 300 python3 benchmarks/blocks.py --out "$OUT/blocks" --reps 10 --matmul-sizes 4096 --matmul-vjp-sizes 4096 \
    > "$OUT/blocks_log.txt" 2>&1
  echo "blocks exit $?" >> "$OUT/blocks_log.txt"; tail -12 "$OUT/blocks_log.txt"
  ;;
tests)
  ADOFFLOAD_CUDA_HUNT=all timeout ${TESTS_SECONDS:-480} python3 -m pytest -q -p no:cacheprovider -rfE -n 6 tests/gpu \
    tests/codegen tests/determinism tests/reliability/test_integer_division.py tests/blocks tests/jax \
    tests/test_readme.py tests/test_tape_scan.py tests/chemistry tests/foreign_cuda "$@" > "$OUT/gpu_tests.txt" 2>&1
  echo "pytest exit $?" >> "$OUT/gpu_tests.txt"; tail -25 "$OUT/gpu_tests.txt"
  timeout ${FUZZ_SECONDS:-70} python3 -m adoffload.testing.block_fuzz_gpu --count 400 --seed 11 \
    --seconds $(( ${FUZZ_SECONDS:-70} - 20 )) > "$OUT/block_fuzz_gpu.txt" 2>&1
  echo "block_fuzz_gpu exit $?" >> "$OUT/block_fuzz_gpu.txt"; tail -3 "$OUT/block_fuzz_gpu.txt"
  ;;
esac
