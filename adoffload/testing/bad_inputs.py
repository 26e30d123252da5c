"""The bad-input matrix (issue 30): every kernel source against every launcher and one table of bad
inputs, generated from three descriptions rather than listed per combination.

* ``SOURCES``: how a source spells the same two kernels, ``map`` (``out[i] = a * x[i]**2``) and
  ``gather`` (``out[i] = a * x[(k[i] // m[i]) * 2]`` in 32-bit integers), and how it is called
  (``KINDS``: our kernels and CUDA/HIP ones through the numpy launcher with ``grid=`` or
  ``blocks=/threads=``, foreign functions as ``f(a, x, out, n)`` and ``enzyme.autodiff``);
* ``LAUNCHERS``: the primal call, ``jvp`` and ``vjp`` (``ado.jvp``/``ado.vjp``; for foreign
  functions ``autodiff(Forward | Reverse, ...)``) and ``jax`` (``ado.jax_kernel``, where the source
  has one);
* ``BAD_INPUTS``: what is wrong, which argument it replaces, and what must happen: an
  ``adoffload.Error`` whose message names the parameter (in-kernel faults: the array or the line),
  or, where the input is not wrong for that launch (a longer array than the grid reads), the
  right numbers.

``cases(device)`` crosses them (a bad input applies to the launchers that take its argument);
``run_case`` runs one, every array a view at the start of a larger buffer whose tail must come back
untouched, and returns what went wrong ("" when the case passed). A case the description marks
``crash_risk`` (a foreign function has no bounds to check) runs in a forked child, so a segfault
or SIGFPE is a failed case rather than the end of the run. ``KNOWN_FAILURES`` lists the cases
that fail today and why; ``markdown_table()`` renders the matrix for docs/reliability.md.
"""
from __future__ import annotations

import functools
import os
import re
import signal
import textwrap
from dataclasses import dataclass
from typing import Callable

import numpy as np

N = 8                      # threads of every launch, elements of every array
SENTINEL = 12345.0
TAIL = 16                  # elements of sentinel after every array
CHILD_TIMEOUT_S = 60


# ---- the kernels, in each source's spelling ------------------------------------------------------

C_SOURCE = """
void map(double a, const double *x, double *out, long n) {
    for (long i = 0; i < n; i++) out[i] = a * x[i] * x[i];
}
void gather(double a, const double *x, const int *k, const int *m, double *out, long n) {
    for (long i = 0; i < n; i++) {
        int j = (k[i] / m[i]) * 2;
        out[i] = a * x[j];
    }
}
"""

CUDA_SOURCE = """
__global__ void map(double a, const double *x, double *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * x[i] * x[i];
}
__global__ void gather(double a, const double *x, const int *k, const int *m, double *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int j = (k[i] / m[i]) * 2;
        out[i] = a * x[j];
    }
}
"""

LLVM_SOURCE = """
define void @map(double %a, ptr %x, ptr %out, i64 %n) {
entry:
  %none = icmp sle i64 %n, 0
  br i1 %none, label %done, label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %next, %loop ]
  %px = getelementptr double, ptr %x, i64 %i
  %v = load double, ptr %px
  %av = fmul double %a, %v
  %y = fmul double %av, %v
  %po = getelementptr double, ptr %out, i64 %i
  store double %y, ptr %po
  %next = add i64 %i, 1
  %more = icmp slt i64 %next, %n
  br i1 %more, label %loop, label %done
done:
  ret void
}
define void @gather(double %a, ptr %x, ptr %k, ptr %m, ptr %out, i64 %n) {
entry:
  %none = icmp sle i64 %n, 0
  br i1 %none, label %done, label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %next, %loop ]
  %pk = getelementptr i32, ptr %k, i64 %i
  %kv = load i32, ptr %pk
  %pm = getelementptr i32, ptr %m, i64 %i
  %mv = load i32, ptr %pm
  %q = sdiv i32 %kv, %mv
  %j = mul i32 %q, 2
  %j64 = sext i32 %j to i64
  %px = getelementptr double, ptr %x, i64 %j64
  %v = load double, ptr %px
  %y = fmul double %a, %v
  %po = getelementptr double, ptr %out, i64 %i
  store double %y, ptr %po
  %next = add i64 %i, 1
  %more = icmp slt i64 %next, %n
  br i1 %more, label %loop, label %done
done:
  ret void
}
"""


