"""PTX -> cubin with ``ptxas``, cached: what a CUDA module loads instead of asking the driver to JIT PTX.

Why: the driver's PTX JIT (``cuModuleLoadData`` of PTX text) runs the same assembler inside the
calling thread, every time its own cache is cold, and nothing else can happen meanwhile. ``ptxas`` in a
subprocess runs beside other work (``start_cubin`` returns at once; ``PendingCubin.result`` waits),
several kernels assemble at once on several cores, and the cubin is kept in adoffload's compile cache
(``<cache>/cubin``, keyed by the PTX text, the architecture, the options and ptxas's version), so a
warm adoffload cache needs no JIT at all even where the driver's cache is cold.

``load_cuda_module(ptx, arch, load)`` is what loaders call: the cubin when there is one, else the PTX
through the driver's JIT. No cubin -- ``ptxas`` not installed, ``ADOFFLOAD_PTXAS=0``, ptxas failed or
timed out -- and a cubin the driver refuses both fall back to the PTX; the reason goes to the
``adoffload.codegen.gpu.cubin`` logger at DEBUG level (``PendingCubin.reason`` holds it too).

The optimization level is ptxas's default (-O3), as the driver JIT's default is its highest
level; ``ADOFFLOAD_PTXAS_OPT=N`` sets another (a separate cache key; A/B measurements only: the
code and its speed may change, not its arithmetic, which the PTX fixes: ``.rn`` operations are
never contracted). Loaders go through tiered.py, which loads -O1's cubin first where -O3's is not
cached and swaps -O3's in when it is assembled (``options=`` here names the level of one build).
"""
from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess
import tempfile
import threading
import weakref
from pathlib import Path

from ...errors import Error, KernelFaultError, ToolNotFoundError

PTXAS_ENV = "ADOFFLOAD_PTXAS"            # "0": never run ptxas (the driver JIT loads the PTX)
PTXAS_OPT_ENV = "ADOFFLOAD_PTXAS_OPT"    # ptxas -O level (default: ptxas's own, 3)
TIMEOUT_S = 600
ELF_MAGIC = b"\x7fELF"

log = logging.getLogger(__name__)
_STATS_LOCK = threading.Lock()
STATS = {"ptxas_runs": 0, "cache_hits": 0, "fallbacks": 0,
         "tiered": 0, "upgrades": 0, "upgrade_failures": 0}     # the last three: tiered.py


def _count(name: str) -> None:
    with _STATS_LOCK:
        STATS[name] += 1


@functools.cache
def ptxas_version(path: str) -> str:
    """``ptxas --version``'s last line (part of the cache key: another ptxas, another cubin)."""
    proc = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise ToolNotFoundError(f"{path} --version failed (exit {proc.returncode}): {proc.stderr.strip()}")
    lines = proc.stdout.strip().splitlines()
    return lines[-1] if lines else "unknown"


def _options() -> list[str]:
    opt = os.environ.get(PTXAS_OPT_ENV, "").strip()
    if not opt:
        return []
    if opt not in ("0", "1", "2", "3"):
        log.debug("%s=%r is not 0..3; ptxas runs at its default level", PTXAS_OPT_ENV, opt)
        return []
    return [f"-O{opt}"]


def _cache():
    from ..cache import CompileCache, default_root
    return CompileCache(default_root() / "cubin", versioned=False)


