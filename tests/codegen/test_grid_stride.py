"""Reduction entries at bandwidth: the grid-stride loop (codegen/gpu/grid_stride.py), thread-independent
checks hoisted out of fast paths (codegen/gpu/uniform_checks.py) and the launch policy
(vectorize.launch_threads).

The loop's logic is run on this CPU: the entry is built for an emulated target whose linear
thread id and launched-thread count are global variables, and called once per GPU thread for
several launch sizes, alignments and grid sizes. PTX is checked for what makes the reduction
fast: 128-bit loads in its loops, no status traffic in them, one atomic per block.
"""
from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest
from llvmlite import ir

import adoffload as ado
from adoffload.codegen import PTX_GRID_STRIDE_LINE, abi, compile_for_target, loops_over_grid
from adoffload.codegen.gpu import grid_stride, nvptx, vectorize
from adoffload.codegen.host.program import HostProgram
from adoffload.codegen.gpu.uniform_checks import add_checks_function, uniform_checks
from adoffload.errors import CompilationError
from adoffload.ir import import_module

# total[0] += a[i] * b[i], with the bounds check of total[0] (thread-independent) that the front
# end emits: an empty ``total`` fails every thread with code 1 for parameter 2.
DOT_TYPES = ["ptr", "i64"] * 3
DOT = """
define void @dot(i64 %tid0, ptr %a, i64 %a.s, ptr %b, i64 %b.s, ptr %t, i64 %t.s, ptr %status) {
entry:
  %empty = icmp eq i64 %t.s, 0
  br i1 %empty, label %fail, label %ok
fail:
  %old = atomicrmw xchg ptr %status, i64 1 monotonic
  %first = icmp eq i64 %old, 0
  br i1 %first, label %record, label %done
record:
  %param = getelementptr i64, ptr %status, i64 1
  store i64 2, ptr %param
  br label %done
ok:
  %pa = getelementptr double, ptr %a, i64 %tid0
  %va = load double, ptr %pa
  %pb = getelementptr double, ptr %b, i64 %tid0
  %vb = load double, ptr %pb
  %m = fmul double %va, %vb
  %o = atomicrmw fadd ptr %t, double %m monotonic
  br label %done
done:
  ret void
}
"""

# s[0] += m[i, j] + 0 * i: a rank-2 reduction (one element per thread, tids from the linear id)
SUM2D_TYPES = ["ptr", "i64", "i64", "ptr", "i64"]
SUM2D = """
define void @sum2d(i64 %i, i64 %j, ptr %m, i64 %m.s0, i64 %m.s1, ptr %s, i64 %s.s, ptr %status) {
entry:
  %row = mul i64 %i, %m.s1
  %at = add i64 %row, %j
  %p = getelementptr i64, ptr %m, i64 %at
  %v = load i64, ptr %p
  %w = mul i64 %v, %j
  %o = atomicrmw add ptr %s, i64 %w monotonic
  ret void
}
"""


class EmulatedLoop:
    """The grid-stride GPU entry for an emulated target (C calling convention; linear id and
    launched-thread count read from globals), JIT-compiled for this CPU."""

    def __init__(self, monkeypatch, text, name, types, k, rank=1):
        monkeypatch.setitem(abi.GPU_CALLING_CONVENTION, "emulated", "ccc")
        monkeypatch.setitem(abi._LINEAR_ID, "emulated", lambda m, b: b.load(_global(m, "emu.linear")))
        monkeypatch.setitem(abi._LAUNCHED_THREADS, "emulated", lambda m, b: b.load(_global(m, "emu.threads")))
        module = abi.add_gpu_entry(text, name, types, rank, "emulated", elements_per_thread=k, reductions="thread",
                                   noalias=True, grid_stride=True)
        self.program = HostProgram(module)
        self.rank = rank
        ctype = {"ptr": ctypes.c_void_p, "i64": ctypes.c_int64}
        self.entry = self.program.function(abi.kernel_entry_name(name), None, *[ctype[t] for t in types],
                                           *[ctypes.c_int64] * rank, ctypes.c_void_p)
        engine = self.program._engine
        self.linear = ctypes.c_int64.from_address(engine.get_global_value_address("emu.linear"))
        self.threads = ctypes.c_int64.from_address(engine.get_global_value_address("emu.threads"))

    def launch(self, flat: list, grid: tuple, threads: int) -> np.ndarray:
        status = np.zeros(4, np.int64)
        self.threads.value = threads
        for linear in range(threads):
            self.linear.value = linear
            self.entry(*flat, *grid, status.ctypes.data)
        return status


