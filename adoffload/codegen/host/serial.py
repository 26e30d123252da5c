"""Plain read-modify-writes for host launches that one OS thread runs from start to end.

A reverse kernel scatters its adjoints with atomics (``d_pos[j] += ...`` through ``atomicrmw
fadd``), which the host backend lowers to a ``lock cmpxchg`` loop: a serializing instruction of
some 20 cycles per add, where a plain load, add and store costs a few. When the launcher runs the
whole launch on the calling thread (one chunk, or a device of one worker: runtime/host.py), no
other thread of that launch exists, and every atomic of the body is an ordinary update: this pass
rewrites each ``atomicrmw`` of the body into ``old = load p; store op(old, v), p`` (``old`` replacing
the result), so the adjoint's updates cost what a hand-written serial loop's do.

Only the body function is rewritten (code the entry calls is the kernel's own, inlined into it), and
the host definitions of the thread-uniform adds it calls (``@adoffload.uniform_fadd.*``, one atomic
add each, which a reverse kernel's ``d_pos[j] += ...`` goes through);
volatile atomics, vector atomics and operations without a plain equivalent here (``fmax``,
``uinc_wrap``, ...) stay atomic, as do ``cmpxchg`` instructions. The atomics of a launch were never
a promise between launches: two launches writing one array at once race on its plain stores
anyway (docs/ARCHITECTURE.md §4, "serial host launches").
"""
from __future__ import annotations

import re

from ...analysis.address_classes import UNIFORM_ADD_PREFIX
from ..ir_text import _DEF, NAME, function_text
from ...ir.core import FloatType, IntType

# atomicrmw op -> how the new value is formed from (old, v): a binary opcode, or an icmp predicate
# choosing between them (min/max), or None for xchg (the new value is v)
_BINARY = {"fadd": "fadd", "fsub": "fsub", "add": "add", "sub": "sub", "and": "and", "or": "or", "xor": "xor"}
_CHOOSE = {"max": "sgt", "min": "slt", "umax": "ugt", "umin": "ult"}
_ANY_ATOMIC = re.compile(r"\batomicrmw\b")
# atomics other than the status record's xchg: what makes a serial variant worth compiling
_UPDATE_ATOMIC = re.compile(r"\batomicrmw (?:volatile )?(?!xchg\b)\w+ ")


_UPDATE_SITE = re.compile(rf'\batomicrmw (?:volatile )?(?!xchg\b)\w+ ptr(?: addrspace\(\d+\))? ({NAME})')
_BASE = re.compile(rf'\bptr(?: addrspace\(\d+\))? ({NAME})')       # a GEP's base, a cast's operand
_POINTER_STEPS = frozenset({"getelementptr", "bitcast", "addrspacecast"})


def update_roots(text: str, body_name: str) -> set[int]:
    """The positions of ``body_name``'s parameters that its update atomics (``atomicrmw`` but the
    status record's ``xchg``; not the thread-uniform adds, which the entry sums per chunk) add into,
    followed through ``getelementptr`` and pointer casts in the text; an address the walk cannot trace
    to a parameter (a phi, a load) is left out. A speed heuristic's input (jax/targets.serial_grid)."""
    found = function_text(text, body_name)
    if found is None:
        return set()
    params, defs, lines = found
    position = {name: k for k, name in enumerate(params)}
    roots = set()
    for line in lines:
        site = _UPDATE_SITE.search(line)
        if site is None:
            continue
        root = _parameter_root(site[1], defs, position)
        if root is not None:
            roots.add(root)
    return roots


def _parameter_root(name: str, defs: dict, position: dict) -> int | None:
    """The position of the parameter the pointer ``name`` is derived from through ``getelementptr``
    and pointer casts, or None (a phi, a load, a select on the way)."""
    seen = set()
    while name in defs and name not in seen and defs[name][0] in _POINTER_STEPS:
        seen.add(name)
        base = _BASE.search(defs[name][1])
        if base is None:
            return None
        name = base[1]
    return position.get(name)


_ALL_UPDATES = re.compile(r"\batomicrmw (?:volatile )?(?!xchg\b)\w+ ")
_PRIVATE_OPS = {"fadd": "float", "fsub": "float", "add": "int", "sub": "int"}
_SITE = re.compile(rf'\batomicrmw (\w+) ptr ({NAME}), (\w+) ')
_NAME_TOKEN = re.compile(NAME)


