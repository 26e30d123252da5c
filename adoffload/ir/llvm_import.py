"""LLVM IR (text or bitcode) -> ir.core Module, by walking llvmlite.binding's ValueRef API.

Where the binding has no accessor (GEP source element type, predicates, fast-math flags,
switch case values, atomic orderings, ``!adoffload.loc``) the printed instruction is read
back with ``textparse``. LLVM names are kept; unnamed values get fresh ``v<N>`` names.
"""
from __future__ import annotations

import collections
import ctypes
import hashlib
import re
import threading

import llvmlite.binding as llvm

from . import textparse as tp
from .core import (Argument, Block, Constant, Function, FunctionType, GlobalVariable, InlineAsm, Instruction,
                   IntType, MetadataValue, Module, SourceLocation, Type, Value)
from ..errors import IRError

UNSUPPORTED_OPCODES = frozenset({"callbr", "indirectbr", "va_arg",
                                 "catchswitch", "catchpad", "catchret", "cleanuppad", "cleanupret"})
CALLING_CONVENTIONS = ("ptx_kernel", "amdgpu_kernel", "spir_kernel", "fastcc", "coldcc", "ccc")
_LINKAGE_NAMES = {"linkonce_any": "linkonce", "weak_any": "weak"}
_LOC_NODE = re.compile(r'^!(\d+)\s*=\s*(?:distinct\s+)?!\{!"((?:[^"\\]|\\.)*)",\s*i32\s+(-?\d+),\s*i32\s+(-?\d+)\}',
                       re.M)
_DI_FILE = re.compile(r'^!(\d+) = (?:distinct )?!DIFile\(filename: "((?:[^"\\]|\\.)*)"', re.M)
_DI_SCOPE = re.compile(
    r'^!(\d+) = (?:distinct )?!DI(?:Subprogram|LexicalBlock|LexicalBlockFile)\([^\n]*?\bfile: !(\d+)', re.M)
_DI_LOCATION = re.compile(r'^!(\d+) = (?:distinct )?!DILocation\(line: (\d+)(?:, column: (\d+))?, scope: !(\d+)', re.M)
_GLOBAL_KIND = re.compile(r"(?:addrspace\((\d+)\)\s+)?(?:externally_initialized\s+)?\b(global|constant)\s")
_NAMED_TYPE = re.compile(r'%("[^"]*"|[-\w$.]+)')
_STRUCT_DEF = re.compile(r'^%("[^"]*"|[-\w$.]+)\s*=\s*type\s+(.*)$', re.M)


def parse_llvm(source: str | bytes) -> llvm.ModuleRef:
    """Parse LLVM IR text or bitcode with llvmlite, raising IRError with LLVM's message."""
    try:
        if isinstance(source, (bytes, bytearray)):
            module = llvm.parse_bitcode(bytes(source))
        else:
            module = llvm.parse_assembly(source)
        module.verify()
    except RuntimeError as exc:
        raise IRError(f"LLVM could not parse or verify the module:\n{exc}") from None
    return module


def import_module(source: str | bytes | llvm.ModuleRef, bodies=None) -> Module:
    """Import LLVM IR text, bitcode or a parsed llvmlite ModuleRef as an ir.core Module.
    ``bodies``: the names of the functions whose bodies to import (the others become declarations:
    for an analysis of those functions alone); None: all.

    Text and bitcode imports are remembered (``_IMPORTED``: a copy of the Module nobody is given, by
    the source's digest): importing the same source again copies that (``clone.clone_module``), some
    7x faster than walking llvmlite's values again, and every call gets objects of its own (callers
    mutate them: the AD adds its derivative to the module it is given). With ``bodies``, the full
    module is imported (or copied) and the other functions' bodies dropped, which is what importing
    those bodies alone gives; where the full import fails (a construct the other functions use that
    import refuses), the bodies alone are imported, unremembered."""
    if isinstance(source, llvm.ModuleRef):
        return _Importer(source).run(None if bodies is None else frozenset(bodies))
    key = hashlib.blake2b(source.encode() if isinstance(source, str) else bytes(source), digest_size=20).digest()
    with _IMPORTED_LOCK:
        kept = _IMPORTED.get(key)
        if kept is not None:
            _IMPORTED.move_to_end(key)
    module = _copied(kept[0]) if kept is not None else None
    if module is None:
        try:
            module = _Importer(parse_llvm(source)).run(None)
        except IRError:
            if bodies is None:
                raise
            return _Importer(parse_llvm(source)).run(frozenset(bodies))
        if kept is None:
            _remember(key, module, len(source))
    if bodies is not None:
        keep = frozenset(bodies)
        for fn in module.functions.values():
            if fn.name not in keep:
                fn.blocks = []
    return module


