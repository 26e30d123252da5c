import re

import pytest

from adoffload.codegen import abi
from adoffload.codegen.gpu import nvptx, tools
from adoffload.errors import ToolNotFoundError

from . import bodies


def _have(finder):
    try:
        finder()
        return True
    except ToolNotFoundError:
        return False


needs_libdevice = pytest.mark.skipif(not _have(tools.find_libdevice), reason="libdevice not installed (pip install nvidia-nvvm)")
needs_ptxas = pytest.mark.skipif(not _have(tools.find_ptxas), reason="ptxas not installed (pip install nvidia-cuda-nvcc)")

CASES = {
    "axpy": (bodies.AXPY, "axpy", bodies.AXPY_TYPES, 1),
    "grid2": (bodies.GRID2, "grid2", bodies.GRID2_TYPES, 2),
    "grid3": (bodies.GRID3, "grid3.fwd", bodies.GRID3_TYPES, 3),
    "math_f32": (bodies.math_body("float"), "mathfn", bodies.MATH_TYPES, 1),
    "math_f64": (bodies.math_body("double"), "mathfn", bodies.MATH_TYPES, 1),
}


def kernel_ptx(case, arch, **opts):
    text, name, types, rank = CASES[case]
    return nvptx.compile_ptx(abi.add_gpu_entry(text, name, types, rank, "nvptx", **opts), arch), name


@needs_libdevice
@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_ptx_assembles(case, arch):
    ptx, name = kernel_ptx(case, arch)
    symbol = nvptx.ptx_symbol(abi.kernel_entry_name(name))
    assert f".visible .entry {symbol}(" in ptx
    assert f".target {arch}" in ptx
    assert f".version {nvptx.PTX_VERSION[arch] // 10}.{nvptx.PTX_VERSION[arch] % 10}" in ptx
    report = nvptx.ptxas_check(ptx, arch)
    assert f"Compiling entry function '{symbol}' for '{arch}'" in report


@needs_libdevice
@pytest.mark.parametrize("case", ["math_f32", "math_f64"])
def test_libdevice_is_stripped_and_math_is_inlined(case):
    ptx, _ = kernel_ptx(case, "sm_90")
    assert len(ptx) < 60_000, f"PTX is {len(ptx)} bytes: unused libdevice functions were kept"
    assert ".entry" in ptx and ptx.count(".visible") == 1
    assert "__nv_" not in ptx          # every libdevice call was inlined
    assert "__nvvm_reflect" not in ptx  # the reflect pass resolved the FTZ query


def test_without_math_no_libdevice_needed_and_ptx_is_tiny():
    ptx, _ = kernel_ptx("axpy", "sm_80")
    assert len(ptx) < 6_000
    assert "atom.global.exch.b64" in ptx or "atom.exch.b64" in ptx  # the status protocol survived


def test_32_bit_decomposition_path_for_multi_d_grids():
    ptx, _ = kernel_ptx("grid3", "sm_90")
    assert re.search(r"\b(div|rem)\.u32\b", ptx), "expected a 32-bit index path"
    assert re.search(r"\b(div|rem)\.u64\b", ptx), "expected the 64-bit fallback for huge grids"


def test_scalars_by_reference_and_noalias():
    text, name, types, rank = CASES["grid2"]
    module = abi.add_gpu_entry(text, name, types, rank, "nvptx", scalars_by_reference=True, noalias=True)
    header = next(l for l in module.splitlines() if "ptx_kernel" in l and l.startswith("define"))
    # double, i1, i32 become pointers; out stays a noalias pointer; shapes (plain i64 here) by ref too
    assert header.count("ptr") >= 4 and "noalias" in header
    ptx = nvptx.compile_ptx(module, "sm_90")
    assert "ld.global" in ptx or "ld.f64" in ptx or "ld.b64" in ptx


def test_unknown_arch_is_an_error():
    from adoffload.errors import CompilationError
    with pytest.raises(CompilationError, match="sm_42"):
        kernel_ptx("axpy", "sm_42")


def test_module_without_kernel_is_an_error():
    from adoffload.errors import CompilationError
    with pytest.raises(CompilationError, match="no ptx_kernel"):
        nvptx.compile_ptx(bodies.AXPY, "sm_90")


# what clang emits for CUDA's sqrt(x), fmaf(...), fabs, fmin, round and friends: libm names
LIBM_BODY = """
declare dso_local double @sqrt(double noundef)
declare dso_local float @fmaf(float noundef, float noundef, float noundef)
declare dso_local double @fabs(double noundef)
declare dso_local float @fminf(float noundef, float noundef)
declare dso_local double @round(double noundef)
declare double @llvm.sqrt.f64(double)
define void @libm(i64 %tid0, ptr %x, i64 %x.s, ptr %y, i64 %y.s, ptr %status) {
entry:
  %px = getelementptr double, ptr %x, i64 %tid0
  %v = load double, ptr %px
  %a = call double @sqrt(double %v)
  %b = call double @llvm.sqrt.f64(double %v)
  %c = call double @fabs(double %a)
  %d = call double @round(double %c)
  %f = fptrunc double %d to float
  %g = call float @fmaf(float %f, float %f, float 1.0)
  %h = call float @fminf(float %g, float 2.0)
  %i = fpext float %h to double
  %s = fadd double %i, %b
  %py = getelementptr double, ptr %y, i64 %tid0
  store double %s, ptr %py
  ret void
}
"""


@needs_ptxas
def test_libm_calls_of_cuda_sources_become_native_instructions():
    """CUDA's sqrt/fmaf/fabs/fminf/round reach us as libm calls, which no GPU library defines under
    those names: they are renamed to their LLVM intrinsics (before, the PTX kept `.extern .func
    sqrt` and the driver refused to load it)."""
    ptx = nvptx.compile_ptx(abi.add_gpu_entry(LIBM_BODY, "libm", ["ptr", "i64", "ptr", "i64"], 1, "nvptx"), "sm_90")
    assert ".extern .func" not in ptx
    assert "sqrt.rn.f64" in ptx and "fma.rn.f32" in ptx and "min.f32" in ptx
    nvptx.ptxas_check(ptx, "sm_90")
