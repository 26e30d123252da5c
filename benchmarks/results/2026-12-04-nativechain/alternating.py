"""Per-launch cost of a loop alternating signatures of one 16-element f32 saxpy on the host.

Run from a checkout's root with that checkout on PYTHONPATH (main or the nativechain branch):
    PYTHONPATH=. python benchmarks/results/2026-12-04-nativechain/alternating.py [--rounds 9]
Prints one JSON line: microseconds per launch (best of ``rounds`` interleaved rounds of 1000 calls
of each callable, adoffload.testing.launch_timing.interleaved), each callable making two launches:
``one``: a kernel of its own (the same saxpy) launched with its one signature, twice (the plain
native launch); ``same``: the first signature twice (made first: the tail of this kernel's chain of
four, most recently made first); ``scalar types``: the same
launch with the scalar as np.float32, then as a Python float (two signatures, identical work);
``grids``: grid=16, then grid=8, on the same 16-element arrays; ``four``: four calls of four
signatures (those two pairs); ``five``: five calls, the four and a fifth (24-element arrays);
``vjp one``: ``ado.vjp(saxpy_one, ["a", "x"])`` with one signature, twice; ``vjp grids``: the vjp of
``saxpy`` at grid=16, then grid=8 (kernels of their own: their chains hold only these). Also
the native launches counted (kernels/native_entry.totals, where it exists) and the load average.
"""
from __future__ import annotations

import argparse
import json
import os

import numpy as np

import adoffload as ado
from adoffload.testing.launch_timing import interleaved


@ado.kernel
def saxpy(a: ado.f32, x: ado.In[ado.f32], y: ado.In[ado.f32], out: ado.Out[ado.f32]):
    i = ado.tid()
    out[i] = a * x[i] + y[i]


@ado.kernel
def saxpy_one(a: ado.f32, x: ado.In[ado.f32], y: ado.In[ado.f32], out: ado.Out[ado.f32]):
    i = ado.tid()
    out[i] = a * x[i] + y[i]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=9)
    rounds = parser.parse_args().rounds
    x, y, out = np.arange(16, dtype=np.float32), np.ones(16, np.float32), np.zeros(16, np.float32)
    x5, y5, out5 = np.arange(24, dtype=np.float32), np.ones(24, np.float32), np.zeros(24, np.float32)
    a32, a = np.float32(2.0), 2.0

    def one():
        saxpy_one(a32, x, y, out, grid=16)
        saxpy_one(a32, x, y, out, grid=16)

    def same():
        saxpy(a32, x, y, out, grid=16)
        saxpy(a32, x, y, out, grid=16)

    def scalar_types():
        saxpy(a32, x, y, out, grid=16)
        saxpy(a, x, y, out, grid=16)

    def grids():
        saxpy(a32, x, y, out, grid=16)
        saxpy(a32, x, y, out, grid=8)

    def four():
        saxpy(a32, x, y, out, grid=16)
        saxpy(a, x, y, out, grid=16)
        saxpy(a32, x, y, out, grid=8)
        saxpy(a, x, y, out, grid=8)

    def five():
        four()
        saxpy(a32, x5, y5, out5, grid=24)

    vjp_one, vjp = ado.vjp(saxpy_one, ["a", "x"]), ado.vjp(saxpy, ["a", "x"])
    shadows = dict(d_a=np.zeros(1, np.float32), d_x=np.zeros(16, np.float32), d_out=np.ones(16, np.float32))

    def vjp_once():
        vjp_one(a32, x, y, out, **shadows, grid=16)
        vjp_one(a32, x, y, out, **shadows, grid=16)

    def vjp_grids():
        vjp(a32, x, y, out, **shadows, grid=16)
        vjp(a32, x, y, out, **shadows, grid=8)

    calls = {"one": one, "same": same, "scalar types": scalar_types, "grids": grids, "four": four, "five": five,
             "vjp one": vjp_once, "vjp grids": vjp_grids}
    launches = {"one": 2, "same": 2, "scalar types": 2, "grids": 2, "four": 4, "five": 5, "vjp one": 2, "vjp grids": 2}
    for call in calls.values():          # every signature launched twice before timing (entries made)
        call(), call()
    try:
        from adoffload.kernels.native_entry import totals
    except ImportError:
        totals = None
    before = totals() if totals else None
    best = interleaved(calls, number=1000, rounds=rounds)
    result = {"us_per_launch": {k: round(v / launches[k], 4) for k, v in best.items()},
              "load": os.getloadavg()[0]}
    if totals:
        after = totals()
        result["native_launches"], result["python_fallbacks"] = after[0] - before[0], after[1] - before[1]
    print(json.dumps(result))


if __name__ == "__main__":
    main()
