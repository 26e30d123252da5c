"""The AMD target: LLVM IR (with a GPU entry) -> GCN assembly or a linked HSA code object.

Math: ROCm's ocml bitcode (with its ockl/oclc control libraries) when ROCm is installed,
else our own ``devicemath``. Then internalize everything but the kernels, O3 with the
AMDGPU target machine, emit an object from a freshly parsed module (LLVM aborts when one
module is lowered twice), and link it with ``ld.lld -shared`` into an HSACO.
"""
from __future__ import annotations

import re
import struct
import subprocess
import tempfile
from pathlib import Path

import llvmlite.binding as llvm

from ...errors import CompilationError
from . import devicemath
from .mathmap import libm_to_intrinsics, rename_math_calls
from .nvptx import internalize_except
from ..optimize import optimize_module
from .shared_alignment import unmask_shared_pointers
from ..targets import AMDGPU_ARCHS, AMDGPU_TRIPLE, target_machine

# gfx arch -> (ISA version number in oclc_isa_version_<N>.bc, wavefront size)
_ARCH_INFO = {"gfx90a": ("90a", 64), "gfx942": ("942", 64), "gfx1100": ("1100", 32)}


def amdgpu_target_machine(arch: str):
    if arch not in AMDGPU_ARCHS:
        raise CompilationError(f"unsupported AMD architecture {arch!r}; expected one of {list(AMDGPU_ARCHS)}")
    return target_machine(AMDGPU_TRIPLE, arch, "", reloc="pic")


def _kernel_names(module: llvm.ModuleRef) -> list[str]:
    names = []
    for fn in module.functions:
        if not fn.is_declaration:
            header = str(fn).lstrip().split("\n", 1)[0]
            if header.startswith("define") and "amdgpu_kernel" in header.split("@", 1)[0]:
                names.append(fn.name)
    return names


def _ocml_libraries(ocml: Path, arch: str) -> list[Path]:
    isa, wave = _ARCH_INFO[arch]
    folder = ocml.parent
    names = ["ocml.bc", "ockl.bc", "oclc_finite_only_off.bc", "oclc_unsafe_math_off.bc",
             "oclc_daz_opt_off.bc", "oclc_correctly_rounded_sqrt_on.bc",
             f"oclc_wavefrontsize64_{'on' if wave == 64 else 'off'}.bc", f"oclc_isa_version_{isa}.bc",
             "oclc_abi_version_500.bc"]
    paths = [folder / n for n in names]
    missing = [p.name for p in paths if not p.is_file()]
    if missing:
        raise CompilationError(f"ROCm device libraries incomplete in {folder}: missing {missing}")
    return paths


def _math_libraries(text: str, arch: str, math: str, tm) -> tuple[str, list[llvm.ModuleRef]]:
    """Rename math calls for the chosen library; return the text and the modules to link."""
    from .tools import find_ocml
    text = libm_to_intrinsics(text)
    ocml = find_ocml() if math in ("auto", "ocml") else None
    if math == "ocml" and ocml is None:
        raise CompilationError("math='ocml' but ROCm's ocml.bc was not found (set ROCM_PATH)")
    if ocml is not None:
        text, used = rename_math_calls(text, lambda op, kind: f"__ocml_{op}_{kind}")
        return text, ([llvm.parse_bitcode(p.read_bytes()) for p in _ocml_libraries(ocml, arch)] if used else [])

    def ours(op, kind):
        if not devicemath.supported(op):
            raise CompilationError(f"no AMDGPU device math for '{op}' ({kind}) without ROCm; "
                                   f"available: {sorted(devicemath.FUNCTIONS)}")
        return devicemath.function_name(op, kind)
    text, used = rename_math_calls(text, ours)
    if not used:
        return text, []
    return text, [llvm.parse_assembly(devicemath.devicemath_module(used, AMDGPU_TRIPLE, str(tm.target_data)))]


# A float atomicrmw line of LLVM text (fadd, fsub, fmax, fmin), with or without a result name.
_FLOAT_ATOMIC = re.compile(r"^(\s*(?:%\S+ = )?atomicrmw (?:volatile )?f(?:add|sub|max|min) .*)$", re.M)


def coarse_grained_float_atomics(text: str) -> str:
    """Mark float atomics ``!amdgpu.no.fine.grained.memory``: our buffers are device memory
    (hipMalloc: coarse-grained), and with the mark LLVM emits the native instructions
    (``global_atomic_add_f64`` on gfx90a/gfx942, ``*_add_f32`` on gfx942/gfx1100) instead of a
    compare-and-swap loop, which contended adjoint updates serialize on."""
    return _FLOAT_ATOMIC.sub(r"\1, !amdgpu.no.fine.grained.memory !{}", text)


_GENERIC_ALLOCA = re.compile(r"^(\s*)(%[-\w.$]+|%\"[^\"]*\") = alloca (.*?)((?:, ![-\w.]+ ![^,]*)*)$", re.M)


