"""Concurrency: threads compiling and launching at once, processes sharing one compile cache,
and caches left corrupt, truncated or written by another version."""
import multiprocessing
import os
import struct
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import adoffload as ado
from adoffload.codegen import cache as cache_module

from . import cache_worker
from .cache_worker import gather, poly


def cube(x: ado.In[ado.f64], out: ado.Out[ado.f64]):
    i = ado.tid()
    out[i] = x[i] * x[i] * x[i]


def shift(x: ado.In[ado.f64], out: ado.Out[ado.f64]):
    i = ado.tid()
    out[i] = x[i] + 1.0


def _thread_job(k: int) -> None:
    rng = np.random.default_rng(k)
    x = rng.uniform(-1, 1, 257 + k)
    n = x.size
    if k % 4 == 0:                                   # the same kernel from every thread
        out = np.zeros(n)
        poly(0.5 * k, x, out, grid=n)
        np.testing.assert_allclose(out, 0.5 * k * x * x + np.sin(x), rtol=1e-13)
    elif k % 4 == 1:                                 # a fresh kernel object: front end + JIT
        kernel = ado.kernel(cube if k % 8 == 1 else shift)
        out = np.zeros(n)
        kernel(x, out, grid=n)
        np.testing.assert_allclose(out, x ** 3 if k % 8 == 1 else x + 1.0, rtol=1e-13)
    elif k % 4 == 2:                                 # derivatives of a shared kernel
        d_x = np.zeros(n)
        ado.vjp(poly, ["x"])(2.0, x, np.zeros(n), d_x=d_x, d_out=np.ones(n), grid=n)
        np.testing.assert_allclose(d_x, 4.0 * x + np.cos(x), rtol=1e-13)
        d_out = np.zeros(n)
        ado.jvp(poly, ["x"])(2.0, x, np.zeros(n), d_x=np.ones(n), d_out=d_out, grid=n)
        np.testing.assert_allclose(d_out, 4.0 * x + np.cos(x), rtol=1e-13)
    else:                                            # gathers (a second shared kernel)
        idx = rng.integers(0, n, n)
        out = np.zeros(n)
        gather(x, idx, out, grid=n)
        np.testing.assert_array_equal(out, 2.0 * x[idx])


def test_many_threads_compile_and_launch_at_once():
    start = threading.Barrier(8)

    def job(k):
        if k < 8:
            start.wait()                             # the first eight start together
        _thread_job(k)

    with ThreadPoolExecutor(8) as pool:
        for future in [pool.submit(job, k) for k in range(48)]:
            future.result()


def _spawn_all(fn, cache_dir: Path, count: int = 3) -> list:
    context = multiprocessing.get_context("spawn")
    with context.Pool(count) as pool:
        return pool.map(fn, [str(cache_dir)] * count)


def _check(results: list) -> None:
    want = cache_worker.expected()
    for result in results:
        for got, expected in zip(result, want):
            np.testing.assert_allclose(got, expected, rtol=1e-13, atol=1e-15)


def _entries(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.bin") if not p.name.startswith(".tmp-"))


def _valid(path: Path) -> bool:
    blob = path.read_bytes()
    if len(blob) < cache_module._HEADER.size:
        return False
    key = bytes.fromhex(path.stem)
    return cache_module.CompileCache._verified_payload(blob, key) is not None


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory):
    """A cache dir filled by three processes compiling the same kernels at the same time."""
    folder = tmp_path_factory.mktemp("shared-cache")
    _check(_spawn_all(cache_worker.compile_and_run, folder))
    return folder


def test_processes_share_one_cache_dir(shared_cache):
    entries = _entries(shared_cache)
    assert entries and all(_valid(p) for p in entries)
    assert not list(shared_cache.rglob(".tmp-*")), "no temp files left behind"
    _check(_spawn_all(cache_worker.compile_and_run, shared_cache))    # warm: every process reads it
    assert _entries(shared_cache) == entries


def _corrupt(path: Path, how: str) -> None:
    blob = bytearray(path.read_bytes())
    header = cache_module._HEADER.size
    if how == "truncate":
        blob = blob[: header + (len(blob) - header) // 2]
    elif how == "flip-payload":
        blob[header + (len(blob) - header) // 3] ^= 0x40
    elif how == "header-only":
        blob = blob[: header - 5]
    elif how == "other-format":
        struct.pack_into("<I", blob, 4, cache_module.FORMAT_VERSION + 1)
    elif how == "garbage":
        blob = bytearray(os.urandom(len(blob)))
    path.write_bytes(bytes(blob))


@pytest.mark.parametrize("how", ["truncate", "flip-payload", "header-only", "other-format", "garbage"])
def test_damaged_entries_are_misses_and_get_replaced(shared_cache, tmp_path, how):
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    for path in _entries(shared_cache):
        target = folder / path.relative_to(shared_cache)
        target.parent.mkdir(mode=0o700, exist_ok=True)
        target.write_bytes(path.read_bytes())
        _corrupt(target, how)
        assert not _valid(target)
    _check(_spawn_all(cache_worker.compile_and_run, folder, count=2))
    entries = _entries(folder)
    assert entries and all(_valid(p) for p in entries)           # recompiled and rewritten


def test_entries_of_another_adoffload_version_are_never_used(shared_cache, tmp_path):
    folder = tmp_path / "cache"
    _check(_spawn_all(cache_worker.compile_and_run_as_other_version, folder, count=1))
    theirs = set(_entries(folder))
    _check(_spawn_all(cache_worker.compile_and_run, folder, count=1))
    ours = set(_entries(folder)) - theirs
    assert ours and theirs, "each version keys its own entries"
    assert ours == {folder / p.relative_to(shared_cache) for p in _entries(shared_cache)}
