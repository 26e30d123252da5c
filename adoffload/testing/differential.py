"""Differential testing of AD on foreign IR: random C functions through clang, ``from_llvm`` and AD.

For each generated program (``cprograms.py``) and optimization level, the function is compiled
with the clang of the ``ziglang`` wheel, loaded with ``ado.from_llvm``, differentiated in forward
and reverse mode, and checked at a random point with two oracles:

* **central differences** of the primal (run on the host) along a random direction ``v``, at two
  step sizes ``h`` and ``2h``; when the two disagree the point is near a branch or a kink and
  another random point is drawn. The forward tangent ``J v`` must match them, and so must the
  reverse projection ``<v, Jᵀ w>`` against ``<FD, w>``;
* the **inner-product identity** ``<J v, w> = <v, Jᵀ w>`` between forward and reverse (tight).

The derivative functions also compute the primal outputs; those must equal the primal run.

Each (program, level) is classified: **pass**; **refused** (an ``adoffload.Error`` while loading
or differentiating: allowed, its message is kept); **untestable** (the generated primal is not
finite at any point tried: a weakness of the generator, not of the engine); **mismatch** (a silent
wrong value: the bug this tool hunts); **crash** (any other exception, invalid derivative IR, a
signal or a timeout).

Speed: one C file and one clang run per batch and level, one ``from_llvm`` per batch, all
derivatives built into that module and JIT-compiled once. A batch whose module does not load is
split (each function alone, taken from the clang output by ``split_module``), so one refused
function does not hide the others. Batches run in worker processes, which also contain crashes
of the generated code: a dead worker's current program is a CRASH and the rest of its batch is
run again.

Command line::

    python -m adoffload.testing.differential --count 1000 --seed 0 --opt 0 1 2 3 --out difftest-out

prints a table per level and writes the C source of every mismatch and crash to ``--out``.
"""
from __future__ import annotations

import argparse
import faulthandler
import json
import multiprocessing
import multiprocessing.connection
import os
import re
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .clang import OPT_FLAGS, clang_available, compile_c, compile_native  # noqa: F401 (the tests' API)
from .cprograms import INOUT, INT, REAL, CProgram, generate, module_source
from .irtext import code_of, defined_name, module_subset, references, split_module  # noqa: F401 (split_module: API)

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


# ---------------------------------------------------------------------------- native primal

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


# ---------------------------------------------------------------------------- one program

class _Point:
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
class _Derivatives:
    forward: object
    reverse: object
    count: object | None


def _dot(a, b) -> float:
    return float(np.sum(np.asarray(a, np.float64) * np.asarray(b, np.float64)))


def _abs_dot(a, b) -> float:
    return float(np.sum(np.abs(np.asarray(a, np.float64) * np.asarray(b, np.float64))))


def check_program(program: CProgram, opt: int, primal, d: _Derivatives, native=None) -> Outcome:
    """Run the oracles on one program whose primal and derivatives are compiled; ``native``
    (a NativeFunction) checks the JIT-compiled primal itself."""
    tol = TOLERANCES[program.real]
    rng = np.random.default_rng([program.seed, 7])
    failures, notes = [], []
    fd_checked = False
    for attempt in range(FD_ATTEMPTS):
        point = _Point(program, rng)
        base = _run(primal, point, point.args())
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
        theirs = _run(native, point, point.args())
        if not np.allclose(base, theirs, rtol=tol["primal"], atol=tol["primal"]):
            moved = point.args(tol["step"])  # a branch flipped by rounding would not differ here too
            if not np.allclose(_run(primal, point, moved), _run(native, point, moved), rtol=tol["primal"],
                               atol=tol["primal"]):
                failures.append(("primal-native", f"the loaded function computes {_short(base)}, clang's "
                                                  f"native build {_short(theirs)}"))

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
            failures.append(("forward", f"J v = {_short(jv)} but central differences give {_short(fd1)} "
                                        f"(output {k}: {jv[k]:.8g} vs {fd1[k]:.8g})"))
        fd_w = _dot(fd1, w)
        ref_scale = max(1.0, _abs_dot(fd1, w))
        if not np.isfinite(rhs) or abs(rhs - fd_w) > tol["fd"] * ref_scale:
            failures.append(("reverse", f"<v, J^T w> = {rhs:.10g} but <FD, w> = {fd_w:.10g}; adjoints "
                                        + ", ".join(f"{k}={_short(v)}" for k, v in adjoints.items())))
    if failures:
        values = ", ".join(f"{k}={_short(v)}" for k, v in point.values.items())
        detail = "; ".join(f"[{mode}] {text}" for mode, text in failures) + f" | at {values}"
        return Outcome(program.seed, opt, MISMATCH, detail, [m for m, _ in failures], fd_checked)
    return Outcome(program.seed, opt, PASS, "", [], fd_checked)


