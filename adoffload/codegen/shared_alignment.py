"""Shared arrays' alignment, made visible to LLVM so that loads and stores of neighbouring elements
merge into vector accesses (``ld.shared.v4``, ``ds_read_b128``).

A block body reaches its shared arrays through generic pointers: the GPU entry passes
``addrspacecast (ptr addrspace(3) @<body>.shared.k to ptr)``. LLVM's known-bits analysis does not
look through that cast, so every access keeps ``align 4`` and the load-store vectorizer, which runs
after address-space inference at code generation, cannot merge them. The entry therefore passes
``llvm.ptrmask(p, -SHARED_ALIGN)`` instead: the same address (the globals are that aligned), with
its low bits known zero, so O3 gives the accesses their true alignment. The masks are then replaced
by the plain pointer (``unmask_shared_pointers``): the NVPTX address-space inference fails on a mask
of a constant cast, and the alignments are already written on the accesses."""
from __future__ import annotations

import re

import llvmlite.binding as llvm
from llvmlite import ir

from ..errors import CompilationError

_PTR = ir.PointerType()
_MASK_NAME = "llvm.ptrmask.p0.i64"

# a mask the entry wrote (possibly with attributes O3 added: "tail", "align 16", "nonnull", ...)
_MASKED = re.compile(r"^(\s*%[-\w.$]+) = (?:tail |notail )?call [^@\n]*@llvm\.ptrmask\.p0\.i64\("
                     r"ptr (addrspacecast \(ptr addrspace\(3\) @[-\w.$]+ to ptr\)), i64 (-\d+)\)([^\n]*)$", re.M)


def aligned_shared_pointer(builder: ir.IRBuilder, storage: ir.GlobalVariable, align: int):
    """The generic pointer to a shared array whose alignment (``align``, that of ``storage``)
    LLVM can see: ``ptrmask(addrspacecast storage, -align)``."""
    if storage.align is None or storage.align < align:
        raise CompilationError(f"shared array {storage.name} is aligned to {storage.align}, not {align}")
    module = builder.module
    mask = module.globals.get(_MASK_NAME) or ir.Function(
        module, ir.FunctionType(_PTR, [_PTR, ir.IntType(64)]), _MASK_NAME)
    return builder.call(mask, [builder.addrspacecast(storage, _PTR), ir.IntType(64)(-align)])


def unmask_shared_pointers(module: llvm.ModuleRef) -> llvm.ModuleRef:
    """``module`` (optimized) with each mask of a shared array replaced by the pointer itself
    (``getelementptr i8, ptr p, i64 0``), which is the same address; the module unchanged when it has
    none. A mask of a shared array left in another form is a compilation error, not a crash later."""
    text = str(module)
    if "@llvm.ptrmask.p0.i64(ptr addrspacecast (ptr addrspace(3)" not in text:
        return module
    names = {g.name for g in module.global_variables}

    def plain(match: re.Match) -> str:
        name = match.group(2).split("@", 1)[1].split(" ", 1)[0]
        if name not in names:
            raise CompilationError(f"an alignment mask refers to unknown shared array @{name}")
        return f"{match.group(1)} = getelementptr i8, ptr {match.group(2)}, i64 0{_metadata(match.group(4))}"
    text = _MASKED.sub(plain, text)
    if "@llvm.ptrmask.p0.i64(ptr addrspacecast (ptr addrspace(3)" in text:
        raise CompilationError("a shared array's alignment mask was left in a form the code generator "
                               "cannot take (codegen/shared_alignment.py)")
    try:
        unmasked = llvm.parse_assembly(text)
        unmasked.verify()
    except RuntimeError as exc:
        raise CompilationError(f"removing shared arrays' alignment masks failed: {exc}") from exc
    return unmasked


def _metadata(rest: str) -> str:
    """The attachments (``, !dbg !5``) after a call, kept on the replacement; call-site attribute
    groups (``#3``) are dropped."""
    at = rest.find(", !")
    return rest[at:] if at >= 0 else ""
