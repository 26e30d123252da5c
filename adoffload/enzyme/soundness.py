"""The allowlist: the engine differentiates only what it has proven it handles.

``check(fn, info)`` runs after activity analysis and before any derivative code is built. It
refuses, with a ``DifferentiationError`` naming the instruction and its source location, every
pattern through which a derivative could be lost or corrupted silently:

* an active value consumed by an instruction that has no derivative rule (a float bit-cast to
  an integer, an unknown call that returns nothing, ...);
* an active value stored into memory that has no shadow;
* float bits carried as integers: an integer load of differentiated memory, or an active float
  bit-cast to an integer, whose value is stored, returned, passed to a call or turned back into
  a float or a pointer (comparisons and integer arithmetic that only decide branches are fine);
* a pointer to differentiated memory that escapes where shadows cannot follow it (stored into
  memory without a shadow, returned, passed to a function without a derivative); stored into the
  function's own memory it is followed (pointer_memory.py);
* a float load that reaches an output through a pointer of unknown origin (loaded from
  differentiated memory, made from an integer, returned by an unknown call, a lane of a vector of
  pointers), and any write through such a pointer when the function has differentiated memory;
* a call to a defined function that is still a call after inlining (it is recursive).

What is allowed is data: the tables below and the rule table (rules.py); ``REFUSED`` lists
what is refused, for docs/ad.md (enzyme/docs.py renders both).
"""
from __future__ import annotations

from ..errors import DifferentiationError
from ..ir.core import Argument, Constant, Function, GlobalVariable, Instruction, Value
from ..ir.subset import recursive_functions
from .activity import CONST, Activity, ActivityInfo, activity_of, is_float_type, is_placeholder_pointer, memory_roots, pointer_sources
from .custom import find_custom
from .memory import heap_function
from .rules import RULES, describe, rule_key
from ..analysis.races.store_seeds import SEED_EXCHANGE, check_stores_by_the_block

# Consumers of an active value whose handling the engines define (besides the rule table).
ACTIVE_CONSUMERS = frozenset({"phi", "select", "ret", "extractvalue", "insertvalue", "extractelement",
                              "insertelement", "shufflevector", "freeze",
                              "fcmp", "fptosi", "fptoui"})          # the last three: zero derivative
# Uses of a pointer to differentiated memory that the engines mirror on its shadow.
POINTER_USES = frozenset({"load", "getelementptr", "bitcast", "addrspacecast", "phi", "select", "icmp",
                          "ptrtoint", "atomicrmw", "cmpxchg"})
# Calls that neither carry derivatives nor write memory AD must mirror.
INACTIVE_CALLS = ("llvm.lifetime", "llvm.assume", "llvm.dbg", "llvm.experimental.noalias", "llvm.invariant",
                  "llvm.prefetch", "llvm.donothing", "llvm.trap", "llvm.ubsantrap", "llvm.is.fpclass",
                  "llvm.expect", "__ubsan_handle_", "printf", "fprintf", "puts", "putchar", "abort",
                  "__assert_fail", "__assert_rtn", "exit")
