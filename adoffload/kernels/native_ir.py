"""The LLVM IR of a native launch entry (native_entry.py): one plan's checks and launch, straight-line.

``entry_text(entry, plan, variant)`` writes ``ptr @adoffload_native_launch.N(ptr self, ptr args, ptr
kwargs)``, a ``METH_VARARGS | METH_KEYWORDS`` function: it checks the ``ADOFFLOAD_NATIVE_LAUNCH``
switch (off: the Python path) and tail-calls ``@adoffload_native_launch.N.body``, in which each other
check of the module docstring of native_entry.py is a compare and a branch to ``%fallback``; then the
launch. ``%fallback`` counts the reason and hands the call on to the target the entry's cell points
to, a (code, object) pair: the next entry of the kernel's chain (its ``.body``, called directly with
the next entry's object held, the switch already checked) or, code null, the Python path
(``PyObject_Call`` of the object). Objects the code compares against or calls
(types, dtypes, the plan's device, keyword names, the report function) are constants of the code,
kept alive by the entry (``entry.constant``). Scalars are packed as ``struct`` packs them
(launch_run.SLOT_FORMATS): ``f`` through ``PyFloat_AsDouble`` and a C cast, refused where the cast
overflows (struct's OverflowError); ``d``; ``?`` through ``PyObject_IsTrue``; ``b``/``i``/``q``
through ``PyLong_AsLongLongAndOverflow`` (``__index__``) and the range of the slot's width, in the
slot's low bytes, the rest zero.
"""
from __future__ import annotations

import sys

import numpy as np

from .launch_plan import KEY_FLAGS
from .native_layout import LAYOUT

ENTRY_NAME = "adoffload_native_launch"
GIL_RELEASE_THREADS = 32      # launches of more threads than this, or of a body with loops, release the GIL
STACK_SEED_BYTES = 4096       # the seed copies of a launch up to this size live on the entry's stack
REASONS = ("arguments", "grid", "device", "array type", "dtype", "shape", "flags", "scalar type", "scalar value",
           "overlap", "memory", "switched off")
"""Why an entry took the Python path (``NativeEntry.last_reason``)."""
SLOT_TYPES = frozenset({"float", "double", "i1", "i8", "i32", "i64", "ptr"})
INFINITY = "0x7FF0000000000000"

# The C API functions the entries call; MCJIT resolves them through the symbols of this process.
C_API = ("PyTuple_Size", "PyTuple_GetItem", "PyDict_Size", "PyDict_GetItem", "PyLong_AsLongLongAndOverflow",
         "PyFloat_AsDouble", "PyObject_IsTrue", "PyErr_Occurred", "PyErr_Clear", "PyObject_RichCompareBool",
         "PyUnicode_Compare", "PyEval_SaveThread", "PyEval_RestoreThread", "Py_IncRef", "Py_DecRef",
         "PyLong_FromVoidPtr", "PyObject_CallOneArg", "PyObject_Call", "PyMem_RawMalloc", "PyMem_RawFree")
_DECLARATIONS = """declare i64 @PyTuple_Size(ptr)
declare ptr @PyTuple_GetItem(ptr, i64)
declare i64 @PyDict_Size(ptr)
declare ptr @PyDict_GetItem(ptr, ptr)
declare i64 @PyLong_AsLongLongAndOverflow(ptr, ptr)
declare double @PyFloat_AsDouble(ptr)
declare i32 @PyObject_IsTrue(ptr)
declare ptr @PyErr_Occurred()
declare void @PyErr_Clear()
declare i32 @PyObject_RichCompareBool(ptr, ptr, i32)
declare i32 @PyUnicode_Compare(ptr, ptr)
declare ptr @PyEval_SaveThread()
declare void @PyEval_RestoreThread(ptr)
declare void @Py_IncRef(ptr)
declare void @Py_DecRef(ptr)
declare ptr @PyLong_FromVoidPtr(ptr)
declare ptr @PyObject_CallOneArg(ptr, ptr)
declare ptr @PyObject_Call(ptr, ptr, ptr)
declare ptr @PyMem_RawMalloc(i64)
declare void @PyMem_RawFree(ptr)
declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)
declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)
declare float @llvm.fabs.f32(float)
declare double @llvm.fabs.f64(double)
"""


def entry_text(entry, plan, variant) -> str:
    """The module text of ``plan``'s native entry (``entry``: its NativeEntry; ``variant``: the plan's
    host Variant, whose entry it calls)."""
    return _Writer(entry, plan, variant).text()


