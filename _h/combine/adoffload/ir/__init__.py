"""The SSA IR (a typed mirror of LLVM IR), its LLVM import/export, canonicalization and verifier."""
from .core import (ArrayType, Argument, Block, Constant, ConstantExpr, FloatType, Function, FunctionType,
                   GlobalVariable, InlineAsm, Instruction, IntType, LabelType, MetadataType, MetadataValue, Module,
                   PointerType, SourceLocation, StructType, TERMINATORS, Type, Value, VectorType, VoidType,
                   const, f16, f32, f64, i1, i8, i16, i32, i64, label, ptr, void)
from .builder import Builder
from .canonicalize import canonicalize, prepare_for_analysis
from .llvm_import import import_module
from .llvm_export import export_module
from .verify import verify
from .printer import format_function, format_instruction, format_module
