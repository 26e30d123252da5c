"""Random scalar expressions checked against Python itself (not against a reference of ours).

``generated_case(seed)`` writes a kernel of random int and float expressions over a thread's
``a, b, c`` (i64) and ``x, y, z`` (f64, half of them special values: ±0.0, ±inf, NaN): ``+ - * / // %``,
``**`` with small constant exponents, bitwise operators, shifts by 3, 63, 64 and run-time counts,
builtin ``min``/``max``/``abs``/``int``/``float``/``round``, ``and``/``or`` as values, comparisons
(chained), ``not`` and conditional expressions. ``check_case`` launches it on the host and compares
each output with the expression evaluated by Python's own operators (``evaluate``), integers
exactly, floats bit for bit (NaN equal to NaN, the sign of zero counted) or to 1e-12 where the
kernel's ``x ** 3`` (multiplications) may differ from Python's ``pow`` in the last bit.

Where Python raises (``ZeroDivisionError`` on floats, ``OverflowError``) or an int leaves int64 (the
kernel wraps, docs/language.md), that output is not compared; expressions that would stop the
kernel's thread (integer division by zero, ``int()`` of NaN) are not generated. A constant
subexpression Python cannot fold (``0.0 % 0.0``) makes the whole kernel a compile-time refusal,
counted as such, as is any other compile-time refusal (an int to a negative power). Long runs::

    python -m adoffload.testing.python_oracle --seeds 0 200
"""
from __future__ import annotations

import argparse
import ast
import importlib.util
import math
import random
import tempfile
from pathlib import Path

import numpy as np

INT64 = 2 ** 63
SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, 2.5, -2.5, math.inf, -math.inf, math.nan, 3.0, 0.1]


class Skip(Exception):
    """Python raises here, or an int leaves int64: the kernel's value is not Python's by design."""


_BINARY = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
           ast.Div: lambda a, b: a / b, ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b,
           ast.Pow: lambda a, b: a ** b, ast.BitAnd: lambda a, b: a & b, ast.BitOr: lambda a, b: a | b,
           ast.BitXor: lambda a, b: a ^ b, ast.LShift: lambda a, b: a << b if b < 200 else 0,
           ast.RShift: lambda a, b: a >> b}
_COMPARE = {ast.Lt: lambda a, b: a < b, ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b,
            ast.GtE: lambda a, b: a >= b, ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b}
_CALLS = {"min": min, "max": max, "abs": abs, "int": int, "float": float, "round": round}


