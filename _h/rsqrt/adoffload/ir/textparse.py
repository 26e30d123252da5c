"""Small parsers for the pieces of LLVM IR text that llvmlite.binding gives no accessor for.

llvmlite.binding exposes opcodes, operands and types, but not e.g. a GEP's source element
type, fast-math flags, comparison predicates, switch case values or global initializers.
Those are read back from the printed instruction, with the tiny recursive-descent parsers
below (types, constants, leading keyword flags).
"""
from __future__ import annotations

import re
import struct
from typing import Callable

from .core import (CAST_OPCODES, ArrayType, Constant, ConstantExpr, FloatType, IntType, LabelType, MetadataType,
                   PointerType,
                   StructType, Type, Value, VectorType, VoidType, FunctionType, f16, f32, f64)
from ..errors import IRError

_FLOAT_NAMES = {"half": f16, "bfloat": FloatType("bfloat"), "float": f32, "double": f64,
                "x86_fp80": FloatType("x86_fp80"), "fp128": FloatType("fp128"), "ppc_fp128": FloatType("ppc_fp128")}
WIDE_FLOATS = frozenset({"x86_fp80", "fp128", "ppc_fp128"})   # constants kept as LLVM's hex literal
_NUMBER = re.compile(r"-?(?:0x[HRKLMhrklm]?[0-9A-Fa-f]+|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)|true|false")
_WORD = re.compile(r"[A-Za-z_$.][\w$.\-]*|\d+|\"(?:[^\"\\]|\\.)*\"")

# Keywords that may sit between an opcode and its first type: fast-math, wrap, exactness, GEP
# and memory flags. Kept as instruction ``flags``.
FLAG_WORDS = frozenset({
    "fast", "nnan", "ninf", "nsz", "arcp", "contract", "afn", "reassoc",
    "nuw", "nsw", "exact", "disjoint", "nneg", "samesign", "inbounds", "inrange",
    "volatile", "tail", "musttail", "notail",
})
FAST_MATH = frozenset({"fast", "nnan", "ninf", "nsz", "arcp", "contract", "afn", "reassoc"})

StructResolver = Callable[[str], Type]


class Cursor:
    """A position in a string with the few scanning helpers the parsers need."""

    def __init__(self, text: str, pos: int = 0):
        self.text, self.pos = text, pos

    def skip_space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in " \t\n\r":
            self.pos += 1

    def peek(self, s: str) -> bool:
        self.skip_space()
        return self.text.startswith(s, self.pos)

    def eat(self, s: str) -> bool:
        if self.peek(s):
            self.pos += len(s)
            return True
        return False

    def expect(self, s: str) -> None:
        if not self.eat(s):
            raise IRError(f"expected {s!r} at column {self.pos} of: {self.text.strip()}")

    def word(self) -> str:
        self.skip_space()
        m = _WORD.match(self.text, self.pos)
        if not m:
            return ""
        self.pos = m.end()
        return m.group(0)

    def number(self) -> str:
        self.skip_space()
        m = _NUMBER.match(self.text, self.pos)
        if not m:
            raise IRError(f"expected a number at column {self.pos} of: {self.text.strip()[:200]}")
        self.pos = m.end()
        return m.group(0)

    def peek_word(self) -> str:
        saved = self.pos
        w = self.word()
        self.pos = saved
        return w

    def rest(self) -> str:
        return self.text[self.pos:]


def parse_type(cur: Cursor, resolve_struct: StructResolver | None = None) -> Type:
    """Parse one LLVM type at the cursor (function types only as ``ret (params)``)."""
    cur.skip_space()
    base = _parse_base_type(cur, resolve_struct)
    if cur.peek("("):  # a function type: ret (params...)
        cur.expect("(")
        params: list[Type] = []
        vararg = False
        while not cur.eat(")"):
            if cur.eat("..."):
                vararg = True
                continue
            params.append(parse_type(cur, resolve_struct))
            cur.eat(",")
        return FunctionType(base, tuple(params), vararg)
    return base


