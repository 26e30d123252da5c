"""Rust's allocator shims for host code: what a crate's own library would define.

A Rust crate's IR calls ``__rust_alloc``, ``__rust_dealloc``, ``__rust_realloc``,
``__rust_alloc_zeroed`` (by those names or rustc's v0-mangled ``_RNv..___rustc12___rust_alloc``)
and the marker ``__rust_no_alloc_shim_is_unstable_v2``. The .ll does not define them (the
crate's library does), so the host JIT would refuse the module. Here they get bodies on libc's
allocator, honouring Rust's alignment argument (malloc's 16 bytes, else ``aligned_alloc``).
The AD engine sees the calls before this (enzyme/memory.py gives them shadow blocks); these
bodies are linked only into the program that runs.
"""
from __future__ import annotations

import re

import llvmlite.binding as llvm

_RUST_V0 = re.compile(r"^_RNv\w*___rustc(\d+)_(__rust_\w+)$")
MALLOC_ALIGNMENT = 16

_BODIES = {
    "__rust_alloc": """(i64 %size, i64 %align) {{
  %small = icmp ule i64 %align, {m}
  br i1 %small, label %plain, label %aligned
plain:
  %p = call ptr @malloc(i64 %size)
  ret ptr %p
aligned:
  %round = add i64 %size, %align
  %round1 = sub i64 %round, 1
  %mask = sub i64 0, %align
  %bytes = and i64 %round1, %mask
  %q = call ptr @aligned_alloc(i64 %align, i64 %bytes)
  ret ptr %q
}}""",
    "__rust_alloc_zeroed": """(i64 %size, i64 %align) {{
  %p = call ptr @{alloc}(i64 %size, i64 %align)
  %null = icmp eq ptr %p, null
  br i1 %null, label %done, label %clear
clear:
  call void @llvm.memset.p0.i64(ptr %p, i8 0, i64 %size, i1 false)
  br label %done
done:
  ret ptr %p
}}""",
    "__rust_dealloc": """(ptr %p, i64 %size, i64 %align) {{
  call void @free(ptr %p)
  ret void
}}""",
    "__rust_realloc": """(ptr %p, i64 %old, i64 %align, i64 %new) {{
  %small = icmp ule i64 %align, {m}
  br i1 %small, label %plain, label %aligned
plain:
  %q = call ptr @realloc(ptr %p, i64 %new)
  ret ptr %q
aligned:
  %r = call ptr @{alloc}(i64 %new, i64 %align)
  %null = icmp eq ptr %r, null
  br i1 %null, label %failed, label %copy
copy:
  %less = icmp ult i64 %old, %new
  %n = select i1 %less, i64 %old, i64 %new
  call void @llvm.memcpy.p0.p0.i64(ptr %r, ptr %p, i64 %n, i1 false)
  call void @free(ptr %p)
  ret ptr %r
failed:
  ret ptr null
}}""",
    "__rust_no_alloc_shim_is_unstable_v2": """() {{
  ret void
}}""",
}
_RETURNS = {"__rust_alloc": "ptr", "__rust_alloc_zeroed": "ptr", "__rust_realloc": "ptr"}
_LIBC = """declare ptr @malloc(i64)
declare ptr @aligned_alloc(i64, i64)
declare ptr @realloc(ptr, i64)
declare void @free(ptr)
declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)
declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)
"""


def shim_name(name: str) -> str | None:
    """The allocator shim ``name`` stands for (``__rust_alloc``...), or None."""
    mangled = _RUST_V0.match(name)
    if mangled and int(mangled.group(1)) == len(mangled.group(2)):
        name = mangled.group(2)
    return name if name in _BODIES else None


def define_allocator_shims(module: llvm.ModuleRef, missing: list[str]) -> list[str]:
    """Link bodies for the Rust allocator shims among ``missing`` (declared, defined nowhere) into
    ``module``; returns the names still missing."""
    shims = {name: shim_name(name) for name in missing}
    wanted = {name: shim for name, shim in shims.items() if shim is not None}
    if not wanted:
        return missing
    alloc = next((n for n, s in wanted.items() if s == "__rust_alloc"), "adoffload.rust_alloc")
    lines = [_LIBC]
    if alloc == "adoffload.rust_alloc" and any(s in ("__rust_alloc_zeroed", "__rust_realloc") for s in wanted.values()):
        lines.append(f'define internal ptr @"{alloc}"' + _BODIES["__rust_alloc"].format(m=MALLOC_ALIGNMENT))
    for name, shim in wanted.items():
        body = _BODIES[shim].format(m=MALLOC_ALIGNMENT, alloc=f'"{alloc}"')
        lines.append(f'define {_RETURNS.get(shim, "void")} @"{name}"{body}')
    shims_module = llvm.parse_assembly("\n".join(lines))
    shims_module.triple, shims_module.data_layout = module.triple, module.data_layout
    module.link_in(shims_module)
    return [name for name in missing if name not in wanted]
