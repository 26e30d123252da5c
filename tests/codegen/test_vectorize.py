"""k elements per thread in the GPU entry (abi.add_gpu_entry(elements_per_thread=k)) and the
launch policy (codegen/gpu/vectorize.py).

PTX and GCN are checked for 128-bit accesses; the entry's logic (fast path, misaligned
pointers, the last partial group, deferred atomics, bounds errors) is run on this CPU by
building the same entry for an emulated target whose linear thread id is a global variable
and calling it once per GPU thread."""
from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest
from llvmlite import ir

from adoffload.codegen import abi, compile_for_target
from adoffload.codegen.gpu import amdgpu, nvptx, tools, vectorize
from adoffload.codegen.host.program import HostProgram
from adoffload.errors import CompilationError, ToolNotFoundError

from . import bodies


def _have(finder):
    try:
        finder()
        return True
    except ToolNotFoundError:
        return False


needs_ptxas = pytest.mark.skipif(not _have(tools.find_ptxas), reason="ptxas not installed (pip install nvidia-cuda-nvcc)")
needs_lld = pytest.mark.skipif(not _have(tools.find_lld), reason="ld.lld not installed (pip install ziglang)")

STREAM_TYPES = ["ptr", "i64"] * 3


def stream_add(t: str) -> str:
    """c[i] = a[i] + b[i] over element type ``t`` (no bounds checks: the launcher proved them)."""
    add = "fadd" if t in ("float", "double") else "add"
    return f"""
define void @sadd(i64 %tid0, ptr %a, i64 %a.s, ptr %b, i64 %b.s, ptr %c, i64 %c.s, ptr %status) {{
entry:
  %pa = getelementptr {t}, ptr %a, i64 %tid0
  %va = load {t}, ptr %pa
  %pb = getelementptr {t}, ptr %b, i64 %tid0
  %vb = load {t}, ptr %pb
  %r = {add} {t} %va, %vb
  %pc = getelementptr {t}, ptr %c, i64 %tid0
  store {t} %r, ptr %pc
  ret void
}}
"""


# y[i] = x[i] > 0 ? sqrt-free data-dependent branch : -x[i]; total[0] += x[i] (a deferred atomic)
BRANCHY_TYPES = ["ptr", "i64", "ptr", "i64", "ptr", "i64"]
BRANCHY = """
define void @branchy(i64 %tid0, ptr %x, i64 %x.s, ptr %y, i64 %y.s, ptr %total, i64 %total.s, ptr %status) {
entry:
  %px = getelementptr double, ptr %x, i64 %tid0
  %vx = load double, ptr %px
  %pos = fcmp ogt double %vx, 0.0
  %py = getelementptr double, ptr %y, i64 %tid0
  br i1 %pos, label %then, label %else
then:
  %twice = fmul double %vx, 2.0
  store double %twice, ptr %py
  br label %done
else:
  %neg = fneg double %vx
  store double %neg, ptr %py
  br label %done
done:
  %old = atomicrmw fadd ptr %total, double %vx monotonic
  ret void
}
"""


def _vector_accesses(ptx: str, width: int, bits: int) -> tuple[int, int]:
    loads = re.findall(rf"ld\.global(?:\.nc)?\.v{width}\.[bf]{bits}\b", ptx)
    stores = re.findall(rf"st\.global\.v{width}\.[bf]{bits}\b", ptx)
    return len(loads), len(stores)


def _ptx(text, name, types, k, arch="sm_90", rank=1, **opts):
    return nvptx.compile_ptx(abi.add_gpu_entry(text, name, types, rank, "nvptx", noalias=True,
                                               elements_per_thread=k, **opts), arch)


# ---- PTX and GCN -----------------------------------------------------------------------------

@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_f32_stream_gets_v4_loads_and_stores_and_assembles(arch):
    ptx = _ptx(stream_add("float"), "sadd", STREAM_TYPES, 4, arch)
    loads, stores = _vector_accesses(ptx, 4, 32)
    assert loads == 2 and stores == 1, ptx
    # the arrays the body only reads stay read-only to LLVM despite the alignment test
    assert len(re.findall(r"ld\.global\.nc\.v4\.[bf]32", ptx)) == 2
    report = nvptx.ptxas_check(ptx, arch)
    assert "sadd_$_kernel" in report


