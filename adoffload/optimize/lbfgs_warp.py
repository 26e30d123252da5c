"""L-BFGS for one problem per warp: lbfgs.py's algorithm with lane-strided vector algebra.

The same steps, tests and status codes as lbfgs.py (read its docstring); what differs is where the
state lives and who computes what (warp_code.py): ``x``, ``g``, ``d``, the trial point and gradient
and the history ``S``, ``Y`` (``maxcor`` rows each) are per-problem global scratch, every lane
updates its coordinates, and dot products are block sums (summed in another order than the thread
layout's, so iterates agree to rounding, not bitwise). The scalar state (the ring buffer's head and
fill, the restart flag, the iteration count) is block-uniform kernel variables; ``rho``, the
two-loop's ``alpha`` and the line search's state (linesearch.py, called by every lane on its own
copy) are each lane's local arrays, equal on every lane.
"""
from __future__ import annotations

from .status import CONTINUE, FTOL, GTOL, LINE_SEARCH, MAXITER, NONFINITE

KERNEL_PARAMS = ()


def scratch(N: int, NP: int, static: dict) -> list[tuple[str, int]]:
    """(name, floats per problem) of the global scratch arrays (one float of padding each: warp_code.py)."""
    H = static["H"]
    return [(v, NP + 1) for v in ("X", "G", "D", "XT", "GT")] + [("S", H * NP + 1), ("Y", H * NP + 1)]


def allocate(c, static: dict) -> None:
    H = static["H"]
    c(f"rho = ado.zeros({H}, {c.T})",
      f"alphas = ado.zeros({H}, {c.T})",
      f"oh = i * {H * c.NP + 1}",
      "head = 0",
      "fill = 0",
      "restarted = 0")


def _steepest(c) -> None:
    """Search along -g from x, first trial step min(1, 1 / |g|) (lbfgs._steepest)."""
    c.sums([("dg0", "G[ov + j] * D[ov + j]"), ("gg", "G[ov + j] * G[ov + j]")],
           before=("D[ov + j] = -G[ov + j]",))
    c("alpha = ado.min(1.0, 1.0 / ado.sqrt(gg))",
      "linesearch.begin(ls, li, fx, dg0, alpha)")
    c.each("XT[ov + j] = X[ov + j] + alpha * D[ov + j]")
    c(f"code = {CONTINUE}")


def start(c, static: dict) -> None:
    c.each("X[ov + j] = XT[ov + j]", "G[ov + j] = GT[ov + j]")
    c("fx = f")
    c.max_abs("gmax", "G[ov + j]")
    with c.block("if not (linesearch.finite(f) and linesearch.finite(gmax))"):
        c(f"code = {NONFINITE}")
    with c.block("elif gmax <= gtol"):
        c(f"code = {GTOL}")
    with c.block("else"):
        _steepest(c)


def _two_loop(c, H: int) -> None:
    """d = -H g with the history's inverse Hessian (lbfgs._two_loop)."""
    NP = c.NP
    c.each("D[ov + j] = G[ov + j]")
    with c.block("for c1 in range(fill)"):
        c(f"k = (head - 1 - c1 + {H}) % {H}")
        c.dot("sd", f"S[oh + k * {NP} + j]", "D[ov + j]")
        c("a = rho[k] * sd", "alphas[k] = a")
        c.each(f"D[ov + j] -= a * Y[oh + k * {NP} + j]")
    c(f"newest = (head - 1 + {H}) % {H}")
    c.dot("yy", f"Y[oh + newest * {NP} + j]", f"Y[oh + newest * {NP} + j]")
    c("gamma = 1.0 / (rho[newest] * yy)")
    c.each("D[ov + j] *= gamma")
    with c.block("for c2 in range(fill)"):
        c(f"k = (head - fill + c2 + {H}) % {H}")
        c.dot("yd", f"Y[oh + k * {NP} + j]", "D[ov + j]")
        c("beta = rho[k] * yd")
        c.each(f"D[ov + j] += S[oh + k * {NP} + j] * (alphas[k] - beta)")
    c.each("D[ov + j] = -D[ov + j]")


def _remember(c, H: int) -> None:
    """s = xt - x, y = gt - g into the ring buffer's head slot; kept when s . y > 0 (lbfgs._remember)."""
    NP = c.NP
    c.sums([("sy", "(XT[ov + j] - X[ov + j]) * (GT[ov + j] - G[ov + j])"),
            ("yy", "(GT[ov + j] - G[ov + j]) * (GT[ov + j] - G[ov + j])")],
           before=(f"S[oh + head * {NP} + j] = XT[ov + j] - X[ov + j]",
                   f"Y[oh + head * {NP} + j] = GT[ov + j] - G[ov + j]"))
    with c.block("if sy > 1e-10 * yy and sy > 0.0"):
        c("rho[head] = 1.0 / sy",
          f"head = (head + 1) % {H}",
          f"fill = ado.min(fill + 1, {H})")


def step(c, static: dict) -> None:
    H = static["H"]
    c.dot("dg", "GT[ov + j]", "D[ov + j]")
    c.outcome("outcome", "linesearch.update(ls, li, f, dg)")
    with c.block("if outcome == 0.0"):                 # linesearch.TRY
        c("alpha = ls[linesearch.ALPHA]")
        c.each("XT[ov + j] = X[ov + j] + alpha * D[ov + j]")
    with c.block("elif outcome == 2.0"):               # linesearch.FAIL
        with c.block("if restarted == 1"):
            c(f"code = {LINE_SEARCH}")
        with c.block("else"):
            c("restarted = 1", "fill = 0")
            _steepest(c)
    with c.block("else"):                              # linesearch.ACCEPT
        c("restarted = 0")
        _remember(c, H)
        c("previous = fx")
        c.each("X[ov + j] = XT[ov + j]", "G[ov + j] = GT[ov + j]")
        c("fx = f", "nit += 1")
        c.max_abs("gmax", "G[ov + j]")
        with c.block("if gmax <= gtol"):
            c(f"code = {GTOL}")
        with c.block("elif ftol > 0.0 and previous - f <= ftol * ado.max(ado.max(ado.abs(previous), ado.abs(f)), 1.0)"):
            c(f"code = {FTOL}")
        with c.block("elif nit >= maxiter"):
            c(f"code = {MAXITER}")
        with c.block("elif fill == 0"):
            _steepest(c)
        with c.block("else"):
            _two_loop(c, H)
            c.dot("dg0", "G[ov + j]", "D[ov + j]")
            with c.block("if not (dg0 < 0.0)"):
                c("fill = 0")
                _steepest(c)
            with c.block("else"):
                c("linesearch.begin(ls, li, f, dg0, 1.0)")
                c.each("XT[ov + j] = X[ov + j] + D[ov + j]")
                c(f"code = {CONTINUE}")
