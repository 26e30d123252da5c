"""Native launch entries: one cached host plan's launch as a CPython function compiled to machine code.

A cache hit of the Python path (launch_plan.py, launch_run.py) costs a few microseconds: the
signature check, binding, the overlap check and slot packing in Python, then one ctypes call of
the kernel's host entry, which alone costs more than a Numba ``@njit`` call. For a plan that runs
on the calling thread (a host launch of one chunk) without launcher-sized buffers, the second
launch of its signature JIT-compiles a native entry (LLVM IR from native_ir.py, MCJIT-compiled;
it calls the kernel's host entry at its address) and wraps it as a builtin function
(``PyCFunction_NewEx`` with a ``METH_VARARGS | METH_KEYWORDS`` method definition that the
``NativeEntry`` keeps alive). The kernel's ``_call`` becomes that function: ``Kernel.__call__`` is a
property returning ``_call``, so ``kernel(*args, grid=..., **kwargs)`` reaches the entry with the
call's own argument tuple and keyword dict and no Python frame.

The entry handles only the exact launch the plan was built for, every fact of which is a constant
of its code: the number of positional arguments and the keyword names, an ``int`` (or tuple of
``int``) grid equal to the plan's, the device object (or an equal string; absent: the default
``"cpu"``), per array argument exactly ``numpy.ndarray`` with the plan's dtype object, rank, shape
and C-contiguous/aligned/writeable flags (read from the ``PyArrayObject`` at the offsets
native_layout.py measured), per scalar exactly the plan's type and a value its slot holds as
``struct`` packs it, and no overlap of a written array with another. Then it copies seeds, zeroes
Out arrays, packs the slots on its stack, calls the host entry and reads the status record: a set record goes to the
plan's ``report`` (launch_run.status_reporter), which raises the error the Python path raises. Any
other launch goes, before touching memory, to the next entry of the kernel's chain (below) or to the
Python path (``Kernel._python_call``), and returns what it returns: the Python path stays the one
place that checks, converts or refuses arguments and words the errors. Each entry counts its launches
and fallbacks and keeps the reason of the last fallback (``REASONS``).

The GIL is released around the kernel (``PyEval_SaveThread``) as ctypes did, except for a launch of
at most ``GIL_RELEASE_THREADS`` threads of a body without loops (``loop_free``): such a launch is
short, so other threads wait little for it, while releasing and re-taking the GIL would add about
45 ns to a 0.2 µs launch (measured on the 2-core development machine).

A kernel keeps a chain of at most ``MAX_CHAIN`` (4) entries, the most recently made first: the
kernel's ``_call`` is the head's function, and each entry hands a launch it does not match to the next
entry, the last one to the Python path: its cell, read per hand-off, points to a (code, object) pair,
the next entry's ``as_target`` (the code after the switch check, which the head already made; called
directly, the object held for the call) or its own ``python_target`` (code null: ``PyObject_Call`` of
the Python path). So a script alternating up to four signatures (two shapes, two grids, a scalar given
as a float and as an ``np.float32``) launches each natively; each entry passed costs its failed checks
(a mismatch fails at the first fact that differs; the grid is checked right after its lookup) and the
call: about 0.03 µs an entry passed, measured on the 2-core development machine
(benchmarks/results/2026-12-04-nativechain). The chain is fixed once full: a fifth signature's
plan gets no entry (``native_why_not`` says so) and its launches take the Python path after the four
entries' checks, evicting nothing, so the four keep launching natively. (Dropping the oldest instead
would make five alternating signatures re-link on every call, each Python-path launch evicting the
entry the next call needs.) The price: a kernel whose first four entries are of signatures it no
longer launches keeps them; an entry is made only at a signature's second launch, so one-off
signatures take no place. A plan re-made for a signature already in the chain (a scalar its slot
could not hold re-makes it: launch.py) gets an entry that takes its predecessor's place. Linking happens
once, under ``_BUILD_LOCK``, when an entry is made; a hand-off holds a reference to the entry it
calls, and a cell is rewritten before the reference that kept its old target alive (``next``) is
dropped, so a re-link never frees what another thread is about to call (entries read their cells and
take that reference holding the GIL, with no Python code in between).

Counters: an entry's ``fallbacks`` counts every launch it did not run (``last_reason``: why the last
one), of which ``passed_on`` went to the next entry and the rest to the Python path; ``totals()``
counts the native launches of all entries and the launches the chains handed to the Python path (once
per launch, by the entry that handed it over), so an alternating loop that runs natively adds
nothing to its second count. A launch failing the ``ADOFFLOAD_NATIVE_LAUNCH`` check goes straight to
the Python path.

Making an entry that fails (a bug: the IR does not verify, say) leaves the plan without one, with a
RuntimeWarning saying why; the launch goes on through the Python path.

``ADOFFLOAD_NATIVE_LAUNCH=0`` switches native entries off: none is made, and those already made
fall back (the head reads the variable from os.environ's own dict on each launch, as the Python path
reads its switches: kernels/environment.py, and calls the Python path directly).
"""
from __future__ import annotations

