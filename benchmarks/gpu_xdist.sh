#!/usr/bin/env bash
# h6/xdist: on a GPU machine plain `pytest` (addopts -n auto) must run in pytest's own process
# (tests/conftest.py returns 0 workers where /dev/nvidiactl exists) and the GPU tests pass as before.
# From the repository root, with PYTHONPATH=. ; writes $OUT/xdist/; about a minute.
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$OUT/xdist"
{ ls -l /dev/nvidiactl /dev/kfd; python3 -m pip show pytest-xdist | head -2; } > "$OUT/xdist/nodes.txt" 2>&1
timeout 200 python3 -m pytest -p no:cacheprovider tests/runtime/test_cuda.py tests/test_readme.py \
  tests/determinism/test_gpu.py > "$OUT/xdist/pytest.txt" 2>&1
echo "pytest exit $?" >> "$OUT/xdist/pytest.txt"
echo "xdist workers started: $(grep -c '^created: ' "$OUT/xdist/pytest.txt") (0 expected)" >> "$OUT/xdist/pytest.txt"
tail -3 "$OUT/xdist/pytest.txt"
