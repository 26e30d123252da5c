#!/bin/bash
# Branch cudalaunch (issue 31, CUDA tiny launch): GPU tests of the launch path, then the tiny/large
# saxpy launch rows against CuPy for this branch ("after") and for the branch point ("before": the
# four changed files as they were, from tmp_probe/cudalaunch_base, in a copy of the tree), in one call.
# Run from the repo root: OUT=... bash tmp_probe/gpu_cudalaunch.sh   (about 2 minutes; ROUNDS=2 interleaves the trees twice; no clang, no network)
set -u
OUT=${OUT:-/tmp/gpu_cudalaunch}; mkdir -p "$OUT"
PY=${PY:-python}
export PYTHONPATH=.
{ nvidia-smi --query-gpu=name,driver_version --format=csv; lscpu | grep "Model name"; uptime;
  $PY -c "import cupy, cuda.bindings; print('cupy', cupy.__version__, 'cuda-bindings', cuda.bindings.__version__)"; } \
  > "$OUT/gpu.txt" 2>&1
git rev-parse HEAD >> "$OUT/gpu.txt" 2>/dev/null

# 1. tests (the fake-driver tests included: they run on any machine)
timeout 150 $PY -m pytest -q -x -n 4 tests/gpu/test_launch_plans_gpu.py tests/gpu/test_async_launch_gpu.py \
  tests/runtime/test_cuda.py tests/runtime/test_cuda_fast_launch.py tests/runtime/test_async_launch.py \
  > "$OUT/tests.txt" 2>&1
echo "tests rc=$?" >> "$OUT/tests.txt"; tail -3 "$OUT/tests.txt"

# 2. the launch rows of the user_kernels suite (benchmarks/tiny_launches.py) and launch_timing, before/after
ROWS='
import json, sys
from benchmarks.tiny_launches import launch_rows
rows = []
launch_rows(rows, "cuda", quick=False)
for r in rows: print(json.dumps({**r, "tree": sys.argv[1]}))
'
BASE=$(mktemp -d)/tree
mkdir -p "$BASE" && cp -r adoffload benchmarks pyproject.toml "$BASE"/ && cp -r tmp_probe/cudalaunch_base/adoffload "$BASE"/
# trees: after (launches through CuPy's launchKernel: the default where CuPy is imported), after with
# ADOFFLOAD_CUDA_LAUNCH_CALL=cuda-python (cuda-python's cuLaunchKernel), before (the branch point's files)
for round in $(seq 1 ${ROUNDS:-1}); do
  for tree in after after-cuda-python before; do
    dir=.; [ "$tree" = before ] && dir="$BASE"
    call=; [ "$tree" = after-cuda-python ] && call=cuda-python
    (cd "$dir" && ADOFFLOAD_CUDA_LAUNCH_CALL=$call timeout 60 $PY -c "$ROWS" "$tree" >> "$OUT/rows.jsonl" 2>> "$OUT/rows.err")
    [ $round = 1 ] && (cd "$dir" && ADOFFLOAD_CUDA_LAUNCH_CALL=$call timeout 40 $PY -m adoffload.testing.launch_timing \
       --device cuda --n 16 --rounds 7 | sed "s/^{/{\"tree\": \"$tree\", \"n\": 16, /" >> "$OUT/launch_timing.jsonl" 2>> "$OUT/rows.err")
  done
done
# 3. results of both launch calls against the formula, and each call's cost alone, with a cProfile of vjp launches
for call in cupy cuda-python; do
  ADOFFLOAD_CUDA_LAUNCH_CALL=$call timeout 60 $PY tmp_probe/cudalaunch_gpu_probe.py > "$OUT/probe_$call.json" 2>> "$OUT/rows.err"
done
$PY - "$OUT" <<'PY'
import json, sys, collections
out = sys.argv[1]
best = collections.defaultdict(lambda: float("inf"))
for line in open(f"{out}/rows.jsonl"):
    r = json.loads(line)
    if "us_per_call" in r:
        key = (r["tree"], r["size"], r["side"])
        best[key] = min(best[key], r["us_per_call"])
with open(f"{out}/summary.txt", "w") as f:
    for tree in ("before", "after", "after-cuda-python"):
        for size in (16, 1 << 24):
            cupy = best.get((tree, size, "CuPy: ElementwiseKernel saxpy"))
            for (t, s, side), us in sorted(best.items()):
                if t == tree and s == size:
                    print(f"{tree:6} n={size:<9} {side:45} {us:8.2f} us  {us / cupy if cupy else float('nan'):.2f}x CuPy", file=f)
    for call in ("cupy", "cuda-python"):
        try:
            probe = json.load(open(f"{out}/probe_{call}.json"))
        except Exception as exc:  # noqa: BLE001
            print(f"probe {call}: {exc!r}", file=f)
            continue
        probe.pop("profile_vjp", None)
        print(f"probe {call}: {json.dumps(probe)}", file=f)
print(open(f"{out}/summary.txt").read())
PY
