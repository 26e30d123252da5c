"""Bodies for liballoc's ``RawVecInner<Global>`` functions that rustc -O0/-O1 IR only declares.

At opt-level 0 and 1 rustc shares generic instances with its std library instead of instantiating
them in the crate: a ``Vec`` that grows calls ``<RawVecInner>::grow_amortized``, ``try_allocate_in``,
``deallocate``, ``finish_grow`` and ``reserve::do_reserve_and_handle::<Global>``, compiled into
libstd, and the .ll declares them only. Nothing under adoffload could run or differentiate such a
module. Here each of those declarations gets a definition written from liballoc's source, before
the module is prepared for analysis, so it is inlined like the crate's own code: the AD engine then
sees the allocator shims (``__rust_alloc``/``__rust_realloc``/``__rust_dealloc``, which
enzyme/memory.py treats as malloc/realloc/free, with shadow blocks beside them) and the Vec's
fields as ordinary stores; no gradient flows through the sizes and capacities they compute.

These are a std library's private functions: their arguments and the layout of ``RawVecInner``
(``cap`` at byte 0, the pointer at 8; a ``Layout`` passed as ``align, size``; the niches of
``Result<(), TryReserveError>``) belong to one release. They are defined only for the releases
they were checked against (``RUSTC_RELEASES``, the module's ``llvm.ident``) and only where the
declaration has exactly the type below; anything else stays declared, and the host JIT and the
AD engine refuse it by name as before.
"""
from __future__ import annotations

import re

from .llvm_import import parse_llvm

# rustc releases whose liballoc these bodies follow (checked with their std: tests/ad/test_rust_std.py),
# and the first word of Ok(()) in each one's Result<(), TryReserveError> (a niche of the error's
# Layout.align: after Alignment's values in 1.95, all ones in 1.97)
RUSTC_RELEASES = {(1, 95): -9223372036854775807, (1, 97): -1}
_IDENT = re.compile(r'!"rustc version (\d+)\.(\d+)\.')
# <alloc::raw_vec::RawVecInner>::NAME and <RawVecInner<_>>::reserve::do_reserve_and_handle::<Global>,
# as rustc's v0 mangling spells them (the instantiating crate after the name)
_METHOD = re.compile(r"^_RNvMs\w*?_NtCs(\w+?)_5alloc7raw_vecNtB\w+?_11RawVecInner(\d+)([a-z_]+?)Cs\w+$")
_RESERVE = re.compile(r"^_RINvNvMs\w*?_NtCs(\w+?)_5alloc7raw_vecINtB\w+?_11RawVecInnerpE7reserve"
                      r"21do_reserve_and_handleNtNtB\w+?_5alloc6GlobalECs\w+$")
_SHIM = re.compile(r'@"?(_RNv\w*?___rustc)(\d+)_(__rust_(?:alloc|alloc_zeroed|realloc|dealloc))\b')

_TYPES = {
    "grow_amortized": "{ i64, i64 } (ptr, i64, i64, i64, i64)",
    "try_allocate_in": "void (ptr, i64, i1, i64, i64)",
    "deallocate": "void (ptr, i64, i64)",
    "finish_grow": "void (ptr, ptr, i64, i64, i64)",
    "do_reserve_and_handle": "void (ptr, i64, i64, i64, i64)",
}

