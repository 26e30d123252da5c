"""A local array too large for a thread's memory is refused before it runs, with its size and
the target's limit; it used to overflow the host stack and kill the process (issue 14, item 2)."""
from __future__ import annotations

import numpy as np
import pytest

import adoffload as ado
from adoffload.kernels.local_memory import LOCAL_MEMORY_LIMITS, local_memory_bytes


@ado.kernel
def huge_local(x: ado.In[ado.f64], k: ado.In[ado.i64], out: ado.Out[ado.f64]):
    i = ado.tid()
    t = ado.zeros(4_000_000, ado.f64)           # 32 MB per thread
    for j in range(k[i]):
        t[j] = x[i] * float(j)
    out[i] = t[k[i] // 2]


@ado.kernel
def large_local(x: ado.In[ado.f64], k: ado.In[ado.i64], out: ado.Out[ado.f64]):
    i = ado.tid()
    t = ado.zeros(100_000, ado.f64)             # 800 kB: fits the host limit
    for j in range(k[i]):
        t[j] = x[i] * float(j)
    out[i] = t[k[i] // 2]


def test_huge_local_array_is_refused_with_size_and_limit():
    with pytest.raises(ado.CompilationError) as info:
        huge_local(np.ones(4), np.full(4, 10), np.zeros(4), grid=4)
    message = str(info.value)
    assert "kernel 'huge_local'" in message and "32000000 bytes" in message
    assert f"{LOCAL_MEMORY_LIMITS['host']} bytes allowed on target 'host'" in message
    assert "nvptx 524288 bytes" in message


def test_large_local_array_under_the_limit_runs():
    out = np.zeros(64)
    large_local(np.arange(64.0), np.full(64, 10), out, grid=64)
    np.testing.assert_array_equal(out, np.arange(64.0) * 5.0)


def test_local_memory_is_counted_from_the_ir():
    assert local_memory_bytes("%a = alloca [4 x [3 x float]], align 4\n%b = alloca double, i64 10, align 8") == 128
    assert local_memory_bytes(huge_local.module_text()) == 32_000_000


def test_gpu_limits_are_checked_at_compile_time_without_a_gpu():
    pytest.importorskip("llvmlite")
    with pytest.raises(ado.CompilationError, match="allowed on target 'nvptx'"):
        large_local.compiled("nvptx", arch="sm_90")