class _Writer:
    def __init__(self, entry, plan, variant):
        self.entry, self.plan, self.variant = entry, plan, variant
        self.lines: list[str] = []
        self.count = 0
        self.block = "%entry"
        self.fails: list[tuple[int, str]] = []           # (reason, block): the edges into %fallback
        self.allocas: list[str] = []                     # static stack slots, in the prologue

    # ---- emission ----------------------------------------------------------------------------
    def op(self, text: str) -> str:
        self.count += 1
        self.lines.append(f"  %t{self.count} = {text}")
        return f"%t{self.count}"

    def emit(self, text: str) -> None:
        self.lines.append(f"  {text}")

    def alloca(self, text: str) -> str:
        self.count += 1
        self.allocas.append(f"  %t{self.count} = alloca {text}")
        return f"%t{self.count}"

    def new_label(self) -> str:
        self.count += 1
        return f"%b{self.count}"

    def label(self, name: str) -> None:
        self.lines.append(f"{name[1:]}:")
        self.block = name

    def fail_if(self, bad: str, reason: str) -> None:
        """Take the Python path (for ``reason``) where the i1 ``bad`` holds; go on in a new block."""
        ok = self.new_label()
        self.fails.append((REASONS.index(reason) + 1, self.block))
        self.emit(f"br i1 {bad}, label %fallback, label {ok}")
        self.label(ok)

    def when(self, condition: str):
        """Emit the caller's next instructions in a block run only where the i1 ``condition`` holds;
        call the returned function to join again."""
        then, join = self.new_label(), self.new_label()
        self.emit(f"br i1 {condition}, label {then}, label {join}")
        self.label(then)

        def done():
            self.emit(f"br label {join}")
            self.label(join)
        return done

    def error_check(self, failed: str, reason: str) -> None:
        """Where ``failed`` (i1) may mean a Python error is set: clear it and take the Python path."""
        joined = self.when(failed)
        error_set = self.op(f"icmp ne ptr {self.op('call ptr @PyErr_Occurred()')}, null")
        cleared = self.when(error_set)
        self.emit("call void @PyErr_Clear()")
        self.fail_if("true", reason)
        cleared()
        joined()

    def field(self, obj: str, offset: int, ty: str) -> str:
        return self.op(f"load {ty}, ptr {self.op(f'getelementptr i8, ptr {obj}, i64 {offset}')}")

    def type_is_not(self, obj: str, kind) -> str:
        return self.op(f"icmp ne ptr {self.field(obj, LAYOUT.type, 'ptr')}, {self.entry.constant(kind)}")

    def int_check(self, obj: str, value: int, reason: str) -> None:
        """``obj`` is exactly an ``int`` equal to ``value``."""
        self.fail_if(self.type_is_not(obj, int), reason)
        overflow = self.alloca("i32")
        got = self.op(f"call i64 @PyLong_AsLongLongAndOverflow(ptr {obj}, ptr {overflow})")
        self.fail_if(self.op(f"icmp ne i64 {got}, {value}"), reason)

    def get_item(self, mapping: str, name: str) -> str:
        return self.op(f"call ptr @PyDict_GetItem(ptr {mapping}, ptr {self.entry.constant(sys.intern(name))})")

    # ---- the entry ---------------------------------------------------------------------------
    def text(self) -> str:
        plan, shape = self.plan, self.plan.call_shape
        names = [p.name for p in plan.visible]
        self.label("%entry")
        self.fail_if(self.op("icmp eq ptr %kwargs, null"), "grid")         # grid= is a keyword
        size = self.op("call i64 @PyTuple_Size(ptr %args)")
        self.fail_if(self.op(f"icmp ne i64 {size}, {shape.positional}"), "arguments")
        grid = self.get_item("%kwargs", "grid")
        self.fail_if(self.op(f"icmp eq ptr {grid}, null"), "grid")
        self.grid_check(grid, shape.grid)          # early: in a chain, other entries' launches often differ here
        device = self.get_item("%kwargs", "device")
        has_device = self.op(f"zext i1 {self.op(f'icmp ne ptr {device}, null')} to i64")
        expected = self.op(f"add i64 {has_device}, {len(shape.keywords) + 1}")
        size = self.op("call i64 @PyDict_Size(ptr %kwargs)")
        self.fail_if(self.op(f"icmp ne i64 {size}, {expected}"), "arguments")
        objects: dict[int, str] = {}
        for k in range(shape.positional):
            objects[k] = self.op(f"call ptr @PyTuple_GetItem(ptr %args, i64 {k})")
        for name in shape.keywords:
            value = self.get_item("%kwargs", name)
            self.fail_if(self.op(f"icmp eq ptr {value}, null"), "arguments")
            objects[names.index(name)] = value
        self.device_check(device, shape.device)
        items = {}           # param -> its slot value (scalars) or data address (arrays), an i64
        for k, kind in enumerate(shape.kinds):
            items[k] = self.array(objects[k], k, *kind) if type(kind) is tuple else self.scalar(objects[k], k, kind)
        for a, b in plan.overlap_pairs:
            end_a = self.op(f"add i64 {items[a]}, {plan.nbytes[a]}")
            end_b = self.op(f"add i64 {items[b]}, {plan.nbytes[b]}")
            before, after = self.op(f"icmp ult i64 {items[a]}, {end_b}"), self.op(f"icmp ult i64 {items[b]}, {end_a}")
            self.fail_if(self.op(f"and i1 {before}, {after}"), "overlap")
        self.launch(items)
        return self.module()

    def grid_check(self, grid: str, raw) -> None:
        if type(raw) is int:
            self.int_check(grid, raw, "grid")
            return
        self.fail_if(self.type_is_not(grid, tuple), "grid")
        self.fail_if(self.op(f"icmp ne i64 {self.op(f'call i64 @PyTuple_Size(ptr {grid})')}, {len(raw)}"), "grid")
        for a, g in enumerate(raw):
            self.int_check(self.op(f"call ptr @PyTuple_GetItem(ptr {grid}, i64 {a})"), g, "grid")

    def device_check(self, device: str, raw) -> None:
        """The plan's device object, or a string equal to it; absent: the default "cpu"."""
        absent = self.op(f"icmp eq ptr {device}, null")
        if not (type(raw) is str and raw == "cpu"):
            self.fail_if(absent, "device")
        joined = self.when(self.op(f"xor i1 {absent}, true"))
        same = self.op(f"icmp eq ptr {device}, {self.entry.constant(raw)}")
        if type(raw) is not str:
            self.fail_if(self.op(f"xor i1 {same}, true"), "device")
        else:
            compared = self.when(self.op(f"xor i1 {same}, true"))
            self.fail_if(self.type_is_not(device, str), "device")
            order = self.op(f"call i32 @PyUnicode_Compare(ptr {device}, ptr {self.entry.constant(raw)})")
            self.error_check(self.op(f"icmp eq i32 {order}, -1"), "device")
            self.fail_if(self.op(f"icmp ne i32 {order}, 0"), "device")
            compared()
        joined()

    def array(self, obj: str, k: int, dtype, flags: int) -> str:
        """Check one array argument against the plan; its data address."""
        shape = self.plan.shapes[self.plan.param_index[k]]
        self.fail_if(self.type_is_not(obj, np.ndarray), "array type")
        descr = self.field(obj, LAYOUT.descr, "ptr")
        self.fail_if(self.op(f"icmp ne ptr {descr}, {self.entry.constant(dtype)}"), "dtype")
        self.fail_if(self.op(f"icmp ne i32 {self.field(obj, LAYOUT.nd, 'i32')}, {len(shape)}"), "shape")
        if shape:
            dims = self.field(obj, LAYOUT.dimensions, "ptr")
            for d, extent in enumerate(shape):
                at = self.op(f"getelementptr i64, ptr {dims}, i64 {d}")
                self.fail_if(self.op(f"icmp ne i64 {self.op(f'load i64, ptr {at}')}, {extent}"), "shape")
        got = self.op(f"and i32 {self.field(obj, LAYOUT.flags, 'i32')}, {KEY_FLAGS}")
        self.fail_if(self.op(f"icmp ne i32 {got}, {flags}"), "flags")
        return self.op(f"ptrtoint ptr {self.field(obj, LAYOUT.data, 'ptr')} to i64")

    def scalar(self, obj: str, k: int, kind) -> str:
        """Check one scalar argument (its type; a value its slot holds); the slot's 8 bytes."""
        self.fail_if(self.type_is_not(obj, kind), "scalar type")
        slot = self.slot_type(k)
        if slot in ("float", "double"):
            value = self.op(f"call double @PyFloat_AsDouble(ptr {obj})")
            self.error_check(self.op(f"fcmp oeq double {value}, -1.0"), "scalar value")
            if slot == "double":
                return self.op(f"bitcast double {value} to i64")
            single = self.op(f"fptrunc double {value} to float")
            infinite = self.op(f"fcmp oeq float {self.op(f'call float @llvm.fabs.f32(float {single})')}, {INFINITY}")
            finite = self.op(f"fcmp one double {self.op(f'call double @llvm.fabs.f64(double {value})')}, {INFINITY}")
            self.fail_if(self.op(f"and i1 {infinite}, {finite}"), "scalar value")      # struct's OverflowError
            return self.op(f"zext i32 {self.op(f'bitcast float {single} to i32')} to i64")
        if slot == "i1":
            truth = self.op(f"call i32 @PyObject_IsTrue(ptr {obj})")
            self.error_check(self.op(f"icmp slt i32 {truth}, 0"), "scalar value")
            return self.op(f"zext i32 {truth} to i64")
        overflow = self.alloca("i32")
        value = self.op(f"call i64 @PyLong_AsLongLongAndOverflow(ptr {obj}, ptr {overflow})")
        self.fail_if(self.op(f"icmp ne i32 {self.op(f'load i32, ptr {overflow}')}, 0"), "scalar value")
        self.error_check(self.op(f"icmp eq i64 {value}, -1"), "scalar value")
        if slot == "i64":
            return value
        bits = {"i8": 8, "i32": 32}[slot]
        below = self.op(f"icmp slt i64 {value}, {-(1 << (bits - 1))}")
        above = self.op(f"icmp sgt i64 {value}, {(1 << (bits - 1)) - 1}")
        self.fail_if(self.op(f"or i1 {below}, {above}"), "scalar value")
        return self.op(f"and i64 {value}, {(1 << bits) - 1}")

    def slot_type(self, k: int) -> str:
        index = self.plan.param_index[k]
        for flat, llvm_type in zip(self.plan.signature.flat_params(), self.variant.compiled.flat_types):
            if flat.param_index == index and flat.role == "scalar":
                return llvm_type
        raise AssertionError(f"parameter {k} has no scalar slot")

    def launch(self, items: dict[int, str]) -> None:
        """After the checks: count, copy seeds, zero Out arrays, pack the slots, run, read the status."""
        plan, entry, variant = self.plan, self.entry, self.variant
        seeds = [(n, -(-max(plan.nbytes[n], 1) // 64) * 64) for n in plan.seeds]
        seed_bytes = sum(size for _, size in seeds)
        self.heap = None
        if seeds:
            if seed_bytes <= STACK_SEED_BYTES:
                area = self.alloca(f"[{seed_bytes} x i8], align 64")
            else:
                area = self.heap = self.op(f"call ptr @PyMem_RawMalloc(i64 {seed_bytes})")
                self.fail_if(self.op(f"icmp eq ptr {area}, null"), "memory")
            offset = 0
            for n, size in seeds:         # a reverse kernel clears its seed: it gets a copy
                copy = self.op(f"getelementptr i8, ptr {area}, i64 {offset}")
                self.emit(f"call void @llvm.memcpy.p0.p0.i64(ptr {copy}, ptr {self.op(f'inttoptr i64 {items[n]} to ptr')}, "
                          f"i64 {plan.nbytes[n]}, i1 false)")
                items[n] = self.op(f"ptrtoint ptr {copy} to i64")
                offset += size
        for counter in (entry.counter(0), entry.total(0)):
            count = self.op(f"load i64, ptr {counter}")
            self.emit(f"store i64 {self.op(f'add i64 {count}, 1')}, ptr {counter}")
        for n, size in plan.zeroed_bytes:
            self.emit(f"call void @llvm.memset.p0.i64(ptr {self.op(f'inttoptr i64 {items[n]} to ptr')}, i8 0, "
                      f"i64 {size}, i1 false)")
        slots = self.alloca(f"[{variant.words} x i64], align 8")
        status = self.alloca("[4 x i64], align 8")
        self.emit(f"call void @llvm.memset.p0.i64(ptr {status}, i8 0, i64 32, i1 false)")
        values = [items[flat.param_index] if flat.role != "shape" else str(plan.shape_of(flat.param_index)[flat.dim])
                  for flat in plan.signature.flat_params()]
        values += [str(g) for g in plan.grid] + [self.op(f"ptrtoint ptr {status} to i64")]
        for k, value in enumerate(values):
            self.emit(f"store i64 {value}, ptr {self.op(f'getelementptr i64, ptr {slots}, i64 {k}')}")
        release = plan.total > GIL_RELEASE_THREADS or not self.entry.loop_free
        if release:
            thread = self.op("call ptr @PyEval_SaveThread()")
        self.emit(f"call void inttoptr (i64 {variant.function.address} to ptr)(ptr {slots}, i64 0, i64 {plan.total})")
        if release:
            self.emit(f"call void @PyEval_RestoreThread(ptr {thread})")
        if self.heap is not None:
            self.emit(f"call void @PyMem_RawFree(ptr {self.heap})")
        failed = self.op(f"icmp ne i64 {self.op(f'load i64, ptr {status}')}, 0")
        self.emit(f"br i1 {failed}, label %report, label %done")
        self.report_status = status

    def module(self) -> str:
        entry = self.entry
        none, python = entry.constant(None), entry.constant(entry.python_call)
        environ, key, off = (entry.constant(obj) for obj in entry.switch)
        phi = ", ".join(f"[ {reason}, {block} ]" for reason, block in self.fails)
        body, allocas = "\n".join(self.lines), "\n".join(self.allocas)
        fallbacks, reason, passed = entry.counter(1), entry.counter(2), entry.counter(3)
        return f"""{_DECLARATIONS}
define ptr @"{entry.name}"(ptr %self, ptr %args, ptr %kwargs) {{
entry:
  %value = call ptr @PyDict_GetItem(ptr {environ}, ptr {key})
  %absent = icmp eq ptr %value, null
  br i1 %absent, label %on, label %compare
compare:
  %equal = call i32 @PyObject_RichCompareBool(ptr %value, ptr {off}, i32 2)
  %unequal = icmp eq i32 %equal, 0
  br i1 %unequal, label %on, label %off
off:
  %failed = icmp slt i32 %equal, 0
  br i1 %failed, label %clear, label %python
clear:
  call void @PyErr_Clear()
  br label %python
python:
  %fallbacks = load i64, ptr {fallbacks}
  %fallbacks.1 = add i64 %fallbacks, 1
  store i64 %fallbacks.1, ptr {fallbacks}
  store i64 {REASONS.index("switched off") + 1}, ptr {reason}
  %all_fallbacks = load i64, ptr {entry.total(1)}
  %all_fallbacks.1 = add i64 %all_fallbacks, 1
  store i64 %all_fallbacks.1, ptr {entry.total(1)}
  %result = call ptr @PyObject_Call(ptr {python}, ptr %args, ptr %kwargs)
  ret ptr %result
on:
  %launched = musttail call ptr @"{entry.name}.body"(ptr %self, ptr %args, ptr %kwargs)
  ret ptr %launched
}}

define ptr @"{entry.name}.body"(ptr %self, ptr %args, ptr %kwargs) {{
prologue:
{allocas}
  br label %entry
{body}
done:
  call void @Py_IncRef(ptr {none})
  ret ptr {none}
report:
  %address = call ptr @PyLong_FromVoidPtr(ptr {self.report_status})
  %no_address = icmp eq ptr %address, null
  br i1 %no_address, label %error, label %raise
raise:
  %raised = call ptr @PyObject_CallOneArg(ptr {entry.constant(entry.report)}, ptr %address)
  call void @Py_DecRef(ptr %address)
  ret ptr %raised
error:
  ret ptr null
fallback:
  %reason = phi i64 {phi}
  %fallbacks = load i64, ptr {fallbacks}
  %fallbacks.1 = add i64 %fallbacks, 1
  store i64 %fallbacks.1, ptr {fallbacks}
  store i64 %reason, ptr {reason}
  %target = load ptr, ptr {entry.cell()}
  %code = load ptr, ptr %target
  %object.at = getelementptr i8, ptr %target, i64 8
  %object = load ptr, ptr %object.at
  %to_python = icmp eq ptr %code, null
  br i1 %to_python, label %python, label %pass_on
python:
  %all_fallbacks = load i64, ptr {entry.total(1)}
  %all_fallbacks.1 = add i64 %all_fallbacks, 1
  store i64 %all_fallbacks.1, ptr {entry.total(1)}
  %result = call ptr @PyObject_Call(ptr %object, ptr %args, ptr %kwargs)
  ret ptr %result
pass_on:
  %passed = load i64, ptr {passed}
  %passed.1 = add i64 %passed, 1
  store i64 %passed.1, ptr {passed}
  call void @Py_IncRef(ptr %object)
  %passed.result = call ptr %code(ptr %object, ptr %args, ptr %kwargs)
  call void @Py_DecRef(ptr %object)
  ret ptr %passed.result
}}
"""
