"""ir.core Module -> LLVM IR text, built through llvmlite.ir.

Built in phases: types and globals, function declarations, then bodies. Blocks are filled
in reverse post-order so every non-phi operand exists before its use; phis are created
empty and their incoming values filled once every block is built. Opcodes map to builder
methods through tables plus one ``match``; llvmlite.ir has no spelling for a few LLVM 22
forms (syncscope, volatile, GEP ``nuw``, weak cmpxchg, freeze), which ``_Spelled``
prints directly.
"""
from __future__ import annotations

import struct

from llvmlite import ir as llir

from . import core
from ..errors import IRError
from .cfg import reachable_blocks

_FLOATS = {"half": llir.HalfType, "float": llir.FloatType, "double": llir.DoubleType}
_BINARY = {"add": "add", "sub": "sub", "mul": "mul", "sdiv": "sdiv", "udiv": "udiv", "srem": "srem",
           "urem": "urem", "shl": "shl", "lshr": "lshr", "ashr": "ashr", "and": "and_", "or": "or_",
           "xor": "xor", "fadd": "fadd", "fsub": "fsub", "fmul": "fmul", "fdiv": "fdiv", "frem": "frem"}
_CASTS = frozenset({"trunc", "zext", "sext", "fptrunc", "fpext", "fptoui", "fptosi", "uitofp", "sitofp",
                    "ptrtoint", "inttoptr", "bitcast", "addrspacecast"})
# Flags llvmlite.ir can print after these opcodes; the others (zext nneg, icmp samesign,
# trunc nuw) only permit more optimization, so dropping them keeps the meaning.
_BINARY_FLAGS = frozenset({"nuw", "nsw", "exact", "disjoint"}) | frozenset(
    {"fast", "nnan", "ninf", "nsz", "arcp", "contract", "afn", "reassoc"})
_FAST_MATH = frozenset({"fast", "nnan", "ninf", "nsz", "arcp", "contract", "afn", "reassoc"})


def export_module(module: core.Module) -> str:
    """LLVM IR text for ``module`` (parseable by llvmlite.binding / LLVM 22)."""
    return str(to_llvmlite(module))


def to_llvmlite(module: core.Module) -> llir.Module:
    out = llir.Module(name=module.name)
    out.triple = module.triple or ""
    out.data_layout = module.data_layout or ""
    exporter = _Exporter(out)
    for gv in module.globals.values():
        exporter.declare_global(gv)
    for fn in module.functions.values():
        exporter.declare_function(fn)
    for gv in module.globals.values():
        exporter.define_global(gv)
    for fn in module.functions.values():  # a personality matters only to landing pads
        if fn.personality is not None and any(i.opcode == "landingpad" for i in fn.instructions()):
            exporter.values[id(fn)].personality = (f"{lltype(fn.personality.type)} "
                                                   f"{_spell(fn.personality, exporter.reference)}")
    for fn in module.functions.values():
        if not fn.is_declaration:
            exporter.build_body(fn)
    return out


def lltype(t: core.Type) -> llir.Type:
    match t:
        case core.IntType(bits=bits):
            return llir.IntType(bits)
        case core.FloatType(kind=kind) if kind in _FLOATS:
            return _FLOATS[kind]()
        case core.FloatType(kind=kind):
            return _NamedType(kind)
        case core.PointerType(addrspace=space):
            return llir.PointerType(addrspace=space)
        case core.VectorType(element=e, count=n):
            return llir.VectorType(lltype(e), n)
        case core.ArrayType(element=e, count=n):
            return llir.ArrayType(lltype(e), n)
        case core.StructType(elements=elements, packed=packed):
            return llir.LiteralStructType([lltype(e) for e in elements], packed=packed)
        case core.FunctionType(return_type=r, params=params, vararg=vararg):
            return llir.FunctionType(lltype(r), [lltype(p) for p in params], var_arg=vararg)
        case core.VoidType():
            return llir.VoidType()
        case core.LabelType():
            return llir.LabelType()
        case core.MetadataType():
            return llir.MetaDataType()
        case _:
            raise IRError(f"cannot export type {t} to LLVM")


