"""BFGS with a dense inverse Hessian (Nocedal & Wright, Algorithm 6.1) for one problem per thread.

Reverse communication as lbfgs.py, with the same line search and tests (``ftol`` is off by default,
as in scipy's BFGS, which stops on ``gtol`` only). The inverse Hessian starts as the identity and is
rescaled by ``s . y / y . y`` before the first update (Nocedal & Wright, eq. 6.20); an update with
``s . y <= 0`` is skipped. It holds ``n * n`` floats per thread: for large ``n`` use L-BFGS.
"""
from __future__ import annotations

import adoffload as ado

from . import linesearch
from .status import CONTINUE, FTOL, GTOL, LINE_SEARCH, MAXITER, NONFINITE
from .vectors import all_finite, copy, dot, max_abs, norm, step_from

F, FLOATS = 0, 1
NIT, UPDATED, RESTARTED, INTS = 0, 1, 2, 3

ALLOCATE = """\
    x = ado.zeros({N}, {T})
    g = ado.zeros({N}, {T})
    d = ado.zeros({N}, {T})
    hy = ado.zeros({N}, {T})
    Hm = ado.zeros(({N}, {N}), {T})
    st = ado.zeros(bfgs.FLOATS, {T})
    it = ado.zeros(bfgs.INTS, ado.i64)
    ls = ado.zeros(linesearch.LS_FLOATS, {T})
    li = ado.zeros(linesearch.LS_INTS, ado.i64)
"""
KERNEL_PARAMS = ()
START = "bfgs.start(x, g, xt, gt, f, d, Hm, st, it, ls, li, gtol)"
STEP = "bfgs.step(x, g, xt, gt, f, d, hy, Hm, st, it, ls, li, gtol, ftol, maxiter)"


@ado.func
def _identity(Hm):
    n = len(Hm)
    for a in range(n):
        for b in range(n):
            Hm[a, b] = 0.0
        Hm[a, a] = 1.0


@ado.func
def _direction(g, Hm, d):
    """d = -Hm g."""
    n = len(g)
    for a in range(n):
        s = 0.0
        for b in range(n):
            s += Hm[a, b] * g[b]
        d[a] = -s


@ado.func
def _search(x, g, xt, d, Hm, st, it, ls, li, alpha):
    """Search along -Hm g; steepest descent (and the identity) when that is not downhill."""
    _direction(g, Hm, d)
    dg0 = dot(g, d)
    if not (dg0 < 0.0):
        _identity(Hm)
        it[UPDATED] = 0
        _direction(g, Hm, d)
        dg0 = dot(g, d)
        alpha = ado.min(1.0, 1.0 / norm(g))
    linesearch.begin(ls, li, st[F], dg0, alpha)
    step_from(x, d, alpha, xt)
    return CONTINUE


@ado.func
def start(x, g, xt, gt, f, d, Hm, st, it, ls, li, gtol):
    copy(xt, x)
    copy(gt, g)
    st[F] = f
    _identity(Hm)
    if not (linesearch.finite(f) and all_finite(g)):
        return NONFINITE
    if max_abs(g) <= gtol:
        return GTOL
    return _search(x, g, xt, d, Hm, st, it, ls, li, ado.min(1.0, 1.0 / norm(g)))


@ado.func
def _update(x, g, xt, gt, hy, Hm, it):
    """Hm <- (I - rho s y^T) Hm (I - rho y s^T) + rho s s^T with s = xt - x, y = gt - g (s, y in xt, gt)."""
    n = len(x)
    for j in range(n):
        xt[j] = xt[j] - x[j]
        gt[j] = gt[j] - g[j]
    sy = dot(xt, gt)
    yy = dot(gt, gt)
    if not (sy > 1e-10 * yy and sy > 0.0):
        return
    if it[UPDATED] == 0:
        scale = sy / yy
        for a in range(n):
            for b in range(n):
                Hm[a, b] *= scale
        it[UPDATED] = 1
    for a in range(n):
        s = 0.0
        for b in range(n):
            s += Hm[a, b] * gt[b]
        hy[a] = s
    rho = 1.0 / sy
    yhy = dot(gt, hy)
    for a in range(n):
        for b in range(n):
            Hm[a, b] += rho * ((1.0 + rho * yhy) * xt[a] * xt[b] - hy[a] * xt[b] - xt[a] * hy[b])


@ado.func
def step(x, g, xt, gt, f, d, hy, Hm, st, it, ls, li, gtol, ftol, maxiter):
    outcome = linesearch.update(ls, li, f, dot(gt, d))
    if outcome == linesearch.TRY:
        step_from(x, d, ls[linesearch.ALPHA], xt)
        return CONTINUE
    if outcome == linesearch.FAIL:
        if it[RESTARTED] == 1:
            return LINE_SEARCH
        it[RESTARTED] = 1
        _identity(Hm)
        it[UPDATED] = 0
        return _search(x, g, xt, d, Hm, st, it, ls, li, ado.min(1.0, 1.0 / norm(g)))
    it[RESTARTED] = 0
    previous = st[F]
    for j in range(len(x)):          # the accepted point, kept in d while xt, gt become s, y
        d[j] = xt[j]
    _update(x, g, xt, gt, hy, Hm, it)
    for j in range(len(x)):
        g[j] = g[j] + gt[j]
        x[j] = d[j]
    st[F] = f
    it[NIT] += 1
    if max_abs(g) <= gtol:
        return GTOL
    if ftol > 0.0 and previous - f <= ftol * ado.max(ado.max(ado.abs(previous), ado.abs(f)), 1.0):
        return FTOL
    if it[NIT] >= maxiter:
        return MAXITER
    return _search(x, g, xt, d, Hm, st, it, ls, li, 1.0)
