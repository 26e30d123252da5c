"""Tiered assembly: a CUDA module starts on ptxas -O1's cubin and switches to -O3's when that is done.

Why: ptxas -O3 takes seconds on the optimizer kernels and -O1 about a tenth of that, for code that
runs 13-18% slower (issue 32's measurement of the LJ38 FIRE and L-BFGS kernels on the H200 machine). A cold program should not
wait for -O3 before its first launch, nor run at -O1 for good.

``start_tiered(ptx, arch)`` looks the -O3 cubin up in the compile cache (``cubin.py``; the key of
ptxas's default level, so a warm cache loads -O3 directly, with no tiering) and otherwise starts
two ptxas processes at once, -O1 and -O3. ``load_tiered(ptx, arch, load, pending)`` loads the first
cubin there is -- -O3 where it finished already, else -O1 -- and returns ``(module, upgrade)``;
``upgrade`` (None when -O3 was loaded, or the driver refused the cubin and the PTX went to its JIT)
is an ``Upgrade``: ``upgrade.start(replace)`` waits for -O3 on a daemon thread and calls
``replace(cubin)`` there. ``replace`` is the loader's: it loads the module in its CUDA context (the
thread has none of its own), finds the function and makes later launches read it (an atomic
pointer-sized store: ``GpuFunction.swap`` for the numpy launcher, the JAX handler's function
cells). The -O1 module is never unloaded while the function that replaced it lives (a launch may
still run it). A failed -O3 build, or a ``replace`` that raises, is logged at DEBUG level
(``adoffload.codegen.gpu.cubin``) and counted (``cubin.STATS["upgrade_failures"]``); the -O1
module stays in use.

At process exit (atexit), -O3 builds still running are killed and their threads given a second to
finish; nothing waits for ptxas, and the killed processes are reaped.

``ADOFFLOAD_PTXAS_TIERED=0``: no tiering (the -O3 cubin, waited for). ``ADOFFLOAD_PTXAS_OPT=N``
(a fixed level) and ``ADOFFLOAD_PTXAS=0`` (no ptxas) also turn it off.
"""
from __future__ import annotations

import atexit
import os
import threading
import time

from . import cubin as _cubin
from .cubin import PTXAS_OPT_ENV, PendingCubin, load_image, log, start_cubin

TIERED_ENV = "ADOFFLOAD_PTXAS_TIERED"    # "0": no -O1 first tier
FAST_OPTIONS = ["-O1"]
EXIT_GRACE_S = 1.0                        # how long process exit waits for upgrade threads

_LOCK = threading.Lock()
_LIVE: set = set()                        # Upgrade objects whose thread may still run
_BUILDS: set = set()                      # TieredCubin objects whose -O3 ptxas may still run
_shutting_down = False
_exit_registered = False


def tiering_enabled() -> bool:
    """Tiering applies: not turned off, and no fixed ptxas level asked for."""
    if os.environ.get(TIERED_ENV, "").strip() == "0":
        return False
    return not os.environ.get(PTXAS_OPT_ENV, "").strip()


def _register_exit(first: bool = False) -> None:
    """Register ``_at_exit`` once; ``first``: (again) as the handler that runs first at exit (atexit
    runs the latest first): ahead of the exit handlers of libraries imported since, such as JAX's,
    whose devices an upgrade thread may be loading a module on."""
    global _exit_registered
    with _LOCK:
        if first or not _exit_registered:
            atexit.unregister(_at_exit)
            atexit.register(_at_exit)
            _exit_registered = True


class TieredCubin:
    """The -O3 build (``full``) and, where it was not cached, the -O1 one (``fast``) of one PTX text.
    ``result()``: the first cubin to load (waits for -O1 only); ``best()``: the -O3 one (waits)."""

    def __init__(self, ptx: str, arch: str, *, cache=True):
        self.arch = arch
        self.full = start_cubin(ptx, arch, cache=cache, options=[])
        self.fast: PendingCubin | None = None
        if self.full._proc is not None:             # ptxas -O3 runs: not cached, not refused
            self.fast = start_cubin(ptx, arch, cache=cache, options=FAST_OPTIONS)
            _cubin._count("tiered")
            _register_exit()
            with _LOCK:
                _BUILDS.add(self)

    @property
    def cached(self) -> bool:
        return self.full.cached

    @property
    def reason(self) -> str | None:
        return self.full.reason

    def first(self) -> tuple[bytes | None, bool]:
        """``(cubin, is_fast)``: -O3's where it is done (or there is no -O1), else -O1's (waited
        for); -O3's, waited for, where -O1 failed."""
        if self.fast is None or self.full.finished():
            data = self._full_result()
            if data is not None or self.fast is None:
                return data, False
        data = self.fast.result()
        if data is not None:
            return data, True
        log.debug("ptxas -O1 gave no cubin for %s (%s); waiting for -O3", self.arch, self.fast.reason)
        return self._full_result(), False

    def result(self) -> bytes | None:
        return self.first()[0]

    def best(self) -> bytes | None:
        """The -O3 cubin (waits), or -O1's where -O3 failed."""
        data = self._full_result()
        return data if data is not None or self.fast is None else self.fast.result()

    def _full_result(self) -> bytes | None:
        try:
            return self.full.result()
        finally:
            with _LOCK:
                _BUILDS.discard(self)


