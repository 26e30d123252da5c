"""Differential fuzzing in CI: a bounded hypothesis run of adoffload.testing.fuzz.

Longer runs: ``python -m adoffload.testing.fuzz --cases 500 --seed 1``.
"""
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from adoffload.testing import fuzz
from adoffload.testing.generator import generate
from adoffload.testing.reference import ReferenceKernel


@settings(max_examples=30, deadline=None, derandomize=True, print_blob=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(rng=st.randoms(use_true_random=False), seed=st.integers(0, 2**31 - 1))
def test_random_kernels_match_the_reference_and_their_derivatives_agree(rng, seed, tmp_path):
    kernel = generate(rng)
    result = fuzz.check_case(kernel, seed, tmp_path)
    assert result.ok, "\n".join([kernel.source] + result.failures)
    assert result.checks["values"] == 1


def test_the_fuzzer_catches_a_wrong_compiled_result(tmp_path, monkeypatch):
    """The harness is not vacuous: a compiled kernel that is off by one ulp-free amount fails."""
    kernel = generate(random.Random(5))
    real = fuzz.run_compiled

    def off_by_a_bit(compiled, inputs):
        outputs = real(compiled, inputs)
        outputs["out"] = outputs["out"] + 1e-6
        return outputs

    monkeypatch.setattr(fuzz, "run_compiled", off_by_a_bit)
    result = fuzz.check_case(kernel, 1, tmp_path)
    assert any(f.startswith("values: out differs") for f in result.failures)


def test_reference_records_branches_and_kinks():
    source = ("def k(x: ado.In[ado.f64], out: ado.Out[ado.f64]):\n"
              "    i = ado.tid()\n"
              "    if x[i] > 0.0:\n"
              "        out[i] = ado.abs(x[i] - 1.0)\n"
              "    else:\n"
              "        out[i] = ado.max(x[i], -0.5)\n")
    ref = ReferenceKernel(source, "k")
    x, out = np.array([2.0, -1.0]), np.zeros(2)
    trace = ref.run([x, out], 2)
    np.testing.assert_array_equal(out, [1.0, -0.5])
    assert trace == [("branch", True), ("abs", True), ("branch", False), ("max", False)]


def test_command_line_reports_cases_and_failures(capsys):
    assert fuzz.main(["--cases", "2", "--seed", "11"]) == 0
    text = capsys.readouterr().out
    assert "cases tried: 2" in text and "failures found: 0" in text
