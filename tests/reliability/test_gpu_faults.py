"""Faults on an NVIDIA GPU, through kernels (the runtime's own fault tests live in tests/runtime).

These skip without a CUDA GPU/driver; the lead runs them on an H200. A real device fault
ruins the CUDA context for the whole process, so that test runs in child processes.
"""
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import adoffload as ado
from adoffload.errors import BoundsError, KernelFaultError, OutOfMemoryError
from adoffload.runtime import device_count

HAS_CUDA = device_count("cuda") > 0
pytestmark = pytest.mark.skipif(not HAS_CUDA, reason="no CUDA GPU/driver found")
ROOT = Path(__file__).resolve().parents[2]


@ado.kernel
def shifted(x: ado.In[ado.f64], out: ado.Out[ado.f64]):
    i = ado.tid()
    out[i] = x[i + 1]


@ado.kernel
def scale(a: ado.f64, x: ado.In[ado.f64], out: ado.Out[ado.f64]):
    i = ado.tid()
    out[i] = a * x[i]


def test_out_of_bounds_on_the_gpu_is_a_bounds_error_and_later_launches_work():
    x = np.arange(1000.0)
    for _ in range(3):
        with pytest.raises(BoundsError, match="index 1000 is out of bounds for axis 0 of array 'x'"):
            shifted(x, np.zeros(1000), grid=1000, device="cuda")
        out = np.zeros(1000)
        scale(2.0, x, out, grid=1000, device="cuda")
        np.testing.assert_array_equal(out, 2.0 * x)
    out = np.zeros(999)
    shifted(x, out, grid=999, device="cuda")
    np.testing.assert_array_equal(out, x[1:])


FAULT_SCRIPT = textwrap.dedent("""
    import numpy as np
    import adoffload as ado
    from adoffload.errors import KernelFaultError

    @ado.kernel(bounds_check=False)
    def wild(x: ado.Out[ado.f64]):
        i = ado.tid()
        x[i + 1099511627776] = 1.0          # 8 TiB past the array: no such memory

    try:
        wild(np.zeros(256), grid=256, device="cuda")
        print("NO FAULT")
    except KernelFaultError as exc:
        print("FAULT|" + str(exc).replace("\\n", " "))
    try:
        wild(np.zeros(4), grid=1, device="cuda")
        print("SECOND LAUNCH RAN")
    except KernelFaultError as exc:
        print("REFUSED|" + str(exc).replace("\\n", " "))
""")

HEALTHY_SCRIPT = textwrap.dedent("""
    import numpy as np
    import adoffload as ado

    @ado.kernel
    def twice(x: ado.In[ado.f64], out: ado.Out[ado.f64]):
        i = ado.tid()
        out[i] = 2.0 * x[i]

    out = np.zeros(64)
    twice(np.arange(64.0), out, grid=64, device="cuda")
    print("HEALTHY" if (out == 2.0 * np.arange(64.0)).all() else "WRONG")
""")


def _run(script: str, folder: Path) -> str:
    path = folder / "script.py"          # kernels must live in a file the front end can read
    path.write_text(script)
    run = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    return run.stdout + run.stderr


def test_a_real_device_fault_is_a_kernel_fault_error_that_says_restart(tmp_path):
    text = _run(FAULT_SCRIPT, tmp_path)
    fault = next((line for line in text.splitlines() if line.startswith("FAULT|")), None)
    assert fault is not None, text
    assert "CUDA_ERROR_" in fault and "restart the process" in fault, fault
    refused = next((line for line in text.splitlines() if line.startswith("REFUSED|")), None)
    assert refused is not None and "unusable" in refused, text
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    assert "HEALTHY" in _run(HEALTHY_SCRIPT, fresh)            # a new process works


def test_device_out_of_memory_is_an_error_and_leaks_nothing():
    dev = ado.runtime.get_device("cuda")
    dev.allocator.empty_cache()
    free_before, total = dev.memory_info()
    in_use = dev.allocator.stats.in_use_bytes
    x = np.arange(1 << 20, dtype=np.float64)               # 8 MiB per array
    for _ in range(20):
        with pytest.raises(OutOfMemoryError):
            dev.allocate(total + (1 << 30))
        # the device nearly full: the launcher's own allocations fail half way through a launch
        hog = None
        try:
            hog = dev.allocate(dev.memory_info()[0] - (12 << 20))
        except OutOfMemoryError:
            pass
        if hog is not None:
            with pytest.raises(OutOfMemoryError):
                scale(2.0, x, np.zeros_like(x), grid=x.size, device="cuda")
            dev.free(hog)
    dev.allocator.empty_cache()
    assert dev.allocator.stats.in_use_bytes == in_use
    free_after, _ = dev.memory_info()
    assert free_after >= free_before - (16 << 20), (free_before, free_after)
    out = np.zeros_like(x)                                  # and the device still works
    scale(2.0, x, out, grid=x.size, device="cuda")
    np.testing.assert_array_equal(out, 2.0 * x)


@ado.kernel
def read_before_assigned(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    if x[i] > 0.0:
        q = x[i] * 3.0
    y[i] = q


def test_a_read_of_an_unassigned_variable_on_the_gpu_names_its_line():
    """The UNASSIGNED status goes through the GPU's status record as on the host (launcher and JAX)."""
    x = np.array([3.0, -1.0, 2.0, 0.0, 5.0])
    for _ in range(2):
        with pytest.raises(KernelFaultError, match="UnboundLocalError") as info:
            read_before_assigned(x, np.zeros_like(x), grid=x.size, device="cuda")
        assert "y[i] = q" in str(info.value)
        y = np.zeros_like(x)
        read_before_assigned(np.abs(x) + 1.0, y, grid=x.size, device="cuda")
        np.testing.assert_array_equal(y, 3.0 * (np.abs(x) + 1.0))


@ado.kernel
def read_before_assigned_f32(x: ado.In[ado.f32], y: ado.Out[ado.f32]):
    i = ado.tid()
    if x[i] > 0.0:
        q = x[i] * 3.0
    y[i] = q


def test_a_read_of_an_unassigned_variable_under_jax_on_the_gpu():
    jax = pytest.importorskip("jax")
    try:
        gpu = jax.devices("gpu")[0]
    except RuntimeError:
        pytest.skip("JAX has no GPU backend here")
    f = jax.jit(ado.jax_kernel(read_before_assigned_f32))
    with pytest.raises(Exception, match="a variable was read at line"):
        np.asarray(f(jax.device_put(np.array([3.0, -1.0, 2.0], np.float32), gpu)))
    good = np.array([3.0, 1.0, 2.0], np.float32)
    np.testing.assert_array_equal(np.asarray(f(jax.device_put(good, gpu))), 3.0 * good)
