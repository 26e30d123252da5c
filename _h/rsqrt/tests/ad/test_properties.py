"""Property-based: random differentiable kernels (as source text) agree with finite differences
and satisfy the inner-product identity between ``ado.jvp`` and ``ado.vjp``.

Hypothesis draws a kernel: random expression trees over two arrays and a scalar, with the math
functions wrapped onto safe domains (``log(1.5 + tanh(e))``, ``e / (1.5 + f*f)``...), an
optional random branch, and an optional small loop carrying a value. The source is written to a
temporary module and imported, since ``@ado.kernel`` reads the source with ``inspect``.
"""
from __future__ import annotations

import importlib.util
import itertools
import textwrap

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .check_grads import check_grads

# (template, arity): every template maps any finite arguments to a finite, moderate value.
_UNARY = ["ado.sin({0})", "ado.cos({0})", "ado.tanh({0})", "ado.atan({0})", "ado.exp(ado.tanh({0}))",
          "ado.log(1.5 + ado.tanh({0}))", "ado.sqrt(1.0 + {0} * {0})", "ado.erf({0})",
          "ado.sinh(ado.tanh({0}))", "ado.cosh(ado.tanh({0}))", "ado.log1p({0} * {0})",
          "ado.expm1(ado.tanh({0}))", "ado.asin(0.9 * ado.tanh({0}))", "ado.acos(0.9 * ado.tanh({0}))",
          "ado.exp2(ado.tanh({0}))", "ado.log2(2.0 + ado.sin({0}))", "(1.0 + {0} * {0}) ** 1.5",
          "({0}) ** 2", "({0}) ** 3", "-({0})", "ado.tan(0.5 * ado.tanh({0}))", "ado.abs({0}) * {0}"]
_BINARY = ["({0} + {1})", "({0} - {1})", "({0} * {1})", "({0} / (1.5 + {1} * {1}))",
           "ado.atan2({0}, 2.0 + ado.abs({1}))", "ado.fma({0}, {1}, 0.5)", "ado.min({0}, {1})",
           "ado.max({0}, {1})", "ado.pow(1.2 + ado.tanh({0}), ado.sin({1}))",
           "({0} if {1} > 0.0 else 0.5 * {0})"]


@st.composite
def expressions(draw, leaves: list[str], depth: int) -> str:
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        leaf = draw(st.sampled_from(leaves + ["0.75", "-1.25"]))
        return leaf
    if draw(st.booleans()):
        return draw(st.sampled_from(_UNARY)).format(draw(expressions(leaves, depth - 1)))
    return draw(st.sampled_from(_BINARY)).format(draw(expressions(leaves, depth - 1)),
                                                 draw(expressions(leaves, depth - 1)))


@st.composite
def kernel_sources(draw) -> str:
    base = ["x[i]", "y[i]", "a"]
    lines = [f"v = {draw(expressions(base, 3))}"]
    if draw(st.booleans()):
        lines += [f"if {draw(expressions(base + ['v'], 2))} > 0.0:",
                  f"    v = {draw(expressions(base + ['v'], 2))}",
                  "else:",
                  f"    v = {draw(expressions(base + ['v'], 2))}"]
    if draw(st.booleans()):
        trips = draw(st.integers(1, 3))
        lines += ["acc = v",
                  f"for k in range({trips}):",
                  f"    acc = ado.tanh(0.5 * acc + {draw(expressions(base + ['v', 'acc', 'float(k)'], 2))})"]
        result = "acc"
    else:
        result = "v"
    lines.append(f"out[i] = {result} * {draw(expressions(base + ['v'], 1))}")
    body = textwrap.indent("\n".join(lines), "    ")
    return ("import adoffload as ado\nfrom adoffload import In, Out, f64\n\n\n@ado.kernel\n"
            "def generated(x: In[f64], y: In[f64], a: f64, out: Out[f64]):\n    i = ado.tid()\n"
            f"{body}\n")


_COUNTER = itertools.count()


def _load(source: str, folder) -> object:
    path = folder / f"generated_kernel_{next(_COUNTER)}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.generated


@settings(max_examples=25, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(source=kernel_sources(), seed=st.integers(0, 2**16))
def test_random_kernels_match_finite_differences_and_the_inner_product_identity(source, seed, tmp_path):
    kernel = _load(source, tmp_path)
    rng = np.random.default_rng(seed)
    n = 5
    inputs = dict(x=rng.uniform(-1.0, 1.0, n), y=rng.uniform(-1.0, 1.0, n), a=float(rng.uniform(0.5, 1.5)),
                  out=np.zeros(n))
    try:
        check_grads(kernel, inputs, ["x", "y", "a"], n, rtol=1e-4, atol=1e-6, ip_rtol=1e-8,
                    width=2 if seed % 3 == 0 else None, seed=seed)
    except AssertionError as error:
        raise AssertionError(f"{error}\n--- generated kernel ---\n{source}") from None
