"""Array element addresses with bounds checks, and local arrays (``ado.zeros``).

Bounds protocol (docs/ARCHITECTURE.md §1): each index is checked with one unsigned compare
``index <u shape`` (a negative index is a huge unsigned number, so it fails too: no
wrap-around). On failure the status record gets code 1, the parameter index, the index and
the dimension, and the function aborts before touching memory. Local arrays use the same
code with ``param_index = -1 - n`` for the kernel's n-th local array (counted from 0 in
order of appearance, helpers included). An index that is exactly ``tid()`` of axis a, used in
dimension d of parameter p, is a *candidate fact* (p, d, a); when the caller passes it in
``proven``, that check is left out.
"""
from __future__ import annotations

import ast

from llvmlite import ir

from ..language.status import OUT_OF_BOUNDS
from ..errors import KernelTypeError, UnsupportedConstructError
from ..language.types import ArrayType, ScalarType
from . import typing_rules as rules
from .context import I64, llvm_type
from .values import ArrayRef, Literal, Scalar, describe


class ArrayLowering:
    """Mixin of FunctionLowering for array indexing and local arrays."""

    def index_values(self, array: ArrayRef, index_node: ast.expr) -> list:
        if isinstance(index_node, ast.Slice):
            raise UnsupportedConstructError("slices are not supported in kernels; index one "
                                            "element at a time")
        index = self.visit(index_node)
        return self.index_list(array, index)

    def index_list(self, array: ArrayRef, index) -> list:
        indices = list(index) if isinstance(index, tuple) else [index]
        if len(indices) != array.type.ndim:
            raise KernelTypeError(f"array '{array.name}' has {array.type.ndim} dimension(s) but "
                                  f"was indexed with {len(indices)} index(es); kernels index "
                                  f"single elements")
        return indices

    def as_index(self, value, array: ArrayRef) -> Scalar:
        value = self.scalar(value, f"index into array '{array.name}'")
        kind = rules.literal_kind(value.value) if isinstance(value, Literal) else rules.kind(value.type)
        if kind != "int":
            raise KernelTypeError(f"array index must be an integer, got {describe(value)} "
                                  f"(array '{array.name}')")
        if isinstance(value, Literal) and value.value < 0:
            raise KernelTypeError(f"negative index {value.value} into array '{array.name}': kernels do not count "
                                  f"from the end as Python does (every negative index is out of bounds); write "
                                  f"len(x) {value.value:+d} or x.shape[k] {value.value:+d}")
        scalar = self.materialize(value, rules.i64)
        return Scalar(scalar.value, rules.i64, value.tid_axis if isinstance(value, Scalar) else None)

    def element_address(self, array: ArrayRef, index_node: ast.expr) -> ir.Value:
        return self.address_of(array, self.index_values(array, index_node))

    def address_of(self, array: ArrayRef, indices: list) -> ir.Value:
        """Bounds-check every index, then compute the C-contiguous element address."""
        checked = [self.as_index(i, array) for i in indices]
        for dim, index in enumerate(checked):
            self.check_index(array, dim, index)
        b = self.builder
        flat = checked[0].value
        for dim in range(1, len(checked)):
            flat = b.add(b.mul(flat, array.shape[dim]), checked[dim].value)
        element = llvm_type(array.type.dtype)
        return b.gep(array.pointer, [flat], inbounds=True, source_etype=element)

    def check_index(self, array: ArrayRef, dim: int, index: Scalar) -> None:
        if index.tid_axis is not None and not array.is_local:
            fact = (array.param_index, dim, index.tid_axis)
            self.ctx.candidate_facts.add(fact)
            if fact in self.ctx.proven:
                return
        if not self.ctx.bounds_check:
            return
        if isinstance(index.value, ir.Constant) and isinstance(array.shape[dim], ir.Constant) \
                and 0 <= index.value.constant < array.shape[dim].constant:
            return      # a constant index into a local array: checked now
        ok = self.builder.icmp_unsigned("<", index.value, array.shape[dim])
        self.guard(ok, lambda: self.record_status(OUT_OF_BOUNDS, array.param_index, index.value, dim))

    def new_local_array(self, shape: tuple[int, ...], dtype: ScalarType) -> ArrayRef:
        """Stack storage for ``ado.zeros(shape, dtype)``, zero-filled where the call is."""
        count = 1
        for extent in shape:
            count *= extent
        element = llvm_type(dtype)
        storage = self.alloca_builder.alloca(element, size=ir.Constant(I64, count), name="local")
        memset = self.ctx.declare("llvm.memset.p0.i64", ir.VoidType(),
                                  [ir.PointerType(), ir.IntType(8), I64, ir.IntType(1)])
        self.builder.call(memset, [storage, ir.Constant(ir.IntType(8), 0),
                                   ir.Constant(I64, count * max(dtype.bits // 8, 1)),
                                   ir.Constant(ir.IntType(1), 0)])
        number = self.ctx.new_local_array_number()
        return ArrayRef(f"local array #{number}", ArrayType(dtype, len(shape), "inout"), storage,
                        tuple(ir.Constant(I64, e) for e in shape), -1 - number)
