"""A CUDA kernel's IR (clang, nvptx64) turned into a block-kernel body (docs/ARCHITECTURE.md §1, §6).

The ``ptx_kernel`` function becomes ``void @body(i64 tid.., <flattened params>, ptr shared.., ptr
status)`` for one launch shape ``threads`` (CUDA order x, y, z; it is compiled in, so
``blockDim`` is a constant). CUDA axis x is the body's last grid axis, so the row-major thread
numbering of block kernels is CUDA's linear thread index (and lanes are the same threads):

* ``threadIdx.c`` = ``tid_a % B_a``, ``blockIdx.c`` = ``tid_a / B_a``, ``blockDim.c`` = ``B_a``
  (``a = R-1-c``; 0, 0, 1 on axes the launch does not have); ``gridDim.c`` is the hidden i32
  parameter ``gridDim_<c>`` that the launcher fills;
* barriers (``llvm.nvvm.barrier*``, and the header's ``__syncwarp``) are
  ``@adoffload.sync_threads``; ``%laneid`` is ``@adoffload.lane_id & 31`` (CUDA's 32-lane warps,
  also on AMD's wavefronts);
* each ``addrspace(3)`` global (``__shared__``) is one shared-array argument; every address
  space becomes the generic one (the host has one, and the GPU entries add their own).

Raw pointers have no shape: a pointer parameter is a 1-D array whose length the launcher takes
from the array passed, and every access through it is bounds-checked (bounds.py).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ... import ir
from ...errors import CudaTranslationError
from ...frontend.blocks import SharedArray
from ...ir.core import (Argument, ArrayType, Constant, ConstantExpr, Function, FunctionType, GlobalVariable,
    Instruction, PointerType, StructType, VectorType, i32, i64, ptr, void)
from ...language.signature import KernelSignature
from ...language.types import f32, f64
from ...language.types import i32 as ado_i32
from ...language.types import i64 as ado_i64
from . import bounds, structs
from ...analysis.races.global_writes import check_stores_of_the_block
from .faults import check_index_overflow, guard_divisions
from .header_locations import call_site_locations
from .structs import Struct
from .speculate import make_exchanges_uniform

SREG = "llvm.nvvm.read.ptx.sreg."
SYNCWARP = "adoffload.cuda.syncwarp"         # the header's __syncwarp
KERNEL_CONVENTIONS = ("ptx_kernel", "amdgpu_kernel")
_BARRIERS = ("llvm.nvvm.barrier0", "llvm.nvvm.barrier.sync", "llvm.nvvm.barrier.cta.sync",
             "llvm.nvvm.bar.sync")
_AXES = "xyz"
# the device heap (C++ operator new/delete, by their mangled prefix, and the C library's), refused by name
_HEAP_CALLS = {"_Znw": "operator new", "_Zna": "operator new[]", "_Zdl": "operator delete",
               "_Zda": "operator delete[]", "malloc": "malloc", "free": "free", "calloc": "calloc",
               "realloc": "realloc"}
_OFFLOAD_BOOKKEEPING = ("llvm.used", "llvm.compiler.used")
MAX_THREADS_PER_AXIS = 2**31       # blocks * threads on one axis: CUDA's int thread index fits
GRID_PARAMS = tuple(f"gridDim_{c}" for c in _AXES)
_SHARED_TYPES = {"float": f32, "double": f64, "i32": ado_i32, "i64": ado_i64}
_TARGET_ATTRIBUTE = re.compile(r'\s*"(target-cpu|target-features|tune-cpu|uniform-work-group-size|'
                               r'amdgpu-[a-z-]+)"="[^"]*"')


@dataclass(frozen=True)
class Body:
    text: str                        # canonical LLVM IR of the body module
    shared: tuple[SharedArray, ...]   # one per __shared__ variable, in body-argument order


def host_neutral(text: str) -> str:
    """The device module with no target: triple, data layout and per-function CPU attributes dropped;
    debug locations inside adoffload's header moved to the user's calls (header_locations.py)."""
    text = call_site_locations(text)
    text = re.sub(r'^target (triple|datalayout) = "[^"]*"\n', "", text, flags=re.M)
    return _TARGET_ATTRIBUTE.sub("", text)


def kernel_names(module: ir.Module) -> dict[str, list[str]]:
    """Source name (``saxpy``, ``ns::saxpy``, or the symbol of an ``extern "C"`` kernel) -> its symbols
    (several for overloads and template instances)."""
    names: dict[str, list[str]] = {}
    for f in module.functions.values():
        if f.calling_convention in KERNEL_CONVENTIONS and not f.is_declaration:
            names.setdefault(source_name(f.name), []).append(f.name)
    return names


def source_name(symbol: str) -> str:
    """The function name of an Itanium-mangled symbol (``_Z5saxpyfPKfPfi`` -> ``saxpy``,
    ``_ZN2ns5saxpyEv`` -> ``ns::saxpy``; a function's ``static``/``__shared__`` variable
    ``_ZZ15threadfence_sumE6amLast`` -> ``threadfence_sum::amLast``); other symbols as they are."""
    local = re.fullmatch(r"_ZZ(.+)E(\d+)(\w+)", symbol)
    if local and len(local.group(3)) == int(local.group(2)):
        return f"{source_name('_Z' + local.group(1))}::{local.group(3)}"
    nested = symbol.startswith("_ZN")
    if not (nested or re.match(r"_Z\d", symbol)):
        return symbol
    rest, parts = symbol[3 if nested else 2:], []
    while True:
        length = re.match(r"\d+", rest)
        if length is None:
            break
        n = int(length.group())
        parts.append(rest[length.end():length.end() + n])
        rest = rest[length.end() + n:]
        if not nested:
            break
    return "::".join(parts) or symbol


@dataclass
class _BodyArgs:
    """The body's arguments (docs/ARCHITECTURE.md §1, §6), by role."""
    tids: list[Argument]
    flat: dict[str, Argument]          # flattened params by name ("x", "x.shape0", "gridDim_x", ...)
    shared: list[Argument]
    status: Argument

    @classmethod
    def make(cls, signature: KernelSignature, rank: int, shared: int) -> "_BodyArgs":
        args = cls([Argument(i64, f"tid{a}", 0) for a in range(rank)],
                   {f.name: Argument(_llvm_type(f.llvm_type), f.name, 0) for f in signature.flat_params()},
                   [Argument(ptr, f"shared.{k}", 0) for k in range(shared)], Argument(ptr, "status", 0, {"noalias"}))
        for k, a in enumerate(args.all):
            a.index = k
        return args

    @property
    def all(self) -> list[Argument]:
        return self.tids + list(self.flat.values()) + self.shared + [self.status]


