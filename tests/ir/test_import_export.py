"""LLVM import/export: every fixture and snippet imports, verifies and round-trips."""
from pathlib import Path

import llvmlite.binding as llvm
import pytest

import adoffload.ir as ir
from adoffload.errors import IRError
from adoffload.foreign import ForeignModule

from . import snippets

FIXTURES = Path(__file__).parent.parent / "fixtures" / "foreign"
FOREIGN_FILES = sorted(FIXTURES.glob("*.ll"))


def round_trip(text):
    first = ir.import_module(text)
    exported = ir.export_module(first)
    second = ir.import_module(exported)   # parses and verifies in LLVM
    ir.verify(second)
    return first, exported, second


@pytest.mark.parametrize("path", FOREIGN_FILES, ids=lambda p: p.name)
@pytest.mark.parametrize("canonical", [False, True])
def test_fixture_imports_verifies_and_round_trips(path, canonical):
    text = path.read_text()
    if canonical:
        text = ir.canonicalize(text)
    first, exported, second = round_trip(text)
    ir.verify(first)
    defined = {n for n, f in first.functions.items() if not f.is_declaration}
    assert {"lj", "axpy", "poly_exp", "sum_until"} <= defined
    assert ir.export_module(second) == exported  # export is a fixed point after one round
    for name in defined:
        a, b = first[name], second[name]
        assert [i.opcode for i in a.instructions()] == [i.opcode for i in b.instructions()]
        assert [x.attributes for x in a.args] == [x.attributes for x in b.args]


@pytest.mark.parametrize("name", sorted(snippets.ALL_SUPPORTED))
def test_snippet_round_trip_is_stable(name):
    first, exported, second = round_trip(snippets.ALL_SUPPORTED[name])
    ir.verify(first)
    assert ir.export_module(second) == exported


def test_control_flow_fields():
    fn = ir.import_module(snippets.CONTROL_FLOW)["count"]
    loop = next(b for b in fn.blocks if b.name == "loop")
    switch = loop.terminator
    assert switch.opcode == "switch"
    assert [c.value for c in switch.operands[1:]] == [1, -2]
    assert [b.name for b in switch.blocks] == ["other", "one", "latch"]
    acc_next = next(i for i in fn.instructions() if i.name == "acc.next")
    assert [b.name for b in acc_next.blocks] == ["one", "other", "loop"]
    done = next(i for i in fn.instructions() if i.name == "done")
    assert done.predicate == "sge"
    branch = fn.blocks[-2].terminator
    assert branch.operands == [done] and [b.name for b in branch.blocks] == ["exit", "loop"]
    assert next(i for i in fn.instructions() if i.name == "next").flags == {"nuw", "nsw"}


def test_memory_fields():
    module = ir.import_module(snippets.MEMORY)
    table = module.globals["table"]
    assert table.constant and table.linkage == "internal"
    assert [c.value for c in table.initializer.value] == [1.5, -2.0, float("inf")]
    assert [c.value for c in module.globals["hello"].initializer.value] == [104, 105, 0]
    by_name = {i.name: i for i in module["memory"].instructions() if i.name}
    assert by_name["p"].element_type == ir.StructType((ir.f64, ir.i64))
    assert by_name["slot"].element_type == ir.ArrayType(ir.f64, 3) and "inbounds" in by_name["slot"].flags
    assert "volatile" in by_name["v"].flags and by_name["v"].align == 8
    assert by_name["s"].flags == {"fast"}
    rmw = by_name["old"]
    assert (rmw.op, rmw.ordering, rmw.align) == ("fadd", "monotonic", 8) and "syncscope=agent" in rmw.flags
    xchg = by_name["x"]
    assert xchg.ordering == "seq_cst" and {"weak", "failure=acquire"} <= xchg.flags
    assert by_name["ok"].indices == (1,) and by_name["first"].indices == (0,)
    assert by_name["h2"].operands[1].value == 1.0 and by_name["h2"].type == ir.f16
    fence = next(i for i in module["memory"].instructions() if i.opcode == "fence")
    assert fence.ordering == "release" and "syncscope=agent" in fence.flags


