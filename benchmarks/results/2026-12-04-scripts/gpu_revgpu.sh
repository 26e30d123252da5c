#!/bin/bash
# revgpu (issue 31 item 1): the user kernels suite on the GPU, this branch ("after") and main's engine
# ("before": this tree with tmp_probe/revgpu_engine.patch reversed, i.e. adoffload/ as on main), in turn.
# Run from the repo root on the GPU machine:  bash tmp_probe/gpu_revgpu.sh   (writes under $OUT)
# Needs jax + CUDA, cupy, nvcc/ptxas; no clang, no network. At most 90+90+30+30+20+20 s by its timeouts (not timed: no GPU here).
set -u
OUT=${OUT:-/tmp/revgpu_out}
mkdir -p "$OUT"
PY=${PYTHON:-python}
command -v "$PY" >/dev/null || PY=python3
ROOT=$(pwd)
BEFORE=$(mktemp -d)/before
mkdir -p "$BEFORE"
tar --exclude=./.git -cf - . | (cd "$BEFORE" && tar -xf -)
HAVE_BEFORE=1
(cd "$BEFORE" && if command -v patch >/dev/null; then patch -R -p1 -s < tmp_probe/revgpu_engine.patch; else git apply -R tmp_probe/revgpu_engine.patch; fi) || { echo "patch -R failed: no 'before' side" >> "$OUT/environment.txt"; HAVE_BEFORE=0; }
export ADOFFLOAD_CACHE_DIR=$(mktemp -d)     # each side compiles its own kernels
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader; uptime; } >> "$OUT/environment.txt" 2>&1
suite() {   # $1 side, $2 tree
  (cd "$2" && PYTHONPATH=. timeout 90 "$PY" -m benchmarks user_kernels --device cuda --potentials lj morse \
     --sides "ours: jax" "ours: ado.vjp on CuPy" "hand-written CUDA" --no-launches --reps 10 --out "$OUT/suite-$1") \
     > "$OUT/suite-$1.log" 2>&1
  echo "suite $1: rc=$?" >> "$OUT/environment.txt"
}
pieces() {  # $1 side, $2 tree: primal kernel, lean vjp, full vjp through the launcher on CuPy arrays
  (cd "$2" && PYTHONPATH=. timeout 30 "$PY" "$ROOT/tmp_probe/kernel_times.py" cuda 1000000 lj morse) \
     > "$OUT/pieces-$1.jsonl" 2> "$OUT/pieces-$1.err"
  echo "pieces $1: rc=$?" >> "$OUT/environment.txt"
}
suite after "$ROOT"
[ $HAVE_BEFORE = 1 ] && suite before "$BEFORE"
pieces after "$ROOT"
[ $HAVE_BEFORE = 1 ] && pieces before "$BEFORE"
# PTX of the lean vjp as JAX's GPU call builds it, and ptxas's register/spill report, both sides
SIDES="after"; [ $HAVE_BEFORE = 1 ] && SIDES="after before"
for side in $SIDES; do
  tree=$ROOT; [ $side = before ] && tree=$BEFORE
  (cd "$tree" && PYTHONPATH=. timeout 20 "$PY" "$ROOT/tmp_probe/ptx_dump.py" "$OUT/ptx-$side" lj morse) > /dev/null 2>&1
  for f in "$OUT"/ptx-$side/*.ptx; do
    ptxas -arch=sm_90 -v -o /dev/null "$f" > "$f.ptxas.txt" 2>&1 || true
  done
  python3 "$ROOT/tmp_probe/ptx_loops.py" "$OUT"/ptx-$side/*vjp.ptx > "$OUT/ptx-$side/loops.txt" 2>&1
  rm -f "$OUT"/ptx-$side/*.ll
done
uptime >> "$OUT/environment.txt"