def private_updates(text: str, body_name: str) -> dict[int, str] | None:
    """The body parameters whose array a chunk of threads may add into a private copy of, by position,
    each with the element type its atomics add (``double``, ``i64``, ...), or None where that is not
    safe: every update atomic of the module (``atomicrmw`` but the status record's ``xchg``) is in the
    body, is a ``fadd``/``fsub``/``add``/``sub`` (non-volatile), and its address is a ``getelementptr``
    or cast chain from a parameter; no pointer derived from such a parameter is used otherwise (a load,
    a store, a call, a phi: the body would read or pass on the array); and the body calls no
    thread-uniform add (``@adoffload.uniform_fadd.*``, whose address the walk does not see). Then the
    adds commute, and per-chunk private sums added once into the array at the chunk's end give the
    same values up to rounding order (codegen/abi.add_host_entry's ``private``)."""
    found = function_text(text, body_name)
    if found is None:
        return None
    params, defs, lines = found
    for other in re.finditer(r'^define [^@]*@("[^"]*"|[-\w.$]+)\(.*?^}', text, re.M | re.S):
        name = other[1].strip('"')
        if name != body_name and _ALL_UPDATES.search(other[0]) and \
                any(re.search(r"@\"?" + re.escape(name) + r"\"?\(", line) for line in lines):
            return None                              # the body calls code with update atomics
    if any("@" + UNIFORM_ADD_PREFIX in line for line in lines):
        return None
    position = {name: k for k, name in enumerate(params)}
    types: dict[int, str] = {}
    for line in lines:
        if _ALL_UPDATES.search(line):
            site = _SITE.search(line)
            if site is None or "volatile" in line or site[1] not in _PRIVATE_OPS:
                return None
            r = _parameter_root(site[2], defs, position)
            if r is None or types.setdefault(r, site[3]) != site[3]:
                return None
            if (site[3] in ("float", "double")) != (_PRIVATE_OPS[site[1]] == "float"):
                return None
    if not types:
        return None
    roots = {params[k] for k in types}
    derived = set(roots)            # the pointers derived from them (to a fixed point: phis may reorder)
    changed = True
    while changed:
        changed = False
        for name, (opcode, rest) in defs.items():
            if name not in derived and opcode in _POINTER_STEPS:
                base = _BASE.search(rest)
                if base is not None and base[1] in derived:
                    derived.add(name)
                    changed = True
    for line in lines:
        used = [t for t in _NAME_TOKEN.findall(line) if t in derived]
        m = _DEF.match(line)
        if m and m[1] in derived:
            used = [t for t in used if t != m[1]]
            base = _BASE.search(m[3])
            if m[2] in _POINTER_STEPS and base is not None and used == [base[1]]:
                continue
            return None
        if not used:
            continue
        site = _SITE.search(line)
        if site is None or used != [site[2]] or not _ALL_UPDATES.search(line):
            return None                              # read, stored, passed on, compared, ...
    return types


def has_update_atomics(text: str) -> bool:
    """Whether the module has an atomicrmw other than ``xchg`` (the status record's claim): only
    then does a serial variant differ in speed from the ordinary one."""
    return _UPDATE_ATOMIC.search(text) is not None


def _rewritable(inst) -> bool:
    if inst.opcode != "atomicrmw" or "volatile" in inst.flags:
        return False
    t = inst.operands[1].type
    if inst.op in ("fadd", "fsub"):
        return isinstance(t, FloatType)
    return isinstance(t, IntType) and (inst.op in _BINARY or inst.op in _CHOOSE or inst.op == "xchg")


def plain_atomics(text: str, body_name: str, keep_xchg: bool = False) -> tuple[str, int]:
    """``text`` with the body's atomicrmw instructions made plain (module docstring), and how many
    were rewritten (0: ``text`` unchanged). ``keep_xchg``: the status record's ``xchg`` stays atomic
    (chunks of one launch run concurrently, each adding into private copies: abi.add_host_entry)."""
    if not _ANY_ATOMIC.search(text):
        return text, 0
    rewritten = _plain_atomics_text(text, body_name, keep_xchg)
    if rewritten is not None:
        return rewritten
    return _plain_atomics_ir(text, body_name, keep_xchg)


_FLOAT_KINDS = frozenset({"half", "bfloat", "float", "double", "x86_fp80", "fp128", "ppc_fp128"})
_FUNCTION = re.compile(r'^define [^@]*@("[^"]*"|[-\w.$]+)\(.*?^}', re.M | re.S)
_RMW = re.compile(
    rf'^(\s*)({NAME}) = atomicrmw (volatile )?(\w+) (ptr(?: addrspace\(\d+\))?) ({NAME}|@(?:"[^"]*"|[-\w.$]+)), '
    rf'(<[^<>]*>|\w+) ({NAME}|[-+\w.]+)( syncscope\("[^"]*"\))? (?:unordered|monotonic|acquire|release|acq_rel|seq_cst)'
    rf'(, align \d+)?((?:, ![-\w.]+ !\d+)*)\s*$')