def llconstant(c: core.Constant, reference=None) -> llir.Constant:
    """The llvmlite constant for ``c``. Constants that name globals or functions (pointer items,
    constant expressions) are spelled as text; ``reference(value)`` gives a global's ``@name``."""
    t = lltype(c.type)
    if _names_globals(c):
        if reference is None:
            raise IRError(f"constant {c.ref()[:120]} names a global; it needs the module's globals")
        return _Literal(t, _spell(c, reference))
    match c.kind:
        case "scalar" if isinstance(c.value, str):
            return _Literal(t, c.ref())
        case "scalar" if isinstance(t, _NamedType):
            return _Literal(t, wide_float_literal(c.type.kind, float(c.value)))
        case "scalar":
            return llir.Constant(t, float(c.value) if c.type.is_float else int(c.value))
        case "null":
            return llir.Constant(t, None)
        case "undef" | "poison" | "zero":
            return _Literal(t, "zeroinitializer" if c.kind == "zero" else c.kind)
        case "aggregate":
            return llir.Constant(t, [llconstant(item) for item in c.value])
        case _:
            raise IRError(f"cannot export constant of kind {c.kind!r} ({c.type})")


def wide_float_literal(kind: str, value: float) -> str:
    """LLVM's hex spelling of a Python float as an ``x86_fp80`` (``0xK``), ``fp128`` (``0xL``, low
    64 bits first) or ``bfloat`` (``0xR``) constant: LLVM reads a decimal literal only for half,
    float and double (the engine makes such constants: a long double's zero tangent, its 1.0)."""
    bits = struct.unpack("<Q", struct.pack("<d", value))[0]
    sign, exponent, fraction = bits >> 63, (bits >> 52) & 0x7FF, bits & ((1 << 52) - 1)
    if kind == "bfloat":
        single = struct.unpack("<I", struct.pack("<f", value))[0]
        if single & 0xFFFF:
            raise IRError(f"cannot spell {value!r} exactly as a bfloat constant")
        return f"0xR{single >> 16:04X}"
    if exponent == 0 and fraction:            # a subnormal double is a normal wide float
        shift = 53 - fraction.bit_length()
        exponent, fraction = 1 - shift, (fraction << shift) & ((1 << 52) - 1)
    if kind == "x86_fp80":
        if exponent == 0x7FF:
            wide_exponent, mantissa = 0x7FFF, (1 << 63) | (fraction << 11)
        elif exponent == 0 and not fraction:
            wide_exponent, mantissa = 0, 0
        else:
            wide_exponent, mantissa = exponent - 1023 + 16383, (1 << 63) | (fraction << 11)
        return f"0xK{(sign << 15 | wide_exponent):04X}{mantissa:016X}"
    if kind == "fp128":
        if exponent == 0x7FF:
            wide_exponent = 0x7FFF
        elif exponent == 0 and not fraction:
            wide_exponent = 0
        else:
            wide_exponent = exponent - 1023 + 16383
        wide = (sign << 127) | (wide_exponent << 112) | (fraction << 60)
        return f"0xL{wide & ((1 << 64) - 1):016X}{wide >> 64:016X}"
    raise IRError(f"cannot export a {kind} constant from the float {value!r}")


def _names_globals(c: core.Value) -> bool:
    if isinstance(c, (core.GlobalVariable, core.Function, core.ConstantExpr)):
        return True
    return c.kind == "aggregate" and any(_names_globals(item) for item in c.value)


