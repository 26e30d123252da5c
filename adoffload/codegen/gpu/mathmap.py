"""Renaming math calls a GPU target cannot lower into calls to its device math library.

The body uses LLVM intrinsics (``llvm.sin.f32``) and libm names (``erff``); NVPTX and
AMDGPU cannot select most of them. ``rename_math_calls`` rewrites both spellings, in
declarations and calls alike, to the device library's names (``__nv_sinf``, ...), before
linking that library and optimizing.
"""
from __future__ import annotations

import re
from collections.abc import Callable

# Operations that have an LLVM intrinsic spelling ``llvm.<op>.f32|f64`` as well as libm's.
INTRINSIC_OPS = ("sin", "cos", "tan", "exp", "exp2", "exp10", "log", "log2", "log10", "pow", "tanh",
                 "atan2", "sinh", "cosh", "asin", "acos", "atan")
# Operations known only by their libm name (``erf`` / ``erff``). ``rsqrt`` is no libm function but
# libdevice's and ocml's (the host defines it: codegen/host/program.py).
LIBM_ONLY_OPS = ("erf", "erfc", "expm1", "log1p", "cbrt", "hypot", "lgamma", "tgamma", "fmod", "rsqrt")
ALL_OPS = INTRINSIC_OPS + LIBM_ONLY_OPS

_IDENT_CHAR = r"[-a-zA-Z$._0-9]"


def _math_names() -> dict[str, tuple[str, str]]:
    """Every spelling of a math call -> (operation, "f32" | "f64")."""
    names = {}
    for op in ALL_OPS:
        names[op] = (op, "f64")
        names[op + "f"] = (op, "f32")
    for op in INTRINSIC_OPS:
        names[f"llvm.{op}.f32"] = (op, "f32")
        names[f"llvm.{op}.f64"] = (op, "f64")
    return names


MATH_NAMES = _math_names()
_CALLEE = re.compile(r'@(?:"([^"]+)"|(' + _IDENT_CHAR + r'+))')
_DECLARE = re.compile(r'^\s*declare\b[^@\n]*@(?:"([^"]+)"|(' + _IDENT_CHAR + r'+))', re.M)


def rename_math_calls(text: str, new_name: Callable[[str, str], str | None]) -> tuple[str, set[str]]:
    """Rewrite math callees with ``new_name(op, "f32"|"f64")`` (None keeps the call).

    Returns the new text and the set of new names used. Declarations that become duplicates
    (``llvm.exp.f64`` and ``exp`` both mapping to ``__nv_exp``) are dropped.
    """
    used: set[str] = set()

    def replace(match: re.Match) -> str:
        name = match.group(1) or match.group(2)
        if name not in MATH_NAMES:
            return match.group(0)
        target = new_name(*MATH_NAMES[name])
        if target is None:
            return match.group(0)
        used.add(target)
        return f'@"{target}"'

    return _drop_duplicate_declarations(_CALLEE.sub(replace, text)), used


# libm functions that are single LLVM intrinsics every GPU backend selects natively (sqrt.rn.f64,
# fma.rn, abs, cvt.rmi, min/max...), with the same semantics: a CUDA or HIP source calls them by
# their libm name (``sqrt``, ``fmaf``), which no GPU library defines under that name.
NATIVE_LIBM = {"sqrt": "sqrt", "fma": "fma", "fabs": "fabs", "floor": "floor", "ceil": "ceil", "trunc": "trunc",
               "round": "round", "rint": "rint", "nearbyint": "nearbyint", "fmin": "minnum", "fmax": "maxnum",
               "copysign": "copysign"}
_NATIVE_NAMES = {f"{name}{suffix}": f"llvm.{intrinsic}.{kind}" for name, intrinsic in NATIVE_LIBM.items()
                 for suffix, kind in (("", "f64"), ("f", "f32"))}


def libm_to_intrinsics(text: str) -> str:
    """Calls and declarations of the libm functions in ``NATIVE_LIBM`` renamed to their LLVM
    intrinsics (for GPU targets; a declaration that becomes a duplicate is dropped)."""
    if not any(f"@{name}(" in text or f'@"{name}"(' in text for name in _NATIVE_NAMES):
        return text

    def replace(match: re.Match) -> str:
        name = match.group(1) or match.group(2)
        return f"@{_NATIVE_NAMES[name]}" if name in _NATIVE_NAMES else match.group(0)
    return _drop_duplicate_declarations(_CALLEE.sub(replace, text))


def _drop_duplicate_declarations(text: str) -> str:
    seen: set[str] = set()
    lines = []
    for line in text.splitlines():
        m = _DECLARE.match(line)
        if m:
            name = m.group(1) or m.group(2)
            if name in seen:
                continue
            seen.add(name)
        lines.append(line)
    return "\n".join(lines) + "\n"


def libm_name(op: str, kind: str) -> str:
    return op + ("f" if kind == "f32" else "")
