"""clang's errors about a CUDA/HIP source, told in the user's terms.

clang's diagnostics for a call adoffload's header does not provide (``printf``, ``malloc``,
``clock64``) say "use of undeclared identifier", and for a call the header provides with other
argument types (``atomicAdd`` on a ``short*``) list every candidate with the header's macro
expansions, pointing into ``ado_cuda.h``. ``explained`` puts first one line per error of the
user's source naming the call, its line and why (for the calls listed in ``UNSUPPORTED``), then
clang's diagnostics with those inside the header shortened to their messages (no header source
lines, no "expanded from macro" notes).
"""
from __future__ import annotations

import re
from pathlib import Path

_PRINT = "adoffload kernels cannot print (write the values to an output array instead)"
_HEAP = ("kernels cannot allocate memory (use a local array of fixed size, or pass a scratch array as a "
         "parameter)")
_STOP = "a kernel cannot stop the launch (record the condition in an output array)"
_TIME = "there are no clocks or sleeps (the host runs a block's threads one after another)"
_RUNTIME = "the CUDA runtime API is not available in device code (no dynamic parallelism)"
_TEXTURE = "textures and surfaces are not supported (read the array through a pointer parameter)"
_OLD_SHUFFLE = ("the shuffles without a mask are not declared (CUDA removed them, and HIP's are 64-lane): use "
                "the _sync form, e.g. __shfl_down_sync(0xffffffffu, v, d)")
UNSUPPORTED = {
    **dict.fromkeys(("printf", "vprintf", "puts", "fprintf", "sprintf"), _PRINT),
    **dict.fromkeys(("malloc", "free", "calloc", "realloc", "aligned_alloc", "memalign"), _HEAP),
    **dict.fromkeys(("assert", "__assertfail", "__trap", "__brkpt", "abort", "exit"), _STOP),
    **dict.fromkeys(("clock", "clock64", "__globaltimer", "__nanosleep", "time"), _TIME),
    **dict.fromkeys(("cudaMalloc", "cudaFree", "cudaMemcpy", "cudaMemcpyAsync", "cudaMemset",
                     "cudaDeviceSynchronize", "cudaGetLastError", "cudaLaunchKernel"), _RUNTIME),
    **dict.fromkeys(("tex1Dfetch", "tex1D", "tex2D", "tex3D", "surf2Dread", "surf2Dwrite"), _TEXTURE),
    **dict.fromkeys(("__shfl", "__shfl_up", "__shfl_down", "__shfl_xor"), _OLD_SHUFFLE),
    **dict.fromkeys(("rand", "srand", "random"), "there is no C library random generator (pass random numbers "
                                                  "in an array)"),
}
_DIAGNOSTIC = re.compile(r"^(?P<file>.+?):(?P<line>\d+):(?P<col>\d+): (?P<kind>fatal error|error|warning|note): "
                         r"(?P<message>.*)$")
_UNDECLARED = re.compile(r"use of undeclared identifier '(\w+)'")
_NO_MATCH = re.compile(r"no matching function for call to '(\w+)'")
_UNAVAILABLE = re.compile(r"'(\w+)' is unavailable: (.*)")


def explained(stderr: str, source_name: str, header: Path) -> str:
    """clang's ``stderr`` (the source already named ``source_name``), summary first (module docstring)."""
    diagnostics = _split(stderr)
    summary = []
    for first, _ in diagnostics:
        m = _DIAGNOSTIC.match(first)
        if m is None or m["file"] != source_name or m["kind"] not in ("error", "fatal error"):
            continue
        where, message = f"{source_name}:{m['line']}", m["message"]
        undeclared, no_match, unavailable = (r.search(message) for r in (_UNDECLARED, _NO_MATCH, _UNAVAILABLE))
        if undeclared and undeclared.group(1) in UNSUPPORTED:
            name = undeclared.group(1)
            summary.append(f"{where}: {name} is not supported in adoffload's CUDA: {UNSUPPORTED[name]}")
        elif unavailable:
            summary.append(f"{where}: {unavailable.group(1)}: {unavailable.group(2).removeprefix('adoffload: ')}")
        elif no_match:
            summary.append(f"{where}: no {no_match.group(1)} of adoffload's CUDA header takes these argument types "
                           f"(its overloads are listed below)")
        elif undeclared:
            summary.append(f"{where}: '{undeclared.group(1)}' is not declared (adoffload's CUDA header provides "
                           f"what docs/cuda.md lists; system headers cannot be included)")
    kept = []
    for first, rest in diagnostics:
        m = _DIAGNOSTIC.match(first)
        if m is not None and Path(m["file"]) == header:
            if m["message"].startswith("expanded from macro"):
                continue
            kept.append(f"ado_cuda.h:{m['line']}: {m['kind']}: {m['message']}")
        else:
            kept += [first, *rest]
    head = "\n".join(summary)
    return f"{head}\nclang's diagnostics:\n" + "\n".join(kept) if summary else "\n".join(kept)


def _split(stderr: str) -> list[tuple[str, list[str]]]:
    """Diagnostics (and clang's other lines) as (their first line, the indented source lines under it)."""
    out: list[tuple[str, list[str]]] = []
    for line in stderr.strip().splitlines():
        if not line.startswith(" ") or not out:
            out.append((line, []))
        else:
            out[-1][1].append(line)
    return out