def test_f64_stream_gets_v2_accesses():
    ptx = _ptx(stream_add("double"), "sadd", STREAM_TYPES, 4)
    loads, stores = _vector_accesses(ptx, 2, 64)
    assert loads == 4 and stores == 2, ptx        # 4 doubles = two 128-bit accesses per array


def test_i32_stream_gets_v4_accesses():
    loads, stores = _vector_accesses(_ptx(stream_add("i32"), "sadd", STREAM_TYPES, 4), 4, 32)
    assert (loads, stores) == (2, 1)


def test_one_element_per_thread_has_no_vector_accesses():
    ptx = _ptx(stream_add("float"), "sadd", STREAM_TYPES, 1)
    assert ".v4." not in ptx and ".v2." not in ptx
    assert "ld.global" in ptx


@needs_ptxas
def test_branchy_body_with_a_deferred_atomic_and_bounds_checks_compiles():
    for text, name, types in ((BRANCHY, "branchy", BRANCHY_TYPES), (bodies.AXPY, "axpy", bodies.AXPY_TYPES)):
        for mode in ("block", "warp", "thread"):
            ptx = _ptx(text, name, types, 4, reductions=mode)
            nvptx.ptxas_check(ptx, "sm_90")


@pytest.mark.parametrize("case", [(bodies.GRID2, "grid2", bodies.GRID2_TYPES, 2),
                                  (bodies.GRID3, "grid3.fwd", bodies.GRID3_TYPES, 3)])
def test_rank_2_and_3_refuse_several_elements_per_thread(case):
    text, name, types, rank = case
    with pytest.raises(CompilationError, match="rank-1 grid"):
        abi.add_gpu_entry(text, name, types, rank, "nvptx", elements_per_thread=4)
    abi.add_gpu_entry(text, name, types, rank, "nvptx", elements_per_thread=1)   # k=1 is fine


@pytest.mark.parametrize("k", [0, 17, -4, True, 2.0, "4"])
def test_bad_elements_per_thread_is_refused(k):
    with pytest.raises(CompilationError, match="elements_per_thread"):
        abi.add_gpu_entry(stream_add("float"), "sadd", STREAM_TYPES, 1, "nvptx", elements_per_thread=k)


@needs_lld
def test_amdgpu_compiles_and_links_with_four_elements_per_thread():
    module = abi.add_gpu_entry(stream_add("float"), "sadd", STREAM_TYPES, 1, "amdgpu", noalias=True,
                               elements_per_thread=4)
    hsaco = amdgpu.compile_hsaco(module, "gfx942")
    assert amdgpu.kernel_descriptors(hsaco) == ["sadd.kernel.kd"]
    asm = amdgpu.compile_gcn_assembly(module, "gfx942")
    assert re.search(r"global_load_dwordx4", asm), "no 128-bit global loads on gfx942"
    assert re.search(r"global_store_dwordx4", asm)
    branchy = abi.add_gpu_entry(BRANCHY, "branchy", BRANCHY_TYPES, 1, "amdgpu", elements_per_thread=4)
    amdgpu.compile_hsaco(branchy, "gfx942")


def test_compile_cache_never_mixes_k(tmp_path):
    from adoffload.codegen.cache import CompileCache
    store = CompileCache(tmp_path)
    text = stream_add("float")
    four = compile_for_target(text, "sadd", STREAM_TYPES, 1, "nvptx", "sm_90", cache=store, noalias=True,
                              elements_per_thread=4)
    one = compile_for_target(text, "sadd", STREAM_TYPES, 1, "nvptx", "sm_90", cache=store, noalias=True,
                             elements_per_thread=1)
    default = compile_for_target(text, "sadd", STREAM_TYPES, 1, "nvptx", "sm_90", cache=store, noalias=True)
    assert ".v4." in four and ".v4." not in one and one == default
    again = compile_for_target(text, "sadd", STREAM_TYPES, 1, "nvptx", "sm_90", cache=store, noalias=True,
                               elements_per_thread=4)
    assert again == four


