#!/bin/bash
# On the H200, after part B: LJ75 (step 6 of ../2026-12-04-h200-contention/gpu_next_session.sh), then
# the research example and the user-kernel rows with peer adds off (=0) and on (the default).
# Run from the repo root: OUT=... bash benchmarks/results/2026-12-06-gpu/part_c.sh
set -u
mkdir -p /tmp/site && pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl > /dev/null 2>&1
export PYTHONPATH=.:/tmp/site XLA_PYTHON_CLIENT_PREALLOCATE=false
mkdir -p "$OUT"
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$OUT/environment.txt" 2>&1
ADOFFLOAD_CACHE_DIR=$(mktemp -d) timeout 190 python examples/chemistry/lj_clusters.py --device cuda --atoms 75 --until-reached \
    --time-limit 170 --out "$OUT/lj75" > "$OUT/lj75.log" 2>&1
echo "lj75: rc=$? $(tail -4 "$OUT/lj75.log" | tr '\n' ';')" >> "$OUT/environment.txt"
for peer in 0 1; do
  for shape in "--configs 512 --atoms 64 --steps 200" ""; do
    name=research_peer${peer}_$( [ -z "$shape" ] && echo preset || echo 33k )
    ADOFFLOAD_PEER_ADDS=$peer ADOFFLOAD_CACHE_DIR=$(mktemp -d) timeout 45 python examples/research/learned_pair_potential.py \
        --device cuda --out "$OUT/$name" $shape > "$OUT/$name.log" 2>&1
    echo "$name: rc=$? $(grep -E '^adoffload kernel|^plain JAX' "$OUT/$name.log" | tr -s ' ' | tr '\n' ';')" >> "$OUT/environment.txt"
  done
  ADOFFLOAD_PEER_ADDS=$peer ADOFFLOAD_CACHE_DIR=$(mktemp -d) timeout 75 python -m benchmarks user_kernels --device cuda \
      --potentials lj morse --sides "ours: jax" "hand-written CUDA" --no-launches --reps 10 --out "$OUT/user_kernels_peer$peer" \
      > "$OUT/user_kernels_peer$peer.log" 2>&1
  echo "user kernels peer $peer: rc=$?" >> "$OUT/environment.txt"
done
rm -f "$OUT"/*/loss.png
cat "$OUT/environment.txt"
