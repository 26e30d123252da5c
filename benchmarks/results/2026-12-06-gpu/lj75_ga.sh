#!/bin/bash
# LJ75 and LJ38 with the cut-and-splice GA (lj_clusters.py --search ga), fresh processes, empty compile caches.
# 16384 members (the GPU's preset, which fills it) as 64 islands of 256 (the GPU default --island-size):
# a minimization call costs nearly the same at 4096 clusters as at 16384, so a smaller population
# would run no more generations, only fewer children; islands of 256 keep each GA small (it
# converges within tens of generations, like the host's population of 64) and search 64 funnels at once.
# Run from the repo root: OUT=... bash benchmarks/results/2026-12-06-gpu/lj75_ga.sh
set -u
mkdir -p /tmp/site && pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl > /dev/null 2>&1
export PYTHONPATH=.:/tmp/site XLA_PYTHON_CLIENT_PREALLOCATE=false
mkdir -p "$OUT"
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; git log --oneline -1; } > "$OUT/environment.txt" 2>&1
ADOFFLOAD_CACHE_DIR=$(mktemp -d) timeout 280 python examples/chemistry/lj_clusters.py --device cuda --atoms 75 --search ga \
    --steps 100000 --until-reached --time-limit 240 --out "$OUT/lj75_ga" > "$OUT/lj75_ga.log" 2>&1
echo "lj75 ga: rc=$? $(tail -5 "$OUT/lj75_ga.log" | tr '\n' ';')" >> "$OUT/environment.txt"
ADOFFLOAD_CACHE_DIR=$(mktemp -d) timeout 100 python examples/chemistry/lj_clusters.py --device cuda --atoms 38 --search ga \
    --steps 100000 --until-reached --time-limit 60 --out "$OUT/lj38_ga" > "$OUT/lj38_ga.log" 2>&1
echo "lj38 ga: rc=$? $(tail -5 "$OUT/lj38_ga.log" | tr '\n' ';')" >> "$OUT/environment.txt"
cat "$OUT/environment.txt"
