"""BFGS with a dense inverse Hessian for one problem per warp: bfgs.py's algorithm, lane-strided.

The same steps, tests and status codes as bfgs.py (read its docstring). The ``n x n`` inverse
Hessian ``Hm`` is per-problem global scratch (rows ``NP`` floats apart, warp_code.py), not the
thread's local memory, so its size is bounded by the device's memory, not by the local-memory
limit. Each lane owns the columns ``j`` of its coordinates: the product ``d = -Hm g`` is computed
as ``d[j] = -sum_a Hm[a, j] g[a]`` (``Hm`` is symmetric, so this is ``Hm g``; the thread layout sums
along rows, so the two agree to rounding), reading ``Hm`` row by row with consecutive lanes on
consecutive columns (coalesced); the rank-2 update writes each lane's columns the same way.
"""
from __future__ import annotations

from .status import CONTINUE, FTOL, GTOL, LINE_SEARCH, MAXITER, NONFINITE

KERNEL_PARAMS = ()


def scratch(N: int, NP: int, static: dict) -> list[tuple[str, int]]:
    return [(v, NP + 1) for v in ("X", "G", "D", "XT", "GT", "HY")] + [("HM", N * NP + 1)]


def allocate(c, static: dict) -> None:
    c(f"om = i * {c.N * c.NP + 1}",
      "updated = 0",
      "restarted = 0")


def _column(c, index: str = "a") -> str:
    return f"HM[om + {index} * {c.NP} + j]"


def _identity(c) -> None:
    with c.lanes():
        with c.block(f"for a in range({c.N})"):
            c(f"{_column(c)} = {c.T}(1.0) if a == j else {c.T}(0.0)")


def _direction(c) -> None:
    """D = -Hm G, each lane its own columns (G read whole: the caller put a barrier after its stores)."""
    with c.lanes():
        c(f"hs = {c.T}(0.0)")
        with c.block(f"for a in range({c.N})"):
            c(f"hs += {_column(c)} * G[ov + a]")
        c("D[ov + j] = -hs")


def _search(c, alpha: str) -> None:
    """Search along -Hm g; steepest descent (and the identity) when that is not downhill (bfgs._search)."""
    c("ado.sync_threads()")
    _direction(c)
    c("alpha = " + alpha)
    c.dot("dg0", "G[ov + j]", "D[ov + j]")
    with c.block("if not (dg0 < 0.0)"):
        _identity(c)
        c("updated = 0", "ado.sync_threads()")     # Hm's stores apart from its loads (the race proof)
        _direction(c)
        c.sums([("dg0", "G[ov + j] * D[ov + j]"), ("gg", "G[ov + j] * G[ov + j]")])
        c("alpha = ado.min(1.0, 1.0 / ado.sqrt(gg))")
    c("linesearch.begin(ls, li, fx, dg0, alpha)")
    c.each("XT[ov + j] = X[ov + j] + alpha * D[ov + j]")
    c(f"code = {CONTINUE}")


def _first_step(c) -> str:
    c.dot("gg0", "G[ov + j]", "G[ov + j]")
    return "ado.min(1.0, 1.0 / ado.sqrt(gg0))"


def start(c, static: dict) -> None:
    c.each("X[ov + j] = XT[ov + j]", "G[ov + j] = GT[ov + j]")
    c("fx = f")
    _identity(c)
    c.max_abs("gmax", "G[ov + j]")
    with c.block("if not (linesearch.finite(f) and linesearch.finite(gmax))"):
        c(f"code = {NONFINITE}")
    with c.block("elif gmax <= gtol"):
        c(f"code = {GTOL}")
    with c.block("else"):
        _search(c, _first_step(c))


def _update(c) -> None:
    """Hm <- (I - rho s y^T) Hm (I - rho y s^T) + rho s s^T, s = xt - x and y = gt - g left in XT, GT
    (bfgs._update)."""
    c.sums([("sy", "XT[ov + j] * GT[ov + j]"), ("yy", "GT[ov + j] * GT[ov + j]")],
           before=("XT[ov + j] = XT[ov + j] - X[ov + j]", "GT[ov + j] = GT[ov + j] - G[ov + j]"))
    with c.block("if sy > 1e-10 * yy and sy > 0.0"):
        with c.block("if updated == 0"):
            c("scale = sy / yy")
            with c.lanes():
                with c.block(f"for a in range({c.N})"):
                    c(f"{_column(c)} *= scale")
            c("updated = 1")
        c("ado.sync_threads()")
        with c.lanes():
            c(f"hs = {c.T}(0.0)")
            with c.block(f"for a in range({c.N})"):
                c(f"hs += {_column(c)} * GT[ov + a]")
            c("HY[ov + j] = hs")
        c("rho = 1.0 / sy")
        c.dot("yhy", "GT[ov + j]", "HY[ov + j]")
        c("ado.sync_threads()")
        with c.lanes():
            with c.block(f"for a in range({c.N})"):
                c(f"{_column(c)} += rho * ((1.0 + rho * yhy) * XT[ov + a] * XT[ov + j] - HY[ov + a] * XT[ov + j]"
                  f" - XT[ov + a] * HY[ov + j])")


def step(c, static: dict) -> None:
    c.dot("dg", "GT[ov + j]", "D[ov + j]")
    c.outcome("outcome", "linesearch.update(ls, li, f, dg)")
    with c.block("if outcome == 0.0"):                 # linesearch.TRY
        c("alpha = ls[linesearch.ALPHA]")
        c.each("XT[ov + j] = X[ov + j] + alpha * D[ov + j]")
    with c.block("elif outcome == 2.0"):               # linesearch.FAIL
        with c.block("if restarted == 1"):
            c(f"code = {LINE_SEARCH}")
        with c.block("else"):
            c("restarted = 1")
            _identity(c)
            c("updated = 0")
            _search(c, _first_step(c))
    with c.block("else"):                              # linesearch.ACCEPT
        c("restarted = 0", "previous = fx")
        c.each("D[ov + j] = XT[ov + j]")               # the accepted point, kept in D while XT, GT become s, y
        _update(c)
        c.each("G[ov + j] = G[ov + j] + GT[ov + j]", "X[ov + j] = D[ov + j]")
        c("fx = f", "nit += 1")
        c.max_abs("gmax", "G[ov + j]")
        with c.block("if gmax <= gtol"):
            c(f"code = {GTOL}")
        with c.block("elif ftol > 0.0 and previous - f <= ftol * ado.max(ado.max(ado.abs(previous), ado.abs(f)), 1.0)"):
            c(f"code = {FTOL}")
        with c.block("elif nit >= maxiter"):
            c(f"code = {MAXITER}")
        with c.block("else"):
            _search(c, f"{c.T}(1.0)")
