"""Canonicalization: allocas become SSA, alwaysinline helpers disappear, loops get LLVM's canonical shape."""
import llvmlite.binding as llvm
import pytest

import adoffload.ir as ir
from adoffload.errors import IRError
from adoffload.sources.llvm import ForeignModule
from adoffload.ir.verify import _dominators

from . import snippets


def opcodes(fn):
    return [i.opcode for i in fn.instructions()]


def test_allocas_become_ssa_and_results_are_kept():
    raw = ir.import_module(snippets.WITH_ALLOCAS)["with_allocas"]
    assert opcodes(raw).count("alloca") == 2
    module = ir.import_module(ir.canonicalize(snippets.WITH_ALLOCAS))
    fn = module["with_allocas"]
    assert not {"alloca", "load", "store"} & set(opcodes(fn))
    assert "phi" in opcodes(fn)
    run = ForeignModule(module)["with_allocas"]
    assert [run(1.5, n) for n in (0, 1, 4)] == [0.0, 1.5, 6.0]


def test_alwaysinline_helper_is_inlined_and_dropped():
    module = ir.import_module(ir.canonicalize(snippets.KERNELS))
    assert "helper" not in module.functions
    k = module["k"]
    assert not any(i.opcode == "call" and i.callee.name == "helper" for i in k.instructions())
    inlined = next(i for i in k.instructions() if i.opcode == "fmul")
    assert inlined.location == ir.SourceLocation("kernels.py", 3, 8)  # the helper's own line survives


def test_inline_false_keeps_helpers():
    module = ir.import_module(ir.canonicalize(snippets.KERNELS, inline=False))
    assert "helper" in module.functions


def test_bitcode_input_gives_text():
    bitcode = llvm.parse_assembly(snippets.WITH_ALLOCAS).as_bitcode()
    text = ir.canonicalize(bitcode)
    assert "define double @with_allocas" in text and "= alloca" not in text


def loops(fn):
    """(header, latches) for each natural loop: back edges are edges to a dominator."""
    dom = _dominators(fn)
    found = {}
    for block in fn.blocks:
        for succ in block.successors:
            if succ in dom.get(block, ()):
                found.setdefault(succ, []).append(block)
    return found


def test_loops_have_preheader_single_latch_and_lcssa_exits():
    module = ir.import_module(ir.canonicalize(snippets.WITH_ALLOCAS))
    fn = module["with_allocas"]
    preds = fn.predecessors()
    found = loops(fn)
    assert len(found) == 1
    (header, latches), = found.items()
    assert len(latches) == 1
    outside = [p for p in preds[header] if p not in latches]
    assert len(outside) == 1 and outside[0].successors == [header]  # a dedicated preheader
    # LCSSA: values defined in the loop are used outside it only through exit-block phis.
    body = _loop_blocks(header, latches[0], preds)
    for block in fn.blocks:
        if block in body:
            continue
        for inst in block.instructions:
            for operand in inst.operands:
                if isinstance(operand, ir.Instruction) and operand.parent in body:
                    assert inst.opcode == "phi", ir.format_instruction(inst)


def _loop_blocks(header, latch, preds):
    body, todo = {header, latch}, [latch]
    while todo:
        for p in preds[todo.pop()]:
            if p not in body:
                body.add(p)
                todo.append(p)
    return body


def test_invalid_input_raises_ir_error():
    with pytest.raises(IRError, match="could not parse"):
        ir.canonicalize("define i32 @f() { ret i64 0 }")
