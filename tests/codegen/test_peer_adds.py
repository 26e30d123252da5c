"""Warp-aggregated gathered adds (codegen/gpu/peer_adds.py): which adds become ``peer_fadd`` calls, and the
rewritten code run on this CPU by 32 threads emulating one warp's ``match.any`` and its per-group
``shfl.sync.idx``, against the plain atomics: the same sums, one atomic per address and warp."""
from __future__ import annotations

import ctypes
import random
import re
import threading

import llvmlite.binding as llvm
import numpy as np
import pytest

import adoffload as ado
from adoffload.codegen.gpu.peer_adds import aggregate_peer_adds
from adoffload.codegen.host.program import HostProgram
from tests.codegen.test_lane_combining import _ATOMIC, _flat_args
from tests.research.example import research_example

F32, F64 = ado.f32, ado.f64


@ado.kernel(bounds_check=False)
def scatter(h: ado.InOut[F64], idx: ado.In[ado.i64], v: ado.In[F64]):
    """Two gathered adds per thread (``h[idx[i]]``, ``h[idx[i] + 1]``), skipped where v is negative."""
    i = ado.tid()
    if v[i] > -0.5:
        ado.atomic_add(h, idx[i], v[i])
        ado.atomic_add(h, idx[i] + 1, 2.0 * v[i])


@ado.kernel(bounds_check=False)
def scatter_f32(h: ado.InOut[F32], idx: ado.In[ado.i64], v: ado.In[F32]):
    i = ado.tid()
    ado.atomic_add(h, idx[i], v[i])


@ado.kernel(bounds_check=False)
def own_and_stencil(h: ado.InOut[F64], v: ado.In[F64]):
    """Adds at the thread's own index and a constant offset of it: lanes apart, left alone."""
    i = ado.tid()
    ado.atomic_add(h, i, v[i])
    ado.atomic_add(h, 2 * i + 3, v[i])


pair_table = research_example().pair_energy


def _count(kernel):
    return aggregate_peer_adds(kernel.module_text(), kernel.body_name, kernel.signature.grid_rank)[1]


def test_gathered_adds_are_rewritten_and_lanes_apart_adds_are_not():
    assert _count(scatter) == 2
    assert _count(scatter_f32) == 1
    assert _count(own_and_stencil) == 0
    # the adjoint of the parameter table adds d_params[p, c] at a loaded row: 3 sites
    assert _count(ado.vjp(pair_table, ["params"], primal_outputs=False)) == 3


def test_adds_whose_old_value_is_used_are_left():
    text = """
define void @k(i64 %tid0, ptr %a, i64 %a.shape0, ptr %idx, ptr %out, ptr %status) {
entry:
  %j = load i64, ptr %idx, align 8
  %p = getelementptr double, ptr %a, i64 %j
  %old = atomicrmw fadd ptr %p, double 1.0 monotonic, align 8
  store double %old, ptr %out, align 8
  ret void
}
"""
    assert aggregate_peer_adds(text, "k", 1)[1] == 0
    unused = text.replace("  store double %old, ptr %out, align 8\n", "")
    assert aggregate_peer_adds(unused, "k", 1)[1] == 1
    # an array whose extents the body does not name (foreign IR): left alone
    assert aggregate_peer_adds(unused.replace("i64 %a.shape0, ", ""), "k", 1)[1] == 0


def _ptx(**opts):
    from adoffload.codegen import compile_for_target
    flat = [f.llvm_type for f in scatter.signature.flat_params()]
    return compile_for_target(scatter.module_text(), scatter.body_name, flat, 1, "nvptx", cache=False,
                              noalias=True, **opts)


def test_the_rewritten_module_compiles_to_ptx_with_match_and_exchanges():
    ptx = _ptx(peer_adds=True)
    assert ptx.count("match.any.sync.b64") == 2
    assert "shfl.sync.idx.b32" in ptx
    assert "match.any" not in _ptx(peer_adds=True, lane_combining=False)      # deterministic builds


def test_on_by_default_and_off_with_the_environment_switch(monkeypatch):
    monkeypatch.delenv("ADOFFLOAD_PEER_ADDS", raising=False)
    assert "match.any" in _ptx()
    assert "match.any" not in _ptx(peer_adds=False)
    monkeypatch.setenv("ADOFFLOAD_PEER_ADDS", "0")
    assert "match.any" not in _ptx()


