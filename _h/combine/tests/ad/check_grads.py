"""``check_grads`` at the kernel level, through the public API only (``ado.jvp`` / ``ado.vjp``).

For a kernel, inputs and ``wrt`` (the parameters differentiated):

* **JVP vs finite differences**: for a random direction ``v`` over the ``wrt`` parameters,
  the output tangents of ``ado.jvp(kernel, wrt)`` match central differences
  ``(f(x + h v) - f(x - h v)) / 2h`` of the primal kernel, computed in float64;
* **inner-product identity** ``<J v, w> = <v, Jᵀ w>`` between the forward kernel and
  ``ado.vjp(kernel, wrt)`` seeded with a random ``w`` over the outputs (exact up to rounding,
  so it catches what finite differences blur);
* **vector mode** (``width=k``): the k lanes of ``ado.jvp(kernel, wrt, width=k)`` equal k
  separate width-1 runs;
* the derivative kernels also write the primal outputs: they must match the primal run.

The outputs of a kernel are its float ``Out``/``InOut`` arrays. An ``InOut`` array is both an
input (its value before the launch) and an output (after). Every launch gets fresh copies.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

import adoffload as ado


@dataclass
class Spec:
    """One row of the kernel table."""
    name: str
    kernel: object                                   # an @ado.kernel
    inputs: Callable[[np.random.Generator], dict]    # parameter name -> numpy array / Python scalar
    wrt: list[str]
    grid: int | tuple[int, ...]
    rtol: float = 1e-5                                # JVP vs finite differences
    atol: float = 1e-7
    h: float = 1e-6                                   # finite-difference step
    ip_rtol: float = 1e-9                             # inner-product identity
    width: int | None = None                          # also check vector mode with this width

    def __repr__(self) -> str:
        return self.name


def _params(kernel):
    return {p.name: p for p in kernel.signature.visible_params}


def outputs_of(kernel) -> list[str]:
    """Float Out/InOut arrays: what the kernel produces (and what gets a shadow regardless of wrt)."""
    return [p.name for p in kernel.signature.visible_params
            if p.is_array and p.type.writes and p.dtype.is_float]


def _copy(values: dict) -> dict:
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in values.items()}


def _random_like(rng: np.random.Generator, value, dtype) -> np.ndarray | float:
    if isinstance(value, np.ndarray):
        return rng.standard_normal(value.shape).astype(value.dtype)
    return float(np.asarray(rng.standard_normal(), dtype))


def _dot(a, b) -> float:
    return float(np.sum(np.asarray(a, np.float64) * np.asarray(b, np.float64)))


def run_primal(kernel, values: dict, grid) -> dict:
    values = _copy(values)
    kernel(**values, grid=grid)
    return values


def run_jvp(kernel, values: dict, tangents: dict, wrt, grid, width: int = 1) -> tuple[dict, dict]:
    """Run ``ado.jvp(kernel, wrt, width)``; ``tangents`` maps wrt names to input tangents
    (with a leading lane axis for width > 1). Returns (primal values after, shadows after)."""
    fwd = ado.jvp(kernel, wrt=list(wrt), width=width)
    values = _copy(values)
    shadows = {}
    for p in fwd.signature.visible_params[len(_params(kernel)):]:
        base = p.name[2:]
        primal = values[base]
        if base in tangents:
            t = tangents[base]
            shadows[p.name] = np.array(t, dtype=p.dtype.dtype) if p.is_array else t
        elif isinstance(primal, np.ndarray):
            shadows[p.name] = np.zeros(((width,) if width > 1 else ()) + primal.shape, primal.dtype)
        else:
            shadows[p.name] = np.zeros(width, p.dtype.dtype) if width > 1 else 0.0
    fwd(**values, **shadows, grid=grid)
    return values, shadows


def run_vjp(kernel, values: dict, seeds: dict, wrt, grid) -> tuple[dict, dict]:
    """Run ``ado.vjp(kernel, wrt)`` with output seeds; returns (primal values after, shadows after)."""
    rev = ado.vjp(kernel, wrt=list(wrt))
    values = _copy(values)
    shadows = {}
    for p in rev.signature.visible_params[len(_params(kernel)):]:
        base = p.name[2:]
        primal = values[base]
        if base in seeds:
            shadows[p.name] = np.array(seeds[base], dtype=p.dtype.dtype)
        elif isinstance(primal, np.ndarray):
            shadows[p.name] = np.zeros_like(primal)
        else:
            shadows[p.name] = np.zeros(1, p.dtype.dtype)
    rev(**values, **shadows, grid=grid)
    return values, shadows


def _is_f32(kernel, names) -> bool:
    params = _params(kernel)
    return any(params[n].dtype.dtype == np.float32 for n in names)


def check_grads(kernel, inputs: dict, wrt, grid, *, rtol: float = 1e-5, atol: float = 1e-7, h: float = 1e-6,
                ip_rtol: float = 1e-9, width: int | None = None, seed: int = 0, name: str = "") -> None:
    """Assert JVP ≈ finite differences, <Jv, w> = <v, Jᵀw> and (``width``) vector mode = k width-1 runs."""
    name = name or kernel.name
    rng = np.random.default_rng(seed)
    params = _params(kernel)
    wrt = list(wrt)
    outputs = outputs_of(kernel)
    assert outputs, f"{name}: the kernel has no float output array"
    v = {n: _random_like(rng, inputs[n], params[n].dtype.dtype) for n in wrt}

    primal = run_primal(kernel, inputs, grid)
    after, shadows = run_jvp(kernel, inputs, v, wrt, grid)
    jv = {n: shadows[f"d_{n}"] for n in outputs}
    f32 = _is_f32(kernel, outputs)
    for n in outputs:
        np.testing.assert_allclose(after[n], primal[n], rtol=1e-5 if f32 else 1e-12, atol=1e-6 if f32 else 1e-13,
                                   err_msg=f"{name}: primal output {n} of the forward kernel")

    def shifted(sign: float) -> dict:
        moved = dict(inputs)
        for n, t in v.items():
            x = inputs[n]
            if isinstance(x, np.ndarray):
                moved[n] = (x.astype(np.float64) + sign * h * t).astype(x.dtype)
            else:
                moved[n] = x + sign * h * t
        return run_primal(kernel, moved, grid)

    up, down = shifted(+1.0), shifted(-1.0)
    for n in outputs:
        fd = (up[n].astype(np.float64) - down[n].astype(np.float64)) / (2 * h)
        np.testing.assert_allclose(jv[n], fd, rtol=rtol, atol=atol,
                                   err_msg=f"{name}: JVP of {n} vs finite differences")

    w = {n: rng.standard_normal(inputs[n].shape).astype(inputs[n].dtype) for n in outputs}
    after, adjoints = run_vjp(kernel, inputs, w, wrt, grid)
    for n in outputs:
        np.testing.assert_allclose(after[n], primal[n], rtol=1e-5 if f32 else 1e-12, atol=1e-6 if f32 else 1e-13,
                                   err_msg=f"{name}: primal output {n} of the reverse kernel")
    lhs = sum(_dot(jv[n], w[n]) for n in outputs)
    rhs = sum(_dot(v[n], adjoints[f"d_{n}"]) for n in wrt)
    scale = sum(float(np.sum(np.abs(np.asarray(jv[n], np.float64) * w[n]))) for n in outputs) + 1e-30
    assert abs(lhs - rhs) <= ip_rtol * scale + 1e-12, \
        f"{name}: <Jv, w> = {lhs!r} but <v, J^T w> = {rhs!r} (difference {lhs - rhs:.3g}, scale {scale:.3g})"

    if width:
        check_vector_mode(kernel, inputs, wrt, grid, width, rng, rtol=1e-5 if _is_f32(kernel, wrt + outputs)
                          else 1e-12, name=name)


def check_vector_mode(kernel, inputs: dict, wrt, grid, width: int, rng: np.random.Generator, *,
                      rtol: float = 1e-12, name: str = "") -> None:
    """Lane l of the width-k forward kernel equals a width-1 run with lane l's tangents."""
    params = _params(kernel)
    lanes = [{n: _random_like(rng, inputs[n], params[n].dtype.dtype) for n in wrt} for _ in range(width)]
    stacked = {n: np.stack([np.asarray(lane[n], params[n].dtype.dtype) for lane in lanes]) for n in wrt}
    _, vector = run_jvp(kernel, inputs, stacked, wrt, grid, width=width)
    for lane, tangents in enumerate(lanes):
        _, single = run_jvp(kernel, inputs, tangents, wrt, grid)
        for n in outputs_of(kernel):
            np.testing.assert_allclose(vector[f"d_{n}"][lane], single[f"d_{n}"], rtol=rtol, atol=rtol * 1e-2,
                                       err_msg=f"{name}: lane {lane} of width-{width} JVP of {n}")


def check_spec(spec: Spec, seed: int = 0) -> None:
    rng = np.random.default_rng(1000 + seed)
    check_grads(spec.kernel, spec.inputs(rng), spec.wrt, spec.grid, rtol=spec.rtol, atol=spec.atol, h=spec.h,
                ip_rtol=spec.ip_rtol, width=spec.width, seed=seed, name=spec.name)
