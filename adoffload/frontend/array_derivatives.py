"""``ado.grad`` / ``ado.value_and_grad`` / ``ado.jvp`` of a helper called with array arguments.

Calling convention (docs/language.md, "Derivatives of helpers with array arguments"):

* ``e = ado.value_and_grad(f)(x, *args, out=g)``: ``e = f(x, *args)``; ``g`` is overwritten with
  df/dx (same shape and dtype as ``x``). ``ado.grad(f)(x, *args, out=g)`` writes ``g`` only.
  Several array argnums take ``out=(g0, g1, ...)`` in argnums order. Every differentiated argument
  is then an array (scalars and arrays are not mixed in one reverse-mode call).
* ``y, dy = ado.jvp(f, argnums=(0,))(x, *args, dx)``: the tangents of the argnums arguments follow
  the arguments, in argnums order; an array's tangent is an array of its shape whose contents are
  the tangent of the array's contents: read on entry, and where ``f`` writes the array, written
  with the tangent of what it writes (``ado.jvp(residual, argnums=(0, 3))(x, t, y, r, dx, dr)``
  writes ``r`` and ``dr = J dx``). A helper returning nothing gives nothing.
* ``ado.jvp(f, argnums=(0, 3), width=K)(x, t, y, r, V, D)``: K tangents in one forward pass, each
  tangent array ``(K, *shape)`` with lane ``l`` in row ``l`` (placeholder kind ``jvpw<K>``); array
  argnums of a helper returning nothing only.

Differentiated arrays and their gradient/tangent arrays must be the thread's local arrays
(``ado.zeros``) or a block kernel's shared arrays: compile-time shapes, memory no other thread of
a plain kernel sees. Other array arguments may be kernel parameters too.

The front end emits the helper as for an ordinary call (``mode="inline"``: status record and
failure flag) and a *wrapper* ``@<helper>.adoffload.inner.wrap<N>`` that passes the constant
shapes of local and shared arrays (so the helper's loops over them have constant trip counts and
its adjoint a static tape) and stores a float result through a trailing pointer. The placeholder
``@adoffload.inner.array_<kind>.<positions>.<locals>.<wrapper>`` (positions: wrapper arguments,
ascending; locals: ``<argument>x<bytes>`` of each float array of the thread, or ``none``) is defined from the wrapper's derivative by ``enzyme/inner_arrays.py``.
"""
from __future__ import annotations

from llvmlite import ir

from ..errors import KernelTypeError, UnsupportedConstructError
from ..language.types import ScalarType
from .context import I1, I64, llvm_type
from .helpers import PTR, argument_key, compile_helper
from .values import ArrayRef, Literal, PyObject, Scalar, describe

ARRAY_PREFIX = "adoffload.inner.array_"


