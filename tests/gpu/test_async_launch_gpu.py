"""Launches on arrays already on a CUDA GPU return before their kernels end (kernels/launch_run.py
``_launch_in_place``); their errors come through the status ring in mapped host memory
(runtime/status_ring.py) at the next launch, ``synchronize()`` or copy to the host, and at exit.
Skipped without a CUDA GPU (tests/runtime/test_async_launch.py checks the same on the host)."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import adoffload as ado
from adoffload.runtime.dlpack import DeviceArray

ROOT = Path(__file__).resolve().parents[2]


@ado.kernel
def shifted(x: ado.In[ado.f32], out: ado.Out[ado.f32]):
    i = ado.tid()
    out[i] = x[i + 1]


@ado.kernel
def saxpy(a: ado.f32, x: ado.In[ado.f32], y: ado.InOut[ado.f32]):
    i = ado.tid()
    y[i] = a * x[i] + y[i]


@pytest.fixture
def asynchronous(monkeypatch):
    monkeypatch.delenv("ADOFFLOAD_SYNC_LAUNCH", raising=False)


def test_device_array_errors_come_at_synchronize_the_next_launch_and_the_copy_back(cuda, asynchronous):
    n = 1 << 16
    x = DeviceArray.from_numpy(np.arange(n, dtype=np.float32), device=cuda)
    out = DeviceArray.empty(n, np.float32, device=cuda)
    shifted(x, out, grid=n - 1, device="cuda")          # the first launch of the signature (full path)
    shifted(x, out, grid=n - 1, device="cuda")
    np.testing.assert_array_equal(out.to_numpy()[:n - 1], np.arange(1, n, dtype=np.float32))
    assert cuda.status_ring() is not None
    for report in ("synchronize", "launch", "copy"):
        shifted(x, out, grid=n, device="cuda")         # the last thread reads x[n]
        with pytest.raises(ado.BoundsError) as info:
            if report == "synchronize":
                cuda.synchronize()
            elif report == "launch":
                shifted(x, out, grid=n - 1, device="cuda")
            else:
                out.to_numpy()
        text = str(info.value)
        assert f"kernel 'shifted': index {n} is out of bounds for axis 0 of array 'x' with shape ({n},)" in text
        assert "reported after the launch" in text, text
        cuda.synchronize()                              # reported once
    shifted(x, out, grid=n - 1, device="cuda")
    np.testing.assert_array_equal(out.to_numpy()[:n - 1], np.arange(1, n, dtype=np.float32))
    assert cuda.fault is None
    for array in (x, out):
        cuda.free(array.buffer)


def test_the_synchronous_switch_reports_at_the_launch(cuda, monkeypatch):
    x = DeviceArray.from_numpy(np.arange(64, dtype=np.float32), device=cuda)
    out = DeviceArray.empty(64, np.float32, device=cuda)
    monkeypatch.setenv("ADOFFLOAD_SYNC_LAUNCH", "1")
    for _ in range(2):
        with pytest.raises(ado.BoundsError) as info:
            shifted(x, out, grid=64, device="cuda")
        assert "reported after the launch" not in str(info.value)
    for array in (x, out):
        cuda.free(array.buffer)


def test_cupy_launches_past_the_ring_stay_in_order_and_right(cuda, asynchronous):
    cp = pytest.importorskip("cupy")
    n = 4096
    x, y = cp.arange(n, dtype=cp.float32), cp.zeros(n, cp.float32)
    launches = 3 * cuda.status_ring().count + 7      # the ring fills three times
    for _ in range(launches):
        saxpy(np.float32(1.0), x, y, grid=n, device="cuda")
    np.testing.assert_array_equal(cp.asnumpy(y), launches * np.arange(n, dtype=np.float32))
    short = cp.arange(n - 1, dtype=cp.float32)
    shifted(short, y, grid=n - 1, device="cuda")
    with pytest.raises(ado.BoundsError, match=f"index {n - 1} is out of bounds .* array 'x'"):
        cuda.synchronize()


def test_cupy_on_its_own_stream_launches_synchronously(cuda, asynchronous):
    cp = pytest.importorskip("cupy")
    n = 256
    x, out = cp.arange(n, dtype=cp.float32), cp.zeros(n, cp.float32)
    with cp.cuda.Stream(non_blocking=True):
        x2 = x * 2                                      # queued on CuPy's stream
        for _ in range(2):
            with pytest.raises(ado.BoundsError) as info:   # DLPack orders the stream; the launch waits
                shifted(x2, out, grid=n, device="cuda")
            assert "reported after the launch" not in str(info.value)
        shifted(x2, out, grid=n - 1, device="cuda")
    np.testing.assert_array_equal(cp.asnumpy(out)[:n - 1], 2 * np.arange(1, n, dtype=np.float32))


def test_a_vjp_on_cupy_arrays_matches_the_numpy_launch(cuda, asynchronous):
    cp = pytest.importorskip("cupy")
    n = 1000
    reverse = ado.vjp(saxpy, ["a", "x"])
    rng = np.random.default_rng(4)
    x, y, seed = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    host = {"d_a": np.zeros(1, np.float32), "d_x": np.zeros(n, np.float32)}
    names = [p.name for p in reverse.signature.visible_params]

    def arguments(values, zeros, seed_array):
        base = {"a": np.float32(1.5), "x": values[0], "y": values[1], "d_y": seed_array}
        return [base[k] if k in base else zeros[k] for k in names]
    reverse(*arguments((x, y.copy()), host, seed.copy()), grid=n, device="cuda")
    gpu = {k: cp.zeros_like(cp.asarray(v)) for k, v in host.items()}
    for _ in range(2):               # d_a, d_x are InOut: the second launch adds the same gradient again
        reverse(*arguments((cp.asarray(x), cp.asarray(y)), gpu, cp.asarray(seed)), grid=n, device="cuda")
    assert np.abs(host["d_x"]).max() > 0.1
    for k in host:
        np.testing.assert_allclose(cp.asnumpy(gpu[k]), 2 * host[k], rtol=1e-5, atol=1e-4)


def _script(body: str) -> subprocess.CompletedProcess:
    script = textwrap.dedent("""
        import os
        os.environ.pop("ADOFFLOAD_SYNC_LAUNCH", None)
        import numpy as np
        import adoffload as ado
        from adoffload.runtime import get_device
        from adoffload.runtime.dlpack import DeviceArray
        dev = get_device("cuda")
    """) + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180, cwd=ROOT)


def test_an_error_never_reported_is_printed_at_exit(cuda):
    run = _script("""
        @ado.kernel
        def shifted(x: ado.In[ado.f32], out: ado.Out[ado.f32]):
            i = ado.tid()
            out[i] = x[i + 1]
        x = DeviceArray.from_numpy(np.arange(64, dtype=np.float32), device=dev)
        out = DeviceArray.empty(64, np.float32, device=dev)
        shifted(x, out, grid=63, device="cuda")
        shifted(x, out, grid=64, device="cuda")
        print("RETURNED")
    """)
    assert "RETURNED" in run.stdout, run.stdout + run.stderr
    assert "was not reported before exit: BoundsError: kernel 'shifted': index 64" in run.stderr, run.stderr


def test_a_sticky_fault_of_an_asynchronous_launch_is_an_exception(cuda):
    run = _script("""
        @ado.kernel(bounds_check=False)
        def wild(x: ado.Out[ado.f32]):
            i = ado.tid()
            x[i + 1099511627776] = 1.0          # 8 TiB past the array: no such memory
        x = DeviceArray.empty(256, np.float32, device=dev)
        try:
            for _ in range(3):
                wild(x, grid=256, device="cuda")
            dev.synchronize()
            print("NO FAULT")
        except ado.KernelFaultError as exc:
            print("FAULT", type(exc).__name__, exc)
    """)
    assert "FAULT KernelFaultError" in run.stdout and "CUDA_ERROR_" in run.stdout, run.stdout + run.stderr
