"""Enzyme-style calls on any function, including foreign LLVM IR: ``autodiff(mode, fn, *args)``.

Arguments are wrapped like Enzyme.jl's annotations: ``Const(x)`` (no derivative), ``Active(x)``
(a float scalar whose adjoint is returned; reverse mode), ``Duplicated(x, dx)`` (an array
with its shadow array, or in forward mode a float scalar with its tangent). A bare value is
Const. ``fn`` is an ``adoffload.foreign.ForeignFunction`` (``mod["lj"]``) or an ir Function
that belongs to a Module.

* ``autodiff(Reverse, f, ...)`` returns one entry per argument: the adjoint (a Python float)
  for Active arguments, None otherwise; Duplicated shadows accumulate the adjoints in place.
  A float-returning function is seeded with 1.0; a void one is seeded through its Duplicated
  output shadows (which are consumed, as in Enzyme).
* ``autodiff(Forward, f, ...)`` returns the tangent of the result (None for a void function,
  whose Duplicated shadows then hold the output tangents).

The derivative is built once per function and activity, JIT-compiled for this CPU and
called through ctypes.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ArgumentError, ShapeError
from ..ir.core import FloatType, Function, IntType, Module
from .activity import ACTIVE, CONST, DUP, Activity, is_float_type
from .forward import forward
from .control_slice import writes_caller_memory
from .host import HostFunction, compile_host


class Mode:
    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


Forward = Mode("Forward")
Reverse = Mode("Reverse")


@dataclass(frozen=True)
class Const:
    value: object


@dataclass(frozen=True)
class Active:
    value: float


@dataclass(frozen=True)
class Duplicated:
    value: object
    shadow: object


def _resolve(fn) -> tuple[Function, Module]:
    ir_fn = getattr(fn, "ir", fn)
    if not isinstance(ir_fn, Function):
        raise ArgumentError(f"autodiff needs a ForeignFunction (from ado.from_llvm) or an ir Function, got {fn!r}")
    owner = getattr(getattr(fn, "module", None), "ir", None) or ir_fn.parent
    if not isinstance(owner, Module):
        raise ArgumentError(f"function @{ir_fn.name} belongs to no module")
    return ir_fn, owner


def _activity(mode: Mode, fn: Function, args) -> list[Activity]:
    if len(args) != len(fn.args):
        raise ArgumentError(f"@{fn.name} takes {len(fn.args)} arguments ({', '.join(a.name for a in fn.args)}), "
                            f"got {len(args)}")
    acts = []
    for arg, value in zip(fn.args, args):
        where = f"argument %{arg.name} of @{fn.name}"
        if not arg.type.is_pointer:
            _check_scalar(where, arg.type, _raw(value))
            if isinstance(value, Duplicated):
                _check_scalar(f"{where}: the tangent", arg.type, value.shadow)
        if isinstance(value, Active):
            if mode is Forward:
                raise ArgumentError(f"{where}: Active is for reverse mode; use Duplicated(x, dx) in forward mode")
            if arg.type.is_pointer or not is_float_type(arg.type):
                raise ArgumentError(f"{where}: Active needs a float scalar, the argument is {arg.type}")
            acts.append(ACTIVE)
        elif isinstance(value, Duplicated):
            if not arg.type.is_pointer and (mode is Reverse or not is_float_type(arg.type)):
                raise ArgumentError(f"{where}: Duplicated needs an array" +
                                    (" (use Active for a scalar in reverse mode)" if mode is Reverse else
                                     f" or a float scalar, the argument is {arg.type}"))
            if arg.type.is_pointer:
                _check_shadow(where, value)
            acts.append(DUP)
        else:
            acts.append(CONST)
    return acts


def _check_scalar(where: str, t, value) -> None:
    """A scalar argument must be a number of its kind: ctypes' own refusal ("argument 1: TypeError:
    wrong type") names neither the argument nor the function."""
    if not isinstance(t, (FloatType, IntType)):       # by-value structs, vectors: ctypes decides
        return
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(t, FloatType):
        ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))
        need = f"a float ({t})"
    else:
        ok = isinstance(value, (int, np.integer, bool, np.bool_))
        need = f"an integer ({t})"
    if not ok:
        raise ArgumentError(f"{where} is a scalar: pass {need}, got {type(value).__name__} {value!r}")