def _spell(c: core.Value, reference) -> str:
    """LLVM text of a constant (without its type), globals spelled by ``reference``."""
    if isinstance(c, (core.GlobalVariable, core.Function)):
        return reference(c)
    typed = lambda v: f"{lltype(v.type)} {_spell(v, reference)}"  # noqa: E731
    if isinstance(c, core.ConstantExpr):
        # LLVM's order: the wrap flags, then ``inrange(a, b)`` (sorting would put it before ``nuw``)
        flags = "".join(f" {f}" for f in sorted(c.flags, key=lambda f: (f.startswith("inrange"), f)))
        operands = ", ".join(typed(o) for o in c.operands)
        if c.opcode == "getelementptr":
            return f"getelementptr{flags} ({lltype(c.element_type)}, {operands})"
        if c.opcode in core.CAST_OPCODES:
            return f"{c.opcode} ({operands} to {lltype(c.type)})"
        return f"{c.opcode}{flags} ({operands})"
    if c.kind == "aggregate":
        items = ", ".join(typed(item) for item in c.value)
        if isinstance(c.type, core.VectorType):
            return f"<{items}>"
        if isinstance(c.type, core.StructType):
            return f"<{{ {items} }}>" if c.type.packed else f"{{ {items} }}"
        return f"[{items}]"
    return llconstant(c).get_reference()


class _NamedType(llir.Type):
    """A type llvmlite.ir has no class for (bfloat, x86_fp80, fp128, ppc_fp128), printed by name."""

    def __init__(self, name: str):
        self.name = name

    def _to_string(self):
        return self.name

    def __eq__(self, other):
        return isinstance(other, _NamedType) and other.name == self.name

    def __hash__(self):
        return hash(self.name)


class _Function(llir.Function):
    """llvmlite.ir's Function plus the ``personality`` clause (functions with landing pads)."""

    personality = ""

    def descr_prototype(self, buf):
        super().descr_prototype(buf)
        if self.personality and self.blocks:
            buf[-1] = buf[-1].rstrip("\n") + f" personality {self.personality}\n"


class _Literal(llir.Constant):
    """A constant spelled by one keyword (poison, undef, zeroinitializer), for any type.
    (llvmlite.ir.Constant would expand it element-wise for vectors.)"""

    def __init__(self, typ: llir.Type, spelled: str):
        self.type, self.constant = typ, spelled

    def _to_string(self):
        return f"{self.type} {self.constant}"

    def _get_reference(self):
        return self.constant


class _Spelled(llir.Instruction):
    """An instruction printed by a function of itself (forms llvmlite.ir cannot spell)."""

    def __init__(self, parent, typ, opname, operands, name, spell):
        super().__init__(parent, typ, opname, list(operands), name=name)
        self.spell = spell

    @staticmethod
    def metadata(value: core.MetadataValue) -> llir.Constant:
        return _Literal(llir.MetaDataType(), value.text)

    def descr(self, buf):
        buf.append(self.spell(self) + self._stringify_metadata(leading_comma=True) + "\n")


def _insert(b: llir.IRBuilder, instruction: llir.Instruction) -> llir.Instruction:
    b._insert(instruction)  # llvmlite's own methods end this way too; it returns nothing
    return instruction


def _typed(v) -> str:
    return f"{v.type} {v.get_reference()}"


def _scope(inst: core.Instruction) -> str:
    scope = next((f.split("=", 1)[1] for f in inst.flags if f.startswith("syncscope=")), None)
    return f' syncscope("{scope}")' if scope is not None else ""


def _align(inst: core.Instruction) -> str:
    return f", align {inst.align}" if inst.align else ""


def _add_attribute(attributes: set, name: str) -> None:
    # llvmlite.ir accepts only a fixed, LLVM-14-era list of attribute names; LLVM 22 has many
    # more (memory(...), captures(...), string attributes). They are printed verbatim.
    set.add(attributes, name)


