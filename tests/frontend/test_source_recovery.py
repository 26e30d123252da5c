"""Kernels whose source Python does not keep in a file: ``python -c`` (recovered from the command
line), ``exec`` of registered text (through linecache), and the places where nothing can be recovered
(exec of a bare string, standard input), which must say plainly what to do."""
from __future__ import annotations

import linecache
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import adoffload as ado
from adoffload.errors import UnsupportedConstructError

ROOT = Path(__file__).resolve().parents[2]
KERNEL = '''
import numpy as np, adoffload as ado
@ado.kernel
def scale(a: ado.f64, x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    y[i] = a * x[i] * x[i]
x = np.arange(4.0); y = np.zeros(4); dx = np.zeros(4)
scale(2.0, x, y, grid=4)
ado.vjp(scale, wrt=["x"])(2.0, x, y, d_x=dx, d_y=np.ones(4), grid=4)
print(y.tolist(), dx.tolist())
'''


def _python(*args, stdin=None):
    return subprocess.run([sys.executable, *args], input=stdin, capture_output=True, text=True, cwd=ROOT,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu"}, timeout=300)


def test_a_kernel_in_python_dash_c_compiles_and_differentiates():
    run = _python("-c", KERNEL)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[0.0, 2.0, 8.0, 18.0] [0.0, 4.0, 8.0, 12.0]"


def test_a_kernel_read_from_standard_input_says_what_to_do():
    run = _python("-", stdin=KERNEL)
    assert run.returncode != 0
    assert "UnsupportedConstructError" in run.stderr and "standard input" in run.stderr and "in a file" in run.stderr


_EXEC_SOURCE = '''
@ado.kernel
def triple(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    y[i] = 3.0 * x[i]
'''


def test_exec_of_a_bare_string_names_linecache_as_the_way_out():
    with pytest.raises(UnsupportedConstructError, match=r"exec or compile.*linecache\.cache"):
        exec(_EXEC_SOURCE, {"ado": ado})


def test_exec_of_text_registered_with_linecache_works():
    name = "<kernels built at run time>"
    linecache.cache[name] = (len(_EXEC_SOURCE), None, _EXEC_SOURCE.splitlines(True), name)
    namespace = {"ado": ado}
    exec(compile(_EXEC_SOURCE, name, "exec"), namespace)
    y = np.zeros(3)
    namespace["triple"](np.arange(3.0), y, grid=3)
    np.testing.assert_array_equal(y, [0.0, 3.0, 6.0])
