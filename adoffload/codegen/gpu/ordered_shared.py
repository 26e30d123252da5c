"""Float adds into shared memory in a fixed order, for deterministic block kernels on GPUs.

Why: ``ado.vjp(k, wrt, deterministic=True)`` of a block kernel promises bitwise-reproducible
gradients. Adjoints of shared-tile reads add into shadow shared memory, which the reverse sweep
reads back inside the kernel, so they cannot go to the contribution log (enzyme/deterministic.py);
on a GPU the order of atomics inside a block depends on scheduling. The host needs nothing: a
block runs its threads one after the other in each phase (codegen/blocks.py).

Here each float ``atomicrmw fadd`` into a shared array of the body becomes a call of
``@adoffload.ordered_shared_fadd.<f32|f64>(ptr, v)``: every thread of the block writes its
(address, value) to its slot, a barrier, thread 0 adds the T slots in thread order, a barrier.
Adds to one address are then summed in thread order at each such site, every run. That needs
every thread of the block to reach the site the same number of times: a site under control flow
that is not uniform across the block (``analysis.uniformity``'s analysis, with the branches
into a failed bounds check taken as not taken: a failed launch raises anyway) is refused with its
source line. Cost: two barriers and T serial adds per site and visit.
"""
from __future__ import annotations

from ... import ir as adoir
from ...errors import DifferentiationError
from ...ir.builder import Builder
from ...ir.core import Function, FunctionType, Instruction, void

_TYPES = {"float": "f32", "double": "f64"}


def _root(pointer):
    while isinstance(pointer, Instruction) and pointer.opcode in ("getelementptr", "bitcast", "addrspacecast"):
        pointer = pointer.operands[0]
    return pointer


def _shared_fadds(fn: Function, shared_args: range) -> list[Instruction]:
    """The float ``atomicrmw fadd`` of ``fn`` on pointers into its shared-array arguments."""
    shared = {fn.args[k] for k in shared_args}
    return [inst for inst in fn.instructions()
            if inst.opcode == "atomicrmw" and getattr(inst, "op", None) in ("fadd", "fsub")
            and str(inst.type) in _TYPES and _root(inst.operands[0]) in shared]


def order_shared_adds(module_text: str, body_name: str, grid_rank: int, block, shared_args: range,
                      kernel_name: str) -> tuple[str, bool]:
    """``module_text`` with the body's float adds into shared arrays made ordered calls (see the
    module docstring), and whether there were any. Raises DifferentiationError for a site that
    not every thread of a block reaches alike, or whose old value is used."""
    if "atomicrmw f" not in module_text:
        return module_text, False
    module = adoir.import_module(module_text)
    fn = module.functions[body_name]
    found = _shared_fadds(fn, shared_args)
    if not found:
        return module_text, False
    used = fn.users()
    divergent = _divergent_blocks(module_text, body_name, grid_rank, block, shared_args)
    for inst in found:
        where = f" at {inst.location}" if inst.location is not None else ""
        if used.get(inst) or inst.op != "fadd":
            raise DifferentiationError(f"kernel '{kernel_name}' (deterministic=True): the float atomic{where} into "
                                       f"a shared array uses its old value or subtracts; only adds whose result "
                                       f"is unused can be put in a fixed order on a GPU")
        if inst.parent.name in divergent:
            raise DifferentiationError(
                f"kernel '{kernel_name}' (deterministic=True): the float add into shared memory{where} runs under "
                f"control flow that is not uniform across the block, so its adds cannot be put in thread order "
                f"with barriers on a GPU; it is deterministic on the host (device='cpu'). On a GPU use "
                f"deterministic=False, or make every thread of the block reach that read of the shared array")
    for inst in found:
        pointer, value = inst.operands
        callee = module.get_or_declare(f"adoffload.ordered_shared_fadd.{_TYPES[str(inst.type)]}",
                                       FunctionType(void, (pointer.type, value.type)))
        callee.attributes.update({"convergent", "nounwind"})
        b = Builder()
        b.position_before(inst)
        b.location = inst.location
        b.call(callee, [pointer, value])
        inst.parent.instructions.remove(inst)
    return adoir.export_module(module), True