def _parse_base_type(cur: Cursor, resolve_struct: StructResolver | None) -> Type:
    if cur.eat("<{"):
        return StructType(_type_list(cur, "}>", resolve_struct), packed=True)
    if cur.eat("{"):
        return StructType(_type_list(cur, "}", resolve_struct))
    for opener, closer, cls in (("<", ">", VectorType), ("[", "]", ArrayType)):
        if cur.eat(opener):
            cur.eat("vscale x")
            count = int(cur.word())
            cur.expect("x")
            elem = parse_type(cur, resolve_struct)
            cur.expect(closer)
            return cls(elem, count)
    if cur.peek("%"):
        cur.pos += 1
        name = cur.word()
        if resolve_struct is None:
            raise IRError(f"named struct type %{name} cannot be resolved here")
        return resolve_struct(name)
    word = cur.word()
    if word in _FLOAT_NAMES:
        return _FLOAT_NAMES[word]
    if word == "void":
        return VoidType()
    if word == "label":
        return LabelType()
    if word == "metadata":
        return MetadataType()
    if word == "ptr":
        if cur.eat("addrspace("):
            space = int(cur.word())
            cur.expect(")")
            return PointerType(space)
        return PointerType(0)
    if re.fullmatch(r"i\d+", word):
        return IntType(int(word[1:]))
    raise IRError(f"unsupported LLVM type {word!r} in: {cur.text.strip()}")


def starts_type(cur: Cursor) -> bool:
    """Whether a type starts at the cursor (as opposed to an attribute or keyword)."""
    if cur.peek("{") or cur.peek("<") or cur.peek("[") or cur.peek("%"):
        return True
    word = cur.peek_word()
    return word in _FLOAT_NAMES or word in ("void", "ptr", "label", "metadata") or bool(re.fullmatch(r"i\d+", word))


def _type_list(cur: Cursor, closer: str, resolve_struct) -> tuple[Type, ...]:
    items: list[Type] = []
    while not cur.eat(closer):
        items.append(parse_type(cur, resolve_struct))
        cur.eat(",")
    return tuple(items)


def type_from_string(text: str, resolve_struct: StructResolver | None = None) -> Type:
    return parse_type(Cursor(text), resolve_struct)


# ----------------------------------------------------------------------------- constants

def parse_float_literal(token: str, type_: Type) -> float:
    """A float literal as LLVM prints it: decimal, 0x<double bits>, 0xH<half>, 0xR<bfloat>."""
    sign = -1.0 if token.startswith("-") else 1.0
    token = token.lstrip("-")
    if token.startswith(("0xH", "0xh")):
        return sign * struct.unpack("<e", int(token[3:], 16).to_bytes(2, "little"))[0]
    if token.startswith(("0xR", "0xr")):
        return sign * struct.unpack("<f", (int(token[3:], 16) << 16).to_bytes(4, "little"))[0]
    if token.startswith("0x"):
        return sign * struct.unpack("<d", int(token[2:], 16).to_bytes(8, "little"))[0]
    return sign * float(token)


GlobalResolver = Callable[[str], Value]
_BINARY_EXPR = frozenset({"add", "sub", "mul", "shl", "lshr", "ashr", "and", "or", "xor"})
_UNSUPPORTED_EXPR = ("blockaddress", "dso_local_equivalent", "no_cfi", "ptrauth")


