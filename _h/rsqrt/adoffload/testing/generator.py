"""Random kernels in the kernel language, written as Python source text.

Every generated kernel has the same parameters (``PARAMETERS``) so one harness can run any
of them; the body mixes float and integer arithmetic, math calls on safe domains (each
argument squashed into the function's domain by construction), branches, conditional
expressions, ``for``/``while`` loops with ``break``, gathers through random index arrays,
atomics, local arrays and an in-place ``InOut`` update. Index expressions are reduced
``% n`` (or ``% size`` for local arrays), so a correct compiler never reports a bounds
error on these kernels. Magnitudes stay bounded: loops update floats through ``tanh``/mixing
and integers modulo a small number.

``rng`` is anything with ``randint(a, b)``, ``choice(seq)`` and ``random()``: a
``random.Random`` for the command line, hypothesis' ``st.randoms()`` in tests.
"""
from __future__ import annotations

from dataclasses import dataclass

KERNEL_NAME = "fuzzed"
PARAMETERS = ("a: ado.f64, x: ado.In[ado.f64], w: ado.In[ado.f64], idx: ado.In[ado.i64], "
              "z: ado.InOut[ado.f64], out: ado.Out[ado.f64], acc: ado.Out[ado.f64], "
              "iout: ado.Out[ado.i64]")
DIFFERENTIABLE_INPUTS = ("a", "x", "w", "z")
FLOAT_OUTPUTS = ("out", "acc", "z")
LOCAL_SIZE = 4

# Float operations as templates; every argument is squashed into the function's domain.
UNARY = ("-({0})", "ado.sin({0})", "ado.cos({0})", "ado.tanh({0})", "ado.exp(ado.sin({0}))",
         "ado.log(1.0 + ({0}) * ({0}))", "ado.sqrt(1.5 + ado.sin({0}))", "ado.atan({0})",
         "ado.abs({0})", "ado.erf({0})", "({0}) ** 2", "ado.expm1(ado.tanh({0}))",
         "ado.sinh(ado.tanh({0}))", "ado.cosh(ado.tanh({0}))", "ado.asin(0.5 * ado.tanh({0}))",
         "ado.acos(0.5 * ado.tanh({0}))", "ado.exp2(ado.sin({0}))", "ado.log2(2.0 + ado.cos({0}))",
         "ado.log1p(ado.abs({0}))", "ado.tan(0.5 * ado.tanh({0}))")
BINARY = ("({0}) + ({1})", "({0}) - ({1})", "({0}) * ({1})", "({0}) / (1.5 + ado.cos({1}))",
          "ado.min({0}, {1})", "ado.max({0}, {1})", "ado.atan2({0}, 2.0 + ado.sin({1}))",
          "ado.pow(1.5 + ado.sin({0}), ado.tanh({1}))", "ado.fma({0}, {1}, 0.5)",
          "ado.copysign({0}, {1})")
FLOAT_CONSTANTS = ("0.5", "-1.25", "2.0", "0.1", "3.0", "-0.3")
INT_BINARY = ("({0}) + ({1})", "({0}) - ({1})", "({0}) * ({1})", "ado.min({0}, {1})",
              "ado.max({0}, {1})")
INT_DIVISORS = (1, 2, 3, 5, -3)


@dataclass(frozen=True)
class GeneratedKernel:
    """A random kernel: its source (a plain ``def`` using ``ado.``) and the knobs it was made with."""
    source: str
    name: str = KERNEL_NAME


