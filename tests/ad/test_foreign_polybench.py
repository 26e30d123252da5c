"""PolyBench-style C (tests/fixtures/foreign/polybench/polybench.c: the suite's linear algebra,
solvers, data mining, image processing and stencil kernels, written in its style: loop nests with
triangular bounds, in-place updates, recurrences through memory, VLA parameters, stack and heap
scratch, sqrt/exp/pow/log, divisions), from clang 22 at -O0..-O3, through ``ado.from_llvm`` and
differentiated in forward and reverse mode. Each is checked by both oracles of rust_hunt_cases.check:
forward tangents against central differences, and forward against reverse through
<J v, w> = <v, J^T w>. A function may be refused with an error naming the construct, never answered
wrongly; none is refused today (REFUSED is empty), so every case must give the right derivative.

The whole matrix (31 functions x 4 levels, about two minutes) runs with ``ADOFFLOAD_POLYBENCH=all``;
by default each function runs at one level, the levels taken in turn, so every function and every
level is covered in CI's budget (about 30 s on one core)."""
from __future__ import annotations

import gzip
import os
import re
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

import adoffload as ado
from adoffload.errors import DifferentiationError
from adoffload.testing.irtext import module_subset

from .polybench_cases import CASES
from .rust_hunt_cases import check

FIXTURES = Path(__file__).parents[1] / "fixtures" / "foreign" / "polybench"
ALL = (0, 1, 2, 3)
FULL = os.environ.get("ADOFFLOAD_POLYBENCH") == "all"

# name: (levels, pattern of the refusal, why it is refused). Empty: every kernel is differentiated.
REFUSED: dict[str, tuple[tuple[int, ...], str, str]] = {}


@lru_cache(maxsize=None)
def _text(level: int) -> str:
    with gzip.open(FIXTURES / f"pb_O{level}.ll.gz", "rt") as f:
        return f.read()


def _load(name: str, level: int):
    return ado.from_llvm(module_subset(_text(level), [name]))[name]


MATRIX = [(name, level) for k, name in enumerate(CASES) for level in ALL if FULL or level == ALL[k % len(ALL)]]


@pytest.mark.parametrize("name,level", MATRIX, ids=[f"{n}-O{o}" for n, o in MATRIX])
def test_polybench_kernel(name, level):
    levels, pattern, _ = REFUSED.get(name, ((), "", ""))
    try:
        check(_load(name, level), CASES[name])
    except DifferentiationError as refusal:
        assert level in levels and re.search(pattern, str(refusal)), f"unexpected refusal: {refusal}"


def test_a_shadow_stack_array_is_aligned_as_its_primal():
    """Regression: pb_cholesky_loss at -O2 copies its input into ``alloca [6 x [6 x double]], align 16``
    and accesses it with ``align 16`` loads and stores; the shadow alloca had no alignment (8 for
    double), the copied accesses still claimed 16, and the JIT's O2 code (aligned SSE moves) crashed
    with SIGSEGV in forward mode. Shadow allocas now carry the primal's alignment."""
    from adoffload.enzyme.activity import DUP
    from adoffload.enzyme.forward import forward
    from adoffload.enzyme.reverse import reverse
    module = ado.from_llvm(module_subset(_text(2), ["pb_cholesky_loss"]))
    ir = module.ir
    primal = ir.functions["pb_cholesky_loss"]
    (array,) = [i for i in primal.instructions() if i.opcode == "alloca"]
    assert array.align == 16
    for derived in (forward(ir, primal, [DUP]), reverse(ir, primal, [DUP]).function):
        copies = [i for i in derived.instructions() if i.opcode == "alloca" and i.element_type == array.element_type]
        assert len(copies) == 2 and all(i.align == 16 for i in copies), [(i.name, i.align) for i in copies]
    fn = module["pb_cholesky_loss"]
    check(fn, CASES["pb_cholesky_loss"])      # crashed the process before the fix


def test_the_oracles_catch_a_wrong_gradient(monkeypatch):
    """check() fails on these kernels when the reverse adjoints are off by 1%: not vacuous here either."""
    from adoffload import enzyme as ez

    from . import rust_hunt_cases
    right = ez.autodiff

    def skewed(mode, f, *args):
        result = right(mode, f, *args)
        if mode is ez.Reverse:
            for a in args:
                if isinstance(a, ez.Duplicated):
                    a.shadow[...] *= 1.01
        return result
    monkeypatch.setattr(rust_hunt_cases.ez, "autodiff", skewed)
    with pytest.raises(rust_hunt_cases.Mismatch, match="<J v, w>"):
        check(_load("pb_seidel_2d", 3), CASES["pb_seidel_2d"])
    assert np.isfinite(CASES["pb_seidel_2d"].params[2][1]).all()