import ctypes
import os
import threading
import warnings

from .environment import environment_key, environment_value
from .native_ir import C_API, ENTRY_NAME, GIL_RELEASE_THREADS, REASONS, SLOT_TYPES, entry_text
from .native_layout import LAYOUT

__all__ = ["GIL_RELEASE_THREADS", "MAX_CHAIN", "NATIVE_ENV", "NativeEntry", "REASONS", "chain_of", "entry_of",
           "native_function", "totals", "why_not_native"]

NATIVE_ENV = "ADOFFLOAD_NATIVE_LAUNCH"    # "0": no native launch entries
MAX_CHAIN = 4                             # native entries per kernel (the chain is fixed once full)
NATIVE_KEY = environment_key(NATIVE_ENV)
_OFF = ("0", b"0")
METH_VARARGS_KEYWORDS = 0x0001 | 0x0002
ENVIRON = getattr(os.environ, "_data", None)
_ENCODE_VALUE = getattr(os.environ, "encodevalue", None)
OFF_VALUE = _ENCODE_VALUE("0") if _ENCODE_VALUE is not None else None


TOTALS = (ctypes.c_int64 * 2)()
"""Native launches of all entries of the process, and launches the entries handed to the Python path
(once per launch, whichever entry of a chain handed it over; tests read them: ``totals()``)."""


def totals() -> tuple[int, int]:
    """(native launches, launches handed to the Python path) of every native entry so far."""
    return TOTALS[0], TOTALS[1]


class _PyMethodDef(ctypes.Structure):
    _fields_ = [("ml_name", ctypes.c_char_p), ("ml_meth", ctypes.c_void_p), ("ml_flags", ctypes.c_int),
                ("ml_doc", ctypes.c_char_p)]


def native_launch_enabled() -> bool:
    return environment_value(NATIVE_KEY) not in _OFF


def why_not_native(plan) -> str | None:
    """Why ``plan`` gets no native entry (None: it can have one)."""
    if LAYOUT is None:
        from .native_layout import LAYOUT_PROBLEM
        return f"the object layout was not measured ({LAYOUT_PROBLEM})"
    if not isinstance(ENVIRON, dict) or OFF_VALUE is None:
        return "os.environ has no dict of its own to read the switch from"
    if any(not hasattr(ctypes.pythonapi, name) for name in C_API):
        return "this Python lacks a C API function the entry calls"
    shape = plan.call_shape
    if shape is None:
        return "the plan is not cached"
    if not plan.on_host or plan.hidden or plan.given_hidden or plan.needs_log or plan.total == 0:
        return "not a host launch with only the caller's arguments"
    grid = shape.grid
    if not (type(grid) is int or (type(grid) is tuple and all(type(g) is int for g in grid))):
        return "the grid is not an int or a tuple of ints"
    variant = plan.variant(True)
    if not variant.inline:
        return "the launch runs in several chunks"
    if any(t not in SLOT_TYPES for t in variant.compiled.flat_types):
        return "a parameter's slot type has no native packing"
    return None