@ado.kernel
def dot_and_gather(a: ado.In[ado.f64], b: ado.In[ado.f64], idx: ado.In[ado.i32], total: ado.InOut[ado.f64],
                   hist: ado.InOut[ado.f64]):
    i = ado.tid()
    ado.atomic_add(total, 0, a[i] * b[i])
    ado.atomic_add(hist, idx[i], a[i])


def test_adds_every_thread_makes_to_one_address_are_left_to_the_reductions():
    """``total[0]`` is the same address for every thread: reductions.py sums it over the block
    (warp shuffles down, then one atomic per block); only the gathered ``hist[idx[i]]`` is grouped."""
    text = dot_and_gather.module_text()
    assert aggregate_peer_adds(text, dot_and_gather.body_name, 1)[1] == 1
    from adoffload.codegen import compile_for_target
    flat = [f.llvm_type for f in dot_and_gather.signature.flat_params()]
    ptx = compile_for_target(text, dot_and_gather.body_name, flat, 1, "nvptx", cache=False, noalias=True)
    assert "match.any.sync.b64" in ptx and "shfl.sync.down" in ptx and "grid-stride entry" in ptx


# ---- the rewritten code on 32 CPU threads, one per lane -------------------------------------------

class _Warp:
    """One emulated warp under independent thread scheduling: ``activemask`` returns the lanes that
    reach an ``activemask`` together -- a rendezvous that completes when every lane still running
    waits at one (so lanes that diverged, skipping an add or an iteration, join whichever comes
    next); ``match.any`` and ``shfl.sync.idx`` exchange among exactly the lanes of their mask (each
    mask its own barrier, several groups at once); a shuffle whose mask leaves out the lane or its
    source is recorded as an error."""
    current: "_Warp | None" = None

    def __init__(self, lanes, split_seed=None):
        self.started = sum(1 << lane for lane in lanes)
        self.live = len(lanes)
        self.waiting: dict[int, list] = {}          # lane -> [its mask once released]
        self.split = random.Random(split_seed) if split_seed is not None else None
        self.cond = threading.Condition()
        self.groups: dict[int, tuple] = {}
        self.local = threading.local()
        self.lock = threading.Lock()
        self.atomics = 0
        self.masks = []
        self.errors = []

    def _release(self):
        """Release the waiting lanes together, or (``split_seed``) sometimes a random part of them
        first, as a GPU may: the rest wait for the next release."""
        lanes = sorted(self.waiting)
        if self.split is not None and len(lanes) > 1 and self.split.random() < 0.5:
            lanes = self.split.sample(lanes, self.split.randint(1, len(lanes) - 1))
        mask = sum(1 << k for k in lanes)
        self.masks.append(mask)
        for k in lanes:
            self.waiting.pop(k).append(mask)
        self.cond.notify_all()

    def activemask(self):
        with self.cond:
            cell = self.waiting[self.local.lane] = []
            if len(self.waiting) == self.live:
                self._release()
            self.cond.wait_for(lambda: cell, timeout=30)
            return cell[0]

    def finished(self):
        with self.cond:
            self.live -= 1
            if self.waiting and len(self.waiting) == self.live:
                self._release()

    def _exchange(self, mask, value):
        """Every lane of ``mask`` posts ``value``; returns the 32 slots as they were posted."""
        with self.lock:
            barrier, slots = self.groups.setdefault(mask, (threading.Barrier(bin(mask).count("1")), [0] * 32))
        slots[self.local.lane] = value
        barrier.wait(timeout=30)
        posted = list(slots)
        barrier.wait(timeout=30)
        return posted

    def match_any(self, mask, value):
        posted = self._exchange(mask, value)
        return sum(1 << k for k in range(32) if mask >> k & 1 and posted[k] == value)

    def shfl_idx(self, mask, value, source, clamp):
        lane = self.local.lane
        if not (mask >> lane & 1 and mask >> source & 1) or mask & ~self.started:
            self.errors.append((lane, mask, source))
            return 0x5A5A5A5A
        return self._exchange(mask, value)[source]

    def fadd(self, address, value, ctype=ctypes.c_double):
        with self.lock:
            cell = ctype.from_address(address)
            cell.value += value
            self.atomics += 1


