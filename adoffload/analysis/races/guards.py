"""What holds where a shared-memory access runs: the branch conditions on every path to it.

For the race check (shared.py): per block, *facts* (affine constraints ``form <= 0`` or
``form == 0`` in the atoms of races/forms.py, for the range proofs) and *conditions* (branch
conditions and switch cases with the side taken, evaluated bit-exactly by the enumeration).
A block's knowledge is what holds on the edges from all its predecessors (so ``if (ti == 15)``
reached both from a ``switch`` case and from a dead test still counts), or, at a loop header,
what its immediate dominator knows; anything that mentions a value the block (re)defines is
dropped there, since it spoke of an earlier value.
"""
from __future__ import annotations

from ...ir.cfg import reachable_blocks
from ...ir.core import Block, Function, Instruction, Value
from .forms import Forms, Lin, const_int

_SWAP = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}
_NEGATE = {"lt": "ge", "le": "gt", "gt": "le", "ge": "lt", "eq": "ne", "ne": "eq"}
_TREE_DEPTH = 24


def guards(forms: Forms, fn: Function, dom: dict[Block, set[Block]]) -> dict[Block, tuple[list, list]]:
    """Per block, (facts: [(form, "le" | "eq")], conditions: [(value, True | False | ("case", c))])."""
    preds = fn.predecessors()
    edges = {}
    for p in fn.blocks:
        edges.update(_edge_knowledge(forms, p))
    idom = _immediate_dominators(fn, dom)
    known: dict[Block, dict] = {}
    for b in reachable_blocks(fn):
        if b is fn.entry:
            known[b] = {}
            continue
        incoming = [p for p in preds[b] if p in known]
        if len(incoming) == len(preds[b]) and not any(b in dom[p] for p in preds[b]):
            common = None
            for p in incoming:
                here = {**known[p], **edges.get((p, b), {})}
                common = here if common is None else {k: v for k, v in common.items() if k in here}
            mine = dict(common or {})
        else:                                      # a loop header (or an irreducible entry)
            mine = dict(known.get(idom.get(b), {}))
            if len(preds[b]) == 1:
                mine.update(edges.get((preds[b][0], b), {}))
        defined = {id(i) for i in b.instructions}
        known[b] = {k: v for k, v in mine.items() if _still_true(v, defined)}
    out = {}
    for b in fn.blocks:
        items = known.get(b, {}).values()
        out[b] = ([v[1] for v in items if v[0] == "fact"], [v[1] for v in items if v[0] == "condition"])
    return out


def _edge_knowledge(forms: Forms, p: Block) -> dict:
    """{(p, successor): {key: item}} for the branch or switch ending ``p``."""
    term = p.terminator
    found: dict = {}
    if term is None:
        return found
    if term.opcode == "br" and len(term.blocks) == 2 and term.blocks[0] is not term.blocks[1]:
        c = term.operands[0]
        for succ, side in zip(term.blocks, (True, False)):
            items = {("c", id(c), side): ("condition", (c, side))}
            for f, kind in _condition(forms, c, side):
                items[_key(f, kind)] = ("fact", (f, kind))
            found[(p, succ)] = items
    elif term.opcode == "switch":
        x, cases = term.operands[0], term.operands[1:]
        targets = term.blocks[1:]
        for c, succ in zip(cases, targets):
            value = const_int(c)
            if value is None or succ is term.blocks[0] or sum(t is succ for t in targets) != 1:
                continue
            items = {("case", id(x), value): ("condition", (x, ("case", value)))}
            form = forms.form(x, "s") if value < 0 else (forms.form(x, "s") or forms.form(x, "u"))
            if form is not None:
                f = form - Lin(const=value)
                items[_key(f, "eq")] = ("fact", (f, "eq"))
            found[(p, succ)] = items
    return found


def _key(f: Lin, kind: str):
    return ("f", tuple(sorted(f.coef.items(), key=str)), f.const, kind)


def _still_true(item, defined: set) -> bool:
    """Whether an item may be kept in a block defining ``defined``: it mentions none of them (an item
    too deep to tell is dropped; the test was evaluated the other way round, and None & set raised)."""
    mentioned = _mentions(item)
    return mentioned is not None and not (mentioned & defined)


def _mentions(item) -> set | None:
    """Ids of the instructions an item's truth depends on (None: too deep to tell)."""
    what, payload = item
    if what == "fact":
        found = set()
        for atom in payload[0].coef:
            inner = [a for a, _ in atom[3][0]] if atom[0] == "p" else [atom]      # a permutation's own terms
            found |= {a[1] for a in inner if a[0] in ("v", "k")}
        return found
    found, todo, seen = set(), [(payload[0], 0)], set()
    while todo:
        v, depth = todo.pop()
        if not isinstance(v, Instruction) or id(v) in seen:
            continue
        if depth > _TREE_DEPTH:
            return None
        seen.add(id(v))
        found.add(id(v))
        todo.extend((o, depth + 1) for o in v.operands)
    return found


def _immediate_dominators(fn: Function, dom: dict[Block, set[Block]]) -> dict[Block, Block]:
    idom = {}
    for b, ds in dom.items():
        strict = ds - {b}
        for d in strict:
            if all(d is e or e in dom[d] for e in strict):      # the closest: every other dominates it
                idom[b] = d
                break
    return idom


def _condition(forms: Forms, c: Value, holds: bool, depth: int = 0) -> list[tuple[Lin, str]]:
    if not isinstance(c, Instruction) or depth > 16:
        return []
    if c.opcode == "xor" and const_int(c.operands[1]) == 1:
        return _condition(forms, c.operands[0], not holds, depth + 1)
    both = (c.opcode == "and" and holds) or (c.opcode == "or" and not holds)
    if c.opcode == "select":
        t, e = const_int(c.operands[1]), const_int(c.operands[2])
        both = (e == 0 and holds) or (t == 1 and not holds)
        if both:
            other = c.operands[1] if e == 0 else c.operands[2]
            return _condition(forms, c.operands[0], holds, depth + 1) + _condition(forms, other, holds, depth + 1)
        return []
    if both:
        return _condition(forms, c.operands[0], holds, depth + 1) + _condition(forms, c.operands[1], holds, depth + 1)
    if c.opcode != "icmp":
        return []
    pred = c.predicate
    kind = pred[0] if pred[0] in "su" and pred not in ("eq", "ne") else ""
    rel = pred[1:] if kind else pred
    if "samesign" in c.flags and kind == "u":
        kind = "su"
    for want in (kind or "su"):
        x, y = forms.form(c.operands[0], want), forms.form(c.operands[1], want)
        if x is not None and y is not None:
            break
    else:
        return []
    rel = rel if holds else _NEGATE[rel]
    if rel in ("gt", "ge"):
        x, y, rel = y, x, _SWAP[rel]
    if rel == "lt":
        return [(x - y + Lin(const=1), "le")]
    if rel == "le":
        return [(x - y, "le")]
    if rel == "eq":
        return [(x - y, "eq")]
    return []
