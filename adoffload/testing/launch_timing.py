"""What one small launch costs from Python, next to peers timed in the same process.

``launch_costs(device)`` times a saxpy (``out = a*x + y``, float32) launched from Python: the
adoffload kernel, its vjp and its jvp, and where they are installed a Numba ``@njit`` call and a Warp
launch (host), or a CuPy ElementwiseKernel (CUDA, with CuPy arrays: adoffload launches them in
place). Timings are interleaved: each round times ``number`` calls of every entry in turn, and
each entry's best round is kept, so a noisy machine (shared cores) slows them alike and the
ratios stay meaningful; the load average is reported beside them.

    python -m adoffload.testing.launch_timing [--device cpu|cuda] [--n 16] [--rounds 15]

prints one JSON object: microseconds per call by entry, the ratios the launch targets speak of,
the load, and on the host how many launches the native entries ran (kernels/native_entry.py; 0
with ``ADOFFLOAD_NATIVE_LAUNCH=0``, or on a version without them: absent). On CUDA, adoffload's launches on CuPy arrays return before the kernel ends, as CuPy's
do (their errors come at the next launch or synchronize; ``ADOFFLOAD_SYNC_LAUNCH=1`` makes them wait):
``cupy`` is CuPy's asynchronous per-call cost (each round synchronized once at its end), and
``cupy_synced`` synchronizes after each call, the cost of a launch that waits.
"""
from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np