def loop_free(kernel, proven) -> bool:
    """Whether the kernel's body has no cycle in its control flow (codegen/gpu/grid_stride.has_loop
    on its IR; helpers are inlined into it): each thread then runs a bounded path, so a launch of
    few threads is short."""
    import llvmlite.binding as llvm
    from ..codegen.gpu.grid_stride import has_loop
    return not has_loop(llvm.parse_assembly(kernel.module_text(proven)), kernel.body_name)


class _Engine:
    """The one MCJIT engine of every native entry of the process: its target machine (fast
    instruction selection: the code is straight-line calls and compares) is made once, and each
    entry's module is added to it (a module per entry, its function named apart)."""

    def __init__(self):
        import llvmlite.binding as llvm
        from ..codegen.targets import host_target_machine
        self.llvm = llvm
        machine = host_target_machine(fresh=True, codegen_level=0)      # owned by the engine
        self.triple, self.layout = machine.triple, str(machine.target_data)
        self.engine = llvm.create_mcjit_compiler(self.module(""), machine)
        self.count = 0
        for name in C_API:
            if not llvm.address_of_symbol(name):
                llvm.add_symbol(name, ctypes.cast(getattr(ctypes.pythonapi, name), ctypes.c_void_p).value)

    def module(self, text: str):
        module = self.llvm.parse_assembly(text)
        module.triple, module.data_layout = self.triple, self.layout
        return module

    def add(self, text: str, name: str) -> int:
        """Compile ``text`` (defining ``name``); the address of ``name``."""
        module = self.module(text)
        module.verify()
        self.engine.add_module(module)
        self.engine.finalize_object()
        return self.address(name)

    def address(self, name: str) -> int:
        address = self.engine.get_function_address(name)
        if not address:
            raise RuntimeError(f"the native launch entry @{name} was not compiled")
        return address


_ENGINE: _Engine | None = None


_BUILD_LOCK = threading.Lock()


def native_function(plan):
    """The plan's native entry as a Python callable (made on the first call and linked into its kernel's
    chain), or None where it has none; None without deciding while ``ADOFFLOAD_NATIVE_LAUNCH=0``."""
    if plan.native_tried:
        return plan.native
    if not native_launch_enabled():
        return None
    with _BUILD_LOCK:
        if not plan.native_tried:
            kernel = plan.kernel
            chain = chain_of(kernel)
            reason = why_not_native(plan)
            replaced = next((k for k, e in enumerate(chain) if e.key == plan.key), None)
            if reason is None and len(chain) >= MAX_CHAIN and replaced is None:
                reason = f"the kernel has {MAX_CHAIN} native entries, of other signatures (the chain is full)"
            native = None
            if reason is None:
                try:
                    entry = NativeEntry(plan)
                except Exception as exc:          # noqa: BLE001 - reported, and the Python path runs
                    reason = f"making the native entry failed: {type(exc).__name__}: {exc}"
                    warnings.warn(f"kernel '{plan.signature.name}': {reason}; its launches take the Python "
                                  f"path", RuntimeWarning, stacklevel=4)
                else:
                    native = entry.function
                    _link(kernel, (entry, *chain) if replaced is None else
                          (*chain[:replaced], entry, *chain[replaced + 1:]))
            plan.native, plan.native_why_not = native, reason
            plan.native_tried = True
    return plan.native


def _link(kernel, chain: tuple) -> None:
    """Make ``chain`` the kernel's (head first): each entry hands on to the next, the last to the
    Python path; the kernel's calls reach the head. Called holding _BUILD_LOCK."""
    for entry, after in zip(chain, (*chain[1:], None)):
        entry.link(after)
    kernel._native_chain = chain
    kernel._call = chain[0].function


def chain_of(kernel) -> tuple:
    """The kernel's native entries in the order a call tries them (head first; empty: none)."""
    return kernel.__dict__.get("_native_chain", ())


def entry_of(kernel) -> "NativeEntry | None":
    """The NativeEntry a call of ``kernel`` runs first, if any (tests and benchmarks read its counters)."""
    function = kernel.__dict__.get("_call")
    entry = getattr(function, "__self__", None)
    return entry if isinstance(entry, NativeEntry) else None


