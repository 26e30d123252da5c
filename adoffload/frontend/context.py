"""Module-wide state while compiling one kernel: the llvmlite module, declarations, options."""
from __future__ import annotations

from llvmlite import ir

from ..language.types import ScalarType

I1, I32, I64 = ir.IntType(1), ir.IntType(32), ir.IntType(64)
LLVM_TYPES = {"float": ir.FloatType(), "double": ir.DoubleType(), "i32": I32, "i64": I64, "i1": I1}


def llvm_type(t: ScalarType) -> ir.Type:
    return LLVM_TYPES[t.llvm]


class LocatedBuilder(ir.IRBuilder):
    """An IRBuilder that tags every instruction it inserts with ``!adoffload.loc``."""

    location: ir.MDValue | None = None

    def _insert(self, instr):
        if self.location is not None:
            instr.set_metadata("adoffload.loc", self.location)
        super()._insert(instr)


class ModuleContext:
    """What every function lowered into one kernel module shares."""

    def __init__(self, module_name: str, *, bounds_check: bool, proven: frozenset):
        self.module = ir.Module(name=module_name)
        self.bounds_check = bounds_check
        self.proven = proven
        self.candidate_facts: set[tuple[int, int, int]] = set()
        self.helpers: dict = {}              # specialization key -> CompiledHelper
        self.helpers_in_progress: set = set()
        self.local_array_count = 0
        self.loaded_params: set[int] = set()     # array parameters an element of which is loaded
        self.stored_params: set[int] = set()     # ... stored (atomics: both)
        self._locations: dict = {}

    def location(self, filename: str, line: int, col: int) -> ir.MDValue:
        key = (filename, line, col)
        if key not in self._locations:
            self._locations[key] = self.module.add_metadata(
                [filename, ir.Constant(I32, line), ir.Constant(I32, col)])
        return self._locations[key]

    def declare(self, name: str, return_type: ir.Type, arg_types: list[ir.Type]) -> ir.Function:
        """An external declaration (LLVM intrinsic or libm function), created once."""
        existing = self.module.globals.get(name)
        if existing is not None:
            return existing
        return ir.Function(self.module, ir.FunctionType(return_type, arg_types), name)

    def unique_name(self, base: str) -> str:
        name, n = base, 2
        while name in self.module.globals:
            name, n = f"{base}.{n}", n + 1
        return name

    def accessed(self, array, load: bool, store: bool) -> None:
        """Record a load / store of an element of ``array`` (kernel parameters only)."""
        if array.param_index >= 0:
            if load:
                self.loaded_params.add(array.param_index)
            if store:
                self.stored_params.add(array.param_index)

    def new_local_array_number(self) -> int:
        self.local_array_count += 1
        return self.local_array_count - 1

    def finish(self) -> str:
        return str(self.module)
