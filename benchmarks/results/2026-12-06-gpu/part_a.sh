#!/bin/bash
# Steps 1-3 of ../2026-12-04-h200-contention/gpu_next_session.sh with tighter timeouts (one device call):
# peer adds' GPU tests, the research example off/on, the user-kernel rows off/on.
# Run from the repo root: OUT=... bash benchmarks/results/2026-12-06-gpu/part_a.sh
set -u
mkdir -p /tmp/site && pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl > /dev/null 2>&1
export PYTHONPATH=.:/tmp/site XLA_PYTHON_CLIENT_PREALLOCATE=false
mkdir -p "$OUT"
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; uptime; git log --oneline -1; } > "$OUT/environment.txt" 2>&1
ADOFFLOAD_PEER_ADDS=1 timeout 150 python -m pytest -n 12 -q -p no:cacheprovider tests/gpu tests/codegen tests/jax/test_gpu*.py \
    tests/research tests/ad/test_reverse_gpu_code.py > "$OUT/tests_peer_adds_on.txt" 2>&1
echo "tests (peer adds on): rc=$? $(tail -1 $OUT/tests_peer_adds_on.txt)" >> "$OUT/environment.txt"
for peer in 0 1; do
  for shape in "--configs 512 --atoms 64 --steps 200" ""; do
    name=research_peer${peer}_$( [ -z "$shape" ] && echo preset || echo 33k )
    ADOFFLOAD_PEER_ADDS=$peer ADOFFLOAD_CACHE_DIR=$(mktemp -d) timeout 50 python examples/research/learned_pair_potential.py \
        --device cuda --out "$OUT/$name" $shape > "$OUT/$name.log" 2>&1
    echo "$name: rc=$? $(grep -E '^adoffload kernel|^plain JAX' "$OUT/$name.log" | tr -s ' ' | tr '\n' ';')" >> "$OUT/environment.txt"
  done
  ADOFFLOAD_PEER_ADDS=$peer ADOFFLOAD_CACHE_DIR=$(mktemp -d) timeout 80 python -m benchmarks user_kernels --device cuda \
      --potentials lj morse --sides "ours: jax" "hand-written CUDA" --no-launches --reps 10 --out "$OUT/user_kernels_peer$peer" \
      > "$OUT/user_kernels_peer$peer.log" 2>&1
  echo "user kernels peer $peer: rc=$?" >> "$OUT/environment.txt"
done
cat "$OUT/environment.txt"
tail -n 30 "$OUT"/user_kernels_peer*.log
