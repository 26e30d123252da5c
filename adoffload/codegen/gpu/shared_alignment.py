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

from ...errors import CompilationError

_PTR = ir.PointerType()
_MASK_NAME = "llvm.ptrmask.p0.i64"

# a call of the mask (with whatever attributes O3 added: "tail", "align 16", "nonnull", ...)
_MASK_CALL = re.compile(r"^(\s*%[-\w.$]+) = (?:tail |notail )?call [^@\n]*@llvm\.ptrmask\.p0\.i64\("
                        r"ptr (.+), i64 (-?\d+|%[-\w.$]+)\)([^\n]*)$", re.M)
_SHARED_GLOBAL = re.compile(r"^@([-\w.$]+) = [^\n]*addrspace\(3\) global [^\n]*, align (\d+)$", re.M)
_CAST = re.compile(r"^addrspacecast \(ptr addrspace\(3\) @([-\w.$]+) to ptr\)$")


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
    """``module`` (optimized) with every ``llvm.ptrmask`` of a generic pointer gone: a mask of a shared
    array aligned at least as much is the pointer itself (``getelementptr i8, ptr p, i64 0``); any
    other mask (O3 may have moved ours, foreign IR may have its own) is done on the integer
    address, the same value by another route. The module unchanged when it has none."""
    text = str(module)
    if "@llvm.ptrmask.p0.i64(ptr " not in text:
        return module
    aligned = {name: int(align) for name, align in _SHARED_GLOBAL.findall(text)}

    def plain(match: re.Match) -> str:
        result, pointer, mask, rest = match.groups()
        cast = _CAST.match(pointer)
        keep = _metadata(rest)
        if cast and mask.lstrip("-").isdigit() and int(mask) < 0 and aligned.get(cast.group(1), 0) >= -int(mask):
            return f"{result} = getelementptr i8, ptr {pointer}, i64 0{keep}"
        indent, base = result[:len(result) - len(result.lstrip())], result.strip()[1:].strip('"')
        address, masked = f'%"unmask.{base}.address"', f'%"unmask.{base}.masked"'
        return (f"{indent}{address} = ptrtoint ptr {pointer} to i64{keep}\n"
                f"{indent}{masked} = and i64 {address}, {mask}{keep}\n"
                f"{result} = inttoptr i64 {masked} to ptr{keep}")
    text = _MASK_CALL.sub(plain, text)
    if "@llvm.ptrmask.p0.i64(ptr " in text:
        raise CompilationError("a pointer mask was left in a form the code generator cannot take "
                               "(codegen/gpu/shared_alignment.py)")
    try:
        unmasked = llvm.parse_assembly(text)
        unmasked.verify()
    except RuntimeError as exc:
        raise CompilationError(f"removing pointer masks failed: {exc}") from exc
    return unmasked


def _metadata(rest: str) -> str:
    """The attachments (``, !dbg !5``) after a call, kept on the replacement; call-site attribute
    groups (``#3``) are dropped."""
    at = rest.find(", !")
    return rest[at:] if at >= 0 else ""