_IMPORTED: "collections.OrderedDict[bytes, tuple[Module, int]]" = collections.OrderedDict()
_IMPORTED_LOCK = threading.Lock()
_IMPORTED_LIMIT = 64 << 20          # characters of source kept (least recently used dropped first)
_IMPORTED_SIZE = [0]


def _copied(module: Module) -> Module | None:
    from .clone import clone_module
    try:
        return clone_module(module)
    except RecursionError:              # a constant nested beyond the interpreter's limit: import anew
        return None


def _remember(key: bytes, module: Module, size: int) -> None:
    """Keep a copy of ``module`` (made before the caller sees it, so unmutated) under ``key``."""
    kept = _copied(module)
    if kept is None:
        return
    with _IMPORTED_LOCK:
        if key in _IMPORTED:
            return
        _IMPORTED[key] = (kept, size)
        _IMPORTED_SIZE[0] += size
        while _IMPORTED_SIZE[0] > _IMPORTED_LIMIT and len(_IMPORTED) > 1:
            _IMPORTED_SIZE[0] -= _IMPORTED.popitem(last=False)[1][1]


def forget_imports() -> None:
    """Drop the remembered imports (tests; memory)."""
    with _IMPORTED_LOCK:
        _IMPORTED.clear()
        _IMPORTED_SIZE[0] = 0


def _address(ref: llvm.ValueRef) -> int:
    return ctypes.cast(ref._ptr, ctypes.c_void_p).value


def linkage_name(ref: llvm.ValueRef) -> str:
    name = ref.linkage.name
    return _LINKAGE_NAMES.get(name, name)