def translate(text: str, symbol: str, signature: KernelSignature, threads: tuple[int, ...],
              body_name: str, *, bounds_check: bool = True, shared_bytes: int = 0, declared=None) -> Body:
    """The body of kernel ``symbol`` (in ``text``, already host-neutral and canonical) for blocks of
    ``threads`` (x, y, z order); ``signature`` names its parameters (grid params last, struct
    parameters as their scalar fields); ``declared`` are the kernel's parameters as declared (one per
    C parameter, an ``ado.struct`` one included), if they differ from the signature's;
    ``shared_bytes`` sizes its ``extern __shared__`` array (the launch's dynamic shared memory)."""
    module = ir.import_module(text)
    module.triple = module.data_layout = ""
    fn, kernel = module.functions[symbol], source_name(symbol)
    for inst in fn.instructions():
        callee = inst.callee if inst.opcode == "call" else None
        heap = _HEAP_CALLS.get(callee.name[:4] if callee.name.startswith("_Z") else callee.name) \
            if isinstance(callee, Function) else None
        if heap is not None:
            where = f" at {inst.location}" if inst.location is not None else ""
            raise CudaTranslationError(f"kernel '{kernel}' calls {heap}{where}: kernels cannot allocate memory (use "
                                       f"a local array of fixed size, or pass a scratch array as a parameter)")
        if isinstance(callee, Function) and not callee.is_declaration:
            raise CudaTranslationError(f"kernel '{kernel}' calls @{callee.name}, which could not be inlined "
                                       f"(a recursive device function); recursion is not supported")
    for name in [n for n, f in module.functions.items() if f is not fn and not f.is_declaration]:
        del module.functions[name]           # other kernels; device functions are inlined already
    block = tuple(reversed(threads))
    params = [p for p in signature.params if p.name not in GRID_PARAMS]
    declared = list(declared) if declared is not None else params
    check_parameters(fn, declared, kernel)
    shared_globals = shared_variables(fn)
    if sum(map(is_dynamic, shared_globals)) > 1:
        raise CudaTranslationError(f"kernel '{kernel}' declares several extern __shared__ arrays, which CUDA "
                                   f"places at one address; use one and offsets into it")
    shared = tuple(_shared_array(g, shared_bytes, kernel, _accessed_types(fn, g)) for g in shared_globals)
    args = _BodyArgs.make(signature, len(block), len(shared))
    mapping: dict = {old: args.flat[p.name] for old, p in zip(fn.args, declared) if not isinstance(p.type, Struct)}
    mapping.update(zip(shared_globals, args.shared))
    by_value = [(old, p) for old, p in zip(fn.args, declared) if isinstance(p.type, Struct)]
    _become_body(module, fn, body_name, args.all)
    copies = [structs.on_stack(fn, old, p, args.flat, kernel) for old, p in by_value]
    mapping.update((old, copy) for (old, _), (copy, _) in zip(by_value, copies))
    _replace_values(fn, mapping)
    for copy, fields in copies:
        structs.forward_fields(fn, copy, fields)
    _generic_address_space(module, fn)
    _assume_thread_range(module, fn, args.tids)
    grid = {c: args.flat[name] for c, name in zip(_AXES, GRID_PARAMS) if name in args.flat}
    syncwarps = _lower_intrinsics(module, fn, args.tids, block, grid, kernel)
    make_exchanges_uniform(fn, args.tids, block, kernel, syncwarps, args.shared)   # or refuse divergent barriers
    check_stores_of_the_block(fn, args.tids, block, {args.flat[p.name]: p.name for p in params if p.is_array}, kernel)
    bounds.check_read_only(fn, {args.flat[p.name]: p.name for p in params if p.is_array and p.type.intent == "in"},
                           kernel)
    if bounds_check:
        arrays = {args.flat[p.name]: (signature.index_of(p.name), args.flat[f"{p.name}.shape0"], p.dtype.bits // 8)
                  for p in params if p.is_array}
        shared_roots = {a: (bounds.shared_param_index(n), Constant(i64, s.nbytes // (s.dtype.bits // 8)),
                            s.dtype.bits // 8) for n, (a, s) in enumerate(zip(args.shared, shared))}
        trusted = [*args.tids, *(args.flat[g] for g in GRID_PARAMS if g in args.flat)]
        check_index_overflow(fn, args.status, trusted)    # first: a wrapped index is told as such
        bounds.insert_checks(fn, {**arrays, **shared_roots}, args.status, kernel)
    guard_divisions(fn, args.status, kernel)
    fn.attributes.discard("null_pointer_is_valid")    # clang's -fno-delete-null-pointer-checks: nulls are checked now
    for name in [n for n, g in module.globals.items() if g.addrspace == 3 or n in _OFFLOAD_BOOKKEEPING
                 or n.startswith("__hip_cuid_")]:
        del module.globals[name]          # shared memory is now arguments; the rest served the offload bundler
    ir.verify(module)
    return Body(ir.canonicalize(ir.export_module(module)), shared)


def _become_body(module: ir.Module, fn: Function, body_name: str, args: list[Argument]) -> None:
    """``fn`` renamed ``body_name``, with the body's arguments and the C calling convention."""
    del module.functions[fn.name]
    fn.name, fn.args = body_name, args
    fn.function_type = FunctionType(void, tuple(a.type for a in args))
    fn.calling_convention = ""
    fn.attributes = {a for a in fn.attributes if a not in ("noinline", "optnone", "alwaysinline")}
    fn.__dict__.pop("_names", None)          # fresh_name's cache predates the new arguments
    module.functions[body_name] = fn


def check_parameters(fn: Function, params, kernel: str) -> None:
    """The declared parameters match the kernel's: as many, pointers for arrays, equal scalar types,
    ``ado.struct``s for structs passed by value (with the struct's fields)."""
    args = fn.args
    if len(params) != len(args):
        raise CudaTranslationError(f"kernel '{kernel}' has {len(args)} parameters ({_types(args)}); "
                                   f"{len(params)} were declared ({', '.join(p.name for p in params) or 'none'})")
    for arg, param in zip(args, params):
        if isinstance(param.type, Struct):
            structs.check(arg, param.type, param.name, kernel)
            continue
        by_value = structs.struct_type_of(arg)
        if by_value is not None:
            raise CudaTranslationError(f"kernel '{kernel}': parameter {arg.index} ('{param.name}') is a struct "
                                       f"{by_value} passed by value; declare it with its fields in order, "
                                       f"{param.name}=ado.struct(a=ado.f32, b=ado.i32, ...)")
        if param.is_array != arg.type.is_pointer or (not param.is_array and param.type.llvm != str(arg.type)):
            raise CudaTranslationError(f"kernel '{kernel}': parameter '{param.name}' was declared {param.type!r} "
                                       f"but the kernel's parameter {arg.index} is {arg.type} (parameters: "
                                       f"{_types(args)})")
        if param.is_array:
            _check_element_type(fn, arg, param, kernel)


_ADO_NAMES = {"float": "ado.f32", "double": "ado.f64", "i32": "ado.i32", "i64": "ado.i64"}


def _check_element_type(fn: Function, arg: Argument, param, kernel: str) -> None:
    """A pointer parameter's declared dtype has the size of what the kernel loads and stores through
    it (a ``const float*`` declared ``ado.In[ado.f64]`` would read pairs of floats as doubles). Only
    sizes are compared: a kernel may access a float array as integer bits (``atomicCAS`` on
    ``(int*)p``); byte accesses and pointers reached only through calls decide nothing."""
    accessed = {t for t in bounds.accessed_scalars(fn, arg) if bounds.store_size(t) > 1}
    size = param.dtype.bits // 8
    if not accessed or any(bounds.store_size(t) == size for t in accessed):
        return
    spelled = " and ".join(sorted(str(t) for t in accessed))
    hint = [_ADO_NAMES[str(t)] for t in accessed if str(t) in _ADO_NAMES]
    intent = {"in": "In", "out": "Out", "inout": "InOut"}[param.type.intent]
    fix = f"; declare it ado.{intent}[{hint[0]}]" if len(hint) == 1 else ""
    raise CudaTranslationError(f"kernel '{kernel}': parameter '{param.name}' was declared {param.type!r} "
                               f"({size}-byte elements), but the kernel accesses it as {spelled} "
                               f"({', '.join(str(bounds.store_size(t)) for t in sorted(accessed, key=str))}-byte "
                               f"elements){fix}")


def _types(args) -> str:
    return ", ".join(str(a.type) for a in args) or "none"


def _llvm_type(name: str):
    return {"float": ir.f32, "double": ir.f64, "i32": i32, "i64": i64, "i1": ir.i1, "ptr": ptr}[name]


def _constant_globals(value) -> list[GlobalVariable]:
    if isinstance(value, GlobalVariable):
        return [value]
    if isinstance(value, ConstantExpr):
        return [g for o in value.operands for g in _constant_globals(o)]
    return []


def is_dynamic(g: GlobalVariable) -> bool:
    """``extern __shared__ T s[];``: dynamic shared memory, sized by the launch."""
    return isinstance(g.value_type, ArrayType) and g.value_type.count == 0 and g.initializer is None


def shared_variables(fn: Function) -> list[GlobalVariable]:
    """The ``addrspace(3)`` globals the kernel uses, in order of first use."""
    found: list[GlobalVariable] = []
    for inst in fn.instructions():
        for operand in inst.operands:
            for g in _constant_globals(operand):
                if g.addrspace == 3 and g not in found:
                    found.append(g)
    return found


def _shared_array(g: GlobalVariable, shared_bytes: int, kernel: str, accessed=None) -> SharedArray:
    """The shared array of ``__shared__`` variable ``g``: arrays of up to 3 dimensions keep their shape;
    structs (``float3 tile[256]``, a user's struct of doubles) become a 1-D array of their fields,
    which must all have one size (``_storage_type``). ``accessed``: the types of the loads, stores and
    atomics through ``g`` (None where some other use of it is unknown), which type an integer
    ``extern __shared__`` buffer used only as one float type (``_dynamic_float_type``)."""
    shape, t = [], g.value_type
    while isinstance(t, ArrayType):
        shape.append(t.count)
        t = t.element
    leaves = _scalar_leaves(t)
    dtype = _storage_type(leaves)
    if is_dynamic(g):
        leaves, dtype = _dynamic_float_type(leaves, dtype, accessed)
    if dtype is None or (len(shape) > 3 and len(leaves) == 1):
        byte = ""
        if "i8" in map(str, leaves):
            byte = (" (adoffload has no byte type: declare the extern __shared__ buffer with the element type, "
                    "extern __shared__ float buf[], and carve arrays of that type from it)" if is_dynamic(g) else
                    " (adoffload has no byte type: declare a bool or char flag as int)")
        raise CudaTranslationError(f"__shared__ variable '{source_name(g.name)}' (@{g.name}) of kernel '{kernel}' "
                                   f"has type {g.value_type}{byte}; shared memory of float, double, int or long "
                                   f"long (arrays of up to 3 dimensions), or of structs of such fields all of one "
                                   f"size (4 or 8 bytes), is supported")
    if is_dynamic(g):
        unit = dtype.bits // 8
        if shared_bytes < unit * len(leaves):
            raise CudaTranslationError(f"kernel '{kernel}' uses extern __shared__ memory (@{g.name}); launch it "
                                       f"with shared_bytes= (the third <<<>>> argument), got {shared_bytes}")
        return SharedArray(g.name, dtype, (shared_bytes // unit,))
    if g.initializer is not None and g.initializer.kind not in ("undef", "poison"):
        raise CudaTranslationError(f"__shared__ variable @{g.name} has an initializer; CUDA shared memory has none")
    if len(leaves) > 1:                    # structs: their fields, flattened
        return SharedArray(g.name, dtype, (int(np.prod(shape, dtype=np.int64)) * len(leaves),))
    return SharedArray(g.name, dtype, tuple(shape) or (1,))


def _dynamic_float_type(leaves, dtype, accessed):
    """(leaves, dtype) of an ``extern __shared__`` buffer: the samples' ``SharedMemory<T>`` declares it
    ``int __smem[]`` and reads and writes it only as ``T``. Dynamic shared memory is untyped bytes the
    launch sizes, so such a buffer is an array of that float type (AD gives it a shadow: as ``int`` it
    would have none, and storing a differentiated value there is refused). Mixed or unknown accesses
    keep the declared type."""
    if dtype is None or dtype.is_float or accessed is None or len(accessed) != 1:
        return leaves, dtype
    (accessed_type,) = accessed
    if accessed_type not in ("float", "double"):
        return leaves, dtype
    return [_llvm_type(accessed_type)], _SHARED_TYPES[accessed_type]


def _accessed_types(fn: Function, g: GlobalVariable):
    """The value types of the loads, stores and atomics of ``fn`` through pointers derived from ``g``,
    or None when a memory intrinsic or another access of unknown type reaches it."""
    found = set()
    for inst in fn.instructions():
        if inst.opcode in ("load", "store", "atomicrmw", "cmpxchg"):
            pointer = inst.operands[1] if inst.opcode == "store" else inst.operands[0]
            if g in bounds.leaves(pointer):
                found.add(str(inst.type if inst.opcode == "load" else inst.operands[0 if inst.opcode == "store" else 1].type))
        elif inst.opcode == "call" and any(g in bounds.leaves(o) for o in inst.operands if o.type.is_pointer):
            return None
    return found


def _storage_type(leaves) -> object:
    """The element type of a shared array holding ``leaves``: their type when they share one; for
    fields of one size mixing a float type and an integer type (``struct { float v; int i; }``),
    the float type (the integers are stored in its bytes; AD gives them shadows it never uses)."""
    types = {_SHARED_TYPES.get(str(leaf)) for leaf in leaves}
    if None in types or len({t.bits for t in types}) != 1:
        return None
    floats = [t for t in types if t.is_float]
    return floats[0] if floats else types.pop()


def _scalar_leaves(t) -> list:
    """The scalar types making up ``t`` in memory order (struct fields and array items expanded); a
    struct with padding has ``i8`` leaves (clang spells padding as byte arrays)."""
    if isinstance(t, StructType):
        return [leaf for e in t.elements for leaf in _scalar_leaves(e)]
    if isinstance(t, (ArrayType, VectorType)):
        return _scalar_leaves(t.element) * t.count
    return [t]


def _replace_values(fn: Function, mapping: dict) -> None:
    """Replace uses of ``mapping``'s keys (arguments, shared globals, also inside constant
    expressions: those become instructions before their user)."""
    for block in fn.blocks:
        for inst in list(block.instructions):
            for k, operand in enumerate(inst.operands):
                if operand in mapping:
                    inst.operands[k] = mapping[operand]
                elif isinstance(operand, ConstantExpr) and any(g in mapping for g in _constant_globals(operand)):
                    where = inst.blocks[k].terminator if inst.opcode == "phi" else inst
                    inst.operands[k] = _materialize(operand, mapping, where)


def _materialize(c: ConstantExpr, mapping: dict, before: Instruction):
    """Instructions computing constant expression ``c`` with ``mapping`` applied, before ``before``."""
    operands = [mapping.get(o, o) if not isinstance(o, ConstantExpr) else _materialize(o, mapping, before)
                for o in c.operands]
    if c.opcode == "addrspacecast" and operands[0].type.is_pointer:
        return operands[0]
    inst = Instruction(c.opcode, c.type, operands, element_type=c.element_type, flags=set(c.flags))
    b = ir.Builder()
    b.position_before(before)
    return b.insert(inst, "shared.addr")


def _generic_address_space(module: ir.Module, fn: Function) -> None:
    """Every pointer in the generic address space (0): instruction results, globals, casts, the
    address-space suffixes of intrinsic names (``llvm.memset.p3.i64``)."""
    for g in module.globals.values():
        if g.addrspace not in (0, 3):
            g.addrspace = 0
    for g in module.globals.values():
        if g.initializer is not None:
            g.initializer = _generic_initializer(g.initializer)
    for inst in list(fn.instructions()):
        if isinstance(inst.type, PointerType) and inst.type.addrspace:
            inst.type = ptr
        for k, operand in enumerate(inst.operands):
            if isinstance(operand, ConstantExpr):
                inst.operands[k] = _generic_constant(operand)
    casts = [i for i in fn.instructions() if i.opcode == "addrspacecast"]
    for cast in casts:
        _replace_all_uses(fn, cast, cast.operands[0])
        cast.parent.instructions.remove(cast)
    for inst in fn.instructions():
        callee = inst.callee if inst.opcode == "call" else None
        if isinstance(callee, Function) and callee.name.startswith("llvm.") and re.search(r"\.p[1-9]\d*", callee.name):
            name = re.sub(r"\.p[1-9]\d*", ".p0", callee.name)
            params = tuple(ptr if t.is_pointer else t for t in callee.function_type.params)
            inst.callee = module.get_or_declare(name, FunctionType(callee.function_type.return_type, params))
            inst.element_type = inst.callee.function_type


def _generic_initializer(c):
    if isinstance(c, ConstantExpr):
        return _generic_constant(c)
    if isinstance(c, Constant) and c.kind == "aggregate":
        return Constant(c.type, tuple(_generic_initializer(item) for item in c.value), "aggregate", c.name)
    return c


def _generic_constant(c: ConstantExpr):
    operands = tuple(_generic_constant(o) if isinstance(o, ConstantExpr) else o for o in c.operands)
    if c.opcode == "addrspacecast" and operands[0].type == ptr:
        return operands[0]
    t = ptr if c.type.is_pointer else c.type
    return ConstantExpr(t, opcode=c.opcode, operands=operands, element_type=c.element_type, flags=c.flags)


def _replace_all_uses(fn: Function, old, new) -> None:
    for inst in fn.instructions():
        inst.operands = [new if o is old else o for o in inst.operands]


def _lower_intrinsics(module: ir.Module, fn: Function, tids, block, grid: dict, kernel: str) -> set[int]:
    """Thread indices, barriers and lane ids as block-kernel values and operations. ``__syncwarp``
    becomes a block barrier (sound where every thread of the block reaches it, which
    uniformity.py then requires); returns the ids of those barriers, for its messages."""
    syncwarps: set[int] = set()
    sync = module.get_or_declare("adoffload.sync_threads", FunctionType(void, ()))
    lane = module.get_or_declare("adoffload.lane_id", FunctionType(i32, ()))
    for declared in (sync, lane):
        declared.attributes |= {"convergent", "nounwind"}
    for inst in list(fn.instructions()):
        name = getattr(inst.callee, "name", "") if inst.opcode == "call" else ""
        if name == SYNCWARP:
            inst.callee, inst.operands, inst.element_type = sync, [], sync.function_type
            syncwarps.add(id(inst))
            continue
        if not name.startswith("llvm.nvvm."):
            continue
        b = ir.Builder()
        b.position_before(inst)
        if name.startswith(_BARRIERS):
            if inst.operands and not (isinstance(inst.operands[0], Constant) and inst.operands[0].value == 0
                                      and len(inst.operands) == 1):
                raise CudaTranslationError(f"kernel '{kernel}' calls {name} with a barrier id or thread count; "
                                           f"only __syncthreads() (barrier 0, all threads) is supported")
            inst.callee, inst.operands, inst.element_type = sync, [], sync.function_type
            continue
        if name.startswith(SREG):
            what, _, axis = name[len(SREG):].partition(".")
            value = _special_register(b, what, axis, tids, block, grid, lane)
            if value is None:
                raise CudaTranslationError(f"kernel '{kernel}' reads the special register %{what}"
                                           f"{'.' + axis if axis else ''}, which adoffload does not provide")
            _replace_all_uses(fn, inst, value)
            inst.parent.instructions.remove(inst)
            continue
        raise CudaTranslationError(f"kernel '{kernel}' calls the NVVM intrinsic @{name}, which adoffload does not "
                                   f"translate (supported: thread/block indices, __syncthreads, the header's "
                                   f"atomics, shuffles, votes and math)")
    return syncwarps


def _assume_thread_range(module: ir.Module, fn: Function, tids) -> None:
    """``tid < 2**31`` on every axis (the launcher ensures it, kernel.launch_shape): CUDA computes
    ``blockIdx.x * blockDim.x + threadIdx.x`` in 32 bits, and with this fact LLVM folds its sign
    extension back into the thread index, whose injectivity the AD race analysis then sees."""
    assume = module.get_or_declare("llvm.assume", FunctionType(void, (ir.i1,)))
    b = ir.Builder(fn.entry, 0)
    for tid in tids:
        b.call(assume, [b.icmp("ult", tid, Constant(i64, MAX_THREADS_PER_AXIS))])


def _special_register(b: ir.Builder, what: str, axis: str, tids, block, grid: dict, lane):
    rank = len(block)
    if what == "laneid":
        # CUDA's lane: 0..31 in a warp of warpSize (32) lanes. On AMD's 64-lane wavefronts that is the
        # lane in the caller's half, as the header's shuffles and ballots count lanes (lane_id & 31;
        # the same value where warps have 32 lanes)
        return b.binary("and", b.call(lane, [], "laneid.hw"), Constant(i32, 31), "laneid")
    if what == "warpsize":
        return Constant(i32, 32)
    if axis not in _AXES or what not in ("tid", "ctaid", "ntid", "nctaid"):
        return None
    c = _AXES.index(axis)
    if what == "nctaid":
        return grid.get(axis, Constant(i32, 1))
    if c >= rank:
        return Constant(i32, 1 if what == "ntid" else 0)
    a = rank - 1 - c
    if what == "ntid":
        return Constant(i32, block[a])
    op = "urem" if what == "tid" else "udiv"
    return b.cast("trunc", b.binary(op, tids[a], Constant(i64, block[a])), i32, f"{what}.{axis}")

