"""``check_grads``: the shared gradient checker, driven by a table of specs.

For a kernel and the parameters it is differentiated with respect to (``wrt``):
* JVP against central finite differences in f64: ``J v ≈ (f(x + h v) - f(x - h v)) / 2h``;
* the inner-product identity ``<J v, w> = <v, Jᵀ w>`` linking the forward and the reverse
  kernel (exact up to rounding, so it catches what finite differences blur).

A spec names a Python kernel, ``wrt``, an input generator and a grid. Today the derived
kernels are run through ``derive_kernel`` with the body JIT-compiled for the host and
called once per thread from Python (``BodyRunner``); ``runner=`` lets the same table run
through the public ``ado.jvp`` / ``ado.vjp`` kernels once those are wired.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from adoffload.enzyme.host import compile_host
from adoffload.enzyme.kernels import derive_kernel
from adoffload.frontend import compile_kernel
from adoffload.ir import canonicalize, import_module
from adoffload.language.signature import KernelSignature


@dataclass
class KernelCase:
    """One row of the gradient table."""
    name: str
    kernel: Callable                       # a Python kernel (kernel language)
    wrt: list[str]
    inputs: Callable[[np.random.Generator], dict]   # param name -> numpy array / Python scalar
    grid: int | tuple[int, ...]
    rtol: float = 1e-6
    atol: float = 1e-8
    h: float = 1e-6                         # finite-difference step
    reverse: bool = True                    # also check <Jv, w> = <v, Jᵀw>
    options: dict = field(default_factory=dict)   # compile_kernel options

    def __repr__(self) -> str:
        return self.name


class BodyRunner:
    """Primal, JVP and VJP bodies of one kernel, JIT-compiled on the host, run thread by thread."""

    def __init__(self, case: KernelCase, reverse: bool | None = None):
        source = compile_kernel(case.kernel, **case.options)
        self.signature: KernelSignature = source.signature
        module = import_module(canonicalize(source.llvm_ir))
        body = self.signature.name
        self.jvp_sig = derive_kernel(self.signature, module, body, "jvp", case.wrt)
        reverse = case.reverse if reverse is None else reverse
        self.vjp_sig = derive_kernel(self.signature, module, body, "vjp", case.wrt) if reverse else None
        names = [body, self.jvp_sig.body_name] + ([self.vjp_sig.body_name] if self.vjp_sig else [])
        self.tape = self.vjp_sig.tape if self.vjp_sig else None
        if self.tape is not None:
            names.append(self.tape.count_function)
        self.functions = compile_host(module, names)
        self.body_name = body
        self.grid = (case.grid,) if isinstance(case.grid, int) else tuple(case.grid)

    def run(self, name: str, signature: KernelSignature, values: dict, tape=None) -> None:
        """Run body ``name`` once per thread; ``tape``: run the count function first and give each
        thread its slice of one tape buffer (the protocol of adoffload/enzyme/tape.py)."""
        flat = []
        for p in signature.params:
            v = values[p.name]
            if p.is_array:
                flat.append(v)
                flat.extend(v.shape)
            else:
                flat.append(float(v) if p.dtype.is_float else int(v))
        status = np.zeros(4, np.int64)
        fn = self.functions[name]
        threads = list(itertools.product(*(range(n) for n in self.grid)))
        extra = [[] for _ in threads]
        if tape is not None:
            primal_flat = flat[:len(self.signature.flat_params())]
            count, counts = self.functions[tape.count_function], np.zeros(len(threads), np.int64)
            for k, tids in enumerate(threads):
                count(*tids, *primal_flat, status, counts[k:k + 1])
            offsets = np.concatenate([[0], np.cumsum(counts)[:-1]])
            buffer = np.zeros(max(int(counts.sum()) // 8, 1), np.int64)
            extra = [[buffer, int(offsets[k])] for k in range(len(threads))]
        for tids, more in zip(threads, extra):
            fn(*tids, *flat, status, *more)
        assert status[0] == 0, f"kernel status {status}"

    def primal(self, values: dict) -> dict:
        values = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in values.items()}
        self.run(self.body_name, self.signature, values)
        return values

    def jvp(self, values: dict, tangents: dict) -> dict:
        """Run the forward kernel; returns the shadows afterwards (output tangents)."""
        values = self.primal_copy(values)
        shadows = self.zero_shadows(values)
        for name, t in tangents.items():
            if isinstance(shadows[f"d_{name}"], np.ndarray):
                shadows[f"d_{name}"][...] = t
            else:
                shadows[f"d_{name}"] = t
        self.run(self.jvp_sig.body_name, self.jvp_sig.signature, {**values, **shadows})
        return shadows

    def vjp(self, values: dict, seeds: dict) -> dict:
        """Run the adjoint kernel with output seeds; returns the shadows afterwards (accumulated adjoints)."""
        values = self.primal_copy(values)
        shadows = self.zero_shadows(values, reverse=True)
        for name, w in seeds.items():
            shadows[f"d_{name}"][...] = w
        self.run(self.vjp_sig.body_name, self.vjp_sig.signature, {**values, **shadows}, self.tape)
        return shadows

    @staticmethod
    def primal_copy(values):
        return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in values.items()}

    def zero_shadows(self, values: dict, reverse: bool = False) -> dict:
        sig = (self.vjp_sig if reverse else self.jvp_sig).signature
        out = {}
        for p in sig.params[len(self.signature.params):]:
            primal = values[p.name[2:]]
            if isinstance(primal, np.ndarray):
                out[p.name] = np.zeros_like(primal)
            elif p.is_array:
                out[p.name] = np.zeros(1, p.dtype.dtype)
            else:
                out[p.name] = 0.0
        return out


def _outputs(signature: KernelSignature) -> list[str]:
    return [p.name for p in signature.params if p.is_array and p.type.writes and p.dtype.is_float]


def _random_like(rng, v):
    if isinstance(v, np.ndarray):
        return rng.standard_normal(v.shape).astype(v.dtype)
    return float(rng.standard_normal())


def _dot(a, b) -> float:
    return float(np.sum(np.asarray(a, np.float64) * np.asarray(b, np.float64)))


def check_grads(case: KernelCase, seed: int = 0, h: float | None = None, runner: BodyRunner | None = None,
                reverse: bool | None = None) -> None:
    """Assert the JVP matches finite differences and (if ``reverse``, default case.reverse) <Jv, w> = <v, Jᵀw>."""
    reverse = case.reverse if reverse is None else reverse
    h = case.h if h is None else h
    rng = np.random.default_rng(seed)
    runner = runner or BodyRunner(case, reverse)
    values = case.inputs(rng)
    outputs = _outputs(runner.signature)
    v = {name: _random_like(rng, values[name]) for name in case.wrt}

    shadows = runner.jvp(values, v)
    jv = {name: shadows[f"d_{name}"] for name in outputs}

    def shifted(sign):
        moved = dict(values)
        for name, t in v.items():
            moved[name] = values[name] + sign * h * t
            if isinstance(values[name], np.ndarray):
                moved[name] = moved[name].astype(values[name].dtype)
        return runner.primal(moved)
    up, down = shifted(+1), shifted(-1)
    for name in outputs:
        fd = (up[name].astype(np.float64) - down[name].astype(np.float64)) / (2 * h)
        np.testing.assert_allclose(jv[name], fd, rtol=case.rtol, atol=case.atol,
                                   err_msg=f"{case.name}: JVP of {name} vs finite differences")
    if not reverse:
        return
    w = {name: _random_like(rng, values[name]) for name in outputs}
    adjoints = runner.vjp(values, w)
    lhs = sum(_dot(jv[name], w[name]) for name in outputs)
    rhs = sum(_dot(v[name], adjoints[f"d_{name}"]) for name in case.wrt)
    assert np.isclose(lhs, rhs, rtol=max(case.rtol, 1e-10) * 10, atol=case.atol * 10), \
        f"{case.name}: <Jv, w> = {lhs} but <v, J^T w> = {rhs}"
