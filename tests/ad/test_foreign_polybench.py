"""PolyBench-style C (tests/fixtures/foreign/polybench/polybench.c: the suite's linear algebra,
solvers, data mining, image processing and stencil kernels, written in its style: loop nests with
triangular bounds, in-place updates, recurrences through memory, VLA parameters, stack and heap
scratch, sqrt/exp/pow/log, divisions), from clang 22 at -O0..-O3, through ``ado.from_llvm`` and
differentiated in forward and reverse mode. Each is checked by both oracles of rust_hunt_cases.check:
forward tangents against central differences, and forward against reverse through
<J v, w> = <v, J^T w>. A function may be refused with an error naming the construct, never answered
wrongly; the refusals expected (REFUSED) say why. Each kernel is built twice, as PolyBench does:
with DATA_TYPE double (pb_<name>) and float (pbf_<name>, f32 tolerances).

The whole matrix (86 functions x 4 levels, about six minutes) runs with ``ADOFFLOAD_POLYBENCH=all``;
by default each double function runs at one level, the levels taken in turn, and every sixth float
function likewise, so every double function, and every level of both builds, is covered in CI's
budget (51 tests, about 50 s of CPU)."""
from __future__ import annotations

import gzip
import os
import re
from functools import cache
from pathlib import Path

import numpy as np
import pytest

import adoffload as ado
from adoffload.errors import DifferentiationError
from adoffload.testing.irtext import module_subset

from .polybench_cases import CASES, FLOAT_CASES
from .rust_hunt_cases import check

FIXTURES = Path(__file__).parents[1] / "fixtures" / "foreign" / "polybench"
ALL = (0, 1, 2, 3)
FULL = os.environ.get("ADOFFLOAD_POLYBENCH") == "all"

# name: (levels, pattern of the refusal, why it is refused)
_STATIC = ((0,), r"stores the active value .* into memory that has no shadow \(the global @atax_tmp\)",
           ("the scratch is a file-scope static array: a global has no shadow, so an active value stored there "
            "would lose its derivative (from -O1 on clang keeps the scratch in registers and drops the global)"))
# pb_trisolv_rows (a table of row pointers into the input, double **, in stack memory the loop indexes)
# was refused until the engine kept shadow pointers in the function's own memory (pointer_memory.py)
REFUSED = {"pb_atax_static": _STATIC, "pbf_atax_static": _STATIC}
TABLE = {**CASES, **FLOAT_CASES}


@cache
def _text(prefix: str, level: int) -> str:
    with gzip.open(FIXTURES / f"{prefix}_O{level}.ll.gz", "rt") as f:
        return f.read()


def _load(name: str, level: int):
    return ado.from_llvm(module_subset(_text(name.split("_")[0], level), [name]))[name]


# run by the tests below them at the levels that matter, so left out of the default rotation
OWN_TESTS = {"pb_atax_static", "pb_cholesky_loss", "pb_gemm_memalign"}


def _matrix() -> list[tuple[str, int]]:
    if FULL:
        return [(name, level) for name in TABLE for level in ALL]
    picked = [(name, ALL[k % len(ALL)]) for k, name in enumerate(CASES) if name not in OWN_TESTS]
    return picked + [(name, ALL[(k // 6) % len(ALL)]) for k, name in enumerate(FLOAT_CASES) if k % 6 == 5]


MATRIX = _matrix()


@pytest.mark.parametrize("name,level", MATRIX, ids=[f"{n}-O{o}" for n, o in MATRIX])
def test_polybench_kernel(name, level):
    levels, pattern, _ = REFUSED.get(name, ((), "", ""))
    try:
        check(_load(name, level), TABLE[name])
    except DifferentiationError as refusal:
        assert level in levels and re.search(pattern, str(refusal)), f"unexpected refusal: {refusal}"
    else:
        assert level not in levels, f"{name} at -O{level} was expected to be refused"


def test_a_refusal_names_the_source_line():
    """Foreign IR built with debug info: the refusal names the C statement's file and line (from its
    !dbg DILocation), not only the IR block."""
    source = (FIXTURES / "polybench.c").read_text().splitlines()
    line = 1 + next(k for k, text in enumerate(source) if "atax_tmp[i] = atax_tmp[i] + A[i][j] * x[j];" in text)
    with pytest.raises(DifferentiationError, match=rf"'store' at polybench\.c:{line}: it stores the active value"):
        check(_load("pb_atax_static", 0), CASES["pb_atax_static"])


def test_a_shadow_stack_array_is_aligned_as_its_primal():
    """Regression: pb_cholesky_loss at -O2 copies its input into ``alloca [6 x [6 x double]], align 16``
    and accesses it with ``align 16`` loads and stores; the shadow alloca had no alignment (8 for
    double), the copied accesses still claimed 16, and the JIT's O2 code (aligned SSE moves) crashed
    with SIGSEGV in forward mode. Shadow allocas now carry the primal's alignment."""
    from adoffload.enzyme.activity import DUP
    from adoffload.enzyme.forward import forward
    from adoffload.enzyme.reverse import reverse
    module = ado.from_llvm(module_subset(_text("pb", 2), ["pb_cholesky_loss"]))
    ir = module.ir
    primal = ir.functions["pb_cholesky_loss"]
    (array,) = [i for i in primal.instructions() if i.opcode == "alloca"]
    assert array.align == 16
    for derived in (forward(ir, primal, [DUP]), reverse(ir, primal, [DUP]).function):
        copies = [i for i in derived.instructions() if i.opcode == "alloca" and i.element_type == array.element_type]
        assert len(copies) == 2 and all(i.align == 16 for i in copies), [(i.name, i.align) for i in copies]
    fn = module["pb_cholesky_loss"]
    check(fn, CASES["pb_cholesky_loss"])      # crashed the process before the fix


def test_posix_memalign_scratch_is_a_heap_block_the_engine_follows():
    """pb_gemm_memalign takes its scratch from posix_memalign (PolyBench's allocator), which returns
    the block through memory; the engine refused the stores into it (no shadow) until from_llvm
    rewrote the call into aligned_alloc (ir/posix_memalign.py). The rewritten primal still computes
    C := beta*C + alpha*A*B, and its derivatives pass both oracles at every level."""
    case = CASES["pb_gemm_memalign"]
    n, alpha, beta, c0, a, b = (value for _, value in case.params)
    for level in ALL:
        module = ado.from_llvm(module_subset(_text("pb", level), ["pb_gemm_memalign"]))
        calls = {i.callee.name for i in module.ir.functions["pb_gemm_memalign"].instructions() if i.opcode == "call"}
        assert "posix_memalign" not in calls and "aligned_alloc" in calls, calls
        c = c0.copy()
        module["pb_gemm_memalign"](n, alpha, beta, c, a, b)
        np.testing.assert_allclose(c, (beta * c0.reshape(n, n) + alpha * a.reshape(n, n) @ b.reshape(n, n)).ravel(),
                                   rtol=1e-12, atol=1e-12)
    check(module["pb_gemm_memalign"], case)


def test_the_oracles_catch_a_wrong_gradient(monkeypatch):
    """check() fails on these kernels when the reverse adjoints are off by 1%: not vacuous here either."""
    from . import rust_hunt_cases
    rust_hunt_cases.skew_reverse_adjoints(monkeypatch)
    with pytest.raises(rust_hunt_cases.Mismatch, match="<J v, w>"):
        check(_load("pb_seidel_2d", 3), CASES["pb_seidel_2d"])
