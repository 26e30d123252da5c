"""test_user_kernels2's kernels on an NVIDIA GPU (skipped without one): values, tangents and adjoints
equal the host's, for the tie/NaN rule of the maxima and for blocks that are not whole warps or powers
of two, shuffles past the warp, a global array exchanged across a barrier and shared atomics."""
import numpy as np
import pytest

import adoffload as ado

from .test_user_kernels import _copy, _run
from .test_user_kernels2 import CASES, MAX_KERNELS, _special_inputs


@pytest.mark.parametrize("case", ["ties", "all_nan"])
@pytest.mark.parametrize("name", sorted(MAX_KERNELS))
def test_max_ties_and_nan_on_the_gpu_equal_the_host(name, case, cuda):
    """The butterflies and block slots of the GPU definitions give the host's values, tangents and
    adjoints (a warp of NaNs: NaN, no derivative)."""
    kernel, _, dtype = MAX_KERNELS[name]
    rng = np.random.default_rng(4)
    x, c = _special_inputs(case, 128, dtype, rng), rng.standard_normal(128).astype(dtype)
    v, w = rng.standard_normal(128).astype(dtype), rng.standard_normal(128).astype(dtype)
    got = {}
    for device in ("cpu", "cuda"):
        y, yf, dy, gx = (np.zeros(128, dtype) for _ in range(4))
        kernel(x, c, y, grid=128, device=device)
        ado.jvp(kernel, "x")(x, c, yf, v, dy, grid=128, device=device)
        ado.vjp(kernel, "x")(x, c, np.zeros(128, dtype), gx, w.copy(), grid=128, device=device)
        got[device] = (y, dy, gx)
    for host, gpu in zip(got["cpu"], got["cuda"]):
        np.testing.assert_allclose(gpu, host, rtol=1e-6 if dtype == np.float32 else 1e-14, atol=1e-6)


@pytest.mark.parametrize("name", ["block48", "block3x5", "shuffles96", "cube234", "global_exchange", "shared_histogram"])
def test_user_kernels_on_the_gpu_equal_the_host(name, cuda):
    kernel, make, active, outs, grid, _ = CASES[name]
    args = make(np.random.default_rng(20))
    host, gpu = _run(kernel, args, grid, outs), _run(kernel, args, grid, outs, device="cuda")
    for o in outs:
        np.testing.assert_allclose(gpu[o], host[o], rtol=1e-12, atol=1e-13)
    rng = np.random.default_rng(21)
    seeds = {"d_" + o: rng.standard_normal(np.shape(args[o])) for o in outs}
    grads = {}
    for device in ("cpu", "cuda"):
        values = _copy(args)
        values.update({"d_" + a: np.zeros_like(args[a]) for a in active})
        values.update({k: v.copy() for k, v in seeds.items()})
        ado.vjp(kernel, tuple(active))(**values, grid=grid, device=device)
        grads[device] = {a: values["d_" + a] for a in active}
    for a in active:
        np.testing.assert_allclose(grads["cuda"][a], grads["cpu"][a], rtol=1e-11, atol=1e-12)
