"""One memory access of a shared (or checked global) array, as the race check (shared.py) sees it."""
from __future__ import annotations

from ...ir.core import Argument, Instruction, Value
from .forms import Lin


class Access:
    """One memory access of a shared array: its byte offset form (None: unknown), size, kind."""

    def __init__(self, inst: Instruction, pointer: Value, root: Argument, offset: Lin | None, size: int | None,
                 kind: str):
        self.inst, self.pointer, self.root, self.offset, self.size, self.kind = inst, pointer, root, offset, size, kind
        self.node: tuple = ()                             # (block, piece): where it runs (shared_intervals.py)
        self.facts: list[tuple[Lin, str]] = []           # form <= 0 ("le") or == 0 ("eq") where it runs
        self.conditions: list[tuple[Value, bool]] = []    # the branch conditions (and sides) that dominate it
        self._points: dict = {}                           # Proofs.points per fixed symbol values

    @property
    def writes(self) -> bool:
        return self.kind in ("store", "atomic", "call")
