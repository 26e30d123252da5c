#!/usr/bin/env bash
# Issue 12's GPU batch, one device call (< 9 minutes): the chemistry comparison (adoffload fused
# and adjoint forces, plain JAX, jax-md Dense and OrderedSparse, hand-written CUDA LJ) at 10,976,
# 108,000 and 1,048,576 atoms, then the copy bandwidth, the RAJAPerf subset against the tuned CUDA
# reductions at 10^6 and 2^26, and the overheads (cold compile in a fresh process). Results under
# $OUT (at most 8 files come back): chem/chemistry.{md,csv}, bench/{report.md,results.csv,
# results.json,rajaperf.png}, log.txt. Each stage has its own time limit and writes what it
# measured before a later stage can time out.
#
# jax-md is not in the GPU image: carry its wheels in .whl (see benchmarks/README.md); without them
# the jax-md rows are error rows saying it is not importable.
export PYTHONUNBUFFERED=1
export XLA_PYTHON_CLIENT_PREALLOCATE=false      # JAX takes memory as it goes; our runtime and CUDA share the GPU
log="$OUT/log.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$log" 2>&1
if ls .whl/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    >> "$log" 2>&1 && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD"
python3 -c "import jax, jax_md.space; print('jax', jax.__version__, 'and jax-md import')" >> "$log" 2>&1
echo "=== chemistry $(date -u +%T)" >> "$log"
timeout "${CHEM_TIMEOUT:-270}" python3 benchmarks/chemistry.py --device cuda --reps "${CHEM_REPS:-10}" \
  --sides adoffload jax "jax-md Dense" "jax-md OrderedSparse" cuda --out "$OUT/chem" >> "$log" 2>&1
echo "=== chemistry exit $? $(date -u +%T)" >> "$log"
timeout "${BENCH_TIMEOUT:-230}" python3 benchmarks/run.py --only bandwidth rajaperf overheads --rajaperf-budget "${RAJAPERF_BUDGET:-150}" \
  --big-reps 10 --out "$OUT/bench" >> "$log" 2>&1
echo "=== run.py exit $? $(date -u +%T)" >> "$log"
grep -E "^\| (ratio|adoffload|jax|plain|n=)" "$OUT/chem/chemistry.md" 2>/dev/null | head -30
grep -E "n=|GB/s" "$OUT/bench/report.md" 2>/dev/null | head -40
grep -E "===|Error|error" "$log" | tail -20
