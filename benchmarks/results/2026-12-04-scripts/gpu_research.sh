#!/bin/bash
# research (issue 32 item 5): examples/research/learned_pair_potential.py on the GPU, the Equinox
# model with the adoffload kernel as its energy layer against the same model in plain JAX, trained
# with optax on energies and forces (second order through the custom call): per-step times.
# Runs (each in a fresh process, with an empty adoffload compile cache):
#   1. the example's default GPU preset (2048 clusters x 64 atoms = 131,072 atoms, 300 Adam steps)
#   2. 64 clusters x 64 atoms  =  4,096 atoms (the "4k atoms"), 200 steps
#   3. 512 clusters x 64 atoms = 32,768 atoms (the "33k atoms"), 200 steps
# and prints each run's table (first step s, step ms median, plain/kernel ratio) at the end.
# Run from the repo root on the GPU machine:   PYTHONPATH=.:/tmp/site bash tmp_probe/gpu_research.sh
#     ... bash tmp_probe/gpu_research.sh tests    this branch's GPU-side tests instead (the research
#     example's CUDA test, the deferred reductions' CUDA runs and PTX), at most 120 s
# Needs jax + CUDA and the equinox/optax/jaxtyping/wadler-lindig/absl-py wheels on PYTHONPATH;
# no clang, no network; at most ~120 s (each run has its own limit; a run cut short says so).
set -u
OUT=${OUT:-/tmp/research_out}
mkdir -p "$OUT"
PY=${PYTHON:-python}
command -v "$PY" >/dev/null || PY=python3
export PYTHONPATH=${PYTHONPATH:-.:/tmp/site}
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader; uptime; nproc;
  "$PY" -c "import jax, equinox, optax; print('jax', jax.__version__, 'equinox', equinox.__version__, 'optax', optax.__version__)"; } \
    > "$OUT/environment.txt" 2>&1

if [ "${1:-}" = tests ]; then
  timeout 120 "$PY" -m pytest -n 0 -q -p no:cacheprovider tests/research tests/codegen/test_reductions_cuda.py \
      tests/codegen/test_reductions.py > "$OUT/tests.log" 2>&1
  echo "tests: rc=$?" >> "$OUT/environment.txt"
  tail -5 "$OUT/tests.log"
  exit 0
fi

run() {   # name, time limit, example options...
  local name=$1 limit=$2
  shift 2
  local cache
  cache=$(mktemp -d)
  ADOFFLOAD_CACHE_DIR=$cache timeout "$limit" "$PY" examples/research/learned_pair_potential.py --device cuda \
      --out "$OUT/$name" "$@" > "$OUT/$name.log" 2>&1
  echo "rc=$?" >> "$OUT/$name.log"
  rm -rf "$cache"
}
run preset 50
run atoms4096 35 --configs 64 --atoms 64 --steps 200
run atoms32768 35 --configs 512 --atoms 64 --steps 200

cat "$OUT/environment.txt"
for name in preset atoms4096 atoms32768; do
  echo "== $name"
  grep -E "two-species clusters|^loss|second-order gradient|^model|^adoffload kernel|^plain JAX|rc=" "$OUT/$name.log" \
      || tail -5 "$OUT/$name.log"
done
