#!/usr/bin/env bash
# Issue 12's force-matching target on the GPU, from the repository root:
#   bash benchmarks/gpu_fm.sh            (about 6 minutes)
#   bash benchmarks/gpu_fm.sh tangent    (optional, about 2 minutes: the same force-matching gradient with
#                                          ADOFFLOAD_SCALAR_JVP=tangent, i.e. the reverse sweep used before)
# 1. the tests of the scalar-JVP rule and the fused force kernels on the GPU (JAX's default device);
# 2. the chemistry benchmark at all three sizes, with jax-md (wheels carried in .whl/) as the peer,
#    each (size, side) in its own process under a time limit, so a side that runs out of device
#    memory is a failed row and the other sizes are still measured.
# Results under $OUT/fm/: tests.txt, chem/chemistry.{md,csv}, chem_log.txt.
set -u
OUT=${OUT:-/tmp/adoffload-out}
mkdir -p "$OUT/fm"
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if [ "${1:-}" = "tangent" ]; then
  ADOFFLOAD_SCALAR_JVP=tangent timeout 150 python3 benchmarks/chemistry.py --device cuda --reps 10 --isolate 60 \
    --sides adoffload --measures ef fit --out "$OUT/fm/chem_tangent" > "$OUT/fm/chem_tangent_log.txt" 2>&1
  echo "chemistry (tangent) exit $?" >> "$OUT/fm/chem_tangent_log.txt"
  grep -E "force-matching|LJ energy \+ forces \|" "$OUT/fm/chem_tangent/chemistry.md" 2>/dev/null
  exit 0
fi
if ls .whl/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    > /dev/null 2>&1 && export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi
timeout 75 python3 -m pytest -q -p no:cacheprovider -rfE tests/jax/test_scalar_jvp.py \
  tests/chemistry/test_fused_forces.py > "$OUT/fm/tests.txt" 2>&1
echo "pytest exit $?" >> "$OUT/fm/tests.txt"
tail -3 "$OUT/fm/tests.txt"
timeout 270 python3 benchmarks/chemistry.py --device cuda --reps 10 --isolate 90 \
  --sides adoffload "jax-md Dense" cuda jax --out "$OUT/fm/chem" > "$OUT/fm/chem_log.txt" 2>&1
echo "chemistry exit $?" >> "$OUT/fm/chem_log.txt"
tail -1 "$OUT/fm/chem_log.txt"
grep -E "force-matching|LJ energy \+ forces \|" "$OUT/fm/chem/chemistry.md" 2>/dev/null | head -40