_U32, _U64 = ctypes.c_uint32, ctypes.c_uint64
_CALLBACKS = {
    "adoffload.test.activemask": ctypes.CFUNCTYPE(_U32)(lambda: _Warp.current.activemask()),
    "adoffload.test.laneid": ctypes.CFUNCTYPE(_U32)(lambda: _Warp.current.local.lane),
    "adoffload.test.match": ctypes.CFUNCTYPE(_U32, _U32, _U64)(lambda m, v: _Warp.current.match_any(m, v)),
    "adoffload.test.shfl_idx": ctypes.CFUNCTYPE(_U32, _U32, _U32, _U32, _U32)(
        lambda m, v, s, c: _Warp.current.shfl_idx(m, v, s, c)),
    "adoffload.test.fadd": ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_double)(
        lambda a, v: _Warp.current.fadd(a, v)),
    "adoffload.test.fadd32": ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_float)(
        lambda a, v: _Warp.current.fadd(a, v, ctypes.c_float)),
}
_RENAMES = {"llvm.nvvm.activemask": "adoffload.test.activemask",
            "llvm.nvvm.read.ptx.sreg.laneid": "adoffload.test.laneid",
            "llvm.nvvm.match.any.sync.i64": "adoffload.test.match",
            "llvm.nvvm.shfl.sync.idx.i32": "adoffload.test.shfl_idx"}


def _emulated(text: str, body: str, aggregate: bool) -> HostProgram:
    for name, address in ((n, ctypes.cast(f, ctypes.c_void_p).value) for n, f in _CALLBACKS.items()):
        llvm.add_symbol(name, address)
    if aggregate:
        text, count = aggregate_peer_adds(text, body, 1)
        assert count >= 1
    for old, new in _RENAMES.items():
        text = re.sub(rf'@"?{re.escape(old)}"?\(', f'@"{new}"(', text)
        text = re.sub(rf'declare ([^@\n]*)@"{re.escape(new)}"\(', rf'declare \1@"{new}"(', text)
    text = _ATOMIC.sub(lambda m: f'call void @"adoffload.test.fadd{"32" if m[2] == "float" else ""}"'
                       f'(ptr {m[1]}, {m[2]} {m[3]})', text)
    text += '\ndeclare void @"adoffload.test.fadd"(ptr, double)\ndeclare void @"adoffload.test.fadd32"(ptr, float)\n'
    return HostProgram(text, opt_level=1, codegen_level=0)


def _run_warp(program, body, tids, args, split_seed=None):
    """Run ``body`` for lane -> tid ``tids`` (lanes absent are not started); return the warp."""
    fn = program.function(body, None, ctypes.c_int64, *[a[0] for a in args], ctypes.c_void_p)
    status = np.zeros(4, np.int64)
    warp = _Warp(sorted(tids), split_seed)
    _Warp.current = warp

    def lane(k):
        warp.local.lane = k
        try:
            fn(tids[k], *[a[1] for a in args], status.ctypes.data)
        finally:
            warp.finished()
    threads = [threading.Thread(target=lane, args=(k,)) for k in tids]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a lane is stuck at a barrier"
    assert status[0] == 0
    assert not warp.errors, f"shuffles outside their group: {warp.errors[:4]}"
    return warp


_LAYOUTS = {
    "whole warp": {k: k for k in range(32)},
    "partial": {k: k for k in range(32) if k not in (0, 3, 4, 17, 31)},
}


