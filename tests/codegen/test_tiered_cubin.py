"""Tiered assembly (codegen/gpu/tiered.py): -O1 first, -O3 in the background, the swap, its failures.

A stand-in ptxas (a Python script) writes an "ELF" naming its level; the -O3 run can be held at a
gate file or made to fail, so the order of events is the test's. Runs without a GPU: the loaders
are fakes, except where marked (the real ptxas, when installed).
"""
import logging
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from adoffload.codegen.cache import CompileCache
from adoffload.codegen.gpu import cubin, tiered, tools
from adoffload.errors import DeviceError, ToolNotFoundError
from adoffload.runtime.device import LoadedModule
from adoffload.runtime.gpu import GpuFunction

PTX = ".version 8.0\n.target sm_90\n.address_size 64\n// a stand-in: the fake ptxas copies it\n"
FAKE = """\
import os, sys, time
args = sys.argv[1:]
if args == ["--version"]:
    print("fake ptxas\\nCuda compilation tools, fake " + os.path.basename(sys.argv[0]))
    sys.exit(0)
level = "O1" if "-O1" in args else "O3"
ctl = os.environ["FAKE_PTXAS_DIR"]
with open(os.path.join(ctl, "pid-" + level), "w") as f:
    f.write(str(os.getpid()))
if os.environ.get("FAKE_GATE_" + level):
    while not os.path.exists(os.path.join(ctl, "gate-" + level)):
        time.sleep(0.01)
if os.environ.get("FAKE_FAIL_" + level):
    print("fake ptxas: error: refused at " + level)
    sys.exit(3)
with open(args[args.index("-o") + 1], "wb") as f:
    f.write(b"\\x7fELF" + level.encode())
"""


@pytest.fixture
def fake_ptxas(tmp_path, monkeypatch):
    """A stand-in ptxas; returns its control folder (gate files, pids). Tiering on, no fixed level."""
    ctl = tmp_path / "ptxas"
    ctl.mkdir()
    script = ctl / f"ptxas-{os.getpid()}-{time.monotonic_ns()}"
    script.write_text(f"#!{sys.executable}\n" + FAKE)
    script.chmod(0o755)
    monkeypatch.setattr(tools, "find_ptxas", lambda: script)
    monkeypatch.setenv("FAKE_PTXAS_DIR", str(ctl))
    for name in (tiered.TIERED_ENV, cubin.PTXAS_OPT_ENV, cubin.PTXAS_ENV):
        monkeypatch.delenv(name, raising=False)
    return ctl


def _open(ctl, level):
    (ctl / f"gate-{level}").touch()


class _Loader:
    def __init__(self):
        self.images, self.lock = [], threading.Lock()

    def __call__(self, image):
        with self.lock:
            self.images.append(image)
        return f"module of {image!r}"