def start_tiered(ptx: str, arch: str, *, cache=True):
    """A ``TieredCubin`` where tiering applies, else the plain ``PendingCubin`` of cubin.py."""
    if tiering_enabled():
        return TieredCubin(ptx, arch, cache=cache)
    return start_cubin(ptx, arch, cache=cache)


class Upgrade:
    """The switch of one loaded module to the -O3 cubin, once that is assembled."""

    def __init__(self, pending: TieredCubin, name: str):
        self.pending, self.name = pending, name
        self.done = threading.Event()
        self.swapped = False              # replace() ran and returned
        self.error: str | None = None     # why it did not
        self._thread: threading.Thread | None = None

    def start(self, replace) -> "Upgrade":
        """Wait for -O3 on a daemon thread, then ``replace(cubin)`` there (once)."""
        with _LOCK:
            if _shutting_down:
                self.error = "process exit"
                self.done.set()
                return self
            _LIVE.add(self)
        _register_exit(first=True)
        self._thread = threading.Thread(target=self._run, args=(replace,), daemon=True,
                                        name=f"adoffload-ptxas-O3-{self.name}")
        self._thread.start()
        return self

    def _run(self, replace) -> None:
        try:
            data = self.pending._full_result()
            if data is None:
                self._failed(f"ptxas -O3 gave no cubin ({self.pending.full.reason})")
            elif _shutting_down:
                self._failed("process exit")
            else:
                replace(data)
                self.swapped = True
                _cubin._count("upgrades")
                log.debug("%s on %s now runs ptxas -O3's cubin", self.name, self.pending.arch)
        except Exception as exc:     # noqa: BLE001 - never crash the program: the -O1 module stays
            self._failed(f"{type(exc).__name__}: {exc}")
        finally:
            with _LOCK:
                _LIVE.discard(self)
            self.done.set()

    def _failed(self, reason: str) -> None:
        self.error = reason
        _cubin._count("upgrade_failures")
        log.debug("%s on %s keeps ptxas -O1's module: %s", self.name, self.pending.arch, reason)

    def wait(self, timeout: float | None = None) -> bool:
        return self.done.wait(timeout)


def load_tiered(ptx: str, arch: str, load, pending, name: str = "kernel") -> tuple:
    """``(module, upgrade)``: ``load`` of the first cubin of ``pending`` (a TieredCubin or a
    PendingCubin; the PTX where there is none or the driver refuses it, cubin.load_image) and the
    ``Upgrade`` to -O3 the caller starts once it can swap (None where there is nothing to upgrade)."""
    if not isinstance(pending, TieredCubin):
        return load_image(ptx, arch, load, pending.result())[0], None
    data, fast = pending.first()
    module, was_cubin = load_image(ptx, arch, load, data)
    return module, (Upgrade(pending, name) if fast and was_cubin else None)


def wait_for_upgrades(timeout: float | None = None) -> bool:
    """Wait until every started upgrade has finished (True) or ``timeout`` passed (False)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        with _LOCK:
            live = list(_LIVE)
        if not live:
            return True
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return False
        live[0].wait(left)


def _at_exit() -> None:
    """Kill the -O3 builds still running; give their upgrade threads ``EXIT_GRACE_S`` to see it."""
    global _shutting_down
    with _LOCK:
        _shutting_down = True
        builds = list(_BUILDS)
    for build in builds:
        build.full.kill()
    wait_for_upgrades(EXIT_GRACE_S)
    for build in builds:             # reap what no thread waited for (a build nobody loaded)
        proc = build.full._proc
        if proc is not None and proc.returncode is None:
            try:
                proc.wait(timeout=0.2)
            except Exception:        # noqa: BLE001 - exit goes on
                pass


__all__ = ["TieredCubin", "Upgrade", "start_tiered", "load_tiered", "tiering_enabled", "wait_for_upgrades",
           "TIERED_ENV", "FAST_OPTIONS"]
