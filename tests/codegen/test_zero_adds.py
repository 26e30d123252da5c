"""Atomic adds of a missing contribution skip the atomic when they add -0.0 (codegen/gpu/zero_adds.py):
which adds are guarded, that the guarded code leaves memory bit for bit as the unguarded one does (run
on this CPU), and the gather energy's adjoint PTX, whose d_pos adds past the cutoff add -0.0."""
from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest

import adoffload as ado
from adoffload import ir
from adoffload.codegen.gpu.zero_adds import may_be_structural_zero, skip_zero_adds
from adoffload.codegen.host.program import HostProgram
from adoffload.errors import ToolNotFoundError

BODY = """
define void @k(i64 %tid0, ptr %a, double %x, i1 %c, ptr %status) {{
entry:
  {value}
  {extra}
  %old = atomicrmw fadd ptr %a, {type} %v monotonic, align 8
  {use}
  ret void
}}
"""
MISSING = "%v = select i1 %c, double -0.0, double %x"


def _body(value=MISSING, type="double", extra="", use=""):
    return BODY.format(value=value, type=type, extra=extra, use=use)


@pytest.mark.parametrize("value", [
    MISSING,
    "%y = select i1 %c, double 0.0, double %x\n  %v = fmul double %y, %x",         # through arithmetic
    "%z = fadd double %x, 1.0\n  br label %next\nnext:\n  %v = phi double [ %z, %entry ]",   # no zero: left
])
def test_only_adds_computed_from_a_zero_operand_are_guarded(value):
    text, count = skip_zero_adds(_body(value), "k")
    expected = int("0.0" in value)
    assert count == expected
    assert ("icmp ne i64" in text) == bool(expected)


def test_adds_whose_result_is_used_or_that_are_not_monotonic_are_left():
    assert skip_zero_adds(_body(use="store double %old, ptr %a, align 8"), "k")[1] == 0
    assert skip_zero_adds(_body().replace("monotonic", "seq_cst"), "k")[1] == 0
    assert skip_zero_adds(_body(), "other")[1] == 0


def test_the_phi_of_a_skipped_branch_is_a_structural_zero():
    module = ir.import_module("""
define double @f(i1 %c, double %x) {
entry:
  br i1 %c, label %then, label %join
then:
  %m = fmul double %x, 3.0
  br label %join
join:
  %p = phi double [ %m, %then ], [ -0.0, %entry ]
  %t = fadd double %p, %p
  ret double %t
}""")
    f = module.functions["f"]
    t = f.blocks[-1].instructions[1]
    assert may_be_structural_zero(t) and not may_be_structural_zero(f.blocks[1].instructions[0])


NEG_ZERO, POS_ZERO = -0.0, 0.0
MEMORY = [POS_ZERO, NEG_ZERO, 1.5, -2.25, 5e-324, -5e-324, np.inf, -np.inf, np.nan]


@pytest.mark.parametrize("type_name, dtype", [("double", np.float64), ("float", np.float32)])
def test_the_guarded_add_leaves_memory_bit_for_bit_as_the_atomic_does(type_name, dtype):
    if type_name == "double":
        text = _body()
    else:
        text = _body("%xf = fptrunc double %x to float\n  %v = select i1 %c, float -0.0, float %xf", "float")
    plain = text.replace("@k(", "@k0(")
    guarded, count = skip_zero_adds(text.replace("@k(", "@k1("), "k1")
    assert count == 1
    programs = [(n, HostProgram(t, opt_level=1, codegen_level=0)) for n, t in (("k0", plain), ("k1", guarded))]
    fns = [p.function(n, None, ctypes.c_int64, ctypes.c_void_p, ctypes.c_double, ctypes.c_bool, ctypes.c_void_p)
           for n, p in programs]        # (the programs stay referenced: their code lives as long as they do)
    status = np.zeros(4, np.int64)
    for start in MEMORY:
        for x in (NEG_ZERO, POS_ZERO, 1.0, -3.0, 5e-324):
            for c in (True, False):
                cells = [np.array([start], dtype) for _ in fns]
                for fn, cell in zip(fns, cells):
                    fn(0, cell.ctypes.data, x, c, status.ctypes.data)
                same = cells[0].tobytes() == cells[1].tobytes() or bool(np.isnan(cells[0][0]) and np.isnan(cells[1][0]))
                assert same, (start, x, c, cells)


def test_the_gather_adjoints_scattered_adds_are_guarded():
    from tests.ad.test_reverse_host_speed import pair_energy
    try:
        from adoffload.codegen.gpu.tools import find_libdevice
        find_libdevice()
    except ToolNotFoundError as exc:
        pytest.skip(str(exc))
    reverse = ado.vjp(pair_energy, ["pos"], primal_outputs=False)
    ptx = reverse.compiled("nvptx", arch="sm_90", proven=reverse.candidate_facts, scalars_by_reference=True,
                           cache=False).ptx
    atomics = re.findall(r"atom\.global\.add\.f64", ptx)
    guards = re.findall(r"setp\.(eq|ne)\.b64\s+%p\d+, %rd\d+, -9223372036854775808", ptx)
    assert len(atomics) == 6 and len(guards) == 6
