"""Random differentiable C functions, as ordinary C programmers write them (seeded).

``generate(seed)`` returns a ``CProgram``: the C source of one function ``f<seed>`` (plus its
static helpers and struct types) and a description of its parameters, so a harness can call
it and differentiate it (``differential.py``). The body is a sequence of statement templates
drawn at random: element-wise maps, reductions, recurrences through memory (prefix sums,
triangular solves that read ``out[j]`` written earlier), nested loops with data-dependent
bounds, early exits (``break`` on a data condition, ``return``), branches and ``switch`` on
data, in-place updates, heap scratch (``malloc``/``calloc``/``realloc``/``free``), small structs
(by value and through pointers), helper functions (some ``noinline``, some taking pointers)
and libm math. Float expressions are drawn from a small grammar of smooth operations.

Contract with the caller (what keeps every program well defined): ``n >= 1`` and, when there is
a ``k`` parameter, ``0 <= k <= n``; every array argument has ``n`` elements except the matrix
``A`` (``n*n``); array elements and real scalars are of order 1 (the harness draws them from
[-1, 1]). Every index is in bounds by construction, every ``log``/``sqrt``/``pow`` gets a
positive argument (``1 + e*e``), every divisor is at least 1 in magnitude, and values stay
bounded (recurrences go through ``tanh`` or shrinking factors). The functions are smooth
except on sets of measure zero (branch thresholds, ``fabs``/``fmax`` kinks, ``atan2`` cuts).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

HEADER = "#include <math.h>\n#include <stdlib.h>\n#include <string.h>\n#include <stddef.h>\n"

CONSTANTS = (0.5, -0.75, 1.25, 2.0, -0.3, 0.1, 1.5, 3.0)
POW_EXPONENTS = (0.5, 1.5, -0.5, 2.0, 3.0, -1.5)
BINARY = {"add": "+", "sub": "-", "mul": "*"}

# Parameter kinds: "int" (n or k), "real" (a float scalar), "in" (const real*, n elements),
# "matrix" (const real*, n*n), "inout" (real*, n elements, read and written).
INT, REAL, IN, MATRIX, INOUT = "int", "real", "in", "matrix", "inout"


@dataclass(frozen=True)
class Param:
    name: str
    kind: str

    @property
    def is_array(self) -> bool:
        return self.kind in (IN, MATRIX, INOUT)


@dataclass
class CProgram:
    """One generated function: ``source`` defines ``name`` and its helpers (all ``static``)."""
    seed: int
    name: str
    real: str                       # "double" or "float"
    params: list[Param]
    returns_real: bool
    source: str
    features: list[str] = field(default_factory=list)   # templates and math used, for triage

    @property
    def signature(self) -> str:
        ret = self.real if self.returns_real else "void"
        return f"{ret} {self.name}({', '.join(_c_param(p, self.real) for p in self.params)})"

    def standalone(self) -> str:
        """A complete C file holding only this program."""
        return module_source([self])


def _c_param(p: Param, real: str, restrict: bool = False) -> str:
    """``restrict`` is true to the harness: every array argument is its own buffer."""
    star = "* __restrict__" if restrict else "*"
    return {INT: f"int {p.name}", REAL: f"{real} {p.name}", IN: f"const {real}{star} {p.name}",
            MATRIX: f"const {real}{star} {p.name}", INOUT: f"{real}{star} {p.name}"}[p.kind]


def module_source(programs: list[CProgram]) -> str:
    """One C file defining every program (their names and helpers do not collide)."""
    return HEADER + "\n" + "\n".join(p.source for p in programs)


class _Writer:
    """Writes the body of one function; ``self.features`` records what it used."""

    def __init__(self, seed: int, rng: random.Random, real: str):
        self.seed, self.rng, self.real = seed, rng, real
        self.name = f"f{seed}"
        self.features: list[str] = []
        self.helpers: list[str] = []
        self.counter = 0
        self.struct: str | None = None

    # ---- small utilities -------------------------------------------------------------
    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def lit(self, value: float) -> str:
        text = repr(float(value))
        return text + "f" if self.real == "float" else text

    def math(self, name: str) -> str:
        self.features.append(name)
        return name + "f" if self.real == "float" else name

    def index_type(self) -> str:
        return self.rng.choice(("int", "int", "long", "size_t"))

    # ---- expressions -----------------------------------------------------------------
    def expr(self, leaves: list[str], depth: int = 2) -> str:
        """A smooth real expression over ``leaves`` (C expressions of the real type)."""
        r = self.rng
        if depth <= 0 or self.chance(0.2):
            return self.lit(r.choice(CONSTANTS)) if self.chance(0.1) else r.choice(leaves)
        e = lambda: self.expr(leaves, depth - 1)      # noqa: E731

        def pair() -> tuple[str, str]:               # two operands, not the same text if avoidable
            a, b = e(), e()
            b = b if a != b else e()
            return (a, b) if a != b else (a, self.lit(r.choice(CONSTANTS)))
        m, one = self.math, self.lit(1.0)
        kind = r.choice(("add", "sub", "mul", "mul", "scale", "sin", "cos", "tanh", "gauss", "exptanh",
                         "log", "sqrt", "powpos", "powint", "fabs", "fmax", "fmin", "atan2", "atan2pos",
                         "hypot", "div", "div2", "divabs", "ternary"))
        if kind in ("add", "sub", "mul"):
            left, right = pair()
            return f"({left} {BINARY[kind]} {right})"
        if kind == "scale":
            return f"({self.lit(r.choice(CONSTANTS))} * {e()})"
        if kind in ("sin", "cos", "tanh"):
            return f"{m(kind)}({e()})"
        if kind == "gauss":
            a = e()
            return f"{m('exp')}(-({a}) * ({a}))"
        if kind == "exptanh":
            return f"{m('exp')}({m('tanh')}({e()}))"
        if kind in ("log", "sqrt"):
            a = e()
            return f"{m(kind)}({one} + ({a}) * ({a}))"
        if kind == "powpos":
            a = e()
            return f"{m('pow')}({one} + ({a}) * ({a}), {self.lit(r.choice(POW_EXPONENTS))})"
        if kind == "powint":
            return f"{m('pow')}({e()}, {self.lit(r.choice((2.0, 3.0)))})"
        if kind == "fabs":
            return f"{m('fabs')}({e()})"
        if kind in ("fmax", "fmin", "atan2", "hypot"):
            return "{}({}, {})".format(m(kind), *pair())
        if kind == "atan2pos":
            b = e()
            return f"{m('atan2')}({e()}, {one} + ({b}) * ({b}))"
        if kind == "div":
            b = e()
            return f"({e()} / ({one} + ({b}) * ({b})))"
        if kind == "div2":
            return f"({e()} / ({self.lit(2.0)} + {m('sin')}({e()})))"
        if kind == "divabs":
            return f"({e()} / ({one} + {m('fabs')}({e()})))"
        self.features.append("ternary")
        left, right = pair()
        return f"({left} > {right} ? {e()} : {e()})"

    def squash(self, text: str) -> str:
        """Keep a recurrence bounded."""
        return f"{self.math('tanh')}({text})"

    # ---- the function ----------------------------------------------------------------
    def function(self) -> tuple[list[Param], bool, str]:
        r = self.rng
        params = [Param("n", INT)]
        if self.chance(0.3):
            params.append(Param("k", INT))
        self.has_k = any(p.name == "k" for p in params)
        params.append(Param("x", IN))
        if self.chance(0.4):
            params.append(Param("p", IN))
        if self.chance(0.25):
            params.append(Param("A", MATRIX))
        self.out = None
        if self.chance(0.6):
            self.out = "y"
            params.append(Param("y", INOUT))
        elif self.chance(0.3):                      # in place: x itself is updated
            params[[p.name for p in params].index("x")] = Param("x", INOUT)
            self.out = "x"
        if self.chance(0.4):
            params.append(Param("a", REAL))
        returns = self.out is None or self.chance(0.3)
        self.params = params
        self.inputs = [p.name for p in params if p.kind in (IN, INOUT)]
        self.matrix = "A" if any(p.name == "A" for p in params) else None
        self.scalars = [p.name for p in params if p.kind == REAL]
        self.accs = [f"s{j}" for j in range(r.randint(1, 3))]
        self.returns = returns
        self.final = f"{self.expr(self.accs + self.scalars, 2)} + {' + '.join(self.accs)}" if returns else ""

        body = [f"{self.real} {acc} = {self.acc_init()};" for acc in self.accs]
        templates = [self.t_map, self.t_reduce, self.t_recurrence, self.t_trisolve, self.t_nested,
                     self.t_break, self.t_while, self.t_return, self.t_branch, self.t_switch,
                     self.t_malloc, self.t_calloc, self.t_realloc, self.t_struct_value,
                     self.t_struct_pointer, self.t_struct_array, self.t_helper_scalar,
                     self.t_helper_pointer, self.t_helper_writes, self.t_gather, self.t_matvec]
        for _ in range(r.randint(1, 4)):
            template = r.choice(templates)
            self.features.append(template.__name__[2:])
            body += template()
        body += self.sink()
        if returns:
            body.append(f"return {self.final};")
        text = "\n".join(self.helpers)
        ret = self.real if returns else "void"
        restrict = self.chance(0.4)
        if restrict:
            self.features.append("restrict")
        signature = f"{ret} {self.name}({', '.join(_c_param(p, self.real, restrict) for p in params)})"
        text += signature + " {\n" + "".join("    " + line + "\n" for line in body) + "}\n"
        return params, returns, text

    def acc_init(self) -> str:
        options = [self.lit(0.0), self.lit(self.rng.choice(CONSTANTS)), "x[0]"] + self.scalars
        return self.rng.choice(options)

    def sink(self) -> list[str]:
        """Make the outputs depend on the accumulators."""
        if self.out is None:
            return []
        acc = " + ".join(self.accs)
        i = self.fresh("i")
        if self.chance(0.5):
            return [f"{self.out}[0] += {acc};"]
        return [f"for ({self.index_type()} {i} = 0; {i} < n; {i}++) "
                f"{self.out}[{i}] = {self.expr([f'{self.out}[{i}]'] + self.accs, 1)} + {acc};"]

    def leaves_at(self, i: str) -> list[str]:
        return [f"{a}[{i}]" for a in self.inputs] + self.scalars

    def bound(self) -> str:
        """A loop bound: n, or the int parameter k (0 <= k <= n)."""
        return "k" if self.has_k and self.chance(0.5) else "n"

    def threshold(self) -> str:
        return self.lit(self.rng.choice((-0.5, -0.2, 0.0, 0.3, 0.6)))

    # ---- statement templates (each returns C lines) ----------------------------------
    def t_map(self) -> list[str]:
        if self.out is None:
            return self.t_reduce()
        i, o = self.fresh("i"), self.out
        op = self.rng.choice(("=", "+=", "*="))
        leaves = self.leaves_at(i) + [f"{o}[{i}]"] + self.accs[:1]
        rhs = self.expr(leaves)
        if op == "*=":
            rhs = f"({self.lit(1.0)} + {self.lit(0.5)} * {self.squash(rhs)})"
        return [f"for ({self.index_type()} {i} = 0; {i} < {self.bound()}; {i}++) {o}[{i}] {op} {rhs};"]

    def t_reduce(self) -> list[str]:
        i, acc = self.fresh("i"), self.rng.choice(self.accs)
        e = self.expr(self.leaves_at(i) + [acc])
        update = self.rng.choice((f"{acc} += {e};", f"{acc} = {self.lit(0.5)} * {acc} + {e};",
                                  f"{acc} = {self.math('fmax')}({acc}, {e});",
                                  f"{acc} *= {self.lit(1.0)} + {self.lit(0.25)} * {self.squash(e)};"))
        return [f"for ({self.index_type()} {i} = 0; {i} < {self.bound()}; {i}++) {update}"]

    def t_recurrence(self) -> list[str]:
        """out[i] depends on out[i-1] (or out[i+1]) written by the previous iteration."""
        if self.out is None:
            return self.t_reduce()
        i, o = self.fresh("i"), self.out
        if self.chance(0.5):
            step = self.squash(self.expr(self.leaves_at(i) + [f"{o}[{i} - 1]"]))
            return [f"for (int {i} = 1; {i} < n; {i}++) {o}[{i}] = {self.lit(0.5)} * {o}[{i}] + {step};"]
        if self.chance(0.5):
            return [f"for (int {i} = 1; {i} < n; {i}++) {o}[{i}] += {o}[{i} - 1];"]   # prefix sum
        return [f"for (int {i} = n - 2; {i} >= 0; {i}--) {o}[{i}] += {self.lit(0.5)} * {o}[{i} + 1];"]

    def t_trisolve(self) -> list[str]:
        """Forward substitution: reads out[j < i] written by earlier outer iterations."""
        if self.out is None or self.matrix is None:
            return self.t_nested()
        i, j, t, o, a = self.fresh("i"), self.fresh("j"), self.fresh("t"), self.out, self.matrix
        it = self.rng.choice(("int", "size_t"))
        rhs = self.expr(self.leaves_at(i), 1)
        lines = [f"for ({it} {i} = 0; {i} < ({it})n; {i}++) {{", f"    {self.real} {t} = {rhs};"]
        if self.chance(0.3):                # the shape of issue 11's forward_sub
            lines.append(f"    if ({i} > 1) for ({it} {j} = 0; {j} < {i} - 1; {j}++) "
                         f"{t} -= {a}[{i} * n + {j}] * {o}[{j}];")
        else:
            lines.append(f"    for ({it} {j} = 0; {j} < {i}; {j}++) "
                         f"{t} -= {self.lit(0.5)} * {a}[{i} * n + {j}] * {o}[{j}];")
        if self.chance(0.5):
            lines.append(f"    {o}[{i}] = {t} / ({self.lit(2.0)} + {a}[{i} * n + {i}] * {a}[{i} * n + {i}]);")
        else:
            lines.append(f"    {o}[{i}] = {t};")
        return lines + ["}"]

    def t_nested(self) -> list[str]:
        """Nested loops whose inner bound depends on the outer index."""
        i, j, acc = self.fresh("i"), self.fresh("j"), self.rng.choice(self.accs)
        inner = self.rng.choice((f"int {j} = 0; {j} <= {i}; {j}++", f"int {j} = {i}; {j} < n; {j}++",
                                 f"int {j} = 0; {j} < {i}; {j}++"))
        e = self.expr([f"x[{i}]", f"x[{j}]"] + [f"{a}[{j}]" for a in self.inputs] + self.scalars)
        return [f"for (int {i} = 0; {i} < {self.bound()}; {i}++)",
                f"    for ({inner}) {acc} += {self.lit(0.25)} * {e};"]

    def t_break(self) -> list[str]:
        i, acc = self.fresh("i"), self.rng.choice(self.accs)
        e = self.expr(self.leaves_at(i))
        if self.chance(0.5):
            cond = f"{acc} > {self.lit(self.rng.choice((0.5, 1.0, 2.0)))}"
        else:
            cond = f"x[{i}] > {self.lit(self.rng.choice((0.3, 0.6)))}"
        return [f"for (int {i} = 0; {i} < {self.bound()}; {i}++) {{",
                f"    {acc} += {e};", f"    if ({cond}) break;", "}"]

    def t_while(self) -> list[str]:
        i, acc = self.fresh("i"), self.rng.choice(self.accs)
        e = self.expr(self.leaves_at(i) + [acc])
        return [f"int {i} = 0;", f"while ({i} < n && {self.math('fabs')}({acc}) < {self.lit(2.0)}) {{",
                f"    {acc} += {self.lit(0.5)} * {e};", f"    {i}++;", "}"]

    def t_return(self) -> list[str]:
        """An early return on a data condition (the same result expression as the normal exit)."""
        i, acc = self.fresh("i"), self.rng.choice(self.accs)
        ret = f"return {self.final};" if self.returns else "return;"
        return [f"for (int {i} = 0; {i} < n; {i}++) {{",
                f"    if (x[{i}] < {self.lit(-0.7)}) {ret}",
                f"    {acc} += {self.lit(0.5)} * {self.expr(self.leaves_at(i))};", "}"]

    def t_branch(self) -> list[str]:
        i = self.fresh("i")
        leaves = self.leaves_at(i) + self.accs
        if self.out is not None and self.chance(0.6):
            o = self.out
            return [f"for (int {i} = 0; {i} < n; {i}++) {{",
                    f"    if (x[{i}] > {self.threshold()}) {o}[{i}] = {self.expr(leaves + [f'{o}[{i}]'])};",
                    f"    else {o}[{i}] -= {self.expr(leaves)};", "}"]
        acc = self.rng.choice(self.accs)
        return [f"for (int {i} = 0; {i} < n; {i}++) {{",
                f"    if ({self.expr(leaves, 1)} > {acc}) {acc} += {self.expr(leaves)};",
                f"    else {acc} = {self.lit(0.5)} * {acc} - {self.expr(leaves)};", "}"]

    def t_switch(self) -> list[str]:
        i, acc = self.fresh("i"), self.rng.choice(self.accs)
        leaves = self.leaves_at(i)
        return [f"for (int {i} = 0; {i} < n; {i}++) {{", f"    switch ({i} % 3) {{",
                f"    case 0: {acc} += {self.expr(leaves)}; break;",
                f"    case 1: {acc} -= {self.lit(0.5)} * {self.expr(leaves)}; break;",
                f"    default: {acc} *= {self.lit(0.75)}; break;", "    }", "}"]

    def t_malloc(self) -> list[str]:
        i, j, t, acc = self.fresh("i"), self.fresh("j"), self.fresh("t"), self.rng.choice(self.accs)
        use = (f"{self.out}[{j}] += {t}[n - 1 - {j}] * {t}[{j}];" if self.out and self.chance(0.5)
               else f"{acc} += {t}[{j}] * {t}[({j} + 1) % n];")
        return [f"{self.real}* {t} = ({self.real}*)malloc((size_t)n * sizeof({self.real}));",
                f"for (int {i} = 0; {i} < n; {i}++) {t}[{i}] = {self.expr(self.leaves_at(i))};",
                f"for (int {j} = 1; {j} < n; {j}++) {t}[{j}] += {self.lit(0.5)} * {t}[{j} - 1];",
                f"for (int {j} = 0; {j} < n; {j}++) {use}", f"free({t});"]

    def t_calloc(self) -> list[str]:
        i, j, t, acc = self.fresh("i"), self.fresh("j"), self.fresh("t"), self.rng.choice(self.accs)
        return [f"{self.real}* {t} = ({self.real}*)calloc((size_t)n + 1, sizeof({self.real}));",
                f"for (int {i} = 0; {i} < n; {i}++) {t}[{i} / 2] += {self.expr(self.leaves_at(i))};",
                f"for (int {j} = 0; {j} <= n / 2; {j}++) {acc} += {t}[{j}] * {self.expr([f'{t}[{j}]', acc])};",
                f"free({t});"]

    def t_realloc(self) -> list[str]:
        i, j, t, acc = self.fresh("i"), self.fresh("j"), self.fresh("t"), self.rng.choice(self.accs)
        h = self.fresh("h")
        return [f"int {h} = (n + 1) / 2;",
                f"{self.real}* {t} = ({self.real}*)malloc((size_t){h} * sizeof({self.real}));",
                f"for (int {i} = 0; {i} < {h}; {i}++) {t}[{i}] = {self.expr(self.leaves_at(i))};",
                f"{t} = ({self.real}*)realloc({t}, (size_t)n * sizeof({self.real}));",
                f"for (int {i} = {h}; {i} < n; {i}++) {t}[{i}] = {self.lit(0.5)} * {t}[{i} - {h}] + x[{i}];",
                f"for (int {j} = 0; {j} < n; {j}++) {acc} += {t}[{j}] * {self.expr([f'{t}[{j}]', f'x[{j}]'])};",
                f"free({t});"]

    def struct_type(self) -> str:
        if self.struct is None:
            self.struct = f"pair{self.seed}"
            self.helpers.append(f"typedef struct {{ {self.real} u, v; }} {self.struct};\n")
        return self.struct

    def attribute(self) -> str:
        if self.chance(0.4):
            self.features.append("noinline")
            return "__attribute__((noinline)) "
        return ""

    def t_struct_value(self) -> list[str]:
        st, h = self.struct_type(), self.fresh(f"step{self.seed}_")
        leaves = ["s.u", "s.v", "w"]
        self.helpers.append(f"static {self.attribute()}{st} {h}({st} s, {self.real} w) {{\n"
                            f"    {st} r;\n    r.u = {self.expr(leaves)};\n"
                            f"    r.v = {self.lit(0.5)} * s.v + {self.squash(self.expr(leaves))};\n"
                            f"    return r;\n}}\n")
        i, s, acc = self.fresh("i"), self.fresh("st"), self.rng.choice(self.accs)
        return [f"{st} {s} = {{ {acc}, {self.lit(0.5)} }};",
                f"for (int {i} = 0; {i} < n; {i}++) {s} = {h}({s}, x[{i}]);",
                f"{acc} += {s}.u - {self.lit(0.5)} * {s}.v;"]

    def t_struct_pointer(self) -> list[str]:
        st, h = self.struct_type(), self.fresh(f"upd{self.seed}_")
        leaves = ["s->u", "s->v", "w"]
        self.helpers.append(f"static {self.attribute()}void {h}({st}* s, {self.real} w) {{\n"
                            f"    s->u += {self.lit(0.5)} * {self.expr(leaves)};\n"
                            f"    s->v = {self.squash(self.expr(leaves))};\n}}\n")
        i, s, acc = self.fresh("i"), self.fresh("st"), self.rng.choice(self.accs)
        return [f"{st} {s};", f"{s}.u = {acc};", f"{s}.v = x[0];",
                f"for (int {i} = 0; {i} < n; {i}++) {h}(&{s}, x[{i}]);",
                f"{acc} = {s}.u * {s}.v;"]

    def t_struct_array(self) -> list[str]:
        st = self.struct_type()
        i, ps, acc = self.fresh("i"), self.fresh("ps"), self.rng.choice(self.accs)
        return [f"{st}* {ps} = ({st}*)malloc((size_t)n * sizeof({st}));",
                f"for (int {i} = 0; {i} < n; {i}++) {{ {ps}[{i}].u = x[{i}]; "
                f"{ps}[{i}].v = {self.expr(self.leaves_at(i))}; }}",
                f"for (int {i} = 0; {i} < n; {i}++) {acc} += {ps}[{i}].u * {ps}[n - 1 - {i}].v;",
                f"free({ps});"]

    def t_helper_scalar(self) -> list[str]:
        h = self.fresh(f"h{self.seed}_")
        self.helpers.append(f"static {self.attribute()}{self.real} {h}({self.real} u, {self.real} v) {{\n"
                            f"    return {self.expr(['u', 'v'])};\n}}\n")
        i, acc = self.fresh("i"), self.rng.choice(self.accs)
        first = self.rng.choice(self.leaves_at(i))
        if self.out is not None and self.chance(0.5):
            return [f"for (int {i} = 0; {i} < n; {i}++) {self.out}[{i}] = {h}({self.out}[{i}], {first});"]
        return [f"for (int {i} = 0; {i} < n; {i}++) {acc} += {h}({first}, {acc});"]

    def t_helper_pointer(self) -> list[str]:
        """A helper reading arrays through pointers, with its own loop (and maybe an early exit)."""
        h = self.fresh(f"dot{self.seed}_")
        exit_ = f" if (s > {self.lit(3.0)}) break;" if self.chance(0.3) else ""
        r = self.real
        self.helpers.append(f"static {self.attribute()}{r} {h}(int m, const {r}* u, const {r}* v) {{\n"
                            f"    {self.real} s = {self.lit(0.0)};\n"
                            f"    for (int i = 0; i < m; i++) {{ s += {self.expr(['u[i]', 'v[i]'], 1)};{exit_} }}\n"
                            f"    return s;\n}}\n")
        acc = self.rng.choice(self.accs)
        other = self.rng.choice(self.inputs)
        return [f"{acc} += {h}({self.bound()}, x, {other});"]

    def t_helper_writes(self) -> list[str]:
        """A helper writing through a pointer (an axpy-like update of the output)."""
        if self.out is None:
            return self.t_helper_pointer()
        h = self.fresh(f"axpy{self.seed}_")
        r = self.real
        self.helpers.append(f"static {self.attribute()}void {h}(int m, {r} c, const {r}* u, {r}* w) {{\n"
                            f"    for (int i = 0; i < m; i++) w[i] += c * {self.expr(['u[i]', 'w[i]'], 1)};\n}}\n")
        src = "p" if "p" in self.inputs else "x"
        if src == self.out:
            src = self.rng.choice([a for a in self.inputs if a != self.out] or [self.out])
        if src == self.out:    # only one array: update it from a scratch copy (memcpy)
            t = self.fresh("t")
            self.features.append("memcpy")
            return [f"{self.real}* {t} = ({self.real}*)malloc((size_t)n * sizeof({self.real}));",
                    f"memcpy({t}, {self.out}, (size_t)n * sizeof({self.real}));",
                    f"{h}(n, {self.lit(0.5)}, {t}, {self.out});", f"free({t});"]
        return [f"{h}({self.bound()}, {self.rng.choice(self.accs + [self.lit(0.5)])}, {src}, {self.out});"]

    def t_gather(self) -> list[str]:
        i, acc = self.fresh("i"), self.rng.choice(self.accs)
        idx = self.rng.choice((f"({i} * 3 + 1) % n", f"n - 1 - {i}", f"({i} + 1) % n"))
        e = self.expr([f"x[{idx}]", f"x[{i}]"] + self.scalars)
        if self.out is not None and self.out != "x" and self.chance(0.6):
            return [f"for (int {i} = 0; {i} < n; {i}++) {self.out}[{idx}] += {e};"]
        return [f"for (int {i} = 0; {i} < n; {i}++) {acc} += {e};"]

    def t_matvec(self) -> list[str]:
        if self.matrix is None:
            return self.t_nested()
        i, j, t = self.fresh("i"), self.fresh("j"), self.fresh("t")
        acc = self.rng.choice(self.accs)
        sink = (f"{self.out}[{i}] += {self.squash(t)};" if self.out is not None and self.out != "x"
                else f"{acc} += {self.expr([t, acc], 1)};")
        return [f"for (int {i} = 0; {i} < n; {i}++) {{", f"    {self.real} {t} = {self.lit(0.0)};",
                f"    for (int {j} = 0; {j} < n; {j}++) {t} += A[{i} * n + {j}] * x[{j}];",
                f"    {sink}", "}"]


def generate(seed: int, float32_share: float = 0.2) -> CProgram:
    """The program of ``seed`` (deterministic); about ``float32_share`` of programs use ``float``."""
    rng = random.Random(seed)
    real = "float" if rng.random() < float32_share else "double"
    writer = _Writer(seed, rng, real)
    params, returns, source = writer.function()
    return CProgram(seed, writer.name, real, params, returns, source, sorted(set(writer.features)))


if __name__ == "__main__":        # python -m adoffload.testing.cprograms SEED...: print programs
    import sys
    for arg in sys.argv[1:] or ["0"]:
        print(generate(int(arg)).standalone())