def _global(m: ir.Module, name: str) -> ir.GlobalVariable:
    if name in m.globals:
        return m.globals[name]
    gv = ir.GlobalVariable(m, ir.IntType(64), name)
    gv.initializer = ir.Constant(ir.IntType(64), 0)
    return gv


def _offset_view(values: np.ndarray, offset_bytes: int) -> np.ndarray:
    raw = np.zeros(values.nbytes + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + offset_bytes
    view = raw[start:start + values.nbytes].view(values.dtype)
    view[...] = values
    return view


@pytest.mark.parametrize("k", [1, 2, 4])
@pytest.mark.parametrize("offset", [0, 8])
def test_dot_is_right_for_every_launch_size(monkeypatch, k, offset):
    kernel = EmulatedLoop(monkeypatch, DOT, "dot", DOT_TYPES, k)
    rng = np.random.default_rng(k + offset)
    for n in (0, 1, 2, 3, 5, 8, 9, 37, 100):
        a = _offset_view(rng.integers(-8, 8, n).astype(np.float64), offset)
        b = _offset_view(rng.integers(-8, 8, n).astype(np.float64), 0)
        for threads in sorted({1, 2, 3, 5, max(1, vectorize.threads(n, k))}):
            total = np.array([0.5, 99.0])
            status = kernel.launch([a.ctypes.data, n, b.ctypes.data, n, total.ctypes.data, 2], (n,), threads)
            assert status[0] == 0
            assert total[0] == 0.5 + float(a @ b), (n, threads)     # small integers: exact in any order
            assert total[1] == 99.0


@pytest.mark.parametrize("k", [1, 2])
def test_dot_counts_in_64_bits_past_the_narrow_limit(monkeypatch, k):
    # group indices up to 20 in 32-bit counters, beyond that the 64-bit loops: both run here
    monkeypatch.setattr(grid_stride, "NARROW_LIMIT", 20)
    kernel = EmulatedLoop(monkeypatch, DOT, "dot", DOT_TYPES, k)
    rng = np.random.default_rng(k)
    for n in (3, 9, 17, 37, 100):
        a, b = rng.integers(-8, 8, n).astype(np.float64), rng.integers(-8, 8, n).astype(np.float64)
        for threads in sorted({1, 2, 3, 7, max(1, vectorize.threads(n, k))}):
            total = np.array([0.5])
            status = kernel.launch([a.ctypes.data, n, b.ctypes.data, n, total.ctypes.data, 1], (n,), threads)
            assert status[0] == 0 and total[0] == 0.5 + float(a @ b), (n, threads)


def test_failing_thread_independent_check_takes_the_checked_path(monkeypatch):
    kernel = EmulatedLoop(monkeypatch, DOT, "dot", DOT_TYPES, 2)
    n = 9
    a, b = np.ones(n), np.ones(n)
    total = np.zeros(1)
    status = kernel.launch([a.ctypes.data, n, b.ctypes.data, n, total.ctypes.data, 0], (n,), 2)
    assert status[0] == 1 and status[1] == 2      # reported as the body reports it
    assert total[0] == 0.0                         # identity added by the threads that failed


def test_rank_2_reduction_loops_over_linear_ids(monkeypatch):
    kernel = EmulatedLoop(monkeypatch, SUM2D, "sum2d", SUM2D_TYPES, 1, rank=2)
    m = np.arange(7 * 5, dtype=np.int64).reshape(7, 5)
    expected = int((m * np.arange(5)).sum())
    for threads in (1, 4, 35, 40):
        s = np.array([3], np.int64)
        status = kernel.launch([m.ctypes.data, 7, 5, s.ctypes.data, 1], (7, 5), threads)
        assert status[0] == 0 and s[0] == 3 + expected


def test_uniform_checks_are_found_and_only_those():
    body = import_module(DOT).functions["dot"]
    assert len(uniform_checks(body, 1)) == 1
    thread_dependent = DOT.replace("icmp eq i64 %t.s, 0", "icmp uge i64 %tid0, %a.s")
    assert uniform_checks(import_module(thread_dependent).functions["dot"], 1) == []
    text, name = add_checks_function(DOT, "dot", 1)
    assert name == "dot.checks_ok" and "define i1 @\"dot.checks_ok\"" in text or "define i1 @dot.checks_ok" in text
    assert add_checks_function(SUM2D, "sum2d", 2) == (SUM2D, None)      # no failure block at all


def test_grid_stride_is_refused_where_not_built():
    with pytest.raises(CompilationError, match="grid_stride"):
        abi.add_gpu_entry(DOT, "dot", DOT_TYPES, 1, "amdgpu", grid_stride=True)


# ---- PTX -------------------------------------------------------------------------------------

def _loop_bodies(ptx: str) -> list[str]:
    """The text of each PTX basic block that branches back to its own label (a loop's body)."""
    blocks = re.split(r"^(\$L__BB\d+_\d+):", ptx, flags=re.M)
    return [text for label, text in zip(blocks[1::2], blocks[2::2]) if re.search(rf"bra(?:\.uni)?\s+{re.escape(label)};", text)]


def test_dot_ptx_loops_with_128_bit_loads_and_no_status_traffic():
    ptx = nvptx.compile_ptx(abi.add_gpu_entry(DOT, "dot", DOT_TYPES, 1, "nvptx", noalias=True, elements_per_thread=2,
                                              grid_stride=True), "sm_90")
    loops = _loop_bodies(ptx)
    vector_loops = [body for body in loops if re.search(r"ld\.global\.nc\.v2\.[bf]64", body)]
    # 32-bit counters: the unrolled loop and the whole-group loop; 64-bit ones (grids past 2^32 groups): one loop
    assert len(vector_loops) == 3
    assert sum(bool(re.search(r"setp\.\w+\.u32", body)) for body in vector_loops) == 2
    assert max(len(re.findall(r"ld\.global\.nc\.v2", body)) for body in vector_loops) == 2 * 2   # 2 groups x 2 arrays
    assert all("atom" not in body for body in vector_loops)       # no status exchange, no atomic per element
    assert "%nctaid.y" in ptx                                     # the stride: threads launched
    assert len(re.findall(r"atom\.global\.add\.f64", ptx)) == 1   # one atomic per block
    assert "bar.sync" in ptx
    if _have_ptxas():
        registers = int(re.search(r"Used (\d+) registers", nvptx.ptxas_check(ptx, "sm_90")).group(1))
        assert registers <= 40          # as nvcc's tuned stream_dot (34): 6+ blocks of 256 per SM


def _have_ptxas() -> bool:
    from adoffload.codegen.gpu import tools
    from adoffload.errors import ToolNotFoundError
    try:
        tools.find_ptxas()
        return True
    except ToolNotFoundError:
        return False


def test_hoisted_check_lets_a_k_per_thread_body_vectorize():
    scale = DOT.replace("%o = atomicrmw fadd ptr %t, double %m monotonic",
                        "%pt = getelementptr double, ptr %t, i64 %tid0\n  store double %m, ptr %pt")
    ptx = nvptx.compile_ptx(abi.add_gpu_entry(scale, "dot", DOT_TYPES, 1, "nvptx", noalias=True,
                                              elements_per_thread=2), "sm_90")
    assert re.search(r"ld\.global\.nc\.v2\.[bf]64", ptx) and re.search(r"st\.global\.v2\.[bf]64", ptx)


@ado.kernel
def kernel_dot(a: ado.In[ado.f64], b: ado.In[ado.f64], out: ado.InOut[ado.f64]):
    i = ado.tid()
    ado.atomic_add(out, 0, a[i] * b[i])


@ado.kernel
def kernel_add(a: ado.In[ado.f64], b: ado.In[ado.f64], c: ado.Out[ado.f64]):
    i = ado.tid()
    c[i] = a[i] + b[i]


def test_compiled_says_which_entries_loop_and_launch_is_capped_only_for_them():
    dot = kernel_dot.compiled("nvptx", arch="sm_90", noalias=True, elements_per_thread=2)
    add = kernel_add.compiled("nvptx", arch="sm_90", noalias=True, elements_per_thread=2)
    assert dot.grid_stride and not add.grid_stride
    assert not kernel_dot.compiled("host").grid_stride
    assert not kernel_dot.compiled("nvptx", arch="sm_90", reductions="thread").grid_stride
    n, wave = 1 << 26, 132 * 1536
    assert vectorize.launch_threads(dot, n, wave) == wave
    assert vectorize.launch_threads(dot, 1000, wave) == 500          # fewer groups than a wave: one each
    assert vectorize.launch_threads(dot, n, None) == n // 2          # unknown GPU: one group per thread
    assert vectorize.launch_threads(add, n, wave) == n // 2
    assert dot.ptx.startswith(PTX_GRID_STRIDE_LINE) and loops_over_grid(dot.ptx) and not loops_over_grid(add.ptx)
    if _have_ptxas():
        nvptx.ptxas_check(dot.ptx, "sm_90")          # the marker line is a PTX comment
    flat = [f.llvm_type for f in kernel_dot.signature.flat_params()]
    text = kernel_dot.module_text()
    assert abi.GRID_STRIDE_MARK in abi.add_gpu_entry(text, kernel_dot.body_name, flat, 1, "nvptx")
    assert abi.GRID_STRIDE_MARK not in abi.add_gpu_entry(text, kernel_dot.body_name, flat, 1, "amdgpu")   # never loops
    assert abi.GRID_STRIDE_MARK not in abi.add_gpu_entry(text, kernel_dot.body_name, flat, 1, "nvptx", reductions="thread")


def test_vjp_of_a_scalar_parameter_loops_too():
    @ado.kernel
    def scale(x: ado.In[ado.f64], y: ado.Out[ado.f64], alpha: ado.f64):
        i = ado.tid()
        y[i] = alpha * x[i]

    grad = ado.vjp(scale, ["alpha"])
    compiled = grad.compiled("nvptx", arch="sm_90", noalias=True)
    assert compiled.grid_stride           # d_alpha: a uniform-address accumulation, combined per block
    ptx = compile_for_target(grad.module_text(), grad.body_name, compiled.flat_types, 1, "nvptx", "sm_90",
                             cache=False, noalias=True)
    assert len(re.findall(r"atom\.global\.add\.f64", ptx)) == 1


def test_jax_gpu_handler_caps_the_launch_of_looping_entries():
    from adoffload.jax import ffi_layout
    from adoffload.jax import handler as handlers
    layout = ffi_layout.layout_for(kernel_dot.signature, scalars_by_reference=True)
    tables = ffi_layout.GpuTables((0,), (0,), (0,), launch=0, synchronize=0, memset=0)
    capped = handlers.gpu_handler_ir(layout, tables, elements_per_thread=2, max_threads=270_336)
    plain = handlers.gpu_handler_ir(layout, tables, elements_per_thread=2)
    assert re.search(r"call i64 @llvm\.umin\.i64\(i64 %\S+, i64 270336\)", capped) and "umin" not in plain
    assert handlers.CompiledHandler(capped).address      # verifies and JIT-compiles


def test_checks_with_a_shift_that_may_be_poison_stay_in_the_body():
    shifted = DOT.replace("%empty = icmp eq i64 %t.s, 0",
                          "%wide = shl i64 1, %a.s\n  %empty = icmp ult i64 %t.s, %wide")
    assert uniform_checks(import_module(shifted).functions["dot"], 1) == []
    by_constant = DOT.replace("%empty = icmp eq i64 %t.s, 0",
                              "%wide = shl i64 %a.s, 3\n  %empty = icmp ult i64 %t.s, %wide")
    assert len(uniform_checks(import_module(by_constant).functions["dot"], 1)) == 1
