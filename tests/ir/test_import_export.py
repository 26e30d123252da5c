"""LLVM import/export: every fixture and snippet imports, verifies and round-trips."""
from pathlib import Path

import llvmlite.binding as llvm
import numpy as np
import pytest

import adoffload.ir as ir
from adoffload.errors import IRError
from adoffload.sources.llvm import ForeignModule

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


def test_inline_asm_round_trips_and_runs():
    first, exported, second = round_trip(snippets.INLINE_ASM)
    call = second["asm_user"].entry.instructions[0]
    assert isinstance(call.callee, ir.InlineAsm) and call.callee.text.startswith("asm ")
    assert ir.export_module(second) == exported
    copy = ir.import_module('define i32 @copy(i32 %x) {\n  %y = call i32 asm "mov $1, $0", "=r,r"(i32 %x)\n'
                            '  call void asm sideeffect "", "~{memory}"()\n  ret i32 %y\n}')
    assert ForeignModule(copy)["copy"](7) == 7    # the host JIT parses inline asm (AT&T: src, dst)


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


FOREIGN_CONSTRUCTS = r'''
%struct.pair = type { double, double }
@0 = private unnamed_addr constant [4 x i8] c"x.c\00", align 1
@src = private unnamed_addr global { { ptr, i32, i32 } } { { ptr, i32, i32 } { ptr @0, i32 25, i32 38 } }
@ops = internal constant [2 x ptr] [ptr @twice, ptr @half], align 16
@table = internal constant [4 x double] [double 1.0, double 2.0, double 3.0, double 4.0], align 32
@tls = thread_local(initialexec) global i32 0, section ".data.ado", align 4
@wide = internal global x86_fp80 0xK4000C000000000000000

declare void @llvm.experimental.noalias.scope.decl(metadata)

define internal double @twice(double %x) { %y = fmul double %x, 2.0
  ret double %y }
define internal double @half(double %x) { %y = fmul double %x, 0.5
  ret double %y }

define <2 x double> @splat(<2 x double> %v) {
  %w = fadd <2 x double> %v, splat (double 1.0)
  ret <2 x double> %w
}

define double @pick(i64 %k, double %x) {
  call void @llvm.experimental.noalias.scope.decl(metadata !0)
  %slot = getelementptr inbounds [2 x ptr], ptr @ops, i64 0, i64 %k
  %f = load ptr, ptr %slot, align 8
  %y = call fastcc double %f(double %x)
  %t = load double, ptr getelementptr inbounds nuw (i8, ptr @table, i64 16), align 16
  %z = fadd double %y, %t
  ret double %z
}

define void @make(ptr sret(%struct.pair) %out, double %x) {
  store double %x, ptr %out, align 8
  ret void
}

!0 = !{!1}
!1 = distinct !{!1, !2, !"pick: scope"}
!2 = distinct !{!2, !"pick"}
'''


def test_foreign_constructs_round_trip():
    """Constants naming globals and functions, constant expressions, splats, an unnamed global,
    an indirect fastcc call, a metadata argument, x86_fp80, TLS/section/align, sret(%named)."""
    first, exported, second = round_trip(FOREIGN_CONSTRUCTS)
    assert ir.export_module(second) == exported
    ops = second.globals["ops"]
    assert [item.name for item in ops.initializer.value] == ["twice", "half"] and ops.align == 16
    src = second.globals["src"].initializer.value[0].value[0]
    assert isinstance(src, ir.GlobalVariable) and src.name.startswith("unnamed")   # @0
    tls = second.globals["tls"]
    assert (tls.thread_local, tls.section, tls.align) == ("thread_local(initialexec)", ".data.ado", 4)
    assert second.globals["wide"].initializer.value == "0xK4000C000000000000000"
    splat = second["splat"].entry.instructions[0].operands[1]
    assert splat.kind == "aggregate" and [c.value for c in splat.value] == [1.0, 1.0]
    call = next(i for i in second["pick"].instructions() if i.opcode == "call")
    assert "cc=fastcc" in call.flags and call.element_type == ir.FunctionType(ir.f64, (ir.f64,))
    load = [i for i in second["pick"].instructions() if i.opcode == "load"][1]
    gep = load.operands[0]
    assert isinstance(gep, ir.ConstantExpr) and gep.opcode == "getelementptr"
    assert gep.operands[0] is second.globals["table"]
    assert not any(getattr(i.callee, "name", "") == "llvm.experimental.noalias.scope.decl"
                   for i in second["pick"].instructions())
    first_pick = [i for i in first["pick"].instructions() if i.opcode == "call"][0]
    assert isinstance(first_pick.operands[0], ir.MetadataValue) and first_pick.operands[0].text == "!0"
    assert "sret({ double, double })" in second["make"].args[0].attributes


def test_foreign_constructs_run_on_the_host():
    mod = ForeignModule(ir.import_module(FOREIGN_CONSTRUCTS.replace("thread_local(initialexec) ", "")))
    assert mod["pick"](0, 1.5) == 3.0 + 3.0 and mod["pick"](1, 1.5) == 0.75 + 3.0


def test_thread_local_globals_are_refused_by_the_host_jit():
    """MCJIT aborts the process on TLS; the host program refuses it first, for a function that
    reaches the thread-local global (one that does not is compiled without it, and runs)."""
    from adoffload.errors import CompilationError
    source = FOREIGN_CONSTRUCTS + "\ndefine i32 @bump() {\n  %v = load i32, ptr @tls\n  ret i32 %v\n}\n"
    mod = ForeignModule(ir.import_module(source))
    with pytest.raises(CompilationError, match="thread-local"):
        mod["bump"]()
    assert mod["pick"](0, 1.5) == 3.0 + 3.0