class _Writer:
    """Builds one kernel body; ``scopes`` holds the names visible at each nesting level."""

    def __init__(self, rng, max_depth: int, max_statements: int):
        self.rng = rng
        self.max_depth = max_depth
        self.max_statements = max_statements
        self.lines: list[str] = []
        self.floats = ["f0"]          # float variables visible everywhere after definition
        self.ints = ["k0"]
        self.loop_vars: list[str] = []
        self.counter = 0
        self.loop_depth = 0

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def emit(self, level: int, text: str) -> None:
        self.lines.append("    " * level + text)

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    # ---- expressions ---------------------------------------------------------------------
    def fexpr(self, depth: int) -> str:
        if depth <= 0 or self.chance(0.3):
            return self.fleaf()
        kind = self.rng.randint(0, 9)
        if kind <= 3:
            return self.rng.choice(UNARY).format(self.fexpr(depth - 1))
        if kind <= 8:
            return self.rng.choice(BINARY).format(self.fexpr(depth - 1), self.fexpr(depth - 1))
        return f"({self.fexpr(depth - 1)}) if {self.cond(depth - 1)} else ({self.fexpr(depth - 1)})"

    def fleaf(self) -> str:
        kind = self.rng.randint(0, 9)
        if kind <= 3:
            return self.rng.choice(self.floats)
        if kind == 4:
            return self.rng.choice(FLOAT_CONSTANTS)
        if kind == 5:
            return f"{self.rng.choice(('x', 'w'))}[{self.index()}]"
        if kind == 6:
            return f"0.25 * float({self.iexpr(1)})"
        return self.rng.choice(("a", "x[i]", "w[i]", "z[i]"))

    def iexpr(self, depth: int) -> str:
        if depth <= 0 or self.chance(0.35):
            return self.ileaf()
        kind = self.rng.randint(0, 5)
        if kind <= 2:
            return self.rng.choice(INT_BINARY).format(self.iexpr(depth - 1), self.iexpr(depth - 1))
        if kind == 3:
            return f"({self.iexpr(depth - 1)}) // {self.rng.choice(INT_DIVISORS)}"
        if kind == 4:
            return f"({self.iexpr(depth - 1)}) % {self.rng.choice(INT_DIVISORS)}"
        return f"ado.abs({self.iexpr(depth - 1)})"

    def ileaf(self, gather: bool = True) -> str:
        kind = self.rng.randint(0, 9)
        if kind <= 3:
            return self.rng.choice(self.ints + self.loop_vars * 2)
        if kind == 4:
            return str(self.rng.randint(0, 5))
        if kind == 5 and gather:
            return f"idx[({self.ileaf(gather=False)}) % n]"
        return self.rng.choice(("i", "idx[i]", "n"))

    def index(self, plain: bool = False, size: str = "n") -> str:
        """An integer expression reduced into ``[0, size)`` (Python ``%`` with a positive divisor)."""
        if plain or self.chance(0.4):
            return f"({self.ileaf(gather=False)}) % {size}"
        return f"({self.iexpr(1)}) % {size}"

    def cond(self, depth: int) -> str:
        kind = self.rng.randint(0, 6)
        if kind <= 2:
            return f"({self.fexpr(min(depth, 2))}) {self.rng.choice(('>', '<', '>=', '<='))} " \
                   f"{self.rng.choice(FLOAT_CONSTANTS)}"
        if kind == 3:
            return f"({self.iexpr(1)}) % 2 == 0"
        if kind == 4:
            return f"i {self.rng.choice(('<', '>', '!=', '=='))} {self.rng.randint(0, 6)}"
        if kind == 5 and depth > 0:
            return f"({self.cond(depth - 1)}) {self.rng.choice(('and', 'or'))} ({self.cond(depth - 1)})"
        return f"not ({self.iexpr(1)} > {self.rng.randint(-2, 6)})"

    # ---- statements ----------------------------------------------------------------------
    def block(self, level: int, count: int, top: bool = False) -> None:
        for _ in range(count):
            self.statement(level, top)

    def statement(self, level: int, top: bool) -> None:
        d = self.max_depth
        nested_ok = level < 3
        kind = self.rng.choice(
            ["new_float", "new_int", "set_float", "set_float", "set_int", "if", "for", "while",
             "atomic", "z", "local", "return"] if top else
            ["set_float", "set_float", "set_int", "if", "for", "atomic", "z", "break"])
        if kind == "new_float":
            name = self.fresh("f")
            self.emit(level, f"{name} = {self.fexpr(d)}")
            self.floats.append(name)
        elif kind == "new_int":
            name = self.fresh("k")
            self.emit(level, f"{name} = {self.iexpr(2)}")
            self.ints.append(name)
        elif kind == "set_float":
            target = self.rng.choice(self.floats)
            if self.loop_depth:
                mix = self.rng.choice(("ado.tanh({0})", "0.5 * {1} + 0.5 * ado.sin({0})"))
                self.emit(level, f"{target} = " + mix.format(self.fexpr(d), target))
            else:
                self.emit(level, f"{target} = {self.fexpr(d)}")
        elif kind == "set_int":
            target = self.rng.choice(self.ints)
            self.emit(level, f"{target} = ({self.iexpr(2)}) % 11")
        elif kind == "if" and nested_ok:
            self.emit(level, f"if {self.cond(2)}:")
            self.block(level + 1, self.rng.randint(1, 2))
            if self.chance(0.6):
                self.emit(level, "else:")
                self.block(level + 1, self.rng.randint(1, 2))
        elif kind == "for" and nested_ok and self.loop_depth < 2:
            var = self.fresh("j")
            bound = self.rng.choice([str(self.rng.randint(1, 4)), f"({self.ileaf()}) % 3",
                                     f"1, {self.rng.randint(1, 4)}"])
            self.emit(level, f"for {var} in range({bound}):")
            self.loop_body(level, var)
        elif kind == "while" and nested_ok and self.loop_depth < 2:
            var = self.fresh("c")
            self.emit(level, f"{var} = 0")
            self.emit(level, f"while {var} < {self.rng.choice(['2', '3', f'({self.ileaf()}) % 3'])}:")
            self.emit(level + 1, f"{var} += 1")
            self.loop_body(level, var)
        elif kind == "atomic":
            self.emit(level, f"ado.atomic_add(acc, {self.index()}, {self.fexpr(d - 1)})")
        elif kind == "z":
            self.emit(level, f"z[i] = {self.fexpr(d - 1)}")
        elif kind == "local":
            self.local_array(level)
        elif kind == "return":
            self.emit(level, f"if {self.cond(1)}:")
            self.emit(level + 1, "return")
        elif kind == "break" and self.loop_depth:
            self.emit(level, f"if {self.cond(1)}:")
            self.emit(level + 1, "break")
        else:
            self.statement(level, top) if self.chance(0.5) else self.emit(level, "pass")

    def loop_body(self, level: int, var: str) -> None:
        self.loop_vars.append(var)
        self.loop_depth += 1
        self.block(level + 1, self.rng.randint(1, 3))
        self.loop_depth -= 1
        self.loop_vars.pop()

    def local_array(self, level: int) -> None:
        array, var, name = self.fresh("t"), self.fresh("j"), self.fresh("f")
        self.emit(level, f"{array} = ado.zeros({LOCAL_SIZE}, ado.f64)")
        self.emit(level, f"for {var} in range({LOCAL_SIZE}):")
        self.loop_vars.append(var)
        self.emit(level + 1, f"{array}[{var}] = {self.fexpr(self.max_depth - 1)}")
        self.loop_vars.pop()
        self.emit(level, f"{name} = {array}[{self.index(size=str(LOCAL_SIZE))}]")
        self.floats.append(name)


def generate(rng, *, max_depth: int = 3, max_statements: int = 6) -> GeneratedKernel:
    """A random kernel (see the module docstring for what it may contain)."""
    w = _Writer(rng, max_depth, max_statements)
    w.emit(0, f"def {KERNEL_NAME}({PARAMETERS}):")
    w.emit(1, "i = ado.tid()")
    w.emit(1, "n = len(x)")
    w.emit(1, "f0 = x[i]")
    w.emit(1, "k0 = idx[i]")
    w.block(1, rng.randint(1, max_statements), top=True)
    total = " + ".join(w.floats)
    w.emit(1, f"out[i] = {w.fexpr(max_depth - 1)} + {total}")
    w.emit(1, f"iout[i] = {' + '.join(w.ints)}")
    return GeneratedKernel("\n".join(w.lines) + "\n")