def _own_kernels() -> dict:
    import adoffload as ado

    def map(a: ado.f64, x: ado.In[ado.f64], out: ado.Out[ado.f64]):        # noqa: A001
        i = ado.tid()
        out[i] = a * x[i] * x[i]

    def gather(a: ado.f64, x: ado.In[ado.f64], k: ado.In[ado.i32], m: ado.In[ado.i32], out: ado.Out[ado.f64]):
        i = ado.tid()
        j = (k[i] // m[i]) * ado.i32(2)
        out[i] = a * x[j]
    return {"map": ado.kernel(map), "gather": ado.kernel(gather)}


def _cuda_kernels(language: str) -> dict:
    import adoffload as ado
    mod = (ado.from_cuda if language == "cuda" else ado.from_hip)(CUDA_SOURCE)
    return {"map": mod.kernel("map", a=ado.f64, x=ado.In[ado.f64], out=ado.Out[ado.f64], n=ado.i32),
            "gather": mod.kernel("gather", a=ado.f64, x=ado.In[ado.f64], k=ado.In[ado.i32], m=ado.In[ado.i32],
                                 out=ado.Out[ado.f64], n=ado.i32)}


def _numba_functions() -> dict:
    import numba
    from numba import types as t

    import adoffload as ado
    f64p, i32p = t.CPointer(t.float64), t.CPointer(t.int32)

    def map(a, x, out, n):                                                   # noqa: A001
        for i in range(n):
            out[i] = a * x[i] * x[i]

    def gather(a, x, k, m, out, n):
        for i in range(n):
            j = np.int32(np.int32(k[i] // m[i]) * np.int32(2))
            out[i] = a * x[j]
    return {"map": ado.from_numba(numba.cfunc(t.void(t.float64, f64p, f64p, t.int64))(map)),
            "gather": ado.from_numba(numba.cfunc(t.void(t.float64, f64p, i32p, i32p, f64p, t.int64))(gather))}


def _foreign(module) -> dict:
    return {"map": module["map"], "gather": module["gather"]}


def _c_functions() -> dict:
    import adoffload as ado
    return _foreign(ado.from_c(C_SOURCE, opt=2))


def _llvm_functions() -> dict:
    import adoffload as ado
    return _foreign(ado.from_llvm(LLVM_SOURCE))


def _has(module: str) -> bool:
    import importlib.util
    return importlib.util.find_spec(module) is not None


@dataclass(frozen=True)
class Source:
    name: str                     # the table's row label
    kind: str                     # "kernel" | "cuda" | "foreign": how it is launched
    build: Callable[[], dict]     # {"map": ..., "gather": ...}
    needs: str | None             # a module the source needs (its compiler), or None
    devices: tuple[str, ...]      # where its kernels run


SOURCES = (
    Source("@ado.kernel", "kernel", _own_kernels, None, ("cpu", "cuda")),
    Source("from_cuda", "cuda", lambda: _cuda_kernels("cuda"), "ziglang", ("cpu", "cuda")),
    Source("from_hip", "cuda", lambda: _cuda_kernels("hip"), "ziglang", ("cpu",)),
    Source("from_llvm", "foreign", _llvm_functions, None, ("cpu",)),
    Source("from_c", "foreign", _c_functions, "ziglang", ("cpu",)),
    Source("from_numba", "foreign", _numba_functions, "numba", ("cpu",)),
)


@functools.cache
def built(source_name: str) -> dict:
    """A source's kernels, compiled once per process."""
    return next(s for s in SOURCES if s.name == source_name).build()


# ---- the arguments and the reference ------------------------------------------------------------

def guarded(values, dtype=np.float64) -> np.ndarray:
    """``values`` as a view at the start of a buffer with TAIL sentinels after it."""
    values = np.asarray(values, dtype)
    buffer = np.full(values.size + TAIL, SENTINEL, dtype)
    buffer[:values.size] = values.reshape(-1)
    return buffer[:values.size].reshape(values.shape)


def good_arguments(kernel: str) -> dict:
    """The good arguments of a launch of ``kernel``: primals and shadows (all guarded)."""
    rng = np.random.default_rng(7)
    length = N if kernel == "map" else 2 * N
    values = {"a": 1.5, "x": guarded(rng.uniform(0.5, 2.0, length)), "out": guarded(np.zeros(N)),
              "d_a": 0.25, "d_x": guarded(rng.normal(size=length)), "d_out": guarded(rng.normal(size=N))}
    if kernel == "gather":
        values["k"] = guarded(np.arange(N), np.int32)
        values["m"] = guarded(np.ones(N), np.int32)
    return values


def reference(kernel: str, launcher: str, v: dict) -> dict:
    """What a right launch leaves in its outputs (the first N of x are what is read)."""
    a, d_a = v["a"], v["d_a"]
    if kernel == "map":
        x, dx = np.asarray(v["x"])[:N], np.asarray(v["d_x"])[:N]
        out = a * x * x
        if launcher in ("primal", "jax"):
            return {"out": out}
        if launcher == "jvp":
            return {"out": out, "d_out": d_a * x * x + 2 * a * x * dx}
        seed, d_x = np.asarray(v["d_out"]), np.array(v["d_x"], np.float64)
        d_x[:N] += 2 * a * x * seed
        return {"out": out, "d_x": d_x, "d_a": d_a + float(np.sum(x * x * seed))}
    index = (np.asarray(v["k"]) // np.asarray(v["m"])) * 2
    x = np.asarray(v["x"])
    out = a * x[index]
    if launcher in ("primal", "jax"):
        return {"out": out}
    if launcher == "jvp":
        return {"out": out, "d_out": d_a * x[index] + a * np.asarray(v["d_x"])[index]}
    seed = np.asarray(v["d_out"])
    d_x = np.asarray(v["d_x"]).copy()
    np.add.at(d_x, index, a * seed)
    return {"out": out, "d_x": d_x, "d_a": d_a + float(np.sum(x[index] * seed))}


# ---- the launchers --------------------------------------------------------------------------------

PRIMALS = {"map": ("a", "x", "out"), "gather": ("a", "x", "k", "m", "out")}
WRT = ("a", "x")


def _launch_kernel(source: Source, launcher: str, kernel, name: str, v: dict, device: str) -> dict:
    """Our kernels and CUDA ones: the numpy launcher (and ado.jax_kernel). Returns the outputs."""
    import adoffload as ado
    shape = {"blocks": 1, "threads": N} if source.kind == "cuda" else {"grid": N}
    extra = {"n": N} if source.kind == "cuda" else {}
    primals = {p: v[p] for p in PRIMALS[name]}
    if launcher == "jax":
        import jax
        with jax.enable_x64(True):
            f = ado.jax_kernel(kernel, out_shapes={"out": (N,)}, **shape)
            inputs = {p: value for p, value in primals.items() if p != "out"}
            return {"out": np.asarray(f(**inputs, **extra))}
    if launcher == "primal":
        kernel(**primals, **extra, **shape, device=device)
        return {"out": v["out"]}
    if launcher == "jvp":
        ado.jvp(kernel, WRT)(**primals, **extra, d_a=v["d_a"], d_x=v["d_x"], d_out=v["d_out"], **shape,
                             device=device)
        return {"out": v["out"], "d_out": v["d_out"]}
    d_a = v["d_a"] if isinstance(v["d_a"], np.ndarray) else guarded([v["d_a"]])
    ado.vjp(kernel, WRT)(**primals, **extra, d_a=d_a, d_x=v["d_x"], d_out=v["d_out"], **shape, device=device)
    return {"out": v["out"], "d_x": v["d_x"], "d_a": float(d_a[0]) if d_a.size else None}


def _launch_foreign(launcher: str, fn, name: str, v: dict) -> dict:
    """Foreign functions: ``f(a, x, ..., out, n)`` and enzyme.autodiff."""
    from adoffload import enzyme as ez
    primals = [v[p] for p in PRIMALS[name]]
    if launcher == "primal":
        fn(*primals, N)
        return {"out": v["out"]}
    rest = [ez.Const(p) for p in primals[2:-1]]          # k, m: integer data
    if launcher == "jvp":
        ez.autodiff(ez.Forward, fn, ez.Duplicated(v["a"], v["d_a"]), ez.Duplicated(v["x"], v["d_x"]), *rest,
                    ez.Duplicated(v["out"], v["d_out"]), N)
        return {"out": v["out"], "d_out": v["d_out"]}
    d_a = ez.autodiff(ez.Reverse, fn, ez.Active(v["a"]), ez.Duplicated(v["x"], v["d_x"]), *rest,
                      ez.Duplicated(v["out"], v["d_out"]), N)[0]
    return {"out": v["out"], "d_x": v["d_x"], "d_a": v["d_a"] + d_a}


KIND_LAUNCHERS = {"kernel": ("primal", "jvp", "vjp", "jax"), "cuda": ("primal", "jvp", "vjp", "jax"),
                  "foreign": ("primal", "jvp", "vjp")}
LAUNCHERS = ("primal", "jvp", "vjp", "jax")


def launch(source: Source, launcher: str, name: str, v: dict, device: str = "cpu") -> dict:
    kernel = built(source.name)[name]
    if source.kind == "foreign":
        return _launch_foreign(launcher, kernel, name, v)
    return _launch_kernel(source, launcher, kernel, name, v, device)


# ---- the bad inputs -------------------------------------------------------------------------------

def _set(param: str, make: Callable[[dict], object]) -> Callable[[dict], None]:
    def apply(v: dict) -> None:
        v[param] = make(v)
    return apply


def _set_item(param: str, index, value) -> Callable[[dict], None]:
    def apply(v: dict) -> None:
        v[param][index] = value
    return apply


def _longer_x(v: dict) -> None:
    """x (and its shadow with it) one longer than the launch reads: no error, the right numbers."""
    v["x"], v["d_x"] = guarded(np.append(v["x"], 3.0)), guarded(np.append(v["d_x"], 1.0))


SHADOWED = ("jvp", "vjp")


@dataclass(frozen=True)
class BadInput:
    name: str
    title: str                          # the table's column label
    kernel: str                         # "map" | "gather"
    launchers: tuple[str, ...]          # the launchers that take the argument it replaces
    apply: Callable[[dict], None]
    param: str | None                   # the parameter the message must name (None: a line)
    fault: bool = False                 # found inside the kernel, not in the arguments
    fine: tuple[tuple[str, str], ...] = ()   # (kind, launcher) for which it is no error: right numbers
    skip: tuple[tuple[str, str], ...] = ()   # (kind, launcher) that has no such argument


BAD_INPUTS = (
    BadInput("good", "good inputs", "map", LAUNCHERS, lambda v: None, None),
    BadInput("short", "x shorter than read", "map", LAUNCHERS, _set("x", lambda v: guarded(v["x"][:N - 1])), "x"),
    BadInput("long", "x longer than read", "map", LAUNCHERS, _longer_x, None,
             fine=tuple((kind, launcher) for kind in KIND_LAUNCHERS for launcher in LAUNCHERS)),
    BadInput("short_shadow", "d_x short", "map", SHADOWED, _set("d_x", lambda v: guarded(v["d_x"][:N - 1])), "d_x"),
    BadInput("long_shadow", "d_x long", "map", SHADOWED, _set("d_x", lambda v: guarded(np.append(v["d_x"], 1.0))),
             "d_x"),
    BadInput("short_out_shadow", "d_out short", "map", SHADOWED,
             _set("d_out", lambda v: guarded(v["d_out"][:N - 1])), "d_out"),
    BadInput("empty_scalar", "0-element a", "map", LAUNCHERS, _set("a", lambda v: guarded([])), "a"),
    BadInput("empty_scalar_shadow", "0-element d_a", "map", SHADOWED, _set("d_a", lambda v: guarded([])), "d_a",
             skip=(("foreign", "vjp"),)),         # autodiff returns an Active scalar's adjoint: no d_a array
    BadInput("dtype", "x float32", "map", LAUNCHERS, _set("x", lambda v: guarded(v["x"], np.float32)), "x"),
    BadInput("dtype_shadow", "d_x float32", "map", SHADOWED,
             _set("d_x", lambda v: guarded(v["d_x"], np.float32)), "d_x"),
    BadInput("strided", "x strided", "map", ("primal", "jvp", "vjp"),
             _set("x", lambda v: guarded(np.repeat(v["x"], 2))[::2]), "x"),
    BadInput("alias", "out is x", "map", ("primal", "jvp", "vjp"), _set("out", lambda v: v["x"]), "out",
             # C may write in place (no restrict): out = a x^2 is right, and forward mode follows the
             # memory as the primal does (enzyme/api.py); reverse mode refuses shared written memory
             fine=(("foreign", "primal"), ("foreign", "jvp"))),
    BadInput("none", "None for x", "map", LAUNCHERS, _set("x", lambda v: None), "x"),
    BadInput("out_of_bounds", "index past x", "gather", LAUNCHERS, _set_item("k", N - 1, 4 * N), "x", fault=True),
    BadInput("division_by_zero", "k // 0", "gather", LAUNCHERS, _set_item("m", 3, 0), None, fault=True),
    BadInput("index_overflow", "i32 index overflow", "gather", LAUNCHERS,
             _set("k", lambda v: guarded(np.full(N, 2**30 + 1), np.int32)), "x", fault=True),
)

# (source, launcher, bad input) that fail today, with why; "*" matches any. Checked strictly: a case
# listed here that passes fails the run, so the list stays true.
_JAX = ("under JAX an error the kernel finds (bounds, division) comes out of the FFI handler as JAX's "
        "jax.errors.JaxRuntimeError (OUT_OF_RANGE), whose message names the kernel and the array and index "
        "(or the line), not as an adoffload.Error")
_CUDA = "fixed on branch cudafaults"
_RAW = ("a raw pointer carries no length: the foreign function reads as far as its n says, past a short array "
        "(silently wrong numbers)")
_FOREIGN_FAULT = ("foreign code runs unchecked: an index past the array reads or writes outside it (silently "
                  "wrong numbers, memory overwritten, or SIGSEGV), an integer division by zero traps (SIGFPE)")
_NUMBA_DIVISION = ("numba's cfunc turns the ZeroDivisionError into an 'exception ignored' message and returns "
                   "(silently wrong numbers)")
_NULL = "None is passed as a NULL pointer (C may accept one); a function that dereferences it crashes (SIGSEGV)"

KNOWN_FAILURES: tuple[tuple[str, str, str, str], ...] = (
    ("from_cuda", "jax", "division_by_zero", f"{_CUDA} (SIGFPE on the host); then: {_JAX}"),
    ("from_hip", "jax", "division_by_zero", f"{_CUDA} (SIGFPE on the host); then: {_JAX}"),
    ("from_cuda", "*", "division_by_zero", f"{_CUDA} (SIGFPE on the host)"),
    ("from_hip", "*", "division_by_zero", f"{_CUDA} (SIGFPE on the host)"),
    *((s, "jax", b, _JAX) for s in ("@ado.kernel", "from_cuda", "from_hip")
      for b in ("short", "out_of_bounds", "division_by_zero", "index_overflow")),
    ("from_numba", "*", "division_by_zero", _NUMBA_DIVISION),
    *((s, "*", b, _FOREIGN_FAULT) for s in ("from_llvm", "from_c", "from_numba")
      for b in ("out_of_bounds", "division_by_zero", "index_overflow")),
    *((s, "primal", "short", _RAW) for s in ("from_llvm", "from_c", "from_numba")),
    *((s, "primal", "none", _NULL) for s in ("from_llvm", "from_c", "from_numba")),
)


def known_failure(source: str, launcher: str, bad: str) -> str | None:
    for s, l, b, reason in KNOWN_FAILURES:
        if s in ("*", source) and l in ("*", launcher) and b in ("*", bad):
            return reason
    return None


@dataclass(frozen=True)
class Case:
    source: Source
    launcher: str
    bad: BadInput
    device: str

    @property
    def id(self) -> str:
        return f"{self.source.name.lstrip('@').replace('ado.', '')}-{self.launcher}-{self.bad.name}"

    @property
    def expect_error(self) -> bool:
        return self.bad.name != "good" and (self.source.kind, self.launcher) not in self.bad.fine

    @property
    def crash_risk(self) -> bool:
        """Whether a failure of this case may take the process with it: a foreign function has no
        bounds to check, and a CUDA kernel's integer division by zero traps on the host."""
        if self.bad.name == "good":
            return False
        if self.source.kind == "foreign":
            return self.bad.fault or self.bad.name == "none"
        return self.source.kind == "cuda" and self.bad.name == "division_by_zero"

    @property
    def known(self) -> str | None:
        return known_failure(self.source.name, self.launcher, self.bad.name)


def available(source: Source) -> bool:
    return source.needs is None or _has(source.needs)


def cases(device: str = "cpu", sources=SOURCES) -> list[Case]:
    """Every (source, launcher, bad input) that applies on ``device``."""
    return [Case(s, launcher, bad, device) for s in sources if device.split(":")[0] in s.devices
            for launcher in KIND_LAUNCHERS[s.kind] for bad in BAD_INPUTS if applies(s, launcher, bad)]


def applies(source: Source, launcher: str, bad: BadInput) -> bool:
    return launcher in bad.launchers and (source.kind, launcher) not in bad.skip


# ---- running a case -------------------------------------------------------------------------------

def _tails(values: dict) -> list[tuple[np.ndarray, int, bytes]]:
    """(buffer, byte offset, bytes) of what lies after each array in its guarded buffer."""
    found = []
    for value in values.values():
        if isinstance(value, np.ndarray) and value.base is not None:
            base = value.base
            extent = sum(max(0, stride * (n - 1)) for stride, n in zip(value.strides, value.shape))
            end = value.ctypes.data - base.ctypes.data + (extent + value.itemsize if value.size else 0)
            found.append((base, end, base.view(np.uint8)[end:].tobytes()))
    return found


def _message_names(case: Case, message: str) -> bool:
    bad = case.bad
    if bad.param is None:                    # an in-kernel fault without an array: the line
        return re.search(r"\bline \d+", message) is not None
    if re.search(rf"(?<![\w.]){re.escape(bad.param)}\b", message):
        return True
    if case.source.kind == "foreign":        # the argument as the IR names it (numba: %.2), or its position
        index = PRIMALS[bad.kernel].index(bad.param.removeprefix("d_"))
        ir_name = re.escape(built(case.source.name)[bad.kernel].ir.args[index].name)
        shadow = bad.param.startswith("d_")
        named = re.search(rf"argument {index}\b|argument[^\n]*(%{ir_name}|'{ir_name}')(?![\w.])", message)
        return named is not None and (not shadow or "shadow" in message or "tangent" in message)
    return False


def run_case(case: Case) -> str:
    """Run one case; "" when it passed, else what went wrong."""
    from ..errors import Error
    values = good_arguments(case.bad.kernel)
    case.bad.apply(values)
    expected = None if case.expect_error else reference(
        case.bad.kernel, case.launcher, {k: np.copy(v) if isinstance(v, np.ndarray) else v for k, v in values.items()})
    tails = _tails(values)
    problems = []
    try:
        got = launch(case.source, case.launcher, case.bad.kernel, values, case.device)
    except Error as exc:
        got = None
        if not case.expect_error:
            problems.append(f"refused a right launch: {type(exc).__name__}: {exc}")
        elif not _message_names(case, str(exc)):
            problems.append(f"the message does not name {case.bad.param or 'the line'}: {type(exc).__name__}: {exc}")
    except Exception as exc:                  # noqa: BLE001 - any other exception is the finding
        got = None
        problems.append(f"raised {type(exc).__name__} (not an adoffload.Error): {exc}")
    if got is not None and case.expect_error:
        problems.append("no error: the launch returned")
    if got is not None and expected is not None:
        for name, want in expected.items():
            if not np.allclose(np.asarray(got[name], np.float64), want, rtol=1e-12, atol=1e-12):
                problems.append(f"{name} is wrong: {np.asarray(got[name])!r}, expected {np.asarray(want)!r}")
    for base, end, before in tails:
        if base.view(np.uint8)[end:].tobytes() != before:
            problems.append("wrote past the end of an array")
            break
    return "; ".join(problems)


@functools.cache
def _warmed(source_name: str, launcher: str, kernel: str, device: str) -> str:
    source = next(s for s in SOURCES if s.name == source_name)
    good = next(b for b in BAD_INPUTS if b.name == "good")
    return run_case(Case(source, launcher, BadInput("good", good.title, kernel, LAUNCHERS, good.apply, None), device))


def run_isolated(case: Case, timeout_s: float = CHILD_TIMEOUT_S) -> str:
    """``run_case`` in a forked child (its kernels compiled here first): a crash or a hang is a
    failed case, not the end of the run."""
    import time
    warm = _warmed(case.source.name, case.launcher, case.bad.kernel, case.device)
    if warm:
        return f"the good launch failed first: {warm}"
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:                                             # the child
        os.close(read)
        try:
            message = run_case(case) or "passed"
        except BaseException as exc:                         # noqa: BLE001
            message = f"the harness failed: {exc!r}"
        os.write(write, message.encode()[:8000])
        os._exit(0)
    os.close(write)
    deadline = time.monotonic() + timeout_s
    status = None
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.01)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(read)
        return f"hung: no result after {timeout_s:.0f} s"
    with os.fdopen(read, "rb") as pipe:
        message = pipe.read().decode(errors="replace")
    if os.WIFSIGNALED(status):
        return f"crashed the process: {signal.Signals(os.WTERMSIG(status)).name}"
    return "" if message == "passed" else (message or f"the child exited with status {os.WEXITSTATUS(status)}")


def outcome(case: Case) -> str:
    return run_isolated(case) if case.crash_risk else run_case(case)


# ---- the table for docs/reliability.md --------------------------------------------------------------

def markdown_table() -> str:
    """The matrix as docs/reliability.md shows it: a row per source and launcher, a column per bad
    input; ✓ the case passes (an error naming the parameter, or right numbers where it is no error:
    ✓=), ✗n a known failure (footnote n), · does not apply."""
    reasons: list[str] = []
    header = "| source | launcher | " + " | ".join(b.title for b in BAD_INPUTS) + " |"
    lines = [header, "|" + "---|" * (len(BAD_INPUTS) + 2)]
    for source in SOURCES:
        for launcher in KIND_LAUNCHERS[source.kind]:
            cells = []
            for bad in BAD_INPUTS:
                if not applies(source, launcher, bad):
                    cells.append("·")
                    continue
                case = Case(source, launcher, bad, "cpu")
                reason = case.known
                if reason is None:
                    cells.append("✓" if case.expect_error or bad.name == "good" else "✓=")
                    continue
                if reason not in reasons:
                    reasons.append(reason)
                cells.append(f"✗{reasons.index(reason) + 1}")
            lines.append(f"| {source.name} | {launcher} | " + " | ".join(cells) + " |")
    notes = [textwrap.fill(f"{k}. {reason}", 100, subsequent_indent="   ") for k, reason in enumerate(reasons, 1)]
    return "\n".join(lines) + ("\n\n" + "\n".join(notes) if notes else "") + "\n"