class _Exporter:
    def __init__(self, out: llir.Module):
        self.out = out
        self.values: dict[int, object] = {}
        self.locations: dict[core.SourceLocation, object] = {}

    # ---- module level
    def declare_global(self, gv: core.GlobalVariable) -> None:
        g = llir.GlobalVariable(self.out, lltype(gv.value_type), gv.name, addrspace=gv.addrspace)
        g.type = llir.PointerType(addrspace=gv.addrspace)  # llvmlite.ir would print a typed pointer
        g.global_constant = gv.constant
        g.linkage = "" if gv.linkage == "external" and gv.initializer is not None else gv.linkage
        g.align, g.section = gv.align, gv.section or None
        g.storage_class = gv.thread_local   # printed where LLVM expects thread_local
        self.values[id(gv)] = g

    def define_global(self, gv: core.GlobalVariable) -> None:
        """The initializer, once every global and function is declared (it may name them)."""
        if gv.initializer is not None:
            self.values[id(gv)].initializer = llconstant(gv.initializer, self.reference)

    def reference(self, v: core.Value) -> str:
        return self.values[id(v)].get_reference()

    def declare_function(self, fn: core.Function) -> None:
        f = _Function(self.out, lltype(fn.function_type), fn.name)
        f.linkage = "" if fn.linkage == "external" else fn.linkage
        f.calling_convention = fn.calling_convention
        for attribute in sorted(fn.attributes):
            _add_attribute(f.attributes, attribute)
        for arg, llarg in zip(fn.args, f.args):
            llarg.name = arg.name
            for attribute in sorted(arg.attributes):
                _add_attribute(llarg.attributes, attribute)
            self.values[id(arg)] = llarg
        self.values[id(fn)] = f

    def value(self, v: core.Value, user: core.Instruction):
        if isinstance(v, core.MetadataValue):
            return _Spelled.metadata(v)
        if isinstance(v, core.InlineAsm):
            return _Literal(llir.PointerType(), v.text)
        if isinstance(v, core.Constant):
            return llconstant(v, self.reference)
        found = self.values.get(id(v))
        if found is None:
            raise IRError(f"operand {v.ref()} of '{user.opcode} %{user.name}' is not defined before use "
                          f"in function @{user.parent.parent.name if user.parent else '?'}")
        return found

    def location(self, loc: core.SourceLocation):
        if loc not in self.locations:
            self.locations[loc] = self.out.add_metadata(
                [llir.MetaDataString(self.out, loc.filename), llir.Constant(llir.IntType(32), loc.line),
                 llir.Constant(llir.IntType(32), loc.col)])
        return self.locations[loc]

    # ---- bodies
    def build_body(self, fn: core.Function) -> None:
        f = self.values[id(fn)]
        for block in fn.blocks:
            self.values[id(block)] = f.append_basic_block(block.name)
        builder = llir.IRBuilder()
        phis = []
        for block in _reverse_post_order(fn):
            builder.position_at_end(self.values[id(block)])
            for inst in block.instructions:
                try:
                    result = self.emit(builder, inst)
                except (ValueError, TypeError, AssertionError) as exc:
                    raise IRError(f"cannot export '{inst.opcode} %{inst.name}' in @{fn.name}: {exc}") from None
                if inst.opcode == "phi":
                    phis.append((inst, result))
                if inst.location is not None and isinstance(result, llir.Instruction):
                    result.set_metadata("adoffload.loc", self.location(inst.location))
                self.values[id(inst)] = result
        for inst, phi in phis:
            for v, b in zip(inst.operands, inst.blocks):
                phi.add_incoming(self.value(v, inst), self.values[id(b)])

    def emit(self, b: llir.IRBuilder, inst: core.Instruction):
        ops = [] if inst.opcode == "phi" else [self.value(v, inst) for v in inst.operands]
        name, opcode, flags = inst.name, inst.opcode, sorted(inst.flags)
        fast = [f for f in flags if f in _FAST_MATH]
        match opcode:
            case _ if opcode in _BINARY:
                return getattr(b, _BINARY[opcode])(ops[0], ops[1], name,
                                                   flags=[f for f in flags if f in _BINARY_FLAGS])
            case _ if opcode in _CASTS:
                return getattr(b, opcode)(ops[0], lltype(inst.type), name)
            case "fneg":
                return b.fneg(ops[0], name, flags=fast)
            case "icmp":
                return _insert(b, llir.ICMPInstr(b.block, inst.predicate, ops[0], ops[1], name))
            case "fcmp":
                return _insert(b, llir.FCMPInstr(b.block, inst.predicate, ops[0], ops[1], name, flags=fast))
            case "select":
                return b.select(*ops, name=name, flags=fast)
            case "phi":
                return b.phi(lltype(inst.type), name, flags=fast)
            case "call" | "invoke":
                return self.emit_call(b, inst, ops, fast)
            case "landingpad":
                clauses = "".join(f" {kind} {_typed(o)}" for kind, o in zip(inst.op.split(), ops))
                cleanup = " cleanup" if "cleanup" in inst.flags else ""
                return _insert(b, _Spelled(b.block, lltype(inst.type), opcode, ops, name, lambda s: (
                    f"landingpad {lltype(inst.type)}{cleanup}{clauses}")))
            case "resume":
                return _insert(b, _Spelled(b.block, llir.VoidType(), opcode, ops, "", lambda s: (
                    f"resume {_typed(s.operands[0])}")))
            case "getelementptr":
                gep_flags = " ".join(f for f in ("inbounds", "nusw", "nuw") if f in inst.flags)
                etype = lltype(inst.element_type)
                return _insert(b, _Spelled(b.block, lltype(inst.type), opcode, ops, name, lambda s: (
                    f"getelementptr {gep_flags + ' ' if gep_flags else ''}{etype}, "
                    + ", ".join(_typed(o) for o in s.operands))))
            case "alloca":
                result = b.alloca(lltype(inst.element_type), ops[0] if ops else None, name)
                result.align = inst.align
                # llvmlite types the result [N x T]*; LLVM's is an opaque ptr, so a direct
                # store of an element into the alloca (no GEP) must not be refused.
                result.type = lltype(inst.type)
                return result
            case "load":
                return self.emit_load(b, inst, ops)
            case "store":
                return self.emit_store(b, inst, ops)
            case "atomicrmw":
                vol = " volatile" if "volatile" in inst.flags else ""
                return _insert(b, _Spelled(b.block, ops[1].type, opcode, ops, name, lambda s: (
                    f"atomicrmw{vol} {inst.op} {_typed(s.operands[0])}, {_typed(s.operands[1])}"
                    f"{_scope(inst)} {inst.ordering}{_align(inst)}")))
            case "cmpxchg":
                failure = next(f.split("=", 1)[1] for f in inst.flags if f.startswith("failure="))
                mods = "".join(f" {f}" for f in ("weak", "volatile") if f in inst.flags)
                return _insert(b, _Spelled(b.block, lltype(inst.type), opcode, ops, name, lambda s: (
                    f"cmpxchg{mods} " + ", ".join(_typed(o) for o in s.operands)
                    + f"{_scope(inst)} {inst.ordering} {failure}{_align(inst)}")))
            case "fence":
                return _insert(b, _Spelled(b.block, llir.VoidType(), opcode, [], "", lambda s: (
                    f"fence{_scope(inst)} {inst.ordering}")))
            case "freeze":
                return _insert(b, _Spelled(b.block, ops[0].type, opcode, ops, name, lambda s: (
                    f"freeze {_typed(s.operands[0])}")))
            case "extractvalue":
                return b.extract_value(ops[0], list(inst.indices), name)
            case "insertvalue":
                return b.insert_value(ops[0], ops[1], list(inst.indices), name)
            case "extractelement":
                return b.extract_element(ops[0], ops[1], name)
            case "insertelement":
                return b.insert_element(ops[0], ops[1], ops[2], name)
            case "shufflevector":
                mask = ", ".join("i32 poison" if k < 0 else f"i32 {k}" for k in inst.indices)
                return _insert(b, _Spelled(b.block, lltype(inst.type), opcode, ops, name, lambda s: (
                    f"shufflevector {_typed(s.operands[0])}, {_typed(s.operands[1])}, "
                    f"<{len(inst.indices)} x i32> <{mask}>")))
            case "br":
                target = [self.values[id(block)] for block in inst.blocks]
                return b.branch(target[0]) if not ops else b.cbranch(ops[0], target[0], target[1])
            case "switch":
                switch = b.switch(ops[0], self.values[id(inst.blocks[0])])
                for value, block in zip(ops[1:], inst.blocks[1:]):
                    switch.add_case(value, self.values[id(block)])
                return switch
            case "ret":
                return b.ret(ops[0]) if ops else b.ret_void()
            case "unreachable":
                return b.unreachable()
            case _:
                raise IRError(f"export has no rule for opcode '{opcode}' (instruction %{name})")

    def emit_call(self, b, inst, ops, fast):
        callee = inst.callee
        tail = next((f for f in ("tail", "musttail", "notail") if f in inst.flags), False)
        if isinstance(callee, core.Function) and callee.name == "llvm.experimental.noalias.scope.decl":
            return None  # an aliasing hint whose scope metadata (like all !noalias metadata) is not kept
        if (inst.opcode == "invoke" or not isinstance(callee, core.Function)
                or any(isinstance(o, core.MetadataValue) for o in inst.operands)):
            return self.emit_spelled_call(b, inst, ops, fast, tail)
        return b.call(self.values[id(callee)], ops, inst.name, cconv=callee.calling_convention or None,
                      tail=tail, fastmath=fast)

    def emit_spelled_call(self, b, inst, ops, fast, tail):
        """Calls llvmlite.ir cannot build: through a pointer, with metadata arguments, ``invoke``."""
        ftype = inst.element_type
        if ftype is None:
            ftype = (inst.callee.function_type if isinstance(inst.callee, core.Function)
                     else core.FunctionType(inst.type, tuple(o.type for o in inst.operands)))
        for o in inst.operands:
            if isinstance(o, core.MetadataValue) and o.text.startswith("!") and o.text[1:2].isdigit():
                raise IRError(f"call %{inst.name or '(void)'} to {inst.callee.ref()} takes metadata node "
                              f"{o.text} of the source module, which export does not carry")
        target = self.value(inst.callee, inst)
        cconv = getattr(inst.callee, "calling_convention", "") or next(
            (f[3:] for f in inst.flags if f.startswith("cc=")), "")
        words = " ".join(w for w in (tail or "", inst.opcode, *fast, cconv) if w)
        spelled_type = lltype(ftype) if ftype.vararg else lltype(ftype.return_type)
        name = inst.name if inst.type != core.void else ""
        args = ops
        unwind = ""
        if inst.opcode == "invoke":
            normal, landing = (self.values[id(block)] for block in inst.blocks)
            unwind = f" to label {normal.get_reference()} unwind label {landing.get_reference()}"
        return _insert(b, _Spelled(b.block, lltype(inst.type), inst.opcode, [*args, target], name, lambda s: (
            f"{words} {spelled_type} {s.operands[-1].get_reference()}("
            + ", ".join(_typed(o) for o in s.operands[:-1]) + ")" + unwind)))

    def emit_load(self, b, inst, ops):
        if not ({"volatile", "atomic"} & inst.flags):
            result = b.load(ops[0], inst.name, align=inst.align, typ=lltype(inst.type))
            return result
        atomic = " atomic" if "atomic" in inst.flags else ""
        vol = " volatile" if "volatile" in inst.flags else ""
        order = f"{_scope(inst)} {inst.ordering}" if atomic else ""
        typ = lltype(inst.type)
        return _insert(b, _Spelled(b.block, typ, "load", ops, inst.name, lambda s: (
            f"load{atomic}{vol} {typ}, {_typed(s.operands[0])}{order}{_align(inst)}")))

    def emit_store(self, b, inst, ops):
        if not ({"volatile", "atomic"} & inst.flags):
            return b.store(ops[0], ops[1], align=inst.align)
        atomic = " atomic" if "atomic" in inst.flags else ""
        vol = " volatile" if "volatile" in inst.flags else ""
        order = f"{_scope(inst)} {inst.ordering}" if atomic else ""
        return _insert(b, _Spelled(b.block, llir.VoidType(), "store", ops, "", lambda s: (
            f"store{atomic}{vol} {_typed(s.operands[0])}, {_typed(s.operands[1])}{order}{_align(inst)}")))


def _reverse_post_order(fn: core.Function) -> list[core.Block]:
    """Blocks in reverse post-order from the entry, then any unreachable blocks in layout order."""
    order = reachable_blocks(fn)
    reached = set(order)
    return order + [b for b in fn.blocks if b not in reached]