MEMORY_INTRINSICS = ("llvm.memcpy", "llvm.memmove", "llvm.memset")
# What the checks refuse (the pattern, why), in the order ``check`` tests them.
REFUSED = (
    ("an active value consumed by an instruction with no rule", "no derivative rule for that operation"),
    ("an active value stored into memory without a shadow (a Const argument the function also reads "
     "through a load, an atomic whose old value it uses or a call; a global; a pointer of unknown origin)",
     "its derivative would be lost"),
    ("a call to an external function with no rule that receives an active value", "no derivative rule"),
    ("a recursive call (it cannot be inlined)", "calls are differentiated by inlining"),
    ("a pointer to differentiated memory stored into memory without a shadow (a Const argument's, a global's, "
     "memory reached through a pointer of unknown origin), returned, or passed to a function that could "
     "not be inlined", "shadows are not followed through memory there"),
    ("free/realloc of differentiated memory the function did not allocate", "its shadow belongs to the caller"),
    ("memcpy/memmove of differentiated memory into memory without a shadow", "its derivative would be lost"),
    ("a float load that reaches the result through a pointer of unknown origin (loaded from "
     "differentiated memory, inttoptr, an unknown call, a lane of a vector of pointers)", "it may alias differentiated memory"),
    ("a write through a pointer of unknown origin in a function with differentiated memory",
     "it may overwrite differentiated memory behind its shadow's back"),
    ("float bits carried as an integer into memory (but a Const argument the function never reads back), "
     "a call, a return, a pointer or back to a float",
     "a derivative cannot follow them"),
    ("in a kernel's reverse mode: an atomic whose result the thread uses", "the adjoint's own launch "
     "re-runs the forward pass and gets other results"),
    ("in a kernel's forward mode: a float atomic on differentiated memory whose old value the thread uses",
     "the tangent would be the old value of the shadow's own atomic, which the threads may reach in "
     "another order than the primal's"),
)
# Where integer-carried float bits stop mattering: decisions, indices, numeric conversions.
_BITS_END = frozenset({"icmp", "br", "switch", "getelementptr", "sitofp", "uitofp"})
# Where they would become a value again: memory, a float, a pointer, a call, the caller.
_BITS_SINKS = frozenset({"store", "atomicrmw", "cmpxchg", "ret", "inttoptr", "call"})
_POINTER_DERIVING = frozenset({"getelementptr", "bitcast", "addrspacecast", "phi", "select"})


def analyze(fn: Function, arg_activity: list[Activity]) -> ActivityInfo:
    """Activity of every value of ``fn`` given one Activity per argument, after the allowlist (``check``)
    has accepted everything on an active path."""
    info = activity_of(fn, arg_activity)
    check(fn, info)
    return info


def check(fn: Function, info: ActivityInfo) -> None:
    """Raise DifferentiationError for the first construct the engines cannot differentiate soundly."""
    users = fn.users()
    recursive = recursive_functions(fn.parent) if fn.parent is not None else set()
    for inst in fn.instructions():
        _check_active_operands(fn, inst, info, recursive)
        _check_shadowed_pointers(inst, info, users)
        _check_provenance(inst, info)
        _check_write_target(inst, info)
    _check_float_bits(fn, info, users)


def _where(inst: Instruction) -> str:
    block = inst.parent.name if inst.parent is not None else "?"
    fn = inst.parent.parent.name if inst.parent is not None and inst.parent.parent is not None else "?"
    return describe(inst) + ("" if inst.location is not None else f" in @{fn} (block %{block})")


def _callee_name(inst: Instruction) -> str:
    """The function called; for an indirect call a description that no table of names matches (a
    function pointer named %printf.p is not printf)."""
    callee = inst.callee
    if isinstance(callee, Instruction) and callee.opcode == "load" and isinstance(callee.operands[0], GlobalVariable):
        return f"<indirect: a function pointer loaded from @{callee.operands[0].name}>"
    if isinstance(callee, (Instruction, Argument)):
        return f"<indirect: %{callee.name}>"
    return getattr(callee, "name", "") or "<indirect>"


def _is_inactive_call(inst: Instruction) -> bool:
    return _callee_name(inst).startswith(INACTIVE_CALLS)


