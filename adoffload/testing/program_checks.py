"""The checks of one generated C program at one optimization level: its forward and reverse derivatives
against central differences of the primal and against each other (<J v, w> = <v, J^T w>), as an Outcome
(differential.py runs them over many programs and levels)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .cprograms import INOUT, INT, REAL, CProgram

PASS, REFUSED, UNTESTABLE, MISMATCH, CRASH = "pass", "refused", "untestable", "mismatch", "crash"


STATUSES = (PASS, REFUSED, UNTESTABLE, MISMATCH, CRASH)


# Oracle settings per real type: FD step, FD tolerance (relative to the output scale), identity tolerance.
TOLERANCES = {"double": dict(step=1e-5, fd=2e-5, identity=1e-9, primal=1e-9),
              "float": dict(step=4e-3, fd=2e-2, identity=2e-4, primal=1e-4)}


FD_ATTEMPTS = 4


@dataclass
class Outcome:
    seed: int
    opt: int
    status: str
    detail: str = ""                 # refusal message, mismatch description or crash traceback
    modes: list[str] = field(default_factory=list)   # which checks failed: forward, reverse, identity, ...
    fd_checked: bool = True          # False when no random point gave consistent central differences
    same_as: int | None = None       # the lower level whose identical code was checked instead


class NativeFunction:
    """A generated function compiled to native code by clang (``-shared``): the primal oracle that
    does not go through adoffload's IR reader and JIT. Called like an ``enzyme.host.HostFunction``."""

    def __init__(self, library, program: CProgram):
        import ctypes
        real = ctypes.c_float if program.real == "float" else ctypes.c_double
        kinds = {INT: ctypes.c_int, REAL: real}
        self._fn = getattr(library, program.name)
        self._fn.restype = real if program.returns_real else None
        self._fn.argtypes = [kinds.get(p.kind, ctypes.c_void_p) for p in program.params]

    def __call__(self, *args):
        return self._fn(*(a.ctypes.data if isinstance(a, np.ndarray) else a for a in args))


class Point:
    """Arguments of one program at one random point, and the direction/weights of the checks."""

    def __init__(self, program: CProgram, rng: np.random.Generator):
        self.program = program
        self.dtype = np.float32 if program.real == "float" else np.float64
        n = int(rng.integers(1, 8))
        self.values: dict[str, object] = {}
        for p in program.params:
            if p.kind == INT:
                self.values[p.name] = n if p.name == "n" else int(rng.integers(0, n + 1))
            elif p.kind == REAL:
                self.values[p.name] = float(self.dtype(rng.uniform(-1, 1)))
            else:
                size = n * n if p.kind == "matrix" else n
                self.values[p.name] = rng.uniform(-1, 1, size).astype(self.dtype)
        self.active = [p for p in program.params if p.kind != INT]       # differentiable inputs
        self.outputs = [p for p in program.params if p.kind == INOUT]
        self.v = {p.name: self._random(rng, p.name) for p in self.active}
        self.w_ret = float(rng.standard_normal()) if program.returns_real else 0.0
        self.w = {p.name: rng.standard_normal(len(self.values[p.name])).astype(self.dtype) for p in self.outputs}

    def _random(self, rng, name):
        value = self.values[name]
        if isinstance(value, np.ndarray):
            return rng.standard_normal(value.shape).astype(self.dtype)
        return float(self.dtype(rng.standard_normal()))

    def args(self, shift: float = 0.0) -> list:
        """Fresh primal arguments, moved by ``shift * v`` (computed in float64, then rounded)."""
        out = []
        for p in self.program.params:
            value = self.values[p.name]
            if isinstance(value, np.ndarray):
                out.append((value.astype(np.float64) + shift * self.v[p.name]).astype(self.dtype))
            elif p.kind == REAL:
                out.append(float(self.dtype(value + shift * self.v[p.name])))
            else:
                out.append(value)
        return out

    def output_vector(self, ret, args) -> np.ndarray:
        parts = [np.array([ret], np.float64)] if self.program.returns_real else []
        index = {p.name: k for k, p in enumerate(self.program.params)}
        parts += [np.asarray(args[index[p.name]], np.float64) for p in self.outputs]
        return np.concatenate(parts) if parts else np.zeros(0)

    def weights(self) -> np.ndarray:
        parts = [np.array([self.w_ret])] if self.program.returns_real else []
        return np.concatenate(parts + [self.w[p.name].astype(np.float64) for p in self.outputs])


@dataclass
class Derivatives:
    forward: object
    reverse: object
    count: object | None


def _dot(a, b) -> float:
    return float(np.sum(np.asarray(a, np.float64) * np.asarray(b, np.float64)))


def _abs_dot(a, b) -> float:
    return float(np.sum(np.abs(np.asarray(a, np.float64) * np.asarray(b, np.float64))))


