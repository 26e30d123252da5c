"""Tiered assembly on a GPU (codegen/gpu/tiered.py): the first launches run ptxas -O1's cubin, later
ones -O3's, and both give the same bits (the PTX fixes the arithmetic: LLVM decides fma contraction
when it emits PTX, and ptxas does not contract ``.rn`` operations at any level).

ptxas is wrapped so that -O3 takes a few seconds more: the first launch surely runs -O1.
"""
from __future__ import annotations

import os
import re
import sys

import numpy as np
import pytest

import adoffload as ado
from adoffload.codegen.gpu import cubin, tiered, tools
from adoffload.errors import ToolNotFoundError

# ptxas -O3 is held back this long, so the first launch surely runs -O1, the JAX call's own compile
# included (3 s was too short once, on a slow GPU machine)
SLOW_S = 10
pytestmark = pytest.mark.gpu


@pytest.fixture
def slow_O3(tmp_path, monkeypatch):
    """ptxas with -O3 held back ``SLOW_S`` seconds; a fresh compile cache; tiering on. Returns the
    Upgrade objects started meanwhile."""
    try:
        real = tools.find_ptxas()
    except ToolNotFoundError as exc:
        pytest.skip(str(exc))
    wrapper = tmp_path / "ptxas"
    wrapper.write_text(f"#!{sys.executable}\nimport os, sys, time\n"
                       f"if '-O1' not in sys.argv and '--version' not in sys.argv:\n    time.sleep({SLOW_S})\n"
                       f"os.execv({str(real)!r}, [{str(real)!r}] + sys.argv[1:])\n")
    wrapper.chmod(0o755)
    monkeypatch.setattr(tools, "find_ptxas", lambda: wrapper)
    monkeypatch.setenv("ADOFFLOAD_CACHE_DIR", str(tmp_path / "cache"))
    for name in (tiered.TIERED_ENV, cubin.PTXAS_OPT_ENV, cubin.PTXAS_ENV):
        monkeypatch.delenv(name, raising=False)
    started = []
    original = tiered.Upgrade.start

    def recording(self, replace):
        started.append(self)
        return original(self, replace)
    monkeypatch.setattr(tiered.Upgrade, "start", recording)
    return started


def _kernel():
    """A reduction-heavy kernel (a fresh object per test: nothing compiled yet): f64 and f32
    multiply-adds that fma contraction would change, and libdevice math."""
    @ado.kernel
    def mixes(x: ado.In[ado.f64], w: ado.In[ado.f64], out: ado.Out[ado.f64], low: ado.Out[ado.f32]):
        i = ado.tid()
        acc = 0.0
        lo = ado.f32(0.0)
        for j in range(w.shape[0]):
            acc = acc * 0.999 + x[i] * w[j] + ado.sin(acc * w[j])
            lo = lo * ado.f32(0.97) + ado.f32(x[i]) * ado.f32(w[j])
        out[i] = acc
        low[i] = lo
    return mixes


def _inputs():
    rng = np.random.default_rng(7)
    return rng.standard_normal(4096), rng.standard_normal(300)


def test_numpy_launches_switch_from_O1_to_O3_with_the_same_bits(cuda, slow_O3):
    kernel = _kernel()
    x, w = _inputs()
    first = (np.zeros(x.size), np.zeros(x.size, np.float32))
    kernel(x, w, *first, grid=x.size, device="cuda")
    assert slow_O3 and not any(u.done.is_set() for u in slow_O3)      # ran on -O1: -O3 is held back
    assert tiered.wait_for_upgrades(60) and all(u.swapped for u in slow_O3), [u.error for u in slow_O3]
    second = (np.zeros(x.size), np.zeros(x.size, np.float32))
    kernel(x, w, *second, grid=x.size, device="cuda")
    for a, b in zip(first, second):
        assert np.array_equal(a.view(np.uint8), b.view(np.uint8))     # bit for bit
    assert np.all(np.isfinite(first[0]))


@pytest.fixture
def jax_x64():
    jax = pytest.importorskip("jax")
    try:
        jax.devices("cuda")
    except RuntimeError as exc:
        pytest.skip(f"no CUDA GPU visible to JAX: {exc}")
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield jax
    jax.config.update("jax_enable_x64", previous)


def test_jax_calls_switch_from_O1_to_O3_with_the_same_bits(slow_O3, jax_x64):
    jax = jax_x64
    from adoffload.jax import targets
    kernel = _kernel()
    x, w = _inputs()
    shapes = {"out": x.shape, "low": x.shape}
    call = ado.jax_kernel(kernel, out_shapes=shapes, grid=lambda x, w: x.shape)
    first = [np.asarray(a) for a in jax.jit(call)(x, w)]
    assert slow_O3 and not any(u.done.is_set() for u in slow_O3)
    assert tiered.wait_for_upgrades(60) and all(u.swapped for u in slow_O3), [u.error for u in slow_O3]
    (target,) = [t for t in targets._TARGETS.values() if any(u in slow_O3 for u in t.upgrades)]
    baked = re.search(r"@functions = global \[\d+ x ptr\] \[ptr inttoptr \(i64 (\d+) to ptr\)", target.handler.text)
    cell = target.handler.program.global_address("functions")
    import ctypes
    now = ctypes.c_void_p.from_address(cell).value
    assert baked and now != int(baked.group(1))                       # the handler's cell holds the -O3 function
    second = [np.asarray(a) for a in jax.jit(lambda x, w: call(x, w))(x, w)]   # a new executable: no replay
    for a, b in zip(first, second):
        assert np.array_equal(a.view(np.uint8), b.view(np.uint8))
    assert os.environ.get(tiered.TIERED_ENV) is None
