"""Which values' adjoints may be exactly zero by the program's structure, not by the seed.

A value that is computed but not used on this execution -- the arm a ``select`` did not choose, a
vector lane a masked store skipped or an ``extractelement`` did not read, a value hoisted above the
branch that uses it, an earlier loop iteration's value read after the loop -- gets a zero adjoint.
Its computation may well be non-finite (``sqrt`` of the negative lanes that a masked store then
skips, ``exp`` overflowing in the unchosen arm of a stable softplus), and IEEE's ``0 · NaN = NaN``
would then turn the zero into a NaN gradient. Where an instruction's adjoint may be such a zero,
its reverse rule multiplies with ``strong_mul`` (0 · anything = 0), as Enzyme's CheckedMul does;
elsewhere the plain product is kept, so straight-line arithmetic costs nothing more.

A use is *certain* when the user runs whenever the value was computed, once per computation: the
same block, or a block reached from the value's block by unconditional branches alone (a phi's
incoming edge taken from that chain included). Every other use, and every operand of a lane op or
of an op whose partial selects one operand (select, min, max), may give a zero; so does every
operand of an instruction whose own adjoint may be zero.
"""
from __future__ import annotations

from ..ir.core import Block, Constant, Instruction, Value, VectorType
from .activity import is_float_type

# Ops that route the adjoint to some operands (or lanes) only, so the others may get a zero.
_SELECTING_OPS = frozenset({"select", "extractelement", "insertelement", "shufflevector"})
_SELECTING_CALLS = ("llvm.minnum", "llvm.maxnum", "llvm.minimum", "llvm.maximum", "llvm.minimumnum",
                    "llvm.maximumnum", "fmin", "fmax", "__nv_fmin", "__nv_fmax", "__ocml_fmin", "__ocml_fmax",
                    "llvm.vector.reduce.fmax", "llvm.vector.reduce.fmin", "llvm.vector.reduce.fmaximum",
                    "llvm.vector.reduce.fminimum", "llvm.masked.store", "llvm.masked.scatter",
                    "llvm.masked.compressstore")

# Users that pass no adjoint back (a comparison, a float-to-int conversion): where they run does not matter.
_NO_ADJOINT_USERS = frozenset({"fcmp", "fptosi", "fptoui"})


def _is_float_like(v: Value) -> bool:
    t = v.type
    return is_float_type(t) or (isinstance(t, VectorType) and is_float_type(t.element))


def _unconditional_chain(block: Block) -> list[Block]:
    """``block`` and the blocks it reaches through unconditional branches only, in order."""
    chain, seen = [block], {block}
    while True:
        term = chain[-1].terminator
        if term is None or term.opcode != "br" or len(term.blocks) != 1 or term.blocks[0] in seen:
            return chain
        chain.append(term.blocks[0])
        seen.add(term.blocks[0])


def _selects_operands(user: Instruction) -> bool:
    if user.opcode in _SELECTING_OPS:
        return True
    if user.opcode == "call":
        name = getattr(user.callee, "name", "") or ""
        return name.startswith(_SELECTING_CALLS)
    return False


def _certain_use(value: Instruction, user: Instruction, chains: dict) -> bool:
    home = value.parent
    if user.opcode == "phi":
        chain = chains.setdefault(home, _unconditional_chain(home))
        # the phi's own block must come right after the chain's blocks through that edge
        return any(v is value and b in chain and b.terminator is not None and len(b.terminator.blocks) == 1
                   and b.terminator.blocks[0] is user.parent for v, b in zip(user.operands, user.blocks))
    if user.parent is home:
        return True
    return user.parent in chains.setdefault(home, _unconditional_chain(home))


# the refinement below walks the CFG once per value with an uncertain use: only for functions this small
COVERAGE_BLOCK_LIMIT = 400


def _used_on_every_path(value: Instruction, users: list[Instruction], exit_block: Block) -> bool:
    """Whether every path from ``value``'s definition to ``exit_block`` (where the reverse sweep
    starts) runs one of ``users`` first: a non-phi user's block, or a phi user's incoming edge from
    the block that passes ``value``. A path that comes back to the definition's block first (the
    next iteration redefines the value) does not count as covered; paths that end elsewhere (a
    failed thread's own return, ``unreachable``) run no reverse sweep."""
    home = value.parent
    use_blocks = {u.parent for u in users if u.opcode != "phi"}
    use_edges = {(b, u.parent) for u in users if u.opcode == "phi"
                 for v, b in zip(u.operands, u.blocks) if v is value}
    seen: set[Block] = set()
    work = [home]
    while work:
        block = work.pop()
        for succ in block.successors:
            if (block, succ) in use_edges or succ in use_blocks:
                continue
            if succ is exit_block or succ is home:
                return False
            if succ not in seen:
                seen.add(succ)
                work.append(succ)
    return True


def maybe_zero_adjoints(blocks: list[Block], exit_block: Block | None = None) -> set[Instruction]:
    """The float instructions of ``blocks`` whose adjoint may be a structural zero (module docstring).

    With ``exit_block`` (the block the reverse sweep starts from), a value whose uses are not all
    certain is still not marked where every path from it to ``exit_block`` runs one of them: a loop's
    running sum ``e`` used by ``e + t`` under a condition and passed on unchanged by a phi otherwise
    always gets the sum's adjoint, so its contributions need no strong products."""
    refine = exit_block is not None and len(blocks) <= COVERAGE_BLOCK_LIMIT
    users: dict[int, list[Instruction]] = {}
    for block in blocks:
        for inst in block.instructions:
            for operand in inst.operands:
                if isinstance(operand, Instruction):
                    users.setdefault(id(operand), []).append(inst)
    chains: dict[Block, list[Block]] = {}
    found: set[Instruction] = set()
    work: list[Instruction] = []

    def mark(v: Value) -> None:
        if isinstance(v, Instruction) and not isinstance(v, Constant) and v not in found and _is_float_like(v):
            found.add(v)
            work.append(v)

    for block in blocks:
        for inst in block.instructions:
            if not _is_float_like(inst):
                continue
            carrying = [u for u in users.get(id(inst), []) if u.opcode not in _NO_ADJOINT_USERS]
            if any(_selects_operands(u) for u in carrying):
                mark(inst)
            elif not all(_certain_use(inst, u, chains) for u in carrying) and \
                    not (refine and _used_on_every_path(inst, carrying, exit_block)):
                mark(inst)
    while work:
        for operand in work.pop().operands:
            mark(operand)
    return found
