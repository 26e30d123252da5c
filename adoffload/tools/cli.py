"""Command line: ``python -m adoffload doctor`` and ``python -m adoffload compile FILE:KERNEL``.

``compile`` prints a kernel's canonical LLVM IR, the adoffload IR, host assembly, PTX or
GCN assembly to standard output, for the primal kernel or its JVP/VJP (``--mode``); with
``--stats``, static cost counts instead (atomics, tape bytes, recomputed loads: stats.py).
Errors are one line on standard error (``error: ...``) and exit status 1.
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

from ..errors import ArgumentError, Error

EMITS = ("llvm", "ir", "asm", "ptx", "gcn")
MODES = ("primal", "jvp", "vjp")
# Which --arch values each --emit accepts (None: the option does not apply).
_ARCH_TARGET = {"llvm": None, "ir": None, "asm": None, "ptx": "nvptx", "gcn": "amdgpu"}


def load_kernel(spec: str):
    """The Kernel named by ``FILE:KERNEL`` (the file is imported as a module)."""
    from ..kernels.kernel import Kernel
    filename, sep, name = spec.rpartition(":")
    if not sep or not filename or not name:
        raise ArgumentError(f"expected FILE:KERNEL (e.g. examples/kernels.py:saxpy), got {spec!r}")
    path = Path(filename)
    if not path.is_file():
        raise ArgumentError(f"no such file: {filename}")
    module_name = f"adoffload_cli_{abs(hash(str(path.resolve())))}"
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_name] = module
    sys.path.insert(0, str(path.resolve().parent))        # the file may import its neighbours
    try:
        module_spec.loader.exec_module(module)
    except Error:
        raise
    except Exception as exc:          # the user's file failed to import: one line, no traceback
        raise ArgumentError(f"importing {filename} failed: {type(exc).__name__}: {exc}") from exc
    finally:
        sys.path.remove(str(path.resolve().parent))
    kernels = [n for n, v in vars(module).items() if isinstance(v, Kernel)]
    k = getattr(module, name, None)
    if not isinstance(k, Kernel):
        raise ArgumentError(f"{filename} has no kernel named '{name}' (kernels there: {', '.join(kernels) or 'none'})")
    return k


def default_wrt(k) -> list[str]:
    """Every float parameter the kernel reads (scalars, In and InOut arrays)."""
    return [p.name for p in k.signature.visible_params
            if p.dtype.is_float and not (p.is_array and not p.type.reads)]


def select(k, mode: str, wrt: str | None, width: int, lean: bool = False):
    """The primal kernel, or its JVP (``width`` lanes) / VJP with respect to ``wrt`` (``lean``: the
    ``primal_outputs=False`` variant the JAX rules use)."""
    from ..kernels.kernel import jvp, vjp
    if width < 1:
        raise ArgumentError(f"--width must be at least 1, got {width}")
    if width != 1 and mode != "jvp":
        raise ArgumentError("--width applies to --mode jvp only")
    if mode == "primal":
        if wrt or lean:
            raise ArgumentError(f"{'--wrt' if wrt else '--lean'} needs --mode jvp or --mode vjp")
        return k
    names = [n.strip() for n in wrt.split(",") if n.strip()] if wrt else default_wrt(k)
    if not names:
        raise ArgumentError(f"kernel '{k.name}' has no float inputs to differentiate; name them with --wrt")
    options = {"primal_outputs": False} if lean else {}
    return jvp(k, names, width=width, **options) if mode == "jvp" else vjp(k, names, **options)


def check_arch(emit: str, arch: str | None) -> str | None:
    """The architecture for ``emit`` (its default when None); a bad one is a one-line error."""
    from ..codegen import DEFAULT_ARCH
    from ..codegen.gpu.nvptx import PTX_VERSION
    from ..codegen.targets import AMDGPU_ARCHS
    target = _ARCH_TARGET[emit]
    if target is None:
        if arch is not None:
            raise ArgumentError(f"--arch applies to --emit ptx or gcn, not --emit {emit}")
        return None
    known = list(PTX_VERSION) if target == "nvptx" else list(AMDGPU_ARCHS)
    arch = arch or DEFAULT_ARCH[target]
    if arch not in known:
        raise ArgumentError(f"unknown architecture {arch!r} for --emit {emit}; expected one of {', '.join(known)}")
    return arch


def host_assembly(k) -> str:
    """Assembly of the host build (entry + body, optimized as the launcher runs it)."""
    import llvmlite.binding as llvm
    from ..codegen.targets import host_target_machine
    program = k.compiled("host").artifact
    module = llvm.parse_assembly(program.optimized_ir)
    return host_target_machine().emit_assembly(module)


def gcn_assembly(k, arch: str) -> str:
    """AMD GCN assembly of the GPU entry, compiled as ``codegen.compile_for_target`` does."""
    from ..codegen import abi
    from ..codegen.gpu import amdgpu
    from ..analysis.address_classes import lower_uniform_adds_text
    flat_types = [f.llvm_type for f in k.signature.flat_params()]
    text = lower_uniform_adds_text(k.module_text(), "amdgpu")
    module = abi.add_gpu_entry(text, k.body_name, flat_types, k.signature.grid_rank, "amdgpu")
    return amdgpu.compile_gcn_assembly(module, arch)


def derivative_ir(k) -> str:
    """The adoffload IR of the kernel's body (and a dynamic tape's counting body), readable:
    the other functions of the module (the primal body, helpers) are left out."""
    from .. import ir
    module, body_name = k.ir()
    names = [body_name]
    if k.tape is not None:
        names.append(k.tape.body_name)
    return "\n\n".join(ir.format_function(module.functions[n]) for n in names if n in module.functions)


def emit(k, what: str, arch: str | None) -> str:
    if what == "llvm":
        return k.module_text()
    if what == "ir":
        return derivative_ir(k)
    if what == "asm":
        return host_assembly(k)
    if what == "ptx":
        return k.compiled("nvptx", arch=arch).artifact
    return gcn_assembly(k, arch)


def reverse_stats(k):
    """The reverse engine's counts (enzyme/stats.py ReverseStats) for a vjp kernel ``k``: its
    base body is differentiated again, as enzyme/kernels.py does, to keep what the engine knew."""
    from .. import ir
    from ..enzyme.kernels import shadowed_params, llvm_activity
    from ..analysis.address_classes import ParallelInfo
    from ..enzyme.reverse import reverse
    base = k.base
    module = ir.import_module(base.module_text())
    body = module.functions[base.body_name]
    shared = base.shared if base.block is not None else ()
    activity = llvm_activity(base.signature, shadowed_params(base.signature, list(k.wrt)), "vjp", shared)
    rank = base.signature.grid_rank
    first_shared = rank + len(base.signature.flat_params())
    parallel = ParallelInfo(thread_args=tuple(range(rank)), uniform_args=frozenset(range(rank, len(body.args))),
                            block_shared_args=frozenset(range(first_shared, first_shared + len(shared))))
    return reverse(module, body, activity, name=f"{base.body_name}.adoffload.vjp", failure_arg=len(body.args) - 1,
                   deterministic=k.deterministic, parallel=parallel).stats


def kernel_stats(k, label: str) -> str:
    """A few lines of static counts for kernel ``k`` (see enzyme/stats.py)."""
    from ..enzyme.stats import format_counts, ir_stats
    module, body_name = k.ir()
    counts = ir_stats(module.functions[body_name])
    lines = [f"{k.name} ({label})",
             f"  atomics: {format_counts(counts.atomics)}",
             f"  uniform-address adds (one atomic per warp/block on GPUs): {format_counts(counts.uniform_adds)}",
             f"  lane-combined adds (NVPTX, noalias launches): {_lane_groups(k, module.functions[body_name])}",
             f"  loads: {_per(counts.loads)}"]
    base = getattr(k, "base", None)
    if base is not None:
        base_module, base_name = base.ir()
        lines[-1] += f" (primal: {_per(ir_stats(base_module.functions[base_name]).loads)})"
    if getattr(k, "mode", None) == "vjp":
        rs = reverse_stats(k)
        tape = ("dynamic (sized per thread by a counting kernel)" if rs.tape_bytes is None
                else f"{rs.tape_bytes} bytes per thread (static)" if rs.tape_bytes else "none")
        lines += [f"  tape: {tape}",
                  f"  recomputed loads as the AD engine emits them (LLVM merges repeats): {_per(rs.recomputed_loads)}",
                  f"  updates summed in registers: {rs.deferred_sites} in loops, added once as {rs.deferred_adds}"]
    return "\n".join(lines)


def _lane_groups(k, body) -> str:
    """Groups codegen/gpu/lane_combining.py would combine (the numpy launcher's GPU path is noalias)."""
    from ..codegen.gpu.lane_combining import find_groups
    shared = len(getattr(k, "shared", ()) or ()) if getattr(k, "block", None) is not None else 0
    groups = find_groups(body, k.signature.grid_rank, True, skip_args=shared)
    if not groups:
        return "none"
    sizes = ", ".join(str(len(g.sites)) for g in groups)
    return f"{len(groups)} group(s) of {sizes} adds, one atomic per lane where neighbouring lanes' addresses line up"


def _per(counts) -> str:
    from ..enzyme.stats import PER_ITERATION, PER_THREAD
    return f"{counts[PER_ITERATION]} per iteration, {counts[PER_THREAD]} per thread"


def stats_report(k, mode: str, wrt: str | None, lean: bool = False) -> str:
    """``--stats``: the selected kernel (``lean``: the lean derivative); for ``--mode primal``, the
    primal and both derivatives."""
    if mode != "primal":
        return kernel_stats(select(k, mode, wrt, 1, lean), f"{'lean ' if lean else ''}{mode} of {k.name}")
    parts = [kernel_stats(k, "primal")]
    if default_wrt(k):
        parts += [kernel_stats(select(k, m, None, 1), f"{m} of {k.name}") for m in ("jvp", "vjp")]
    return "\n".join(parts)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="adoffload",
                                  description="adoffload: differentiable offload kernels.")
    sub = top.add_subparsers(dest="command", required=True)
    sub.add_parser("doctor", help="versions, LLVM targets, devices and optional tools found")
    comp = sub.add_parser("compile", help="print a kernel's IR or machine code",
                          description="Print a kernel's IR or machine code to standard output.")
    comp.add_argument("target", metavar="FILE:KERNEL", help="a Python file and the name of a kernel in it")
    comp.add_argument("--emit", choices=EMITS, default="llvm",
                      help="llvm: canonical LLVM IR of the body; ir: adoffload IR; asm: host assembly; "
                           "ptx: NVIDIA PTX; gcn: AMD GCN assembly (default: llvm)")
    comp.add_argument("--mode", choices=MODES, default="primal", help="the kernel or its derivative (default: primal)")
    comp.add_argument("--wrt", help="comma-separated parameters to differentiate "
                                    "(default: every float parameter the kernel reads)")
    comp.add_argument("--width", type=int, default=1, help="vector width for --mode jvp (default 1)")
    comp.add_argument("--lean", action="store_true",
                      help="with --mode jvp/vjp: the lean derivative the JAX rules use (primal_outputs=False: "
                           "write-only primal outputs not stored, once-stored seeds read-only)")
    comp.add_argument("--stats", action="store_true",
                      help="print static counts instead of code: atomics (per loop iteration / per thread), "
                           "tape bytes and recomputed loads of the kernel (--mode primal: and its jvp and vjp)")
    comp.add_argument("--arch", help="sm_80, sm_90, ... for ptx (default sm_90); "
                                     "gfx90a, gfx942, gfx1100 for gcn (default gfx942)")
    return top


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.command == "doctor":
            from .doctor import report
            print(report())
            return 0
        arch = check_arch(args.emit, args.arch)
        if args.stats:
            if args.width != 1:
                raise ArgumentError("--stats reports width-1 kernels; leave out --width")
            sys.stdout.write(stats_report(load_kernel(args.target), args.mode, args.wrt, args.lean) + "\n")
            return 0
        k = select(load_kernel(args.target), args.mode, args.wrt, args.width, args.lean)
        sys.stdout.write(emit(k, args.emit, arch).rstrip() + "\n")
        return 0
    except Error as exc:
        message = " ".join(str(exc).split("\n", 1)[0].split()) if not _is_source_error(exc) else str(exc)
        print(f"error: {message}", file=sys.stderr)
        return 1


def _is_source_error(exc: Error) -> bool:
    """Source errors keep their lines: the second shows the offending code with a caret."""
    from ..errors import SourceError
    return isinstance(exc, SourceError)