def _divergent_blocks(module_text: str, body_name: str, grid_rank: int, block, shared_args=range(0)) -> set[str]:
    """Names of the body's blocks that only some threads of a block may reach, on a copy whose
    branches into failed-check blocks (an ``atomicrmw xchg`` of the status record) go the other way."""
    from ...analysis.uniformity import Divergence
    module = adoir.import_module(module_text)
    fn = module.functions[body_name]
    status = fn.args[-1]
    failing = {b for b in fn.blocks if any(i.opcode == "atomicrmw" and i.op == "xchg" and i.operands[0] is status
                                            for i in b.instructions)}
    for b in fn.blocks:
        term = b.terminator
        if term is None or term.opcode != "br" or len(term.blocks) != 2:
            continue
        kept = [s for s in term.blocks if s not in failing]
        if len(kept) == 1:
            term.operands, term.blocks = [], [kept[0]]
    reached, todo = set(), [fn.entry]
    while todo:
        b = todo.pop()
        if b not in reached:
            reached.add(b)
            todo.extend(b.successors)
    fn.blocks = [b for b in fn.blocks if b in reached]      # the failure paths' own branches are gone too
    info = Divergence(fn, fn.args[:grid_rank], tuple(block), [fn.args[k] for k in shared_args])
    return {b.name for region in info.regions.values() for b in region}


def ordered_definitions(target: str, block_threads: int) -> str:
    """``@adoffload.ordered_shared_fadd.f32`` / ``.f64`` for a GPU ``target`` and blocks of
    ``block_threads`` (block_ops' base provides thread_rank and sync_threads)."""
    n = block_threads
    out = [f"@adoffload.ordered.ptrs = addrspace(3) global [{n} x ptr] undef, align 8\n"
           f"@adoffload.ordered.vals = addrspace(3) global [{n} x double] undef, align 8\n"]
    for t, suffix in _TYPES.items():
        # f32 values travel widened to f64 and back (both exact); fmul by 1.0 is an exact copy
        widen = "%w = fpext float %v to double" if t == "float" else "%w = fmul double %v, 1.0"
        narrow = "%x = fptrunc double %xw to float" if t == "float" else "%x = fmul double %xw, 1.0"
        out.append(f"""define void @adoffload.ordered_shared_fadd.{suffix}(ptr %p, {t} %v) alwaysinline convergent nounwind {{
entry:
  %me = call i32 @adoffload.thread_rank()
  %r = zext i32 %me to i64
  %pp = getelementptr [{n} x ptr], ptr addrspace(3) @adoffload.ordered.ptrs, i64 0, i64 %r
  store ptr %p, ptr addrspace(3) %pp, align 8
  {widen}
  %vp = getelementptr [{n} x double], ptr addrspace(3) @adoffload.ordered.vals, i64 0, i64 %r
  store double %w, ptr addrspace(3) %vp, align 8
  call void @adoffload.sync_threads()
  %lead = icmp eq i32 %me, 0
  br i1 %lead, label %loop, label %done
loop:
  %k = phi i64 [ 0, %entry ], [ %k.next, %loop ]
  %qp = getelementptr [{n} x ptr], ptr addrspace(3) @adoffload.ordered.ptrs, i64 0, i64 %k
  %q = load ptr, ptr addrspace(3) %qp, align 8
  %xp = getelementptr [{n} x double], ptr addrspace(3) @adoffload.ordered.vals, i64 0, i64 %k
  %xw = load double, ptr addrspace(3) %xp, align 8
  {narrow}
  %old = load {t}, ptr %q
  %new = fadd {t} %old, %x
  store {t} %new, ptr %q
  %k.next = add i64 %k, 1
  %more = icmp ult i64 %k.next, {n}
  br i1 %more, label %loop, label %done
done:
  call void @adoffload.sync_threads()
  ret void
}}
""")
    return "".join(out)