def _check_shadow(where: str, dup: Duplicated) -> None:
    x, dx = dup.value, dup.shadow
    if not isinstance(x, np.ndarray) or not isinstance(dx, np.ndarray):
        raise ArgumentError(f"{where}: Duplicated(x, dx) of a pointer needs two numpy arrays")
    for what, array in (("the array", x), ("the shadow", dx)):
        if not array.flags.c_contiguous:
            raise ArgumentError(f"{where}: {what} is not C-contiguous (strides {array.strides}); pass "
                                f"np.ascontiguousarray(...)")
    if x.shape != dx.shape or x.dtype != dx.dtype:
        raise ShapeError(f"{where}: shadow {dx.dtype}{list(dx.shape)} does not match the array "
                         f"{x.dtype}{list(x.shape)}")


def _check_overlaps(mode: Mode, fn: Function, args) -> None:
    """Refuse array arguments and shadows that share memory in a way the derivative cannot follow.

    * Reverse mode: two array arguments that share memory when the function may write through
      either: the reverse sweep re-reads an argument the function never writes from memory, which
      the forward sweep may have overwritten through the other (raw-pointer Rust or C without
      ``restrict`` called as ``f(x, x)`` got a silently wrong gradient).
    * Forward mode follows the memory as the primal does, and so the tangents only where the
      shadows share memory as the primals do: two written-through array arguments that share
      memory must both be Duplicated, with shadows at the same distance as the arrays (the same
      shadow array for the same array). ``f(x, x)`` with two separate shadows of ``x`` wrote the
      tangent into one and read the other, and one Const among them dropped the tangent of what
      the function wrote there: silently wrong tangents.
    * Both modes: two shadows that share memory where their arrays do not (or at another distance),
      when the function may write through either, and a shadow that shares memory with an array.

    Read-only sharing stays allowed (``dot(x, x)`` with one shadow, or two)."""
    arrays = []
    for arg, value in zip(fn.args, args):
        array = _raw(value)
        if arg.type.is_pointer and isinstance(array, np.ndarray) and array.nbytes:
            shadow = value.shadow if isinstance(value, Duplicated) and value.shadow.nbytes else None
            arrays.append((arg, array, shadow))
    written: dict[int, bool] = {}

    def writes(arg) -> bool:
        if id(arg) not in written:
            written[id(arg)] = _may_write_through(fn, arg)
        return written[id(arg)]
    for arg, array, shadow in arrays:
        for _, other_array, _ in arrays:
            if shadow is not None and _overlap(shadow, other_array):
                raise ArgumentError(f"argument %{arg.name} of @{fn.name}: its shadow shares memory with an array "
                                    f"argument; pass a separate shadow array")
    for k, (a, x, dx) in enumerate(arrays):
        for b, y, dy in arrays[k + 1:]:
            both = [arg for arg in (a, b) if writes(arg)]
            if not both:
                continue
            mirrored = dx is not None and dy is not None and _address(dy) - _address(dx) == _address(y) - _address(x)
            if _overlap(x, y) and (mode is Reverse or not mirrored):
                need = ("reverse mode assumes distinct arrays (its reverse sweep re-reads memory the function "
                        "never writes through that argument). Pass a copy" if mode is Reverse else
                        "forward mode follows the tangents only where both are Duplicated and their shadows share "
                        "memory as the arrays do (the same shadow array for the same array). Pass the same shadow, "
                        "or a copy")
                raise ArgumentError(f"arguments %{a.name} and %{b.name} of @{fn.name} share memory and @{fn.name} "
                                    f"may write through %{both[0].name}; {need}")
            if dx is not None and dy is not None and _overlap(dx, dy) and not (mirrored and _overlap(x, y)):
                raise ArgumentError(f"the shadows of arguments %{a.name} and %{b.name} of @{fn.name} share memory "
                                    f"where their arrays do not, and @{fn.name} may write through "
                                    f"%{both[0].name}; pass separate shadow arrays")


def _address(array: np.ndarray) -> int:
    return array.ctypes.data


def _overlap(x: np.ndarray, y: np.ndarray) -> bool:
    return _address(x) < _address(y) + y.nbytes and _address(y) < _address(x) + x.nbytes


_NOT_WRITING_CALLS = ("llvm.lifetime", "llvm.assume", "llvm.experimental.noalias", "llvm.prefetch", "llvm.dbg")


