"""Every kernel of the device table compiles for the GPUs, checked here without a GPU.

NVIDIA: the primal, JVP and VJP kernels (and a dynamic tape's counting kernel) go to PTX
and through ``ptxas``: the variant a CUDA launch with the table's inputs builds (bounds
checks the grid proves compiled away, ``noalias`` buffers) for sm_80 and sm_90, the fully
checked one for sm_90. AMD: a
representative subset goes to a linked HSACO for gfx90a, gfx942 and gfx1100 and exports
exactly its kernel's descriptor.
"""
from __future__ import annotations

import pytest

from adoffload.codegen.gpu import amdgpu, nvptx, tools
from adoffload.codegen import kernel_symbol
from adoffload.errors import ToolNotFoundError
from adoffload.kernels.launch import bind_arguments, normalize_grid, proven_facts

from .table import BY_NAME, arguments, run_id, runs, variant


def _have(finder) -> bool:
    try:
        finder()
        return True
    except ToolNotFoundError:
        return False


needs_ptx_tools = pytest.mark.skipif(not (_have(tools.find_ptxas) and _have(tools.find_libdevice)),
                                     reason="ptxas/libdevice not installed (pip install 'adoffload[cuda]')")
needs_lld = pytest.mark.skipif(not _have(tools.find_lld), reason="ld.lld not installed (pip install 'adoffload[amd]')")

NV_ARCHS = ("sm_80", "sm_90")
AMD_ARCHS = ("gfx90a", "gfx942", "gfx1100")


def _kernels_of(which):
    """(label, kernel, proven facts of the table launch) for a run, its tape counter included."""
    name, mode, width = which
    case = BY_NAME[name]
    kernel = variant(case, mode, width)
    values = bind_arguments(kernel.signature, (), arguments(case, mode, width=width))
    grid = normalize_grid(kernel.signature, case.grid)
    out = [("kernel", kernel, proven_facts(kernel, values, grid))]
    if kernel.tape is not None:
        counter = kernel.count_kernel
        out.append(("tape counter", counter, proven_facts(counter, values, grid)))
    return out


def _check_ptx(label, kernel, proven, arch, noalias):
    compiled = kernel.compiled("nvptx", arch=arch, proven=proven, noalias=noalias)
    symbol = kernel_symbol(kernel.body_name, "nvptx")
    assert compiled.entry_name == symbol
    ptx = compiled.artifact
    assert f".target {arch}" in ptx, f"{label}: wrong target"
    assert f".visible .entry {symbol}(" in ptx, f"{label}: entry {symbol} missing from the PTX"
    assert ptx.count(".visible .entry") == 1, f"{label}: more than one kernel entry"
    assert "__nv_" not in ptx, f"{label}: a libdevice call was left unresolved"
    report = nvptx.ptxas_check(ptx, arch)
    assert f"Compiling entry function '{symbol}' for '{arch}'" in report, report


@needs_ptx_tools
@pytest.mark.parametrize("which", runs(), ids=run_id)
def test_ptx_for_every_kernel_passes_ptxas(which):
    for label, kernel, proven in _kernels_of(which):
        # what a CUDA launch builds (proven facts, noalias buffers) for both architectures;
        # the fully checked one without noalias for sm_90 as well
        builds = [(proven, arch, True) for arch in NV_ARCHS] + [(frozenset(), "sm_90", False)]
        for facts, arch, noalias in builds:
            _check_ptx(f"{run_id(which)} {label} ({len(facts)} proven facts, {arch}, noalias={noalias})",
                       kernel, facts, arch, noalias)


# The AMD subset: every AD kernel's adjoint (dynamic tape, atomics, 2-D/3-D grids, f32/f64
# math through our device math or ocml), some forward kernels and integer atomics.
AMD_RUNS = [
    ("ad.saxpy_f32", "jvp", 2), ("ad.lj_all_pairs", "vjp", 1), ("ad.recurrence", "vjp", 1),
    ("ad.sum_of_squares", "vjp", 1),
    ("ad.grid2_scale", "vjp", 1), ("ad.grid3_square", "primal", 1), ("ad.math_f32", "vjp", 1),
    ("ad.math_f64", "jvp", 1), ("rajaperf.basic_reduce3_int", "primal", 1),
    ("rajaperf.lcals_planckian", "vjp", 1), ("frontend.nested_init_3d", "primal", 1),
]


@needs_lld
@pytest.mark.parametrize("which", AMD_RUNS, ids=run_id)
def test_hsaco_for_representative_kernels_exports_their_descriptor(which):
    for label, kernel, _ in _kernels_of(which):
        symbol = kernel_symbol(kernel.body_name, "amdgpu")
        for arch in AMD_ARCHS:
            image = kernel.compiled("amdgpu", arch=arch, noalias=True).artifact
            assert image[:4] == b"\x7fELF" and amdgpu.elf_machine(image) == amdgpu.EM_AMDGPU
            assert amdgpu.kernel_descriptors(image) == [symbol + ".kd"], f"{run_id(which)} {label} on {arch}"
            assert symbol in amdgpu.elf_symbols(image)


def test_amd_subset_names_real_runs():
    assert set(AMD_RUNS) <= set(runs())