def test_kernel_compiled_keys_k_and_treats_one_as_the_default():
    import adoffload as ado

    @ado.kernel
    def twice(x: ado.In[ado.f32], y: ado.Out[ado.f32]):
        i = ado.tid()
        y[i] = 2.0 * x[i]

    one = twice.compiled("nvptx", arch="sm_90", noalias=True, elements_per_thread=1)
    assert one is twice.compiled("nvptx", arch="sm_90", noalias=True)
    four = twice.compiled("nvptx", arch="sm_90", noalias=True, elements_per_thread=4)
    assert four is not one and four.ptx != one.ptx
    assert (one.elements_per_thread, four.elements_per_thread) == (1, 4)   # what launchers divide by
    # the host entry ignores k: the same program either way
    host = twice.compiled("host", elements_per_thread=4)
    assert host is twice.compiled("host") and host.elements_per_thread == 1


# ---- the policy ------------------------------------------------------------------------------

class _Sig:
    """A stand-in signature: a grid rank and the element types of its array params."""

    def __init__(self, rank, *dtypes):
        from adoffload.language.signature import Param
        from adoffload.language import types as T
        self.grid_rank = rank
        self.params = [Param(f"a{k}", T.ArrayType(T.SCALAR_TYPES[d], 1, "in")) for k, d in enumerate(dtypes or ("f32",))]


def test_policy_thresholds(monkeypatch):
    monkeypatch.delenv(vectorize.ENV_VAR, raising=False)
    f32, f64, mixed = _Sig(1, "f32"), _Sig(1, "f64"), _Sig(1, "f32", "f64", "i32")
    assert (vectorize.vector_elements(f32), vectorize.vector_elements(f64), vectorize.vector_elements(mixed)) == (4, 2, 2)
    assert vectorize.elements_per_thread(f32, 4 * vectorize.MIN_THREADS) == 4
    assert vectorize.elements_per_thread(f32, 4 * vectorize.MIN_THREADS - 1) == 1
    assert vectorize.elements_per_thread(f64, 2 * vectorize.MIN_THREADS) == 2
    assert vectorize.elements_per_thread(mixed, 1 << 26) == 2
    assert vectorize.elements_per_thread(f32, 0) == 1
    for rank in (2, 3):
        assert vectorize.elements_per_thread(_Sig(rank), 1 << 26) == 1
    assert [vectorize.threads(n, 4) for n in (0, 1, 3, 4, 5, 8, 9)] == [0, 1, 1, 1, 2, 2, 3]


def _triad_and_quad():
    import adoffload as ado

    @ado.kernel(bounds_check=False)
    def triad(a: ado.Out[ado.f64], b: ado.In[ado.f64], c: ado.In[ado.f64], s: ado.f64):
        i = ado.tid()
        a[i] = b[i] + s * c[i]

    @ado.kernel(bounds_check=False)
    def quad(a: ado.In[ado.f64], x: ado.Out[ado.f64]):
        i = ado.tid()
        d = a[i] * a[i] - 1.0
        if d >= 0.0:
            x[i] = ado.sqrt(d) + ado.exp(a[i])
        else:
            x[i] = 0.0
    return triad, quad


def test_k_is_kept_only_where_the_build_vectorizes(monkeypatch):
    # A straight-line body becomes 128-bit accesses; a body with a data-dependent branch does
    # not, and k > 1 would then only make each warp's accesses strided: keep one per thread.
    monkeypatch.delenv(vectorize.ENV_VAR, raising=False)
    triad, quad = _triad_and_quad()
    assert vectorize.choose_compiled(triad, "nvptx", 2, arch="sm_90", noalias=True).elements_per_thread == 2
    assert vectorize.choose_compiled(quad, "nvptx", 2, arch="sm_90", noalias=True).elements_per_thread == 1
    assert vectorize.choose_compiled(triad, "nvptx", 1, arch="sm_90", noalias=True).elements_per_thread == 1
    monkeypatch.setenv(vectorize.ENV_VAR, "2")             # forced (for A/B runs): kept either way
    assert vectorize.choose_compiled(quad, "nvptx", 2, arch="sm_90", noalias=True).elements_per_thread == 2


