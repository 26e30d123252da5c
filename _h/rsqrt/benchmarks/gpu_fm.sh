#!/usr/bin/env bash
# Issue 12's force-matching target on the GPU, from the repository root:
#   bash benchmarks/gpu_fm.sh            (about 6 minutes)
#   bash benchmarks/gpu_fm.sh tangent    (optional, about 2 minutes: the same force-matching gradient with
#                                          ADOFFLOAD_SCALAR_JVP=tangent, i.e. the reverse sweep used before)
# 1. the tests of the scalar-JVP rule and the fused force kernels on the GPU (JAX's default device);
# 2. the chemistry benchmark at all three sizes, with jax-md (wheels carried in .whl/) as the peer,
#    each (size, side) in its own process under a time limit, so a side that runs out of device
#    memory is a failed row and the other sizes are still measured.
# Results under $OUT/fm/ (few files): log.txt (tests and benchmark output), chem/chemistry.md,
# chem_tangent/chemistry.md (second stage).
set -u
OUT=${OUT:-/tmp/adoffload-out}
mkdir -p "$OUT/fm"
LOG="$OUT/fm/log.txt"
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if ls .whl/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    > /dev/null 2>&1 && export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi
if [ "${1:-}" = "tangent" ]; then
  ADOFFLOAD_SCALAR_JVP=tangent timeout 160 python3 benchmarks/chemistry.py --device cuda --reps 10 --isolate 60 --budget 140 \
    --sides adoffload --measures ef fit --out "$OUT/fm/chem_tangent" >> "$LOG" 2>&1
  echo "=== chemistry (tangent) exit $?" >> "$LOG"
  rm -f "$OUT/fm/chem_tangent/chemistry.csv"
  grep -E "force-matching|LJ energy \+ forces \|" "$OUT/fm/chem_tangent/chemistry.md" 2>/dev/null
  exit 0
fi
timeout 75 python3 -m pytest -q -p no:cacheprovider -rfE tests/jax/test_scalar_jvp.py \
  tests/chemistry/test_fused_forces.py >> "$LOG" 2>&1
echo "=== pytest exit $?" >> "$LOG"
tail -3 "$LOG"
timeout 290 python3 benchmarks/chemistry.py --device cuda --reps 10 --isolate 90 --budget 265 \
  --sides adoffload "jax-md Dense" cuda jax --out "$OUT/fm/chem" 2>&1 | grep -v "^[WI][0-9]" >> "$LOG"
echo "=== chemistry exit ${PIPESTATUS[0]}" >> "$LOG"
rm -f "$OUT/fm/chem/chemistry.csv"
tail -1 "$LOG"
grep -E "force-matching|LJ energy \+ forces \|" "$OUT/fm/chem/chemistry.md" 2>/dev/null | head -40
