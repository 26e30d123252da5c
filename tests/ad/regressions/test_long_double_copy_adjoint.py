"""Found probing C written as outside users write it: ``long double`` heap scratch copied with
``memcpy``/``memmove`` or grown with ``realloc`` crashed the process in reverse mode (glibc:
"free(): invalid next size", "corrupted size vs. prev_size"). The adjoint of a copy,
``adoffload.copy_adjoint.x86_fp80``, counted the copied elements as ``nbytes / 10`` (the type's
bits / 8) but stepped through them with GEPs over ``x86_fp80``, 16 bytes apart: it read and wrote
60% past the end of the shadow blocks. Fixed: the element count divides by the type's allocation
size (a GEP off null). The cases run in a child process, which the heap corruption killed.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from adoffload.testing.clang import clang_available

pytestmark = pytest.mark.skipif(not clang_available(), reason="the C source is compiled with the ziglang wheel's clang")

SOURCE = r"""
#include <stdlib.h>
#include <string.h>
double ld_copy(const double *x, int n) {            /* sum (i + 1) x_i^2, through a long double copy */
    long double *a = malloc(n * sizeof(long double)), *b = malloc(n * sizeof(long double));
    for (int i = 0; i < n; i++) a[i] = (long double)x[i] * x[i];
    memcpy(b, a, n * sizeof(long double));
    double s = 0; for (int i = 0; i < n; i++) s += (double)b[i] * (i + 1);
    free(a); free(b);
    return s;
}
double ld_move(const double *x, int n) {            /* x_0^2 + sum (i + 2) x_i^2 */
    long double *a = malloc((n + 1) * sizeof(long double));
    for (int i = 0; i < n; i++) a[i] = (long double)x[i] * x[i];
    memmove(a + 1, a, n * sizeof(long double));
    double s = 0; for (int i = 0; i <= n; i++) s += (double)a[i] * (i + 1);
    free(a);
    return s;
}
double ld_realloc(const double *x, int n) {         /* x_0^2 + 2 x_1^2 + sum_{i >= 2} (i + 1) x_i */
    long double *a = malloc(2 * sizeof(long double));
    for (int i = 0; i < 2; i++) a[i] = (long double)x[i] * x[i];
    a = realloc(a, n * sizeof(long double));
    for (int i = 2; i < n; i++) a[i] = (long double)x[i];
    double s = 0; for (int i = 0; i < n; i++) s += (double)a[i] * (i + 1);
    free(a);
    return s;
}
"""

CHILD = r"""
import json, sys
import numpy as np
import adoffload as ado
from adoffload import enzyme as ez
module = ado.from_c(sys.argv[1], opt=int(sys.argv[2]))
x = np.array([0.5, -1.0, 2.0, 1.5, 0.3])
out = {}
for name in ("ld_copy", "ld_move", "ld_realloc"):
    g = np.zeros(5)
    ez.autodiff(ez.Reverse, module[name], ez.Duplicated(x.copy(), g), 5)
    tangent = ez.autodiff(ez.Forward, module[name], ez.Duplicated(x.copy(), np.ones(5)), 5)
    out[name] = [g.tolist(), tangent]
print(json.dumps(out))
"""


@pytest.mark.parametrize("opt", [0, 2])
def test_long_double_heap_copies_in_reverse_mode(opt):
    root = Path(__file__).resolve().parents[3]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]))
    run = subprocess.run([sys.executable, "-c", CHILD, SOURCE, str(opt)], capture_output=True, text=True,
                         env=env, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    x = np.array([0.5, -1.0, 2.0, 1.5, 0.3])
    i = np.arange(5)
    expected = {"ld_copy": 2 * x * (i + 1), "ld_move": 2 * x * (i + 2) + np.r_[2 * x[0], 0, 0, 0, 0],
                "ld_realloc": np.r_[2 * x[0], 4 * x[1], 3.0, 4.0, 5.0]}
    for name, gradient in expected.items():
        np.testing.assert_allclose(got[name][0], gradient, rtol=1e-15, err_msg=name)
        assert got[name][1] == pytest.approx(gradient.sum(), rel=1e-15), name       # forward: J . ones