def evaluate(node: ast.expr, env: dict):
    """``node`` evaluated by Python's operators, short-circuits included."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return env[node.id]
    try:
        if isinstance(node, ast.UnaryOp):
            value = evaluate(node.operand, env)
            result = {ast.USub: lambda v: -v, ast.Not: lambda v: not v, ast.Invert: lambda v: ~v}[type(node.op)](value)
        elif isinstance(node, ast.BinOp):
            result = _BINARY[type(node.op)](evaluate(node.left, env), evaluate(node.right, env))
        elif isinstance(node, ast.Compare):
            left, result = evaluate(node.left, env), True
            for op, comparator in zip(node.ops, node.comparators):
                right = evaluate(comparator, env)
                if not _COMPARE[type(op)](left, right):
                    result = False
                    break
                left = right
        elif isinstance(node, ast.BoolOp):
            for value in node.values:
                result = evaluate(value, env)
                if bool(result) != isinstance(node.op, ast.And):
                    break
        elif isinstance(node, ast.IfExp):
            result = evaluate(node.body if evaluate(node.test, env) else node.orelse, env)
        elif isinstance(node, ast.Call):
            result = _CALLS[node.func.id](*(evaluate(a, env) for a in node.args))
        else:
            raise NotImplementedError(ast.dump(node))
    except (ZeroDivisionError, OverflowError, ValueError):
        raise Skip from None
    if isinstance(result, complex) or (type(result) is int and not -INT64 <= result < INT64):
        raise Skip
    return result


class ExpressionGenerator:
    def __init__(self, rng: random.Random):
        self.rng = rng

    def integer(self, depth: int) -> str:
        r = self.rng
        if depth == 0 or r.random() < 0.2:
            return r.choice(["a", "b", "c", "a", "b", "c", str(r.randint(-9, 9)), "-3", "7"])
        kind, sub = r.randrange(13), lambda: self.integer(depth - 1)
        if kind < 3:
            return f"({sub()} {r.choice(['+', '-', '*'])} {sub()})"
        if kind < 5:       # divisors that are never zero
            divisor = r.choice([f"(abs({sub()}) + 1)", "-3", "7", f"(-1 - abs({sub()}))"])
            return f"({sub()} {r.choice(['//', '%'])} {divisor})"
        if kind == 5:
            return f"({sub()} {r.choice(['&', '|', '^'])} {sub()})"
        if kind == 6:
            shifted = r.choice(["a", "b", "c", sub()])
            return f"({shifted} {r.choice(['<<', '>>'])} {r.choice(['3', '63', '64', '(c % 70)', '(b & 7)'])})"
        if kind == 7:
            third = f", {sub()}" if r.random() < 0.3 else ""
            return f"{r.choice(['min', 'max'])}({sub()}, {sub()}{third})"
        if kind == 8:
            return f"abs({sub()})"
        if kind in (9, 10):   # finite operands only: int(nan) and round(inf) stop the thread
            f = self.real(depth - 1)
            return f"{'int' if kind == 9 else 'round'}({f} if abs({f}) < 1e6 else 0.5)"
        if kind == 11:
            return f"({sub()} if {self.condition(depth - 1)} else {sub()})"
        return f"({sub()} {r.choice(['and', 'or'])} {sub()})"

    def real(self, depth: int) -> str:
        r = self.rng
        if depth == 0 or r.random() < 0.2:
            return r.choice(["x", "y", "z"] * 6 + ["0.1", "-2.5", "-0.0", str(round(r.uniform(-5, 5), 2))])
        kind, sub = r.randrange(12), lambda: self.real(depth - 1)
        if kind < 5:
            return f"({sub()} {r.choice(['+', '-', '*', '/', '//', '%'])} {sub()})"
        if kind == 5:
            return f"({sub()} {r.choice(['+', '-', '*', '/'])} {self.integer(depth - 1)})"
        if kind == 6:
            return f"{r.choice(['min', 'max'])}({sub()}, {sub()})"
        if kind == 7:
            return f"abs({sub()})"
        if kind == 8:
            return f"float({self.integer(depth - 1)})"
        if kind == 9:
            return f"({sub()} ** {r.choice(['2', '3', '-1', '0.5', '2.0'])})"
        if kind == 10:
            return f"({sub()} if {self.condition(depth - 1)} else {sub()})"
        return f"({sub()} {r.choice(['and', 'or'])} {r.choice([sub(), self.integer(depth - 1)])})"

    def condition(self, depth: int) -> str:
        r, depth = self.rng, max(depth, 0)
        kind = r.randrange(5)
        if kind == 0:
            return f"{self.real(depth)} {r.choice(['<', '<=', '==', '!=', '>', '>='])} {self.real(depth)}"
        if kind == 1:
            op = r.choice(['<', '<=', '==', '!='])
            return f"{self.integer(depth)} {op} {self.integer(depth)} < {self.integer(depth)}"
        if kind == 2:
            return f"({self.condition(depth - 1)} {r.choice(['and', 'or'])} {self.condition(depth - 1)})"
        if kind == 3:
            return f"not ({self.real(depth)} < {self.real(depth)})"
        return f"{self.integer(depth)} % 2 == 0"


def generated_case(seed: int, count: int = 12, depth: int = 3) -> tuple[str, list[tuple[str, str]]]:
    generator = ExpressionGenerator(random.Random(seed))
    expressions = [(generator.integer(depth), generator.real(depth)) for _ in range(count)]
    body = "\n".join(f"    ints[i, {k}] = {ie}\n    reals[i, {k}] = float({fe})"
                     for k, (ie, fe) in enumerate(expressions))
    source = f'''import adoffload as ado


@ado.kernel
def oracle_case(A: ado.In[ado.i64], B: ado.In[ado.i64], C: ado.In[ado.i64], X: ado.In[ado.f64],
                Y: ado.In[ado.f64], Z: ado.In[ado.f64], ints: ado.Out[ado.i64, 2],
                reals: ado.Out[ado.f64, 2]):
    i = ado.tid()
    a, b, c, x, y, z = A[i], B[i], C[i], X[i], Y[i], Z[i]
{body}
'''
    return source, expressions


def _same(got: float, want: float) -> bool:
    if math.isnan(want):
        return math.isnan(got)
    if got == want and math.copysign(1, got) == math.copysign(1, want):
        return True
    return math.isfinite(want) and abs(got - want) <= 1e-12 * max(1.0, abs(want))


def check_case(seed: int, folder: Path, threads: int = 64) -> tuple[str, list]:
    """('passed' | 'refused' | 'failed', mismatches): the kernel's outputs against Python's."""
    import adoffload as ado
    source, expressions = generated_case(seed)
    rng = random.Random(seed + 10 ** 6)
    ints = {name: np.array([rng.randint(lo, hi) for _ in range(threads)], np.int64)
            for name, lo, hi in (("a", -20, 20), ("b", -20, 20), ("c", 0, 100))}
    reals = {name: np.array([rng.choice(SPECIAL) if rng.random() < 0.5 else rng.uniform(-6, 6)
                             for _ in range(threads)]) for name in ("x", "y", "z")}
    path = folder / f"oracle_case_{seed}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"oracle_case_{seed}", path)
    module = importlib.util.module_from_spec(spec)
    out_ints, out_reals = np.zeros((threads, len(expressions)), np.int64), np.zeros((threads, len(expressions)))
    try:
        spec.loader.exec_module(module)  # compiles: a refusal names its line (a constant Python cannot fold,
    except ado.Error as exc:             # an int to a negative power, ...), which the language allows
        return "refused", [str(exc)]
    module.oracle_case(*ints.values(), *reals.values(), out_ints, out_reals, grid=threads)
    trees = [(ast.parse(ie, mode="eval").body, ast.parse(fe, mode="eval").body) for ie, fe in expressions]
    mismatches = []
    for t in range(threads):
        env = {name: int(v[t]) for name, v in ints.items()} | {name: float(v[t]) for name, v in reals.items()}
        for k, (int_tree, real_tree) in enumerate(trees):
            for tree, got, text in ((int_tree, int(out_ints[t, k]), expressions[k][0]),
                                    (real_tree, float(out_reals[t, k]), expressions[k][1])):
                try:
                    want = evaluate(tree, env)
                except Skip:
                    continue
                if not (got == int(want) if tree is int_tree else _same(got, float(want))):
                    mismatches.append((text, env, got, want))
    return ("failed" if mismatches else "passed"), mismatches


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs=2, default=(0, 50), metavar=("FIRST", "END"))
    parser.add_argument("--show-refusals", action="store_true")
    args = parser.parse_args(argv)
    counts = {"passed": 0, "refused": 0, "failed": 0}
    with tempfile.TemporaryDirectory() as folder:
        for seed in range(*args.seeds):
            outcome, details = check_case(seed, Path(folder))
            counts[outcome] += 1
            if outcome == "refused" and args.show_refusals:
                print(f"seed {seed}: refused: {details[0].splitlines()[0]}")
            if outcome == "failed":
                text, env, got, want = details[0]
                print(f"seed {seed}: {len(details)} mismatches, e.g. {text} at {env}: kernel {got!r}, Python {want!r}")
    print(counts)
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