def test_a_cold_cache_loads_O1_then_swaps_to_O3_and_caches_it(fake_ptxas, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_GATE_O3", "1")
    store = CompileCache(tmp_path / "cache")
    pending = tiered.start_tiered(PTX, "sm_90", cache=store)
    assert isinstance(pending, tiered.TieredCubin) and pending.fast is not None
    load = _Loader()
    module, upgrade = tiered.load_tiered(PTX, "sm_90", load, pending, "k")
    assert module == "module of b'\\x7fELFO1'" and upgrade is not None       # -O3 still held at its gate
    swapped = []
    upgrade.start(swapped.append)
    assert not upgrade.wait(0.3) and swapped == []
    _open(fake_ptxas, "O3")
    assert upgrade.wait(10) and upgrade.swapped and upgrade.error is None
    assert swapped == [b"\x7fELFO3"]

    def no_ptxas(*args, **kwargs):
        raise AssertionError("a cached -O3 cubin must not run ptxas")
    monkeypatch.setattr(subprocess, "Popen", no_ptxas)
    warm = tiered.start_tiered(PTX, "sm_90", cache=store)
    assert warm.cached and warm.fast is None                   # no tiering on a warm cache
    module, upgrade = tiered.load_tiered(PTX, "sm_90", load, warm)
    assert module == "module of b'\\x7fELFO3'" and upgrade is None


def test_O3_done_before_the_load_is_loaded_directly(fake_ptxas, tmp_path):
    pending = tiered.start_tiered(PTX, "sm_90", cache=False)
    deadline = time.monotonic() + 10
    while not pending.full.finished() and time.monotonic() < deadline:
        time.sleep(0.01)
    module, upgrade = tiered.load_tiered(PTX, "sm_90", _Loader(), pending)
    assert module == "module of b'\\x7fELFO3'" and upgrade is None


def test_a_failed_O3_build_keeps_O1_and_is_logged(fake_ptxas, monkeypatch, caplog):
    monkeypatch.setenv("FAKE_FAIL_O3", "1")
    monkeypatch.setenv("FAKE_GATE_O3", "1")
    failures = cubin.STATS["upgrade_failures"]
    pending = tiered.start_tiered(PTX, "sm_90", cache=False)
    module, upgrade = tiered.load_tiered(PTX, "sm_90", _Loader(), pending, "k")
    assert module.endswith("O1'")
    swapped = []
    with caplog.at_level(logging.DEBUG, logger=cubin.__name__):
        upgrade.start(swapped.append)
        _open(fake_ptxas, "O3")
        assert upgrade.wait(10)
    assert swapped == [] and not upgrade.swapped and "refused at O3" in upgrade.error
    assert cubin.STATS["upgrade_failures"] == failures + 1
    assert any("keeps ptxas -O1's module" in r.getMessage() and "refused at O3" in r.getMessage()
               for r in caplog.records)


def test_a_replace_that_raises_keeps_O1_and_never_reaches_the_caller(fake_ptxas, caplog):
    pending = tiered.start_tiered(PTX, "sm_90", cache=False)
    _, upgrade = tiered.load_tiered(PTX, "sm_90", _Loader(), pending, "k")
    if upgrade is None:           # -O3 beat -O1 here: nothing to swap (the other tests hold it back)
        pytest.skip("ptxas -O3 finished before the load")

    def refuse(image):
        raise DeviceError("cuModuleLoadData failed: CUDA_ERROR_INVALID_IMAGE")
    with caplog.at_level(logging.DEBUG, logger=cubin.__name__):
        assert upgrade.start(refuse).wait(10)
    assert not upgrade.swapped and "INVALID_IMAGE" in upgrade.error
    assert any("INVALID_IMAGE" in r.getMessage() for r in caplog.records)


def test_a_failed_O1_build_waits_for_O3(fake_ptxas, monkeypatch):
    monkeypatch.setenv("FAKE_FAIL_O1", "1")
    module, upgrade = tiered.load_tiered(PTX, "sm_90", _Loader(), tiered.start_tiered(PTX, "sm_90", cache=False))
    assert module.endswith("O3'") and upgrade is None


def test_a_refused_O1_cubin_goes_to_the_driver_jit_with_no_upgrade(fake_ptxas, monkeypatch):
    monkeypatch.setenv("FAKE_GATE_O3", "1")
    images = []

    def refuse_cubins(image):
        images.append(image)
        if isinstance(image, bytes):
            raise DeviceError("cuModuleLoadData failed: CUDA_ERROR_UNSUPPORTED_PTX_VERSION")
        return "jit module"
    module, upgrade = tiered.load_tiered(PTX, "sm_90", refuse_cubins, tiered.start_tiered(PTX, "sm_90", cache=False))
    assert module == "jit module" and upgrade is None and images == [b"\x7fELFO1", PTX]


@pytest.mark.parametrize("env", [(tiered.TIERED_ENV, "0"), (cubin.PTXAS_OPT_ENV, "2")])
def test_switches_turn_tiering_off(fake_ptxas, monkeypatch, env):
    monkeypatch.setenv(*env)
    runs = cubin.STATS["ptxas_runs"]
    pending = tiered.start_tiered(PTX, "sm_90", cache=False)
    assert isinstance(pending, cubin.PendingCubin) and cubin.STATS["ptxas_runs"] == runs + 1
    assert pending.options == ([] if env[0] == tiered.TIERED_ENV else ["-O2"])
    module, upgrade = tiered.load_tiered(PTX, "sm_90", _Loader(), pending)
    assert module.endswith("O3'") and upgrade is None       # the fake names every level but -O1 "O3"


def test_load_cuda_module_waits_for_O3(fake_ptxas, monkeypatch):
    monkeypatch.setenv("FAKE_GATE_O3", "1")
    pending = tiered.start_tiered(PTX, "sm_90", cache=False)
    threading.Timer(0.3, _open, (fake_ptxas, "O3")).start()
    assert cubin.load_cuda_module(PTX, "sm_90", _Loader(), pending).endswith("O3'")


def test_concurrent_loads_each_get_one_swap_and_readers_see_whole_values(fake_ptxas, monkeypatch):
    monkeypatch.setenv("FAKE_GATE_O3", "1")
    pending = tiered.start_tiered(PTX, "sm_90", cache=False)
    cells = [None] * 8
    upgrades = [None] * 8
    barrier = threading.Barrier(8)

    def load_one(k):
        barrier.wait()
        module, upgrades[k] = tiered.load_tiered(PTX, "sm_90", lambda image: image, pending, f"k{k}")
        cells[k] = module

        def replace(image, k=k):
            cells[k] = image
        upgrades[k].start(replace)
    threads = [threading.Thread(target=load_one, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert cells == [b"\x7fELFO1"] * 8
    seen, stop = set(), threading.Event()

    def read():
        while not stop.is_set():
            seen.update(cells)
    reader = threading.Thread(target=read)
    reader.start()
    _open(fake_ptxas, "O3")
    assert tiered.wait_for_upgrades(10)
    stop.set()
    reader.join()
    assert cells == [b"\x7fELFO3"] * 8 and all(u.swapped for u in upgrades)
    assert seen <= {b"\x7fELFO1", b"\x7fELFO3"}
    assert (fake_ptxas / "pid-O3").exists()


EXIT_SCRIPT = """
import atexit, os, sys, time
from pathlib import Path
t0 = [None]
def report():
    proc = pending.full._proc
    print("exit-wait", time.monotonic() - t0[0], "reaped", proc.returncode is not None, flush=True)
atexit.register(report)                      # registered first: runs after tiered's own handler
from adoffload.codegen.gpu import tiered, tools
tools.find_ptxas = lambda: Path(sys.argv[1])
pending = tiered.start_tiered(sys.argv[2], "sm_90", cache=False)
module, upgrade = tiered.load_tiered(sys.argv[2], "sm_90", lambda image: image, pending)
assert module == b"\\x7fELFO1" and upgrade is not None
upgrade.start(lambda image: None)
pid_file = os.path.join(os.environ["FAKE_PTXAS_DIR"], "pid-O3")
deadline = time.monotonic() + 30             # a loaded machine starts the fake ptxas slowly: let it run first
while time.monotonic() < deadline and not (os.path.exists(pid_file) and open(pid_file).read()):
    time.sleep(0.01)
print("started", flush=True)
t0[0] = time.monotonic()
"""


def test_process_exit_kills_a_pending_O3_build_without_waiting(fake_ptxas, tmp_path):
    env = dict(os.environ, FAKE_GATE_O3="1", PYTHONPATH=os.getcwd())
    script = next(fake_ptxas.glob("ptxas-*"))
    (tmp_path / "exit.py").write_text(textwrap.dedent(EXIT_SCRIPT))
    done = subprocess.run([sys.executable, str(tmp_path / "exit.py"), str(script), PTX], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    line = done.stdout.split("exit-wait")[1].split()
    assert float(line[0]) < 2.0 and line[2] == "True"          # killed, reaped, no long wait
    pid = int((fake_ptxas / "pid-O3").read_text())
    with pytest.raises(ProcessLookupError):                    # gated forever, so only the kill ended it
        os.kill(pid, 0)


# ----------------------------------------------------------------------------- the swaps

class _Device:
    spec, generation = "cuda:0", 0

    def __init__(self, limits):
        self.limits = limits

    def _max_block(self, handle):
        return self.limits[handle]

    def _occupancy_block(self, handle):
        return 512


class _Module(LoadedModule):
    def __init__(self, device, handle):
        super().__init__(device)
        self.handle, self.generation = handle, device.generation

    def _lookup(self, name):
        return GpuFunction(name, f"fn {self.handle}", self)


def test_gpu_function_swap_keeps_the_old_module_and_checks_the_block():
    device = _Device({"fn O1": 1024, "fn O3": 1024, "fn small": 256})
    old = _Module(device, "O1")
    function = old.function("k")
    assert function.auto_block_size() == 512
    with pytest.raises(DeviceError, match="at most 256 threads per block, the launches use 512"):
        function.swap(_Module(device, "small").function("k"))
    assert function.handle == "fn O1"
    new = _Module(device, "O3")
    function.swap(new.function("k"), block=128)
    assert function.handle == "fn O3" and function.module is new and function._retired == [old]
    other = _Device({"fn x": 1024})
    with pytest.raises(DeviceError, match="another device"):
        function.swap(_Module(other, "x").function("k"))


class _CudaDevice(_Device):
    kind, arch = "cuda", "sm_90"

    def __init__(self, limits):
        super().__init__(limits)
        self.loaded = []

    def load_module(self, image):
        self.loaded.append(image)
        return _Module(self, image.decode(errors="replace")[-2:] if isinstance(image, bytes) else "ptx")


class _Compiled:
    target, entry_name = "nvptx", "k"

    def __init__(self):
        self.extra = {}

    def pending_cubin(self, arch):
        return self.extra.setdefault("cubin", {}).setdefault(arch, tiered.start_tiered(PTX, arch, cache=False))

    def load_cuda_tiered(self, arch, load):
        return tiered.load_tiered(PTX, arch, load, self.pending_cubin(arch), self.entry_name)


def test_the_numpy_launchers_function_switches_to_O3(fake_ptxas, monkeypatch):
    from adoffload.kernels.launch_run import loaded_function
    monkeypatch.setenv("FAKE_GATE_O3", "1")
    device, compiled = _CudaDevice({"fn O1": 1024, "fn O3": 1024}), _Compiled()
    function = loaded_function(device, compiled)
    assert function.handle == "fn O1" and loaded_function(device, compiled) is function
    upgrade = compiled.extra["upgrades"]["cuda:0"]
    _open(fake_ptxas, "O3")
    assert upgrade.wait(10) and upgrade.swapped
    assert function.handle == "fn O3" and device.loaded == [b"\x7fELFO1", b"\x7fELFO3"]
    assert [m.handle for m in function._retired] == ["O1"]


def test_real_ptxas_tiers_and_the_O3_cubin_is_the_untiered_one(tmp_path, monkeypatch):
    try:
        tools.find_ptxas()
        tools.find_libdevice()
    except ToolNotFoundError as exc:
        pytest.skip(str(exc))
    from adoffload.codegen import compile_for_target
    from . import bodies
    for name in (tiered.TIERED_ENV, cubin.PTXAS_OPT_ENV, cubin.PTXAS_ENV):
        monkeypatch.delenv(name, raising=False)
    ptx = compile_for_target(bodies.AXPY, "axpy", bodies.AXPY_TYPES, 1, "nvptx", "sm_80", cache=False)
    store = CompileCache(tmp_path)
    pending = tiered.start_tiered(ptx, "sm_80", cache=store)
    assert pending.fast is not None
    fast = pending.fast.result()
    full = pending.best()
    assert fast[:4] == full[:4] == b"\x7fELF"
    assert full == cubin.cubin_for(ptx, "sm_80", cache=CompileCache(tmp_path / "plain"))
    assert tiered.start_tiered(ptx, "sm_80", cache=store).cached


def test_no_ptxas_means_no_tiering_and_the_ptx_is_loaded(fake_ptxas, monkeypatch):
    monkeypatch.setenv(cubin.PTXAS_ENV, "0")
    pending = tiered.start_tiered(PTX, "sm_90", cache=False)
    assert pending.fast is None and cubin.PTXAS_ENV in pending.reason
    load = _Loader()
    module, upgrade = tiered.load_tiered(PTX, "sm_90", load, pending)
    assert load.images == [PTX] and upgrade is None


class _FakeDriver:
    """The cuda-python calls jax/targets._start_upgrades makes, with a context stack to check."""
    class CUfunction_attribute:
        CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = "max threads"

    def __init__(self, limit):
        self.limit, self.stack, self.calls = limit, [], []

    def cuCtxPushCurrent(self, ctx):
        self.stack.append(ctx)
        return (0,)

    def cuCtxPopCurrent(self):
        return (0, self.stack.pop())

    def cuModuleLoadData(self, image):
        self.calls.append(("load", image, list(self.stack)))
        return (0, "module " + image[4:6].decode())

    def cuModuleGetFunction(self, module, name):
        return (0, 4000 + len(self.calls))

    def cuFuncGetAttribute(self, attribute, function):
        return (0, self.limit)


@pytest.mark.parametrize("limit", [1024, 64])
def test_the_jax_handlers_cell_gets_the_O3_function_in_the_devices_context(fake_ptxas, monkeypatch, limit):
    from adoffload.jax import targets
    from adoffload.jax.handler_ir import Emitter, table
    monkeypatch.setenv("FAKE_GATE_O3", "1")
    e = Emitter()
    e.lines.append("define ptr @handler(ptr %frame) {")
    e.label("entry")
    e.emit(f"ret ptr {e.cell('@functions', 1)}")
    e.lines.append("}")
    from adoffload.jax.handler import CompiledHandler
    handler = CompiledHandler(table("functions", (11, 22), cells=True) + "\n" + "\n".join(e.lines) + "\n")
    import ctypes
    call = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)(handler.address)
    _, upgrade = tiered.load_tiered(PTX, "sm_90", lambda image: image, tiered.start_tiered(PTX, "sm_90", cache=False))
    driver = _FakeDriver(limit)
    targets._start_upgrades(driver, handler, [(upgrade, "k", "functions", 1, "ctx of device 1", 256)])
    assert call(0) == 22
    _open(fake_ptxas, "O3")
    assert upgrade.wait(10)
    assert driver.calls[0][0] == "load" and driver.calls[0][2] == ["ctx of device 1"] and driver.stack == []
    if limit >= 256:
        assert upgrade.swapped and call(0) == 4001
    else:                          # the -O3 function cannot take the handler's block: -O1 stays
        assert not upgrade.swapped and "at most 64 threads per block" in upgrade.error and call(0) == 22
