#!/bin/bash
# For the next session with a GPU (not run: no device was lent after the first call of 2026-12-04's
# second session). Peer adds (codegen/gpu/peer_adds.py) are opt-in (ADOFFLOAD_PEER_ADDS=1) until this
# runs: 1. their CUDA tests and the GPU tests around them; 2. the research example at 33k atoms and the
# preset, off then on, each a fresh process and cache; 3. the user-kernel rows (LJ, Morse
# value_and_grad; their d_pos[j] adds are gathered too, into an array too large to group: one uniform branch) off then on.
# Flip the default in codegen/__init__.py only if 1 passes and 3 does not get slower.
# Then 4. the reverse-mode changes of the gpt2 merge on CUDA (static and dynamic tapes), 5. the fits
# at 10^6 both ways (the numpy path now leaves residuals and gradients on the device), 6. LJ75.
# At most ~9 minutes by its timeouts: run it as one device call, or split at the numbered steps.
# Run from the repo root:  OUT=... PYTHONPATH=.:/tmp/site bash benchmarks/results/2026-12-04-h200-contention/gpu_next_session.sh
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
timeout 150 python -m pytest -n 12 -q -p no:cacheprovider tests/gpu/test_device_path.py tests/gpu/test_table.py \
    tests/gpu/test_deferred_cuda.py tests/gpu/test_lean_cuda.py tests/jax/test_dynamic_tape.py tests/test_tape_scan.py \
    tests/blocks/test_cuda.py tests/ad/test_second_order.py tests/enzyme/test_tape.py tests/optimize > "$OUT/tests_tapes.txt" 2>&1
echo "tests (tapes, optimize): rc=$?" >> "$OUT/environment.txt"
ADOFFLOAD_CACHE_DIR=$(mktemp -d) timeout 150 python -m benchmarks optimize --cases fits --device cuda --curves 1000000 \
    --fit-reps 3 --out "$OUT/fits" > "$OUT/fits.log" 2>&1
echo "fits: rc=$?" >> "$OUT/environment.txt"
ADOFFLOAD_CACHE_DIR=$(mktemp -d) timeout 200 python examples/chemistry/lj_clusters.py --device cuda --atoms 75 --until-reached \
    --time-limit 180 --out "$OUT/lj75" > "$OUT/lj75.log" 2>&1
echo "lj75: rc=$? $(grep -E 'reached|best' "$OUT/lj75.log" | tail -2 | tr '\n' ';')" >> "$OUT/environment.txt"
cat "$OUT/environment.txt"
cd "$OUT" && tar czf ../peer_adds.tgz . && mv ../peer_adds.tgz .
