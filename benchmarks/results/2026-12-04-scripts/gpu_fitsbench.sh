#!/bin/bash
# fitsbench (issue 32 item 4): the decay-fits benchmark on the GPU, both ways (numpy in/out and
# device-resident), at 10^6 and 10^5 curves, and where the time of our numpy path goes.
# Run from the repo root on the GPU machine (writes under $OUT):
#     PYTHONPATH=.:/tmp/site bash tmp_probe/gpu_fitsbench.sh          # the benchmark, at most ~145 s
#     PYTHONPATH=.:/tmp/site bash tmp_probe/gpu_fitsbench.sh tests    # this branch's GPU tests, at most 120 s
# Needs jax + CUDA, the optimistix/equinox/lineax/jaxtyping/wadler-lindig wheels on PYTHONPATH; no clang,
# no network. Every step has its own time limit; rows measured before a limit are kept.
set -u
OUT=${OUT:-/tmp/fitsbench_out}
mkdir -p "$OUT"
PY=${PYTHON:-python}
command -v "$PY" >/dev/null || PY=python3
export PYTHONPATH=${PYTHONPATH:-.:/tmp/site}
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,pcie.link.gen.current,pcie.link.width.current \
    --format=csv,noheader; uptime; nproc; cat /sys/kernel/mm/transparent_hugepage/enabled;
  "$PY" -c "import optimistix, jax; print('optimistix', optimistix.__version__, 'jax', jax.__version__)"; } \
    > "$OUT/environment.txt" 2>&1

if [ "${1:-}" = tests ]; then
  timeout 120 "$PY" -m pytest -n 4 -q -p no:cacheprovider tests/runtime/test_staging.py \
      tests/optimize/test_gpu.py tests/optimize/test_numpy_path.py > "$OUT/tests.log" 2>&1
  echo "tests: rc=$?" >> "$OUT/environment.txt"
  tail -5 "$OUT/tests.log"
  exit 0
fi

# 1. the suite's fits case at 10^6 curves (fresh process, empty compile cache, 3 timed calls per row)
timeout 75 "$PY" -m benchmarks optimize --cases fits --device cuda --curves 1000000 --fit-reps 3 \
    --fits-timeout 68 --out "$OUT/fits-1e6" > "$OUT/fits-1e6.log" 2>&1
echo "fits 1e6: rc=$?" >> "$OUT/environment.txt"
# 2. our numpy path split into h2d / kernel / d2h / other, before (main's copies, messages, optimality)
#    and after; raw copy rates (its own compile cache: one LM kernel compile)
ADOFFLOAD_CACHE_DIR=$(mktemp -d) timeout 30 "$PY" tmp_probe/fitsbench_breakdown.py "$OUT/breakdown.jsonl" \
    1000000 100000 > "$OUT/breakdown.log" 2>&1
echo "breakdown: rc=$?" >> "$OUT/environment.txt"
# 3. the suite's fits case at 10^5 curves
timeout 40 "$PY" -m benchmarks optimize --cases fits --device cuda --curves 100000 --fit-reps 3 \
    --fits-timeout 35 --out "$OUT/fits-1e5" > "$OUT/fits-1e5.log" 2>&1
echo "fits 1e5: rc=$?" >> "$OUT/environment.txt"
uptime >> "$OUT/environment.txt"
cat "$OUT/environment.txt"
for size in 1e6 1e5; do
  [ -f "$OUT/fits-$size/report.md" ] && sed -n '/^Decay fits, optimistix/,/^### /p' "$OUT/fits-$size/report.md"
done
[ -f "$OUT/breakdown.jsonl" ] && grep -E '"config"|"raw"' "$OUT/breakdown.jsonl"