def parse_constant(cur: Cursor, type_: Type, resolve_struct: StructResolver | None = None,
                   resolve_global: GlobalResolver | None = None) -> Constant | Value:
    """Parse the constant of a known ``type_`` at the cursor (the type itself already consumed).

    ``@name`` gives the GlobalVariable or Function from ``resolve_global``; constant
    expressions give a ConstantExpr; ``splat (T v)`` gives an aggregate of equal items."""
    cur.skip_space()
    for word, kind in (("zeroinitializer", "zero"), ("undef", "undef"), ("poison", "poison"),
                       ("null", "null")):
        if cur.peek(word) and not _WORD.match(cur.text, cur.pos + len(word)):
            cur.pos += len(word)
            return Constant(type_, None, kind)
    if cur.peek("@"):
        cur.pos += 1
        name = cur.word().strip('"')
        if resolve_global is None:
            raise IRError(f"global @{name} cannot be resolved here: {cur.text.strip()[:200]}")
        return resolve_global(name)
    if cur.peek('c"'):
        cur.pos += 1
        literal = cur.word()[1:-1]
        data = _unescape_c_string(literal)
        elem = type_.element if isinstance(type_, ArrayType) else IntType(8)
        return Constant(type_, tuple(Constant(elem, b) for b in data), "aggregate")
    for opener, closer in (("<{", "}>"), ("{", "}"), ("[", "]"), ("<", ">")):
        if cur.eat(opener):
            items = []
            while not cur.eat(closer):
                items.append(parse_typed_constant(cur, resolve_struct, resolve_global))
                cur.eat(",")
            return Constant(type_, tuple(items), "aggregate")
    word = cur.peek_word()
    if word and (word[0].isalpha() and word not in ("true", "false")):
        return _constant_expression(cur, type_, resolve_struct, resolve_global)
    if not (type_.is_float or isinstance(type_, IntType)):
        raise IRError(f"unsupported constant of type {type_} at column {cur.pos} of: {cur.text.strip()[:200]}")
    token = cur.number()
    if type_.is_float and type_.kind in WIDE_FLOATS:
        return Constant(type_, token)
    if type_.is_float:
        return Constant(type_, parse_float_literal(token, type_))
    if token in ("true", "false"):
        return Constant(type_, int(token == "true"))
    return Constant(type_, int(token))


def parse_typed_constant(cur: Cursor, resolve_struct: StructResolver | None = None,
                         resolve_global: GlobalResolver | None = None) -> Constant | Value:
    """A ``type value`` pair (an aggregate item, a constant-expression operand)."""
    item_type = parse_type(cur, resolve_struct)
    return parse_constant(cur, item_type, resolve_struct, resolve_global)


def _constant_expression(cur: Cursor, type_: Type, resolve_struct, resolve_global) -> Constant:
    """``splat (...)``, ``getelementptr [flags] (T, ...)``, ``<cast> (T v to T)``, ``<binop> [flags] (...)``."""
    start = cur.pos
    opcode = cur.word()
    where = f"{opcode!r} at column {start} of: {cur.text.strip()[:200]}"
    if opcode in _UNSUPPORTED_EXPR:
        raise IRError(f"unsupported constant expression {where}")
    flags = set()
    while True:
        if cur.peek("inrange("):           # before the flag words: "inrange" is one of them (GEP operands)
            cur.expect("inrange(")
            flags.add("inrange(" + cur.text[cur.pos:cur.text.index(")", cur.pos)] + ")")
            cur.pos = cur.text.index(")", cur.pos) + 1
        elif cur.peek_word() in FLAG_WORDS | {"nusw"}:
            flags.add(cur.word())
        else:
            break
    if not cur.eat("("):
        raise IRError(f"unsupported constant {where}")
    if opcode == "splat":
        if not isinstance(type_, VectorType):
            raise IRError(f"splat of non-vector type {type_} {where}")
        item = parse_typed_constant(cur, resolve_struct, resolve_global)
        cur.expect(")")
        return Constant(type_, (item,) * type_.count, "aggregate")
    if opcode == "getelementptr":
        element = parse_type(cur, resolve_struct)
        operands = []
        while cur.eat(","):
            operands.append(parse_typed_constant(cur, resolve_struct, resolve_global))
        cur.expect(")")
        return ConstantExpr(type_, opcode="getelementptr", operands=tuple(operands), element_type=element,
                            flags=frozenset(flags))
    if opcode in CAST_OPCODES:
        operand = parse_typed_constant(cur, resolve_struct, resolve_global)
        if cur.word() != "to":
            raise IRError(f"expected 'to' in the cast {where}")
        target = parse_type(cur, resolve_struct)
        cur.expect(")")
        if target != type_:
            raise IRError(f"cast to {target} where {type_} was expected: {where}")
        return ConstantExpr(type_, opcode=opcode, operands=(operand,))
    if opcode in _BINARY_EXPR:
        lhs = parse_typed_constant(cur, resolve_struct, resolve_global)
        cur.expect(",")
        rhs = parse_typed_constant(cur, resolve_struct, resolve_global)
        cur.expect(")")
        return ConstantExpr(type_, opcode=opcode, operands=(lhs, rhs), flags=frozenset(flags))
    raise IRError(f"unsupported constant expression {where}")


