#!/bin/bash
# For the next session with a GPU (not run: no device was lent after the first call of 2026-12-04's
# second session). Peer adds (codegen/gpu/peer_adds.py) are opt-in (ADOFFLOAD_PEER_ADDS=1) until this
# runs: 1. their CUDA tests and the GPU tests around them; 2. the research example at 33k atoms and the
# preset, off then on, each a fresh process and cache; 3. the user-kernel rows (LJ, Morse
# value_and_grad; their d_pos[j] adds are gathered too, into an array too large to group: one uniform branch) off then on.
# Flip the default in codegen/__init__.py only if 1 passes and 3 does not get slower.
# Run from the repo root:  OUT=... PYTHONPATH=.:/tmp/site bash benchmarks/results/2026-12-04-h200-contention/gpu_peer_adds.sh
set -u
OUT=${OUT:-/tmp/peer_adds_out}; mkdir -p "$OUT"
export XLA_PYTHON_CLIENT_PREALLOCATE=false
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; uptime; git log --oneline -1; } > "$OUT/environment.txt" 2>&1
ADOFFLOAD_PEER_ADDS=1 timeout 200 python -m pytest -n 12 -q -p no:cacheprovider tests/gpu tests/codegen tests/jax/test_gpu*.py \
    tests/research tests/ad/test_reverse_gpu_code.py > "$OUT/tests_peer_adds_on.txt" 2>&1
echo "tests (peer adds on): rc=$?" >> "$OUT/environment.txt"
for peer in 0 1; do
  for shape in "--configs 512 --atoms 64 --steps 200" ""; do
    name=research_peer${peer}_$( [ -z "$shape" ] && echo preset || echo 33k )
    ADOFFLOAD_PEER_ADDS=$peer ADOFFLOAD_CACHE_DIR=$(mktemp -d) timeout 60 python examples/research/learned_pair_potential.py \
        --device cuda --out "$OUT/$name" $shape > "$OUT/$name.log" 2>&1
    echo "$name: $(grep -E '^adoffload kernel|^plain JAX' "$OUT/$name.log" | tr -s ' ' | tr '\n' ';')" >> "$OUT/environment.txt"
  done
  ADOFFLOAD_PEER_ADDS=$peer ADOFFLOAD_CACHE_DIR=$(mktemp -d) timeout 90 python -m benchmarks user_kernels --device cuda \
      --potentials lj morse --sides "ours: jax" "hand-written CUDA" --no-launches --reps 10 --out "$OUT/user_kernels_peer$peer" \
      > "$OUT/user_kernels_peer$peer.log" 2>&1
  echo "user kernels peer $peer: rc=$?" >> "$OUT/environment.txt"
done
cat "$OUT/environment.txt"
cd "$OUT" && tar czf ../peer_adds.tgz . && mv ../peer_adds.tgz .
