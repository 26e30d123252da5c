#!/bin/bash
# hostlaunch branch on the GPU machine: CUDA launches must be unchanged by the native host entries
# (Kernel.__call__ is now a property; host plans get native entries, CUDA plans never do).
# Run from the repo root: bash tmp_probe/gpu_hostlaunch.sh   (writes to $OUT)
set -u
OUT=${OUT:-/tmp/gpu_hostlaunch}
mkdir -p "$OUT"
export PYTHONPATH=.
nvidia-smi -L > "$OUT/gpu.txt" 2>&1
cat /proc/loadavg > "$OUT/loadavg.txt"
# 1. the launch-cost timing on CUDA (CuPy arrays), 3 processes, and on the host of that machine
for k in 1 2 3; do
  python -m adoffload.testing.launch_timing --device cuda --rounds 9 2>/dev/null | tail -1 >> "$OUT/launch_timing_cuda.jsonl"
  python -m adoffload.testing.launch_timing --device cpu --rounds 9 2>/dev/null | tail -1 >> "$OUT/launch_timing_host.jsonl"
done
# 2. the GPU launch tests and the host native-entry tests
timeout 1500 python -m pytest -q -x tests/gpu/test_launch_plans_gpu.py tests/gpu/test_async_launch_gpu.py \
  tests/gpu/test_resident_launch.py tests/gpu/test_cuda_launch.py tests/gpu/test_device_path.py \
  tests/runtime/test_launch_plans.py tests/runtime/test_async_launch.py tests/runtime/test_native_launch.py \
  tests/reliability/test_native_bad_inputs.py > "$OUT/pytest.txt" 2>&1
echo "pytest exit $?" >> "$OUT/pytest.txt"
tail -3 "$OUT/pytest.txt"
