"""Derivative checks for CUDA kernels: JVP against central differences of the primal, VJP against
the JVP through <J v, w> = <v, J^T w> (exact up to rounding; it catches what differences blur)."""
import importlib.util

import numpy as np
import pytest

import adoffload as ado

# Tests of clang itself (its error messages, the compile cache): the GPU machine runs the others from the
# carried clang-IR cache (python -m tests.foreign_cuda.warm_clang_cache), but clang's failures are never cached.
needs_clang = pytest.mark.skipif(importlib.util.find_spec("ziglang") is None,
                                 reason="needs clang from the ziglang wheel (tests clang's own errors or the cache)")


def _have_lld() -> bool:
    from adoffload.codegen.gpu.tools import find_lld
    from adoffload.errors import ToolNotFoundError
    try:
        find_lld()
        return True
    except ToolNotFoundError:
        return False


# AMDGPU code objects are linked by ld.lld (the ziglang wheel's, or a system one); a GPU machine
# that runs these tests from a carried clang-IR cache may have neither
needs_lld = pytest.mark.skipif(not _have_lld(), reason="ld.lld not installed (pip install ziglang): AMDGPU "
                                                        "code objects cannot be linked")


def written(k):
    return [p.name for p in k.params if p.is_array and p.type.writes and p.dtype.is_float]


def run(k, values: dict, launch: dict, device="cpu", **shadows) -> dict:
    """Launch ``k`` on copies of ``values``; the copies (written in place) come back."""
    values = {n: v.copy() if isinstance(v, np.ndarray) else v for n, v in values.items()}
    k(*values.values(), device=device, **launch, **shadows)
    return values


def outputs(k, values: dict) -> np.ndarray:
    return np.concatenate([np.ravel(values[n]) for n in written(k)])


def shifted(values: dict, tangents: dict, h: float) -> dict:
    return {n: (v + h * tangents[n] if n in tangents else v) for n, v in values.items()}


def jvp_output(k, wrt, values, tangents, launch, device="cpu") -> np.ndarray:
    shadows = {}
    for name in wrt:
        t = tangents[name]
        shadows[f"d_{name}"] = t.copy() if isinstance(t, np.ndarray) else t
    for name in written(k):
        if name not in wrt:
            shadows[f"d_{name}"] = np.zeros_like(values[name])
    run(ado.jvp(k, wrt=wrt), values, launch, device, **shadows)
    return np.concatenate([np.ravel(shadows[f"d_{n}"]) for n in written(k)])


def vjp_gradients(k, wrt, values, seed: dict, launch, device="cpu") -> dict:
    shadows = {f"d_{n}": seed[n].copy() for n in written(k)}
    for name in wrt:
        if f"d_{name}" not in shadows:
            v = values[name]
            shadows[f"d_{name}"] = np.zeros_like(v) if isinstance(v, np.ndarray) else np.zeros(1, type(v))
    run(ado.vjp(k, wrt=wrt), values, launch, device, **shadows)
    return {name: shadows[f"d_{name}"] for name in wrt}


def check_derivatives(k, wrt, values, launch, *, h=1e-6, rtol=1e-6, seed=0, device="cpu"):
    rng = np.random.default_rng(seed)
    tangents = {n: (rng.standard_normal(np.shape(values[n])) if isinstance(values[n], np.ndarray)
                    else np.float64(rng.standard_normal())) for n in wrt}
    jv = jvp_output(k, wrt, values, tangents, launch, device)
    difference = (outputs(k, run(k, shifted(values, tangents, h), launch, device))
                  - outputs(k, run(k, shifted(values, tangents, -h), launch, device))) / (2 * h)
    scale = np.abs(difference).max() + 1e-300
    assert np.abs(jv - difference).max() <= rtol * scale * 100, (jv, difference)
    w = {n: rng.standard_normal(np.shape(values[n])) for n in written(k)}
    grads = vjp_gradients(k, wrt, values, w, launch, device)
    left = float(jv @ np.concatenate([np.ravel(w[n]) for n in written(k)]))
    right = sum(float(np.ravel(tangents[n]) @ np.ravel(grads[n])) for n in wrt)
    assert abs(left - right) <= 1e-10 * (abs(left) + abs(right) + 1e-300) * 100, (left, right)
    return jv, grads
