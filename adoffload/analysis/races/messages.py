"""The words of a race error (shared.py): each access with its element as a formula of the
thread index, where it is, and two threads found to touch one element."""
from __future__ import annotations

import re
from ...ir import format_instruction
from .accesses import Access
from .forms import Forms, Lin


_VERB = {"load": "read", "store": "write", "atomic": "atomic update", "call": "call"}


def where(forms: Forms, x: Access, verb: str, array: str, thread_names, plain: bool = False) -> str:
    text = f"the {verb} of {array}" + ("" if plain else _index(forms, x, thread_names))
    if x.inst.location is not None:
        return f"{text} at {x.inst.location}"
    return f"{text} (`{format_instruction(x.inst).strip()}` in block %{x.inst.parent.name})"


def message(forms: Forms, a: Access, b: Access, witness, array: str, kernel: str, thread_names,
            memory: str = "shared", plain: bool = False) -> str:
    """``plain``: a kernel without blocks (races/kernel.check_plain_kernel), whose threads no barrier orders."""
    def place(x: Access) -> str:
        return where(forms, x, _VERB[x.kind], array, thread_names, plain)
    same = a.inst is b.inst
    pair = f"{place(a)}, run by two threads," if same else f"{place(a)} and {place(b)}"
    who = ""
    if witness:
        t1, t2 = (_thread(t) for t in witness)
        who = f" (thread {t1}'s {_VERB[a.kind]} and thread {t2}'s {_VERB[b.kind]} touch one element)"
    if plain:
        return (f"kernel '{kernel}': global-memory race on '{array}': {pair} touch one element from two threads "
                f"of a launch{who.replace(' touch one element', '')}, and a kernel without blocks has no barrier to order "
                f"them: the result depends on the threads' order, and the derivatives would pair the read with "
                f"another write than the primal saw. Read the old values from a separate input array, or give "
                f"each thread its own elements")
    return (f"kernel '{kernel}': {memory}-memory race on '{array}': {pair} may touch the same element from two "
            f"threads of a block between the same two barriers{who}. On a GPU their order is undefined "
            f"(warp-synchronous code without __syncwarp is a data race since Volta), and adoffload runs "
            f"a block's threads one after another between barriers, so the result would be silently wrong. "
            f"Put a barrier between them (__syncthreads() / ado.sync_threads(); __syncwarp() where supported), "
            f"or give each thread its own elements")


def _index(forms: Forms, x: Access, thread_names) -> str:
    """The element index of an access as a formula of the thread index ("[?]" where not affine)."""
    if x.offset is None or x.size is None or any(atom[0] in ("k", "p") for atom in x.offset.coef):
        return "[?]"
    element = x.size
    f = x.offset
    if element and all(c % element == 0 for c in f.coef.values()) and f.const % element == 0:
        f = Lin({k: c // element for k, c in f.coef.items()}, f.const // element)
        unit = ""
    else:
        unit = " (bytes)"
    terms = []
    for atom, c in sorted(f.coef.items(), key=lambda kv: str(kv[0])):
        if atom[0] == "t":
            name = thread_names[atom[1]] if thread_names else f"thread_id()[{atom[1]}]"
        elif atom[0] == "blk":
            name = f"block_id()[{atom[1]}]" if len(forms.block) > 1 else "block_id()"
        else:
            v = forms.symbols.get(atom[1])
            name = f"%{getattr(v, 'name', '?')}"
        terms.append(name if c == 1 else f"{c}*{name}")
    if f.const or not terms:
        terms.append(str(f.const))
    return "[" + " + ".join(terms).replace("+ -", "- ") + "]" + unit


def _thread(t: tuple[int, ...]) -> str:
    if len(t) == 1:
        return str(t[0])
    return "(" + ", ".join(map(str, t)) + ")"


def shared_array_name(name: str) -> str:
    """A source-like name for a CUDA ``__shared__`` global (``_ZZ4kernPfE5sdata`` -> ``sdata``)."""
    match = re.search(r"E(\d+)(\w+)$", name)
    if match and int(match.group(1)) == len(match.group(2)):
        return match.group(2)
    return name