@needs_lld
def test_amd_builds_keep_one_element_per_thread(monkeypatch):
    monkeypatch.delenv(vectorize.ENV_VAR, raising=False)
    triad, _ = _triad_and_quad()
    assert vectorize.choose_compiled(triad, "amdgpu", 2, arch="gfx942", noalias=True).elements_per_thread == 1


def test_policy_env_override(monkeypatch):
    monkeypatch.setenv(vectorize.ENV_VAR, "1")
    assert vectorize.elements_per_thread(_Sig(1), 1 << 26) == 1
    monkeypatch.setenv(vectorize.ENV_VAR, "4")
    assert vectorize.elements_per_thread(_Sig(1), 3) == 4
    assert vectorize.elements_per_thread(_Sig(2), 1 << 26) == 1       # never above 1 for rank 2
    monkeypatch.setenv(vectorize.ENV_VAR, " 2 ")
    assert vectorize.elements_per_thread(_Sig(1), 10) == 2
    monkeypatch.setenv(vectorize.ENV_VAR, "")
    assert vectorize.elements_per_thread(_Sig(1), 10) == 1
    for bad in ("four", "0", "99"):
        monkeypatch.setenv(vectorize.ENV_VAR, bad)
        with pytest.raises(CompilationError, match=vectorize.ENV_VAR):
            vectorize.elements_per_thread(_Sig(1), 10)


# ---- the entry's logic, run on the CPU -------------------------------------------------------

_LINEAR = "emu.linear"


def _emulated_linear_id(m: ir.Module, b: ir.IRBuilder):
    gv = ir.GlobalVariable(m, ir.IntType(64), _LINEAR)
    gv.initializer = ir.Constant(ir.IntType(64), 0)
    return b.load(gv)


class Emulated:
    """The GPU entry built for an emulated target (C calling convention, linear id read from
    ``@emu.linear``), JIT-compiled for this CPU; ``launch`` calls it once per GPU thread."""

    def __init__(self, monkeypatch, text, name, types, k, **opts):
        monkeypatch.setitem(abi.GPU_CALLING_CONVENTION, "emulated", "ccc")
        monkeypatch.setitem(abi._LINEAR_ID, "emulated", _emulated_linear_id)
        module = abi.add_gpu_entry(text, name, types, 1, "emulated", elements_per_thread=k, **opts)
        self.program = HostProgram(module)
        self.k = k
        ctype = {"ptr": ctypes.c_void_p, "i64": ctypes.c_int64, "float": ctypes.c_float}
        self.entry = self.program.function(abi.kernel_entry_name(name), None,
                                           *[ctype[t] for t in types], ctypes.c_int64, ctypes.c_void_p)
        address = self.program._engine.get_global_value_address(_LINEAR)
        self.linear = ctypes.c_int64.from_address(address)

    def launch(self, flat: list, total: int) -> np.ndarray:
        status = np.zeros(4, np.int64)
        for linear in range(vectorize.threads(total, self.k) + 1):   # one spare thread past the grid
            self.linear.value = linear
            self.entry(*flat, total, status.ctypes.data)
        return status