def _plain_atomics_text(text: str, body_name: str, keep_xchg: bool):
    """``plain_atomics`` on the text itself: each rewritable ``atomicrmw`` line of the body and of the
    thread-uniform add helpers becomes a load, the operation and a store (same pointer, alignment and
    metadata attachments; the load keeps the atomic's name, so its uses now read the old value), the
    rest of the module is left as it is. None where a line is not in the form LLVM's printer gives the
    cases handled here (a constant-expression operand, ...): the caller then imports the module."""
    pieces, last, count, found_body = [], 0, 0, False
    for fn in _FUNCTION.finditer(text):
        name = fn[1].strip('"')
        if name != body_name and not (name.startswith(UNIFORM_ADD_PREFIX)):
            continue
        found_body |= name == body_name
        if not _ANY_ATOMIC.search(fn[0]):
            continue
        lines = fn[0].split("\n")
        for k, line in enumerate(lines):
            if "atomicrmw" not in line or k == 0:
                continue
            m = _RMW.match(line)
            if m is None:
                return None
            indent, result, volatile, op, ptr_type, pointer, type_, value, _scope, align, meta = m.groups()
            if volatile or not _text_rewritable(op, type_) or (keep_xchg and op == "xchg"):
                continue
            new = '%"' + result[1:].strip('"') + '.adoffload.plain"'
            if new in text:
                return None
            align = align or ""
            plain = [f"{indent}{result} = load {type_}, {ptr_type} {pointer}{align}{meta}"]
            if op == "xchg":
                new = value
            elif op in _BINARY:
                plain.append(f"{indent}{new} = {_BINARY[op]} {type_} {result}, {value}{meta}")
            else:
                test = '%"' + result[1:].strip('"') + '.adoffload.test"'
                if test in text:
                    return None
                plain.append(f"{indent}{test} = icmp {_CHOOSE[op]} {type_} {result}, {value}{meta}")
                plain.append(f"{indent}{new} = select i1 {test}, {type_} {result}, {type_} {value}{meta}")
            plain.append(f"{indent}store {type_} {new}, {ptr_type} {pointer}{align}{meta}")
            lines[k] = "\n".join(plain)
            count += 1
        pieces.append(text[last:fn.start()])
        pieces.append("\n".join(lines))
        last = fn.end()
    if not found_body:
        return text, 0
    if not count:
        return text, 0
    pieces.append(text[last:])
    return "".join(pieces), count


def _text_rewritable(op: str, type_: str) -> bool:
    """``_rewritable`` on the text's opcode and value type."""
    if op in ("fadd", "fsub"):
        return type_ in _FLOAT_KINDS
    return re.fullmatch(r"i\d+", type_) is not None and (op in _BINARY or op in _CHOOSE or op == "xchg")


def _plain_atomics_ir(text: str, body_name: str, keep_xchg: bool) -> tuple[str, int]:
    """``plain_atomics`` through ir.core (import, rewrite, export): any atomicrmw LLVM can print."""
    from ... import ir
    from ...ir.builder import Builder
    module = ir.import_module(text)
    body = module.functions.get(body_name)
    if body is None or not body.blocks:
        return text, 0
    # the body's own, and those of the host definitions of a reverse kernel's thread-uniform adds
    # (``@adoffload.uniform_fadd.*``: one atomic add each, called only by the kernel's code)
    helpers = [f for name, f in module.functions.items() if name.startswith(UNIFORM_ADD_PREFIX) and f.blocks]
    sites = [inst for fn in [body, *helpers] for inst in fn.instructions() if _rewritable(inst)
             and not (keep_xchg and inst.op == "xchg")]
    if not sites:
        return text, 0
    replaced = {}
    for inst in sites:
        pointer, value = inst.operands
        b = Builder()
        b.position_before(inst)
        b.location = inst.location
        old = b.load(value.type, pointer, align=inst.align)
        if inst.op == "xchg":
            new = value
        elif inst.op in _BINARY:
            new = b.binary(_BINARY[inst.op], old, value)
        else:
            new = b.select(b.icmp(_CHOOSE[inst.op], old, value), old, value)
        b.store(new, pointer, align=inst.align)
        inst.parent.instructions.remove(inst)
        replaced[id(inst)] = old
    for fn in [body, *helpers]:
        for other in fn.instructions():
            other.operands = [replaced.get(id(o), o) for o in other.operands]
    return ir.export_module(module), len(sites)
