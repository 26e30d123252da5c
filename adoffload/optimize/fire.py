"""FIRE, the fast inertial relaxation engine (Bitzek et al., PRL 97, 170201, 2006), one problem per thread.

Molecular dynamics with a velocity mixed toward the force ``F = -g`` while the power ``F . v`` is
positive, and stopped (``v = 0``, smaller time step) when it turns negative; semi-implicit Euler
steps as ASE's and adoffload.chemistry's FIRE. Each step moves every group of ``group`` consecutive
coordinates (an atom's x, y, z with ``group=3``) by at most ``max_step`` (Euclidean norm). One
evaluation per iteration, no line search; converged when ``max |g| <= gtol``. Defaults: ASE's.
"""
from __future__ import annotations

import adoffload as ado

from ..errors import ArgumentError
from . import linesearch
from .status import CONTINUE, GTOL, MAXITER, NONFINITE
from .vectors import all_finite, copy, dot, max_abs

F, DT, ALPHA, FLOATS = 0, 1, 2, 3
NIT, POSITIVE, INTS = 0, 1, 2

ALLOCATE = """\
    x = ado.zeros({N}, {T})
    g = ado.zeros({N}, {T})
    v = ado.zeros({N}, {T})
    st = ado.zeros(fire.FLOATS, {T})
    it = ado.zeros(fire.INTS, ado.i64)
"""
KERNEL_PARAMS = (("dt_start", "{T}"), ("dt_max", "{T}"), ("max_step", "{T}"), ("n_min", "{I}"),
                 ("f_inc", "{T}"), ("f_dec", "{T}"), ("alpha_start", "{T}"), ("f_alpha", "{T}"))
START = ("fire.start(x, g, xt, gt, f, v, st, it, gtol, dt_start, dt_max, max_step, n_min, f_inc, f_dec, "
         "alpha_start, f_alpha, {G})")
STEP = ("fire.step(x, g, xt, gt, f, v, st, it, gtol, maxiter, dt_max, max_step, n_min, f_inc, f_dec, "
        "alpha_start, f_alpha, {G})")


def check_options(opts: dict, n: int, what: str) -> None:
    for name in ("dt_start", "dt_max", "max_step", "f_inc", "f_dec", "alpha_start", "f_alpha"):
        value = opts[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise ArgumentError(f"{what}: FIRE option {name} must be a positive number, got {value!r}")
        opts[name] = float(value)
    for name in ("n_min", "group"):
        if isinstance(opts[name], bool) or not isinstance(opts[name], int) or opts[name] < 1:
            raise ArgumentError(f"{what}: FIRE option {name} must be a positive int, got {opts[name]!r}")
    if n % opts["group"]:
        raise ArgumentError(f"{what}: FIRE option group={opts['group']} must divide n={n} (coordinates per "
                            f"particle, for max_step)")


@ado.func
def _move(x, v, xt, dt, max_step, group):
    """xt = x + dt * v, scaled down as a whole where a group of coordinates would move more than max_step."""
    longest = 0.0
    for p in range(len(x) // group):
        length = 0.0
        for c in range(group):
            length += (dt * v[p * group + c]) ** 2
        longest = ado.max(longest, length)
    longest = ado.sqrt(longest)
    factor = 1.0
    if longest > max_step:
        factor = max_step / longest
    for j in range(len(x)):
        xt[j] = x[j] + factor * dt * v[j]


@ado.func
def _advance(x, g, xt, v, st, it, dt_max, max_step, n_min, f_inc, f_dec, alpha_start, f_alpha, group):
    """One FIRE step from the accepted x (force -g): mix or stop v, adapt dt and alpha, move to xt."""
    power = -dot(g, v)
    dt = st[DT]
    alpha = st[ALPHA]
    if power > 0.0:
        mix = alpha * ado.sqrt(dot(v, v) / dot(g, g))
        for j in range(len(x)):
            v[j] = (1.0 - alpha) * v[j] - mix * g[j]
        if it[POSITIVE] > n_min:
            dt = ado.min(dt * f_inc, dt_max)
            alpha = alpha * f_alpha
        it[POSITIVE] += 1
    else:
        for j in range(len(x)):
            v[j] = 0.0
        dt = dt * f_dec
        alpha = alpha_start
        it[POSITIVE] = 0
    for j in range(len(x)):
        v[j] -= dt * g[j]
    st[DT] = dt
    st[ALPHA] = alpha
    _move(x, v, xt, dt, max_step, group)
    return CONTINUE


@ado.func
def start(x, g, xt, gt, f, v, st, it, gtol, dt_start, dt_max, max_step, n_min, f_inc, f_dec, alpha_start,
          f_alpha, group):
    copy(xt, x)
    copy(gt, g)
    st[F] = f
    st[DT] = dt_start
    st[ALPHA] = alpha_start
    if not (linesearch.finite(f) and all_finite(g)):
        return NONFINITE
    if max_abs(g) <= gtol:
        return GTOL
    return _advance(x, g, xt, v, st, it, dt_max, max_step, n_min, f_inc, f_dec, alpha_start, f_alpha, group)


@ado.func
def step(x, g, xt, gt, f, v, st, it, gtol, maxiter, dt_max, max_step, n_min, f_inc, f_dec, alpha_start,
         f_alpha, group):
    it[NIT] += 1
    if not (linesearch.finite(f) and all_finite(gt)):
        st[DT] = st[DT] * f_dec              # a step into infinity: retry it shorter, from rest
        for j in range(len(x)):
            v[j] = 0.0
        _move(x, g, xt, -st[DT], max_step, group)
        if it[NIT] >= maxiter:
            return MAXITER
        return CONTINUE
    copy(xt, x)
    copy(gt, g)
    st[F] = f
    if max_abs(g) <= gtol:
        return GTOL
    if it[NIT] >= maxiter:
        return MAXITER
    return _advance(x, g, xt, v, st, it, dt_max, max_step, n_min, f_inc, f_dec, alpha_start, f_alpha, group)