def check_program(program: CProgram, opt: int, primal, d: Derivatives, native=None) -> Outcome:
    """Run the oracles on one program whose primal and derivatives are compiled; ``native``
    (a NativeFunction) checks the JIT-compiled primal itself."""
    tol = TOLERANCES[program.real]
    rng = np.random.default_rng([program.seed, 7])
    failures, notes = [], []
    fd_checked = False
    for attempt in range(FD_ATTEMPTS):
        point = Point(program, rng)
        base = run_at(primal, point, point.args())
        if not np.all(np.isfinite(base)):
            notes.append(f"non-finite primal at attempt {attempt}")
            continue
        h = tol["step"]
        fd1 = _central(primal, point, h)
        # Three steps must agree: h and 2h alone agreed on a value 20% off where both straddle a
        # region of high curvature next to a branch (seed 200078, float32).
        others = (_central(primal, point, 2 * h), _central(primal, point, h / 4))
        scale = max(1.0, float(np.max(np.abs(fd1), initial=0.0)))
        if np.all(np.isfinite(fd1)) and all(np.max(np.abs(fd1 - fd), initial=0.0) <= tol["fd"] * scale / 2
                                            for fd in others):
            fd_checked = True
            break
    else:
        fd1 = None
    if fd1 is None and not np.all(np.isfinite(base)):
        return Outcome(program.seed, opt, UNTESTABLE, "the primal is not finite at any point tried: "
                       + "; ".join(notes), ["generator"])

    if native is not None:             # the primal adoffload runs vs clang's own build of the C
        theirs = run_at(native, point, point.args())
        if not np.allclose(base, theirs, rtol=tol["primal"], atol=tol["primal"]):
            moved = point.args(tol["step"])  # a branch flipped by rounding would not differ here too
            if not np.allclose(run_at(primal, point, moved), run_at(native, point, moved), rtol=tol["primal"],
                               atol=tol["primal"]):
                failures.append(("primal-native", f"the loaded function computes {short(base)}, clang's "
                                                  f"native build {short(theirs)}"))

    # forward: J v (and the primal outputs it computes)
    fargs = point.args()
    shadows = [point.v[p.name].copy() if isinstance(point.v[p.name], np.ndarray) else point.v[p.name]
               for p in point.active]
    tangent_ret = d.forward(*fargs, *shadows)
    index = {p.name: k for k, p in enumerate(point.active)}
    jv = point.output_vector(tangent_ret, [shadows[index[p.name]] if p.kind != INT else None
                                           for p in program.params])
    primal_ret_placeholder = base[0] if program.returns_real else None
    fwd_primal = point.output_vector(primal_ret_placeholder, fargs)
    _close(fwd_primal, base, tol["primal"], "primal-forward", "primal outputs of the forward derivative", failures)

    # reverse: Jᵀ w
    rargs = point.args()
    adjoints = {}
    rshadows = []
    for p in point.active:
        if p.kind == REAL:
            adjoints[p.name] = np.zeros(1, point.dtype)
        elif p.kind == INOUT:
            adjoints[p.name] = point.w[p.name].copy()
        else:
            adjoints[p.name] = np.zeros_like(point.values[p.name])
        rshadows.append(adjoints[p.name])
    seed = [point.w_ret] if program.returns_real else []
    tape = _tape(d.count, point) if d.count is not None else []
    d.reverse(*rargs, *rshadows, *seed, *tape)
    rev_primal = point.output_vector(primal_ret_placeholder, rargs)
    _close(rev_primal, base, tol["primal"], "primal-reverse", "primal outputs of the reverse derivative", failures)

    w = point.weights()
    lhs = _dot(jv, w)
    rhs = sum(_dot(point.v[p.name], adjoints[p.name]) for p in point.active)
    scale = _abs_dot(jv, w) + sum(_abs_dot(point.v[p.name], adjoints[p.name]) for p in point.active)
    if not np.isfinite(lhs) or not np.isfinite(rhs) or abs(lhs - rhs) > tol["identity"] * max(scale, 1e-300):
        failures.append(("identity", f"<Jv,w> = {lhs:.10g} but <v,J^T w> = {rhs:.10g}"))
    if fd1 is not None:
        fd_scale = max(1.0, float(np.max(np.abs(fd1), initial=0.0)))
        err = np.abs(jv - fd1)
        if not np.all(np.isfinite(jv)) or np.max(err, initial=0.0) > tol["fd"] * fd_scale:
            k = int(np.nanargmax(np.where(np.isfinite(err), err, np.inf)))
            failures.append(("forward", f"J v = {short(jv)} but central differences give {short(fd1)} "
                                        f"(output {k}: {jv[k]:.8g} vs {fd1[k]:.8g})"))
        fd_w = _dot(fd1, w)
        ref_scale = max(1.0, _abs_dot(fd1, w))
        if not np.isfinite(rhs) or abs(rhs - fd_w) > tol["fd"] * ref_scale:
            failures.append(("reverse", f"<v, J^T w> = {rhs:.10g} but <FD, w> = {fd_w:.10g}; adjoints "
                                        + ", ".join(f"{k}={short(v)}" for k, v in adjoints.items())))
    if failures:
        values = ", ".join(f"{k}={short(v)}" for k, v in point.values.items())
        detail = "; ".join(f"[{mode}] {text}" for mode, text in failures) + f" | at {values}"
        return Outcome(program.seed, opt, MISMATCH, detail, [m for m, _ in failures], fd_checked)
    return Outcome(program.seed, opt, PASS, "", [], fd_checked)


def short(v) -> str:
    arr = np.atleast_1d(np.asarray(v, np.float64))
    return "[" + ", ".join(f"{x:.6g}" for x in arr[:8]) + (", ..." if arr.size > 8 else "") + "]"


def _close(got, want, rtol, mode, what, failures) -> None:
    if got.shape != want.shape or not np.allclose(got, want, rtol=rtol, atol=rtol):
        failures.append((mode, f"{what} {short(got)} differ from the primal run {short(want)}"))


def run_at(primal, point: Point, args) -> np.ndarray:
    ret = primal(*args)
    return point.output_vector(ret, args)


def _central(primal, point: Point, h: float) -> np.ndarray:
    up = run_at(primal, point, point.args(h))
    down = run_at(primal, point, point.args(-h))
    return (up - down) / (2 * h)


def _tape(count, point: Point) -> list:
    nbytes = np.zeros(1, np.int64)
    count(*point.args(), nbytes)
    return [np.zeros(max(int(nbytes[0]) // 8, 1), np.int64), 0]
