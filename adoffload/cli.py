"""Command line: ``python -m adoffload doctor`` and ``python -m adoffload compile FILE:KERNEL``.

``compile`` prints a kernel's canonical IR, the adoffload IR, host assembly, PTX or GCN
assembly to standard output, for the primal kernel or its JVP/VJP (``--mode``).
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

from .errors import Error

EMITS = ("llvm", "ir", "asm", "ptx", "gcn")


def _load_kernel(spec: str):
    from .kernel import Kernel
    if ":" not in spec:
        raise Error(f"expected FILE:KERNEL, got {spec!r}")
    filename, name = spec.rsplit(":", 1)
    path = Path(filename)
    if not path.exists():
        raise Error(f"no such file: {filename}")
    module_spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[path.stem] = module
    module_spec.loader.exec_module(module)
    k = getattr(module, name, None)
    if not isinstance(k, Kernel):
        raise Error(f"{filename} has no kernel named '{name}' (kernels there: "
                    f"{', '.join(n for n, v in vars(module).items() if isinstance(v, Kernel)) or 'none'})")
    return k


def _select(k, mode: str, wrt: str | None, width: int):
    from .kernel import jvp, vjp
    if mode == "primal":
        return k
    names = wrt.split(",") if wrt else [p.name for p in k.signature.params
                                         if p.dtype.is_float and not (p.is_array and p.type.intent == "out")]
    return jvp(k, names, width=width) if mode == "jvp" else vjp(k, names)


def _emit(k, emit: str, arch: str | None) -> str:
    from . import ir
    if emit == "llvm":
        return k.module_text()
    if emit == "ir":
        module, _ = k.ir()
        return ir.format_module(module)
    if emit == "asm":
        from .codegen import host
        return host.assembly(k.compiled("host").artifact)
    if emit == "ptx":
        return k.compiled("nvptx", arch=arch or "sm_90").artifact
    from .codegen import amdgpu
    flat_types = [f.llvm_type for f in k.signature.flat_params()]
    return amdgpu.kernel_assembly(k.module_text(), k.body_name, flat_types, k.signature.grid_rank, arch or "gfx942")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m adoffload", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("doctor", help="versions, targets, devices and optional tools found")
    comp = sub.add_parser("compile", help="print a kernel's IR or machine code")
    comp.add_argument("target", metavar="FILE:KERNEL")
    comp.add_argument("--emit", choices=EMITS, default="llvm",
                      help="llvm: canonical LLVM IR; ir: adoffload IR; asm: host assembly; ptx; gcn")
    comp.add_argument("--mode", choices=("primal", "jvp", "vjp"), default="primal")
    comp.add_argument("--wrt", help="comma-separated parameters to differentiate (default: all float inputs)")
    comp.add_argument("--width", type=int, default=1, help="vector width for --mode jvp")
    comp.add_argument("--arch", help="sm_80/sm_90 for ptx, gfx90a/gfx942/gfx1100 for gcn")
    args = parser.parse_args(argv)
    try:
        if args.command == "doctor":
            from .doctor import report
            print(report())
            return 0
        k = _select(_load_kernel(args.target), args.mode, args.wrt, args.width)
        sys.stdout.write(_emit(k, args.emit, args.arch).rstrip() + "\n")
        return 0
    except Error as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
