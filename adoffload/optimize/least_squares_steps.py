"""Levenberg-Marquardt and Gauss-Newton for one problem per thread, in reverse communication.

The kernel (generate.py) has one evaluation site: at the trial point ``xt``, one
``ado.jvp(residual, width=n)`` with the unit tangents of ``V`` gives the residuals ``r`` and the
Jacobian, transposed (``Jt``, n x m), and ``step`` says what next: ``EVALUATE`` (at the new ``xt``) or
``DONE`` (the status in ``it[STATUS]``). A trial point is evaluated with its Jacobian because most are
accepted: the Jacobian at the new ``x`` is then in hand (the residual's work is done once per trial,
not once for the trial and again for its Jacobian); a rejected trial's Jacobian is dropped (``J^T J``,
``J^T r`` and the cost at ``x`` are kept, which is all a retry needs). A stop after an accepted trial
forms its normal equations (``_finish``); a stop after a rejected one evaluates ``x`` once more
(``_refill``), so the returned residuals and gradient are always those of the returned ``x``.

Each iteration solves the normal equations ``(J^T J + lam D) delta = -J^T r`` by Cholesky, ``D`` the
largest diagonal of ``J^T J`` seen (Marquardt's scaling, as MINPACK's), and takes the step when its
actual reduction of the cost ``0.5 |r|^2`` is at least 1e-4 of the model's (``lam`` then shrinks by
Nielsen's rule ``max(1/3, 1 - (2 rho - 1)^3)``, else grows by ``nu`` doubling). Gauss-Newton has
``lam = 0`` and halves the step until the cost decreases by 1e-4 of the model's slope.
Termination as scipy's ``least_squares(method="lm")`` (MINPACK): ``max_cosine`` (the gradient's angle
test, independent of the data's scale) ``<= gtol``; on an accepted step ``dF < ftol F``
with a model agreement above 0.25, ``|dx| < xtol (xtol + |x|)`` (Levenberg-Marquardt: on a rejected
trial too, as scipy's, so that at the cost's rounding floor the growing damping ends in XTOL).
``nfev`` counts trial points, ``njev`` evaluations (each gives residuals and Jacobian): ``1 + nfev``,
plus one after a ``_refill``.
"""
from __future__ import annotations

import adoffload as ado

from . import linesearch
from .status import FTOL, FTOL_XTOL, GTOL, LINE_SEARCH, MAXITER, NONFINITE, SINGULAR, XTOL
from .vectors import all_finite, copy, dot, norm, step_from

DONE, JACOBIAN, EVALUATE = 0, 1, 2
COST, LAM, NU, T, FLOATS = 0, 1, 2, 3, 4
STATUS, NIT, NFEV, NJEV, FINAL, INTS = 0, 1, 2, 3, 4, 5