def test_computed_goto_is_refused_naming_it():
    text = r'''
@targets = internal constant [1 x ptr] [ptr blockaddress(@jump, %a)]
define i32 @jump(i64 %k) {
entry:
  %p = getelementptr [1 x ptr], ptr @targets, i64 0, i64 %k
  %t = load ptr, ptr %p
  indirectbr ptr %t, [label %a]
a:
  ret i32 1
}'''
    with pytest.raises(IRError, match="blockaddress"):
        ir.import_module(text)


def test_operand_bundles_assume_hints_dropped_others_refused():
    hint = """define double @f(ptr %p) {
  call void @llvm.assume(i1 true) [ "align"(ptr %p, i64 8), "nonnull"(ptr %p) ]
  %v = load double, ptr %p
  ret double %v
}
declare void @llvm.assume(i1)
"""
    module = ir.import_module(hint)
    assume = next(i for i in module.functions["f"].instructions() if i.opcode == "call")
    assert len(assume.operands) == 1
    assert ForeignModule(module)["f"](np.array([2.5])) == 2.5
    other = hint.replace('"align"(ptr %p, i64 8), "nonnull"(ptr %p)', '"deopt"(i32 1)').replace(
        "@llvm.assume(i1 true)", "@g()").replace("declare void @llvm.assume(i1)", "declare void @g()")
    with pytest.raises(IRError, match="operand bundle.*deopt"):
        ir.import_module(other)


# ---- remembered imports (llvm_import._IMPORTED): each import its own Module, as if imported anew
# (copies by ir.clone.clone_module)

_TWO_BODIES = """
define void @body(i64 %tid0, ptr %x, ptr %status) {
entry:
  %p = getelementptr double, ptr %x, i64 %tid0
  %v = load double, ptr %p, align 8
  %w = fmul double %v, 2.0
  store double %w, ptr %p, align 8
  ret void
}

define i32 @other(i32 %a) {
  %b = add i32 %a, 1
  ret i32 %b
}
"""


def test_importing_a_text_again_gives_a_fresh_equal_module():
    from adoffload.ir import llvm_import
    llvm_import.forget_imports()
    first = ir.import_module(_TWO_BODIES)
    expected = ir.export_module(first)
    first.functions["body"].blocks[0].instructions.pop(2)        # callers may mutate what they get
    first.functions["other"].blocks = []
    second = ir.import_module(_TWO_BODIES)
    assert second is not first and ir.export_module(second) == expected
    assert second.functions["body"].blocks[0].instructions[0] is not first.functions["body"].blocks[0].instructions[0]
    ir.verify(second)
    only = ir.import_module(_TWO_BODIES, bodies=("body",))
    assert only.functions["other"].is_declaration and not only.functions["body"].is_declaration
    llvm_import.forget_imports()
    direct = ir.import_module(_TWO_BODIES, bodies=("body",))          # imported first with bodies=
    assert ir.export_module(direct) == ir.export_module(only)
    assert ir.export_module(ir.import_module(_TWO_BODIES)) == expected


def test_importing_some_bodies_of_a_module_whose_others_do_not_import():
    from adoffload.ir import llvm_import
    llvm_import.forget_imports()
    text = _TWO_BODIES + """
define void @jumps(ptr %to) {
  indirectbr ptr %to, []
}
"""
    with pytest.raises(IRError):
        ir.import_module(text)
    only = ir.import_module(text, bodies=("body",))
    assert not only.functions["body"].is_declaration and only.functions["jumps"].is_declaration


def test_a_module_laid_out_against_its_def_use_chains_is_remembered_and_copied():
    """Blocks laid out against their dominance (each uses a value of the next: a recursive copy would
    follow the chain 2000 deep): the remembered copy and each copy of it are the module."""
    from adoffload.ir import llvm_import
    n = 2000
    lines = ["define i64 @f(i64 %a) {", "entry:", f"  br label %b{n}"]
    for j in range(1, n + 1):
        lines += [f"b{j}:", f"  %v{j} = add i64 {'%a' if j == n else f'%v{j + 1}'}, 1",
                  "  ret i64 %v1" if j == 1 else f"  br label %b{j - 1}"]
    text = "\n".join(lines + ["}"])
    llvm_import.forget_imports()
    first, second = ir.import_module(text), ir.import_module(text)
    assert first is not second and ir.export_module(first) == ir.export_module(second)
    assert len(first.functions["f"].blocks) == n + 1 and len(llvm_import._IMPORTED) == 1
    ir.verify(second)


def test_a_copied_module_shares_only_immutable_objects():
    from adoffload.ir.clone import clone_module
    text = """
@table = internal global [4 x double] zeroinitializer
define double @f(i64 %i) {
entry:
  %p = getelementptr double, ptr getelementptr inbounds ([4 x double], ptr @table, i64 0, i64 1), i64 %i
  %v = load double, ptr %p, align 8
  %w = fadd double %v, 1.0
  ret double %w
}
"""
    module = ir.import_module(text)
    copy = clone_module(module)
    assert ir.export_module(copy) == ir.export_module(module)
    gep = copy.functions["f"].blocks[0].instructions[0]
    original = module.functions["f"].blocks[0].instructions[0]
    assert gep is not original and gep.operands[0] is not original.operands[0]
    assert gep.operands[0].operands[0] is copy.globals["table"]            # the constant names the copy's global
    assert copy.globals["table"] is not module.globals["table"]
    assert gep.parent is copy.functions["f"].blocks[0] and copy.functions["f"].parent is copy
    assert gep.type is original.type                                          # types are shared (immutable)