def interleaved(calls: dict, number: int = 1000, rounds: int = 15, synchronize=None,
                warmup: dict | None = None) -> dict[str, float]:
    """Best microseconds per call of each callable in ``calls`` (name -> zero-argument callable),
    measured in interleaved rounds of ``number`` calls; ``synchronize`` (optional) runs before
    each round's clock stops (a GPU's pending work). ``warmup`` (optional) gets the milliseconds
    of each callable's first three calls (compiling, loading, a native entry made at the second)."""
    for name, call in calls.items():     # warm up: compile, load, first-call paths
        times = []
        for _ in range(3):
            start = time.perf_counter()
            call()
            times.append(round((time.perf_counter() - start) * 1e3, 3))
        if warmup is not None:
            warmup[name] = times
    best = {name: float("inf") for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            start = time.perf_counter()
            for _ in range(number):
                call()
            if synchronize is not None:
                synchronize()
            best[name] = min(best[name], (time.perf_counter() - start) / number * 1e6)
    return best


def saxpy_kernels():
    """The adoffload saxpy, its vjp and its jvp with respect to ``a`` and ``x``."""
    import adoffload as ado

    @ado.kernel
    def saxpy(a: ado.f32, x: ado.In[ado.f32], y: ado.In[ado.f32], out: ado.Out[ado.f32]):
        i = ado.tid()
        out[i] = a * x[i] + y[i]
    return saxpy, ado.vjp(saxpy, wrt=["a", "x"]), ado.jvp(saxpy, wrt=["a", "x"])


def host_calls(n: int = 16) -> dict:
    """Zero-argument callables: adoffload primal, vjp and jvp on the host, Numba and Warp where installed."""
    saxpy, saxpy_vjp, saxpy_jvp = saxpy_kernels()
    x, y, out = np.ones(n, np.float32), np.arange(n, dtype=np.float32), np.zeros(n, np.float32)
    d_a, d_x, d_out = np.zeros(1, np.float32), np.zeros(n, np.float32), np.ones(n, np.float32)
    t_x, t_out = np.ones(n, np.float32), np.zeros(n, np.float32)
    calls = {"adoffload": lambda: saxpy(2.0, x, y, out, grid=n),
             "adoffload_vjp": lambda: saxpy_vjp(2.0, x, y, out, d_a=d_a, d_x=d_x, d_out=d_out, grid=n),
             "adoffload_jvp": lambda: saxpy_jvp(2.0, x, y, out, d_a=1.0, d_x=t_x, d_out=t_out, grid=n)}
    try:
        import numba

        @numba.njit
        def nb_saxpy(a, x, y, out):
            for i in range(x.shape[0]):
                out[i] = a * x[i] + y[i]
        calls["numba"] = lambda: nb_saxpy(2.0, x, y, out)
    except ImportError:
        pass
    try:
        import warp as wp
        wp.config.quiet = True
        wp.init()

        @wp.kernel
        def wp_saxpy(a: float, x: wp.array(dtype=float), y: wp.array(dtype=float), out: wp.array(dtype=float)):
            i = wp.tid()
            out[i] = a * x[i] + y[i]
        wx, wy, wo = (wp.array(v, dtype=float, device="cpu") for v in (x, y, out))
        calls["warp"] = lambda: wp.launch(wp_saxpy, dim=n, inputs=[2.0, wx, wy, wo], device="cpu")
    except ImportError:
        pass
    return calls


def cuda_calls(n: int) -> tuple[dict, object]:
    """adoffload primal and vjp on ``cuda`` with CuPy arrays, and CuPy's ElementwiseKernel, with CuPy's
    synchronize; without CuPy, adoffload alone with DeviceArrays."""
    saxpy, saxpy_vjp, _ = saxpy_kernels()
    try:
        import cupy as cp
    except ImportError:
        from ..runtime import get_device
        from ..runtime.dlpack import DeviceArray
        device = get_device("cuda")

        def array(values):
            return DeviceArray.from_numpy(np.asarray(values, np.float32), device=device)
        x, y, out = array(np.ones(n)), array(np.arange(n)), array(np.zeros(n))
        d_a, d_x, d_out = array(np.zeros(1)), array(np.zeros(n)), array(np.ones(n))
        calls = {"adoffload": lambda: saxpy(2.0, x, y, out, grid=n, device="cuda"),
                 "adoffload_vjp": lambda: saxpy_vjp(2.0, x, y, out, d_a=d_a, d_x=d_x, d_out=d_out, grid=n,
                                                    device="cuda")}
        return calls, device.synchronize
    x, y, out = cp.ones(n, cp.float32), cp.arange(n, dtype=cp.float32), cp.zeros(n, cp.float32)
    d_a, d_x, d_out = cp.zeros(1, cp.float32), cp.zeros(n, cp.float32), cp.ones(n, cp.float32)
    kernel = cp.ElementwiseKernel("float32 a, float32 x, float32 y", "float32 out", "out = a * x + y", "cp_saxpy")
    sync = cp.cuda.Device().synchronize
    a = cp.float32(2.0)

    def synced():
        kernel(a, x, y, out)
        sync()
    calls = {"adoffload": lambda: saxpy(2.0, x, y, out, grid=n, device="cuda"),
             "adoffload_vjp": lambda: saxpy_vjp(2.0, x, y, out, d_a=d_a, d_x=d_x, d_out=d_out, grid=n, device="cuda"),
             "cupy": lambda: kernel(a, x, y, out), "cupy_synced": synced}
    return calls, sync


def launch_costs(device: str = "cpu", n: int = 16, rounds: int = 15, number: int | None = None) -> dict:
    """Microseconds per call of each entry, the target ratios, and the load average (see the module docstring)."""
    if device == "cpu":
        calls, sync = host_calls(n), None
    else:
        calls, sync = cuda_calls(n)
    number = number or (1000 if n <= 1 << 16 else 50)
    load_before = os.getloadavg()
    warmup: dict = {}
    times = interleaved(calls, number, rounds, sync, warmup)
    result = {"device": device, "n": n, "us_per_call": {k: round(v, 3) for k, v in times.items()},
              "first_calls_ms": warmup,
              "loadavg_before": load_before, "loadavg_after": os.getloadavg(), "cpus": os.cpu_count()}
    ratios = {}
    for peer in ("numba", "warp", "cupy", "cupy_synced"):
        if peer in times:
            for ours in ("adoffload", "adoffload_vjp", "adoffload_jvp"):
                if ours in times:
                    ratios[f"{ours}/{peer}"] = round(times[ours] / times[peer], 3)
    result["ratios"] = ratios
    if device == "cpu":
        try:
            from ..kernels.native_entry import totals
        except ImportError:                  # a version without native launch entries
            pass
        else:
            result["native_launches"] = totals()[0]
    return result


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--n", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--number", type=int, default=None)
    args = parser.parse_args(argv)
    print(json.dumps(launch_costs(args.device, args.n, args.rounds, args.number)))


if __name__ == "__main__":
    main()
