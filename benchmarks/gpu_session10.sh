#!/usr/bin/env bash
# Session 10's GPU calls (each under 10 minutes), from the repository root with .device_cache (clang's IR:
# the GPU machine has no clang) and .whl (jax-md, pytest-xdist) carried:
#   bash benchmarks/gpu_session10.sh stencil  blocks.py's stencil section (jax.jit and launch-only timings)
#   bash benchmarks/gpu_session10.sh profile  the shared stencil's reverse kernel: its SASS, Nsight Compute of one launch at 8192^2
#   bash benchmarks/gpu_session10.sh stalls   Nsight Compute's stall samples per SASS instruction of that kernel (and the plain one's)
#   bash benchmarks/gpu_session10.sh ablation the stencil reverse kernels timed with parts of their PTX removed (stencil_ablation.py)
#   bash benchmarks/gpu_session10.sh occupancy the SGEMM reverse kernel with 1, 2, 3 blocks per SM requested (sgemm_occupancy.py)
#   bash benchmarks/gpu_session10.sh quick    block CUDA and lane-combining tests, the SGEMM probe at 4096
#   bash benchmarks/gpu_session10.sh final    quick's tests (and the listed ones), then bench, in one call
#   bash benchmarks/gpu_session10.sh bench    blocks.py (matmul at 4096, DOT, stencil)
#   bash benchmarks/gpu_session10.sh tests    every GPU test folder, 6 pytest workers; random block kernels, GPU vs host
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
stencil)
  timeout 240 python3 benchmarks/blocks.py --out "$OUT/blocks" --reps 20 --only stencil > "$OUT/blocks_log.txt" 2>&1
  echo "blocks exit $?" >> "$OUT/blocks_log.txt"; tail -c 3000 "$OUT/blocks_log.txt"
  ;;
profile)
  python3 - "$OUT" <<'PY' > "$OUT/sass_log.txt" 2>&1
import subprocess, sys
sys.path.insert(0, "benchmarks")
import adoffload as ado, blocks
from adoffload.jax.targets import Variant, gpu_options
out = sys.argv[1]
for name in ("stencil_shared", "stencil_plain"):
    reverse = ado.vjp(getattr(blocks, name), ("x",), primal_outputs=False)
    ptx = reverse.compiled("nvptx", arch="sm_90", **gpu_options(reverse, Variant())).ptx
    open(f"{out}/{name}_vjp.ptx", "w").write(ptx)
    subprocess.run(["ptxas", "-v", "-arch=sm_90", f"{out}/{name}_vjp.ptx", "-o", f"{out}/{name}_vjp.cubin"], check=True)
    with open(f"{out}/{name}_vjp.sass", "w") as sass:
        subprocess.run(["cuobjdump", "-sass", f"{out}/{name}_vjp.cubin"], stdout=sass, check=True)
PY
  echo "sass exit $?" >> "$OUT/sass_log.txt"; tail -3 "$OUT/sass_log.txt"; grep -c ATOMS "$OUT/stencil_shared_vjp.sass"
  timeout 200 ncu --clock-control none -k regex:stencil_shared.*vjp -c 1 --section SpeedOfLight --section WarpStateStats \
    --section InstructionStats --section LaunchStats --section Occupancy --section MemoryWorkloadAnalysis \
    --section SchedulerStats --section SourceCounters --metrics sass__inst_executed_per_opcode --print-metric-instances values \
    python3 benchmarks/stencil_probe.py --sizes 8192 --reps 1 > "$OUT/ncu_stencil_vjp.txt" 2>&1
  echo "ncu exit $?" >> "$OUT/ncu_stencil_vjp.txt"; grep -E "Duration|Registers|Achieved Occupancy|Issued Instructions|ncu exit|Stall" "$OUT/ncu_stencil_vjp.txt" | head
  ;;
