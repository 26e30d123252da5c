import pytest

from adoffload.codegen import abi
from adoffload.codegen.gpu import amdgpu, tools
from adoffload.errors import CompilationError, ToolNotFoundError

from . import bodies


def _have_lld():
    try:
        tools.find_lld()
        return True
    except ToolNotFoundError:
        return False


needs_lld = pytest.mark.skipif(not _have_lld(), reason="ld.lld not installed (pip install ziglang)")

CASES = {
    "axpy": (bodies.AXPY, "axpy", bodies.AXPY_TYPES, 1),
    "grid2": (bodies.GRID2, "grid2", bodies.GRID2_TYPES, 2),
    "grid3": (bodies.GRID3, "grid3.fwd", bodies.GRID3_TYPES, 3),
    "math_f32": (bodies.math_body("float"), "mathfn", bodies.MATH_TYPES, 1),
    "math_f64": (bodies.math_body("double"), "mathfn", bodies.MATH_TYPES, 1),
}


def gpu_module(case, **opts):
    text, name, types, rank = CASES[case]
    return abi.add_gpu_entry(text, name, types, rank, "amdgpu", **opts), name


@needs_lld
@pytest.mark.parametrize("arch", ["gfx90a", "gfx942", "gfx1100"])
@pytest.mark.parametrize("case", ["axpy", "grid3", "math_f32", "math_f64"])
def test_hsaco_links_and_exports_kernel_descriptor(case, arch):
    module, name = gpu_module(case)
    hsaco = amdgpu.compile_hsaco(module, arch)
    assert hsaco[:4] == b"\x7fELF" and amdgpu.elf_machine(hsaco) == amdgpu.EM_AMDGPU
    assert amdgpu.kernel_descriptors(hsaco) == [abi.kernel_entry_name(name) + ".kd"]
    assert len(hsaco) < 64_000


@pytest.mark.parametrize("arch", ["gfx90a", "gfx942", "gfx1100"])
def test_gcn_assembly_uses_dispatch_packet_and_is_math_free(arch):
    module, name = gpu_module("math_f64")
    asm = amdgpu.compile_gcn_assembly(module, arch)
    assert f'.amdgcn_target "amdgcn-amd-amdhsa--{arch}' in asm
    assert f".globl\t{abi.kernel_entry_name(name)}" in asm
    assert "__ado_" not in asm and "s_swappc" not in asm     # device math fully inlined, no calls
    assert ".amdhsa_user_sgpr_dispatch_ptr 1" in asm


def test_unsupported_math_without_rocm_is_a_clear_error():
    text = """
declare double @cosh(double)
define void @k(i64 %tid0, ptr %x, i64 %x.shape0, ptr %status) {
  %v = call double @cosh(double 1.0)
  store double %v, ptr %x
  ret void
}"""
    module = abi.add_gpu_entry(text, "k", ["ptr", "i64"], 1, "amdgpu")
    if tools.find_ocml() is None:
        with pytest.raises(CompilationError, match="cosh"):
            amdgpu.compile_gcn_assembly(module, "gfx942")


def test_elf_reader_rejects_non_elf():
    with pytest.raises(CompilationError, match="ELF"):
        amdgpu.kernel_descriptors(b"not an elf at all" * 4)


def test_unknown_arch():
    module, _ = gpu_module("axpy")
    with pytest.raises(CompilationError, match="gfx000"):
        amdgpu.compile_gcn_assembly(module, "gfx000")


# --- allocas in AMDGPU's private address space ---------------------------------------------------

def test_generic_allocas_move_to_the_private_address_space():
    """private_allocas: addrspace(0) allocas (our tapes, host-triple IR) become addrspace(5) ones
    cast to generic pointers; their lifetime markers go; addrspace(5) allocas stay as they are."""
    text = """define void @f(i64 %n) {
entry:
  %tape.local = alloca [6 x i64], align 8
  %"odd name" = alloca double, i64 %n, align 8, !dbg !7
  %already = alloca i32, align 4, addrspace(5)
  call void @llvm.lifetime.start.p0(i64 48, ptr nonnull %tape.local)
  store i64 1, ptr %tape.local
  call void @llvm.lifetime.end.p0(i64 48, ptr %tape.local)
  ret void
}
"""
    out = amdgpu.private_allocas(text)
    assert "%tape.local.private = alloca [6 x i64], align 8, addrspace(5)\n" in out
    assert "%tape.local = addrspacecast ptr addrspace(5) %tape.local.private to ptr" in out
    assert '%"odd name.private" = alloca double, i64 %n, align 8, addrspace(5), !dbg !7' in out
    assert '%"odd name" = addrspacecast ptr addrspace(5) %"odd name.private" to ptr' in out
    assert "%already = alloca i32, align 4, addrspace(5)\n" in out and "%already.private" not in out
    assert "llvm.lifetime" not in out and "store i64 1, ptr %tape.local" in out


@needs_lld
@pytest.mark.parametrize("arch", ["gfx942", "gfx1100"])
def test_adjoints_with_a_local_tape_compile_for_amd(arch):       # block kernels: gfx9xx only (64 lanes)
    """A reverse sweep whose tape fits in registers/scratch (a static ``tape.local`` array) and a
    block kernel's adjoint used to fail the AMDGPU verifier ("alloca on amdgpu must be in
    addrspace(5)")."""
    import adoffload as ado
    from tests.determinism.block_kernels import tile_gather

    @ado.kernel
    def fixed_loop(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
        i = ado.tid()
        acc = x[i]
        for j in range(4):
            acc = ado.sin(acc) * x[i]
        y[i] = acc
    kernels = [ado.vjp(fixed_loop, ["x"])]
    if arch == "gfx942":
        kernels += [ado.vjp(tile_gather, ["x"]), ado.vjp(tile_gather, ["x"], deterministic=True)]
    for kernel in kernels:
        hsaco = kernel.compiled("amdgpu", arch=arch).hsaco
        assert hsaco[:4] == b"\x7fELF" and len(amdgpu.kernel_descriptors(hsaco)) == 1
