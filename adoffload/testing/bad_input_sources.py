"""The sources and launchers of the bad-input matrix (``bad_inputs.py``): the two kernels, ``map``
(``out[i] = a * x[i]**2``) and ``gather`` (``out[i] = a * x[(k[i] // m[i]) * 2]`` in 32-bit integers),
in each source's spelling; how each kind of source is launched (our kernels and CUDA/HIP ones through
the numpy launcher and ``ado.jax_kernel``, foreign functions as ``f(a, x, ..., out, n)`` and
``enzyme.autodiff``); the guarded arguments and the numbers a right launch gives."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

import numpy as np

N = 8                      # threads of every launch, elements of every array
SENTINEL = 12345.0
TAIL = 16                  # elements of sentinel after every array


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
    mod = (ado.from_cuda if language == "cuda" else ado.from_hip)(CUDA_SOURCE, options=["-gline-tables-only"])
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


def available(source: Source) -> bool:
    """Whether the source's compiler is installed."""
    return source.needs is None or _has(source.needs)


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
        with jax.enable_x64(True), jax.default_device(jax.devices("cpu" if device == "cpu" else "gpu")[0]):
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