class _Importer:
    def __init__(self, llmod: llvm.ModuleRef):
        self.llmod = llmod
        _name_unnamed_globals(llmod)
        self.text = str(llmod)
        self.module = Module(name=llmod.name or "module", triple=llmod.triple, data_layout=llmod.data_layout)
        self.locations = {int(n): SourceLocation(f, int(line), int(col))
                          for n, f, line, col in _LOC_NODE.findall(self.text)}
        self.debug_locations = _debug_locations(self.text)
        self.struct_text = {name.strip('"'): body for name, body in _STRUCT_DEF.findall(self.text)}
        self.structs: dict[str, Type] = {}
        self.attribute_groups = dict(re.findall(r"^attributes #(\d+) = \{ (.*) \}$", self.text, re.M))
        self.values: dict[int, Value] = {}   # address of the LLVM value -> our value
        self.types: dict[int, Type] = {}     # address of the LLVM type -> our type

    # ---- types
    def resolve_struct(self, name: str) -> Type:
        name = name.strip('"')
        if name not in self.structs:
            body = self.struct_text.get(name)
            if body is None or body.strip() == "opaque":
                raise IRError(f"opaque or unknown struct type %{name}")
            self.structs[name] = tp.type_from_string(body, self.resolve_struct)
        return self.structs[name]

    def type_of(self, typeref) -> Type:
        # LLVM uniques types in their context, which outlives the module: one pointer, one type
        key = _address(typeref)
        found = self.types.get(key)
        if found is None:
            found = self.types[key] = tp.type_from_string(str(typeref), self.resolve_struct)
        return found

    # ---- module
    def run(self, bodies: frozenset | None = None) -> Module:
        globals_ = list(self.llmod.global_variables)
        for g in globals_:
            self.module.globals[g.name] = self.import_global(g)
        functions = list(self.llmod.functions)
        for f in functions:
            self.module.add_function(self.declare_function(f))
        for g in globals_:  # initializers and personalities may name any global or function
            self.import_initializer(g, self.module.globals[g.name])
        for f in functions:
            self.import_personality(f, self.module.functions[f.name])
        for f in functions:
            if not f.is_declaration and (bodies is None or f.name in bodies):
                self.import_body(f, self.module.functions[f.name])
        return self.module

    def import_global(self, g: llvm.ValueRef) -> GlobalVariable:
        text = str(g)
        value_type = self.type_of(g.global_value_type)
        m = _GLOBAL_KIND.search(text, text.find("=") + 1)   # not in the name (@constant)
        if m is None:
            raise IRError(f"cannot read global variable: {text[:200]}")
        gv = GlobalVariable(g.name, value_type, constant=m.group(2) == "constant",
                            addrspace=int(m.group(1) or 0), linkage=linkage_name(g))
        tls = re.search(r"\bthread_local(\(\w+\))?", text[:m.start()])
        gv.thread_local = tls.group(0) if tls else ""
        trailer = re.sub(r'c"[^"]*"', 'c""', text[m.end():])   # string data cannot fake the attributes
        section = re.search(r',\s*section\s+"([^"]*)"', trailer)
        gv.section = section.group(1) if section else ""
        align = re.search(r",\s*align\s+(\d+)\b", trailer)
        gv.align = int(align.group(1)) if align else None
        self.values[_address(g)] = gv
        return gv

    def import_initializer(self, g: llvm.ValueRef, gv: GlobalVariable) -> None:
        if g.is_declaration:
            return
        text = str(g)
        cur = tp.Cursor(text, _GLOBAL_KIND.search(text, text.find("=") + 1).end())
        tp.parse_type(cur, self.resolve_struct)
        try:
            gv.initializer = tp.parse_constant(cur, gv.value_type, self.resolve_struct, self.resolve_global)
        except IRError as exc:
            raise IRError(f"in the initializer of global @{gv.name}: {exc}") from None

    def import_personality(self, f: llvm.ValueRef, fn: Function) -> None:
        header = next((line for line in str(f).splitlines() if line.startswith("define")), "")
        at = header.rfind(" personality ")
        if at >= 0:
            fn.personality = tp.parse_typed_constant(tp.Cursor(header, at + len(" personality ")),
                                                     self.resolve_struct, self.resolve_global)

    def resolve_global(self, name: str) -> Value:
        found = self.module.globals.get(name) or self.module.functions.get(name)
        if found is None:
            raise IRError(f"@{name} is not a global variable or function of the module (an alias or ifunc?)")
        return found

    def declare_function(self, f: llvm.ValueRef) -> Function:
        ftype = self.type_of(f.global_value_type)
        assert isinstance(ftype, FunctionType)
        header = next((line for line in str(f).splitlines() if line.startswith(("define", "declare"))), "")
        words = header.split("@", 1)[0].split()
        fn = Function(f.name, ftype, linkage=linkage_name(f),
                      calling_convention=next((w for w in words if w in CALLING_CONVENTIONS and w != "ccc"), ""),
                      attributes=self.literal_types(self.function_attributes(header)))
        taken = {a.name for a in f.arguments if a.name}
        for index, a in enumerate(f.arguments):
            name = a.name or _fresh("arg", taken, index)
            arg = Argument(ftype.params[index], name, index, self.literal_types(_attributes(a.attributes)))
            fn.args.append(arg)
            self.values[_address(a)] = arg
        self.values[_address(f)] = fn
        return fn

    def literal_types(self, attributes: set[str]) -> set[str]:
        """Attributes with named struct types (``sret(%struct.pair)``) spelled as literal ones:
        the IR has no named structs, so an exported module would not define the name."""
        spell = lambda m: str(self.resolve_struct(m.group(1)))  # noqa: E731
        return {_NAMED_TYPE.sub(spell, a) if "%" in a else a for a in attributes}

    def function_attributes(self, header: str) -> set[str]:
        """Function attributes from a printed header: inline ones plus the ``#N`` groups it names.

        (llvmlite.binding's ``attributes`` merges return and parameter attributes in.)"""
        depth, start = 0, header.index("(", header.index("@"))
        for k in range(start, len(header)):
            depth += {"(": 1, ")": -1}.get(header[k], 0)
            if depth == 0:
                break
        tail = header[k + 1:].rstrip(" {")
        tail = re.sub(r'\b(section|partition|gc)\s+"[^"]*"|\bcomdat(\([^)]*\))?|\balign\s+\d+|\bpersonality\b.*$',
                      "", tail)
        out: set[str] = set()
        for item in tp.split_attributes(tail):
            if item.startswith("#"):
                out |= tp.split_attributes(self.attribute_groups.get(item[1:], ""))
            elif item not in ("unnamed_addr", "local_unnamed_addr") and not item.startswith("!"):
                out.add(item)
        return out

    # ---- bodies
    def import_body(self, f: llvm.ValueRef, fn: Function) -> None:
        # one walk over llvmlite's blocks and instructions (each step a call into LLVM), kept
        llblocks = [(b, b.name, [(i, i.name) for i in b.instructions]) for b in f.blocks]
        taken = {a.name for a in fn.args} | {name for _, name, _ in llblocks if name}
        for _, _, instructions in llblocks:
            taken.update(name for _, name in instructions if name)
        pending = []
        texts = _instruction_texts(str(f))
        for b, block_name, instructions in llblocks:
            block = Block(block_name or _fresh("bb", taken), parent=fn)
            fn.blocks.append(block)
            self.values[_address(b)] = block
            for i, name in instructions:
                inst = Instruction(i.opcode, self.type_of(i.type), parent=block)
                if inst.type != _VOID and not inst.name:
                    inst.name = name or _fresh("v", taken)
                block.instructions.append(inst)
                self.values[_address(i)] = inst
                pending.append((i, inst))
        if len(texts) != len(pending):  # cannot happen for LLVM's printer; fall back to per-instruction text
            texts = [str(i) for i, _ in pending]
        for (i, inst), text in zip(pending, texts):  # operands may refer forward, so fill them last
            try:
                self.fill(i, inst, text)
            except IRError as exc:
                raise IRError(f"in function @{fn.name}: {exc}") from None

    def operand(self, ref: llvm.ValueRef, where: llvm.ValueRef):
        kind = ref.value_kind.name
        if kind in ("argument", "instruction", "basic_block", "function", "global_variable"):
            value = self.values.get(_address(ref))
            if value is None:
                raise IRError(f"operand {ref.name!r} of '{str(where).strip()}' is not known")
            return value
        type_ = self.type_of(ref.type)
        if kind == "constant_int":
            return Constant(type_, ref.get_constant_value(signed_int=type_ != IntType(1)))
        if kind == "constant_fp" and type_.kind in tp.WIDE_FLOATS:
            return Constant(type_, str(ref).split()[-1])
        if kind == "constant_fp":
            return Constant(type_, ref.get_constant_value(round_fp=True))
        if kind == "inline_asm":
            return InlineAsm(text=str(ref).strip().removeprefix("ptr").strip())
        if kind == "metadata_as_value":  # spelled by the call that uses it (see _metadata_arguments)
            return MetadataValue()
        simple = {"constant_pointer_null": "null", "undef_value": "undef", "poison_value": "poison",
                  "constant_aggregate_zero": "zero"}
        if kind in simple:
            return Constant(type_, None, simple[kind])
        if kind in ("constant_data_vector", "constant_data_array", "constant_vector", "constant_array",
                    "constant_struct", "constant_expr"):
            cur = tp.Cursor(str(ref))
            tp.parse_type(cur, self.resolve_struct)
            return tp.parse_constant(cur, type_, self.resolve_struct, self.resolve_global)
        raise IRError(f"unsupported operand ({kind.replace('_', ' ')}) '{str(ref).strip()[:120]}' "
                      f"in instruction '{str(where).strip()}'")

    def fill(self, i: llvm.ValueRef, inst: Instruction, text: str) -> None:
        text = text.strip()
        opcode = inst.opcode
        if opcode in UNSUPPORTED_OPCODES:
            raise IRError(f"unsupported instruction '{opcode}': {text}")
        ops = [self.operand(o, i) for o in i.operands]
        cur = tp.instruction_body(text)
        inst.flags = tp.leading_flags(cur)
        if " volatile " in f" {text} " and opcode in ("load", "store", "atomicrmw", "cmpxchg"):
            inst.flags.add("volatile")
        inst.align = tp.align_of(text)
        loc = tp.metadata_ref(text, "adoffload.loc")
        if loc is not None:
            inst.location = self.locations.get(loc)
        elif self.debug_locations:
            dbg = tp.metadata_ref(text, "dbg")
            inst.location = self.debug_locations.get(dbg) if dbg is not None else None
        scope = tp.syncscope_of(text)
        if scope is not None:
            inst.flags.add(f"syncscope={scope}")
        handler = _HANDLERS.get(opcode, _plain)
        handler(self, inst, ops, cur, text, i)