def _may_write_through(fn: Function, arg) -> bool:
    """Whether a store, atomic or call (or a pointer escaping into memory) is reached through ``arg``."""
    users = fn.users()
    seen, work = {id(arg)}, [arg]
    while work:
        value = work.pop()
        for inst in users.get(value, []):
            op = inst.opcode
            if op == "store" or op in ("atomicrmw", "cmpxchg"):
                return True
            if op in ("call", "invoke") and not getattr(inst.callee, "name", "").startswith(_NOT_WRITING_CALLS):
                return True
            if op in ("getelementptr", "bitcast", "addrspacecast", "phi", "select") and id(inst) not in seen:
                seen.add(id(inst))
                work.append(inst)
    return False


def _raw(value):
    return value.value if isinstance(value, (Const, Active, Duplicated)) else value


# (id(module), function name, mode, activity) -> (derived name, HostFunction, tape count HostFunction)
_CACHE: dict[tuple, tuple] = {}


def _derived(mode: Mode, fn: Function, module: Module, acts: list[Activity]):
    key = (id(module), fn.name, mode.name, tuple(acts))
    hit = _CACHE.get(key)
    if hit is not None and hit[0] in module.functions:
        return hit
    tape = None
    if mode is Forward:
        derived = forward(module, fn, acts)
    else:
        from .reverse import reverse
        name = f"{fn.name}.adoffload.rev." + "".join(a.value[0] for a in acts)
        result = reverse(module, fn, acts, name=name)
        derived, tape = result.function, result.tape
    funcs = compile_host(module, [derived.name])
    count = None
    if tape is not None:        # its own program: the pipeline that folds counted loops (host.compile_host)
        count_ir = module.functions[tape.count_function]
        count = compile_host(module, [tape.count_function], closed_forms=True)[tape.count_function]
        # a control slice that writes nothing the caller sees runs on the caller's arrays (no scratch copies)
        count.scratch = writes_caller_memory(count_ir, frozenset(count_ir.args[len(fn.args):]))
    entry = (derived.name, funcs[derived.name], count)
    _CACHE[key] = entry
    return entry


def autodiff(mode: Mode, fn, *args):
    """Differentiate ``fn`` at ``args`` (see the module docstring for the conventions)."""
    if mode not in (Forward, Reverse):
        raise ArgumentError(f"mode must be Forward or Reverse, got {mode!r}")
    ir_fn, module = _resolve(fn)
    acts = _activity(mode, ir_fn, args)
    _check_overlaps(mode, ir_fn, args)
    _, call, count = _derived(mode, ir_fn, module, acts)
    primal = [_raw(a) for a in args]
    if mode is Forward:
        shadows = [a.shadow for a, act in zip(args, acts) if act is not CONST]
        result = call(*primal, *shadows)
        return result if is_float_type(ir_fn.return_type) else None
    slots: list[np.ndarray | None] = []
    shadows = []
    for arg, a, act in zip(ir_fn.args, args, acts):
        if act is ACTIVE:
            slot = np.zeros(1, dtype=np.float32 if str(arg.type) == "float" else np.float64)
            shadows.append(slot)
            slots.append(slot)
        else:
            if act is DUP:
                shadows.append(a.shadow)
            slots.append(None)
    seed = [1.0] if is_float_type(ir_fn.return_type) else []
    tape = _tape(count, primal) if count is not None else None
    call(*primal, *shadows, *seed, *([tape, 0] if tape is not None else []))
    if tape is not None and tape.nbytes <= KEEP_TAPE_BYTES:
        count.tapes.append(tape)           # for the next call of this derivative
    return tuple(float(s[0]) if s is not None else None for s in slots)


# A tape up to this size is kept for the next call of the same derivative: a fresh block of that
# size costs its page faults on every call (about 9 ms per 100 MB on the 2-core development host).
KEEP_TAPE_BYTES = 1 << 30


def _tape(count: HostFunction, primal: list) -> np.ndarray:
    """A dynamic tape for one call: count its bytes (on scratch copies where the counting function
    may write the arrays), then take a kept tape at least that large or allocate one. The tape
    needs no initialization (tape.py). Calls from several threads each take their own: a kept tape
    is popped from the list before its call and given back after it."""
    scratch = [p.copy() if isinstance(p, np.ndarray) and count.scratch else p for p in primal]
    nbytes = np.zeros(1, np.int64)
    count(*scratch, nbytes)
    words = max(int(nbytes[0]) // 8, 1)
    while True:
        try:
            kept = count.tapes.pop()
        except IndexError:
            return np.empty(words, np.int64)
        if kept.size >= words:
            return kept


__all__ = ["Forward", "Reverse", "Const", "Active", "Duplicated", "autodiff"]
