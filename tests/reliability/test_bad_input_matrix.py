"""The generated bad-input matrix (issue 30; adoffload/testing/bad_inputs.py): every kernel source
against every launcher and the same table of bad inputs. A case passes when the launch raises an
adoffload.Error naming the bad parameter (an in-kernel fault: the array or the line), or gives the
right numbers where the input is no error, and never writes past an array or crashes. The cases that
fail today are strict xfails with their reason (bad_inputs.KNOWN_FAILURES), shown in
docs/reliability.md's table, which is rendered from the same description."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from adoffload.testing import bad_input_sources, bad_inputs

# the crash-prone cases run in a forked child; JAX (imported by the jax cases) warns about any fork
pytestmark = pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")

RELIABILITY_MD = Path(__file__).parents[2] / "docs" / "reliability.md"
HAS_JAX = importlib.util.find_spec("jax") is not None


def _params(device: str) -> list:
    params = []
    for case in bad_inputs.cases(device):
        marks = []
        if case.source.needs == "numba" and not bad_inputs.available(case.source):
            marks.append(pytest.mark.skip(reason="from_numba needs numba, not installed"))
        elif case.launcher == "jax" and not HAS_JAX:
            marks.append(pytest.mark.skip(reason="jax is not installed"))
        if case.known:
            marks.append(pytest.mark.xfail(strict=True, reason=case.known))
        params.append(pytest.param(case, id=case.id, marks=marks))
    return params


def _built(case) -> None:
    """The source's kernels, or a skip where its compiler is missing (a GPU machine without clang runs
    from_cuda from a carried clang-IR cache: tests/foreign_cuda/warm_clang_cache.py)."""
    from adoffload.errors import ToolNotFoundError
    try:
        bad_input_sources.built(case.source.name)
    except ToolNotFoundError as exc:
        pytest.skip(f"{case.source.name}: {exc}")


@pytest.mark.parametrize("case", _params("cpu"))
def test_bad_input_on_the_host(case):
    _built(case)
    problem = bad_inputs.outcome(case)
    assert not problem, f"{case.id}: {problem}"


@pytest.mark.parametrize("case", _params("cuda"))
def test_bad_input_on_the_gpu(case, cuda):
    if case.launcher == "jax":
        import jax
        try:
            jax.devices("gpu")
        except RuntimeError as exc:
            pytest.skip(f"JAX has no GPU backend here: {exc}")
    _built(case)
    problem = bad_inputs.outcome(case)
    assert not problem, f"{case.id}: {problem}"


def test_the_matrix_covers_every_source_launcher_and_bad_input():
    ids = [case.id for case in bad_inputs.cases("cpu")]
    assert len(ids) == len(set(ids))
    sources = {case.source.name for case in bad_inputs.cases("cpu")}
    assert sources == {"@ado.kernel", "from_cuda", "from_hip", "from_llvm", "from_c", "from_numba"}
    for bad in bad_inputs.BAD_INPUTS:
        assert any(case.bad is bad for case in bad_inputs.cases("cpu")), bad.name
    gpu = {case.source.name for case in bad_inputs.cases("cuda")}
    assert gpu == {"@ado.kernel", "from_cuda"}
    # every known failure names cases that exist (a stale entry would hide nothing and say something false)
    for source, launcher, bad, _ in bad_inputs.KNOWN_FAILURES:
        assert any(source in ("*", c.source.name) and launcher in ("*", c.launcher) and bad in ("*", c.bad.name)
                   for c in bad_inputs.cases("cpu")), (source, launcher, bad)


def test_docs_reliability_md_holds_the_matrix():
    assert bad_inputs.BEGIN + "\n" + bad_inputs.markdown_table() + bad_inputs.END in RELIABILITY_MD.read_text(), \
        "docs/reliability.md is stale: run python -m adoffload.testing.bad_inputs --write docs/reliability.md"


# ---- the harness itself: it reports what it is meant to catch ---------------------------------------

def _case(source: str, launcher: str, bad: str) -> bad_inputs.Case:
    return next(c for c in bad_inputs.cases("cpu") if (c.source.name, c.launcher, c.bad.name) == (source, launcher, bad))


def test_a_launch_that_returns_and_writes_past_an_array_is_reported(monkeypatch):
    def careless(source, launcher, name, values, device="cpu"):
        out = values["out"]
        out.base[out.size] = 1.0                         # one past the end
        return {"out": out}
    monkeypatch.setattr(bad_inputs, "launch", careless)
    problem = bad_inputs.run_case(_case("@ado.kernel", "primal", "short"))
    assert "no error: the launch returned" in problem and "wrote past the end" in problem


def test_wrong_numbers_and_unnamed_parameters_are_reported(monkeypatch):
    import adoffload as ado

    def wrong(source, launcher, name, values, device="cpu"):
        values["out"][:] = 1.0
        return {"out": values["out"]}
    monkeypatch.setattr(bad_inputs, "launch", wrong)
    assert "out is wrong" in bad_inputs.run_case(_case("@ado.kernel", "primal", "good"))

    def vague(source, launcher, name, values, device="cpu"):
        raise ado.ArgumentError("something is wrong with an argument")
    monkeypatch.setattr(bad_inputs, "launch", vague)
    assert "does not name x" in bad_inputs.run_case(_case("@ado.kernel", "primal", "dtype"))

    def foreign(source, launcher, name, values, device="cpu"):
        raise ValueError("not ours")
    monkeypatch.setattr(bad_inputs, "launch", foreign)
    assert "not an adoffload.Error" in bad_inputs.run_case(_case("@ado.kernel", "primal", "dtype"))


def test_a_crash_in_the_child_is_a_failed_case(monkeypatch):
    import os
    import signal
    case = _case("@ado.kernel", "primal", "division_by_zero")
    monkeypatch.setattr(bad_inputs, "run_case", lambda c: os.kill(os.getpid(), signal.SIGSEGV) or "")
    monkeypatch.setattr(bad_inputs, "_warmed", lambda *a: "")
    assert bad_inputs.run_isolated(case) == "crashed the process: SIGSEGV"


def test_guarded_arrays_leave_their_tail_to_the_check():
    view = bad_input_sources.guarded(np.arange(3.0))
    assert view.base.size == 3 + bad_input_sources.TAIL and (view.base[3:] == bad_input_sources.SENTINEL).all()