def _offset_view(values: np.ndarray, offset_bytes: int) -> np.ndarray:
    """A copy of ``values`` whose data starts ``offset_bytes`` past a 64-byte boundary."""
    raw = np.zeros(values.nbytes + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + offset_bytes
    view = raw[start:start + values.nbytes].view(values.dtype)
    view[...] = values
    return view


@pytest.mark.parametrize("k", [1, 2, 4])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize("offset", [0, 4])
def test_emulated_stream_add_every_size(monkeypatch, k, dtype, offset):
    t = {np.float32: "float", np.float64: "double", np.int32: "i32"}[dtype]
    kernel = Emulated(monkeypatch, stream_add(t), "sadd", STREAM_TYPES, k, noalias=True)
    rng = np.random.default_rng(k)
    for n in (0, 1, 3, 4, 5, 7, 8, 9, 37):
        a = _offset_view(rng.integers(-100, 100, n).astype(dtype), offset)
        b = _offset_view(rng.integers(-100, 100, n).astype(dtype), 0)
        c = _offset_view(np.full(n + 1, 77, dtype), 0)          # one element past the grid: untouched
        status = kernel.launch([a.ctypes.data, n, b.ctypes.data, n, c.ctypes.data, n], n)
        assert status[0] == 0
        np.testing.assert_array_equal(c[:n], a + b)
        assert c[n] == 77


@pytest.mark.parametrize("k", [1, 3, 4])
@pytest.mark.parametrize("offset", [0, 8])
def test_emulated_branchy_body_with_deferred_atomic(monkeypatch, k, offset):
    kernel = Emulated(monkeypatch, BRANCHY, "branchy", BRANCHY_TYPES, k, reductions="thread")
    rng = np.random.default_rng(3)
    for n in (0, 1, 5, 8, 41):
        x = _offset_view(rng.uniform(-1, 1, n), offset)
        y = np.zeros(n)
        total = np.array([0.25])
        status = kernel.launch([x.ctypes.data, n, y.ctypes.data, n, total.ctypes.data, 1], n)
        assert status[0] == 0
        np.testing.assert_array_equal(y, np.where(x > 0, 2 * x, -x))
        assert total[0] == pytest.approx(0.25 + x.sum(), rel=1e-12, abs=1e-12)


def test_emulated_bounds_error_stops_only_that_element(monkeypatch):
    kernel = Emulated(monkeypatch, bodies.AXPY, "axpy", bodies.AXPY_TYPES, 4)
    n, short = 10, 6            # y has 6 elements: elements 6..9 fail their bounds check
    x, y, out = np.arange(n, dtype=np.float32), np.ones(short, np.float32), np.zeros(n, np.float32)
    flat = [2.0, x.ctypes.data, n, y.ctypes.data, short, out.ctypes.data, n]
    status = kernel.launch(flat, n)
    assert status[0] == 1 and status[1] == 2 and 6 <= status[2] < 10
    np.testing.assert_array_equal(out[:short], 2 * x[:short] + 1)
    np.testing.assert_array_equal(out[short:], 0)


def test_only_arrays_the_body_never_writes_are_marked_readonly():
    entry = abi.add_gpu_entry(BRANCHY, "branchy", BRANCHY_TYPES, 1, "nvptx", reductions="off",
                              elements_per_thread=4)
    header = next(line for line in entry.splitlines() if line.startswith("define") and "branchy.kernel" in line)
    params = header.split("(", 1)[1].split(", ")
    assert "readonly" in params[0]                        # x: only loaded
    assert "readonly" not in params[2] and "readonly" not in params[4]   # y stored, total atomically added
    axpy = abi.add_gpu_entry(bodies.AXPY, "axpy", bodies.AXPY_TYPES, 1, "nvptx", elements_per_thread=4)
    header = next(line for line in axpy.splitlines() if line.startswith("define") and "axpy.kernel" in line)
    assert [("readonly" in p) for p in header.split("(", 1)[1].split(", ") if p.startswith("ptr")] == \
        [True, True, False, False]                        # x, y read; out written; status


@needs_ptxas
def test_scalars_by_reference_entry_with_four_elements_per_thread():
    """The JAX calling convention (scalars arrive as pointers; they are not arrays to align)."""
    module = abi.add_gpu_entry(bodies.AXPY, "axpy", bodies.AXPY_TYPES, 1, "nvptx", scalars_by_reference=True,
                               noalias=True, elements_per_thread=4)
    ptx = nvptx.compile_ptx(module, "sm_90")
    nvptx.ptxas_check(ptx, "sm_90")
    assert "ld.global" in ptx
