"""Kernel signatures: the parameters a kernel takes and how they flatten to LLVM arguments.

Shared by the front end (which produces it), the AD layer (which derives shadow
signatures), code generation (the packed-slot ABI) and the launcher (argument checks).
"""
from __future__ import annotations

from dataclasses import dataclass

from .types import SCALAR_TYPES, ArrayType, ScalarType


# Parameters the launcher fills itself (a reverse kernel's tape); users never pass them.
HIDDEN_PREFIX = "adoffload_"


@dataclass(frozen=True)
class Param:
    name: str
    type: ScalarType | ArrayType

    @property
    def is_array(self) -> bool:
        return isinstance(self.type, ArrayType)

    @property
    def dtype(self) -> ScalarType:
        return self.type.dtype if self.is_array else self.type


@dataclass(frozen=True)
class FlatParam:
    """One LLVM-level argument of the body: a scalar, an array's data pointer, or one of its shapes."""
    name: str          # LLVM argument name: "a", "x", "x.shape0"
    llvm_type: str     # "float", "double", "i32", "i64", "i1", "ptr"
    role: str          # "scalar" | "array" | "shape"
    param_index: int   # index of the kernel parameter it belongs to
    dim: int = -1      # for role == "shape"


@dataclass(frozen=True)
class KernelSignature:
    name: str
    params: tuple[Param, ...]
    grid_rank: int = 1

    def flat_params(self) -> list[FlatParam]:
        flat: list[FlatParam] = []
        for k, p in enumerate(self.params):
            if p.is_array:
                flat.append(FlatParam(p.name, "ptr", "array", k))
                flat.extend(FlatParam(f"{p.name}.shape{d}", "i64", "shape", k, d) for d in range(p.type.ndim))
            else:
                flat.append(FlatParam(p.name, p.type.llvm, "scalar", k))
        return flat

    def body_arg_types(self) -> list[str]:
        """LLVM types of the body's arguments: tids, flattened params, status pointer."""
        return ["i64"] * self.grid_rank + [f.llvm_type for f in self.flat_params()] + ["ptr"]

    @property
    def visible_params(self) -> tuple[Param, ...]:
        """The parameters a caller passes, in order: hidden launcher-filled ones excluded (a
        reverse kernel's tape comes last; a second derivative's base tape sits among the params)."""
        return tuple(p for p in self.params if not p.name.startswith(HIDDEN_PREFIX))

    @property
    def visible_names(self) -> frozenset[str]:
        return frozenset(p.name for p in self.visible_params)

    def to_json(self) -> dict:
        """A plain-data form (for the on-disk cache; never pickled)."""
        def encode(t):
            return [t.dtype.name, t.ndim, t.intent] if isinstance(t, ArrayType) else t.name
        return {"name": self.name, "grid_rank": self.grid_rank,
                "params": [[p.name, encode(p.type)] for p in self.params]}

    @classmethod
    def from_json(cls, data: dict) -> "KernelSignature":
        def decode(t):
            return ArrayType(SCALAR_TYPES[t[0]], int(t[1]), t[2]) if isinstance(t, list) else SCALAR_TYPES[t]
        return cls(data["name"], tuple(Param(n, decode(t)) for n, t in data["params"]), int(data["grid_rank"]))

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    def index_of(self, name: str) -> int:
        return [p.name for p in self.params].index(name)
