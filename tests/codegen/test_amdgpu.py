import pytest

from adoffload.codegen import abi, amdgpu, tools
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