def _unescape_c_string(literal: str) -> bytes:
    out = bytearray()
    i = 0
    while i < len(literal):
        if literal[i] == "\\" and literal[i + 1] == "\\":
            out.append(ord("\\"))
            i += 2
        elif literal[i] == "\\":
            out.append(int(literal[i + 1:i + 3], 16))
            i += 3
        else:
            out += literal[i].encode()
            i += 1
    return bytes(out)


# ----------------------------------------------------------------------------- instructions

def instruction_body(text: str) -> Cursor:
    """A cursor placed just after the opcode of a printed instruction (``%x = fadd ...``)."""
    line = text.strip()
    m = re.match(r'(%[-\w$.]+|%"[^"]*")\s*=\s*', line)
    cur = Cursor(line, m.end() if m else 0)
    while cur.peek_word() in ("tail", "musttail", "notail"):
        cur.word()
    cur.word()  # the opcode
    return cur


def leading_flags(cur: Cursor) -> set[str]:
    """Consume the keyword flags following the opcode (``fast``, ``nuw``, ``inbounds``...)."""
    flags = set()
    while True:
        word = cur.peek_word()
        if word in FLAG_WORDS:
            cur.word()
            flags.add(word)
        else:
            return flags


def metadata_ref(text: str, kind: str) -> int | None:
    """The metadata node number attached as ``!kind !N`` in a printed instruction."""
    m = re.search(r"!" + re.escape(kind) + r"\s+!(\d+)", text)
    return int(m.group(1)) if m else None


def align_of(text: str) -> int | None:
    m = re.search(r",\s*align\s+(\d+)", text)
    return int(m.group(1)) if m else None


def syncscope_of(text: str) -> str | None:
    m = re.search(r'syncscope\("([^"]*)"\)', text)
    return m.group(1) if m else None


ORDERINGS = ("unordered", "monotonic", "acquire", "release", "acq_rel", "seq_cst")


def orderings_of(text: str) -> list[str]:
    return re.findall(r"\b(" + "|".join(ORDERINGS) + r")\b", text)


def split_attributes(spelled: str) -> set[str]:
    """Split an attribute group as printed (``nounwind memory(argmem: read) "a"="b"``)."""
    items, depth, quoted, start = [], 0, False, 0
    for k, ch in enumerate(spelled + " "):
        if ch == '"':
            quoted = not quoted
        elif not quoted and ch == "(":
            depth += 1
        elif not quoted and ch == ")":
            depth -= 1
        elif not quoted and depth == 0 and ch == " ":
            if spelled[start:k].strip():
                items.append(spelled[start:k].strip())
            start = k + 1
    # "align 8" and "dereferenceable 8"-like pairs: a bare number belongs to the word before it
    merged: list[str] = []
    for item in items:
        if item.isdigit() and merged:
            merged[-1] += f" {item}"
        else:
            merged.append(item)
    return set(merged)