# The allocator shims are called nounwind (a global allocator must not unwind), so that inlined where
# the crate invokes these functions they stay calls, which the engine knows as allocations.
# %self: &mut RawVecInner { cap: usize @0, ptr @8 }; a Layout is (align, size). Helpers are internal.
_HELPERS = """
define internal { i64, i64 } @adoffload.rust.layout_array(i64 %cap, i64 %align, i64 %size) {
start:
  %m = call { i64, i1 } @llvm.umul.with.overflow.i64(i64 %cap, i64 %size)
  %bytes = extractvalue { i64, i1 } %m, 0
  %ov = extractvalue { i64, i1 } %m, 1
  %limit = sub i64 -9223372036854775808, %align
  %big = icmp ugt i64 %bytes, %limit
  %bad = or i1 %ov, %big
  %flag = zext i1 %bad to i64
  %r0 = insertvalue { i64, i64 } undef, i64 %flag, 0
  %r1 = insertvalue { i64, i64 } %r0, i64 %bytes, 1
  ret { i64, i64 } %r1
}

; the block of %bytes that self grows into: a new one where self has none (or its elements have no
; size), else self's block reallocated; null when the allocator has no memory
define internal ptr @adoffload.rust.block_for(ptr %self, i64 %bytes, i64 %align, i64 %size) {
start:
  %old_cap = load i64, ptr %self, align 8
  %none = icmp eq i64 %old_cap, 0
  %zst = icmp eq i64 %size, 0
  %fresh = or i1 %none, %zst
  br i1 %fresh, label %allocate, label %grow
allocate:
  %p = call ptr @SHIM_ALLOC(i64 %bytes, i64 %align) nounwind
  ret ptr %p
grow:
  %slot = getelementptr inbounds i8, ptr %self, i64 8
  %old = load ptr, ptr %slot, align 8
  %old_bytes = mul nuw i64 %old_cap, %size
  %q = call ptr @SHIM_REALLOC(ptr %old, i64 %old_bytes, i64 %align, i64 %bytes) nounwind
  ret ptr %q
}

; finish_grow: a block of cap elements (the current one reallocated, or a new one); its
; Result<NonNull<[u8]>, TryReserveError> in memory: {0, ptr, bytes} or {1, align, bytes} (out of
; memory) or {1, 0, 0} (capacity overflow)
define internal void @adoffload.rust.finish_grow(ptr %out, ptr %self, i64 %cap, i64 %align, i64 %size) {
start:
  %w1 = getelementptr inbounds i8, ptr %out, i64 8
  %w2 = getelementptr inbounds i8, ptr %out, i64 16
  %layout = call { i64, i64 } @adoffload.rust.layout_array(i64 %cap, i64 %align, i64 %size)
  %flag = extractvalue { i64, i64 } %layout, 0
  %bytes = extractvalue { i64, i64 } %layout, 1
  %bad = icmp ne i64 %flag, 0
  br i1 %bad, label %too_big, label %sized
sized:
  %new = call ptr @adoffload.rust.block_for(ptr %self, i64 %bytes, i64 %align, i64 %size)
  %failed = icmp eq ptr %new, null
  br i1 %failed, label %no_memory, label %ok
too_big:
  store i64 1, ptr %out, align 8
  store i64 0, ptr %w1, align 8
  store i64 0, ptr %w2, align 8
  ret void
no_memory:
  store i64 1, ptr %out, align 8
  store i64 %align, ptr %w1, align 8
  store i64 %bytes, ptr %w2, align 8
  ret void
ok:
  store i64 0, ptr %out, align 8
  store ptr %new, ptr %w1, align 8
  store i64 %bytes, ptr %w2, align 8
  ret void
}

; grow_amortized's end: finish_grow and self set to the new block; Result<(), TryReserveError>.
; No memory or aggregate holds both the address and an integer, so the Vec's pointer stays a pointer.
define internal { i64, i64 } @adoffload.rust.grow_to(ptr %self, i64 %cap, i64 %align, i64 %size) {
start:
  %layout = call { i64, i64 } @adoffload.rust.layout_array(i64 %cap, i64 %align, i64 %size)
  %flag = extractvalue { i64, i64 } %layout, 0
  %bytes = extractvalue { i64, i64 } %layout, 1
  %bad = icmp ne i64 %flag, 0
  br i1 %bad, label %too_big, label %sized
sized:
  %new = call ptr @adoffload.rust.block_for(ptr %self, i64 %bytes, i64 %align, i64 %size)
  %failed = icmp eq ptr %new, null
  br i1 %failed, label %no_memory, label %ok
too_big:
  ret { i64, i64 } zeroinitializer
no_memory:
  %e0 = insertvalue { i64, i64 } undef, i64 %align, 0
  %e1 = insertvalue { i64, i64 } %e0, i64 %bytes, 1
  ret { i64, i64 } %e1
ok:
  %slot1 = getelementptr inbounds i8, ptr %self, i64 8
  store ptr %new, ptr %slot1, align 8
  store i64 %cap, ptr %self, align 8
  ret { i64, i64 } { i64 OK_WORD, i64 0 }
}

define internal { i64, i64 } @adoffload.rust.grow_amortized(ptr %self, i64 %len, i64 %additional, i64 %align, i64 %size) {
start:
  %zst = icmp eq i64 %size, 0
  br i1 %zst, label %overflow, label %sized
sized:
  %sum = call { i64, i1 } @llvm.uadd.with.overflow.i64(i64 %len, i64 %additional)
  %required = extractvalue { i64, i1 } %sum, 0
  %ov = extractvalue { i64, i1 } %sum, 1
  br i1 %ov, label %overflow, label %grow
grow:
  %cap = load i64, ptr %self, align 8
  %double = shl nuw i64 %cap, 1
  %c1 = call i64 @llvm.umax.i64(i64 %double, i64 %required)
  %one = icmp eq i64 %size, 1
  %moderate = icmp ule i64 %size, 1024
  %m1 = select i1 %moderate, i64 4, i64 1
  %min = select i1 %one, i64 8, i64 %m1
  %c2 = call i64 @llvm.umax.i64(i64 %min, i64 %c1)
  %r = call { i64, i64 } @adoffload.rust.grow_to(ptr %self, i64 %c2, i64 %align, i64 %size)
  ret { i64, i64 } %r
overflow:
  ret { i64, i64 } zeroinitializer
}

declare { i64, i1 } @llvm.umul.with.overflow.i64(i64, i64)
declare { i64, i1 } @llvm.uadd.with.overflow.i64(i64, i64)
declare i64 @llvm.umax.i64(i64, i64)
"""

