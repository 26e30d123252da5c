"""The bad-input matrix (issue 30): every kernel source against every launcher and one table of bad
inputs, generated from three descriptions rather than listed per combination.

* ``SOURCES``: how a source spells the same two kernels, ``map`` (``out[i] = a * x[i]**2``) and
  ``gather`` (``out[i] = a * x[(k[i] // m[i]) * 2]`` in 32-bit integers), and how it is called
  (``KIND_LAUNCHERS``, by kind: our kernels and CUDA/HIP ones through the numpy launcher with ``grid=`` or
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

from .bad_input_sources import (KIND_LAUNCHERS, LAUNCHERS, N, PRIMALS, SOURCES, Source, available, built,
                                good_arguments, guarded, launch, reference)

CHILD_TIMEOUT_S = 60


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
             # C may write in place (no restrict): out = a x^2 is right. Forward mode follows the memory
             # as the primal does only where the shadows share memory as the arrays do, and here d_out is
             # not d_x (enzyme/api.py's _check_overlaps refuses it); reverse mode refuses shared written memory
             fine=(("foreign", "primal"),)),
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
_RAW = ("a raw pointer carries no length: the foreign function reads as far as its n says, past a short array "
        "(silently wrong numbers)")
_FOREIGN_FAULT = ("foreign code runs unchecked: an index past the array reads or writes outside it (silently "
                  "wrong numbers, memory overwritten, or SIGSEGV), an integer division by zero traps (SIGFPE)")
_NUMBA_DIVISION = ("numba's cfunc turns the ZeroDivisionError into an 'exception ignored' message and returns "
                   "(silently wrong numbers)")
_NULL = "None is passed as a NULL pointer (C may accept one); a function that dereferences it crashes (SIGSEGV)"

KNOWN_FAILURES: tuple[tuple[str, str, str, str], ...] = (
    *((s, "jax", b, _JAX) for s in ("@ado.kernel", "from_cuda", "from_hip")
      for b in ("short", "out_of_bounds", "division_by_zero", "index_overflow")),
    ("from_numba", "*", "division_by_zero", _NUMBA_DIVISION),
    *((s, "*", b, _FOREIGN_FAULT) for s in ("from_llvm", "from_c", "from_numba")
      for b in ("out_of_bounds", "division_by_zero", "index_overflow")),
    *((s, "primal", "short", _RAW) for s in ("from_llvm", "from_c", "from_numba")),
    *((s, "primal", "none", _NULL) for s in ("from_llvm", "from_c", "from_numba")),
)


def known_failure(source: str, launcher: str, bad: str) -> str | None:
    for s, launch_name, b, reason in KNOWN_FAILURES:
        if s in ("*", source) and launch_name in ("*", launcher) and b in ("*", bad):
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
        bounds to check, and a CUDA kernel's integer division by zero traps on the host (a GPU's gives
        some number; and a CUDA context does not survive a fork)."""
        if self.bad.name == "good" or self.device != "cpu":     # a GPU does not trap on a division
            return False
        if self.source.kind == "foreign":
            return self.bad.fault or self.bad.name == "none"
        return self.source.kind == "cuda" and self.bad.name == "division_by_zero"

    @property
    def known(self) -> str | None:
        return known_failure(self.source.name, self.launcher, self.bad.name)


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
    line = re.search(r"\bline \d+", message) is not None
    if bad.param is None:                    # an in-kernel fault without an array: the line
        return line
    if bad.fault and line:                   # an in-kernel fault told at its source line (an index's overflow)
        return True
    if f"'{bad.param}'" in message:          # quoted, as every message spells a parameter ('a' is a word too)
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
        import faulthandler
        os.close(read)
        faulthandler.disable()                               # its crash is the outcome, not a report
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)                                  # numba's "exception ignored" and the like
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


BEGIN, END = "<!-- bad-input matrix: generated by python -m adoffload.testing.bad_inputs --write -->", \
    "<!-- end of the bad-input matrix -->"


def write_section(path) -> None:
    """Replace the matrix between the BEGIN and END markers of ``path`` by ``markdown_table()``."""
    from pathlib import Path
    text = Path(path).read_text()
    head, found, rest = text.partition(BEGIN)
    if not found or END not in rest:
        raise SystemExit(f"{path} has no {BEGIN} ... {END} section")
    Path(path).write_text(head + BEGIN + "\n" + markdown_table() + END + rest.split(END, 1)[1])


def main(argv=None) -> int:
    """``--write FILE``: regenerate the table in FILE; ``--run [--device cuda]``: run the matrix and
    print each case's outcome (PASS, XFAIL with the known reason, FAIL or XPASS with what happened)."""
    import argparse
    parser = argparse.ArgumentParser(prog="python -m adoffload.testing.bad_inputs")
    parser.add_argument("--write", metavar="FILE")
    parser.add_argument("--run", action="store_true")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    if args.write:
        write_section(args.write)
    if not args.run:
        if not args.write:
            print(markdown_table(), end="")
        return 0
    unexpected = 0
    for case in cases(args.device):
        if not available(case.source):
            print(f"{case.id:45s} SKIP ({case.source.needs} is not installed)")
            continue
        problem = outcome(case)
        tag = ("XFAIL" if problem else "XPASS") if case.known else ("FAIL" if problem else "PASS")
        unexpected += tag in ("FAIL", "XPASS")
        print(f"{case.id:45s} {tag}" + (f": {problem}" if problem else ""), flush=True)
    print(f"{unexpected} unexpected outcomes")
    return 1 if unexpected else 0


if __name__ == "__main__":
    raise SystemExit(main())
