"""Per-warp copies of shadow shared arrays (codegen/shared_private.py): which arrays get them, and
that the sum of the copies is the array -- checked by running a privatized reverse kernel on the
host, where the copies are indexed by the same ``thread_rank() >> 5`` as on the GPU."""
import re

import numpy as np
import pytest

import adoffload as ado
from adoffload.codegen import blocks as codegen_blocks
from adoffload.codegen import nvptx, tools
from adoffload.codegen.shared_private import privatize_shadow_adds


@ado.kernel(block=(16, 16))
def small_sgemm(A: ado.In[ado.f64, 2], B: ado.In[ado.f64, 2], C: ado.Out[ado.f64, 2]):
    """C = A @ B, a register tile of 2x2 outputs per thread strided by 16; grid (M/2, N/2)."""
    ti, tj = ado.thread_id()
    bi, bj = ado.block_id()
    As = ado.shared((4, 32), ado.f64)
    Bs = ado.shared((4, 32), ado.f64)
    acc = ado.zeros((2, 2), ado.f64)
    a = ado.zeros(2, ado.f64)
    b = ado.zeros(2, ado.f64)
    r = ti * 16 + tj
    for t in range(A.shape[1] // 4):
        if r < 128:
            As[r % 4, r // 4] = A[bi * 32 + r // 4, t * 4 + r % 4]
            Bs[r // 32, r % 32] = B[t * 4 + r // 32, bj * 32 + r % 32]
        ado.sync_threads()
        for k in range(4):
            for m in ado.static_range(2):
                a[m] = As[k, ti + 16 * m]
            for n in ado.static_range(2):
                b[n] = Bs[k, tj + 16 * n]
            for m in ado.static_range(2):
                for n in ado.static_range(2):
                    acc[m, n] = ado.fma(a[m], b[n], acc[m, n])
        ado.sync_threads()
    for m in ado.static_range(2):
        for n in ado.static_range(2):
            C[bi * 32 + ti + 16 * m, bj * 32 + tj + 16 * n] = acc[m, n]


@ado.kernel(block=(8, 32))
def row_stencil(x: ado.In[ado.f64, 2], y: ado.Out[ado.f64, 2]):
    """Each warp reads its own row of the tile: no loop repeats the adds (nothing to privatize)."""
    ti, tj = ado.thread_id()
    i, j = ado.tid()
    T = ado.shared((8, 34), ado.f64)
    T[ti, tj + 1] = x[i, j]
    if tj == 0:
        T[ti, 0] = 0.0
    if tj == 31:
        T[ti, 33] = 0.0
    ado.sync_threads()
    y[i, j] = T[ti, tj] + 2.0 * T[ti, tj + 1] + T[ti, tj + 2]


def _reverse_body(kernel, monkeypatch, tmp_path):
    """The reverse kernel's block body as the host entry receives it, and its shared list."""
    monkeypatch.setenv("ADOFFLOAD_CACHE_DIR", str(tmp_path / "cache"))
    seen = {}
    original = codegen_blocks.add_block_host_entry

    def spy(module_text, body_name, flat_types, grid_rank, block, shared, **kw):
        seen.update(text=module_text, name=body_name, block=block, shared=list(shared),
                    first=grid_rank + len(flat_types))
        return original(module_text, body_name, flat_types, grid_rank, block, shared, **kw)
    monkeypatch.setattr(codegen_blocks, "add_block_host_entry", spy)
    reverse = ado.vjp(kernel, [p.name for p in kernel.signature.params if p.name in ("A", "B", "x")])
    reverse._compiled.clear()                 # compile again (derived kernels are memoized)
    reverse.compiled("host")
    reverse._compiled.clear()
    return seen


def _privatize(seen):
    shared_args = range(seen["first"], seen["first"] + len(seen["shared"]))
    return privatize_shadow_adds(seen["text"], seen["name"], shared_args, seen["shared"], seen["block"])




def test_a_column_tile_shadow_gets_one_copy_per_warp(monkeypatch, tmp_path):
    seen = _reverse_body(small_sgemm, monkeypatch, tmp_path)
    text, shared = _privatize(seen)
    # As, Bs, then their shadows; only d_Bs (read by a column of threads across 8 warps) is copied
    assert [n for n, _ in seen["shared"]] == [1024, 1024, 1024, 1024]
    assert [n for n, _ in shared] == [1024, 1024, 1024, 8 * 1024]
    assert "adoffload.thread_rank" in text


def test_a_row_owned_shadow_and_a_loopless_one_stay_single(monkeypatch, tmp_path):
    seen = _reverse_body(row_stencil, monkeypatch, tmp_path)
    text, shared = _privatize(seen)
    assert shared == seen["shared"] and text == seen["text"]


def test_copies_must_fit_the_static_budget(monkeypatch, tmp_path):
    seen = _reverse_body(small_sgemm, monkeypatch, tmp_path)
    seen["shared"] = [(n + (6 * 1024 if k == 0 else 0), z) for k, (n, z) in enumerate(seen["shared"])]
    _, shared = _privatize(seen)                 # 7 KiB + 3 KiB + 8 x 1 KiB fits: still copied
    assert shared[3][0] == 8 * 1024
    seen["shared"] = [(n + (40 * 1024 if k == 0 else 0), z) for k, (n, z) in enumerate(seen["shared"])]
    _, shared = _privatize(seen)                 # 41 KiB + 3 KiB + 8 KiB would not
    assert [n for n, _ in shared] == [n for n, _ in seen["shared"]]


def test_privatized_reverse_kernel_runs_right_on_the_host(monkeypatch, tmp_path):
    """The host runs the rewritten body (copies indexed by thread_rank >> 5, as on the GPU): the
    gradients are the matrix products'."""
    monkeypatch.setenv("ADOFFLOAD_CACHE_DIR", str(tmp_path / "cache"))
    original = codegen_blocks.add_block_host_entry
    sizes = []

    def privatizing(module_text, body_name, flat_types, grid_rank, block, shared, **kw):
        first = grid_rank + len(flat_types)
        module_text, shared = privatize_shadow_adds(module_text, body_name, range(first, first + len(shared)),
                                                    shared, block)
        sizes.append([n for n, _ in shared])
        return original(module_text, body_name, flat_types, grid_rank, block, shared, **kw)
    monkeypatch.setattr(codegen_blocks, "add_block_host_entry", privatizing)
    rng = np.random.default_rng(4)
    A, B, G = rng.standard_normal((64, 12)), rng.standard_normal((12, 64)), rng.standard_normal((64, 64))
    gA, gB = np.zeros_like(A), np.zeros_like(B)
    reverse = ado.vjp(small_sgemm, ("A", "B"))
    reverse._compiled.clear()                 # compile again (derived kernels are memoized) ...
    try:
        reverse(A, B, np.zeros((64, 64)), gA, gB, G.copy(), grid=(32, 32))
    finally:
        reverse._compiled.clear()             # ... and keep the privatized host build from other tests
    assert [8 * 1024] in [s[3:] for s in sizes]      # the reverse kernel's d_Bs was copied
    np.testing.assert_allclose(gA, G @ B.T, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gB, A.T @ G, rtol=1e-12, atol=1e-12)


def _have_ptxas():
    try:
        tools.find_ptxas()
        return True
    except Exception:
        return False


@pytest.mark.skipif(not _have_ptxas(), reason="ptxas not installed (pip install nvidia-cuda-nvcc)")
def test_nvidia_reverse_kernel_declares_the_copies(tmp_path, monkeypatch):
    monkeypatch.setenv("ADOFFLOAD_CACHE_DIR", str(tmp_path / "cache"))
    reverse = ado.vjp(small_sgemm, ("A", "B"))
    ptx = reverse.compiled("nvptx", arch="sm_90").ptx
    sizes = sorted(int(s) for s in re.findall(r"\.shared \.align 16 \.b8 \S+\[(\d+)\]", ptx))
    assert sizes == [1024, 1024, 1024, 8 * 1024]
    nvptx.ptxas_check(ptx, "sm_90")
    forward = ado.jvp(small_sgemm, ("A", "B")).compiled("nvptx", arch="sm_90").ptx
    assert "8192]" not in forward                 # tangents have no adds: one copy each


@pytest.mark.skipif(not _have_ptxas(), reason="ptxas not installed (pip install nvidia-cuda-nvcc)")
def test_the_copies_can_be_switched_off_for_measurements(tmp_path, monkeypatch):
    from adoffload.codegen import PRIVATE_COPIES_ENV
    monkeypatch.setenv("ADOFFLOAD_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(PRIVATE_COPIES_ENV, "0")
    ptx = ado.vjp(small_sgemm, ("A", "B")).compiled("nvptx", arch="sm_90").ptx
    assert sorted(int(s) for s in re.findall(r"\.shared \.align 16 \.b8 \S+\[(\d+)\]", ptx)) == [1024] * 4