def _short(v) -> str:
    arr = np.atleast_1d(np.asarray(v, np.float64))
    return "[" + ", ".join(f"{x:.6g}" for x in arr[:8]) + (", ..." if arr.size > 8 else "") + "]"


def _close(got, want, rtol, mode, what, failures) -> None:
    if got.shape != want.shape or not np.allclose(got, want, rtol=rtol, atol=rtol):
        failures.append((mode, f"{what} {_short(got)} differ from the primal run {_short(want)}"))


def _run(primal, point: _Point, args) -> np.ndarray:
    ret = primal(*args)
    return point.output_vector(ret, args)


def _central(primal, point: _Point, h: float) -> np.ndarray:
    up = _run(primal, point, point.args(h))
    down = _run(primal, point, point.args(-h))
    return (up - down) / (2 * h)


def _tape(count, point: _Point) -> list:
    nbytes = np.zeros(1, np.int64)
    count(*point.args(), nbytes)
    return [np.zeros(max(int(nbytes[0]) // 8, 1), np.int64), 0]


# ---------------------------------------------------------------------------- one batch

def _classify_error(exc: BaseException) -> tuple[str, str]:
    from ..errors import Error
    if isinstance(exc, Error):
        return REFUSED, f"{type(exc).__name__}: {exc}"
    return CRASH, "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-3000:]


def _derive(module, program: CProgram) -> tuple[_Derivatives | None, list[str]]:
    from ..enzyme.activity import ACTIVE, CONST, DUP
    from ..enzyme.forward import forward
    from ..enzyme.reverse import reverse
    fn = module.functions[program.name]
    fwd_act = [CONST if p.kind == INT else DUP for p in program.params]
    rev_act = [CONST if p.kind == INT else ACTIVE if p.kind == REAL else DUP for p in program.params]
    fwd = forward(module, fn, fwd_act, name=f"{program.name}.difftest.fwd")
    rev = reverse(module, fn, rev_act, name=f"{program.name}.difftest.rev")
    names = [fwd.name, rev.function.name] + ([rev.tape.count_function] if rev.tape is not None else [])
    return _Derivatives(fwd.name, rev.function.name, rev.tape.count_function if rev.tape else None), names


_GENERATED = re.compile(r"^(?:f|h|dot|axpy|step|upd)(\d+)(?:_\d+)?(?:\..*)?$")


def _seed_of(name: str) -> int | None:
    """The program a function belongs to: its primal, helpers (``h12_3``) and derivatives (``f12.difftest.fwd``)."""
    match = _GENERATED.match(name)
    return int(match.group(1)) if match else None


def _compile(module, seeds: set[int], names: list[str], opt, emit, jit_opt):
    """JIT the module. A program whose code (primal, helper or derivative) LLVM rejects is a CRASH;
    its functions leave the module and the others go on. Returns the callables, or None when the
    error names no program and several are left (the caller splits the batch)."""
    from ..enzyme.host import compile_host
    while True:
        try:
            return compile_host(module, names, opt_level=jit_opt, codegen_level=jit_opt)
        except Exception as exc:       # noqa: BLE001 - IR that LLVM rejects is a bug, not a refusal
            detail = _classify_error(exc)[1]
            culprits = {_seed_of(m) for m in _names_in_error(module, str(exc))} & seeds
            if not culprits and len(seeds) == 1:
                culprits = set(seeds)
            if not culprits:
                return None
            for seed in culprits:
                emit(("result", Outcome(seed, opt, CRASH, "the module (primal and derivatives) does not "
                                        "compile: " + detail, ["jit"])))
                for name in [n for n in module.functions if _seed_of(n) == seed]:
                    del module.functions[name]
                names[:] = [n for n in names if _seed_of(n) != seed]
                seeds.discard(seed)
            if not seeds:
                return {}


def _names_in_error(module, message: str) -> list[str]:
    """Functions an LLVM error names: ``@name`` in the text, or the definition holding ``<string>:LINE``."""
    names = references(message)
    lines = [int(m) for m in re.findall(r"<string>:(\d+):", message)]
    if lines:
        from ..ir.llvm_export import export_module
        text = export_module(module).splitlines()
        for line in lines:
            for k in range(min(line, len(text)) - 1, -1, -1):
                name = defined_name(text[k])
                if name is not None:
                    names.append(name)
                    break
    return names


def check_batch(seeds: list[int], opt: int, emit, text: str | None = None, jit_opt: int = 0,
                native: bool = True, library=None) -> None:
    """Check the programs of ``seeds`` at ``-O<opt>``; ``emit(event)`` gets ("begin", seeds, stage)
    before each stage that runs generated code, and ("result", Outcome) per program. ``native``:
    also compare the loaded primal with clang's native build (``text``/``library``: already built)."""
    from ..sources import llvm as foreign
    programs = [generate(s) for s in seeds]
    if text is None:
        text = compile_c(module_source(programs), opt)
    if native and library is None:
        with tempfile.TemporaryDirectory(prefix="adoffload-difftest-") as tmp:
            library = compile_native(module_source(programs), opt, Path(tmp))
    again = dict(text=text, jit_opt=jit_opt, native=native, library=library)
    emit(("begin", seeds, "load"))
    try:
        module = foreign.from_llvm(module_subset(text, [p.name for p in programs])).ir
    except Exception as exc:           # noqa: BLE001 - every failure is classified
        if len(programs) == 1:
            status, detail = _classify_error(exc)
            emit(("result", Outcome(seeds[0], opt, status, "load: " + detail, ["load"])))
            return
        loadable = []
        for p in programs:             # find the functions that do not load, then run the others together
            try:
                emit(("begin", [p.seed], "load"))
                foreign.from_llvm(module_subset(text, [p.name]))
                loadable.append(p.seed)
            except Exception as single:   # noqa: BLE001
                status, detail = _classify_error(single)
                emit(("result", Outcome(p.seed, opt, status, "load: " + detail, ["load"])))
        if loadable and len(loadable) < len(programs):
            check_batch(loadable, opt, emit, **again)
        elif loadable:                 # the group fails but every single loads: run them one by one
            for s in loadable:
                check_batch([s], opt, emit, **again)
        return
    emit(("begin", seeds, "derive"))
    derived, refused, names = {}, {}, []
    for p in programs:
        names.append(p.name)
        try:
            derived[p.seed], more = _derive(module, p)
            names += more
        except Exception as exc:       # noqa: BLE001
            status, detail = _classify_error(exc)
            refused[p.seed] = Outcome(p.seed, opt, status, detail, ["derive"])
    emit(("begin", seeds, "jit"))
    alive = set(seeds)
    funcs = _compile(module, alive, names, opt, emit, jit_opt)
    if funcs is None:                  # the JIT failed and named no program: split the batch
        half = len(seeds) // 2
        check_batch(seeds[:half], opt, emit, **again)
        check_batch(seeds[half:], opt, emit, **again)
        return
    for p in programs:
        if p.seed not in alive:
            continue
        emit(("begin", [p.seed], "run"))
        native_fn = NativeFunction(library, p) if library is not None else None
        try:
            if p.seed in refused:      # no derivative, but the primal must still be right
                outcome = check_refused_primal(p, refused[p.seed], funcs[p.name], native_fn)
            else:
                d = derived[p.seed]
                calls = _Derivatives(funcs[d.forward], funcs[d.reverse], funcs[d.count] if d.count else None)
                outcome = check_program(p, opt, funcs[p.name], calls, native_fn)
        except Exception as exc:       # noqa: BLE001
            outcome = Outcome(p.seed, opt, CRASH, "run: " + _classify_error(exc)[1], ["run"])
        emit(("result", outcome))


def check_refused_primal(program: CProgram, refusal: Outcome, primal, native) -> Outcome:
    """A program AD refused: its loaded primal must still compute what clang's build computes."""
    if native is None:
        return refusal
    tol = TOLERANCES[program.real]
    point = _Point(program, np.random.default_rng([program.seed, 7]))
    for shift in (0.0, tol["step"]):   # both must differ (a branch flipped by rounding would not)
        ours, theirs = _run(primal, point, point.args(shift)), _run(native, point, point.args(shift))
        if np.allclose(ours, theirs, rtol=tol["primal"], atol=tol["primal"]):
            return refusal
    detail = (f"[primal-native] the loaded function computes {_short(ours)}, clang's native build "
              f"{_short(theirs)} (AD was refused: {refusal.detail})")
    return Outcome(program.seed, refusal.opt, MISMATCH, detail, ["primal-native"])


# ---------------------------------------------------------------------------- workers

def _worker(seeds: list[int], opt: int, jit_opt: int, native: bool, same_as: int | None, conn) -> None:
    faulthandler.disable()             # a crash is reported by the parent, as a CRASH outcome
    try:
        text = None
        if same_as is not None:        # programs clang compiles the same at a lower level are not run twice
            source = module_source([generate(s) for s in seeds])
            text, lower = compile_c(source, opt), compile_c(source, same_as)
            same = [s for s in seeds if code_of(text, f"f{s}") == code_of(lower, f"f{s}")]
            for s in same:
                conn.send(("same", s, same_as))
            seeds = [s for s in seeds if s not in same]
        if seeds:
            check_batch(seeds, opt, conn.send, text=text, jit_opt=jit_opt, native=native)
    except Exception as exc:           # noqa: BLE001 - e.g. clang failing on generated C
        conn.send(("fatal", "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))))
    conn.close()


def _context():
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else "spawn")


def run(seeds: list[int], opts: list[int], jobs: int = 2, batch: int = 40, timeout: float = 10.0,
        jit_opt: int = 0, native: bool = True, dedupe: bool = True, progress=None) -> list[Outcome]:
    """Check every seed at every level in ``jobs`` worker processes; returns one Outcome per pair.

    ``timeout``: seconds per program of a batch (plus one minute) before its worker is killed and
    the program it was running counts as a CRASH (an endless loop in generated code).

    ``jit_opt``: the LLVM level (IR pipeline and backend) the primal and derivatives are
    JIT-compiled at (0 is several times faster to compile than 2 and runs the derivative code as
    the engine wrote it). ``dedupe``: a program
    whose -O3 code equals its -O2 code (most do) takes the -O2 outcome (``Outcome.same_as``)."""
    ctx = _context()
    from ..sources import llvm as foreign
    from .. import enzyme  # noqa: F401 - imported once here, inherited by forked workers
    from ..enzyme import host, reverse  # noqa: F401
    pending = [(seeds[k:k + batch], opt) for opt in opts for k in range(0, len(seeds), batch)]
    results: dict[tuple[int, int], Outcome] = {}
    aliases: dict[tuple[int, int], tuple[int, int]] = {}     # (seed, level) -> (seed, lower level), same code
    running = []                       # (process, connection, seeds, opt, start, last begin event)
    while pending or running:
        while pending and len(running) < jobs:
            task_seeds, opt = pending.pop(0)
            parent, child = ctx.Pipe(duplex=False)
            lower = [o for o in opts if o < opt and o >= 2]     # -O3 vs -O2: mostly the same code
            same_as = max(lower) if lower and dedupe else None
            proc = ctx.Process(target=_worker, args=(task_seeds, opt, jit_opt, native, same_as, child), daemon=True)
            proc.start()
            child.close()
            running.append([proc, parent, task_seeds, opt, time.monotonic(), None])
        multiprocessing.connection.wait([entry[1] for entry in running], timeout=1.0)
        for entry in list(running):
            proc, conn, task_seeds, opt, start, _ = entry
            dead = False
            try:
                while conn.poll():
                    event = conn.recv()
                    if event[0] == "begin":
                        entry[5] = event
                    elif event[0] == "same":
                        aliases[(event[1], opt)] = (event[1], event[2])
                    elif event[0] == "result":
                        results[(event[1].seed, opt)] = event[1]
                        if progress:
                            progress(event[1])
                    else:
                        raise RuntimeError(f"a worker failed outside any program (a harness bug):\n{event[1]}")
            except EOFError:
                dead = True
            timed_out = time.monotonic() - start > 60 + timeout * len(task_seeds)
            if not dead and not timed_out:
                continue
            if timed_out:
                proc.kill()
            proc.join()
            running.remove(entry)
            left = [s for s in task_seeds if (s, opt) not in results and (s, opt) not in aliases]
            if not left:
                continue
            last = entry[5]
            code = proc.exitcode or 0
            why = ("timed out" if timed_out else f"the process died of {signal.Signals(-code).name}" if code < 0
                   else f"the process exited with code {code}")
            suspects = [s for s in (last[1] if last else left) if s in left]
            if len(suspects) == 1:
                stage = last[2] if last else "start"
                outcome = Outcome(suspects[0], opt, CRASH, f"{why} during {stage}", [stage])
                results[(suspects[0], opt)] = outcome
                if progress:
                    progress(outcome)
                left.remove(suspects[0])
                if left:
                    pending.insert(0, (left, opt))
            else:                      # died in a stage shared by several programs: split them
                half = len(left) // 2
                pending[:0] = [(left[:half], opt), (left[half:], opt)] if half else [(left, opt)]
    for key, lower in aliases.items():
        same = results[lower]
        results[key] = Outcome(key[0], key[1], same.status, same.detail, same.modes, same.fd_checked, same_as=lower[1])
        if progress:
            progress(results[key])
    return [results[(s, opt)] for opt in opts for s in seeds]


# ---------------------------------------------------------------------------- reporting

def _reason(outcome: Outcome) -> str:
    """A refusal message without the parts that vary between programs (names, numbers)."""
    lines = [line for line in outcome.detail.splitlines() if line.strip()]
    if not lines:
        return ""
    traceback_ = "Traceback (most recent call last)" in outcome.detail
    text = lines[-1] if outcome.status == CRASH and traceback_ else lines[0]
    text = re.sub(r"@(f|h|dot|axpy|step|upd)\d+[\w.$-]*", "@F", text)    # generated names only
    text = re.sub(r"%[\w.$-]+", "%v", text)
    text = re.sub(r"\b0x[0-9A-Fa-f]+\b|\b\d+(\.\d+)?(e[-+]?\d+)?\b", "N", text)
    text = re.sub(r"(at|line|column|in) [^ ]+\.c:\S+", r"\1 <loc>", text)
    return text[:160]


def summarize(outcomes: list[Outcome]) -> str:
    by_opt = defaultdict(Counter)
    for o in outcomes:
        by_opt[o.opt][o.status] += 1
    lines = [f"{'level':>6} " + " ".join(f"{s:>9}" for s in STATUSES) + f" {'no FD':>7} {'same code':>10}"]
    for opt in sorted(by_opt):
        no_fd = sum(1 for o in outcomes if o.opt == opt and o.status == PASS and not o.fd_checked)
        same = sum(1 for o in outcomes if o.opt == opt and o.same_as is not None)
        lines.append(f"{'-O' + str(opt):>6} " + " ".join(f"{by_opt[opt][s]:>9}" for s in STATUSES)
                     + f" {no_fd:>7} {same:>10}")
    lines.append("(no FD: passes checked by the identity only, no point gave consistent differences; "
                 "same code: outcome taken from the lower level whose code is identical)")
    for status in (REFUSED, UNTESTABLE, MISMATCH, CRASH):
        groups = Counter()
        for o in outcomes:
            if o.status == status:
                groups[(o.opt, _reason(o) if status != MISMATCH else ",".join(o.modes))] += 1
        if groups:
            lines.append(f"\n{status} (level, reason, count):")
            lines += [f"  -O{opt}  {count:5d}  {reason}" for (opt, reason), count in
                      sorted(groups.items(), key=lambda kv: (kv[0][0], -kv[1]))]
    return "\n".join(lines)


def write_failures(outcomes: list[Outcome], folder: Path) -> None:
    """One C file per mismatch/crash (with the failure in a comment) and summary.json."""
    folder.mkdir(parents=True, exist_ok=True)
    for o in outcomes:
        if o.status not in (MISMATCH, CRASH) or o.same_as is not None:
            continue
        program = generate(o.seed)
        comment = "\n".join(" * " + line for line in o.detail.splitlines())
        header = (f"/* {o.status.upper()} at -O{o.opt}, seed {o.seed} ({', '.join(o.modes)})\n{comment}\n"
                  f" * features: {', '.join(program.features)}\n"
                  f" * again: python -m adoffload.testing.differential --seeds {o.seed} --opt {o.opt}\n */\n")
        (folder / f"{o.status}-O{o.opt}-seed{o.seed}.c").write_text(header + program.standalone())
    (folder / "summary.json").write_text(json.dumps([asdict(o) for o in outcomes], indent=1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m adoffload.testing.differential",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=200, help="number of programs")
    parser.add_argument("--seed", type=int, default=0, help="first seed (programs are seed, seed+1, ...)")
    parser.add_argument("--seeds", type=int, nargs="*", help="exact seeds to run (overrides --count/--seed)")
    parser.add_argument("--opt", type=int, nargs="+", default=[0, 1, 2, 3], choices=sorted(OPT_FLAGS))
    parser.add_argument("--out", type=Path, help="folder for the C sources of failures and summary.json")
    parser.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1))
    parser.add_argument("--batch", type=int, default=40, help="programs per C file / module")
    parser.add_argument("--jit-opt", type=int, default=0, choices=(0, 1, 2, 3),
                        help="LLVM level (IR passes and backend) for JIT-compiling primal and derivatives "
                             "(default 0: fastest)")
    parser.add_argument("--no-native", action="store_true",
                        help="skip comparing the loaded primal with clang's native build of the C")
    parser.add_argument("--no-dedupe", action="store_true",
                        help="check -O3 even where its code equals the -O2 code")
    parser.add_argument("--show", action="store_true", help="print the details of every failure")
    args = parser.parse_args(argv)
    if not clang_available():
        print("the ziglang wheel (its clang) is not installed: pip install ziglang", file=sys.stderr)
        return 2
    seeds = args.seeds if args.seeds else list(range(args.seed, args.seed + args.count))
    start = time.monotonic()
    done = Counter()

    def progress(outcome: Outcome) -> None:
        done[outcome.status] += 1
        total = sum(done.values())
        if total % 100 == 0 or total == len(seeds) * len(args.opt):
            print(f"  {total}/{len(seeds) * len(args.opt)} checked ({time.monotonic() - start:.0f} s): "
                  + ", ".join(f"{k} {v}" for k, v in sorted(done.items())), file=sys.stderr, flush=True)

    outcomes = run(seeds, args.opt, jobs=args.jobs, batch=args.batch, jit_opt=args.jit_opt,
                   native=not args.no_native, dedupe=not args.no_dedupe, progress=progress)
    print(f"{len(seeds)} programs x {len(args.opt)} levels in {time.monotonic() - start:.1f} s")
    print(summarize(outcomes))
    if args.show:
        for o in outcomes:
            if o.status in (MISMATCH, CRASH):
                print(f"\n--- {o.status} -O{o.opt} seed {o.seed}: {o.detail}")
    if args.out:
        write_failures(outcomes, args.out)
        print(f"failures written to {args.out}/")
    return 1 if any(o.status in (MISMATCH, CRASH) for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