def _debug_locations(text: str) -> dict[int, SourceLocation]:
    """Source locations of foreign IR compiled with debug info (clang -g, rustc -g): each
    ``!DILocation(line:, column:, scope:)`` node's file (through its scope's ``file:``), so that
    errors about a foreign instruction name its source line, as they do for our own kernels."""
    files = {int(n): name for n, name in _DI_FILE.findall(text)}
    if not files:
        return {}
    scope_files = {int(n): files.get(int(f)) for n, f in _DI_SCOPE.findall(text)}
    out = {}
    for n, line, col, scope in _DI_LOCATION.findall(text):
        filename = scope_files.get(int(scope))
        if filename is not None and int(line) > 0:
            out[int(n)] = SourceLocation(filename, int(line), int(col or 0))
    return out


def _name_unnamed_globals(llmod: llvm.ModuleRef) -> None:
    """Give unnamed globals and functions (``@0``, as UBSan's source records) a name, so
    that printed references to them can be resolved by name."""
    taken = {g.name for g in llmod.global_variables} | {f.name for f in llmod.functions}
    for value in list(llmod.global_variables) + list(llmod.functions):
        if not value.name:
            value.name = _fresh("unnamed.", taken)


def _attributes(spelled) -> set[str]:
    out: set[str] = set()
    for group in spelled:
        out |= tp.split_attributes(group.decode())
    return out


