"""The CUDA device. Absence is tested here (no GPU on CI); the real device tests run where
a GPU is found (the lead runs them on an H200) and skip elsewhere."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from adoffload.errors import DeviceNotFoundError, GridError, OutOfMemoryError
from adoffload.runtime import available_devices, device_count, get_device
from adoffload.runtime.gpu import launch_grid

from .gpu_kernels import scale_ptx

HAS_CUDA = device_count("cuda") > 0
gpu = pytest.mark.skipif(not HAS_CUDA, reason="no CUDA GPU/driver found")


@pytest.mark.skipif(HAS_CUDA, reason="a CUDA GPU is present")
def test_absent_cuda_raises_device_not_found():
    with pytest.raises(DeviceNotFoundError, match="cuInit|driver|cuda-python"):
        get_device("cuda")
    with pytest.raises(DeviceNotFoundError):       # and again: the failure is remembered
        get_device("cuda:1")
    assert [d.kind for d in available_devices()] == ["cpu"]


def test_absent_hip_raises_device_not_found():
    if device_count("hip"):
        pytest.skip("a HIP GPU is present")
    with pytest.raises(DeviceNotFoundError, match="hip"):
        get_device("hip")


@pytest.mark.parametrize("total, block, max_x", [(10, 4, 2**31 - 1), (1000, 32, 3), (1000, 32, 7), (1, 256, 1)])
def test_launch_grid_covers_the_threads(total, block, max_x):
    gx, gy = launch_grid(total, block, max_x=max_x)
    assert gx <= max_x and gx * gy * block >= total
    assert (gx * gy - 1) * block < total + gx * block    # no extra row of blocks


def test_launch_grid_too_large():
    with pytest.raises(GridError):
        launch_grid(10**9, 1, max_x=10, max_y=10)


def test_scale_ptx_assembles_for_sm90():
    tools = pytest.importorskip("adoffload.codegen.gpu.tools")
    try:
        ptxas = tools.find_ptxas()
    except Exception as exc:
        pytest.skip(f"no ptxas: {exc}")
    ptx = scale_ptx("sm_90")
    run = subprocess.run([str(ptxas), "-arch=sm_90", "-o", "/dev/null", "-"], input=ptx.encode(),
                         capture_output=True)
    if run.returncode != 0:      # older ptxas builds do not read stdin
        import tempfile
        with tempfile.NamedTemporaryFile("w", suffix=".ptx") as f:
            f.write(ptx)
            f.flush()
            run = subprocess.run([str(ptxas), "-arch=sm_90", "-o", "/dev/null", f.name], capture_output=True)
    assert run.returncode == 0, run.stderr.decode()


# --- on a real GPU -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def cuda():
    return get_device("cuda")


@pytest.fixture(scope="module")
def scale(cuda):
    return cuda.load_module(scale_ptx(cuda.arch)).function("scale")


def _slots(out_ptr: int, a: float, n: int, status_ptr: int) -> np.ndarray:
    slots = np.zeros(4, np.uint64)
    slots[0], slots[2], slots[3] = out_ptr, n, status_ptr
    slots[1:2].view(np.float32)[0] = a          # a float scalar lives in the slot's low bytes
    return slots


@gpu
@pytest.mark.parametrize("n, block", [(1, None), (1000, None), (1 << 20, 128), (777, 1024)])
def test_launch_writes_every_thread(cuda, scale, n, block):
    out = cuda.allocate(4 * (n + 64))
    cuda.memset(out, 0xFF)
    status = cuda.to_device(np.zeros(4, np.int64))
    cuda.launch(scale, n, _slots(out.ptr, 0.5, n, status.ptr), block_size=block)
    host = np.empty(n + 64, np.float32)
    cuda.copy_to_host(out, host)
    np.testing.assert_array_equal(host[:n], 0.5 * np.arange(n, dtype=np.float32))
    assert np.isnan(host[n:]).all()              # 0xFFFFFFFF: untouched past the grid
    cuda.free(out)
    cuda.free(status)


@gpu
def test_two_dimensional_grid_fallback(cuda, scale, monkeypatch):
    import adoffload.runtime.gpu as gpu_module
    real = gpu_module.launch_grid
    monkeypatch.setattr(gpu_module, "launch_grid", lambda total, block: real(total, block, max_x=5))
    n = 1000
    out = cuda.allocate(4 * n)
    cuda.launch(scale, n, _slots(out.ptr, 2.0, n, 0), block_size=32)   # 32 blocks as 5 x 7
    host = np.empty(n, np.float32)
    cuda.copy_to_host(out, host)
    np.testing.assert_array_equal(host, 2.0 * np.arange(n, dtype=np.float32))


@gpu
def test_streams_events_and_async_copies(cuda, scale):
    n = 1 << 16
    stream = cuda.stream()
    out = cuda.allocate(4 * n)
    start, stop = cuda.event(), cuda.event()
    start.record(stream)
    cuda.launch(scale, n, _slots(out.ptr, 3.0, n, 0), stream=stream)
    stop.record(stream)
    host = np.empty(n, np.float32)
    cuda.copy_to_host(out, host, stream=stream)
    stream.synchronize()
    assert start.elapsed_ms(stop) >= 0
    np.testing.assert_array_equal(host, 3.0 * np.arange(n, dtype=np.float32))


@gpu
def test_allocations_are_reused(cuda):
    first = cuda.allocate(3000)
    ptr = first.ptr
    cuda.free(first)
    again = cuda.allocate(2500)
    assert again.ptr == ptr and cuda.allocator.stats.reuses >= 1
    cuda.free(again)


@gpu
def test_out_of_memory_raises_and_leaks_nothing(cuda):
    in_use = cuda.allocator.stats.in_use_bytes
    free_before, total = cuda.memory_info()
    with pytest.raises(OutOfMemoryError, match="CUDA_ERROR_OUT_OF_MEMORY"):
        cuda.allocate(total + (1 << 30))
    assert cuda.allocator.stats.in_use_bytes == in_use
    free_after, _ = cuda.memory_info()
    assert free_after >= free_before - (64 << 20)
    small = cuda.allocate(1024)                  # the device still works
    cuda.free(small)


@gpu
def test_bad_ptx_reports_the_jit_log(cuda):
    from adoffload.errors import DeviceError
    with pytest.raises(DeviceError, match="cuModuleLoad"):
        cuda.load_module(".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k() { bogus; }\n")


@gpu
def test_kernel_fault_is_reported_and_latched():
    # A fault ruins the CUDA context, so it runs in a fresh process.
    script = textwrap.dedent("""
        import numpy as np
        from adoffload.errors import KernelFaultError
        from adoffload.runtime import get_device
        from tests.runtime.gpu_kernels import scale_ptx
        dev = get_device("cuda")
        fn = dev.load_module(scale_ptx(dev.arch)).function("scale")
        slots = np.array([0x10, 0, 1024, 0], np.uint64)
        try:
            dev.launch(fn, 1024, slots)
            dev.synchronize()
            print("NO FAULT")
        except KernelFaultError as exc:
            print("FAULT", exc.driver_error if hasattr(exc, "driver_error") else "")
        try:
            dev.allocate(16)
            print("NOT LATCHED")
        except KernelFaultError:
            print("LATCHED")
        try:
            dev.reset()
            fn = dev.load_module(scale_ptx(dev.arch)).function("scale")
            out = dev.allocate(4 * 8)
            slots = np.array([out.ptr, 0, 8, 0], np.uint64)
            slots[1:2].view(np.float32)[0] = 1.0
            dev.launch(fn, 8, slots)
            host = np.empty(8, np.float32)
            dev.copy_to_host(out, host)
            print("RESET", "OK" if (host == np.arange(8)).all() else "WRONG")
        except Exception as exc:
            print("RESET FAILED", type(exc).__name__, exc)
    """)
    root = Path(__file__).resolve().parents[2]
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=root)
    lines = run.stdout.split("\n")
    assert any(line.startswith("FAULT CUDA_ERROR_") for line in lines), run.stdout + run.stderr
    assert "LATCHED" in lines, run.stdout + run.stderr
    # Either the driver recovers, or reset() says the process must restart (driver 580 does).
    assert ("RESET OK" in lines or any(line.startswith("RESET FAILED KernelFaultError") and "restart" in line
                                       for line in lines)), run.stdout + run.stderr


@gpu
def test_dlpack_with_cupy(cuda, scale):
    cupy = pytest.importorskip("cupy")
    from adoffload.runtime.dlpack import DeviceArray, as_device_array
    ours = DeviceArray.from_numpy(np.arange(10, dtype=np.float32), device=cuda)
    theirs = cupy.from_dlpack(ours)
    assert theirs.data.ptr == ours.ptr
    np.testing.assert_array_equal(cupy.asnumpy(theirs), np.arange(10, dtype=np.float32))
    target = cupy.zeros(100, dtype=cupy.float32)
    seen = as_device_array(target)
    assert seen.device == f"cuda:{cuda.ordinal}" and seen.ptr == target.data.ptr and seen.shape == (100,)
    cuda.launch(scale, 100, _slots(seen.ptr, 4.0, 100, 0))      # write into CuPy's memory
    cuda.synchronize()
    np.testing.assert_array_equal(cupy.asnumpy(target), 4.0 * np.arange(100, dtype=np.float32))


@gpu
def test_dlpack_with_jax_gpu(cuda):
    jax = pytest.importorskip("jax")
    if not any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("JAX has no GPU backend here")
    import jax.numpy as jnp
    from adoffload.runtime.dlpack import DeviceArray, as_device_array
    x = jax.device_put(jnp.arange(16, dtype=jnp.float32), jax.devices("gpu")[0])
    seen = as_device_array(x)
    assert seen.device.startswith("cuda") and seen.shape == (16,) and seen.dtype == np.float32
    host = np.empty(16, np.float32)
    cuda.copy_to_host(seen.as_buffer(), host)
    np.testing.assert_array_equal(host, np.arange(16, dtype=np.float32))
    ours = DeviceArray.from_numpy(np.full(8, 2.5, np.float32), device=cuda)
    y = jax.dlpack.from_dlpack(ours)
    assert float(jnp.sum(y)) == 20.0