@pytest.mark.parametrize("split", [None, 7])
@pytest.mark.parametrize("layout", sorted(_LAYOUTS))
@pytest.mark.parametrize("spread", [1, 3, 32, 1000])
def test_emulated_warp_adds_every_value_once_per_address(layout, spread, split):
    """Indices drawn from ``spread`` values (1: one address for the warp; 1000: mostly alone), some
    lanes skipping both adds (v < -0.5), some lanes not started; ``split``: the lanes reaching an add
    together are sometimes a random part of those waiting (more atomics, the same sums)."""
    tids = _LAYOUTS[layout]
    rng = np.random.default_rng(spread)
    idx = rng.integers(0, spread, 32) * 2
    v = rng.uniform(-1.0, 2.0, 32)
    results, warps = [], []
    for aggregate in (False, True):
        h = np.zeros(2 * spread + 2)
        warps.append(_run_warp(_emulated(scatter.module_text(), scatter.body_name, aggregate), scatter.body_name,
                               tids, _flat_args(scatter, dict(h=h, idx=idx, v=v)), split))
        results.append(h)
    np.testing.assert_allclose(results[1], results[0], rtol=1e-14, atol=1e-14)
    taking = [k for k in tids if v[k] > -0.5]
    expected = np.zeros_like(results[0])
    np.add.at(expected, idx[taking], v[taking])
    np.add.at(expected, idx[taking] + 1, 2.0 * v[taking])
    np.testing.assert_allclose(results[0], expected, rtol=1e-14, atol=1e-14)
    assert warps[0].atomics == 2 * len(taking)
    if split is None:
        assert warps[1].atomics == 2 * len(set(idx[taking]))
    else:
        assert 2 * len(set(idx[taking])) <= warps[1].atomics <= 2 * len(taking)


def test_emulated_warp_large_arrays_keep_plain_atomics():
    """Into an array of more than SMALL_ARRAY elements every lane adds as before, even at one address."""
    from adoffload.codegen.gpu.peer_adds import SMALL_ARRAY
    tids = _LAYOUTS["whole warp"]
    idx, v = np.zeros(32, np.int64), np.ones(32)
    for size, atomics in ((SMALL_ARRAY, 2), (SMALL_ARRAY + 1, 64)):
        h = np.zeros(size)
        warp = _run_warp(_emulated(scatter.module_text(), scatter.body_name, True), scatter.body_name, tids,
                         _flat_args(scatter, dict(h=h, idx=idx, v=v)))
        assert warp.atomics == atomics
        assert h[0] == 32.0 and h[1] == 64.0


def test_emulated_warp_f32():
    tids = _LAYOUTS["whole warp"]
    rng = np.random.default_rng(4)
    idx, v = rng.integers(0, 5, 32), rng.standard_normal(32).astype(np.float32)
    results, warps = [], []
    for aggregate in (False, True):
        h = np.zeros(5, np.float32)
        warps.append(_run_warp(_emulated(scatter_f32.module_text(), scatter_f32.body_name, aggregate),
                               scatter_f32.body_name, tids, _flat_args(scatter_f32, dict(h=h, idx=idx, v=v))))
        results.append(h)
    np.testing.assert_allclose(results[1], results[0], rtol=2e-6, atol=2e-6)
    assert warps[1].atomics == len(set(idx))


@pytest.mark.parametrize("split", [None, 3])
def test_emulated_warp_parameter_table_adjoint(split):
    """The research model's d_params: 3 sites x (n - 1) partners per lane (lane i skips j == i) become at
    most 3 x 3 atomics per partner for the warp when the lanes arrive together, the same gradient."""
    k = ado.vjp(pair_table, ["params"], primal_outputs=False)
    rng = np.random.default_rng(6)
    n = 40
    pos = rng.uniform(0.0, 3.0, (n, 3))
    kind = rng.integers(0, 2, n)
    params = np.array([[1.0, 1.6, 1.1], [0.7, 1.9, 1.25], [1.3, 1.4, 1.0]])
    seed = rng.standard_normal(n)
    results, warps = [], []
    for aggregate in (False, True):
        values = dict(pos=pos, kind=kind, params=params, e=np.zeros(n), d_e=seed.copy(),
                      d_params=np.zeros((3, 3)))
        warps.append(_run_warp(_emulated(k.module_text(), k.body_name, aggregate), k.body_name,
                               _LAYOUTS["whole warp"], _flat_args(k, values), split))
        results.append(values["d_params"])
    np.testing.assert_allclose(results[1], results[0], rtol=1e-13, atol=1e-13)
    assert warps[0].atomics == 3 * 32 * (n - 1)
    assert warps[1].atomics <= (9 * n if split is None else warps[0].atomics // 2)
