"""The verifier accepts valid IR and catches planted errors, printing the instruction in context."""
import pytest

import adoffload.ir as ir
from adoffload.errors import VerificationError
from adoffload.ir.printer import format_instruction

from . import snippets


def count_function():
    return ir.import_module(snippets.CONTROL_FLOW)["count"]


def find(fn, name):
    return next(i for i in fn.instructions() if i.name == name)


def block(fn, name):
    return next(b for b in fn.blocks if b.name == name)


def assert_reported(fn, culprit, *words):
    with pytest.raises(VerificationError) as info:
        ir.verify(fn)
    message = str(info.value)
    for word in words:
        assert word in message, message
    marked = [line for line in message.splitlines() if line.startswith(">>> ")]
    assert marked == [">>> " + ("  " + format_instruction(culprit) if isinstance(culprit, ir.Instruction)
                                else f"{culprit.name}:")], message
    return message


@pytest.mark.parametrize("name", sorted(snippets.ALL_SUPPORTED))
def test_valid_ir_passes(name):
    ir.verify(ir.import_module(snippets.ALL_SUPPORTED[name]))


def test_use_before_def_in_one_block():
    fn = count_function()
    latch = block(fn, "latch")
    nxt, done = find(fn, "next"), find(fn, "done")
    k, j = latch.instructions.index(nxt), latch.instructions.index(done)
    latch.instructions[k], latch.instructions[j] = done, nxt
    message = assert_reported(fn, done, "uses %next before it is defined")
    assert "%next = add nsw nuw i32 %i, 1" in message  # a neighbouring line is shown too


def test_use_not_dominated_across_blocks():
    fn = count_function()
    a2 = find(fn, "a2")
    a2.operands[0] = find(fn, "a1")  # %a1 lives in %one, which does not dominate %other
    assert_reported(fn, a2, "uses %a1", "does not dominate")


def test_missing_terminator():
    fn = count_function()
    one = block(fn, "one")
    one.instructions.pop()
    assert_reported(fn, find(fn, "a1"), "block %one does not end in a terminator")


def test_empty_block():
    fn = count_function()
    block(fn, "one").instructions.clear()
    assert_reported(fn, block(fn, "one"), "block %one is empty")


def test_phi_with_wrong_predecessor():
    fn = count_function()
    acc_next = find(fn, "acc.next")
    acc_next.blocks[0] = block(fn, "entry")
    assert_reported(fn, acc_next, "incoming value from %entry", "not a predecessor of %latch")


def test_phi_missing_a_predecessor():
    fn = count_function()
    acc_next = find(fn, "acc.next")
    del acc_next.blocks[1], acc_next.operands[1]
    assert_reported(fn, acc_next, "no incoming value for predecessor %other")


def test_phi_after_non_phi():
    fn = count_function()
    loop = block(fn, "loop")
    switch = loop.instructions.pop()
    i = loop.instructions.pop(0)
    loop.instructions[1:1] = [ir.Instruction("freeze", ir.i32, [find(fn, "acc")], name="f", parent=loop)]
    loop.instructions.insert(2, i)
    loop.instructions.append(switch)
    assert_reported(fn, i, "phi after a non-phi instruction")


def test_type_mismatch_in_binary_op():
    fn = count_function()
    a1 = find(fn, "a1")
    a1.operands[1] = ir.const(ir.i64, 1)
    assert_reported(fn, a1, "'add' operand types i32 and i64")


def test_float_op_on_integers():
    fn = count_function()
    a2 = find(fn, "a2")
    a2.opcode = "fmul"
    assert_reported(fn, a2, "'fmul' needs floating-point operands, got i32")


def test_branch_condition_must_be_i1():
    fn = count_function()
    branch = block(fn, "latch").terminator
    branch.operands[0] = find(fn, "next")
    assert_reported(fn, branch, "'br' condition must be i1, got i32")


def test_return_type_mismatch():
    fn = count_function()
    ret = block(fn, "exit").terminator
    ret.operands[0] = ir.const(ir.f64, 0.0)
    assert_reported(fn, ret, "'ret' returns double, but @count returns i32")


def test_call_argument_type_mismatch():
    module = ir.import_module(snippets.KERNELS)
    call = next(i for i in module["k"].instructions() if i.opcode == "call" and i.callee.name == "helper")
    call.operands[0] = ir.const(ir.f64, 1.0)
    assert_reported(module["k"], call, "argument 0 of call to @helper is double, expected float")


def test_terminator_in_the_middle():
    fn = count_function()
    one = block(fn, "one")
    early = ir.Instruction("br", ir.void, [], blocks=[block(fn, "latch")], parent=one)
    one.instructions.insert(0, early)
    assert_reported(fn, early, "terminator in the middle of block %one")


def test_builder_output_verifies_and_prints_locations():
    module = ir.Module()
    fn = module.add_function(ir.Function("square", ir.FunctionType(ir.f64, (ir.f64,)),
                                         [ir.Argument(ir.f64, "x", 0)]))
    b = ir.Builder(fn.add_block("entry"))
    b.location = ir.SourceLocation("model.py", 7, 4)
    b.ret(b.fmul(fn.args[0], fn.args[0], "sq"))
    ir.verify(module)
    text = ir.format_function(fn)
    assert "%sq = fmul double %x, %x    ; model.py:7:4" in text
    exported = ir.export_module(module)
    assert ir.import_module(exported)["square"].blocks[0].instructions[0].location == b.location
