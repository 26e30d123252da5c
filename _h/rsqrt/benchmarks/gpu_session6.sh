#!/usr/bin/env bash
# Session 6's GPU calls (each under 10 minutes), from the repository root with .device_cache (clang's
# IR: the GPU machine has no clang) and .whl (jax-md) carried:
#   bash benchmarks/gpu_session6.sh spread   chemistry at 10,976 and 108,000 atoms (E+F, force matching)
#                                            against jax-md and CUDA, and ours with small-grid spreading off
#   bash benchmarks/gpu_session6.sh tests    every GPU test folder at the merged code
#   bash benchmarks/gpu_session6.sh benches  RAJAPerf (lean derivatives, primal rows) and the trap_int rows
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
spread)
  timeout 60 python3 -m pytest -q -p no:cacheprovider -rfE tests/jax/test_handler.py tests/runtime/test_gpu_launch_shape.py \
    tests/chemistry/test_fused_forces.py tests/jax/test_scalar_jvp.py > "$OUT/tests.txt" 2>&1
  echo "pytest exit $?" >> "$OUT/tests.txt"; tail -2 "$OUT/tests.txt"
  timeout 240 python3 benchmarks/chemistry.py --device cuda --reps 10 --isolate 90 --budget 230 --sizes 10976 108000 \
    --measures ef fit --sides adoffload "jax-md Dense" cuda --out "$OUT/chem" 2>&1 | grep -v "^[WI][0-9]" > "$OUT/chem_log.txt"
  echo "chemistry exit ${PIPESTATUS[0]}" >> "$OUT/chem_log.txt"
  grep -E "force-matching|LJ energy \+ forces" "$OUT/chem/chemistry.md" | head -20
  # the same adoffload rows with spreading off (every grid kernel in blocks of 256, as before)
  timeout 120 python3 -c "
import sys; sys.path.insert(0, 'benchmarks')
import adoffload.jax.handler as handler
handler.SPREAD_MIN_BLOCK = 1 << 30
import chemistry
chemistry.main(['--device', 'cuda', '--reps', '10', '--sizes', '10976', '108000', '--measures', 'ef', 'fit',
                '--sides', 'adoffload', '--out', '$OUT/chem_unspread'])
" 2>&1 | grep -v "^[WI][0-9]" > "$OUT/chem_unspread_log.txt"
  echo "unspread exit ${PIPESTATUS[0]}" >> "$OUT/chem_unspread_log.txt"
  grep -E "force-matching|LJ energy \+ forces" "$OUT/chem_unspread/chemistry.md" | head -10
  ;;
esac
tar czf "$base/$stage.tgz" -C "$base" "$stage"
