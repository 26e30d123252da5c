#!/usr/bin/env bash
# Session 5's GPU batch, three device calls (each under 10 minutes), from the repository root with
# .device_cache (clang's IR: the GPU machine has no clang) and .whl (jax-md) carried:
#   bash benchmarks/gpu_session5.sh tests     every GPU test folder at the merged code
#   bash benchmarks/gpu_session5.sh benches   RAJAPerf derivative columns (lean and full), then every primal row
#   bash benchmarks/gpu_session5.sh chem      chemistry (LJ forces, force matching) against jax-md and CUDA
# Each stage writes under $OUT/<stage>/ and packs it into $OUT/<stage>.tgz (the device tool brings
# back only a few files per call), printing a short summary.
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

case "$stage" in
tests)
  timeout 80 python3 -m pytest -q -rs -p no:cacheprovider tests/foreign_cuda > "$OUT/foreign_cuda.txt" 2>&1
  echo "pytest exit $?" >> "$OUT/foreign_cuda.txt"; tail -2 "$OUT/foreign_cuda.txt"
  timeout 260 python3 -m pytest -q -p no:cacheprovider -rfE tests/gpu tests/codegen/test_cuda_run.py \
    tests/codegen/test_reductions_cuda.py tests/codegen/test_reductions.py tests/determinism tests/reliability/test_integer_division.py \
    tests/blocks tests/jax tests/test_readme.py tests/test_tape_scan.py tests/chemistry/test_fused_forces.py \
    > "$OUT/gpu_tests.txt" 2>&1
  echo "pytest exit $?" >> "$OUT/gpu_tests.txt"; tail -4 "$OUT/gpu_tests.txt"
  ;;
benches)
  [ -f benchmarks/gpu_lean.sh ] && timeout 260 bash benchmarks/gpu_lean.sh > "$OUT/lean_log.txt" 2>&1
  echo "lean exit $?" >> "$OUT/lean_log.txt"; tail -25 "$OUT/lean_log.txt"
  # the primal rows of all 18 kernels (the run above has only those with derivatives)
  timeout 210 bash benchmarks/gpu_primal.sh > "$OUT/primal_log.txt" 2>&1
  echo "primal exit $?" >> "$OUT/primal_log.txt"; tail -30 "$OUT/primal_log.txt"
  ;;
chem)
  [ -f benchmarks/gpu_fm.sh ] && timeout 400 bash benchmarks/gpu_fm.sh > "$OUT/fm_log.txt" 2>&1
  echo "fm exit $?" >> "$OUT/fm_log.txt"; tail -40 "$OUT/fm_log.txt"
  ;;
esac
tar czf "$base/$stage.tgz" -C "$base" "$stage"