ALLOCATE = """\
    x = ado.zeros({N}, {T})
    xt = ado.zeros({N}, {T})
    b = ado.zeros({N}, {T})
    delta = ado.zeros({N}, {T})
    scale = ado.zeros({N}, {T})
    r = ado.zeros({M}, {T})
    V = ado.zeros(({K}, {N}), {T})
    Jt = ado.zeros(({N}, {M}), {T})
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
def _normal_equations(Jt, r, A, b):
    """A = J^T J and b = J^T r from the transposed Jacobian ``Jt`` (n, m): row p holds column p of J."""
    m = len(r)
    n = len(b)
    for p in range(n):
        b[p] = 0.0
        for q in range(p + 1):
            A[p, q] = 0.0
    for k in range(m):          # one pass over the residuals: each Jacobian element read once
        for p in range(n):
            u = Jt[p, k]
            b[p] += u * r[k]
            for q in range(p + 1):
                A[p, q] += u * Jt[q, k]
    for p in range(n):
        for q in range(p):
            A[q, p] = A[p, q]


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
    """The next trial point xt (EVALUATE), or DONE with a status when none can be made."""
    if gauss_newton:
        for c in range(len(scale)):
            scale[c] = 0.0
        if not cholesky(A, scale, 0.0, L):
            it[STATUS] = SINGULAR
            return DONE
        solve(L, b, delta)
        st[T] = 1.0
        step_from(x, delta, 1.0, xt)
        return EVALUATE
    for attempt in range(64):
        if cholesky(A, scale, st[LAM], L):
            solve(L, b, delta)
            step_from(x, delta, 1.0, xt)
            return EVALUATE
        st[LAM] = st[LAM] * st[NU]
        st[NU] = 2.0 * st[NU]
    it[STATUS] = SINGULAR
    return DONE


@ado.func
def max_cosine(A, b, rr):
    """MINPACK's (scipy ``method="lm"``'s) gradient test: the largest |cos| of the angle between the
    residuals and a column of J, ``|J_j . r| / (|J_j| |r|)`` (``b = J^T r``, ``|J_j|^2 = A[j, j]``), 0 when
    the residuals are 0; columns of norm 0 do not count. Unlike ``max |J^T r|`` it does not depend on
    the scale of the data: residuals of 1e-3 met an absolute gtol of 1e-8 while the parameters were
    still 1e-5 off."""
    c = 0.0
    if rr > 0.0:
        for j in range(len(b)):
            if A[j, j] > 0.0:
                v = ado.abs(b[j]) / (ado.sqrt(A[j, j]) * ado.sqrt(rr))     # not sqrt(A rr): no overflow
                if not (v <= c):
                    c = v
    elif not (rr == 0.0):
        c = rr                       # NaN: the test fails
    return c


@ado.func
def _after_jacobian(x, xt, r, Jt, A, b, delta, L, scale, st, it, gauss_newton, gtol):
    """r and Jt are those of x: the normal equations, the gradient test, the next trial point."""
    first = it[NJEV] == 1
    _normal_equations(Jt, r, A, b)
    if first:
        st[COST] = 0.5 * dot(r, r)
        if not (linesearch.finite(st[COST]) and all_finite(b)):
            it[STATUS] = NONFINITE
            return DONE
    if it[FINAL] == 1 or not all_finite(b):
        if it[FINAL] == 0:
            it[STATUS] = NONFINITE
        return DONE
    if max_cosine(A, b, dot(r, r)) <= gtol:
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
    """End with ``code`` at the point just accepted, once its normal equations are formed (J^T r: the
    result's grad)."""
    it[STATUS] = code
    it[FINAL] = 1
    return JACOBIAN


@ado.func
def _refill(x, xt, it, code):
    """End with ``code`` after a rejected trial point, whose residuals and Jacobian are in r and Jt: one
    more evaluation at x first, so the result's residuals and grad are those of x."""
    copy(x, xt)
    it[STATUS] = code
    it[FINAL] = 1
    return EVALUATE


@ado.func
def _after_residual(x, xt, r, A, b, delta, L, scale, st, it, gauss_newton, ftol, xtol, max_nfev):
    it[NFEV] += 1
    cost = st[COST]
    trial = 0.5 * dot(r, r)             # r holds the trial point's residuals
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
    if not gauss_newton and norm(delta) < xtol * (xtol + norm(x)):
        return _refill(x, xt, it, XTOL)     # as scipy's: the step test holds for a rejected trial too
    if it[NFEV] >= max_nfev:
        return _refill(x, xt, it, MAXITER)
    if gauss_newton:
        t = 0.5 * t
        if t < 1e-10:
            return _refill(x, xt, it, LINE_SEARCH)
        st[T] = t
        step_from(x, delta, t, xt)
        return EVALUATE
    st[LAM] = st[LAM] * st[NU]
    st[NU] = 2.0 * st[NU]
    action = _propose(x, xt, A, b, delta, L, scale, st, it, gauss_newton)
    if action == DONE:                  # r and Jt hold the rejected trial's: evaluate x once more
        return _refill(x, xt, it, it[STATUS])
    return action


@ado.func
def step(x, xt, r, Jt, A, b, delta, L, scale, st, it, gauss_newton, ftol, xtol, gtol, max_nfev):
    """After an evaluation at xt (its residuals in r, its Jacobian in Jt): EVALUATE at the new xt, or DONE."""
    it[NJEV] += 1
    if it[NJEV] == 1 or it[FINAL] == 1:     # at x: the start, or the evaluation after a stop at a rejected trial
        return _after_jacobian(x, xt, r, Jt, A, b, delta, L, scale, st, it, gauss_newton, gtol)
    action = _after_residual(x, xt, r, A, b, delta, L, scale, st, it, gauss_newton, ftol, xtol, max_nfev)
    if action == JACOBIAN:                  # accepted: x = xt, whose Jacobian is in hand
        return _after_jacobian(x, xt, r, Jt, A, b, delta, L, scale, st, it, gauss_newton, gtol)
    return action