_BODIES = {
    "grow_amortized": """(ptr %self, i64 %len, i64 %additional, i64 %align, i64 %size) {
start:
  %r = call { i64, i64 } @adoffload.rust.grow_amortized(ptr %self, i64 %len, i64 %additional, i64 %align, i64 %size)
  ret { i64, i64 } %r
}""",
    "finish_grow": """(ptr sret([24 x i8]) align 8 %out, ptr %self, i64 %cap, i64 %align, i64 %size) {
start:
  call void @adoffload.rust.finish_grow(ptr %out, ptr %self, i64 %cap, i64 %align, i64 %size)
  ret void
}""",
    "do_reserve_and_handle": """(ptr %self, i64 %len, i64 %additional, i64 %align, i64 %size) {
start:
  %r = call { i64, i64 } @adoffload.rust.grow_amortized(ptr %self, i64 %len, i64 %additional, i64 %align, i64 %size)
  %w0 = extractvalue { i64, i64 } %r, 0
  %ok = icmp eq i64 %w0, OK_WORD
  br i1 %ok, label %done, label %failed
done:
  ret void
failed:
  %w1 = extractvalue { i64, i64 } %r, 1
  call void @HANDLE_ERROR(i64 %w0, i64 %w1)
  unreachable
}""",
    "try_allocate_in": """(ptr sret([24 x i8]) align 8 %out, i64 %capacity, i1 zeroext %zeroed, i64 %align, i64 %size) {
start:
  %layout = call { i64, i64 } @adoffload.rust.layout_array(i64 %capacity, i64 %align, i64 %size)
  %bad = extractvalue { i64, i64 } %layout, 0
  %bytes = extractvalue { i64, i64 } %layout, 1
  %w1 = getelementptr inbounds i8, ptr %out, i64 8
  %w2 = getelementptr inbounds i8, ptr %out, i64 16
  %overflow = icmp ne i64 %bad, 0
  br i1 %overflow, label %too_big, label %sized
too_big:
  store i64 1, ptr %out, align 8
  store i64 0, ptr %w1, align 8
  store i64 0, ptr %w2, align 8
  ret void
sized:
  %empty = icmp eq i64 %bytes, 0
  br i1 %empty, label %dangling, label %choose
dangling:
  %aligned = inttoptr i64 %align to ptr
  store i64 0, ptr %out, align 8
  store i64 0, ptr %w1, align 8
  store ptr %aligned, ptr %w2, align 8
  ret void
choose:
  br i1 %zeroed, label %clear, label %plain
clear:
  %z = call ptr @SHIM_ALLOC_ZEROED(i64 %bytes, i64 %align) nounwind
  br label %allocated
plain:
  %p = call ptr @SHIM_ALLOC(i64 %bytes, i64 %align) nounwind
  br label %allocated
allocated:
  %new = phi ptr [ %z, %clear ], [ %p, %plain ]
  %failed = icmp eq ptr %new, null
  br i1 %failed, label %no_memory, label %ok
no_memory:
  store i64 1, ptr %out, align 8
  store i64 %align, ptr %w1, align 8
  store i64 %bytes, ptr %w2, align 8
  ret void
ok:
  store i64 0, ptr %out, align 8
  store i64 %capacity, ptr %w1, align 8
  store ptr %new, ptr %w2, align 8
  ret void
}""",
    "deallocate": """(ptr %self, i64 %align, i64 %size) {
start:
  %cap = load i64, ptr %self, align 8
  %none = icmp eq i64 %cap, 0
  %zst = icmp eq i64 %size, 0
  %nothing = or i1 %none, %zst
  br i1 %nothing, label %done, label %free
free:
  %slot = getelementptr inbounds i8, ptr %self, i64 8
  %p = load ptr, ptr %slot, align 8
  %bytes = mul nuw i64 %cap, %size
  call void @SHIM_DEALLOC(ptr %p, i64 %bytes, i64 %align) nounwind
  br label %done
done:
  ret void
}""",
}
_SHIM_TYPES = {"__rust_alloc": "ptr (i64, i64)", "__rust_alloc_zeroed": "ptr (i64, i64)",
               "__rust_realloc": "ptr (ptr, i64, i64, i64)", "__rust_dealloc": "void (ptr, i64, i64)"}
