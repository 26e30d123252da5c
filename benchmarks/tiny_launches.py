"""What one launch from Python costs (issue 31): a 16-element f32 saxpy and its vjp, ours against a
Numba call and a Warp launch on the host, and ours on CuPy arrays against a CuPy ElementwiseKernel on
CUDA, plus a 16M-element saxpy (its arrays move 192 MB). Rows of the user_kernels suite.

Host launches return when the work is done; GPU sides are timed in batches of calls with one device
synchronize after each batch (the one timer), so a launch that synchronizes by itself pays for it.
"""
from __future__ import annotations

import numpy as np

from .results import describe_error
from .timing import time_calls

TINY, LARGE = 16, 1 << 24
BATCH = 100           # tiny calls per timed repetition


def _row(rows, size: int, side: str, call, wait, reps: int, batch: int, check=None) -> None:
    base = {"measure": f"saxpy launch ({'tiny' if size == TINY else 'large'})", "size": size,
            "size_unit": "f32 elements", "side": side}
    try:
        t = time_calls(call, wait, reps=reps, batch=batch, warmup=3)
        extra = check() if check is not None else {}
        rows.append({**base, **t.fields(), "batch": batch, "us_per_call": t.median_ms * 1e3, **extra})
    except Exception as exc:  # noqa: BLE001 - a failing side is a row with its error
        rows.append({**base, "error": describe_error(exc)})


def _saxpy_vjp_arguments(reverse, values: dict, zeros, ones) -> list:
    """The vjp kernel's arguments by parameter name: primal values, zero adjoints, a ones seed for y."""
    out = []
    for p in reverse.signature.params:
        if p.name in values:
            out.append(values[p.name])
        elif p.name == "d_y":
            out.append(ones(values["y"]))
        else:
            out.append(zeros(values[p.name[2:]]))
    return out


def host_rows(rows, reps: int, filters) -> None:
    import adoffload as ado
    from .kernels.user import saxpy
    from .suites.user_kernels import wanted
    x, y, a = np.arange(TINY, dtype=np.float32), np.zeros(TINY, np.float32), np.float32(2.0)
    reverse = ado.vjp(saxpy, ["x", "y"])
    vjp_args = _saxpy_vjp_arguments(reverse, {"a": a, "x": x, "y": y}, np.zeros_like, np.ones_like)
    sides = {"ours: saxpy launch (numpy arrays)": lambda: saxpy(a, x, y, grid=TINY),
             "ours: saxpy vjp launch (numpy arrays)": lambda: reverse(*vjp_args, grid=TINY)}
    try:
        from .peers import numba_peer
        sides["Numba: saxpy call"] = lambda: numba_peer.saxpy(a, x, y)
    except Exception as exc:  # noqa: BLE001
        rows.append({"measure": "saxpy launch (tiny)", "size": TINY, "side": "Numba: saxpy call",
                     "skipped": f"Numba is not importable here ({describe_error(exc, 200)})"})
    try:
        from .peers import warp_peer
        launch, adjoint = warp_peer.tiny_saxpy(TINY)
        sides["Warp: saxpy launch (CPU)"] = launch
        sides["Warp: saxpy adjoint launch (CPU)"] = adjoint
    except Exception as exc:  # noqa: BLE001
        rows.append({"measure": "saxpy launch (tiny)", "size": TINY, "side": "Warp: saxpy launch (CPU)",
                     "skipped": f"Warp is not importable here ({describe_error(exc, 200)}); pip install warp-lang"})
    for side, call in sides.items():
        if wanted(side, filters):
            _row(rows, TINY, side, call, lambda _: None, reps, BATCH)


def cuda_rows(rows, reps: int, filters) -> None:
    import adoffload as ado
    from .kernels.user import saxpy
    from .suites.user_kernels import wanted
    try:
        import cupy
    except Exception as exc:  # noqa: BLE001
        rows.append({"measure": "saxpy launch (tiny)", "size": TINY, "side": "CuPy",
                     "skipped": f"CuPy is not importable here ({describe_error(exc, 200)}): neither ours on CuPy "
                                "arrays nor the CuPy kernel can run"})
        return
    sync = lambda _: cupy.cuda.Device().synchronize()         # noqa: E731
    elementwise = cupy.ElementwiseKernel("float32 a, float32 x", "float32 y", "y = a * x + y", "bench_saxpy")
    reverse = ado.vjp(saxpy, ["x", "y"])
    a = np.float32(2.0)
    for size in (TINY, LARGE):
        x, y = cupy.arange(size, dtype=cupy.float32), cupy.zeros(size, cupy.float32)
        batch = BATCH if size == TINY else 10
        sides = {"ours: saxpy launch on CuPy arrays": lambda: saxpy(a, x, y, grid=size, device="cuda"),
                 "CuPy: ElementwiseKernel saxpy": lambda: elementwise(a, x, y)}
        if size == TINY:
            args = _saxpy_vjp_arguments(reverse, {"a": a, "x": x, "y": y}, cupy.zeros_like, cupy.ones_like)
            sides["ours: saxpy vjp launch on CuPy arrays"] = lambda: reverse(*args, grid=size, device="cuda")
        for side, call in sides.items():
            if wanted(side, filters):
                _row(rows, size, side, call, sync, reps, batch)


def launch_rows(rows, device: str, quick: bool, filters=None) -> None:
    reps = 5 if quick else 20
    if device == "cuda":
        cuda_rows(rows, reps, filters)
    else:
        host_rows(rows, reps, filters)
