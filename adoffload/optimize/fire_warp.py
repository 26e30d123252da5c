"""FIRE for one problem per warp: fire.py's algorithm (read its docstring), lane-strided over particles.

Each lane owns whole groups of ``group`` coordinates (particles ``p = t * W + lane``; with
``group=1`` that is the coordinate layout of warp_code.py), so the per-group step limit
(``max_step``) needs no exchange but one ``block_max``, and no two lanes touch one element. ``x``,
``g``, ``v``, the trial point and gradient are per-problem global scratch; the time step, mixing
factor and the count of positive-power steps are block-uniform kernel variables.
"""
from __future__ import annotations

from contextlib import contextmanager

from .status import CONTINUE, GTOL, MAXITER, NONFINITE

KERNEL_PARAMS = (("dt_start", "{T}"), ("dt_max", "{T}"), ("max_step", "{T}"), ("n_min", "{I}"),
                 ("f_inc", "{T}"), ("f_dec", "{T}"), ("alpha_start", "{T}"), ("f_alpha", "{T}"))


def scratch(N: int, NP: int, static: dict) -> list[tuple[str, int]]:
    return [(v, NP + 1) for v in ("X", "G", "V", "XT", "GT")]


def allocate(c, static: dict) -> None:
    c("dt = dt_start", "mixing = alpha_start", "positive = 0")


@contextmanager
def _groups(c, group: int):
    """This lane's particles ``p`` and, inside, their coordinates ``j``."""
    particles = c.N // group
    trips = -(-particles // c.W)
    t = c.fresh("t")
    c(f"for {t} in range({trips}):")
    c.depth += 1
    c(f"p = {t} * {c.W} + lane")
    c(f"if p < {particles}:")
    c.depth += 1
    c(f"for cc in range({group}):")
    c.depth += 1
    c(f"j = p * {group} + cc")
    yield
    c.depth -= 3


def _sums(c, group: int, pairs: list[tuple[str, str]]) -> None:
    partial = [c.fresh("acc") for _ in pairs]
    for p in partial:
        c(f"{p} = {c.T}(0.0)")
    with _groups(c, group):
        for p, (_, term) in zip(partial, pairs):
            c(f"{p} += {term}")
    for p, (name, _) in zip(partial, pairs):
        c(f"{name} = ado.block_sum({p})")


def _max_abs(c, group: int, name: str, a: str) -> None:
    m, w = c.fresh("m"), c.fresh("w")
    c(f"{m} = {c.T}(0.0)")
    with _groups(c, group):
        c(f"{w} = ado.abs({a})")
        with c.block(f"if not ({w} <= {m})"):
            c(f"{m} = {w}")
    c(f"{name} = ado.block_max({m}) + ado.block_sum(0.0 * {m})")


def _each(c, group: int, *lines: str) -> None:
    with _groups(c, group):
        c(*lines)


def _move(c, group: int, velocity: str, step: str) -> None:
    """XT = X + factor * step * velocity, scaled where a particle would move more than max_step (fire._move)."""
    particles = c.N // group
    trips = -(-particles // c.W)
    t = c.fresh("t")
    c(f"reach = {c.T}(0.0)")
    c(f"for {t} in range({trips}):")
    c.depth += 1
    c(f"p = {t} * {c.W} + lane")
    with c.block(f"if p < {particles}"):
        c(f"length = {c.T}(0.0)")
        with c.block(f"for cc in range({group})"):
            c(f"length += ({step} * {velocity.format(j=f'p * {group} + cc')}) ** 2")
        c("reach = ado.max(reach, length)")
    c.depth -= 1
    c("longest = ado.sqrt(ado.block_max(reach))")
    c(f"factor = {c.T}(1.0)")
    with c.block("if longest > max_step"):
        c("factor = max_step / longest")
    _each(c, group, f"XT[ov + j] = X[ov + j] + factor * {step} * {velocity.format(j='j')}")


def _advance(c, group: int) -> None:
    """One FIRE step from the accepted x (fire._advance)."""
    _sums(c, group, [("gv", "G[ov + j] * V[ov + j]"), ("vv", "V[ov + j] * V[ov + j]"),
                     ("gg", "G[ov + j] * G[ov + j]")])
    c("power = -gv")
    with c.block("if power > 0.0"):
        c("mix = mixing * ado.sqrt(vv / gg)")
        _each(c, group, "V[ov + j] = (1.0 - mixing) * V[ov + j] - mix * G[ov + j]")
        with c.block("if positive > n_min"):
            c("dt = ado.min(dt * f_inc, dt_max)", "mixing = mixing * f_alpha")
        c("positive += 1")
    with c.block("else"):
        _each(c, group, "V[ov + j] = 0.0")
        c("dt = dt * f_dec", "mixing = alpha_start", "positive = 0")
    _each(c, group, "V[ov + j] -= dt * G[ov + j]")
    _move(c, group, "V[ov + {j}]", "dt")
    c(f"code = {CONTINUE}")


def start(c, static: dict) -> None:
    group = static["G"]
    _each(c, group, "X[ov + j] = XT[ov + j]", "G[ov + j] = GT[ov + j]")
    c("fx = f")
    _max_abs(c, group, "gmax", "G[ov + j]")
    with c.block("if not (linesearch.finite(f) and linesearch.finite(gmax))"):
        c(f"code = {NONFINITE}")
    with c.block("elif gmax <= gtol"):
        c(f"code = {GTOL}")
    with c.block("else"):
        _advance(c, group)


def step(c, static: dict) -> None:
    group = static["G"]
    c("nit += 1")
    _max_abs(c, group, "gtmax", "GT[ov + j]")
    with c.block("if not (linesearch.finite(f) and linesearch.finite(gtmax))"):
        c("dt = dt * f_dec")                   # a step into infinity: retry it shorter, from rest
        _each(c, group, "V[ov + j] = 0.0")
        _move(c, group, "G[ov + {j}]", "(-dt)")
        with c.block("if nit >= maxiter"):
            c(f"code = {MAXITER}")
    with c.block("else"):
        _each(c, group, "X[ov + j] = XT[ov + j]", "G[ov + j] = GT[ov + j]")
        c("fx = f")
        _max_abs(c, group, "gmax", "G[ov + j]")
        with c.block("if gmax <= gtol"):
            c(f"code = {GTOL}")
        with c.block("elif nit >= maxiter"):
            c(f"code = {MAXITER}")
        with c.block("else"):
            _advance(c, group)
