"""Levenberg-Marquardt and Gauss-Newton for one problem per thread, in reverse communication.

The kernel (generate.py) does what ``step`` asks: ``JACOBIAN`` (the residuals ``r`` and the Jacobian
``J`` at ``x``, column by column from ``ado.jvp(residual)``) or ``RESIDUAL`` (``rt`` at the trial
point ``xt``), until ``DONE``; the status is then in ``it[STATUS]``.

Each iteration solves the normal equations ``(J^T J + lam D) delta = -J^T r`` by Cholesky, ``D`` the
largest diagonal of ``J^T J`` seen (Marquardt's scaling, as MINPACK's), and takes the step when its
actual reduction of the cost ``0.5 |r|^2`` is at least 1e-4 of the model's (``lam`` then shrinks by
Nielsen's rule ``max(1/3, 1 - (2 rho - 1)^3)``, else grows by ``nu`` doubling). Gauss-Newton has
``lam = 0`` and halves the step until the cost decreases by 1e-4 of the model's slope.
Termination as scipy's least_squares: ``max |J^T r| <= gtol``; on an accepted step ``dF < ftol F``
with a model agreement above 0.25, ``|dx| < xtol (xtol + |x|)``. The Jacobian is evaluated once
more at the final point, so the returned gradient ``J^T r`` belongs to the returned ``x``.
"""
from __future__ import annotations

import adoffload as ado

from adoffload.optimize import linesearch
from adoffload.optimize.status import FTOL, FTOL_XTOL, GTOL, LINE_SEARCH, MAXITER, NONFINITE, SINGULAR, XTOL
from adoffload.optimize.vectors import all_finite, copy, dot, max_abs, norm, step_from

DONE, JACOBIAN, RESIDUAL = 0, 1, 2
COST, LAM, NU, T, FLOATS = 0, 1, 2, 3, 4
STATUS, NIT, NFEV, NJEV, FINAL, INTS = 0, 1, 2, 3, 4, 5

ALLOCATE = """\
    x = ado.zeros({N}, {T})
    xt = ado.zeros({N}, {T})
    v = ado.zeros({N}, {T})
    b = ado.zeros({N}, {T})
    delta = ado.zeros({N}, {T})
    scale = ado.zeros({N}, {T})
    r = ado.zeros({M}, {T})
    rt = ado.zeros({M}, {T})
    dr = ado.zeros({M}, {T})
    J = ado.zeros(({M}, {N}), {T})
    A = ado.zeros(({N}, {N}), {T})
    L = ado.zeros(({N}, {N}), {T})
    st = ado.zeros(least_squares_steps.FLOATS, {T})
    it = ado.zeros(least_squares_steps.INTS, ado.i64)
"""


@ado.func
def cholesky(A, scale, lam, L):
    """L L^T = A + lam diag(scale); False when that is not (numerically) positive definite."""
    n = len(scale)
    for c in range(n):
        for k in range(n):
            L[c, k] = 0.0
    for c in range(n):
        s = A[c, c] + lam * scale[c]
        for k in range(c):
            s -= L[c, k] * L[c, k]
        if not (s > 1e-14 * (A[c, c] + lam * scale[c])) or not (s > 0.0):
            return False
        root = ado.sqrt(s)
        L[c, c] = root
        for row in range(c + 1, n):
            t = A[row, c]
            for k in range(c):
                t -= L[row, k] * L[c, k]
            L[row, c] = t / root
    return True


@ado.func
def solve(L, b, delta):
    """delta = -(L L^T)^-1 b."""
    n = len(b)
    for row in range(n):
        s = -b[row]
        for k in range(row):
            s -= L[row, k] * delta[k]
        delta[row] = s / L[row, row]
    for c in range(n):
        row = n - 1 - c
        s = delta[row]
        for k in range(row + 1, n):
            s -= L[k, row] * delta[k]
        delta[row] = s / L[row, row]


@ado.func
def _normal_equations(J, r, A, b):
    m = len(r)
    n = len(b)
    for p in range(n):
        s = 0.0
        for k in range(m):
            s += J[k, p] * r[k]
        b[p] = s
        for q in range(p + 1):
            t = 0.0
            for k in range(m):
                t += J[k, p] * J[k, q]
            A[p, q] = t
            A[q, p] = t


@ado.func
def _quadratic(A, delta):
    s = 0.0
    n = len(delta)
    for p in range(n):
        for q in range(n):
            s += delta[p] * A[p, q] * delta[q]
    return s