def _check_active_operands(fn: Function, inst: Instruction, info: ActivityInfo, recursive: set) -> None:
    active = [o for o in inst.operands if o in info.varied]
    if not active:
        return
    op, what = inst.opcode, active[0].ref()
    if op in ACTIVE_CONSUMERS or (op != "call" and rule_key(inst) in RULES):
        return
    if op in ("store", "atomicrmw"):
        pointer = inst.operands[1] if op == "store" else inst.operands[0]
        if pointer in info.shadowed or _write_only_const_argument(fn, _root(pointer), pointer):
            return
        if any(isinstance(r, Argument) and r.name.endswith("tape") for r in _all_roots(pointer)):
            raise DifferentiationError(
                f"cannot differentiate {_where(inst)}: this derivative keeps the active value {what} on its "
                f"dynamic tape (a data-dependent loop's iterates), and the tape has no shadow here. Kernels "
                f"derived with ado.vjp/ado.jvp get a shadow tape (enzyme/kernels.py); mark the tape argument "
                f"Duplicated when differentiating a derived function directly")
        numba = _numba_array(pointer)
        if numba is not None:
            raise DifferentiationError(
                f"cannot differentiate {_where(inst)}: it stores the active value {what} into {_numba_why(numba)}")
        raise DifferentiationError(
            f"cannot differentiate {_where(inst)}: it stores the active value {what} into memory that has no shadow "
            f"({_origin(pointer)}); pass that memory as a differentiated (Duplicated) argument")
    if op == "call":
        name = _callee_name(inst)
        if inst not in info.useful and _writes_no_memory(inst):
            return          # its result reaches no output, and it cannot hide the value in memory
        if (rule_key(inst) in RULES or find_custom(fn.parent, inst.callee) is not None or _is_inactive_call(inst)
                or name.startswith("adoffload.")):
            return
        callee = inst.callee
        if isinstance(callee, Function) and callee in recursive:
            raise DifferentiationError(
                f"cannot differentiate {_where(inst)}: @{name} is recursive, so it could not be inlined, and "
                f"recursive calls are not differentiated")
        if isinstance(callee, Function) and not callee.is_declaration and is_float_type(inst.type):
            return          # a float result: the engines derive the callee (forward) or refuse it (reverse)
        raise DifferentiationError(
            f"cannot differentiate {_where(inst)}: no derivative rule for @{name}, and it receives the active value "
            f"{what} (mark the inputs it depends on Const, or give the function a custom derivative)")
    if op == "bitcast" and not is_float_type(inst.type) and not inst.type.is_pointer:
        return              # the bits as an integer: _check_float_bits follows where they go
    if op == "bitcast":
        raise DifferentiationError(
            f"cannot differentiate {_where(inst)}: it reinterprets the bits of the active value {what} as "
            f"{inst.type}; a derivative cannot follow float bits through integers")
    if op == "invoke":          # name the callee: a call through a vtable or function pointer says so
        raise DifferentiationError(
            f"cannot differentiate {_where(inst)}: it passes the active value {what} to @{_callee_name(inst)} "
            f"through 'invoke' (a call that may unwind), and the engine has no derivative rule for 'invoke'")
    raise DifferentiationError(
        f"cannot differentiate {_where(inst)}: it consumes the active value {what} and the engine has no "
        f"derivative rule for '{op}'")


def _writes_no_memory(call: Instruction) -> bool:
    """Inline assembly without side effects, or a function declared ``memory(none)``/``readnone``."""
    callee = call.callee
    if getattr(callee, "kind", "") == "asm":
        return "sideeffect" not in callee.text and "~{memory}" not in callee.text
    attributes = getattr(callee, "attributes", set())
    return "readnone" in attributes or "memory(none)" in attributes


