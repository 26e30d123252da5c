"""How much local memory (``ado.zeros`` arrays, and what AD adds to them) one thread of a kernel
uses, and the per-target limit above which a kernel is refused before it is compiled.

A host thread keeps its local arrays on its stack; an array larger than the stack killed the
process with a segmentation fault, so the limit is checked on the canonical IR (every
``alloca`` counted) when a kernel is compiled for a target.
"""
from __future__ import annotations

import re

# Bytes of local arrays (``ado.zeros``, and what AD adds to them) one thread may use, by target.
# host: the arrays live on the stack of the launching thread or a pool worker (8 MiB by default
# on Linux, shared with the call chain); nvptx: CUDA's local memory is at most 512 KiB per
# thread; amdgpu: a conservative limit for scratch memory, not measured (no AMD GPU here).
LOCAL_MEMORY_LIMITS = {"host": 1 << 20, "nvptx": 512 << 10, "amdgpu": 128 << 10}
_SCALAR_BYTES = {"double": 8, "float": 4, "half": 2, "i64": 8, "i32": 4, "i16": 2, "i8": 1, "i1": 1, "ptr": 8}


def local_memory_bytes(module_text: str) -> int:
    """The bytes of every ``alloca`` in a module's text (an upper bound for one thread's locals)."""
    def size(type_text: str) -> int:
        array = re.fullmatch(r"\[\s*(\d+)\s+x\s+(.+)\]", type_text.strip())
        if array:
            return int(array.group(1)) * size(array.group(2))
        return _SCALAR_BYTES.get(type_text.strip(), 8)

    total = 0
    for line in module_text.splitlines():
        _, found, rest = line.partition("= alloca ")
        if not found:
            continue
        depth, fields, current = 0, [], ""
        for ch in rest:                    # split on the commas outside brackets
            depth += 1 if ch in "[{<" else -1 if ch in "]}>" else 0
            if ch == "," and depth == 0:
                fields.append(current)
                current = ""
            else:
                current += ch
        fields.append(current)
        count = re.fullmatch(r"\s*i(?:32|64)\s+(\d+)\s*", fields[1]) if len(fields) > 1 else None
        total += size(fields[0]) * (int(count.group(1)) if count else 1)
    return total


def check_local_memory(name: str, module_text: str, target: str) -> None:
    """Refuse, before compiling, a kernel whose local arrays cannot fit one thread's memory on
    ``target`` (on the host a too-large array overflowed the stack and killed the process)."""
    need, limit = local_memory_bytes(module_text), LOCAL_MEMORY_LIMITS.get(target)
    if limit is not None and need > limit:
        from ..errors import CompilationError
        limits = ", ".join(f"{t} {v} bytes" for t, v in LOCAL_MEMORY_LIMITS.items())
        raise CompilationError(
            f"kernel '{name}': its local arrays (ado.zeros, with any copies AD adds) need {need} bytes per "
            f"thread, more than the {limit} bytes allowed on target '{target}' (limits: {limits}); use a "
            f"smaller local array, or pass the storage as an array parameter")
