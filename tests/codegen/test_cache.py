import multiprocessing
import os
import stat

import numpy as np
import pytest

from adoffload.language import status as abi_status
from adoffload.codegen import cache as cache_module
from adoffload.codegen.cache import CompileCache
from adoffload.codegen import abi, compile_for_target

from . import bodies


def test_miss_then_hit(tmp_path):
    c = CompileCache(tmp_path)
    assert c.get(["ir", "nvptx", "sm_90"]) is None
    assert c.put(["ir", "nvptx", "sm_90"], b"payload")
    assert c.get(["ir", "nvptx", "sm_90"]) == b"payload"
    assert c.get(["ir", "nvptx", "sm_80"]) is None          # any key part changes the key
    assert c.get(["ir2", "nvptx", "sm_90"]) is None


def test_default_root_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("ADOFFLOAD_CACHE_DIR", str(tmp_path / "here"))
    assert CompileCache().root == tmp_path / "here"


def test_permissions_are_user_only(tmp_path):
    root = tmp_path / "cache"
    c = CompileCache(root)
    c.put(["k"], b"x")
    path = c.path_for(["k"])
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_loose_root_permissions_are_tightened(tmp_path):
    root = tmp_path / "cache"
    root.mkdir(mode=0o777)
    os.chmod(root, 0o777)
    CompileCache(root).put(["k"], b"x")
    assert stat.S_IMODE(root.stat().st_mode) == 0o700


@pytest.mark.parametrize("damage", ["flip_payload", "truncate", "empty", "garbage", "wrong_version", "other_key"])
def test_bad_entries_are_misses_and_get_replaced(tmp_path, damage):
    c = CompileCache(tmp_path)
    key = ["ir", "amdgpu", "gfx942"]
    c.put(key, b"good bytes " * 10)
    path = c.path_for(key)
    blob = bytearray(path.read_bytes())
    if damage == "flip_payload":
        blob[-1] ^= 0xFF
    elif damage == "truncate":
        blob = blob[:-5]
    elif damage == "empty":
        blob = bytearray()
    elif damage == "garbage":
        blob = bytearray(b"\x80\x04garbage-that-looks-like-a-pickle")
    elif damage == "wrong_version":
        blob[4:8] = (cache_module.FORMAT_VERSION + 1).to_bytes(4, "little")
    elif damage == "other_key":
        other = CompileCache(tmp_path)
        other.put(["something else"], b"good bytes " * 10)
        blob = bytearray(other.path_for(["something else"]).read_bytes())
    path.write_bytes(bytes(blob))
    assert c.get(key) is None
    assert not path.exists()
    c.put(key, b"fresh")
    assert c.get(key) == b"fresh"


def test_unwritable_cache_is_bypassed_not_fatal(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    c = CompileCache(blocker / "cache")
    assert c.put(["k"], b"x") is False
    assert c.get(["k"]) is None


def _writer(root, worker, rounds):
    c = CompileCache(root)
    for r in range(rounds):
        c.put(["shared-key"], f"writer {worker} round {r} ".encode() * 2000)
        got = c.get(["shared-key"])
        assert got is None or got.startswith(b"writer ")
    return True


def test_concurrent_writers_never_expose_a_partial_entry(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(4) as pool:
        assert all(pool.starmap(_writer, [(str(tmp_path), w, 25) for w in range(4)]))
    got = CompileCache(tmp_path).get(["shared-key"])
    assert got is not None and got.startswith(b"writer ")
    assert not [p for p in tmp_path.rglob(".tmp-*")]


def test_compile_for_target_host_uses_the_cache(tmp_path):
    c = CompileCache(tmp_path)
    first = compile_for_target(bodies.AXPY, "axpy", bodies.AXPY_TYPES, 1, "host", cache=c)
    entries = list(tmp_path.rglob("*.bin"))
    assert len(entries) == 1
    assert entries[0].read_bytes().endswith(first.optimized_ir.encode())
    stamp = entries[0].stat().st_mtime_ns
    second = compile_for_target(bodies.AXPY, "axpy", bodies.AXPY_TYPES, 1, "cpu", cache=c)
    assert entries[0].stat().st_mtime_ns == stamp and len(list(tmp_path.rglob("*.bin"))) == 1
    n = 64
    x, y, out = np.arange(n, dtype=np.float32), np.ones(n, np.float32), np.zeros(n, np.float32)
    status = abi_status.new_record()
    slots = abi.pack_slots([3.0, x, n, y, n, out, n], bodies.AXPY_TYPES, [n], status)
    second.entry(second.entry_name)(slots.ctypes.data, 0, n)
    np.testing.assert_array_equal(out, 3 * x + 1)


@pytest.mark.parametrize("target,arch", [("nvptx", "sm_80"), ("amdgpu", "gfx90a")])
def test_compile_for_target_gpu_caches_artifacts(tmp_path, target, arch):
    from adoffload.codegen.gpu import tools
    from adoffload.errors import ToolNotFoundError
    try:
        tools.find_lld() if target == "amdgpu" else tools.find_libdevice()
    except ToolNotFoundError as exc:
        pytest.skip(str(exc))
    c = CompileCache(tmp_path)
    first = compile_for_target(bodies.GRID2, "grid2", bodies.GRID2_TYPES, 2, target, arch, cache=c)
    (entry,) = list(tmp_path.rglob("*.bin"))
    stamp = entry.stat().st_mtime_ns
    second = compile_for_target(bodies.GRID2, "grid2", bodies.GRID2_TYPES, 2, target, arch, cache=c)
    assert second == first and entry.stat().st_mtime_ns == stamp
    other = compile_for_target(bodies.GRID2, "grid2", bodies.GRID2_TYPES, 2, target, arch, cache=c, noalias=True)
    assert len(list(tmp_path.rglob("*.bin"))) == 2 and isinstance(other, type(first))


def test_cache_keys_cover_the_whole_compiler_not_only_codegen():
    """An edit of the AD engine or the front end must not reuse a derivative cached before it (the
    digest moved with cache.py into codegen/ and covered only that folder)."""
    from pathlib import Path
    import adoffload
    from adoffload.codegen import cache
    package = Path(adoffload.__file__).resolve().parent
    assert Path(cache.__file__).resolve().parent.parent == package
    assert any("enzyme" in str(p) for p in package.rglob("*.py"))      # what the digest reads
