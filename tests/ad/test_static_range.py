"""``ado.static_range``: loops the front end unrolls, their counters constants in each copy.

The point is register tiles in derivative kernels: a local array indexed by static counters is
promoted to registers in the reverse sweep too (a reversed ``range`` loop that LLVM leaves rolled
keeps the tile's adjoint in local memory). Checked: the same values as ``range``, ``break`` and
``continue``, the errors for bounds that are not compile-time integers, both derivative oracles on
a register-tiled block matmul, and that its adjoint's PTX uses no local memory."""
from __future__ import annotations

import numpy as np
import pytest

import adoffload as ado
from adoffload.errors import KernelTypeError

from .check_grads import check_grads

N = 4


def _source_kernels():
    @ado.kernel
    def unrolled(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
        i = ado.tid()
        s = 0.0
        for m in ado.static_range(N):
            if m == 1:
                continue
            for n in ado.static_range(5, 0, -2):          # 5, 3, 1
                if n * m > 9:
                    break
                s += x[i] * (m + n) + m * n
        y[i] = s + m

    @ado.kernel
    def rolled(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
        i = ado.tid()
        s = 0.0
        m = 0
        for m in range(N):
            if m == 1:
                continue
            for n in range(5, 0, -2):
                if n * m > 9:
                    break
                s += x[i] * (m + n) + m * n
        y[i] = s + m
    return unrolled, rolled


def test_static_range_computes_what_range_does():
    unrolled, rolled = _source_kernels()
    x = np.linspace(-1.0, 2.0, 7)
    got, want = np.zeros(7), np.zeros(7)
    unrolled(x, got, grid=(7,))
    rolled(x, want, grid=(7,))
    np.testing.assert_array_equal(got, want)
    assert list(ado.static_range(2, 7, 2)) == [2, 4, 6]       # outside kernels: range


def test_static_range_derivatives_pass_both_oracles():
    unrolled, _ = _source_kernels()
    check_grads(unrolled, {"x": np.linspace(-1.0, 2.0, 7), "y": np.zeros(7)}, ["x"], (7,))


@pytest.mark.parametrize("body, message", [
    ("for m in ado.static_range(x.shape[0]):\n        y[i] += m", "compile-time integers"),
    ("for m in ado.static_range(0.5):\n        y[i] += m", "compile-time integers"),
    ("for m in ado.static_range(2000):\n        y[i] += m", "more than 1024"),
    ("for m in ado.static_range(0, 4, 0):\n        y[i] += m", "must not be zero"),
    ("for m in ado.static_range(stop=4):\n        y[i] += m", "positional"),
])
def test_static_range_bounds_must_be_compile_time_integers(tmp_path, body, message):
    import importlib.util
    path = tmp_path / "static_bad.py"
    path.write_text("import adoffload as ado\n\n\n@ado.kernel\n"
                    "def bad(x: ado.In[ado.f64], y: ado.Out[ado.f64]):\n    i = ado.tid()\n    " + body + "\n")
    spec = importlib.util.spec_from_file_location("static_bad", path)
    module = importlib.util.module_from_spec(spec)
    with pytest.raises(KernelTypeError, match=message):      # when the kernel is built (at definition)
        spec.loader.exec_module(module)
        module.bad(np.ones(4), np.zeros(4), grid=(4,))


TM, BK, BT = 2, 4, 4       # outputs per thread per axis, K step, threads per block axis
BM = TM * BT               # block tile


@ado.kernel(block=(BT, BT))
def regtile(A: ado.In[ado.f64, 2], B: ado.In[ado.f64, 2], C: ado.Out[ado.f64, 2]):
    """C = A @ B, each thread a TM x TM register tile (rows ti + BT m, columns tj + BT n)."""
    ti, tj = ado.thread_id()
    bi, bj = ado.block_id()
    As = ado.shared((BK, BM), ado.f64)
    Bs = ado.shared((BK, BM), ado.f64)
    acc = ado.zeros((TM, TM), ado.f64)
    a = ado.zeros(TM, ado.f64)
    b = ado.zeros(TM, ado.f64)
    r = ti * BT + tj
    for t in range(A.shape[1] // BK):
        for q in ado.static_range(BK * BM // (BT * BT)):
            e = r + q * BT * BT
            As[e % BK, e // BK] = A[bi * BM + e // BK, t * BK + e % BK]
            Bs[e // BM, e % BM] = B[t * BK + e // BM, bj * BM + e % BM]
        ado.sync_threads()
        for k in ado.static_range(BK):
            for m in ado.static_range(TM):
                a[m] = As[k, ti + BT * m]
            for n in ado.static_range(TM):
                b[n] = Bs[k, tj + BT * n]
            for m in ado.static_range(TM):
                for n in ado.static_range(TM):
                    acc[m, n] = ado.fma(a[m], b[n], acc[m, n])
        ado.sync_threads()
    for m in ado.static_range(TM):
        for n in ado.static_range(TM):
            C[bi * BM + ti + BT * m, bj * BM + tj + BT * n] = acc[m, n]


def test_register_tiled_matmul_and_its_derivatives():
    rng = np.random.default_rng(3)
    A, B = rng.standard_normal((16, 8)), rng.standard_normal((8, 16))
    C = np.zeros((16, 16))
    grid = (16 // TM, 16 // TM)
    regtile(A, B, C, grid=grid)
    np.testing.assert_allclose(C, A @ B, rtol=1e-12, atol=1e-12)
    check_grads(regtile, {"A": A, "B": B, "C": C}, ["A", "B"], grid)


def test_register_tile_adjoint_uses_no_local_memory():
    # the reverse sweep's d_acc, d_a, d_b are registers: no local stack frame in the PTX
    for kernel in (regtile, ado.vjp(regtile, ("A", "B"), primal_outputs=False), ado.jvp(regtile, ("A", "B"))):
        ptx = kernel.compiled("nvptx", arch="sm_90").ptx
        assert "__local_depot" not in ptx and "ld.local" not in ptx, kernel.name
