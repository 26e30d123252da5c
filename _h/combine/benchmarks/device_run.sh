#!/usr/bin/env bash
# The full GPU session in one device call: doctor, multi-GPU shard_map, GPU test folders (one
# process each: a device fault poisons a CUDA context for the whole process), the CUDA parity
# suite report, then every benchmark. At most 8 files come back (the device tool's limit).
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
log="$OUT/log.txt"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -m adoffload doctor; } > "$log" 2>&1
timeout 120 python3 benchmarks/shard_map_gpus.py >> "$log" 2>&1
: > "$OUT/pytest.txt"
for t in ${TESTS:-tests/runtime tests/jax tests/determinism tests/reliability/test_gpu_faults.py tests/codegen/test_reductions_cuda.py tests/test_launch.py}; do
  echo "=== $t" >> "$OUT/pytest.txt"
  timeout "${TEST_TIMEOUT:-150}" python3 -m pytest -q -p no:cacheprovider -rfEs -x "$t" 2>&1 \
    | grep -v "^[EW]11[0-9][0-9]\|cuda_status\|Source Location\|^$" | tail -30 >> "$OUT/pytest.txt"
done
timeout 200 python3 tests/gpu/report.py --out "$OUT/gpu" > /dev/null 2>&1
grep -E "passed|failed" "$OUT/gpu/gpu_suite.md" | head -3
timeout "${BENCH_TIMEOUT:-330}" python3 benchmarks/run.py ${BENCH_ARGS:-} --out "$OUT/bench" >> "$log" 2>&1
grep -E "=== |passed|failed|error" "$OUT/pytest.txt" | tail -30
grep -v "^[EW]11[0-9][0-9]" "$log" | tail -25