def _check_shadowed_pointers(inst: Instruction, info: ActivityInfo, users: dict) -> None:
    shadowed = [k for k, o in enumerate(inst.operands) if o in info.shadowed]
    if not shadowed:
        return
    op = inst.opcode
    if op == "store":
        if 0 in shadowed and 1 not in shadowed:
            raise DifferentiationError(
                f"cannot differentiate {_where(inst)}: it stores a pointer to differentiated memory "
                f"({inst.operands[0].ref()}) into memory that has no shadow ({_origin(inst.operands[1])}); "
                f"shadows are not followed through memory there (only through the function's own stack "
                f"and heap memory, enzyme/pointer_memory.py)")
        return
    if op in POINTER_USES:
        return
    if op == "freeze" and all(u.opcode == "icmp" for u in users.get(inst, [])):
        return              # only compared (a vectorizer's overlap check): never accessed, no shadow needed
    if op == "call":
        name = _callee_name(inst)
        if name.startswith(("llvm.memcpy", "llvm.memmove")) and inst.operands[0] not in info.shadowed:
            fn = inst.parent.parent
            if not _write_only_const_argument(fn, _root(inst.operands[0])):
                numba = _numba_array(inst.operands[0])
                if numba is not None:
                    raise DifferentiationError(f"cannot differentiate {_where(inst)}: it copies differentiated memory "
                                               f"into {_numba_why(numba)}")
                raise DifferentiationError(
                    f"cannot differentiate {_where(inst)}: it copies differentiated memory into memory that has no "
                    f"shadow ({_origin(inst.operands[0])}); pass that memory as a differentiated argument")
            return
        heap = heap_function(inst)
        if heap is not None and heap.pointer is not None and not memory_roots(inst.operands[heap.pointer]):
            roots = _all_roots(inst.operands[heap.pointer])
            own = [r for r in roots if isinstance(r, Instruction) and (r.opcode == "alloca" or heap_function(r))]
            if own:     # numba's x[1:] += x[:-1]: a copy of an overlapping operand, else the operand itself
                others = ", ".join(f"argument %{r.name}" if isinstance(r, Argument) else _origin(r)
                                   for r in roots if r not in own)
                raise DifferentiationError(
                    f"cannot differentiate {_where(inst)}: the pointer it frees or resizes is either memory the "
                    f"function allocated ({describe(own[0])}) or memory it did not ({others}), chosen at run time; "
                    f"the engine cannot tell which, and the caller's memory has the caller's shadow (numba copies "
                    f"the source of a slice assignment or in-place operation that may overlap its target, "
                    f"t[:] = x, x[1:] += x[:-1], and frees the copy: write the loop out)")
            raise DifferentiationError(
                f"cannot differentiate {_where(inst)}: it frees or resizes differentiated memory that this function "
                f"did not allocate (its shadow belongs to the caller)")
        if (name.startswith(MEMORY_INTRINSICS) or _is_inactive_call(inst) or heap is not None
                or name.startswith("adoffload.")):
            return
        raise DifferentiationError(
            f"cannot differentiate {_where(inst)}: @{name} receives a pointer to differentiated memory and could not "
            f"be inlined ({_why_not_inlined(inst.callee)})")
    raise DifferentiationError(
        f"cannot differentiate {_where(inst)}: a pointer to differentiated memory escapes through '{op}', "
        f"where its shadow cannot follow it")


def _why_not_inlined(callee) -> str:
    if not isinstance(callee, Function) or callee.is_declaration:
        return "its body is not in the module"
    if callee.parent is not None and callee in recursive_functions(callee.parent):
        return "it is recursive"
    return "the call was left after inlining; canonicalize the module again (ado.from_llvm does)"


def _origin(pointer: Value) -> str:
    root = _root(pointer)
    if isinstance(root, Argument):
        return f"argument %{root.name}, which is Const"
    if isinstance(root, GlobalVariable):
        return f"the global @{root.name}"
    if isinstance(root, Instruction):
        return f"{describe(root)}"
    return pointer.ref()


def _write_only_const_argument(fn: Function, root: Value, written: Value | None = None) -> bool:
    """A Const pointer argument from which the function never reads back what it stores there (through
    ``written``): storing active values or float bits there discards their derivative, which is what
    Const asks for. Loads, atomics (their old value) and calls count as reads, unless both sides are
    constant words of the argument that do not overlap (the status record: its code claimed by an
    exchange, the failing index stored in another word)."""
    if not isinstance(root, Argument):
        return False
    stored = _constant_bytes(written, root) if written is not None else None
    users = fn.users()
    for i in fn.instructions():
        if i.opcode == "load" or (i.opcode in ("atomicrmw", "cmpxchg") and users.get(i)):
            pointers = [i.operands[0]]
        elif i.opcode == "call" and not _is_inactive_call(i) and not _callee_name(i).startswith("llvm.memset"):
            copy = _callee_name(i).startswith(("llvm.memcpy", "llvm.memmove"))
            pointers = [i.operands[1]] if copy else [o for o in i.operands if o.type.is_pointer]
        else:
            continue
        for p in pointers:
            if root not in _all_roots(p):
                continue
            read = _constant_bytes(p, root, i)
            if stored is None or read is None or not (read[1] <= stored[0] or stored[1] <= read[0]):
                return False
    return True


