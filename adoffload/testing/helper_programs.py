"""Random helpers over the thread's arrays, and the checks of their in-kernel derivatives.

``generate(rng)`` writes a module with

* ``inner(x, p, r)``: a random ``@ado.func`` reading the parameter vector ``x`` (a local array of
  ``N`` floats, differentiated) and a data array ``p`` (``P`` floats, not differentiated), writing the
  ``M`` residuals ``r`` (read back at random places) and returning a float. Bodies mix the float
  operations of ``generator.py`` (every argument squashed into its function's domain), loops over
  the arrays with accumulations, branches on values and on counters, temporary local arrays,
  conditional expressions and calls of a second helper;
* ``probe(x, p, w, c) = c * inner(x, p, r) + <w, r>`` (``r`` a local array): the scalar whose
  gradient reverse mode gives, ``g = c * dy/dx + J^T w``;
* the kernel ``run``: per thread, ``value_and_grad(probe)(x, p, w, c, out=g)`` and
  ``jvp(inner, argnums=(0, 2))(x, p, r, v, dr)`` (``dy`` and ``dr = J v``).

``check_case`` compiles it (host, or any device) and checks (1) the primal against the helpers run as
plain Python, (2) forward against reverse mode, ``c dy + <dr, w> = <v, g>``, to rounding, and (3)
both against central differences of ``probe`` along ``v``.
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .generator import BINARY, FLOAT_CONSTANTS, UNARY

N, P, M = 4, 3, 3
FD_STEP = 1e-6
FD_RTOL = 2e-5
IDENTITY_RTOL = 1e-10

KERNEL = '''
@ado.func
def probe(x, p, w, c):
    r = ado.zeros(M, ado.f64)
    s = c * inner(x, p, r)
    for k in range(M):
        s += w[k] * r[k]
    return s


@ado.kernel
def run(xs: ado.In[ado.f64, 2], ps: ado.In[ado.f64, 2], vs: ado.In[ado.f64, 2], ws: ado.In[ado.f64, 2],
        c: ado.f64, s_out: ado.Out[ado.f64], g_out: ado.Out[ado.f64, 2], y_out: ado.Out[ado.f64],
        dy_out: ado.Out[ado.f64], r_out: ado.Out[ado.f64, 2], dr_out: ado.Out[ado.f64, 2]):
    i = ado.tid()
    x = ado.zeros(N, ado.f64)
    v = ado.zeros(N, ado.f64)
    g = ado.zeros(N, ado.f64)
    p = ado.zeros(P, ado.f64)
    w = ado.zeros(M, ado.f64)
    r = ado.zeros(M, ado.f64)
    dr = ado.zeros(M, ado.f64)
    for j in range(N):
        x[j] = xs[i, j]
        v[j] = vs[i, j]
    for j in range(P):
        p[j] = ps[i, j]
    for j in range(M):
        w[j] = ws[i, j]
    s_out[i] = ado.value_and_grad(probe)(x, p, w, c, out=g)
    y, dy = ado.jvp(inner, argnums=(0, 2))(x, p, r, v, dr)
    y_out[i] = y
    dy_out[i] = dy
    for j in range(N):
        g_out[i, j] = g[j]
    for j in range(M):
        r_out[i, j] = r[j]
        dr_out[i, j] = dr[j]
'''


@dataclass(frozen=True)
class GeneratedHelpers:
    source: str          # the whole module, ``import adoffload as ado`` included


class _Writer:
    def __init__(self, rng):
        self.rng = rng
        self.lines: list[str] = []
        self.floats = ["f0"]
        self.loop_vars: list[str] = []
        self.counter = 0
        self.written_r: list[int] = []

    def fresh(self, prefix):
        self.counter += 1
        return f"{prefix}{self.counter}"

    def emit(self, level, text):
        self.lines.append("    " * level + text)

    def index(self, size: int, name: str) -> str:
        if self.loop_vars and self.rng.random() < 0.6:
            var = self.rng.choice(self.loop_vars)
            return var if name == "N" else f"({var} + {self.rng.randint(0, 2)}) % {name}"
        return str(self.rng.randint(0, size - 1))

    def leaf(self) -> str:
        kind = self.rng.randint(0, 9)
        if kind <= 3:
            return f"x[{self.index(N, 'N')}]"
        if kind == 4:
            return f"p[{self.index(P, 'P')}]"
        if kind == 5:
            return self.rng.choice(FLOAT_CONSTANTS)
        if kind == 6 and self.written_r:
            return f"r[{self.rng.choice(self.written_r)}]"
        return self.rng.choice(self.floats)

    def expr(self, depth: int) -> str:
        if depth <= 0 or self.rng.random() < 0.25:
            return self.leaf()
        kind = self.rng.randint(0, 9)
        if kind <= 3:
            return self.rng.choice(UNARY).format(self.expr(depth - 1))
        if kind <= 7:
            return self.rng.choice(BINARY).format(self.expr(depth - 1), self.expr(depth - 1))
        if kind == 8:
            return f"pair({self.expr(depth - 1)}, {self.expr(depth - 1)})"
        return f"({self.expr(depth - 1)}) if ({self.expr(1)}) > {self.rng.choice(FLOAT_CONSTANTS)} " \
               f"else ({self.expr(depth - 1)})"

    def statement(self, level: int, depth: int) -> None:
        kind = self.rng.choice(["new", "set", "loop", "loop", "if", "temp", "r"] if level == 1 else
                               ["set", "set", "if", "r"])
        if kind == "new" or (kind == "set" and level == 1 and self.rng.random() < 0.3):
            name = self.fresh("f")
            self.emit(level, f"{name} = {self.expr(depth)}")
            self.floats.append(name)
        elif kind == "set":
            target = self.rng.choice(self.floats)
            if self.loop_vars:
                self.emit(level, f"{target} = 0.5 * {target} + 0.5 * ado.sin({self.expr(depth)})")
            else:
                self.emit(level, f"{target} = {self.expr(depth)}")
        elif kind == "loop" and len(self.loop_vars) < 2:
            var = self.fresh("j")
            self.emit(level, f"for {var} in range({self.rng.choice(['N', 'N', 'P', 'M', '1, N'])}):")
            self.loop_vars.append(var)
            for _ in range(self.rng.randint(1, 2)):
                self.statement(level + 1, depth)
            self.loop_vars.pop()
        elif kind == "if" and level < 3:
            self.emit(level, f"if ({self.expr(2)}) > {self.rng.choice(FLOAT_CONSTANTS)}:")
            self.statement(level + 1, depth)
            self.emit(level, "else:")
            self.statement(level + 1, depth)
        elif kind == "temp" and level == 1:
            array, var, name = self.fresh("t"), self.fresh("j"), self.fresh("f")
            self.emit(level, f"{array} = ado.zeros(N, ado.f64)")
            self.emit(level, f"for {var} in range(N):")
            self.loop_vars.append(var)
            self.emit(level + 1, f"{array}[{var}] = {self.expr(depth)}")
            self.loop_vars.pop()
            self.emit(level, f"{name} = {array}[{self.rng.randint(0, N - 1)}] * {array}[{self.index(N, 'N')}]")
            self.floats.append(name)
        elif kind == "r":
            k = self.rng.randint(0, M - 1)
            self.emit(level, f"r[{k}] = {self.expr(depth)}")
            if level == 1:
                self.written_r.append(k)
        else:
            self.emit(level, "pass")


def generate(rng, *, depth: int = 3, statements: int = 5) -> GeneratedHelpers:
    """A random module (see the module docstring); ``rng`` as for ``generator.generate``."""
    pair = _Writer(rng)
    pair.floats = ["a", "b"]
    pair_body = f"    return {pair.rng.choice(BINARY).format('a', pair.rng.choice(UNARY).format('b'))}"
    w = _Writer(rng)
    w.emit(1, "f0 = x[0] * p[0]")
    for k in range(M):                       # every residual written once before any read
        w.emit(1, f"r[{k}] = {w.expr(1)}")
        w.written_r.append(k)
    for _ in range(rng.randint(2, statements)):
        w.statement(1, depth)
    w.emit(1, f"return {w.expr(depth - 1)} + {' + '.join(w.floats)}")
    source = (f"import adoffload as ado\n\nN, P, M = {N}, {P}, {M}\n\n\n@ado.func\ndef pair(a, b):\n{pair_body}\n\n\n"
              f"@ado.func\ndef inner(x, p, r):\n" + "\n".join(w.lines) + "\n\n" + KERNEL)
    return GeneratedHelpers(source)


def load(program: GeneratedHelpers, folder: Path, tag: str):
    """The generated module, imported from a file (the front end reads kernels from files)."""
    path = Path(folder) / f"adoffload_helpers_{tag}.py"
    path.write_text(program.source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass
class HelperCase:
    source: str
    failures: list = field(default_factory=list)


def _launch(module, xs, ps, vs, ws, c, device):
    b = xs.shape[0]
    outs = dict(s=np.zeros(b), g=np.zeros((b, N)), y=np.zeros(b), dy=np.zeros(b), r=np.zeros((b, M)),
                dr=np.zeros((b, M)))
    module.run(xs, ps, vs, ws, c, outs["s"], outs["g"], outs["y"], outs["dy"], outs["r"], outs["dr"],
               grid=b, device=device)
    return outs


def check_case(program: GeneratedHelpers, seed: int, folder: Path, *, threads: int = 3,
               device: str = "cpu") -> HelperCase:
    """Run the three checks of the module docstring; failures are listed, not raised."""
    case = HelperCase(program.source)
    module = load(program, folder, f"{seed}")
    rng = np.random.default_rng(seed)
    xs, vs = rng.uniform(-1, 1, (threads, N)), rng.uniform(-1, 1, (threads, N))
    ps, ws = rng.uniform(-1, 1, (threads, P)), rng.uniform(-1, 1, (threads, M))
    c = float(rng.uniform(0.5, 1.5))
    o = _launch(module, xs, ps, vs, ws, c, device)
    plus = _launch(module, xs + FD_STEP * vs, ps, vs, ws, c, device)["s"]
    minus = _launch(module, xs - FD_STEP * vs, ps, vs, ws, c, device)["s"]
    for t in range(threads):
        r = np.zeros(M)
        y = module.inner(xs[t].copy(), ps[t].copy(), r)
        s = module.probe(xs[t].copy(), ps[t].copy(), ws[t].copy(), c)
        if not (np.isclose(o["y"][t], y, rtol=1e-9, atol=1e-9) and np.allclose(o["r"][t], r, rtol=1e-9, atol=1e-9)
                and np.isclose(o["s"][t], s, rtol=1e-9, atol=1e-9)):
            case.failures.append(f"thread {t}: primal differs from Python: y {o['y'][t]} vs {y}, "
                                 f"r {o['r'][t]} vs {r}, probe {o['s'][t]} vs {s}")
        reverse = float(vs[t] @ o["g"][t])
        forward = c * o["dy"][t] + float(ws[t] @ o["dr"][t])
        scale = abs(c * o["dy"][t]) + float(np.abs(ws[t] * o["dr"][t]).sum()) + float(np.abs(vs[t] * o["g"][t]).sum())
        if not abs(forward - reverse) <= IDENTITY_RTOL * (1.0 + scale):
            case.failures.append(f"thread {t}: <J v, w> = {forward!r} but <v, J^T w> = {reverse!r}")
        fd = (plus[t] - minus[t]) / (2 * FD_STEP)
        if not abs(fd - reverse) <= FD_RTOL * (1.0 + abs(o["s"][t]) + scale):
            case.failures.append(f"thread {t}: central difference {fd!r} vs <v, g> = {reverse!r}")
    return case