class ArrayDerivativeCalls:
    """Mixin of FunctionLowering: derivative calls of helpers taking arrays."""

    def call_array_derivative(self, derivative, values: list, out, what: str):
        helper, kind, positions = derivative.helper, derivative.kind, derivative.positions
        width = getattr(derivative, "width", None)     # None: one tangent; K: a leading axis of K lanes
        n = len(values) - (len(positions) if kind == "jvp" else 0)
        args = [self._array_call_argument(v, k, what) for k, v in enumerate(values[:n])]
        for k in positions:
            self._check_differentiated(args[k], k, what)
        if kind == "jvp":
            if out is not None:
                raise KernelTypeError(f"{what}: out= is for ado.grad / ado.value_and_grad; a jvp's "
                                      f"tangents follow the arguments")
            if width is not None and any(not isinstance(args[k], ArrayRef) for k in positions):
                raise KernelTypeError(f"{what}: width={width} differentiates array arguments only (each "
                                      f"tangent an array with a leading axis of {width}); argnums "
                                      f"{derivative.positions} includes a scalar")
            shadows = [self._tangent(values[n + j], args[k], k, what, width) for j, k in enumerate(positions)]
        else:
            if any(not isinstance(args[k], ArrayRef) for k in positions):
                raise KernelTypeError(f"{what}: argnums mixes array and scalar arguments; differentiate "
                                      f"the scalars in a call of their own (they return their partials)")
            shadows = self._gradient_arrays(out, args, positions, what)
        self._check_distinct(args, [s for s in shadows if isinstance(s, ArrayRef)], what)
        self._check_unaliased(args, positions, what)
        compiled = self._inline_helper(helper, args)
        result = compiled.results
        if kind != "jvp" or result is not None:
            if not isinstance(result, ScalarType) or not result.is_float:
                raise KernelTypeError(f"{what}: the helper must return one float value (it returns "
                                      f"{'nothing' if result is None else repr(result)})")
        if width is not None and result is not None:
            raise KernelTypeError(f"{what}: width={width} is for helpers that return nothing (their "
                                  f"results written into arrays, whose tangents get the lanes); this one "
                                  f"returns {result!r}")
        wrapper, slots = self._wrapper(compiled, args)
        local_bytes = {slots[k]: _nbytes(a) for k, a in enumerate(args)
                       if isinstance(a, ArrayRef) and a.is_local and a.type.dtype.is_float}
        order = sorted(range(len(positions)), key=lambda j: positions[j])
        wrap_positions = [slots[positions[j]] for j in order]
        shadows = [shadows[j] for j in order]
        if kind != "jvp":
            for g in shadows:
                self._zero(g)
        if width is not None and width > 1:       # one lane: a (1, *shape) tangent is laid out as a plain one
            kind = f"jvpw{width}"
        return self._emit_array_placeholder(kind, wrapper, wrap_positions, local_bytes, args, shadows, result)

    # --- arguments ---------------------------------------------------------------------------

    def _array_call_argument(self, value, k: int, what: str):
        if isinstance(value, ArrayRef):
            return value
        if isinstance(value, (tuple, PyObject)):
            raise KernelTypeError(f"{what}: argument {k} is {describe(value)}; pass numbers and arrays")
        return self.materialize(value)

    def _check_differentiated(self, value, k: int, what: str) -> None:
        if isinstance(value, ArrayRef):
            if not value.type.dtype.is_float:
                raise KernelTypeError(f"{what}: argument {k} is {describe(value)}; only float arrays "
                                      f"can be differentiated")
            if not value.is_local:
                raise UnsupportedConstructError(
                    f"{what}: argument {k} is {describe(value)}, a kernel parameter; a helper is "
                    f"differentiated with respect to the thread's own arrays only: copy it into a "
                    f"local array (ado.zeros) or a block's shared array first")
        elif not value.type.is_float:
            raise KernelTypeError(f"{what}: argument {k} is {describe(value)}; only float arguments "
                                  f"can be differentiated")

    def _like(self, shadow, primal: ArrayRef, k: int, what: str, role: str, width: int | None = None) -> ArrayRef:
        if not isinstance(shadow, ArrayRef):
            raise KernelTypeError(f"{what}: the {role} of array argument {k} must be an array like it, "
                                  f"got {describe(shadow)}")
        if not shadow.is_local:
            raise UnsupportedConstructError(f"{what}: the {role} of argument {k} is {describe(shadow)}, "
                                            f"a kernel parameter; use a local array (ado.zeros) or a "
                                            f"block's shared array")
        shapes = [tuple(e.constant for e in a.shape) for a in (shadow, primal)]
        if width is not None:
            shapes[1] = (width,) + shapes[1]
        if shadow.type.dtype != primal.type.dtype or shapes[0] != shapes[1]:
            lanes = f" (a leading axis of {width} lanes, then the argument's shape)" if width is not None else \
                ", like the argument"
            raise KernelTypeError(f"{what}: the {role} of argument {k} is {describe(shadow)} of shape "
                                  f"{shapes[0]}; it must be {primal.type.dtype!r} of shape {shapes[1]}{lanes}")
        return shadow

    def _tangent(self, value, primal, k: int, what: str, width: int | None = None):
        if isinstance(primal, ArrayRef):
            return self._like(value, primal, k, what, "tangent", width)
        if isinstance(value, ArrayRef):
            raise KernelTypeError(f"{what}: argument {k} is a scalar, so its tangent must be a number, "
                                  f"got {describe(value)}")
        return self.coerce(value, primal.type, f"the tangent of argument {k} of {what}")

    def _gradient_arrays(self, out, args, positions, what: str) -> list:
        if out is None:
            raise KernelTypeError(f"{what}: the gradient of an array argument is written to an array: "
                                  f"pass out=g (g = ado.zeros(shape, dtype) like the argument)")
        outs = list(out) if isinstance(out, tuple) else [out]
        if len(outs) != len(positions):
            raise KernelTypeError(f"{what}: out= needs {len(positions)} array(s), one per argnums "
                                  f"entry, got {len(outs)}")
        return [self._like(g, args[k], k, what, "gradient (out=)") for g, k in zip(outs, positions)]

    def _check_distinct(self, args, shadows, what: str) -> None:
        seen = {}
        for role, array in [("argument", a) for a in args if isinstance(a, ArrayRef)] + \
                           [("derivative array", s) for s in shadows]:
            other = seen.get(id(array.pointer))
            if other is not None and (role != "argument" or other != "argument"):
                raise KernelTypeError(f"{what}: {describe(array)} is passed both as {other} and as "
                                      f"{role}; derivative arrays must be arrays of their own")
            seen[id(array.pointer)] = role

    def _check_unaliased(self, args, positions, what: str) -> None:
        """A differentiated array passed again as another argument would alias a Dup pointer with a
        Const one (the engine takes distinct arguments for distinct memory)."""
        for k in positions:
            if not isinstance(args[k], ArrayRef):
                continue
            for j, a in enumerate(args):
                if j != k and isinstance(a, ArrayRef) and a.pointer is args[k].pointer:
                    raise KernelTypeError(f"{what}: {describe(a)} is argument {k}, which is differentiated, "
                                          f"and argument {j} too; pass a copy as argument {j}")

    # --- the helper and its wrapper ----------------------------------------------------------

    def _inline_helper(self, helper, args):
        if helper.has_custom_derivative:
            raise UnsupportedConstructError(f"helper '{helper.__name__}' has a custom derivative, which "
                                            f"takes scalars only; it cannot be called with arrays")
        key = (helper.pyfunc, tuple(argument_key(a) for a in args), self.default_float)
        compiled = self.ctx.helpers.get(key)
        if compiled is None:
            if key in self.ctx.helpers_in_progress:
                raise UnsupportedConstructError(f"helper '{helper.__name__}' calls itself; recursion "
                                                f"is not supported in kernels")
            self.ctx.helpers_in_progress.add(key)
            try:
                compiled = compile_helper(self, helper.pyfunc, args, mode="inline")
            finally:
                self.ctx.helpers_in_progress.discard(key)
            self.ctx.helpers[key] = compiled
        return compiled

    def _wrapper(self, compiled, args):
        """The wrapper function and, per helper argument, its position among the wrapper's args."""
        constant = tuple(tuple(e.constant for e in a.shape) if isinstance(a, ArrayRef) and a.is_local
                         else None for a in args)
        key = ("inner.wrap", compiled.function.name, constant)
        hit = self.ctx.helpers.get(key)
        if hit is not None:
            return hit
        types, slots = [], []
        for a, shape in zip(args, constant):
            slots.append(len(types))
            if isinstance(a, ArrayRef):
                types.append(PTR)
                if shape is None:
                    types.extend(I64 for _ in range(a.type.ndim))
            else:
                types.append(llvm_type(a.type))
        returns = compiled.results is not None
        types += [PTR, PTR] + ([PTR] if returns else [])
        name = self.ctx.unique_name(f"{compiled.function.name}.adoffload.inner.wrap")
        wrapper = ir.Function(self.ctx.module, ir.FunctionType(ir.VoidType(), types), name)
        b = ir.IRBuilder(wrapper.append_basic_block("entry"))
        flat, params = [], iter(wrapper.args)
        for a, shape in zip(args, constant):
            flat.append(next(params))
            if isinstance(a, ArrayRef):
                flat.extend(ir.Constant(I64, e) for e in shape) if shape is not None else \
                    flat.extend(next(params) for _ in range(a.type.ndim))
        status, failed = next(params), next(params)
        value = b.call(compiled.function, flat + [status, failed])
        if returns:
            b.store(value, next(params))
        b.ret_void()
        self.ctx.helpers[key] = (wrapper, slots)
        return wrapper, slots

    # --- the call ----------------------------------------------------------------------------

    def _zero(self, array: ArrayRef) -> None:
        """``array[...] = 0`` element by element in a loop (shared arrays: the race check reads stores)."""
        count = 1
        for e in array.shape:
            count *= e.constant
        element = llvm_type(array.type.dtype)
        counter = self.alloca_builder.alloca(I64, name="zero.counter")
        b = self.builder
        b.store(ir.Constant(I64, 0), counter)
        head, body, done = self.new_block("zero.head"), self.new_block("zero.body"), self.new_block("zero.done")
        b.branch(head)
        b.position_at_end(head)
        k = b.load(counter)
        b.cbranch(b.icmp_unsigned("<", k, ir.Constant(I64, count)), body, done)
        b.position_at_end(body)
        b.store(ir.Constant(element, 0.0), b.gep(array.pointer, [k], inbounds=True, source_etype=element))
        b.store(b.add(k, ir.Constant(I64, 1)), counter)
        b.branch(head)
        b.position_at_end(done)

    def _emit_array_placeholder(self, kind, wrapper, wrap_positions, local_bytes, args, shadows, result):
        b = self.builder
        flat = []
        for a in args:
            if isinstance(a, ArrayRef):
                flat.append(a.pointer)
                if not a.is_local:
                    flat.extend(a.shape)
            else:
                flat.append(a.value)
        status = self.status if self.status is not None else ir.Constant(PTR, None)
        failed = self.alloca_builder.alloca(I1, name="helper.failed")
        b.store(ir.Constant(I1, 0), failed)
        shadow_values = [s.pointer if isinstance(s, ArrayRef) else s for s in shadows]
        if kind.startswith("jvp"):
            ret = ir.VoidType() if result is None else ir.LiteralStructType([llvm_type(result)] * 2)
        else:
            ret = llvm_type(result) if kind == "value_and_grad" else ir.VoidType()
        operands = flat + [status, failed] + shadow_values
        locals_ = "_".join(f"{k}x{n}" for k, n in sorted(local_bytes.items())) or "none"
        name = f"{ARRAY_PREFIX}{kind}.{'_'.join(map(str, wrap_positions))}.{locals_}.{wrapper.name}"
        declaration = self.ctx.declare(name, ret, [v.type for v in operands])
        call = b.call(declaration, operands)
        self.guard(b.not_(b.load(failed)), lambda: None)
        if kind == "grad":
            return PyObject(None)
        if kind == "value_and_grad":
            return Scalar(call, result)
        if result is None:
            return PyObject(None)
        return Scalar(b.extract_value(call, 0), result), Scalar(b.extract_value(call, 1), result)


def _nbytes(array: ArrayRef) -> int:
    count = array.type.dtype.bits // 8
    for e in array.shape:
        count *= e.constant
    return count


def has_arrays(values, out) -> bool:
    """Whether a derivative call takes the array path (an array argument or tangent, or out=)."""
    return out is not None or any(isinstance(v, ArrayRef) for v in values)


__all__ = ["ARRAY_PREFIX", "ArrayDerivativeCalls", "has_arrays", "Literal"]