def _instruction_texts(function_text: str) -> list[str]:
    """Each instruction's text as printed within its function.

    Printed alone, an instruction numbers metadata nodes locally (``!0`` for its first node);
    printed in its function, the numbers are the module's, matching the ``!N = ...`` lines."""
    texts: list[str] = []
    lines = function_text.splitlines()
    start = next((k for k, line in enumerate(lines) if line.startswith("define")), len(lines))
    for line in lines[start + 1:]:
        if line.lstrip().startswith("#dbg_"):  # a debug record (#dbg_value ...) is no instruction
            continue
        if line.startswith("  ") and not line.startswith(("   ", "  ]")):
            texts.append(line)
        elif line.startswith(("   ", "  ]")) and texts:
            texts[-1] += "\n" + line
    return texts


def _fresh(base: str, taken: set[str], k: int = 0) -> str:
    while f"{base}{k}" in taken:
        k += 1
    taken.add(f"{base}{k}")
    return f"{base}{k}"


_VOID = tp.type_from_string("void")


# ----------------------------------------------------------------------------- per-opcode readers

def _plain(imp, inst, ops, cur, text, ref):
    inst.operands = ops


def _branch(imp, inst, ops, cur, text, ref):
    if len(ops) == 1:
        inst.blocks = [ops[0]]
    else:  # LLVM operand order is (cond, false dest, true dest)
        inst.operands, inst.blocks = [ops[0]], [ops[2], ops[1]]


def _switch(imp, inst, ops, cur, text, ref):
    cond_type = ops[0].type
    values = re.findall(r"(?:^|\n|\[)\s*\S+\s+(-?\d+|true|false),\s*label", text)
    inst.operands = [ops[0]] + [Constant(cond_type, int(v == "true") if v in ("true", "false") else int(v))
                                for v in values]
    inst.blocks = ops[1:]