def test_kernel_conventions_attributes_and_locations_survive():
    first, exported, second = round_trip(snippets.KERNELS)
    for module in (first, second):
        k = module["k"]
        assert k.calling_convention == "ptx_kernel"
        assert k.args[0].attributes == {"noalias", "readonly"} and k.args[1].attributes == {"noalias"}
        helper = module["helper"]
        assert helper.linkage == "internal" and "alwaysinline" in helper.attributes
        located = {i.name or i.opcode: i.location for i in k.instructions() if i.location}
        assert located == {"in": ir.SourceLocation("kernels.py", 10, 4), "vx": ir.SourceLocation("kernels.py", 10, 4),
                           "sq": ir.SourceLocation("kernels.py", 11, 12),
                           "store": ir.SourceLocation("kernels.py", 11, 12)}
        assert module.triple == "nvptx64-nvidia-cuda"
    assert "ptx_kernel" in exported and '!{ !"kernels.py", i32 3, i32 8 }' in exported


def test_amdgpu_kernel_and_address_space():
    first, exported, second = round_trip(snippets.AMDGPU)
    fn = second["scale"]
    assert fn.calling_convention == "amdgpu_kernel"
    assert fn.args[0].type == ir.PointerType(1)


def test_unnamed_values_get_fresh_unique_names():
    fn = ir.import_module(snippets.UNNAMED)["anon"]
    names = [a.name for a in fn.args] + [i.name for i in fn.instructions() if i.name] + [b.name for b in fn.blocks]
    assert all(names) and len(names) == len(set(names))


def test_bitcode_input():
    bitcode = llvm.parse_assembly(snippets.CONTROL_FLOW).as_bitcode()
    fn = ir.import_module(bitcode)["count"]
    assert [b.name for b in fn.blocks] == ["entry", "loop", "one", "other", "latch", "exit"]


def test_invoke_landingpad_resume_round_trip():
    first, exported, second = round_trip(snippets.INVOKE)
    fn = second["thrower"]
    invoke = fn.entry.terminator
    assert invoke.opcode == "invoke" and invoke.callee is second["may_throw"]
    assert [b.name for b in invoke.blocks] == ["ok", "bad"] and fn.entry.successors == invoke.blocks
    landingpad, resume = fn.blocks[2].instructions
    assert landingpad.opcode == "landingpad" and "cleanup" in landingpad.flags and resume.opcode == "resume"
    assert fn.personality is second["__gxx_personality_v0"]
    assert "personality ptr @\"__gxx_personality_v0\"" in exported or "personality ptr @__gxx" in exported


@pytest.mark.parametrize("text, words", [
    (snippets.INLINE_ASM, ["inline asm", "@asm_user", "mov $0"]),
    ("define void @broken( {", ["could not parse"]),
])
def test_unsupported_or_invalid_ir_raises_ir_error(text, words):
    with pytest.raises(IRError) as info:
        ir.import_module(text)
    for word in words:
        assert word in str(info.value)


def _count_reference(n, k):
    i = acc = 0
    while True:
        acc = acc + 1 if k == 1 else (acc if k == -2 else acc * 3)
        i += 1
        if i >= n:
            return acc


def test_round_tripped_code_behaves_the_same():
    _, _, second = round_trip(snippets.CONTROL_FLOW)
    count = ForeignModule(second)["count"]
    for n in (1, 3, 7):
        for k in (1, -2, 5):
            assert count(n, k) == _count_reference(n, k), (n, k)
    assert count(5, 1) == 5  # the reference is not trivially zero


def test_vector_fields():
    fn = ir.import_module(snippets.VECTORS)["vectors"]
    by_name = {i.name: i for i in fn.instructions() if i.name}
    assert by_name["s"].type == ir.VectorType(ir.f32, 4)
    assert by_name["sh"].indices == (3, 2, -1, 0)
    assert by_name["sh"].operands[1].kind == "poison"
    assert by_name["c"].type == ir.VectorType(ir.i1, 4)
    assert [c.value for c in by_name["c"].operands[1].value] == [1.0, 2.0, 3.0, 4.0]
    assert by_name["r"].operands[2].kind == "zero" and by_name["q"].operands[1].kind == "undef"
