"""PTX -> cubin with ptxas (codegen/gpu/cubin.py): the cubin, its cache, and every fallback to the driver JIT.

Runs without a GPU (ptxas is a host program); tests that need ptxas skip where it is not installed.
"""
import concurrent.futures
import logging
import subprocess
import threading

import pytest

import adoffload as ado
from adoffload.codegen import compile_for_target
from adoffload.codegen.cache import CompileCache
from adoffload.codegen.gpu import cubin, tools
from adoffload.errors import DeviceError, ToolNotFoundError

from . import bodies


def _ptxas_or_skip():
    try:
        return tools.find_ptxas()
    except ToolNotFoundError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def ptx():
    try:
        tools.find_libdevice()
    except ToolNotFoundError as exc:
        pytest.skip(str(exc))
    return compile_for_target(bodies.AXPY, "axpy", bodies.AXPY_TYPES, 1, "nvptx", "sm_80", cache=False)


def test_ptxas_makes_a_cubin_and_the_cache_keeps_it(ptx, tmp_path, monkeypatch):
    _ptxas_or_skip()
    store = CompileCache(tmp_path)
    runs = cubin.STATS["ptxas_runs"]
    first = cubin.start_cubin(ptx, "sm_80", cache=store)
    data = first.result()
    assert data[:4] == b"\x7fELF" and not first.cached and first.reason is None
    assert cubin.STATS["ptxas_runs"] == runs + 1
    assert first.result() is data                      # waits once

    def no_ptxas(*args, **kwargs):
        raise AssertionError("a cache hit must not run ptxas")
    monkeypatch.setattr(subprocess, "Popen", no_ptxas)
    again = cubin.start_cubin(ptx, "sm_80", cache=store)
    assert again.cached and again.result() == data
    assert not list(tmp_path.rglob(".tmp-*"))


def test_the_cache_key_holds_arch_and_ptx(ptx, tmp_path):
    _ptxas_or_skip()
    store = CompileCache(tmp_path)
    a = cubin.cubin_for(ptx, "sm_80", cache=store)
    b = cubin.start_cubin(ptx, "sm_90", cache=store)
    assert not b.cached and b.result() != a            # another architecture, another cubin
    c = cubin.start_cubin(ptx.replace("// ", "//  ", 1), "sm_80", cache=store)
    assert not c.cached and c.result()[:4] == b"\x7fELF"


def test_an_optimization_level_is_its_own_cache_entry(ptx, tmp_path, monkeypatch):
    _ptxas_or_skip()
    store = CompileCache(tmp_path)
    cubin.cubin_for(ptx, "sm_80", cache=store)
    monkeypatch.setenv(cubin.PTXAS_OPT_ENV, "1")
    low = cubin.start_cubin(ptx, "sm_80", cache=store)
    assert not low.cached and low.result()[:4] == b"\x7fELF"


def test_no_ptxas_falls_back_with_the_reason_logged(ptx, monkeypatch, caplog):
    def missing():
        raise ToolNotFoundError("ptxas not found: install the CUDA extra")
    monkeypatch.setattr(tools, "find_ptxas", missing)
    with caplog.at_level(logging.DEBUG, logger=cubin.__name__):
        pending = cubin.start_cubin(ptx, "sm_80", cache=False)
        assert pending.result() is None
    assert "ptxas unavailable" in pending.reason and "ptxas not found" in pending.reason
    assert any("driver JIT loads the PTX" in r.getMessage() and "ptxas not found" in r.getMessage()
               for r in caplog.records)


def test_the_environment_switch_disables_ptxas(ptx, monkeypatch):
    monkeypatch.setenv(cubin.PTXAS_ENV, "0")

    def no_ptxas(*args, **kwargs):
        raise AssertionError("ADOFFLOAD_PTXAS=0 must not run ptxas")
    monkeypatch.setattr(subprocess, "Popen", no_ptxas)
    pending = cubin.start_cubin(ptx, "sm_80", cache=False)
    assert pending.result() is None and cubin.PTXAS_ENV in pending.reason


def test_ptxas_rejecting_the_ptx_falls_back_and_caches_nothing(tmp_path, caplog):
    _ptxas_or_skip()
    store = CompileCache(tmp_path)
    bad = ".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry k() { this is not ptx; }\n"
    with caplog.at_level(logging.DEBUG, logger=cubin.__name__):
        pending = cubin.start_cubin(bad, "sm_80", cache=store)
        assert pending.result() is None
    assert pending.reason.startswith("ptxas exited") and "error" in pending.reason.lower()
    assert not list(tmp_path.rglob("*.bin")) and not list(tmp_path.rglob(".tmp-*"))


def test_a_corrupt_cache_entry_is_assembled_again(ptx, tmp_path):
    _ptxas_or_skip()
    store = CompileCache(tmp_path)
    good = cubin.cubin_for(ptx, "sm_80", cache=store)
    (entry,) = list(tmp_path.rglob("*.bin"))
    entry.write_bytes(entry.read_bytes()[:-7])
    again = cubin.start_cubin(ptx, "sm_80", cache=store)
    assert not again.cached and again.result() == good


class _Loader:
    def __init__(self, refuse_cubin=False):
        self.images, self.refuse_cubin = [], refuse_cubin

    def __call__(self, image):
        self.images.append(image)
        if self.refuse_cubin and isinstance(image, bytes):
            raise DeviceError("cuModuleLoadData failed: CUDA_ERROR_UNSUPPORTED_PTX_VERSION")
        return f"module of {type(image).__name__}"


