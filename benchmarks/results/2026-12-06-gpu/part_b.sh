#!/bin/bash
# After part A: peer adds on by default (uniform addresses left to the reductions). 1. the GPU tests
# around them (part A's 15 failures were all of that kind); 2. steps 4-5 of
# ../2026-12-04-h200-contention/gpu_next_session.sh: the tape/optimize tests on CUDA, the 10^6 fits.
# Run from the repo root: OUT=... bash benchmarks/results/2026-12-06-gpu/part_b.sh
set -u
mkdir -p /tmp/site && pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl > /dev/null 2>&1
export PYTHONPATH=.:/tmp/site XLA_PYTHON_CLIENT_PREALLOCATE=false
mkdir -p "$OUT"
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; git log --oneline -1; } > "$OUT/environment.txt" 2>&1
timeout 150 python -m pytest -n 12 -q -p no:cacheprovider tests/gpu tests/codegen tests/jax/test_gpu*.py \
    tests/research tests/ad/test_reverse_gpu_code.py > "$OUT/tests_default.txt" 2>&1
echo "tests (peer adds on by default): rc=$? $(tail -1 $OUT/tests_default.txt)" >> "$OUT/environment.txt"
timeout 150 python -m pytest -n 12 -q -p no:cacheprovider tests/gpu/test_device_path.py tests/gpu/test_table.py \
    tests/gpu/test_deferred_cuda.py tests/gpu/test_lean_cuda.py tests/jax/test_dynamic_tape.py tests/test_tape_scan.py \
    tests/blocks/test_cuda.py tests/ad/test_second_order.py tests/enzyme/test_tape.py tests/optimize > "$OUT/tests_tapes.txt" 2>&1
echo "tests (tapes, optimize): rc=$? $(tail -1 $OUT/tests_tapes.txt)" >> "$OUT/environment.txt"
ADOFFLOAD_CACHE_DIR=$(mktemp -d) timeout 200 python -m benchmarks optimize --cases fits --device cuda --curves 1000000 \
    --fit-reps 3 --out "$OUT/fits" > "$OUT/fits.log" 2>&1
echo "fits: rc=$?" >> "$OUT/environment.txt"
cat "$OUT/environment.txt"; grep -E "FAILED|Error" "$OUT"/tests_*.txt | head -30; tail -40 "$OUT/fits.log"