@ado.func
def _propose(x, xt, A, b, delta, L, scale, st, it, gauss_newton):
    """The next trial point xt (RESIDUAL), or DONE with a status when none can be made."""
    if gauss_newton:
        for c in range(len(scale)):
            scale[c] = 0.0
        if not cholesky(A, scale, 0.0, L):
            it[STATUS] = SINGULAR
            return DONE
        solve(L, b, delta)
        st[T] = 1.0
        step_from(x, delta, 1.0, xt)
        return RESIDUAL
    for attempt in range(64):
        if cholesky(A, scale, st[LAM], L):
            solve(L, b, delta)
            step_from(x, delta, 1.0, xt)
            return RESIDUAL
        st[LAM] = st[LAM] * st[NU]
        st[NU] = 2.0 * st[NU]
    it[STATUS] = SINGULAR
    return DONE


@ado.func
def _after_jacobian(x, xt, r, J, A, b, delta, L, scale, st, it, gauss_newton, gtol):
    first = it[NJEV] == 0
    it[NJEV] += 1
    _normal_equations(J, r, A, b)
    if first:
        st[COST] = 0.5 * dot(r, r)
        if not (linesearch.finite(st[COST]) and all_finite(b)):
            it[STATUS] = NONFINITE
            return DONE
    if it[FINAL] == 1 or not all_finite(b):
        if it[FINAL] == 0:
            it[STATUS] = NONFINITE
        return DONE
    if max_abs(b) <= gtol:
        it[STATUS] = GTOL
        return DONE
    if not gauss_newton:
        for c in range(len(b)):
            scale[c] = ado.max(scale[c], A[c, c])
        for c in range(len(b)):
            if not (scale[c] > 0.0):
                scale[c] = 1.0
        if first:
            st[LAM] = 1e-3
            st[NU] = 2.0
    return _propose(x, xt, A, b, delta, L, scale, st, it, gauss_newton)


@ado.func
def _finish(it, code):
    """End with ``code`` after one more Jacobian at the accepted point (its J^T r is the result's grad)."""
    it[STATUS] = code
    it[FINAL] = 1
    return JACOBIAN


@ado.func
def _after_residual(x, xt, r, rt, A, b, delta, L, scale, st, it, gauss_newton, ftol, xtol, max_nfev):
    it[NFEV] += 1
    cost = st[COST]
    trial = 0.5 * dot(rt, rt)
    usable = linesearch.finite(trial)
    t = 1.0
    if gauss_newton:
        t = st[T]
        slope = dot(b, delta)
        accept = usable and trial <= cost + 1e-4 * t * slope
        agreement = (cost - trial) / (-t * slope - 0.5 * t * t * _quadratic(A, delta))
    else:
        predicted = -dot(b, delta) - 0.5 * _quadratic(A, delta)
        agreement = -1.0
        if usable and predicted > 0.0:
            agreement = (cost - trial) / predicted
        accept = agreement > 1e-4
    if accept:
        it[NIT] += 1
        reduction = cost - trial
        step = t * norm(delta)
        copy(xt, x)
        copy(rt, r)
        st[COST] = trial
        if not gauss_newton:
            shrink = 2.0 * agreement - 1.0
            st[LAM] = st[LAM] * ado.max(1.0 / 3.0, 1.0 - shrink * shrink * shrink)
            st[NU] = 2.0
        ftol_met = reduction < ftol * cost and agreement > 0.25
        xtol_met = step < xtol * (xtol + norm(x))
        if ftol_met and xtol_met:
            return _finish(it, FTOL_XTOL)
        if ftol_met:
            return _finish(it, FTOL)
        if xtol_met:
            return _finish(it, XTOL)
        if it[NFEV] >= max_nfev:
            return _finish(it, MAXITER)
        return JACOBIAN
    if it[NFEV] >= max_nfev:
        return _finish(it, MAXITER)
    if gauss_newton:
        t = 0.5 * t
        if t < 1e-10:
            return _finish(it, LINE_SEARCH)
        st[T] = t
        step_from(x, delta, t, xt)
        return RESIDUAL
    st[LAM] = st[LAM] * st[NU]
    st[NU] = 2.0 * st[NU]
    return _propose(x, xt, A, b, delta, L, scale, st, it, gauss_newton)


@ado.func
def step(action, x, xt, r, rt, J, A, b, delta, L, scale, st, it, gauss_newton, ftol, xtol, gtol, max_nfev):
    if action == JACOBIAN:
        return _after_jacobian(x, xt, r, J, A, b, delta, L, scale, st, it, gauss_newton, gtol)
    return _after_residual(x, xt, r, rt, A, b, delta, L, scale, st, it, gauss_newton, ftol, xtol, max_nfev)
