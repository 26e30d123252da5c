#!/usr/bin/env bash
# One device call: install carried test wheels, doctor, each test folder in its own process
# (a device fault poisons a CUDA context for the whole process), then the benchmarks.
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -m adoffload doctor > "$OUT/doctor.txt" 2>&1
: > "$OUT/pytest.txt"
for t in ${TESTS:-tests/*/ tests/test_*.py}; do
  echo "=== $t" >> "$OUT/pytest.txt"
  timeout "${TEST_TIMEOUT:-150}" python3 -m pytest -q -p no:cacheprovider -rfEs "$t" 2>&1 \
    | grep -v "^[EW]1130\|cuda_status\|Source Location\|^$" | tail -40 >> "$OUT/pytest.txt"
  echo "$t: $(grep -E '[0-9]+ (passed|failed)' "$OUT/pytest.txt" | tail -1)"
done
timeout "${BENCH_TIMEOUT:-300}" python3 benchmarks/run.py ${BENCH_ARGS:---quick} --out "$OUT/bench" > "$OUT/bench.log" 2>&1
grep -v "^[EW]1130" "$OUT/bench.log" | tail -45
