"""C source as differentiable, host-callable functions: ``ado.from_c(source, opt=2)``.

The ziglang wheel's clang (``python -m ziglang cc``, which brings libc headers for the host) turns
the source into LLVM IR at ``-O<opt>``; ``from_llvm`` then prepares, canonicalizes and imports it, so
``mod["f"]`` is the same ``ForeignFunction`` as for IR brought by hand. clang's IR is cached in the
compile cache's ``clang-ir`` folder (next to the CUDA sources'), keyed by the source, the level,
the flags and the host CPU (the IR names it). A compile error is a ``ForeignCompileError`` that
names the first error's line.
"""
from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from ..errors import ArgumentError, ForeignCompileError, ToolNotFoundError
from .llvm import ForeignModule, from_llvm

TIMEOUT_S = 120
SOURCE_NAME = "<c source>"
# zig's cc maps -O1/-O2/-O3 all to clang -O2 (its ReleaseFast): -Xclang -O<k> restores the level
# asked for, and clang's own -O1 does not vectorize.
OPT_FLAGS = {0: ["-O0"], 1: ["-O1", "-fno-vectorize", "-fno-slp-vectorize", "-Xclang", "-O1"],
             2: ["-O2"], 3: ["-O3", "-Xclang", "-O3"]}
# -fno-discard-value-names: the IR keeps the C parameters' names, so argument errors say 'x', not '1'
IR_FLAGS = ["-S", "-emit-llvm", "-fno-sanitize=all", "-fno-discard-value-names"]
# part of the cache key: bumped when what is stored for the same source changes
C_IR_FORMAT = 2
_FIRST_ERROR = re.compile(r"^" + re.escape(SOURCE_NAME) + r":(\d+):(\d+): (?:fatal )?error: (.*)$", re.M)


def from_c(source: str, *, opt: int = 2, options=()) -> ForeignModule:
    """Compile C ``source`` at ``-O<opt>`` (0..3) with the wheel's clang and import it as
    ``ado.from_llvm`` does; ``options`` are extra clang flags (``-DN=8``, ``-I...``)."""
    if not isinstance(source, str):
        raise ArgumentError(f"ado.from_c takes the C source as a str, got {type(source).__name__}")
    if opt not in OPT_FLAGS or isinstance(opt, bool):
        raise ArgumentError(f"ado.from_c: opt must be 0, 1, 2 or 3, got {opt!r}")
    options = tuple(options)
    if not all(isinstance(o, str) for o in options):
        raise ArgumentError(f"ado.from_c: options must be clang flags (strs), got {options!r}")
    return from_llvm(compile_c_to_llvm(source, opt, options))


def c_command() -> list[str]:
    """``python -m ziglang cc``: clang with the libc headers of the host."""
    if importlib.util.find_spec("ziglang") is None:
        raise ToolNotFoundError("ado.from_c needs clang from the ziglang wheel: pip install ziglang")
    return [sys.executable, "-m", "ziglang", "cc"]


def compile_c_to_llvm(source: str, opt: int, options: tuple = ()) -> str:
    """LLVM IR text of ``source`` at ``-O<opt>`` (cached; see the module docstring)."""
    import llvmlite.binding as llvm

    from ..codegen.cache import CompileCache, default_root
    cache = CompileCache(default_root() / "clang-ir", versioned=False)
    key = ["c-ir", C_IR_FORMAT, opt, list(options), llvm.get_process_triple(), llvm.get_host_cpu_name(), source]
    hit = cache.get(key)
    if hit is not None:
        return hit.decode()
    text = _compile(source, opt, options)
    cache.put(key, text.encode())
    return text


def _compile(source: str, opt: int, options: tuple) -> str:
    with tempfile.TemporaryDirectory(prefix="adoffload-c-") as tmp:
        path, out = Path(tmp) / "source.c", Path(tmp) / "source.ll"
        path.write_text(source)
        command = c_command() + IR_FLAGS + OPT_FLAGS[opt] + [*options, str(path), "-o", str(out)]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise ForeignCompileError(f"clang took more than {TIMEOUT_S} s on the C source") from None
        if done.returncode != 0:
            message = "\n".join(line for line in done.stderr.replace(str(path), SOURCE_NAME).splitlines()
                                 if not line.startswith("zig: warning:")).strip()
            first = _FIRST_ERROR.search(message)
            where = f" (line {first.group(1)}, column {first.group(2)}: {first.group(3)})" if first else ""
            raise ForeignCompileError(f"clang could not compile the C source at -O{opt}{where}:\n{message}")
        name = f"{path.parent.name}/{path.name}"        # debug info may spell the path relative to /tmp
        return out.read_text().replace(str(path), SOURCE_NAME).replace(name, SOURCE_NAME)
