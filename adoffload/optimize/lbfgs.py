"""L-BFGS (Nocedal 1980; Nocedal & Wright, Algorithm 7.5) for one problem per thread.

Reverse communication (see linesearch.py): the kernel evaluates ``f`` and ``gt`` at ``xt`` and calls
``start`` after the first evaluation, ``step`` after every other; each returns ``CONTINUE`` (evaluate
the new ``xt``) or a status code (status.py). ``x``, ``g`` and ``st[F]`` hold the last accepted point.

Convergence tests, as scipy's L-BFGS-B (without bounds): ``max |g| <= gtol``; the relative reduction
``(f_old - f) / max(|f_old|, |f|, 1) <= ftol`` of an accepted step. The history keeps the last
``len(rho)`` pairs ``s = x_new - x``, ``y = g_new - g`` with ``s . y > 0`` (a pair that would break
positive definiteness is skipped); the initial Hessian is ``(s . y / y . y) I`` of the newest pair.
A failed line search restarts once from steepest descent with an empty history; a second failure
in a row ends with ``LINE_SEARCH``.
"""
from __future__ import annotations

import adoffload as ado

from . import linesearch
from .status import CONTINUE, FTOL, GTOL, LINE_SEARCH, MAXITER, NONFINITE
from .vectors import all_finite, copy, dot, max_abs, norm, row_dot, step_from

F, FLOATS = 0, 1                     # st: the accepted function value
NIT, HEAD, FILL, RESTARTED, INTS = 0, 1, 2, 3, 4   # it: iterations, ring buffer, restart flag

# Code of the generated kernel (generate.py fills {T}, {N}, {H}).
ALLOCATE = """\
    x = ado.zeros({N}, {T})
    g = ado.zeros({N}, {T})
    d = ado.zeros({N}, {T})
    S = ado.zeros(({H}, {N}), {T})
    Y = ado.zeros(({H}, {N}), {T})
    rho = ado.zeros({H}, {T})
    alphas = ado.zeros({H}, {T})
    st = ado.zeros(lbfgs.FLOATS, {T})
    it = ado.zeros(lbfgs.INTS, ado.i64)
    ls = ado.zeros(linesearch.LS_FLOATS, {T})
    li = ado.zeros(linesearch.LS_INTS, ado.i64)
"""
KERNEL_PARAMS = ()
START = "lbfgs.start(x, g, xt, gt, f, d, st, it, ls, li, gtol)"
STEP = "lbfgs.step(x, g, xt, gt, f, d, S, Y, rho, alphas, st, it, ls, li, gtol, ftol, maxiter)"


@ado.func
def _steepest(x, g, xt, d, st, ls, li):
    """Search along -g from x, first trial step min(1, 1 / |g|)."""
    for j in range(len(g)):
        d[j] = -g[j]
    dg0 = dot(g, d)
    alpha = ado.min(1.0, 1.0 / norm(g))
    linesearch.begin(ls, li, st[F], dg0, alpha)
    step_from(x, d, alpha, xt)
    return CONTINUE


@ado.func
def start(x, g, xt, gt, f, d, st, it, ls, li, gtol):
    copy(xt, x)
    copy(gt, g)
    st[F] = f
    if not (linesearch.finite(f) and all_finite(g)):
        return NONFINITE
    if max_abs(g) <= gtol:
        return GTOL
    return _steepest(x, g, xt, d, st, ls, li)


@ado.func
def _two_loop(g, S, Y, rho, alphas, it, d):
    """d = -H g with the history's inverse Hessian (Nocedal & Wright, Algorithm 7.4)."""
    h = len(rho)
    fill = it[FILL]
    head = it[HEAD]
    for j in range(len(g)):
        d[j] = g[j]
    for c in range(fill):
        k = (head - 1 - c + h) % h
        a = rho[k] * row_dot(S, k, d)
        alphas[k] = a
        for j in range(len(g)):
            d[j] -= a * Y[k, j]
    newest = (head - 1 + h) % h
    yy = 0.0
    for j in range(len(g)):
        yy += Y[newest, j] * Y[newest, j]
    gamma = 1.0 / (rho[newest] * yy)
    for j in range(len(g)):
        d[j] *= gamma
    for c in range(fill):
        k = (head - fill + c + h) % h
        beta = rho[k] * row_dot(Y, k, d)
        for j in range(len(g)):
            d[j] += S[k, j] * (alphas[k] - beta)
    for j in range(len(g)):
        d[j] = -d[j]


@ado.func
def _remember(x, g, xt, gt, S, Y, rho, it):
    """Put s = xt - x, y = gt - g into the ring buffer when s . y > 0."""
    h = len(rho)
    head = it[HEAD]
    sy = 0.0
    yy = 0.0
    for j in range(len(x)):
        s = xt[j] - x[j]
        y = gt[j] - g[j]
        S[head, j] = s
        Y[head, j] = y
        sy += s * y
        yy += y * y
    if sy > 1e-10 * yy and sy > 0.0:
        rho[head] = 1.0 / sy
        it[HEAD] = (head + 1) % h
        it[FILL] = ado.min(it[FILL] + 1, h)


@ado.func
def step(x, g, xt, gt, f, d, S, Y, rho, alphas, st, it, ls, li, gtol, ftol, maxiter):
    outcome = linesearch.update(ls, li, f, dot(gt, d))
    if outcome == linesearch.TRY:
        step_from(x, d, ls[linesearch.ALPHA], xt)
        return CONTINUE
    if outcome == linesearch.FAIL:
        if it[RESTARTED] == 1:
            return LINE_SEARCH
        it[RESTARTED] = 1
        it[FILL] = 0
        return _steepest(x, g, xt, d, st, ls, li)
    it[RESTARTED] = 0
    _remember(x, g, xt, gt, S, Y, rho, it)
    previous = st[F]
    copy(xt, x)
    copy(gt, g)
    st[F] = f
    it[NIT] += 1
    if max_abs(g) <= gtol:
        return GTOL
    if ftol > 0.0 and previous - f <= ftol * ado.max(ado.max(ado.abs(previous), ado.abs(f)), 1.0):
        return FTOL
    if it[NIT] >= maxiter:
        return MAXITER
    if it[FILL] == 0:
        return _steepest(x, g, xt, d, st, ls, li)
    _two_loop(g, S, Y, rho, alphas, it, d)
    dg0 = dot(g, d)
    if not (dg0 < 0.0):
        it[FILL] = 0
        return _steepest(x, g, xt, d, st, ls, li)
    linesearch.begin(ls, li, f, dg0, 1.0)
    step_from(x, d, 1.0, xt)
    return CONTINUE
