#!/bin/bash
# On the GPU: LJ75 with the cut-and-splice GA (64 islands of 256) and with lattice-seeded basin hopping,
# LJ38 with the GA; fresh processes, empty compile caches. (lj75_ga.sh with shorter limits, plus --starts lattices.)
# Run from the repo root: OUT=... bash benchmarks/results/2026-12-06-gpu/part_d.sh
set -u
export PYTHONPATH=. XLA_PYTHON_CLIENT_PREALLOCATE=false
mkdir -p "$OUT"
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$OUT/environment.txt" 2>&1
run() {  # name timeout args...
  local name=$1 limit=$2; shift 2
  ADOFFLOAD_CACHE_DIR=$(mktemp -d) timeout $limit python examples/chemistry/lj_clusters.py --device cuda "$@" \
      --out "$OUT/$name" > "$OUT/$name.log" 2>&1
  echo "$name: rc=$? $(grep -E 'lowest|reached|^time' "$OUT/$name.log" | tr '\n' ';')" >> "$OUT/environment.txt"
}
run lj75_ga 130 --atoms 75 --search ga --steps 100000 --until-reached --time-limit 100
# (lattice-started basin hopping: dropped for the device budget; on the host it ended where random starts do)
run lj38_ga 60 --atoms 38 --search ga --steps 100000 --until-reached --time-limit 40
rm -f "$OUT"/*/*.png
cat "$OUT/environment.txt"
