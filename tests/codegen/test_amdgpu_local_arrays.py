"""Arrays of a thread (``ado.zeros`` in a kernel, ``double buf[8]`` in HIP) compile for AMDGPU, in
the primal, reverse and forward kernels: AMDGPU's allocas live in the private address space 5, and
the front end, the tapes and host-triple foreign IR allocate in address space 0, which the AMDGPU
verifier refuses (amdgpu.private_allocas moves them). The arrays here are indexed with a runtime
value, so they stay in memory through O3 (a constant index, or a small array, would be promoted to registers
and the test would prove nothing): the GCN assembly must use scratch (a private segment)."""
from __future__ import annotations

import re

import numpy as np
import pytest

import adoffload as ado
from adoffload.codegen.gpu import amdgpu

from .test_amdgpu import needs_lld


@ado.kernel
def local_ring(x: ado.In[ado.f64], s: ado.i64, y: ado.Out[ado.f64]):
    i = ado.tid()
    buf = ado.zeros(64, ado.f64)
    for j in range(64):
        buf[(j * s + i) % 64] = ado.sin(x[i] * (j + 1))
    acc = 0.0
    for j in range(64):
        acc = 0.5 * acc * x[i] + buf[(j + s) % 64]
    y[i] = acc


HIP_RING = r"""
__global__ void hip_ring(const double* x, double* y, int s, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double buf[64];
    for (int j = 0; j < 64; ++j) buf[j] = 0.0;
    for (int j = 0; j < 64; ++j) buf[(j * s + i) & 63] = sin(x[i] * (j + 1));
    double acc = 0.0;
    for (int j = 0; j < 64; ++j) acc = 0.5 * acc * x[i] + buf[(j + s) & 63];
    y[i] = acc;
}
"""


def ring(x, s):
    y = np.empty_like(x)
    for i, xi in enumerate(x):
        buf = np.zeros(64)
        for j in range(64):
            buf[(j * s + i) % 64] = np.sin(xi * (j + 1))
        acc = 0.0
        for j in range(64):
            acc = 0.5 * acc * xi + buf[(j + s) % 64]
        y[i] = acc
    return y


@pytest.fixture
def captured(monkeypatch, tmp_path):
    """The module text each AMDGPU compile gets (a fresh compile cache, so every kernel compiles)."""
    monkeypatch.setenv("ADOFFLOAD_CACHE_DIR", str(tmp_path))
    texts = []
    real = amdgpu.compile_hsaco

    def compile_hsaco(module, arch, **kw):
        texts.append(module)
        return real(module, arch, **kw)
    monkeypatch.setattr(amdgpu, "compile_hsaco", compile_hsaco)
    return texts


def _private_segment(text: str, arch: str) -> int:
    asm = amdgpu.compile_gcn_assembly(text, arch)
    sizes = [int(n) for n in re.findall(r"\.amdhsa_private_segment_fixed_size (\d+)", asm)]
    assert sizes, "no kernel descriptor in the assembly"
    return max(sizes)


def test_the_local_array_kernel_is_right_on_the_host():
    x = np.linspace(0.1, 1.5, 13)
    y = np.zeros(13)
    local_ring(x, 3, y, grid=13)
    np.testing.assert_allclose(y, ring(x, 3), rtol=1e-13)


@needs_lld
@pytest.mark.parametrize("arch", ["gfx942", "gfx1100"])
def test_local_arrays_compile_for_amd_in_primal_reverse_and_forward(captured, arch):
    for kernel in (local_ring, ado.vjp(local_ring, ["x"]), ado.jvp(local_ring, ["x"])):
        hsaco = kernel.compiled("amdgpu", arch=arch).hsaco
        assert hsaco[:4] == b"\x7fELF" and len(amdgpu.kernel_descriptors(hsaco)) == 1, kernel
        text = captured[-1]
        assert re.search(r"= alloca \[64 x double\]", text), "the local array is not an alloca: nothing tested"
        assert _private_segment(text, arch) >= 512, kernel         # 64 doubles in scratch


@needs_lld
def test_hip_local_arrays_compile_for_amd(captured):
    hip = ado.from_hip(HIP_RING)
    k = hip.kernel("hip_ring", x=ado.In[ado.f64], y=ado.Out[ado.f64], s=ado.i32, n=ado.i32)
    x = np.linspace(0.1, 1.5, 40)
    y = np.zeros(40)
    k(x, y, 3, 40, blocks=1, threads=64)                          # on the host first: the same values
    np.testing.assert_allclose(y, ring(x, 3), rtol=1e-13)
    for kernel in (k, ado.vjp(k, wrt=["x"])):
        hsaco = kernel.specialize((64,)).compiled("amdgpu", arch="gfx942").hsaco   # 64 threads a block
        assert hsaco[:4] == b"\x7fELF" and len(amdgpu.kernel_descriptors(hsaco)) == 1, kernel
        assert "alloca" in captured[-1]
        assert _private_segment(captured[-1], "gfx942") >= 512, kernel
