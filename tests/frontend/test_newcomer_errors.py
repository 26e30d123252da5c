"""Errors a newcomer meets in the first hour say what to do (issue 14, item 11)."""
from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

import adoffload as ado

TABLE = np.arange(4.0)


@pytest.mark.parametrize("fn, spelled, ado_name", [(np.sin, "numpy.sin", "ado.sin"), (math.sin, "math.sin", "ado.sin"),
                                                   (np.arctan2, "numpy.arctan2", "ado.atan2"),
                                                   (math.sqrt, "math.sqrt", "ado.sqrt")])
def test_numpy_and_math_functions_point_to_ado(fn, spelled, ado_name):
    two_arguments = fn is np.arctan2
    with pytest.raises(ado.UnsupportedConstructError) as info:
        @ado.kernel
        def k(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
            i = ado.tid()
            y[i] = fn(x[i], 1.0) if two_arguments else fn(x[i])
    message = str(info.value)
    assert f"{spelled} cannot run inside a kernel; use {ado_name}(...)" in message
    assert f"{__file__}:" in message


def test_a_captured_numpy_array_says_to_pass_it_as_a_parameter():
    with pytest.raises(ado.KernelTypeError) as info:
        @ado.kernel
        def k(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
            i = ado.tid()
            y[i] = x[i] * TABLE[i]
    message = str(info.value)
    assert "'TABLE' is a numpy array" in message and "pass it as a parameter" in message
    assert "TABLE: ado.In[ado.f64, 1]" in message and f"{__file__}:" in message


@ado.kernel
def positive(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    assert x[i] > 0.0, "x must be positive"
    y[i] = ado.sqrt(x[i])


def test_a_failed_assert_keeps_the_users_message():
    with pytest.raises(ado.KernelFaultError) as info:
        positive(np.array([1.0, -1.0]), np.zeros(2), grid=2)
    message = str(info.value)
    assert "x must be positive" in message and f"of {__file__}" in message


def test_a_bad_array_rank_is_an_ado_error_with_file_and_line(tmp_path):
    """Evaluated when the def runs (no ``from __future__ import annotations`` in that file)."""
    import importlib.util
    path = tmp_path / "rank_four.py"
    path.write_text("import adoffload as ado\n\n\n@ado.kernel\ndef k(x: ado.In[ado.f64, 4]):\n    pass\n")
    spec = importlib.util.spec_from_file_location("rank_four", path)
    with pytest.raises(ado.KernelTypeError) as info:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
    assert "ado.In[ado.f64, 4]: arrays have 1, 2 or 3 dimensions, got ndim 4" in str(info.value)
    assert (info.value.filename, info.value.line) == (str(path), 5)


def test_a_bad_array_rank_in_lazy_annotations_is_located_too():
    with pytest.raises(ado.KernelTypeError, match="got ndim 4") as info:
        @ado.kernel
        def k(x: ado.In[ado.f64, 4]):
            pass
    assert info.value.filename == __file__


def test_a_bad_element_type_is_an_ado_error():
    with pytest.raises(ado.KernelTypeError, match=r"ado.Out\[<class 'float'>\]: the array element type"):
        ado.Out[float]


def test_default_parameter_values_are_refused_at_definition():
    with pytest.raises(ado.UnsupportedConstructError, match="cannot have default values") as info:
        @ado.kernel
        def k(x: ado.In[ado.f64], y: ado.Out[ado.f64], a: ado.f64 = 2.0):
            i = ado.tid()
            y[i] = a * x[i]
    assert info.value.filename == __file__


def test_a_missing_grid_says_so():
    with pytest.raises(ado.GridError, match="kernel 'positive' needs grid="):
        positive(np.ones(2), np.zeros(2))


def test_the_installed_command_calls_itself_adoffload():
    from adoffload.tools.cli import parser
    assert parser().format_usage().startswith("usage: adoffload ")
    out = subprocess.run([sys.executable, "-m", "adoffload", "--help"], capture_output=True, text=True).stdout
    assert out.startswith("usage: adoffload ") and "python -m" not in out
