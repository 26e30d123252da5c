"""Kernel-language source for one problem per warp: a small writer of the warp layout's vector algebra.

In the warp layout (docs/optimize.md, "How it runs") a block of ``W = ado.warp_size()`` lanes solves
one problem. The vectors of the problem live in per-problem global scratch arrays (flat kernel
parameters; problem ``b``'s vector ``V`` is ``V[ov + j]``, ``ov = b * (NP + 1)``), and every loop over
the ``n`` coordinates is lane-strided: lane ``l`` owns ``j = t * W + l`` (consecutive lanes,
consecutive addresses: coalesced), so between two barriers no element is touched by two lanes (the
race checks prove it: analysis/races/shared.py). Rows of matrices (L-BFGS's history, BFGS's inverse
Hessian) are ``NP = ceil(n / W) * W`` apart, a whole number of warps, which keeps those proofs
affine; each problem's part of an array is one float longer than its rows (``NP + 1`` for a
vector), because the race proof loses track of the lanes when the per-problem stride is a multiple
of the block size (``(tid // 32) * 32 + lane`` is not taken apart again). Dot products and norms are ``ado.block_sum``/``ado.block_max`` of the lanes' partial sums,
whose results are the same on every lane and count as block-uniform in the front end's check
(frontend/blocks.py), so every lane takes the same branches and reaches the same barriers.

Warp and block operations may only appear in the kernel itself, not in ``@ado.func`` helpers
(frontend/blocks.py), so the methods' warp steps (lbfgs_warp.py, bfgs_warp.py) are written with
this writer into the generated kernel; scalar decisions reuse the thread layout's helpers
(linesearch.py) on each lane's own copy of the scalar state.
"""
from __future__ import annotations

from contextlib import contextmanager


class WarpCode:
    """Lines of a kernel body being written; ``W`` lanes, ``N`` coordinates, float type ``T``."""

    def __init__(self, W: int, N: int, T: str, depth: int = 1):
        self.W, self.N, self.T = W, N, T
        self.trips = -(-N // W)
        self.NP = self.trips * W
        self.VS = self.NP + 1           # a vector's per-problem stride (see above)
        self.lines: list[str] = []
        self.depth = depth
        self._names = 0

    def __call__(self, *lines: str) -> None:
        for text in lines:
            self.lines.append("    " * self.depth + text)

    def text(self) -> str:
        return "".join(line + "\n" for line in self.lines)

    def fresh(self, stem: str) -> str:
        self._names += 1
        return f"{stem}_{self._names}"

    @contextmanager
    def block(self, head: str):
        """``head:`` (``if c``, ``else``, ``for ...``) with the lines written inside indented."""
        self(head + ":")
        self.depth += 1
        start = len(self.lines)
        yield
        if len(self.lines) == start:
            self("pass")
        self.depth -= 1

    @contextmanager
    def lanes(self, index: str = "j"):
        """The lane-strided loop over the coordinates: the body runs for this lane's ``index``."""
        t = self.fresh("t")
        self(f"for {t} in range({self.trips}):")
        self.depth += 1
        self(f"{index} = {t} * {self.W} + lane")
        if self.N % self.W:
            self(f"if {index} < {self.N}:")
            self.depth += 1
        yield
        self.depth -= 2 if self.N % self.W else 1

    def sums(self, names_and_terms: list[tuple[str, str]], before: tuple[str, ...] = ()) -> None:
        """``name = sum over j of term`` for each pair, in one lane-strided pass (``before``: lines
        run first in the pass, e.g. stores whose values the terms use); the sums are block-wide."""
        partial = [self.fresh("acc") for _ in names_and_terms]
        for p in partial:
            self(f"{p} = {self.T}(0.0)")
        with self.lanes():
            self(*before)
            for p, (_, term) in zip(partial, names_and_terms):
                self(f"{p} += {term}")
        for p, (name, _) in zip(partial, names_and_terms):
            self(f"{name} = ado.block_sum({p})")

    def dot(self, name: str, a: str, b: str) -> None:
        """``name = a . b``; ``a``, ``b`` are element expressions in ``j``."""
        self.sums([(name, f"{a} * {b}")])

    def max_abs(self, name: str, a: str) -> None:
        """``name = max_j |a|``, NaN (or infinite) when an element is not finite, as vectors.max_abs:
        each lane's maximum propagates NaN; ``block_max`` ignores NaN lanes, so ``block_sum(0 * m)``
        (NaN when a lane's ``m`` is NaN or infinite) is added."""
        m, v = self.fresh("m"), self.fresh("v")
        self(f"{m} = {self.T}(0.0)")
        with self.lanes():
            self(f"{v} = ado.abs({a})")
            with self.block(f"if not ({v} <= {m})"):
                self(f"{m} = {v}")
        self(f"{name} = ado.block_max({m}) + ado.block_sum(0.0 * {m})")

    def each(self, *lines: str) -> None:
        """The lines for this lane's coordinates ``j``."""
        with self.lanes():
            self(*lines)

    def outcome(self, name: str, call: str) -> None:
        """``name`` = an int result of a scalar helper that every lane computes alike, made visibly
        block-uniform (``block_max`` over the lanes' equal values) so branches on it may hold barriers."""
        self(f"{name} = ado.block_max(ado.f64({call}))")


# The kernel of minimize with layout="warp". The method's code ({start}, {step}) is written by its
# warp module with WarpCode; {copies} are the problem's arguments, copied by every lane (only lane 0
# calls fun); {scratch} the method's global scratch parameters; {I} the visible integers' type
# (inputs.int_type).
MINIMIZE_WARP = """
def {name}(x0: ado.In[{T}, 2], {params}gtol: {T}, ftol: {T}, maxiter: {I}{extra},
        x_out: ado.Out[{T}, 2], f_out: ado.Out[{T}], g_out: ado.Out[{T}, 2], status_out: ado.Out[{I}],
        nit_out: ado.Out[{I}], nfev_out: ado.Out[{I}]{scratch}):
    i = ado.block_id()
    lane = ado.thread_id()
    ov = i * {VS}
{copies}    xt = ado.zeros({N}, {T})
    gt = ado.zeros({N}, {T})
    ls = ado.zeros(linesearch.LS_FLOATS, {T})
    li = ado.zeros(linesearch.LS_INTS, ado.i64)
{allocate}    for t0 in range({trips}):
        j0 = t0 * {W} + lane
        if j0 < {N}:
            XT[ov + j0] = x0[i, j0]
    nfev = 0
    nit = 0
    fx = {T}(0.0)
    code = status.CONTINUE
    while code == status.CONTINUE:
        ado.sync_threads()
        f0 = {T}(0.0)
        if lane == 0:
            for j in range({N}):
                xt[j] = XT[ov + j]
            f0 = ado.value_and_grad(fun)(xt{call}, out=gt)
            for j in range({N}):
                GT[ov + j] = gt[j]
        f = ado.block_sum(f0)
        ado.sync_threads()
        nfev += 1
        if nfev == 1:
{start}        else:
{step}    ado.sync_threads()
    if lane == 0:
        for j in range({N}):
            x_out[i, j] = X[ov + j]
            g_out[i, j] = G[ov + j]
        f_out[i] = fx
        status_out[i] = {I}(code)
        nit_out[i] = {I}(nit)
        nfev_out[i] = {I}(nfev)
"""