stalls)
  for k in stencil_shared stencil_plain; do
    timeout 200 ncu --clock-control none -k regex:$k.*vjp -c 1 --set full --import-source no -o "$OUT/$k" \
      python3 benchmarks/stencil_probe.py --sizes 8192 --reps 1 > "$OUT/ncu_$k.log" 2>&1
    echo "ncu exit $?" >> "$OUT/ncu_$k.log"; tail -2 "$OUT/ncu_$k.log"
    ncu -i "$OUT/$k.ncu-rep" --page source --csv --print-source sass > "$OUT/${k}_source.csv" 2>&1
    ncu -i "$OUT/$k.ncu-rep" --page details > "$OUT/${k}_details.txt" 2>&1
    rm -f "$OUT/$k.ncu-rep"; wc -l "$OUT/${k}_source.csv"
  done
  ;;
ablation)
  for n in 4096 8192; do
    timeout 120 python3 benchmarks/stencil_ablation.py --n $n >> "$OUT/ablation.txt" 2>&1; echo "ablation exit $?" >> "$OUT/ablation.txt"
  done
  cat "$OUT/ablation.txt"
  ;;
occupancy)
  timeout 200 python3 benchmarks/sgemm_occupancy.py --n 4096 > "$OUT/occupancy.txt" 2>&1; echo "exit $?" >> "$OUT/occupancy.txt"
  cat "$OUT/occupancy.txt"
  ;;
quick)
  timeout 240 python3 -m pytest -q -p no:cacheprovider -rfE -n 4 tests/blocks/test_cuda.py tests/blocks/test_codegen.py \
    tests/codegen/test_lane_combining.py "$@" > "$OUT/tests_quick.txt" 2>&1
  echo "pytest exit $?" >> "$OUT/tests_quick.txt"; tail -6 "$OUT/tests_quick.txt"
  timeout 150 python3 benchmarks/sgemm_vjp_probe.py --n 4096 --reps 10 --kernels sgemm_static sgemm_prefetch \
    > "$OUT/probe.txt" 2>&1; echo "probe exit $?" >> "$OUT/probe.txt"; cat "$OUT/probe.txt"
  ;;
final)
  timeout 200 python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests/blocks/test_cuda.py tests/blocks/test_codegen.py \
    tests/codegen/test_lane_combining.py "$@" > "$OUT/tests_quick.txt" 2>&1
  echo "pytest exit $?" >> "$OUT/tests_quick.txt"; tail -6 "$OUT/tests_quick.txt"
  timeout 360 python3 benchmarks/blocks.py --out "$OUT/blocks" --reps 10 --matmul-sizes 4096 --matmul-vjp-sizes 4096 \
    > "$OUT/blocks_log.txt" 2>&1
  echo "blocks exit $?" >> "$OUT/blocks_log.txt"; tail -c 2500 "$OUT/blocks_log.txt"
  ;;
bench)
  timeout 420 python3 benchmarks/blocks.py --out "$OUT/blocks" --reps 10 --matmul-sizes 4096 --matmul-vjp-sizes 4096 \
    > "$OUT/blocks_log.txt" 2>&1
  echo "blocks exit $?" >> "$OUT/blocks_log.txt"; tail -c 4000 "$OUT/blocks_log.txt"
  ;;
tests)
  ADOFFLOAD_CUDA_HUNT=all timeout ${TESTS_SECONDS:-480} python3 -m pytest -q -p no:cacheprovider -rfE -n ${WORKERS:-6} tests/gpu \
    tests/codegen tests/determinism tests/reliability/test_integer_division.py tests/blocks tests/jax \
    tests/test_readme.py tests/test_tape_scan.py tests/chemistry tests/foreign_cuda "$@" > "$OUT/gpu_tests.txt" 2>&1
  echo "pytest exit $?" >> "$OUT/gpu_tests.txt"; tail -25 "$OUT/gpu_tests.txt"
  timeout ${FUZZ_SECONDS:-70} python3 -m adoffload.testing.block_fuzz_gpu --count 400 --seed 11 \
    --seconds $(( ${FUZZ_SECONDS:-70} - 20 )) > "$OUT/block_fuzz_gpu.txt" 2>&1
  echo "block_fuzz_gpu exit $?" >> "$OUT/block_fuzz_gpu.txt"; tail -3 "$OUT/block_fuzz_gpu.txt"
  ;;
*)
  echo "unknown stage '$stage'"; exit 2
  ;;
esac
