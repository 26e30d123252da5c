"""The clang of the ``ziglang`` wheel, as the tests use it: C to LLVM IR text, C to a native
shared library; both outputs cached on disk by source and flags.

Why the cache: the differential tester compiles each batch at -O2 twice (for its -O2 check and
to find the -O3 programs whose code is the same), and tests that fork a child per case cannot
share an in-memory cache. Entries live in adoffload's compile cache (``adoffload.cache``), keyed
by the source, the flags and the ziglang version, and are verified on read.
"""
from __future__ import annotations

import functools
import subprocess
import sys
import tempfile
from pathlib import Path

from ..sources.c import OPT_FLAGS   # zig's level mapping undone, as ado.from_c does
IR_FLAGS = ["-S", "-emit-llvm", "-fno-sanitize=all", "-w"]
SHARED_FLAGS = ["-shared", "-fPIC", "-nostdlib", "-fno-sanitize=all", "-w"]


def clang_available() -> bool:
    try:
        import ziglang  # noqa: F401
    except ImportError:
        return False
    return True


@functools.cache
def _zig_version() -> str:
    from importlib.metadata import version
    return version("ziglang")


def _clang(source: str, flags: list[str], suffix: str) -> bytes:
    """Run clang on ``source`` with ``flags``; the output file's bytes (from the cache when there)."""
    from ..codegen.cache import CompileCache
    cache = CompileCache()
    key = ("testing.clang", _zig_version(), suffix, *flags, source)
    hit = cache.get(key)
    if hit is not None:
        return hit
    with tempfile.TemporaryDirectory(prefix="adoffload-clang-") as tmp:
        c_file, out_file = Path(tmp) / "source.c", Path(tmp) / f"out{suffix}"
        c_file.write_text(source)
        cmd = [sys.executable, "-m", "ziglang", "cc", *flags, str(c_file), "-o", str(out_file)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"clang failed on C the tests generated or wrote ({' '.join(cmd)}):\n{proc.stderr}")
        data = out_file.read_bytes()
    cache.put(key, data)
    return data


def compile_c(source: str, opt: int, flags: tuple[str, ...] = ()) -> str:
    """LLVM IR text of ``source`` at ``-O<opt>`` from the wheel's clang (optnone kept at -O0);
    ``flags``: more clang flags (``-ffast-math``)."""
    return _clang(source, IR_FLAGS + OPT_FLAGS[opt] + list(flags), ".ll").decode()


def compile_native(source: str, opt: int, folder: Path):
    """``source`` as a shared library (ctypes.CDLL) at ``-O<opt>``, written into ``folder``;
    libc/libm come from the process."""
    import ctypes
    import ctypes.util
    libm = ctypes.util.find_library("m")
    if libm:
        ctypes.CDLL(libm, mode=ctypes.RTLD_GLOBAL)
    so_file = Path(folder) / "native.so"
    so_file.write_bytes(_clang(source, SHARED_FLAGS + OPT_FLAGS[opt], ".so"))
    return ctypes.CDLL(str(so_file))