class NativeEntry:
    """One plan's native entry: ``function`` (the callable; its ``__self__`` is this object, which keeps
    the method definition and the objects the code points to alive; the code stays in the process's
    engine, a few KiB per entry), ``counters`` (launches, fallbacks, the last fallback's reason as 1 +
    its index in REASONS, fallbacks passed on to the next entry), ``key`` (its plan's call key), ``next``
    (the entry it hands other launches to, None: the Python path; the code reads the (code, object)
    pair to call from its cell: the next's ``as_target``, or its own ``python_target``) and ``text``
    (the IR)."""

    def __init__(self, plan):
        global _ENGINE
        from .launch_run import status_reporter
        if _ENGINE is None:
            _ENGINE = _Engine()
        self.switch = (ENVIRON, NATIVE_KEY, OFF_VALUE)     # read by the entry on each launch
        self.counters = (ctypes.c_int64 * 4)()
        self.report = status_reporter(plan)
        self.key = plan.key
        kernel = plan.kernel
        self.python_call = type(kernel)._python_call.__get__(kernel)
        self.python_target = (ctypes.c_void_p * 2)(None, id(self.python_call))   # (code null, object)
        self.next = None                      # the next NativeEntry of the chain (None: the Python path)
        self.next_cell = ctypes.c_void_p(ctypes.addressof(self.python_target))
        self._keep: list = []                 # objects the code points to
        self.loop_free = loop_free(plan.kernel, plan.proven)
        _ENGINE.count += 1
        self.name = f"{ENTRY_NAME}.{_ENGINE.count}"
        self.text = entry_text(self, plan, plan.variant(True))
        self.address = _ENGINE.add(self.text, self.name)
        self.body_address = _ENGINE.address(f"{self.name}.body")
        self.as_target = (ctypes.c_void_p * 2)(self.body_address, id(self))   # what an entry before it calls
        self._name = f"{plan.signature.name} (native launch)".encode()
        self._def = _PyMethodDef(self._name, self.address, METH_VARARGS_KEYWORDS, None)
        new = ctypes.pythonapi.PyCFunction_NewEx
        new.restype, new.argtypes = ctypes.py_object, (ctypes.POINTER(_PyMethodDef), ctypes.py_object,
                                                       ctypes.py_object)
        self.function = new(ctypes.byref(self._def), self, None)

    def link(self, after: "NativeEntry | None") -> None:
        """Hand the launches this entry does not match to ``after`` (None: the Python path). The cell
        is rewritten first, while ``after`` is held here, then the reference to the old target goes."""
        target = self.python_target if after is None else after.as_target
        self.next_cell.value = ctypes.addressof(target)
        self.next = after

    def cell(self) -> str:
        """The address of the cell holding the address of the (code, object) pair launches go to."""
        return f"inttoptr (i64 {ctypes.addressof(self.next_cell)} to ptr)"

    def constant(self, obj) -> str:
        """``obj``'s address as an IR pointer constant (this entry keeps ``obj`` alive)."""
        self._keep.append(obj)
        return f"inttoptr (i64 {id(obj)} to ptr)"

    def counter(self, k: int) -> str:
        """The address of this entry's counter ``k`` (0 launches, 1 fallbacks, 2 the last reason, 3 passed on)."""
        return f"inttoptr (i64 {ctypes.addressof(self.counters) + 8 * k} to ptr)"

    @staticmethod
    def total(k: int) -> str:
        """The address of the process's count ``k`` (0 launches, 1 fallbacks: TOTALS)."""
        return f"inttoptr (i64 {ctypes.addressof(TOTALS) + 8 * k} to ptr)"

    @property
    def launches(self) -> int:
        return self.counters[0]

    @property
    def fallbacks(self) -> int:
        return self.counters[1]

    @property
    def passed_on(self) -> int:
        """Fallbacks handed to the next entry of the chain (the rest went to the Python path)."""
        return self.counters[3]

    @property
    def last_reason(self) -> str | None:
        code = self.counters[2]
        return REASONS[code - 1] if code else None