def private_allocas(text: str) -> str:
    """Put every ``alloca`` of the generic address space in AMDGPU's private one, addrspace(5)
    (the data layout's alloca space), cast back to a generic pointer for its users. Our body, its
    tapes (``tape.local``) and IR from host-triple compilers allocate in addrspace(0), which the
    AMDGPU verifier refuses; allocas already in addrspace(5) (clang for amdgcn) are left alone.
    Lifetime markers of the moved allocas are dropped (they must name an alloca; they are hints)."""
    moved = set()

    def private(m: re.Match) -> str:
        indent, name, rest, meta = m.groups()
        if "addrspace(" in rest:
            return m.group(0)
        moved.add(name)
        slot = name[:-1] + '.private"' if name.endswith('"') else name + ".private"
        return (f"{indent}{slot} = alloca {rest}, addrspace(5){meta}\n"
                f"{indent}{name} = addrspacecast ptr addrspace(5) {slot} to ptr")
    text = _GENERIC_ALLOCA.sub(private, text)
    if not moved:
        return text

    def marker(m: re.Match) -> str:
        return "" if m.group(1) in moved else m.group(0)
    return _LIFETIME.sub(marker, text)


_LIFETIME = re.compile(r"^\s*call void @llvm\.lifetime\.(?:start|end)\.p0\([^)]*?ptr (?:nonnull )?(%[-\w.$]+|%\"[^\"]*\")\)[^\n]*\n",
                       re.M)


def prepare_amdgpu_module(text: str, arch: str = "gfx942", kernels=None, math: str = "auto") -> llvm.ModuleRef:
    """Parse, link device math, internalize all but the kernels, O3 for ``arch``."""
    tm = amdgpu_target_machine(arch)
    text, libraries = _math_libraries(coarse_grained_float_atomics(private_allocas(text)), arch, math, tm)
    try:
        module = llvm.parse_assembly(text)
        module.triple, module.data_layout = AMDGPU_TRIPLE, str(tm.target_data)
        keep = list(kernels) if kernels is not None else _kernel_names(module)
        if not keep:
            raise CompilationError("the module has no amdgpu_kernel function; add one with abi.add_gpu_entry")
        for lib in libraries:
            lib.triple, lib.data_layout = module.triple, module.data_layout
            module.link_in(lib)
        internalize_except(module, keep)
        module.verify()
    except RuntimeError as exc:
        raise CompilationError(f"preparing the module for {arch} failed: {exc}") from exc
    return unmask_shared_pointers(optimize_module(module, 3, tm))


def compile_gcn_assembly(text: str, arch: str = "gfx942", **opts) -> str:
    module = prepare_amdgpu_module(text, arch, **opts)
    try:
        return amdgpu_target_machine(arch).emit_assembly(module)
    except RuntimeError as exc:
        raise CompilationError(f"GCN emission for {arch} failed: {exc}") from exc


def compile_hsaco(text: str, arch: str = "gfx942", **opts) -> bytes:
    """A linked HSA code object (ELF shared object) for ``arch``."""
    optimized = str(prepare_amdgpu_module(text, arch, **opts))
    try:
        obj = amdgpu_target_machine(arch).emit_object(llvm.parse_assembly(optimized))
    except RuntimeError as exc:
        raise CompilationError(f"object emission for {arch} failed: {exc}") from exc
    return link_code_object(obj)


def link_code_object(obj: bytes) -> bytes:
    from .tools import find_lld
    with tempfile.TemporaryDirectory(prefix="adoffload-lld-") as tmp:
        src, dst = Path(tmp) / "kernel.o", Path(tmp) / "kernel.hsaco"
        src.write_bytes(obj)
        proc = subprocess.run(find_lld() + ["-shared", "-o", str(dst), str(src)], capture_output=True,
                              text=True, timeout=300)
        if proc.returncode != 0 or not dst.is_file():
            raise CompilationError(f"ld.lld failed to link the AMD code object:\n{proc.stdout}{proc.stderr}")
        return dst.read_bytes()


# --- a tiny ELF64 reader: the kernel descriptors a code object exports ----------------------------

_SHT_SYMTAB, _SHT_DYNSYM = 2, 11
EM_AMDGPU = 224


def elf_symbols(image: bytes) -> list[str]:
    """Names in the symbol tables (.symtab and .dynsym) of a little-endian ELF64 image."""
    if image[:4] != b"\x7fELF" or image[4] != 2 or image[5] != 1:
        raise CompilationError("not a little-endian ELF64 image")
    shoff, = struct.unpack_from("<Q", image, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", image, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", image, shoff + k * shentsize) for k in range(shnum)]
    names = []
    for _name, kind, _flags, _addr, offset, size, link, _info, _align, entsize in sections:
        if kind not in (_SHT_SYMTAB, _SHT_DYNSYM) or not entsize:
            continue
        str_offset = sections[link][4]
        for k in range(size // entsize):
            name_off, = struct.unpack_from("<I", image, offset + k * entsize)
            if name_off:
                end = image.index(b"\0", str_offset + name_off)
                names.append(image[str_offset + name_off:end].decode())
    return names


def elf_machine(image: bytes) -> int:
    return struct.unpack_from("<H", image, 0x12)[0]


def kernel_descriptors(hsaco: bytes) -> list[str]:
    """The ``<kernel>.kd`` symbols of a code object (one per launchable kernel), sorted."""
    return sorted({n for n in elf_symbols(hsaco) if n.endswith(".kd")})
