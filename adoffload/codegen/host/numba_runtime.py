"""numba's runtime for IR that numba generated, when that IR runs on the host.

A ``numba.cfunc``'s module calls numba's C helpers (``numba_gil_ensure``, ``numba_do_raise``, ...
on its error paths) and its memory manager (``NRT_MemInfo_alloc``, ``NRT_decref`` ...). They live in
numba's extension modules, not in a library the JIT can find by name; numba itself hands their
addresses to LLVM's symbol table when its CPU target starts. We let it do exactly that, and only
when the module needs them: whoever brings numba's IR has numba installed.
"""
from __future__ import annotations

NUMBA_PREFIXES = ("numba_", "NRT_")


def needs_numba_runtime(missing: list[str]) -> bool:
    return any(name.startswith(NUMBA_PREFIXES) for name in missing)


def load_numba_runtime() -> bool:
    """Register numba's helper and NRT symbols with LLVM (numba's CPU target does it when it is
    created). False when numba is not installed."""
    try:
        from numba.core.registry import cpu_target
    except ImportError:
        return False
    cpu_target.target_context        # its initialisation installs the symbols (llvmlite add_symbol)
    return True