def _call(imp, inst, ops, cur, text, ref):
    inst.callee, inst.operands = ops[-1], ops[:-1]
    inst.element_type = _called_type(imp, inst, cur)
    _drop_operand_bundles(inst, text)
    _metadata_arguments(inst, text)
    inst.flags = {f for f in inst.flags if f in tp.FAST_MATH}
    m = re.match(r"(?:%\S+\s*=\s*)?(tail|musttail|notail)\s+call\b", text)
    if m:
        inst.flags.add(m.group(1))
    _call_site_convention(inst, cur)


_BUNDLES = re.compile(r'\)\s*\[\s*"([^"]+)"')


def _drop_operand_bundles(inst, text) -> None:
    """llvmlite lists a call's operand bundles (``[ "align"(ptr %p, i64 8) ]``) among its operands.
    An ``llvm.assume``'s bundles are hints, dropped (an assumption less is still right); any other
    bundle changes what the call means, so it is refused."""
    bundles = _BUNDLES.findall(text)
    if not bundles:
        return
    name = getattr(inst.callee, "name", "")
    if name != "llvm.assume":
        raise IRError(f"unsupported operand bundle(s) {', '.join(sorted(set(bundles)))} on a call of "
                      f"@{name or '<indirect>'}: {text.strip()[:200]}")
    inst.operands = inst.operands[:len(inst.element_type.params)]


def _call_site_convention(inst, cur) -> None:
    """An indirect call's calling convention (``call fastcc void %f()``), kept as flag ``cc=...``
    (a direct call's is its callee's)."""
    word = cur.peek_word()
    if not isinstance(inst.callee, Function) and (word in CALLING_CONVENTIONS or re.fullmatch(r"cc\d+", word)):
        inst.flags.add(f"cc={word}")


def _called_type(imp, inst, cur) -> FunctionType:
    """The function type of a call: spelled in full for vararg callees (``call i32 (ptr, ...) @f``),
    else the result type and the argument types."""
    if isinstance(inst.callee, Function):
        return inst.callee.function_type
    cur = tp.Cursor(cur.text, cur.pos)
    while not tp.starts_type(cur):  # calling convention, return attributes (``range(i32 0, 4)``)
        if not cur.word():
            raise IRError(f"cannot read the called type of: {cur.text.strip()[:200]}")
        if cur.peek("("):
            cur.pos = _matching_paren(cur.text, cur.pos)
    spelled = tp.parse_type(cur, imp.resolve_struct)
    if isinstance(spelled, FunctionType):
        return spelled
    return FunctionType(inst.type, tuple(o.type for o in inst.operands))


_METADATA_ARGUMENT = re.compile(r'\bmetadata\s+(!"(?:[^"\\]|\\.)*"|!\{[^}]*\}|![-\w.$]+|[^,)]+)')


def _metadata_arguments(inst, text) -> None:
    """Fill the spelling of metadata arguments from the call's text (printed alone, LLVM would
    spell a node by its definition with a local number)."""
    metadata = [o for o in inst.operands if isinstance(o, MetadataValue)]
    if metadata:
        spelled = _METADATA_ARGUMENT.findall(text.split("(", 1)[1] if "(" in text else text)
        if len(spelled) < len(metadata):
            raise IRError(f"cannot read the metadata arguments of: {text}")
        for value, spelling in zip(metadata, spelled):
            value.text = spelling.strip()


def _invoke(imp, inst, ops, cur, text, ref):
    # LLVM operand order: arguments..., normal destination, unwind destination, callee
    inst.callee, inst.operands, inst.blocks = ops[-1], ops[:-3], [ops[-3], ops[-2]]
    inst.flags = set()
    inst.element_type = _called_type(imp, inst, cur)
    _call_site_convention(inst, cur)


def _landingpad(imp, inst, ops, cur, text, ref):
    body = re.sub(r",?\s*!\S+\s+!\d+", "", text)
    if re.search(r"\bcleanup\b", body):
        inst.flags.add("cleanup")
    kinds = re.findall(r"^\s*(catch|filter)\b", body, re.M)
    if len(kinds) != len(ops):
        raise IRError(f"cannot read the clauses of: {text}")
    inst.operands, inst.op = ops, " ".join(kinds)


