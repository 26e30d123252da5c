"""GPU probe for branch cudalaunch (run by tmp_probe/gpu_cudalaunch.sh): results of launches queued through
CuPy's launchKernel and cuda-python's cuLaunchKernel agree with the formula, and what each call costs alone.
Prints one JSON object."""
import cProfile
import io
import json
import os
import pstats
import time

import cupy
import numpy as np

import adoffload as ado
from adoffload.runtime.cuda import LAUNCH_CALL_ENV
from benchmarks.kernels.user import saxpy

N = 16
out = {"launch_call_env": os.environ.get(LAUNCH_CALL_ENV)}
reverse = ado.vjp(saxpy, ["x", "y"])
a = np.float32(2.0)
x, y = cupy.arange(N, dtype=cupy.float32), cupy.zeros(N, cupy.float32)
dx, dy = cupy.zeros(N, cupy.float32), cupy.ones(N, cupy.float32)
expected = 20.0 * np.arange(N, dtype=np.float32)
for _ in range(10):
    saxpy(a, x, y, grid=N, device="cuda")
out["primal_ok"] = bool(np.array_equal(y.get(), expected))
y = cupy.zeros(N, cupy.float32)
for _ in range(10):                  # the vjp also runs the primal (y += a x) and adds a * d_y to d_x
    reverse(a, x, y, dx, dy, grid=N, device="cuda")
out["vjp_ok"] = bool(np.array_equal(dx.get(), np.full(N, 20.0, np.float32)) and np.array_equal(y.get(), expected)
                     and np.array_equal(dy.get(), np.ones(N, np.float32)))
plan = saxpy._last_plan
variant = next(iter(plan.variants.values()))
prepared = variant.prepared
out["call"] = getattr(prepared.call, "__module__", None) or repr(prepared.call)
out["call_is_cupy"] = getattr(prepared.call, "__module__", None) == "adoffload.runtime.cuda"
buffer, params, _kept = variant.frame()
dev = plan.device
cu = dev.lib
handle, stream = prepared.function.handle, prepared.stream


def per_call(f, number=20000):
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(number):
            f()
        cupy.cuda.Device().synchronize()
        best = min(best, (time.perf_counter() - t) / number * 1e6)
    return round(best, 3)


g = prepared.grid
out["us_prepared_call"] = per_call(lambda: prepared.call(*prepared.arguments, params, 0))
out["us_cuda_python_cuLaunchKernel"] = per_call(lambda: cu.cuLaunchKernel(handle, *g, prepared.block, 1, 1, 0, stream,
                                                                          params, 0))
try:
    launch = cupy.cuda.driver.launchKernel
    out["us_cupy_launchKernel"] = per_call(lambda: launch(int(handle), *g, prepared.block, 1, 1, 0, 0, params, 0))
except Exception as exc:  # noqa: BLE001
    out["cupy_launchKernel_error"] = repr(exc)
out["us_activate"] = per_call(dev.activate)
out["us_ring_check"] = per_call(dev.status_ring().check)
out["us_ours_primal"] = per_call(lambda: saxpy(a, x, y, grid=N, device="cuda"), 5000)
out["us_ours_vjp"] = per_call(lambda: reverse(a, x, y, dx, dy, grid=N, device="cuda"), 5000)
elementwise = cupy.ElementwiseKernel("float32 a, float32 x", "float32 y", "y = a * x + y", "probe_saxpy")
out["us_cupy_elementwise"] = per_call(lambda: elementwise(a, x, y), 5000)
profiler = cProfile.Profile()
profiler.enable()
for _ in range(3000):
    reverse(a, x, y, dx, dy, grid=N, device="cuda")
profiler.disable()
cupy.cuda.Device().synchronize()
text = io.StringIO()
pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(18)
out["profile_vjp"] = text.getvalue()
print(json.dumps(out))