def test_load_prefers_the_cubin(ptx, tmp_path):
    _ptxas_or_skip()
    load = _Loader()
    pending = cubin.start_cubin(ptx, "sm_80", cache=CompileCache(tmp_path))
    assert cubin.load_cuda_module(ptx, "sm_80", load, pending) == "module of bytes"
    assert len(load.images) == 1 and load.images[0][:4] == b"\x7fELF"


def test_a_refused_cubin_falls_back_to_the_ptx(ptx, tmp_path, caplog):
    _ptxas_or_skip()
    load = _Loader(refuse_cubin=True)
    with caplog.at_level(logging.DEBUG, logger=cubin.__name__):
        module = cubin.load_cuda_module(ptx, "sm_80", load, cubin.start_cubin(ptx, "sm_80", cache=CompileCache(tmp_path)))
    assert module == "module of str" and load.images[-1] == ptx and len(load.images) == 2
    assert any("refused the cubin" in r.getMessage() for r in caplog.records)


def test_a_sticky_fault_loading_the_cubin_is_raised_not_retried(ptx, tmp_path):
    from adoffload.errors import KernelFaultError
    _ptxas_or_skip()
    images = []

    def broken_context(image):
        images.append(image)
        raise KernelFaultError("cuModuleLoadData failed: CUDA_ERROR_ILLEGAL_ADDRESS (700)")
    with pytest.raises(KernelFaultError, match="ILLEGAL_ADDRESS"):
        cubin.load_cuda_module(ptx, "sm_80", broken_context, cubin.start_cubin(ptx, "sm_80", cache=CompileCache(tmp_path)))
    assert len(images) == 1 and isinstance(images[0], bytes)


def test_without_a_cubin_the_ptx_is_loaded(ptx, monkeypatch):
    monkeypatch.setenv(cubin.PTXAS_ENV, "0")
    load = _Loader()
    assert cubin.load_cuda_module(ptx, "sm_80", load) == "module of str" and load.images == [ptx]


def test_a_driver_error_loading_the_ptx_is_raised(ptx, monkeypatch):
    monkeypatch.setenv(cubin.PTXAS_ENV, "0")

    def refuse(image):
        raise DeviceError("cuModuleLoadData failed: the PTX JIT failed")
    with pytest.raises(DeviceError, match="PTX JIT failed"):
        cubin.load_cuda_module(ptx, "sm_80", refuse)


def test_concurrent_assemblies_of_one_ptx_agree(ptx, tmp_path):
    _ptxas_or_skip()
    store = CompileCache(tmp_path)
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: cubin.cubin_for(ptx, "sm_80", cache=store), range(4)))
    assert results[0][:4] == b"\x7fELF" and all(r == results[0] for r in results)
    assert len(list(tmp_path.rglob("*.bin"))) == 1 and not list(tmp_path.rglob(".tmp-*"))
    assert cubin.start_cubin(ptx, "sm_80", cache=store).cached


def test_compile_cache_under_threads_never_returns_a_torn_entry(tmp_path):
    store = CompileCache(tmp_path)
    barrier = threading.Barrier(6)

    def work(worker):
        barrier.wait()
        for r in range(30):
            payload = f"worker {worker} round {r} ".encode() * 3000
            assert store.put(["shared"], payload)
            got = store.get(["shared"])
            if got is not None:        # one writer's whole payload, never a mix or a prefix
                unit = got[:got.index(b" ", got.index(b"round ") + 6) + 1]
                assert got.startswith(b"worker ") and got == unit * 3000
            assert store.put([f"own {worker}"], payload) and store.get([f"own {worker}"]) == payload
        return True
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        assert all(pool.map(work, range(6)))
    assert store.get(["shared"]).startswith(b"worker ")
    assert not list(tmp_path.rglob(".tmp-*"))


def test_compiled_starts_ptxas_once_per_arch(tmp_path, monkeypatch):
    _ptxas_or_skip()
    try:
        tools.find_libdevice()
    except ToolNotFoundError as exc:
        pytest.skip(str(exc))
    monkeypatch.setenv("ADOFFLOAD_CACHE_DIR", str(tmp_path))

    @ado.kernel
    def scale(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
        i = ado.tid()
        y[i] = 2.0 * x[i]
    compiled = scale.compiled("nvptx", arch="sm_90")
    first = compiled.pending_cubin("sm_90")
    assert compiled.pending_cubin("sm_90") is first
    assert first.result()[:4] == b"\x7fELF"
    load = _Loader()
    assert compiled.load_cuda("sm_90", load) == "module of bytes"
    assert load.images[0] == first.result()


@pytest.mark.gpu
def test_a_cuda_launch_runs_the_cubin_and_the_driver_jit_alike(cuda, tmp_path, monkeypatch):
    import numpy as np
    _ptxas_or_skip()
    monkeypatch.setenv("ADOFFLOAD_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("ADOFFLOAD_PTXAS_TIERED", "0")      # one ptxas run (tiering: tests/gpu/test_tiered_cubin.py)
    x = np.arange(1000, dtype=np.float64)
    results = {}
    for switch in ("1", "0"):
        monkeypatch.setenv(cubin.PTXAS_ENV, switch)

        @ado.kernel
        def scale(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
            i = ado.tid()
            y[i] = 2.5 * x[i] + 1.0
        runs, falls = cubin.STATS["ptxas_runs"], cubin.STATS["fallbacks"]
        y = np.zeros_like(x)
        scale(x, y, grid=x.size, device="cuda")
        results[switch] = y
        if switch == "1":
            assert cubin.STATS["ptxas_runs"] == runs + 1 and cubin.STATS["fallbacks"] == falls
        else:
            assert cubin.STATS["ptxas_runs"] == runs and cubin.STATS["fallbacks"] == falls + 1
    np.testing.assert_array_equal(results["1"], 2.5 * x + 1.0)
    np.testing.assert_array_equal(results["0"], results["1"])