def _constant_bytes(pointer: Value, root: Value, inst: Instruction | None = None) -> tuple[int, int] | None:
    """The byte range [start, end) that ``pointer`` (``root`` itself or one GEP of it by a constant
    index) covers, for the access ``inst`` (a load or atomic; None: the stores through ``pointer``)."""
    if pointer is root:
        start = 0
    elif (isinstance(pointer, Instruction) and pointer.opcode == "getelementptr" and pointer.operands[0] is root
          and len(pointer.operands) == 2 and isinstance(pointer.operands[1], Constant)
          and isinstance(pointer.operands[1].value, int) and _bits(pointer.element_type) % 8 == 0
          and _bits(pointer.element_type)):
        start = pointer.operands[1].value * (_bits(pointer.element_type) // 8)
    else:
        return None
    if inst is None:
        users = pointer.parent.parent.users().get(pointer, []) if isinstance(pointer, Instruction) else []
        widths = {_bits(u.operands[0].type) // 8 for u in users if u.opcode == "store" and u.operands[1] is pointer}
        width = max(widths) if widths else 0
    elif inst.opcode in ("load", "atomicrmw"):
        width = _bits(inst.type) // 8
    elif inst.opcode == "cmpxchg":
        width = _bits(inst.operands[1].type) // 8
    else:
        return None
    return (start, start + width) if width else None


def _all_roots(pointer: Value) -> list[Value]:
    """Every source a pointer may come from, through GEPs, casts, phis and selects."""
    roots, seen, work = [], set(), [pointer]
    while work:
        p = work.pop()
        if p in seen:
            continue
        seen.add(p)
        sources = pointer_sources(p) if isinstance(p, Instruction) else []
        if sources:
            work.extend(sources)
        else:
            roots.append(p)
    return roots


def _numba_array(pointer: Value) -> Instruction | None:
    """The NRT allocation (numba's memory manager) whose data pointer ``pointer`` comes from: a
    root that is a load of the word at byte 24 (the MemInfo's data field) of such a call's block."""
    from ..ir.numba_arrays import DATA_OFFSET, NRT_ALLOCATORS
    for root in _all_roots(pointer):
        if not (isinstance(root, Instruction) and root.opcode == "load"):
            continue
        gep = root.operands[0]
        if not (isinstance(gep, Instruction) and gep.opcode == "getelementptr" and len(gep.operands) == 2):
            continue
        base, offset = gep.operands
        if (isinstance(base, Instruction) and base.opcode == "call"
                and getattr(base.callee, "name", "") in NRT_ALLOCATORS
                and isinstance(offset, Constant) and offset.value == DATA_OFFSET):
            return base
    return None


def _numba_why(numba: Instruction) -> str:
    return (f"an array numba allocated itself ({describe(numba)}) whose MemInfo leaves the function's reach, so "
            f"the array has no shadow: an array returned by an @njit helper and kept, rebound in a loop "
            f"(x = x + dt * v; u, v = v, u), copied (y0.copy()) or made by np.cumsum/np.where (ir/numba_arrays.py "
            f"separates only arrays whose MemInfo stays in the function). Write into an array passed in as a "
            f"Duplicated argument, or into np.empty scratch filled in place; @cfunc(..., debug=True) adds source "
            f"lines to this message")


def _root(pointer: Value) -> Value:
    while isinstance(pointer, Instruction) and pointer.opcode in ("getelementptr", "bitcast", "addrspacecast"):
        pointer = pointer.operands[0]
    return pointer


def _unknown_origin(pointer: Value, info: ActivityInfo, *, calls_known: bool = False) -> Instruction | None:
    """The instruction a pointer comes from when the engine cannot tell whether it points into
    differentiated memory: a pointer loaded from differentiated memory, ``inttoptr``, a call that is
    not an allocation, a lane of a vector of pointers, anything but the sources it follows. None
    when every source is known (arguments, globals, private memory, pointers loaded from memory
    without a shadow). ``calls_known``: a call's result counts as known too (for writes: a call
    never received a pointer to differentiated memory, since passing one to a call that is not
    inlined is refused, so the pointer it returns cannot point there)."""
    seen, work = set(), [pointer]
    while work:
        p = work.pop()
        if p in seen or p in info.shadowed:
            continue
        seen.add(p)
        if not isinstance(p, Instruction):
            continue                                  # arguments (Const), globals, constants
        if p.opcode in _POINTER_DERIVING:
            work.extend(pointer_sources(p))
        elif p.opcode == "load":
            if p.operands[0] in info.shadowed:
                return p
        elif p.opcode == "alloca" or is_placeholder_pointer(p) or (p.opcode == "call" and (
                calls_known or heap_function(p) is not None)):
            continue                                  # private memory, no memory at all, or (calls_known) a call's
        else:
            return p          # inttoptr, a call's result, a lane of a vector of pointers, ...
    return None


def _check_provenance(inst: Instruction, info: ActivityInfo) -> None:
    if inst.opcode != "load" or not is_float_type(inst.type) or inst not in info.useful:
        return
    if inst.operands[0] in info.shadowed:
        return
    source = _unknown_origin(inst.operands[0], info)
    if source is not None:
        raise DifferentiationError(
            f"cannot differentiate {_where(inst)}: it loads a float that reaches the result through a pointer of "
            f"unknown origin ({describe(source)}); the engine cannot tell whether it points into differentiated memory")


def _check_write_target(inst: Instruction, info: ActivityInfo) -> None:
    """A write through a pointer of unknown origin, in a function with differentiated memory: it may
    overwrite differentiated memory without the shadow's update (the overwritten element's tangent or
    adjoint would survive), so it is refused, whatever value it writes."""
    op = inst.opcode
    if op == "store":
        pointer = inst.operands[1]
    elif op in ("atomicrmw", "cmpxchg"):
        pointer = inst.operands[0]
    elif op == "call" and _callee_name(inst).startswith(MEMORY_INTRINSICS):
        pointer = inst.operands[0]
    else:
        return
    if not info.shadowed or pointer in info.shadowed:
        return
    source = _unknown_origin(pointer, info, calls_known=True)
    if source is not None:
        raise DifferentiationError(
            f"cannot differentiate {_where(inst)}: it writes memory through a pointer of unknown origin "
            f"({describe(source)}); the engine cannot tell whether it overwrites differentiated memory")


def _check_float_bits(fn: Function, info: ActivityInfo, users: dict) -> None:
    """Float bits carried as integers must not flow anywhere a float could be rebuilt from them."""
    origin: dict[Value, Instruction] = {}
    for inst in fn.instructions():
        if inst.opcode == "bitcast" and inst.operands[0] in info.varied and not is_float_type(inst.type):
            origin[inst] = inst
        elif (inst.opcode == "load" and inst.operands[0] in info.shadowed and not is_float_type(inst.type)
              and not inst.type.is_pointer and _bits(inst.type) >= 8):
            origin[inst] = inst
    work = list(origin)
    while work:
        value = work.pop()
        for user in users.get(value, []):
            op = user.opcode
            if op in _BITS_END or (op == "call" and _is_inactive_call(user)):
                continue
            integer_call = op == "call" and _is_integer_intrinsic(user)
            if (op == "store" and user.operands[0] is value and user.operands[1] not in info.shadowed
                    and _write_only_const_argument(fn, _root(user.operands[1]), user.operands[1])):
                # bits stored where nothing reads them back (the status record's failing index, an
                # integer output): no float is rebuilt from them here, as for active values in a Const output
                continue
            if op == "bitcast" and is_float_type(user.type) and user not in info.useful:
                # a float rebuilt from the bits that reaches no result through float operations: still bits,
                # followed on (a double's halves shuffled as floats, then joined back into the double)
                origin[user] = origin[value]
                work.append(user)
                continue
            if (op in _BITS_SINKS and not integer_call) or (op == "bitcast" and is_float_type(user.type)):
                source = origin[value]
                raise DifferentiationError(
                    f"cannot differentiate {_where(user)}: it uses float bits carried as an integer "
                    f"(from {describe(source)}); a derivative cannot follow them. Keep floats in float-typed "
                    f"variables and memory")
            if user not in origin and not user.type.is_pointer:
                origin[user] = origin[value]
                work.append(user)


def _is_integer_intrinsic(inst: Instruction) -> bool:
    """``llvm.smax.i32``, ``llvm.abs.i64``, ...: integer in, integer out, nothing else."""
    return (_callee_name(inst).startswith("llvm.") and not is_float_type(inst.type) and not inst.type.is_pointer
            and str(inst.type) != "void")


def _bits(t) -> int:
    return getattr(t, "bits", 0) or getattr(getattr(t, "element", None), "bits", 0)


def check_forward_atomics(fn: Function, info: ActivityInfo) -> None:
    """A kernel's tangent of ``old = atomicAdd(p, v)`` on differentiated memory would be the old value
    of the same add on the shadow, a second atomic: threads reach the two in different orders (on a
    GPU; across the host's block threads), so ``old``'s tangent would not match ``old``. Refuse."""
    users = fn.users()
    for inst in fn.instructions():
        if inst.opcode == "atomicrmw" and users.get(inst) and is_float_type(inst.type) and info.writes_shadow(inst):
            if inst.op == "xchg" and inst.name.startswith(SEED_EXCHANGE):
                raise DifferentiationError(
                    f"cannot differentiate {_where(inst)} in forward mode (a second derivative of the kernel): it is "
                    f"the adjoint's exchange for a store that every thread of a block makes to one element (say "
                    f"s[block_id()] = total): one thread takes the seed (analysis/races/store_seeds.py), and which thread "
                    f"takes the tangent's seed is not fixed. Let one thread store it (`if ado.thread_id() == 0:`)")
            raise DifferentiationError(
                f"cannot differentiate {_where(inst)} in forward mode: the thread uses the old value the atomic "
                f"returns, and its tangent would be the old value of a second atomic on the shadow, which the "
                f"kernel's threads may reach in another order than the primal atomic. Compute such partial sums "
                f"in a separate kernel (a prefix sum) and pass them in as an input")


def check_rerun(fn: Function, status: Value | None) -> None:
    """A kernel's adjoint runs the forward pass again, in a launch of its own: an atomic whose
    result the thread uses (a slot from a counter, a claimed flag) then returns other values
    than in the primal launch, and the adjoint would pair the seeds of one launch's outputs with
    the other's threads. Refuse such kernels (``status``, the bounds-failure record, is exempt)."""
    users = fn.users()
    for inst in fn.instructions():
        if inst.opcode not in ("atomicrmw", "cmpxchg") or not users.get(inst):
            continue
        if status is not None and _root(inst.operands[0]) is status:
            continue
        raise DifferentiationError(
            f"cannot differentiate {_where(inst)} in reverse mode: the thread uses the old value the atomic returns, "
            f"and the adjoint kernel runs the forward pass again in its own launch, where the atomic hands out "
            f"other values than in the primal launch. Compute such slots in a separate kernel (a prefix sum) and "
            f"pass them in as an input")


def check_kernel_stores(fn: Function, activity: list, parallel, mode: str) -> None:
    """``check_stores_by_the_block`` for a kernel body of ``parallel`` (enzyme/parallel.ParallelInfo)
    differentiated with ``activity`` (CONST arguments are not stored arrays)."""
    check_stores_by_the_block(fn, [fn.args[k] for k in parallel.thread_args],
                              {a for k, (a, act) in enumerate(zip(fn.args, activity))
                               if act is not CONST and k not in parallel.block_shared_args},
                              [fn.args[k] for k in sorted(parallel.block_shared_args)], mode)
