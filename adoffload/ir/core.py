"""The typed SSA IR: a small mirror of LLVM IR (types, values, instructions, blocks, functions).

Everything downstream of the front end (the AD engine, the targets) works on these objects.
Instructions keep LLVM's opcode names so that import/export are table lookups, and carry
their source location so that errors can point at the kernel line that produced them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator


# ----------------------------------------------------------------------------- types

class Type:
    """Base of IR types; concrete types are frozen dataclasses, so they compare by value."""

    is_float = False
    is_int = False
    is_pointer = False


@dataclass(frozen=True)
class VoidType(Type):
    def __str__(self) -> str:
        return "void"


@dataclass(frozen=True)
class LabelType(Type):
    def __str__(self) -> str:
        return "label"


@dataclass(frozen=True)
class MetadataType(Type):
    """The type of a metadata operand (``call @llvm.experimental.noalias.scope.decl(metadata !3)``)."""

    def __str__(self) -> str:
        return "metadata"


@dataclass(frozen=True)
class IntType(Type):
    bits: int
    is_int = True

    def __str__(self) -> str:
        return f"i{self.bits}"


@dataclass(frozen=True)
class FloatType(Type):
    kind: str  # "half", "bfloat", "float", "double", "x86_fp80", "fp128", "ppc_fp128"
    is_float = True

    @property
    def bits(self) -> int:
        return {"half": 16, "bfloat": 16, "float": 32, "double": 64, "x86_fp80": 80, "fp128": 128,
                "ppc_fp128": 128}[self.kind]

    def __str__(self) -> str:
        return self.kind


@dataclass(frozen=True)
class PointerType(Type):
    addrspace: int = 0
    is_pointer = True

    def __str__(self) -> str:
        return "ptr" if self.addrspace == 0 else f"ptr addrspace({self.addrspace})"


@dataclass(frozen=True)
class VectorType(Type):
    element: Type
    count: int

    @property
    def is_float(self) -> bool:  # type: ignore[override]
        return self.element.is_float

    def __str__(self) -> str:
        return f"<{self.count} x {self.element}>"


@dataclass(frozen=True)
class ArrayType(Type):
    element: Type
    count: int

    def __str__(self) -> str:
        return f"[{self.count} x {self.element}]"


@dataclass(frozen=True)
class StructType(Type):
    elements: tuple[Type, ...]
    packed: bool = False

    def __str__(self) -> str:
        body = ", ".join(map(str, self.elements))
        return f"<{{ {body} }}>" if self.packed else f"{{ {body} }}"


@dataclass(frozen=True)
class FunctionType(Type):
    return_type: Type
    params: tuple[Type, ...]
    vararg: bool = False

    def __str__(self) -> str:
        params = ", ".join(map(str, self.params)) + (", ..." if self.vararg else "")
        return f"{self.return_type} ({params})"


void = VoidType()
label = LabelType()
i1, i8, i16, i32, i64 = (IntType(b) for b in (1, 8, 16, 32, 64))
f16, f32, f64 = FloatType("half"), FloatType("float"), FloatType("double")
ptr = PointerType(0)


# ----------------------------------------------------------------------------- values

class Value:
    """Anything an instruction can use: constants, arguments, instructions, globals, functions."""

    type: Type
    name: str

    def ref(self) -> str:
        """How this value is spelled as an operand (``%x``, ``1.0``, ``@g``)."""
        return f"%{self.name}"


@dataclass(eq=False)
class Constant(Value):
    """A constant. ``value`` is an int or float (for x86_fp80, fp128 and ppc_fp128, which a Python
    float cannot hold, the hex literal as LLVM prints it: ``0xK4000C000000000000000``); None
    with kind null/undef/poison/zero;
    a tuple for aggregates and vectors, whose items are Constants or (for pointer items)
    the GlobalVariable or Function they point to. A vector ``splat`` is an aggregate of
    equal items; constant expressions are ConstantExpr (kind ``expr``)."""
    type: Type
    value: object = None
    kind: str = "scalar"  # scalar | null | undef | poison | zero | aggregate
    name: str = ""

    def ref(self) -> str:
        if self.kind == "scalar":
            if isinstance(self.value, str):
                return self.value
            if self.type.is_float:
                return repr(float(self.value))
            if self.type == i1:
                return "true" if self.value else "false"
            return str(int(self.value))
        if self.kind == "null":
            return "null"
        if self.kind == "zero":
            return "zeroinitializer"
        if self.kind in ("undef", "poison"):
            return self.kind
        items = ", ".join(f"{c.type} {c.ref()}" for c in self.value)
        if isinstance(self.type, VectorType):
            return f"<{items}>"
        if isinstance(self.type, StructType):
            return f"<{{ {items} }}>" if self.type.packed else f"{{ {items} }}"
        return f"[{items}]"


@dataclass(eq=False)
class ConstantExpr(Constant):
    """A constant expression: ``getelementptr (i8, ptr @g, i64 8)``, ``ptrtoint (ptr @g to i64)``,
    ``sub (i64 ..., i64 ...)``. ``opcode`` is LLVM's (a GEP, a cast or a binary operator),
    ``operands`` are Constants, GlobalVariables or Functions; ``element_type`` is a GEP's
    source element type. It is a Constant (kind ``expr``): its value is fixed at link time,
    though (through a global) it may address memory."""
    kind: str = "expr"
    opcode: str = ""
    operands: tuple[Value, ...] = ()
    element_type: Type | None = None
    flags: frozenset[str] = frozenset()

    def ref(self) -> str:
        typed = ", ".join(f"{o.type} {o.ref()}" for o in self.operands)
        # LLVM's order: the wrap flags, then ``inrange(a, b)`` (sorting would put it before ``nuw``)
        flags = "".join(f" {f}" for f in sorted(self.flags, key=lambda f: (f.startswith("inrange"), f)))
        if self.opcode == "getelementptr":
            return f"getelementptr{flags} ({self.element_type}, {typed})"
        if self.opcode in CAST_OPCODES:
            return f"{self.opcode} ({typed} to {self.type})"
        return f"{self.opcode}{flags} ({typed})"


@dataclass(eq=False)
class MetadataValue(Constant):
    """A metadata argument of a call, kept as LLVM spelled it (``!3``, ``!"round.dynamic"``);
    numbered nodes are the source module's and mean nothing outside it. A Constant (kind
    ``metadata``): it carries no derivative and passes through copies unchanged."""
    type: Type = MetadataType()
    kind: str = "metadata"
    text: str = ""

    def ref(self) -> str:
        return self.text


@dataclass(eq=False)
class InlineAsm(Constant):
    """An inline-assembly callee, kept as LLVM spelled it (``asm sideeffect "", "~{memory}"``).
    A Constant (kind ``asm``) so copies of the call keep it; no derivative rule matches it."""
    type: Type = PointerType(0)
    kind: str = "asm"
    text: str = ""

    def ref(self) -> str:
        return self.text


CAST_OPCODES = frozenset({"trunc", "zext", "sext", "fptrunc", "fpext", "fptoui", "fptosi", "uitofp", "sitofp",
                          "ptrtoint", "inttoptr", "bitcast", "addrspacecast"})


def const(type_: Type, value) -> Constant:
    """A scalar constant of ``type_`` (floats for float types, ints otherwise)."""
    return Constant(type_, float(value) if type_.is_float else int(value))




@dataclass(eq=False)
class Argument(Value):
    type: Type
    name: str
    index: int
    attributes: set[str] = field(default_factory=set)  # noalias, readonly, nocapture, ...


@dataclass(eq=False)
class GlobalVariable(Value):
    name: str
    value_type: Type
    initializer: Constant | None = None
    constant: bool = False
    addrspace: int = 0
    linkage: str = "internal"
    align: int | None = None     # vectorized code may rely on it
    section: str = ""
    thread_local: str = ""       # "", "thread_local", "thread_local(initialexec)", ...

    @property
    def type(self) -> Type:  # type: ignore[override]
        return PointerType(self.addrspace)

    def ref(self) -> str:
        return f"@{self.name}"


@dataclass(frozen=True)
class SourceLocation:
    filename: str
    line: int
    col: int = 0

    def __str__(self) -> str:
        return f"{self.filename}:{self.line}"


@dataclass(eq=False)
class Instruction(Value):
    """One SSA instruction. ``opcode`` is LLVM's name (fadd, icmp, getelementptr, call, ...).

    Opcode-specific data lives in named fields instead of subclasses, so rules and passes
    can pattern-match on ``opcode`` alone:
      predicate     icmp/fcmp condition (``slt``, ``olt``, ...)
      blocks        phi: incoming blocks (parallel to operands); br: [dest] or [then, else];
                    switch: [default, case blocks...] with operands [cond, case values...]
      callee        call, invoke: the Function (or pointer Value) called; operands are the arguments
                    (invoke: blocks are [normal, unwind])
                    landingpad: operands are the clause values, ``op`` their kinds space-separated
                    (``catch filter``), flag ``cleanup``; resume: the operand is the exception
      element_type  getelementptr source element type; alloca allocated type; load: loaded type == type;
                    call: the FunctionType called (needed for indirect calls, vararg callees)
      op            atomicrmw operation (add, fadd, xchg, max, ...); cast kind is the opcode itself
      ordering      atomic ordering (monotonic, seq_cst, ...)
      flags         fast-math / nuw / nsw / inbounds / exact / volatile, as strings
      indices       extractvalue / insertvalue constant indices
      align         alignment of load/store/alloca in bytes (None: natural)
    """
    opcode: str
    type: Type
    operands: list[Value] = field(default_factory=list)
    name: str = ""
    predicate: str | None = None
    blocks: list["Block"] = field(default_factory=list)
    callee: Value | None = None
    element_type: Type | None = None
    op: str | None = None
    ordering: str | None = None
    flags: set[str] = field(default_factory=set)
    indices: tuple[int, ...] = ()
    align: int | None = None
    location: SourceLocation | None = None
    parent: "Block | None" = None

    @property
    def is_terminator(self) -> bool:
        return self.opcode in TERMINATORS

    def __repr__(self) -> str:  # short and safe (no recursion through blocks)
        return f"<{self.opcode} %{self.name or '?'}: {self.type}>"


TERMINATORS = frozenset({"br", "switch", "ret", "unreachable", "invoke", "resume"})


@dataclass(eq=False)
class Block:
    name: str
    instructions: list[Instruction] = field(default_factory=list)
    parent: "Function | None" = None

    @property
    def terminator(self) -> Instruction | None:
        if self.instructions and self.instructions[-1].is_terminator:
            return self.instructions[-1]
        return None

    @property
    def successors(self) -> list["Block"]:
        term = self.terminator
        return list(term.blocks) if term is not None else []

    @property
    def phis(self) -> list[Instruction]:
        return [i for i in self.instructions if i.opcode == "phi"]

    def append(self, inst: Instruction) -> Instruction:
        inst.parent = self
        self.instructions.append(inst)
        return inst

    def insert(self, index: int, inst: Instruction) -> Instruction:
        inst.parent = self
        self.instructions.insert(index, inst)
        return inst

    def __repr__(self) -> str:
        return f"<block {self.name}>"


@dataclass(eq=False)
class Function(Value):
    name: str
    function_type: FunctionType
    args: list[Argument] = field(default_factory=list)
    blocks: list[Block] = field(default_factory=list)
    linkage: str = "external"
    calling_convention: str = ""        # "" (C), "ptx_kernel", "amdgpu_kernel"
    attributes: set[str] = field(default_factory=set)  # alwaysinline, nounwind, ...
    personality: Value | None = None   # the exception personality (functions with landingpads)
    parent: "Module | None" = None

    @property
    def type(self) -> Type:  # type: ignore[override]
        return ptr

    @property
    def return_type(self) -> Type:
        return self.function_type.return_type

    @property
    def is_declaration(self) -> bool:
        return not self.blocks

    @property
    def entry(self) -> Block:
        return self.blocks[0]

    def ref(self) -> str:
        return f"@{self.name}"

    def instructions(self) -> Iterator[Instruction]:
        for block in self.blocks:
            yield from block.instructions

    def add_block(self, name: str) -> Block:
        block = Block(self._unique_block_name(name), parent=self)
        self.blocks.append(block)
        return block

    def fresh_name(self, base: str) -> str:
        """A value name not yet used in this function (``base``, ``base.1``, ...)."""
        taken = self.__dict__.setdefault("_names", set())
        if not taken:
            taken.update(a.name for a in self.args)
            taken.update(i.name for i in self.instructions() if i.name)
        suffix = self.__dict__.setdefault("_next_suffix", {})
        candidate, k = base, suffix.get(base, 0)
        if k:
            candidate = f"{base}.{k}"
        while candidate in taken:        # resumes where the last call for ``base`` stopped: O(1) amortised
            k += 1
            candidate = f"{base}.{k}"
        suffix[base] = k + 1
        taken.add(candidate)
        return candidate

    def _unique_block_name(self, name: str) -> str:
        taken = {b.name for b in self.blocks}
        candidate, k = name, 0
        while candidate in taken:
            k += 1
            candidate = f"{name}.{k}"
        return candidate

    def predecessors(self) -> dict[Block, list[Block]]:
        preds: dict[Block, list[Block]] = {b: [] for b in self.blocks}
        for block in self.blocks:
            for succ in block.successors:
                if block not in preds[succ]:
                    preds[succ].append(block)
        return preds

    def users(self) -> dict[Value, list[Instruction]]:
        uses: dict[Value, list[Instruction]] = {}
        for inst in self.instructions():
            for operand in inst.operands:
                uses.setdefault(operand, []).append(inst)
        return uses

    def __repr__(self) -> str:
        return f"<function @{self.name}: {self.function_type}>"


@dataclass(eq=False)
class Module:
    name: str = "module"
    functions: dict[str, Function] = field(default_factory=dict)
    globals: dict[str, GlobalVariable] = field(default_factory=dict)
    triple: str = ""
    data_layout: str = ""

    def add_function(self, fn: Function) -> Function:
        if fn.name in self.functions:
            raise ValueError(f"function @{fn.name} already defined in module {self.name}")
        fn.parent = self
        self.functions[fn.name] = fn
        return fn

    def get_or_declare(self, name: str, function_type: FunctionType) -> Function:
        """The function called ``name``, declaring it when absent (math intrinsics, libm)."""
        fn = self.functions.get(name)
        if fn is None:
            fn = self.add_function(Function(name, function_type,
                                            [Argument(t, f"a{i}", i) for i, t in enumerate(function_type.params)]))
        return fn

    def __getitem__(self, name: str) -> Function:
        return self.functions[name]


def type_suffix(t: Type) -> str:
    """The overload suffix LLVM intrinsics use for ``t``: f32, f64, f16, v4f32."""
    if isinstance(t, VectorType):
        return f"v{t.count}{type_suffix(t.element)}"
    if isinstance(t, FloatType):
        return {"half": "f16", "bfloat": "bf16", "float": "f32", "double": "f64", "x86_fp80": "f80",
                "fp128": "f128", "ppc_fp128": "ppcf128"}[t.kind]
    return str(t)
