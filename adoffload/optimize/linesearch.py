"""A strong-Wolfe line search for one problem per thread, in reverse communication.

Nocedal & Wright's Algorithms 3.5 (bracketing) and 3.6 (zoom), as a state machine: the caller
evaluates ``f`` and ``dg = g . d`` at the trial step ``ls[ALPHA]`` and passes them to ``update``,
which answers ``TRY`` (a new ``ls[ALPHA]`` to evaluate), ``ACCEPT`` (the last trial satisfies the
strong Wolfe conditions, or is the best point found, re-evaluated) or ``FAIL`` (no step with a
sufficient decrease was found). So a kernel has one evaluation site (``ado.value_and_grad(fun)``),
which the threads of a warp reach together whatever phase each is in.

A non-finite ``f`` or ``dg`` at a trial counts as too large a step (it brackets from above), so a
step into an overlap of atoms (infinite energy) is shortened, not accepted. Near a minimum, where the
decrease ``f0 - f`` is lost in rounding, a trial is also accepted by Hager & Zhang's approximate Wolfe
conditions (the slope shrank, ``C2 dg0 <= dg <= (2 C1 - 1) dg0``, and ``f`` rose by rounding at most):
the gradient, not the function value, then leads to a tight ``gtol``.

State: ``ls`` (floats, ``LS_FLOATS`` slots named below) and ``li`` (ints, ``LS_INTS``), local arrays
of the kernel. Written in the kernel language: these are ``@ado.func`` helpers.
"""
from __future__ import annotations

import adoffload as ado

ALPHA, F0, DG0, A_PREV, F_PREV, DG_PREV, A_LO, F_LO, DG_LO, A_HI, F_HI, DG_HI = range(12)
LS_FLOATS = 12
PHASE, COUNT = 0, 1
LS_INTS = 2
BRACKET, ZOOM, REEVALUATE = 0, 1, 2
TRY, ACCEPT, FAIL = 0, 1, 2

C1, C2 = 1e-4, 0.9          # sufficient decrease, curvature (quasi-Newton values)
MAX_TRIALS = 40             # evaluations per search
GROWTH = 4.0                # bracketing: the next trial step is this many times the last
ROUNDING = 1e-12            # a rise of f this small relative to |f0| may be rounding (approximate Wolfe)


@ado.func
def finite(v):
    return (v - v) == 0.0


@ado.func
def begin(ls, li, f0, dg0, alpha):
    """Start a search from f0 (slope dg0 < 0) with the first trial step alpha."""
    ls[F0] = f0
    ls[DG0] = dg0
    ls[ALPHA] = alpha
    ls[A_PREV] = 0.0
    ls[F_PREV] = f0
    ls[DG_PREV] = dg0
    li[PHASE] = BRACKET
    li[COUNT] = 0


@ado.func
def _set_lo(ls, a, f, dg):
    ls[A_LO] = a
    ls[F_LO] = f
    ls[DG_LO] = dg


@ado.func
def _set_hi(ls, a, f, dg):
    ls[A_HI] = a
    ls[F_HI] = f
    ls[DG_HI] = dg


@ado.func
def _interpolate(ls):
    """A trial inside the zoom interval: the cubic's minimizer if it lies well inside, else the middle."""
    a = ls[A_LO]
    b = ls[A_HI]
    fa = ls[F_LO]
    fb = ls[F_HI]
    da = ls[DG_LO]
    db = ls[DG_HI]
    middle = 0.5 * (a + b)
    width = ado.abs(b - a)
    if not (finite(fb) and finite(db)):
        return middle
    d1 = da + db - 3.0 * (fa - fb) / (a - b)
    radicand = d1 * d1 - da * db
    if not (radicand >= 0.0):
        return middle
    d2 = ado.copysign(ado.sqrt(radicand), b - a)
    t = b - (b - a) * (db + d2 - d1) / (db - da + 2.0 * d2)
    if not finite(t) or ado.abs(t - a) < 0.1 * width or ado.abs(t - b) < 0.1 * width:
        return middle
    if (t - a) * (t - b) > 0.0:
        return middle
    return t


@ado.func
def _fallback(ls, li):
    """The search ran out of trials: re-evaluate the best step found, if it decreased f."""
    if ls[A_LO] > 0.0 and ls[F_LO] < ls[F0]:
        li[PHASE] = REEVALUATE
        ls[ALPHA] = ls[A_LO]
        return TRY
    return FAIL


@ado.func
def update(ls, li, f, dg):
    """The trial at ls[ALPHA] gave f and dg: TRY (evaluate the new ls[ALPHA]), ACCEPT or FAIL."""
    li[COUNT] += 1
    if li[PHASE] == REEVALUATE:
        return ACCEPT
    a = ls[ALPHA]
    f0 = ls[F0]
    dg0 = ls[DG0]
    usable = finite(f) and finite(dg)
    decrease = usable and f <= f0 + C1 * a * dg0
    if usable and not decrease and f <= f0 + ROUNDING * ado.abs(f0) and C2 * dg0 <= dg <= (2.0 * C1 - 1.0) * dg0:
        return ACCEPT       # Hager & Zhang's approximate Wolfe conditions: f0 - f is lost in rounding here
    if li[PHASE] == BRACKET:
        if not decrease or (li[COUNT] > 1 and f >= ls[F_PREV]):
            _set_lo(ls, ls[A_PREV], ls[F_PREV], ls[DG_PREV])
            _set_hi(ls, a, f, dg)
            li[PHASE] = ZOOM
        elif ado.abs(dg) <= -C2 * dg0:
            return ACCEPT
        elif dg >= 0.0:
            _set_lo(ls, a, f, dg)
            _set_hi(ls, ls[A_PREV], ls[F_PREV], ls[DG_PREV])
            li[PHASE] = ZOOM
        else:
            if li[COUNT] >= MAX_TRIALS:
                _set_lo(ls, a, f, dg)
                return _fallback(ls, li)
            ls[A_PREV] = a
            ls[F_PREV] = f
            ls[DG_PREV] = dg
            ls[ALPHA] = GROWTH * a
            return TRY
    else:
        if not decrease or f >= ls[F_LO]:
            _set_hi(ls, a, f, dg)
        else:
            if ado.abs(dg) <= -C2 * dg0:
                return ACCEPT
            if dg * (ls[A_HI] - ls[A_LO]) >= 0.0:
                _set_hi(ls, ls[A_LO], ls[F_LO], ls[DG_LO])
            _set_lo(ls, a, f, dg)
    width = ado.abs(ls[A_HI] - ls[A_LO])
    if li[COUNT] >= MAX_TRIALS or width <= 1e-15 * ado.max(ls[A_HI], ls[A_LO]):
        return _fallback(ls, li)
    ls[ALPHA] = _interpolate(ls)
    return TRY