class PendingCubin:
    """One PTX text being assembled (or looked up, or refused). ``result()`` -> cubin bytes or None."""

    def __init__(self, ptx: str, arch: str, *, cache=True, options: list[str] | None = None):
        self.arch = arch
        self.options = _options() if options is None else list(options)   # None: ADOFFLOAD_PTXAS_OPT's
        self.reason: str | None = None        # why there is no cubin (None while there is one)
        self.cached = False                   # the cubin came from the compile cache
        self._cubin: bytes | None = None
        self._proc: subprocess.Popen | None = None
        self._tmp: str | None = None
        self._lock = threading.Lock()
        self._done = False
        self._store = self._key = None
        self._start(ptx, cache)

    def _fail(self, reason: str) -> None:
        self.reason, self._done = reason, True
        _count("fallbacks")
        log.debug("no cubin for %s, the driver JIT loads the PTX: %s", self.arch, reason)

    def _start(self, ptx: str, cache) -> None:
        if os.environ.get(PTXAS_ENV) == "0":
            return self._fail(f"{PTXAS_ENV}=0")
        try:
            from .tools import find_ptxas
            ptxas = str(find_ptxas())
            version = ptxas_version(ptxas)
        except (ToolNotFoundError, OSError, subprocess.SubprocessError) as exc:
            return self._fail(f"ptxas unavailable ({type(exc).__name__}: {exc})")
        options = self.options
        self._store = _cache() if cache is True else (cache or None)
        self._key = ["cubin", version, self.arch, " ".join(options), ptx]
        if self._store is not None:
            hit = self._store.get(self._key)
            if hit is not None and hit[:4] == ELF_MAGIC:
                self._cubin, self.cached, self._done = hit, True, True
                _count("cache_hits")
                return
        try:
            self._tmp = tempfile.mkdtemp(prefix="adoffload-ptxas-")
            weakref.finalize(self, shutil.rmtree, self._tmp, True)     # a result nobody waited for
            source = Path(self._tmp) / "kernel.ptx"
            source.write_text(ptx)
            self._proc = subprocess.Popen([ptxas, f"-arch={self.arch}", *options, "-o",
                                           str(Path(self._tmp) / "kernel.cubin"), str(source)],
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            _count("ptxas_runs")
        except OSError as exc:
            self._cleanup()
            return self._fail(f"could not start ptxas: {exc}")

    def _cleanup(self) -> None:
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def finished(self) -> bool:
        """Whether ``result()`` would return without waiting for ptxas (never blocks)."""
        return self._done or (self._proc is not None and self._proc.poll() is not None)

    def kill(self) -> None:
        """Stop a ptxas still running (process exit: tiered.py); ``result()`` then reports it failed."""
        proc = self._proc
        if proc is not None and not self._done:
            try:
                proc.kill()
            except OSError:
                pass

    def result(self) -> bytes | None:
        """Wait for ptxas; the cubin, or None (``reason`` says why)."""
        with self._lock:
            if self._done:
                return self._cubin
            try:
                output, _ = self._proc.communicate(timeout=TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.communicate()
                self._cleanup()
                self._fail(f"ptxas ran past {TIMEOUT_S} s")
                return None
            try:
                if self._proc.returncode != 0:
                    self._fail(f"ptxas exited {self._proc.returncode}: {output.strip()[-2000:]}")
                    return None
                data = (Path(self._tmp) / "kernel.cubin").read_bytes()
            except OSError as exc:
                self._fail(f"ptxas wrote no cubin: {exc}")
                return None
            finally:
                self._cleanup()
            if data[:4] != ELF_MAGIC:
                self._fail("ptxas's output is not an ELF cubin")
                return None
            if self._store is not None:
                self._store.put(self._key, data)
            self._cubin, self._done = data, True
            return data


def start_cubin(ptx: str, arch: str, *, cache=True, options: list[str] | None = None) -> PendingCubin:
    """Start assembling ``ptx`` for ``arch`` (``sm_90``); returns at once (a cache hit is done already).
    ``cache``: True for the default compile cache, a ``CompileCache``, or False/None for none.
    ``options``: ptxas options (default: ``ADOFFLOAD_PTXAS_OPT``'s level, else none: -O3)."""
    return PendingCubin(ptx, arch, cache=cache, options=options)


def cubin_for(ptx: str, arch: str, *, cache=True) -> bytes | None:
    """The cubin of ``ptx`` for ``arch``, or None where ptxas is unavailable, disabled or failed."""
    return start_cubin(ptx, arch, cache=cache).result()


def load_cuda_module(ptx: str, arch: str, load, pending: PendingCubin | None = None):
    """``load(image)`` of the cubin of ``ptx`` (``pending`` if one was started already), falling back
    to ``load(ptx)`` -- the driver's JIT -- where there is no cubin or the driver refuses it. A tiered
    ``pending`` (tiered.py) is waited for at its full level: loaders that can swap modules later use
    ``tiered.load_tiered`` instead."""
    pending = pending or start_cubin(ptx, arch)
    cubin = pending.best() if hasattr(pending, "best") else pending.result()
    return load_image(ptx, arch, load, cubin)[0]


def load_image(ptx: str, arch: str, load, cubin: bytes | None) -> tuple:
    """``(load(cubin), True)``, or ``(load(ptx), False)`` where there is no cubin or the driver refuses it."""
    if cubin is not None:
        try:
            return load(cubin), True
        except KernelFaultError:    # a broken context: the PTX would not load either
            raise
        except Error as exc:        # e.g. a ptxas newer than the driver
            _count("fallbacks")
            log.debug("the driver refused the cubin for %s (%s); loading the PTX through its JIT", arch, exc)
    return load(ptx), False


__all__ = ["PendingCubin", "start_cubin", "cubin_for", "load_cuda_module", "load_image", "STATS", "PTXAS_ENV", "PTXAS_OPT_ENV"]
