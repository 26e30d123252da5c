"""The bad-input matrix and the shadow-shape checks through native launch entries (kernels/native_entry.py).

A native entry accepts only the exact launch its plan was made for and hands anything else to the
Python path; this checks that claim against the repository's own tables of rejected inputs. For every
case of our kernels and CUDA/HIP ones on the host (primal, jvp, vjp: the numpy launcher), the good
launch of the same kernel runs until its entry exists and launches natively, then the bad case runs:
it must still pass (refused with an error naming the parameter, or right numbers where it is no
error, nothing written past an array), and the entries must have seen it: a fallback where the
arguments are wrong, a native launch that raised where the kernel itself finds the fault. The same
for the shadow-shape table of tests/reliability/test_shadow_shapes.py."""
from __future__ import annotations

import numpy as np
import pytest

from adoffload.errors import ShapeError
from adoffload.kernels.native_entry import totals
from adoffload.kernels.native_layout import LAYOUT
from adoffload.testing import bad_input_sources, bad_inputs

from .test_shadow_shapes import BAD, VARIANTS, arguments, call, guarded

pytestmark = [pytest.mark.skipif(LAYOUT is None, reason="no native entries on this Python/numpy"),
              pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")]
LAUNCHERS = ("primal", "jvp", "vjp")


def _cases() -> list:
    params = []
    for case in bad_inputs.cases("cpu"):
        if case.source.kind == "foreign" or case.launcher not in LAUNCHERS or case.bad.name == "good":
            continue
        marks = [pytest.mark.xfail(strict=True, reason=case.known)] if case.known else []
        if case.crash_risk:        # a CUDA kernel's division by zero traps on the host: no native claim to check
            marks.append(pytest.mark.skip(reason="runs in a forked child (bad_inputs.run_isolated)"))
        params.append(pytest.param(case, id=case.id, marks=marks))
    return params


def _good(case) -> bad_inputs.Case:
    good = next(b for b in bad_inputs.BAD_INPUTS if b.name == "good")
    return bad_inputs.Case(case.source, case.launcher, bad_inputs.BadInput(
        "good", good.title, case.bad.kernel, bad_inputs.LAUNCHERS, good.apply, None), "cpu")


@pytest.mark.parametrize("case", _cases())
def test_a_bad_input_is_still_refused_once_the_good_launch_runs_natively(case):
    from adoffload.errors import ToolNotFoundError
    try:
        bad_input_sources.built(case.source.name)
    except ToolNotFoundError as exc:
        pytest.skip(f"{case.source.name}: {exc}")
    good = _good(case)
    for _ in range(2):                                   # the second launch of the signature makes its entry
        assert bad_inputs.run_case(good) == ""
    launched = totals()[0]
    assert bad_inputs.run_case(good) == ""
    assert totals()[0] == launched + 1, "the good launch did not run through a native entry"
    before = totals()
    problem = bad_inputs.run_case(case)
    after = totals()
    assert not problem, f"{case.id}: {problem}"
    if case.bad.fault:           # the arguments are right: the entry launches, and raises the kernel's error
        assert after[0] > before[0], "the faulting launch did not run natively"
    else:                        # wrong arguments: an entry saw them and gave them to the Python path
        assert after[1] > before[1], "no native entry saw the bad launch"


@pytest.mark.parametrize("variant,param,bad,expected", BAD, ids=[f"{v}-{p}-{b}" for v, p, b, _ in BAD])
def test_a_misshapen_shadow_is_refused_after_native_launches(variant, param, bad, expected):
    kernel = VARIANTS[variant]()
    rng = np.random.default_rng(1)
    for _ in range(2):
        call(kernel, arguments(kernel, rng))
    has_entry = kernel._last_plan.native is not None
    assert has_entry or kernel._last_plan.native_why_not is not None
    values = arguments(kernel, rng)
    view, buffer = guarded(bad)
    values[param] = view
    before = {name: np.copy(v) for name, v in values.items()}
    fallbacks = totals()[1]
    with pytest.raises(ShapeError, match=f"parameter '{param}'"):
        call(kernel, values)
    assert (buffer[view.size:] == 12345.0).all(), "memory past the shadow was written"
    for name, value in values.items():
        np.testing.assert_array_equal(value, before[name], err_msg=f"'{name}' changed: the kernel ran")
    if has_entry:
        assert totals()[1] > fallbacks, "the entry did not see the launch"
