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
from dataclasses import asdict
from pathlib import Path

import numpy as np

from .clang import OPT_FLAGS, clang_available, compile_c, compile_native  # noqa: F401 (the tests' API)
from .cprograms import INT, REAL, CProgram, generate, module_source
from .irtext import code_of, defined_name, module_subset, references, split_module  # noqa: F401 (split_module: API)
from .program_checks import (CRASH, MISMATCH, PASS, REFUSED, STATUSES, TOLERANCES, UNTESTABLE, Derivatives,  # noqa: F401
                             NativeFunction, Outcome, Point, check_program, run_at, short)  # (the tests' API)






# ---------------------------------------------------------------------------- native primal



# ---------------------------------------------------------------------------- one program





















# ---------------------------------------------------------------------------- one batch

def _classify_error(exc: BaseException) -> tuple[str, str]:
    from ..errors import Error
    if isinstance(exc, Error):
        return REFUSED, f"{type(exc).__name__}: {exc}"
    return CRASH, "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-3000:]


def _derive(module, program: CProgram) -> tuple[Derivatives | None, list[str]]:
    from ..enzyme.activity import ACTIVE, CONST, DUP
    from ..enzyme.forward import forward
    from ..enzyme.reverse import reverse
    fn = module.functions[program.name]
    fwd_act = [CONST if p.kind == INT else DUP for p in program.params]
    rev_act = [CONST if p.kind == INT else ACTIVE if p.kind == REAL else DUP for p in program.params]
    fwd = forward(module, fn, fwd_act, name=f"{program.name}.difftest.fwd")
    rev = reverse(module, fn, rev_act, name=f"{program.name}.difftest.rev")
    names = [fwd.name, rev.function.name] + ([rev.tape.count_function] if rev.tape is not None else [])
    return Derivatives(fwd.name, rev.function.name, rev.tape.count_function if rev.tape else None), names


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
                calls = Derivatives(funcs[d.forward], funcs[d.reverse], funcs[d.count] if d.count else None)
                outcome = check_program(p, opt, funcs[p.name], calls, native_fn)
        except Exception as exc:       # noqa: BLE001
            outcome = Outcome(p.seed, opt, CRASH, "run: " + _classify_error(exc)[1], ["run"])
        emit(("result", outcome))


def check_refused_primal(program: CProgram, refusal: Outcome, primal, native) -> Outcome:
    """A program AD refused: its loaded primal must still compute what clang's build computes."""
    if native is None:
        return refusal
    tol = TOLERANCES[program.real]
    point = Point(program, np.random.default_rng([program.seed, 7]))
    for shift in (0.0, tol["step"]):   # both must differ (a branch flipped by rounding would not)
        ours, theirs = run_at(primal, point, point.args(shift)), run_at(native, point, point.args(shift))
        if np.allclose(ours, theirs, rtol=tol["primal"], atol=tol["primal"]):
            return refusal
    detail = (f"[primal-native] the loaded function computes {short(ours)}, clang's native build "
              f"{short(theirs)} (AD was refused: {refusal.detail})")
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
