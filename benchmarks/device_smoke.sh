#!/usr/bin/env bash
# One device call: install carried test wheels, doctor, the whole test suite, quick benchmarks.
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -m adoffload doctor > "$OUT/doctor.txt" 2>&1
timeout "${TEST_TIMEOUT:-280}" python3 -m pytest -q -p no:cacheprovider -rs ${TESTS:-tests} > "$OUT/pytest.txt" 2>&1
tail -25 "$OUT/pytest.txt"
timeout "${BENCH_TIMEOUT:-240}" python3 benchmarks/run.py ${BENCH_ARGS:---quick} --out "$OUT/bench" > "$OUT/bench.log" 2>&1
tail -40 "$OUT/bench.log"