# as rustc declares them at -O1 and above (LLVM checks that an allocator's family matches its variants')
_SHIM_KINDS = {"__rust_alloc": "alloc,uninitialized,aligned", "__rust_alloc_zeroed": "alloc,zeroed,aligned",
               "__rust_realloc": "realloc,aligned", "__rust_dealloc": "free"}


def raw_vec_function(name: str) -> tuple[str, str] | None:
    """(liballoc crate hash, function) for a RawVecInner function defined here, or None."""
    method = _METHOD.match(name)
    if method and int(method.group(2)) == len(method.group(3)) and method.group(3) in _BODIES:
        return method.group(1), method.group(3)
    reserve = _RESERVE.match(name)
    return (reserve.group(1), "do_reserve_and_handle") if reserve else None


def rustc_release(text: str) -> tuple[int, int] | None:
    found = _IDENT.search(text)
    return (int(found.group(1)), int(found.group(2))) if found else None


def define_raw_vec_functions(source: str | bytes) -> tuple[str | bytes, bool]:
    """``source`` with the RawVecInner<Global> declarations it has defined (see the module
    docstring), and whether it defined any; ``source`` unchanged where there are none, or its
    rustc release is not one of ``RUSTC_RELEASES``."""
    if isinstance(source, (bytes, bytearray)):
        if b"RawVecInner" not in source:
            return source, False
        source = str(parse_llvm(source))
    release = rustc_release(source) if "RawVecInner" in source else None
    if release not in RUSTC_RELEASES:
        return source, False
    module = parse_llvm(source)
    wanted = {}
    for fn in module.functions:
        found = raw_vec_function(fn.name) if fn.is_declaration else None
        if found and str(fn.global_value_type) == _TYPES[found[1]]:
            wanted[fn.name] = found
    if not wanted:
        return source, False
    shims = _shim_names(source)
    alloc_hash = next(iter(wanted.values()))[0]
    handle_error = f"_RNvNtCs{alloc_hash}_5alloc7raw_vec12handle_error"
    lines = [_HELPERS, f'declare void @"{handle_error}"(i64, i64) cold noreturn']    # it panics: may unwind
    for shim, name in shims.items():
        returns, params = _SHIM_TYPES[shim].split(" ", 1)
        lines.append(f'declare {returns} @"{name}"{params} allockind("{_SHIM_KINDS[shim]}") '
                     f'"alloc-family"="__rust_alloc"')
    for name, (_, what) in wanted.items():
        returns = _TYPES[what].split(" (")[0]
        lines.append(f'define linkonce_odr {returns} @"{name}"' + _BODIES[what])
    text = "\n".join(lines).replace("@HANDLE_ERROR", f'@"{handle_error}"')
    text = text.replace("OK_WORD", str(RUSTC_RELEASES[release]))
    for shim, name in shims.items():
        text = re.sub(rf"@SHIM_{shim[7:].upper()}\b", f'@"{name}"', text)
    library = parse_llvm(text)
    library.triple, library.data_layout = module.triple, module.data_layout
    module.link_in(library)
    return str(module), True


def _shim_names(text: str) -> dict[str, str]:
    """The allocator shims' names as the module spells them (rustc's v0 mangling, with its
    crate hash), or their plain names where the module names none."""
    found = {m.group(3): f"{m.group(1)}{m.group(2)}_{m.group(3)}" for m in _SHIM.finditer(text)
             if int(m.group(2)) == len(m.group(3))}
    prefix = next((m.group(1) for m in _SHIM.finditer(text)), None)
    names = {}
    for shim in _SHIM_TYPES:
        names[shim] = found.get(shim) or (f"{prefix}{len(shim)}_{shim}" if prefix else shim)
    return names
