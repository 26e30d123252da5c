#!/usr/bin/env bash
# Session 11's GPU calls (each under 10 minutes), from the repository root with .device_cache (clang's IR:
# the GPU machine has no clang) and .whl (jax-md, pytest-xdist) carried where the stage needs them:
#   bash benchmarks/gpu_session11.sh ablation  the SGEMM reverse kernel timed with parts of its PTX removed (sgemm_ablation.py)
#   bash benchmarks/gpu_session11.sh stalls    Nsight Compute (full set, stall samples per SASS instruction) of that kernel at 4096^2
#   bash benchmarks/gpu_session11.sh quick     the block GPU tests (CUDA block kernels, lane combining, per-warp copies)
#   bash benchmarks/gpu_session11.sh retest    test files again (RETEST: the paths; default: the three files that failed in tests/)
#   bash benchmarks/gpu_session11.sh bench     blocks.py (matmul at 4096, DOT, stencil)
#   bash benchmarks/gpu_session11.sh tests     every GPU test folder; random block kernels, GPU vs host
# Several stages in one call: STAGES="ablation stalls" bash benchmarks/gpu_session11.sh
# Each stage writes under $OUT/<stage>/.
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export ADOFFLOAD_CACHE_DIR="$PWD/.device_cache"
ROOT_OUT=$OUT
if ls .whl/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    > /dev/null 2>&1 && export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi
for stage in ${STAGES:-$1}; do
OUT="$ROOT_OUT/$stage"
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt" 2>&1
python3 -c "import jax, llvmlite, numpy; print('jax', jax.__version__, 'llvmlite', llvmlite.__version__, 'numpy', numpy.__version__)" >> "$OUT/gpu.txt" 2>&1
echo "commit ${GIT_REV:-unknown}" >> "$OUT/gpu.txt"
case "$stage" in
ablation)
  timeout 240 python3 benchmarks/sgemm_ablation.py --n 4096 ${ABLATION_ARGS:-} > "$OUT/ablation.txt" 2>&1
  echo "ablation exit $?" >> "$OUT/ablation.txt"; cat "$OUT/ablation.txt"
  ;;
stalls)
  k=sgemm_static
  timeout 240 ncu --clock-control none -k regex:${k}.*vjp -c 1 --set full --import-source no -o "$OUT/$k" \
    python3 benchmarks/sgemm_vjp_probe.py --n 4096 --reps 0 --kernels $k > "$OUT/ncu_$k.log" 2>&1
  echo "ncu exit $?" >> "$OUT/ncu_$k.log"; tail -2 "$OUT/ncu_$k.log"
  ncu -i "$OUT/$k.ncu-rep" --page source --csv --print-source sass > "$OUT/${k}_source.csv" 2>&1
  ncu -i "$OUT/$k.ncu-rep" --page details > "$OUT/${k}_details.txt" 2>&1
  rm -f "$OUT/$k.ncu-rep"; wc -l "$OUT/${k}_source.csv"
  grep -E "Duration|Registers Per|Achieved Occupancy|Issued Ipc|Executed Ipc|No Eligible|Warp Cycles Per Issued" "$OUT/${k}_details.txt" | head -12
  ;;
quick)
  timeout 300 python3 -m pytest -q -p no:cacheprovider -rfE -n 6 tests/blocks/test_cuda.py tests/blocks/test_codegen.py \
    tests/blocks/test_deterministic_gpu.py tests/codegen/test_lane_combining.py \
    > "$OUT/tests_quick.txt" 2>&1
  echo "pytest exit $?" >> "$OUT/tests_quick.txt"; tail -8 "$OUT/tests_quick.txt"
  ;;
retest)
  timeout 400 python3 -m pytest -q -p no:cacheprovider -rfE -n 8 ${RETEST:-tests/determinism/test_blocks.py tests/blocks/test_wave64.py tests/blocks/test_jax_user.py} \
    > "$OUT/retest.txt" 2>&1
  echo "pytest exit $?" >> "$OUT/retest.txt"; tail -6 "$OUT/retest.txt"
  ;;
bench)
  timeout 420 python3 benchmarks/blocks.py --out "$OUT/blocks" --reps 10 --matmul-sizes 4096 --matmul-vjp-sizes 4096 \
    > "$OUT/blocks_log.txt" 2>&1
  echo "blocks exit $?" >> "$OUT/blocks_log.txt"; tail -c 4000 "$OUT/blocks_log.txt"
  ;;
tests)
  ADOFFLOAD_CUDA_HUNT=all timeout ${TESTS_SECONDS:-480} python3 -m pytest -q -p no:cacheprovider -rfE -n ${WORKERS:-6} tests/gpu \
    tests/codegen tests/determinism tests/reliability/test_integer_division.py tests/blocks tests/jax \
    tests/test_readme.py tests/test_tape_scan.py tests/chemistry tests/foreign_cuda > "$OUT/gpu_tests.txt" 2>&1
  echo "pytest exit $?" >> "$OUT/gpu_tests.txt"; tail -25 "$OUT/gpu_tests.txt"
  timeout ${FUZZ_SECONDS:-70} python3 -m adoffload.testing.block_fuzz_gpu --count 400 --seed 11 \
    --seconds $(( ${FUZZ_SECONDS:-70} - 20 )) > "$OUT/block_fuzz_gpu.txt" 2>&1
  echo "block_fuzz_gpu exit $?" >> "$OUT/block_fuzz_gpu.txt"; tail -3 "$OUT/block_fuzz_gpu.txt"
  ;;
*)
  echo "unknown stage '$stage'"; exit 2
  ;;
esac
done