def _matching_paren(text: str, start: int) -> int:
    """The position just after the parenthesis that closes the one at ``text[start]``."""
    depth = 0
    for k in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[k], 0)
        if depth == 0:
            return k + 1
    raise IRError(f"unbalanced parentheses in: {text.strip()[:200]}")


def _gep(imp, inst, ops, cur, text, ref):
    inst.flags |= {w for w in ("nusw", "nuw", "inbounds") if re.search(rf"getelementptr[\w\s]*\b{w}\b", text)}
    _skip_words(cur, ("nusw", "nuw", "inbounds"))
    inst.element_type = tp.parse_type(cur, imp.resolve_struct)
    inst.operands = ops


def _alloca(imp, inst, ops, cur, text, ref):
    _skip_words(cur, ("inalloca",))
    inst.element_type = tp.parse_type(cur, imp.resolve_struct)
    size = ops[0] if ops else None
    inst.operands = [] if isinstance(size, Constant) and size.value == 1 else [size]


def _memory(imp, inst, ops, cur, text, ref):
    inst.operands = ops
    orderings = tp.orderings_of(text)
    if " atomic " in text:
        inst.flags.add("atomic")
        inst.ordering = orderings[0] if orderings else None


def _atomicrmw(imp, inst, ops, cur, text, ref):
    inst.op = cur.word()
    inst.operands = ops
    inst.ordering = tp.orderings_of(text)[-1]


def _cmpxchg(imp, inst, ops, cur, text, ref):
    if re.match(r"(%\S+\s*=\s*)?cmpxchg\s+weak\b", text):
        inst.flags.add("weak")
    success, failure = tp.orderings_of(text)[-2:]
    inst.ordering = success
    inst.flags.add(f"failure={failure}")
    inst.operands = ops


def _fence(imp, inst, ops, cur, text, ref):
    inst.ordering = tp.orderings_of(text)[-1]


def _compare(imp, inst, ops, cur, text, ref):
    inst.predicate = cur.word()
    inst.operands = ops


def _aggregate(imp, inst, ops, cur, text, ref):
    inst.operands = ops
    body = re.sub(r",\s*!\S+\s+!\d+", "", text)
    m = re.search(r"((?:,\s*\d+)+)\s*$", body)
    inst.indices = tuple(int(x) for x in re.findall(r"\d+", m.group(1))) if m else ()


def _shufflevector(imp, inst, ops, cur, text, ref):
    inst.operands = ops[:2]
    mask = re.search(r"<\s*\d+\s*x\s*i32>\s*(<[^>]*>|zeroinitializer|poison|undef)\s*$",
                     re.sub(r",\s*!\S+\s+!\d+", "", text))
    if mask is None:
        raise IRError(f"cannot read the shuffle mask of: {text}")
    count = inst.type.count
    spelled = mask.group(1)
    if spelled.startswith("<"):
        inst.indices = tuple(-1 if v in ("poison", "undef") else int(v)
                             for v in re.findall(r"i32\s+(-?\d+|poison|undef)", spelled))
    else:
        inst.indices = (0 if spelled == "zeroinitializer" else -1,) * count


def _skip_words(cur, words):
    while cur.peek_word() in words:
        cur.word()


def _phi(imp, inst, ops, cur, text, ref):
    inst.operands = ops
    inst.blocks = [imp.values[_address(b)] for b in ref.incoming_blocks]


_HANDLERS = {
    "phi": _phi, "br": _branch, "switch": _switch, "call": _call, "invoke": _invoke, "landingpad": _landingpad,
    "getelementptr": _gep, "alloca": _alloca,
    "load": _memory, "store": _memory, "atomicrmw": _atomicrmw, "cmpxchg": _cmpxchg, "fence": _fence,
    "icmp": _compare, "fcmp": _compare, "extractvalue": _aggregate, "insertvalue": _aggregate,
    "shufflevector": _shufflevector,
}
