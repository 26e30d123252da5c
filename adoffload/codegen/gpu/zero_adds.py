"""A float atomic add whose value may be a structural zero skips the atomic when it adds exactly -0.0.

Why: a reverse sweep adds every contribution of an iteration, also where a branch of the primal was
not taken and the contribution is the identity -0.0 (a pair past the cutoff of a gather energy:
``d_pos[j, c] += 2 dx dE/dr2`` with ``dE/dr2 = -0.0``). On a GPU each such add is an L2 atomic that
changes nothing; the hand-written kernel never issues it. Adding -0.0 leaves every value as it is
(``x + -0.0 == x`` bit for bit in round-to-nearest, +0.0 and -0.0 included; a NaN stays a NaN), so
skipping exactly those adds is exact, whatever the values are. (A GPU's f32 atomic flushes a
subnormal it adds to; skipping an add of -0.0 leaves such a value unflushed, i.e. the exact sum.)

Which adds: ``atomicrmw fadd`` of ``float``/``double``, monotonic, not volatile, result unused, whose
value is computed (through ``fadd``/``fsub``/``fmul``/``fneg``/``select``/``phi``) from a ``phi`` or
``select`` with a constant zero among its operands: the forms the engine's adjoints take where a
contribution is missing on some path (a phi of the identity, a strong zero's select). Others are
left alone: a user's ``atomic_add(sums, b, x[i])`` pays no compare. Each chosen add gets its own
block, entered when the value's bits differ from -0.0's (an integer compare; on NVPTX a predicated
atomic). Runs on the body after lane combining (codegen/gpu/lane_combining.py needs its sites in
one block) and before the GPU entry is added; block kernels are left as they are.
"""
from __future__ import annotations

from ...ir import core
from ...ir.builder import Builder
from ...ir.cfg import split_before

_CHAIN = frozenset({"fadd", "fsub", "fmul", "fneg", "select", "phi"})
_BITS = {"float": (core.i32, -0x80000000), "double": (core.i64, -0x8000000000000000)}   # -0.0 as a signed integer
MAX_DEPTH = 12


def _is_zero_constant(v: core.Value) -> bool:
    return isinstance(v, core.Constant) and v.type.is_float and (
        v.kind == "zero" or (v.kind == "scalar" and not isinstance(v.value, str) and float(v.value) == 0.0))


def may_be_structural_zero(value: core.Value) -> bool:
    """Whether ``value`` is computed from a phi or select one of whose operands is a zero constant."""
    seen, work = set(), [(value, 0)]
    while work:
        v, depth = work.pop()
        if not isinstance(v, core.Instruction) or v in seen or depth > MAX_DEPTH or v.opcode not in _CHAIN:
            continue
        seen.add(v)
        operands = v.operands[1:] if v.opcode == "select" else v.operands
        if v.opcode in ("phi", "select") and any(_is_zero_constant(o) for o in operands):
            return True
        work.extend((o, depth + 1) for o in operands)
    return False


def _is_site(inst: core.Instruction, uses: dict) -> bool:
    return (inst.opcode == "atomicrmw" and inst.op == "fadd" and inst.ordering == "monotonic"
            and "volatile" not in inst.flags and not uses.get(inst) and str(inst.type) in _BITS
            and may_be_structural_zero(inst.operands[1]))


def skip_zero_adds(text: str, body_name: str) -> tuple[str, int]:
    """``text`` with each chosen add of ``body_name`` skipped when it adds -0.0; and how many."""
    if "atomicrmw fadd" not in text:
        return text, 0
    from ...ir import export_module, import_module
    module = import_module(text)
    body = module.functions.get(body_name)
    if body is None or not body.blocks:
        return text, 0
    uses = body.users()
    sites = [i for i in body.instructions() if _is_site(i, uses)]
    for site in sites:
        _guard(body, site)
    if not sites:
        return text, 0
    body.__dict__.pop("_names", None)
    return export_module(module), len(sites)


def _guard(body: core.Function, site: core.Instruction) -> None:
    block = site.parent
    after = block.instructions[block.instructions.index(site) + 1]     # an add is never a terminator
    add_block = split_before(body, site, "add")
    rest = split_before(body, after, "after")
    b = Builder(add_block)
    b.location = site.location
    b.br(rest)
    b.position_at_end(block)
    int_type, negative_zero = _BITS[str(site.type)]
    bits = b.cast("bitcast", site.operands[1], int_type, "add.bits")
    b.cbranch(b.icmp("ne", bits, core.Constant(int_type, negative_zero)), add_block, rest)
