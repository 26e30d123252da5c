"""Random C functions through clang -O0..-O3, ``from_llvm`` and AD: no silent wrong derivative, no crash.

``adoffload.testing.differential`` checks every (program, level) with central differences and
the forward/reverse inner-product identity. A MISMATCH (wrong derivative, no error) or a CRASH
(any other failure) fails the test. A refusal (an ``adoffload.Error``) is allowed when its reason
is one of ``EXPECTED_REFUSALS`` (a new kind of refusal fails the test until it is looked at), and
each level must pass at least ``MIN_PASS_SHARE`` of its programs, so an engine that refused
everything could not pass. ``KNOWN_MISMATCHES`` lists the mismatches found and not yet fixed,
each with its regression test; they are printed, not counted. The summary table is printed
(``pytest -s`` shows it). Failures are written with their C source to ``$ADOFFLOAD_DIFFTEST_OUT``
(default: a temp folder).

Size: ``ADOFFLOAD_DIFFTEST_PROGRAMS`` programs (default 300, for CI time: 500 took 6.6 minutes of CPU
in the suite on 2026-12-03) x 4 levels. 1000 took 3:34 wall (400 s
of CPU) in 2 worker processes on a 2-core machine otherwise idle, 2026-12-01 (docs/reliability.md),
but 15 minutes of one pytest worker inside the whole suite on CI's 2 cores (session 9: the suite's
critical path, 22:49 in all); 1000 x 4 passed there at session 9's final code. The
check is one test per group of levels (``LEVEL_GROUPS``), so pytest-xdist's workers share it; each
part starts ``_jobs()`` worker processes, one per core that no other xdist worker has. Reproduce one
failure with ``python -m adoffload.testing.differential --seeds SEED --opt LEVEL --show``.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest

from adoffload.testing import cprograms, differential

pytestmark = pytest.mark.skipif(not differential.clang_available(),
                                reason="the ziglang wheel (the clang these tests compile C with) is not installed")

PROGRAMS = int(os.environ.get("ADOFFLOAD_DIFFTEST_PROGRAMS", "300"))
FIRST_SEED = int(os.environ.get("ADOFFLOAD_DIFFTEST_SEED", "0"))

# What the engine refuses in generated programs today (reason pattern: why), each refusal a
# DifferentiationError naming the construct.
# (clang -O2/-O3's masked loads/stores were refused until ir/masked_memory.py rewrote them lane by lane.)
EXPECTED_REFUSALS: dict[str, str] = {}
MIN_PASS_SHARE = 0.9
# Mismatches found and not yet fixed in the engine: seed -> its regression test (a strict xfail
# there turns into a failure once the engine is fixed; then the seed leaves this table).
# Fixed, with their regression tests: 544 (tests/ad/regressions/test_realloc_after_memcpy.py, a zero
# reverse gradient through memcpy + realloc) and 671 (test_reverse_zero_times_nan.py, atan2(0, 0)).
KNOWN_MISMATCHES: dict[int, str] = {}
# The levels checked together by one test. -O2 and -O3 stay together: an -O3 program whose code is
# its -O2 code takes the -O2 outcome. Every check below is per outcome or per level, so it is the
# same whether the levels run in one test or in several.
LEVEL_GROUPS = [(0,), (1,), (2, 3)]


def _jobs() -> int:
    """Processes for one part: 2 when pytest runs in one process, else the cores per xdist worker
    (1 on CI's 2 cores with 2 workers, instead of 2 processes each and 4 on 2 cores)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    return max(1, min(2, (os.cpu_count() or 1) // workers))


def test_generator_is_deterministic_and_varied():
    assert cprograms.generate(5).source == cprograms.generate(5).source
    sources = {cprograms.generate(s).source for s in range(60)}
    assert len(sources) == 60
    features = set().union(*(cprograms.generate(s).features for s in range(200)))
    for wanted in ("malloc", "calloc", "realloc", "struct_value", "struct_pointer", "trisolve", "break",
                   "return", "helper_pointer", "noinline", "pow", "atan2", "hypot", "fmax"):
        assert wanted in features, wanted
    assert {cprograms.generate(s).real for s in range(60)} == {"float", "double"}


def test_generated_programs_compile_and_their_primal_is_finite(tmp_path):
    """Clang accepts every program of a batch (at -O0 and -O2) and, built natively, each gives
    finite outputs at the harness' random points (no NaN from a domain error, no overflow)."""
    programs = [cprograms.generate(s) for s in range(1000, 1040)]
    source = cprograms.module_source(programs)
    for opt in (0, 2):
        assert "define" in differential.compile_c(source, opt)
    library = differential.compile_native(source, 0, tmp_path)
    for p in programs:
        native = differential.NativeFunction(library, p)
        for k in range(3):
            point = differential.Point(p, np.random.default_rng([p.seed, k]))
            out = differential.run_at(native, point, point.args())
            assert np.all(np.isfinite(out)) and np.max(np.abs(out), initial=0) < 1e6, (p.seed, out)


def test_module_subset_keeps_a_function_and_its_callees():
    programs = [cprograms.generate(s) for s in range(40) if "helper_scalar" in cprograms.generate(s).features][:2]
    text = differential.compile_c(cprograms.module_source(programs), 0)
    one = differential.module_subset(text, [programs[0].name])
    names = differential.split_module(one)[1]
    assert programs[0].name in names and programs[1].name not in names
    assert any(name.startswith(f"h{programs[0].seed}_") for name in names)


@pytest.mark.slow
@pytest.mark.parametrize("levels", LEVEL_GROUPS, ids=lambda levels: "O" + "".join(map(str, levels)))
def test_random_c_programs_have_no_silent_mismatch_and_no_crash(tmp_path, levels):
    seeds = list(range(FIRST_SEED, FIRST_SEED + PROGRAMS))
    outcomes = differential.run(seeds, list(levels), jobs=_jobs(), batch=20)
    summary = differential.summarize(outcomes)
    print()
    print(summary)
    out = Path(os.environ["ADOFFLOAD_DIFFTEST_OUT"]) / f"O{''.join(map(str, levels))}" \
        if "ADOFFLOAD_DIFFTEST_OUT" in os.environ else tmp_path
    differential.write_failures(outcomes, out)
    known = [o for o in outcomes if o.status == differential.MISMATCH and o.seed in KNOWN_MISMATCHES]
    for o in known:
        print(f"known mismatch, -O{o.opt} seed {o.seed} (see {KNOWN_MISMATCHES[o.seed]}): {o.detail[:300]}")
    bad = [o for o in outcomes if o.status in (differential.MISMATCH, differential.CRASH) and o not in known]
    assert not bad, (f"{len(bad)} silent mismatches / crashes (C sources in {out}); first: "
                     f"-O{bad[0].opt} seed {bad[0].seed}: {bad[0].detail[:2000]}")
    unexpected = [o for o in outcomes if o.status == differential.REFUSED
                  and not any(re.search(pattern, o.detail) for pattern in EXPECTED_REFUSALS)]
    assert not unexpected, (f"{len(unexpected)} refusals of a kind not in EXPECTED_REFUSALS; first: -O{unexpected[0].opt} "
                            f"seed {unexpected[0].seed}: {unexpected[0].detail[:1000]}\n{summary}")
    for opt in levels:
        checked = [o for o in outcomes if o.opt == opt and o not in known]
        passed = sum(1 for o in checked if o.status == differential.PASS)
        assert passed >= MIN_PASS_SHARE * len(checked), f"-O{opt}: only {passed} of {len(checked)} pass\n{summary}"


def test_the_oracles_catch_a_wrong_derivative():
    """The checks are not vacuous: one program's forward tangent, then its reverse adjoints, made
    wrong by 0.1% each give a MISMATCH naming the check that failed; unchanged, it passes."""
    from adoffload.sources import llvm as foreign
    from adoffload.enzyme.host import compile_host
    program = next(p for p in map(cprograms.generate, range(200))
                   if p.real == "double" and p.returns_real and "x" in [q.name for q in p.params])
    module = foreign.from_llvm(differential.compile_c(program.standalone(), 0)).ir
    derived, names = differential._derive(module, program)
    funcs = compile_host(module, [program.name] + names, opt_level=0, codegen_level=0)
    count = funcs[derived.count] if derived.count else None
    right = differential.Derivatives(funcs[derived.forward], funcs[derived.reverse], count)
    assert differential.check_program(program, 0, funcs[program.name], right).status == differential.PASS

    def wrong_forward(*args):
        return right.forward(*args) * 1.001 + 1e-3

    def wrong_reverse(*args):
        right.reverse(*args)
        args[len(program.params)][...] += 1e-3      # the adjoint of the first differentiated argument

    for derivatives, check in [(differential.Derivatives(wrong_forward, right.reverse, count), "forward"),
                               (differential.Derivatives(right.forward, wrong_reverse, count), "reverse")]:
        outcome = differential.check_program(program, 0, funcs[program.name], derivatives)
        assert outcome.status == differential.MISMATCH and check in outcome.modes, outcome
        assert "identity" in outcome.modes, outcome


def test_every_known_mismatch_has_its_regression_test():
    root = Path(__file__).parents[2]
    for seed, path in KNOWN_MISMATCHES.items():
        assert (root / path).is_file(), (seed, path)


def test_the_tester_does_not_blame_the_engine_for_its_own_limits():
    """Seed 200078 (float32): steps h and 2h agreed on a difference quotient 20% below the true
    derivative (high curvature next to a branch); a third step h/4 now sends the tester to another
    point. Seed 200441's primal is not finite anywhere the tester looks: untestable, not a crash."""
    outcomes = {o.seed: o for o in differential.run([200078, 200441], [0], jobs=1, batch=2)}
    assert outcomes[200078].status == differential.PASS, outcomes[200078].detail
    assert outcomes[200441].status == differential.UNTESTABLE, outcomes[200441].detail
